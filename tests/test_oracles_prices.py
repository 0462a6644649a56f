"""Independent oracles for prices and purchases: AWS reserved rates with upfront fees, GCP
committed-use rates from raw SKUs, and the reserve portfolio's cost.

The expected values come from the raw fixture documents (read here with ``json``, not with the
package's parsers) and the providers' published rules, or from ``tests/oracles.py``.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from oracles import effective_hourly, horizon_unit_cost
from test_gcp import fake_gcp  # noqa: F401  (fixture: a local Cloud Billing server)

from ptplan.providers.aws_prices import parse_price_item
from ptplan.providers.gcp import fetch_gcp
from ptplan.reservations.check import evaluate
from ptplan.reservations.milp import solve
from ptplan.reservations.problem import DemandClass, Problem, ProductRow

DATA = Path(__file__).resolve().parent / "data"


# ---- AWS reserved rates ------------------------------------------------------------------------

def _raw_reserved(item: dict) -> list[tuple[int, str, str, float, float]]:
    """(years, class, option, hourly, upfront) of every Reserved term, read from the raw item:
    ``Hrs`` dimensions are the hourly fee, ``Quantity`` the upfront fee."""
    out = []
    for term in item["terms"].get("Reserved", {}).values():
        ta = term["termAttributes"]
        years = int(ta["LeaseContractLength"][0])
        hourly = upfront = 0.0
        for dim in term["priceDimensions"].values():
            usd = float(dim["pricePerUnit"]["USD"])
            if dim["unit"] == "Hrs":
                hourly += usd
            elif dim["unit"] == "Quantity":
                upfront += usd
        out.append((years, ta["OfferingClass"], ta["PurchaseOption"], hourly, upfront))
    return out


def test_aws_reserved_rates_equal_hourly_plus_upfront_over_the_term() -> None:
    """Every reserved term of the fixture items: effective $/h = hourly + upfront /
    (years × 8,760 h), the upfront and the recurring part kept as given."""
    items = json.loads((DATA / "aws" / "price_list.json").read_text(encoding="utf-8"))
    checked = 0
    for item in items:
        _, rates, _ = parse_price_item(json.dumps(item), "2026-12-01", [])
        if not rates:
            continue
        got = {(r.term_years, r.offering_class, r.purchase_option): r for r in rates}
        for years, klass, option, hourly, upfront in _raw_reserved(item):
            r = got[(years, klass, option)]
            assert r.usd_per_hour == pytest.approx(effective_hourly(hourly, upfront, years),
                                                   abs=1e-6)
            assert r.upfront_usd == pytest.approx(upfront, abs=0.005)
            assert r.recurring_usd_per_hour == pytest.approx(hourly, abs=1e-6)
            checked += 1
    assert checked >= 36


def test_aws_all_upfront_by_hand() -> None:
    """p5.48xlarge 1-year standard All Upfront: 55.04 × 0.65 × 8,760 = $313,397.76 upfront and
    nothing hourly; effective 313,397.76 / 8,760 = $35.776/h (tests/data/aws/SOURCE.md)."""
    items = json.loads((DATA / "aws" / "price_list.json").read_text(encoding="utf-8"))
    p5 = next(i for i in items if i["product"]["attributes"]["instanceType"] == "p5.48xlarge"
              and i["product"]["attributes"].get("marketoption", "OnDemand") == "OnDemand"
              and i["terms"].get("Reserved"))
    _, rates, _ = parse_price_item(json.dumps(p5), "x", [])
    r = next(r for r in rates if (r.term_years, r.offering_class, r.purchase_option)
             == (1, "standard", "All Upfront"))
    assert r.upfront_usd == pytest.approx(313397.76, abs=0.01)
    assert r.recurring_usd_per_hour == 0.0
    assert r.usd_per_hour == pytest.approx(35.776, abs=1e-6)


# ---- GCP committed use -------------------------------------------------------------------------

def _sku_price(desc: str) -> float:
    skus = json.loads((DATA / "gcp" / "skus.json").read_text(encoding="utf-8"))
    sku = next(s for s in skus if s["description"] == desc)
    unit = sku["pricingInfo"][0]["pricingExpression"]["tieredRates"][0]["unitPrice"]
    return int(unit["units"]) + unit["nanos"] / 1e9


@pytest.mark.parametrize(("years", "suffix"), [(1, "1 Year"), (3, "3 Years")])
def test_gcp_commitment_is_the_sum_of_its_resource_commitments(fake_gcp, years, suffix) -> None:  # noqa: F811
    """a3-highgpu-8g (208 vCPU, 1,872 GiB, 8 H100; Google's machine table) in us-central1:
    resource-based CUD = 208 × A3 Cpu + 1,872 × A3 Ram + 8 × H100 commitment SKUs, no upfront."""
    want = (208 * _sku_price(f"Commitment v1: A3 Cpu in Americas for {suffix}")
            + 1872 * _sku_price(f"Commitment v1: A3 Ram in Americas for {suffix}")
            + 8 * _sku_price(f"Commitment v1: Nvidia H100 80GB GPU in Americas for {suffix}"))
    pull = fetch_gcp(endpoint=fake_gcp.url)
    cud = next(r for r in pull.reserved_rates if r.instance_type == "a3-highgpu-8g"
               and r.region == "us-central1" and r.term_years == years)
    assert cud.usd_per_hour == pytest.approx(want, abs=1e-5)
    assert cud.upfront_usd == 0.0


# ---- reserve portfolio -------------------------------------------------------------------------

def _active(weeks: int, years: int) -> np.ndarray:
    """Share of each week inside a term of years × 8,760 h starting now."""
    term = years * 8760.0
    return np.array([min(1.0, max(0.0, (term - 168.0 * w) / 168.0)) for w in range(weeks)])


def _problem(weeks: int, demand: list[float], od: float,
             products: list[tuple[int, float, float]]) -> Problem:
    rows = [ProductRow(f"p{i}", 0, years, hourly, upfront, "test", False, _active(weeks, years))
            for i, (years, hourly, upfront) in enumerate(products)]
    return Problem(name="t", weeks=weeks, scenarios=["s"], weights=[1.0], multipliers=[1.0],
                   prob=np.array([1.0]), keys=[("lab", "r1", "h100x8")], on_demand=[od],
                   classes=[DemandClass(0, None, np.array([demand]))], products=rows,
                   existing_nodes=np.zeros((1, weeks)), existing_cost_usd=0.0, risk=None)


def _reference_cost(weeks: int, demand: list[float], od: float,
                    products: list[tuple[int, float, float]], counts: tuple[int, ...]) -> float:
    """Each bought node costs its horizon share (oracles.horizon_unit_cost) and covers one
    node in every week of its term (a share of the week it ends in); the rest of each week's
    average demand runs on on-demand for 168 h."""
    cost = sum(n * horizon_unit_cost(weeks, y, h, u)
               for n, (y, h, u) in zip(counts, products, strict=True))
    for w, d in enumerate(demand):
        cover = sum(n * _active(weeks, y)[w] for n, (y, _, _) in zip(counts, products,
                                                                      strict=True))
        cost += max(0.0, d - cover) * 168.0 * od
    return cost


PRODUCTS = [(1, 6.0, 0.0), (1, 3.0, 17520.0), (3, 2.0, 52560.0)]
"""1 year at $6/h; 1 year at $3/h + $17,520 upfront (effective $5/h); 3 years at $2/h +
$52,560 upfront (effective $4/h, but only 60 of its 156 weeks fall in the horizon)."""


@pytest.mark.parametrize("weeks", [52, 60])
def test_product_horizon_cost_by_hand(weeks: int) -> None:
    """52 weeks = 8,736 h of a 1-year term: 8,736 × 6 = $52,416; 60 weeks hold the whole
    8,760-h term (52 weeks + 24 h of week 52): 8,760 × (3 + 17,520/8,760) = $43,800."""
    pb = _problem(weeks, [1.0] * weeks, 10.0, PRODUCTS)
    for row, (years, hourly, upfront) in zip(pb.products, PRODUCTS, strict=True):
        assert row.unit_cost_usd == pytest.approx(
            horizon_unit_cost(weeks, years, hourly, upfront), rel=1e-12)
    assert pb.products[0].unit_cost_usd == pytest.approx(
        52416.0 if weeks == 52 else 8760 * 6.0, rel=1e-12)
    if weeks == 60:
        assert pb.products[1].unit_cost_usd == pytest.approx(43800.0, rel=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_portfolio_cost_and_purchase_against_the_reference(seed: int) -> None:
    """Random weekly demand over 60 weeks: the evaluator's cost of every purchase equals the
    reference's, and the MILP buys a purchase the reference enumeration finds cheapest."""
    rng = np.random.default_rng(seed)
    weeks = 60
    demand = [float(x) for x in rng.uniform(0, 3.5, weeks)]
    od = float(rng.uniform(7, 12))
    pb = _problem(weeks, demand, od, PRODUCTS)
    ranges = [range(0, 5)] * len(PRODUCTS)
    best = min((_reference_cost(weeks, demand, od, PRODUCTS, c), c)
               for c in itertools.product(*ranges))
    for c in itertools.islice(itertools.product(*ranges), 0, None, 7):
        assert float(evaluate(pb, list(c)).total[0]) == pytest.approx(
            _reference_cost(weeks, demand, od, PRODUCTS, c), rel=1e-9)
    sol = solve(pb, "highs", 60.0)
    got = _reference_cost(weeks, demand, od, PRODUCTS, tuple(sol.counts))
    assert got == pytest.approx(best[0], rel=1e-7)
    assert sol.objective == pytest.approx(best[0], rel=1e-7)
