"""Spend commitments (Savings Plans, flexible CUDs) and laddered purchases in ``ptplan reserve``:
cases with closed-form answers, the providers' order of application, and brute force.

Prices: the reserve test catalog (tests/data/portfolios/catalog.yaml): p5.48xlarge on demand
55.04 $/h, 1-year reservation 35.776 $/h (35 % off); g6e.xlarge 1.861 $/h. A year is 52 weeks
of 168 h = 8,736 h inside a 52-week horizon.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import ROOT, assert_one_line
from typer.testing import CliRunner

from ptplan.cli.app import app
from ptplan.core.errors import InputError
from ptplan.core.yamlio import validate
from ptplan.providers.registry import load_catalog
from ptplan.reservations.build import build_problem
from ptplan.reservations.check import evaluate, objective
from ptplan.reservations.portfolio import Portfolio
from ptplan.reservations.problem import Risk
from ptplan.reservations.purchase import reserve

DATA = ROOT / "tests" / "data" / "portfolios"
CATALOG = str(DATA / "catalog.yaml")
P5 = {"provider": "aws", "region": "us-east-1", "instance_type": "p5.48xlarge"}
P5W = {"provider": "aws", "region": "us-west-2", "instance_type": "p5.48xlarge",
       "on_demand_usd_per_hour": 55.04}
G6E = {"provider": "aws", "region": "us-east-1", "instance_type": "g6e.xlarge"}
OD_P5, R1_P5, OD_G6E = 55.04, 35.776, 1.861
H52 = 52 * 168.0
runner = CliRunner()


def solve(data: dict[str, Any], base: Path = DATA, ladder: str | None = None) -> Any:
    pf = validate(Portfolio, data, "portfolio")
    return reserve(pf, load_catalog(CATALOG), base, timings=False, ladder=ladder)


def problem(data: dict[str, Any], base: Path = DATA, ladder: str | None = None) -> Any:
    pf = validate(Portfolio, data, "portfolio")
    return build_problem(pf, load_catalog(CATALOG), base, ladder=ladder)


def rates_file(tmp_path: Path, rows: list[tuple[str, int, str, str, float]]) -> str:
    path = tmp_path / "sp-rates.json"
    path.write_text(json.dumps({"source": "test", "as_of": "2026-12-01", "rates": [
        {"plan_type": t, "term_years": y, "payment_option": "No Upfront", "region": r,
         "instance_type": i, "usd_per_hour": u} for t, y, r, i, u in rows]}))
    return str(path)


# ---- closed-form answers ---------------------------------------------------------------------

def test_instance_savings_plan_covers_exactly_the_family_demand() -> None:
    """3 p5 nodes all year; an EC2 Instance SP at 50 % off is the cheapest way: commit
    3 × 27.52 = 82.56 $/h (a 1-year RI at 35 % off and a Compute SP at 30 % off lose)."""
    r = solve({"demand": [{**P5, "nodes": 3}],
               "products": [{"name": "ri", **P5, "term_years": 1}],
               "commitments": [
                   {"name": "isp", "kind": "ec2_instance_savings_plan", "region": "us-east-1",
                    "family": "p5", "term_years": 1, "discount": 0.5},
                   {"name": "csp", "kind": "compute_savings_plan", "term_years": 1}]})
    rep = r.report
    assert [p["count"] for p in rep["purchases"]] == [0]
    got = {c["commitment"]: c["usd_per_hour"] for c in rep["commitments"]}
    assert got == {"isp": pytest.approx(82.56), "csp": 0.0}
    assert float(rep["expected_total_cost_usd"]) == pytest.approx(82.56 * H52, abs=0.01)
    assert rep["commitments"][0]["expected_utilization"] == pytest.approx(1.0)


def test_providers_order_reservations_then_instance_then_compute(tmp_path: Path) -> None:
    """p5 3 nodes, g6e 10 nodes; bought: 1 p5 RI, an Instance SP of 27.52 $/h (p5 at 50 %
    off: one node) and a Compute SP of 20 $/h whose rates give g6e 30 % off (1.3027 $/h) and
    p5 20 % off (44.032 $/h). Billed: RI → p5 node 1; Instance SP → p5 node 2; Compute SP →
    g6e first (the higher discount): 10 × 1.3027 = 13.027 $/h, then the remaining 6.973 $/h
    → 6.973 / 44.032 = 0.158362 of p5 node 3; 0.841638 p5 nodes stay on demand."""
    rf = rates_file(tmp_path, [("Compute", 1, "us-east-1", "p5.48xlarge", 44.032),
                               ("Compute", 1, "us-east-1", "g6e.xlarge", 1.3027)])
    pb = problem({"demand": [{**P5, "nodes": 3}, {**G6E, "nodes": 10}],
                  "products": [{"name": "ri", **P5, "term_years": 1}],
                  "commitments": [
                      {"name": "csp", "kind": "compute_savings_plan", "term_years": 1,
                       "rates_file": rf, "step_usd_per_hour": 0.001},
                      {"name": "isp", "kind": "ec2_instance_savings_plan",
                       "region": "us-east-1", "family": "p5", "term_years": 1,
                       "discount": 0.5}]})
    assert [r.name for r in pb.spend] == ["isp", "csp"]  # instance SPs are applied first
    ev = evaluate(pb, [1], [27520, 20000])
    p5 = next(j for j, c in enumerate(pb.classes) if pb.keys[c.key][2] == "p5.48xlarge")
    g6e = 1 - p5
    assert ev.used[p5][0, 0] == pytest.approx(1.0)
    assert ev.covered[g6e][0, 0] == pytest.approx(10.0)
    third = (20.0 - 13.027) / 44.032
    assert ev.covered[p5][0, 0] == pytest.approx(1.0 + third)
    assert ev.on_demand[p5][0, 0] == pytest.approx(1.0 - third)
    weekly = R1_P5 + 27.52 + 20.0 + (1.0 - third) * OD_P5
    assert ev.total[0] == pytest.approx(weekly * H52)


def test_flexible_cud_covers_only_the_vm_part() -> None:
    """A GCP flexible CUD (28 % off, 1 year) on a machine whose vCPU + memory part is 20 %
    of its 10 $/h price: one node-hour consumes 2 × 0.72 = 1.44 $ of commitment and saves
    2 $ of on-demand; the GPU part (8 $/h) is still billed on demand."""
    gcp = {"provider": "gcp", "region": "us-central1", "instance_type": "a3-highgpu-8g",
           "on_demand_usd_per_hour": 10.0}
    r = solve({"demand": [{**gcp, "nodes": 2}], "products": [],
               "commitments": [{"name": "flex", "kind": "flexible_cud", "term_years": 1,
                                "eligible_share": 0.2, "discount": 0.28}]})
    c = r.report["commitments"][0]
    assert c["usd_per_hour"] == pytest.approx(2 * 1.44)
    assert c["discount_min"] == pytest.approx(0.28)
    total = (2 * 1.44 + 2 * 8.0) * H52
    assert float(r.report["expected_total_cost_usd"]) == pytest.approx(total, abs=0.01)


def test_instance_savings_plan_stays_in_its_region_and_family() -> None:
    """An Instance SP for p5 in us-east-1 never covers p5 in us-west-2 or g6e."""
    pb = problem({"demand": [{**P5, "nodes": 1}, {**P5W, "nodes": 1}, {**G6E, "nodes": 1}],
                  "products": [],
                  "commitments": [{"name": "isp", "kind": "ec2_instance_savings_plan",
                                   "region": "us-east-1", "family": "p5", "term_years": 1}]})
    assert [pb.keys[k] for k in pb.spend[0].rates] == [tuple(P5.values())]


# ---- laddering --------------------------------------------------------------------------------

GROWING = [1.0] * 13 + [2.0] * 13 + [3.0] * 13 + [4.0] * 13


def test_growing_demand_ladders_instead_of_buying_the_peak_now() -> None:
    """Demand 1, 2, 3, 4 p5 nodes in the four quarters; a 1-year RI breaks even at 65 %.
    Buying now only: node k is used (5 − k)/4 of the year, so 2 nodes (100 %, 75 %) pay and the
    3rd (50 %) does not. Quarterly: one node each quarter, every one used fully; this quarter's
    answer is 1, and the horizon pays R1 × 168 × (52 + 39 + 26 + 13) weeks."""
    data = {"demand": [{**P5, "weekly_nodes": GROWING}],
            "products": [{"name": "ri", **P5, "term_years": 1}]}
    now = solve(data)
    assert [p["count"] for p in now.report["purchases"]] == [2]
    lad = solve(data, ladder="quarterly")
    rep = lad.report
    assert [p["count"] for p in rep["purchases"]] == [1]
    later = {p["product"]: p["count"] for p in rep["later_purchases"]}
    assert later == {"ri@w13": 1, "ri@w26": 1, "ri@w39": 1}
    assert float(rep["expected_total_cost_usd"]) == pytest.approx(
        R1_P5 * 168 * (52 + 39 + 26 + 13), abs=0.01)
    assert float(rep["expected_total_cost_usd"]) < float(now.report["expected_total_cost_usd"])


def test_ladder_buys_when_held_commitments_expire() -> None:
    """2 p5 nodes all year; 2 held until week 26. Now-only: a 1-year node bought now is used
    half the year (< 65 %): buy none. Quarterly: buy 2 in week 26."""
    data = {"demand": [{**P5, "nodes": 2}],
            "existing": [{**P5, "count": 2, "usd_per_hour": 30.0, "expires_week": 26}],
            "products": [{"name": "ri", **P5, "term_years": 1}]}
    assert [p["count"] for p in solve(data).report["purchases"]] == [0]
    rep = solve(data, ladder="quarterly").report
    assert [p["count"] for p in rep["purchases"]] == [0]
    later = {p["product"]: p["count"] for p in rep["later_purchases"]}
    assert later == {"ri@w13": 0, "ri@w26": 2, "ri@w39": 0}


def test_ladder_of_spend_commitments() -> None:
    """Growing demand again, covered by an Instance SP at 50 % off: 27.52 $/h more each
    quarter."""
    rep = solve({"demand": [{**P5, "weekly_nodes": GROWING}], "products": [],
                 "commitments": [{"name": "isp", "kind": "ec2_instance_savings_plan",
                                  "region": "us-east-1", "family": "p5", "term_years": 1,
                                  "discount": 0.5}]}, ladder="quarterly").report
    assert rep["commitments"][0]["usd_per_hour"] == pytest.approx(27.52)
    later = {p["commitment"]: p["usd_per_hour"] for p in rep["later_purchases"]}
    assert later == {k: pytest.approx(27.52) for k in ("isp@w13", "isp@w26", "isp@w39")}


# ---- brute force ------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(6))
def test_brute_force_with_commitments(seed: int) -> None:
    """Small random portfolios (2 scenarios, 6 weeks, p5 in two regions and g6e, spot-ok or
    not, a held RI): the MILP's purchase of RIs, an Instance SP and a Compute SP (coarse steps)
    costs, billed in the providers' order, the least of every purchase enumerated (expected cost,
    and with a CVaR term)."""
    rng = np.random.default_rng(100 + seed)
    weeks = 6

    def rows() -> list[dict[str, Any]]:
        return [{**P5, "weekly_nodes": [float(x) for x in rng.integers(0, 4, weeks)]},
                {**P5W, "weekly_nodes": [float(x) for x in rng.uniform(0, 2, weeks)]},
                {**G6E, "weekly_nodes": [float(x) for x in rng.uniform(0, 20, weeks)],
                 "spot_ok": bool(seed % 2)}]

    data = {
        "horizon_weeks": weeks,
        "scenarios": [{"name": "a", "weight": 1.0, "demand": rows()},
                      {"name": "b", "weight": float(rng.uniform(0.3, 2.0)), "demand": rows()}],
        "existing": [{**P5, "count": 1, "usd_per_hour": 30.0,
                      "expires_week": int(rng.integers(1, weeks))}],
        "products": [{"name": "ri", **P5, "term_years": 1,
                      "usd_per_hour": float(rng.uniform(0.5, 0.8) * OD_P5)}],
        "commitments": [
            {"name": "isp", "kind": "ec2_instance_savings_plan", "region": "us-east-1",
             "family": "p5", "term_years": 1, "discount": float(rng.uniform(0.3, 0.6)),
             "step_usd_per_hour": 20.0},
            {"name": "csp", "kind": "compute_savings_plan", "term_years": 1,
             "discount": float(rng.uniform(0.1, 0.4)), "step_usd_per_hour": 15.0}],
    }
    pf = validate(Portfolio, data, "portfolio")
    for risk in (None, Risk(0.8, 0.7)):
        r = reserve(pf, load_catalog(CATALOG), DATA, risk=risk, timings=False)
        pb = r.problem
        rep = r.report
        steps = [round(c["usd_per_hour"] / c["step_usd_per_hour"]) for c in rep["commitments"]]
        assert r.counts[0] < 4 and max(steps) < 8  # the MILP's answer is among those enumerated
        best = min(objective(pb, evaluate(pb, [n], list(s)))
                   for n in range(4) for s in itertools.product(range(8), range(8)))
        got = objective(pb, evaluate(pb, r.counts, steps))
        assert got == pytest.approx(best, rel=1e-9, abs=1e-6)
        if risk is None:
            assert float(rep["expected_total_cost_usd"]) == pytest.approx(got, abs=0.01)


# ---- bad input --------------------------------------------------------------------------------

def test_rates_out_of_ratio_are_refused(tmp_path: Path) -> None:
    """An Instance SP (50 % off p5) before a Compute SP whose file prices p5 and p5 in
    another region fine, but whose 1- and 3-year plans disagree in ratio across types."""
    rf = rates_file(tmp_path, [("Compute", 1, "us-east-1", "p5.48xlarge", 44.0),
                               ("Compute", 1, "us-east-1", "g6e.xlarge", 1.3),
                               ("Compute", 3, "us-east-1", "p5.48xlarge", 30.0),
                               ("Compute", 3, "us-east-1", "g6e.xlarge", 1.2)])
    data = {"demand": [{**P5, "nodes": 1}, {**G6E, "nodes": 1}], "products": [],
            "commitments": [{"name": "c1", "kind": "compute_savings_plan", "term_years": 1,
                             "rates_file": rf},
                            {"name": "c3", "kind": "compute_savings_plan", "term_years": 3,
                             "rates_file": rf}]}
    with pytest.raises(InputError, match="c3 and c1: their rates are not in one ratio"):
        problem(data)


def one_error(res: Any) -> None:
    """Exactly one ``error:`` line (progress lines may precede it on stderr), no traceback."""
    assert "Traceback" not in res.output
    errors = [line for line in res.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, res.stderr
    assert_one_line(errors[0])


@pytest.mark.parametrize(("commitment", "needle"), [
    ({"kind": "ec2_instance_savings_plan", "term_years": 1}, "needs region and family"),
    ({"kind": "compute_savings_plan", "term_years": 1, "region": "us-east-1"},
     "apply to ec2_instance_savings_plan only"),
    ({"kind": "compute_savings_plan", "term_years": 2}, "term_years"),
    ({"kind": "flexible_cud", "term_years": 1, "discount": 1.0}, "discount"),
    ({"kind": "compute_savings_plan", "term_years": 1, "eligible_share": 0.5},
     "eligible_share applies to flexible_cud only"),
    ({"kind": "compute_savings_plan", "term_years": 1, "rates_file": "nope.json"},
     "rates_file: cannot read"),
    ({"kind": "savings_plan", "term_years": 1}, "did you mean: compute_savings_plan"),
    ({"kind": "compute_savings_plan", "term_years": 1, "discount": 0.3, "rates_file": "x"},
     "give rates_file or discount, not both"),
    ({"kind": "flexible_cud", "term_years": 1, "rates_file": "x"},
     "rates_file holds AWS Savings Plans rates"),
    ({"kind": "compute_savings_plan", "term_years": 1, "step_usd_per_hour": 0},
     "step_usd_per_hour"),
])
def test_bad_commitments_are_one_line_exit_2(tmp_path: Path, commitment: dict[str, Any],
                                             needle: str) -> None:
    pf = tmp_path / "pf.yaml"
    pf.write_text(json.dumps({"demand": [{**P5, "nodes": 1}], "products": [],
                              "commitments": [{"name": "c", **commitment}]}))
    res = runner.invoke(app, ["reserve", str(pf), "--catalog", CATALOG, "--format", "json"])
    assert res.exit_code == 2, res.output
    assert needle in res.output
    one_error(res)


def test_commitment_name_repeating_a_product_is_exit_2(tmp_path: Path) -> None:
    pf = tmp_path / "pf.yaml"
    pf.write_text(json.dumps({"demand": [{**P5, "nodes": 1}],
                              "products": [{"name": "c", **P5, "term_years": 1}],
                              "commitments": [{"name": "c", "kind": "compute_savings_plan",
                                               "term_years": 1}]}))
    res = runner.invoke(app, ["reserve", str(pf), "--catalog", CATALOG])
    assert res.exit_code == 2 and "commitments[0].name 'c' repeats products[0]" in res.output
    one_error(res)


def test_bad_ladder_is_exit_2(tmp_path: Path) -> None:
    pf = tmp_path / "pf.yaml"
    pf.write_text(json.dumps({"demand": [{**P5, "nodes": 1}]}))
    res = runner.invoke(app, ["reserve", str(pf), "--catalog", CATALOG, "--ladder", "monthly"])
    assert res.exit_code == 2 and "--ladder: 'monthly' is not a ladder" in res.output
    one_error(res)


def test_cli_ladder_json_is_deterministic(tmp_path: Path) -> None:
    pf = tmp_path / "pf.yaml"
    pf.write_text(json.dumps({"demand": [{**P5, "weekly_nodes": GROWING}],
                              "products": [{"name": "ri", **P5, "term_years": 1}],
                              "commitments": [{"name": "csp", "kind": "compute_savings_plan",
                                               "term_years": 1, "discount": 0.2}]}))
    args = ["reserve", str(pf), "--catalog", CATALOG, "--format", "json", "--no-timings",
            "--ladder", "quarterly"]
    a, b = runner.invoke(app, args), runner.invoke(app, args)
    assert a.exit_code == 0, a.output
    assert a.stdout == b.stdout
    table = runner.invoke(app, [*args[:4], "--ladder", "quarterly"])
    later = table.stdout.split("later quarters")[1].split("expected cost")[0]
    bought = {p["product"] for p in json.loads(a.stdout)["later_purchases"]
              if p.get("count")}
    assert bought == {"ri@w13", "ri@w26", "ri@w39"}
    for name in ("ri@w13", "ri@w26", "ri@w39"):
        assert name in later
    assert "csp@w13" not in later  # nothing committed there: not listed


@pytest.mark.parametrize("seed", range(4))
def test_brute_force_ladder(seed: int) -> None:
    """26 weeks, so purchases in weeks 0 and 13: random weekly demand in two scenarios, an RI
    and an Instance SP (20 $/h steps) in each purchase week; the MILP's schedule costs the
    least of every schedule enumerated."""
    rng = np.random.default_rng(200 + seed)
    weeks = 26

    def rows() -> list[dict[str, Any]]:
        ramp = np.linspace(0, 3, weeks) + rng.uniform(0, 1, weeks)
        return [{**P5, "weekly_nodes": [float(x) for x in ramp]}]

    data = {"horizon_weeks": weeks,
            "scenarios": [{"name": "a", "weight": 1.0, "demand": rows()},
                          {"name": "b", "weight": 1.0, "demand": rows()}],
            "products": [{"name": "ri", **P5, "term_years": 1,
                          "usd_per_hour": float(rng.uniform(0.5, 0.8) * OD_P5)}],
            "commitments": [{"name": "isp", "kind": "ec2_instance_savings_plan",
                             "region": "us-east-1", "family": "p5", "term_years": 1,
                             "discount": float(rng.uniform(0.2, 0.6)),
                             "step_usd_per_hour": 20.0}]}
    r = solve(data, ladder="quarterly")
    pb = r.problem
    assert [p.buy_week for p in pb.products] == [0, 13]
    rep = r.report
    commits = rep["commitments"] + [p for p in rep["later_purchases"] if "commitment" in p]
    steps = [round(c["usd_per_hour"] / 20.0) for c in commits]
    assert max(r.counts) < 5 and max(steps) < 8  # the MILP's answer is among those enumerated
    best = min(objective(pb, evaluate(pb, list(n), list(s)))
               for n in itertools.product(range(5), repeat=2)
               for s in itertools.product(range(8), repeat=2))
    assert objective(pb, evaluate(pb, r.counts, steps)) == pytest.approx(best, rel=1e-9,
                                                                         abs=1e-6)


@pytest.mark.parametrize("ladder", [None, "quarterly"])
def test_ties_go_to_the_more_flexible_commitment_with_either_solver(ladder: str | None) -> None:
    """A 1-year RI and an EC2 Instance SP at the same 35 % off (the catalog defaults) cost the
    same for 4 steady p5 nodes: the tie goes to the Savings Plan (4 × 35.776 = 143.104 $/h),
    bought now, and HiGHS and CBC print the same purchase."""
    data = {"demand": [{**P5, "nodes": 4}],
            "products": [{"name": "ri", **P5, "term_years": 1}],
            "commitments": [{"name": "isp", "kind": "ec2_instance_savings_plan",
                             "region": "us-east-1", "family": "p5", "term_years": 1}]}
    pf = validate(Portfolio, data, "portfolio")
    reports = []
    for solver in ("highs", "cbc"):
        rep = reserve(pf, load_catalog(CATALOG), DATA, solver=solver, timings=False,
                      ladder=ladder).report
        rep.pop("solver")
        reports.append(rep)
    assert reports[0] == reports[1]
    rep = reports[0]
    assert [p["count"] for p in rep["purchases"]] == [0]
    assert rep["commitments"][0]["usd_per_hour"] == pytest.approx(4 * R1_P5)
    assert all((p["count"] if "count" in p else p["usd_per_hour"]) == 0
               for p in rep["later_purchases"])
