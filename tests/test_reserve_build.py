"""``ptplan.reservations.build``: the purchase problem of a portfolio, worked out by hand.

Written for the surviving mutants of ``reserve/build.py`` (docs/testing.md, mutation testing):
each expected value below is computed here from the portfolio and a small catalog written in
this file (not from the package's costing code). A week is 168 h; the demand of a run of h
hours starting at week s is its share of each week it overlaps (docs/reserve.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import ROOT, example_dict

import ptplan.planner.api as api
from ptplan.core.errors import InfeasibleError, InputError
from ptplan.core.yamlio import validate
from ptplan.planfile.schema import Plan
from ptplan.policies.model import default_policy
from ptplan.providers.base import Catalog, Offer, ReservedRate
from ptplan.reservations.build import _Builder, _run_starts, build_problem, buy_weeks
from ptplan.reservations.portfolio import Portfolio, Project

WEEK = 168.0
A = {"provider": "lab", "region": "r1", "instance_type": "big"}
B = {"provider": "lab", "region": "r1", "instance_type": "small"}


def _offer(itype: str, cap: str, usd: float, zone: str = "r1-a", region: str = "r1") -> Offer:
    return Offer("lab", region, zone, itype, "H100", 8, cap, usd)


def _rate(itype: str, years: int, usd: float, source: str, cls: str = "",
          option: str = "", assumption: bool = False) -> ReservedRate:
    return ReservedRate("lab", "r1", itype, years, usd, source, assumption, cls, option)


# big: on demand 10 $/h (the dearer zone's 12 and a 0 $/h row are not the price), spot 4 $/h;
# small: on demand 2 $/h, no spot; a spot-only type "spotty" in r1; region r2 has "other".
OFFERS = (
    _offer("big", "on_demand", 10.0), _offer("big", "on_demand", 12.0, "r1-b"),
    _offer("big", "on_demand", 0.0, "r1-c"), _offer("big", "spot", 4.0),
    _offer("big", "spot", 0.0, "r1-c"), _offer("big", "reserved", 1.0),
    _offer("small", "on_demand", 2.0), _offer("spotty", "spot", 1.0),
    _offer("other", "on_demand", 3.0, "r2-a", "r2"),
)
# big, 1 year: three options at 6 $/h (the tie goes to the empty class, then the first
# purchase option by name) and a dearer 7 $/h; 3 years: 5 $/h, an assumption.
RATES = (
    _rate("big", 1, 7.0, "dear"), _rate("big", 1, 6.0, "std-no", "standard", "No Upfront"),
    _rate("big", 1, 6.0, "conv-partial", "convertible", "Partial Upfront"),
    _rate("big", 1, 6.0, "conv-all", "convertible", "All Upfront"),
    _rate("big", 3, 5.0, "std-all", "standard", "All Upfront"),
    _rate("big", 3, 5.0, "assumed", "convertible", "Partial Upfront", assumption=True),
)
CATALOG = Catalog("hand", "2026-11-01", OFFERS, reserved_rates=RATES)


def _pf(data: dict[str, Any]) -> Portfolio:
    return validate(Portfolio, data, "portfolio")


def _build(data: dict[str, Any], **kw: Any) -> Any:
    return build_problem(_pf(data), CATALOG, ROOT, **kw)


def _classes(pb: Any) -> list[tuple[str, float | None, list[float]]]:
    return [("/".join(pb.keys[c.key]), c.spot_usd_per_hour, c.nodes[0].tolist())
            for c in pb.classes]


def test_prices_are_the_cheapest_positive_offer_and_the_first_of_tied_rates() -> None:
    b = _Builder(_pf({}), CATALOG, ROOT, default_policy(), "highs")
    key = ("lab", "r1", "big")
    assert b.prices.od[key] == 10.0 and b.prices.spot[key] == 4.0
    assert ("lab", "r1", "spotty") not in b.prices.od
    assert b.prices.known(("lab", "r1", "spotty")) and b.prices.known(key)
    assert not b.prices.known(("lab", "r1", "nothing"))
    picked = {y: b.prices.reserved[(*key, y)].source for y in (1, 3)}
    # sorted by (rate, class, option): "All Upfront" < "Partial Upfront" within
    # "convertible"; "convertible" < "standard" before the option is looked at
    assert picked == {1: "conv-all", 3: "assumed"}
    # an option left empty (a catalog file's rate) sorts before a named one of the same class
    tied = Catalog("hand", "2026-11-01", OFFERS, reserved_rates=(
        _rate("small", 1, 1.5, "named", "convertible", "All Upfront"),
        _rate("small", 1, 1.5, "unnamed", "convertible", "")))
    prices = _Builder(_pf({}), tied, ROOT, default_policy(), "highs").prices
    assert prices.reserved[("lab", "r1", "small", 1)].source == "unnamed"


def test_catalog_products_their_names_and_the_assumption_warning() -> None:
    pb = _build({"horizon_weeks": 4, "demand": [{**A, "nodes": 2}, {**B, "nodes": 1}]})
    assert [(p.name, p.key, p.term_years, p.usd_per_hour, p.upfront_usd, p.source,
             p.assumption, p.active.tolist()) for p in pb.products] == [
        ("lab/r1/big/1y", 0, 1, 6.0, 0.0, "conv-all", False, [1.0] * 4),
        ("lab/r1/big/3y", 0, 3, 5.0, 0.0, "assumed", True, [1.0] * 4)]
    assert pb.warnings == [
        "catalog hand has no reserved rate for lab/r1/small: no product to buy for it "
        "(list products)",
        "some product rates are the catalog's assumed discounts (not quoted prices); give "
        "products with your quoted usd_per_hour before buying"]
    assert pb.keys == [("lab", "r1", "big"), ("lab", "r1", "small")]
    assert pb.on_demand == [10.0, 2.0]


def test_listed_products_their_rates_and_errors() -> None:
    pb = _build({"horizon_weeks": 60, "demand": [{**A, "nodes": 1}],
                 "products": [{"name": "mine", **A, "term_years": 1, "usd_per_hour": 6.5,
                               "upfront_usd": 100.0},
                              {"name": "cat", **A, "term_years": 3}]})
    one_year = [1.0] * 52 + [(8760 - 52 * WEEK) / WEEK] + [0.0] * 7
    assert [(p.name, p.usd_per_hour, p.upfront_usd, p.source, p.assumption)
            for p in pb.products] == [("mine", 6.5, 100.0, "portfolio", False),
                                      ("cat", 5.0, 0.0, "assumed", True)]
    assert pb.products[0].active.tolist() == pytest.approx(one_year)
    with pytest.raises(InputError) as exc:
        _build({"demand": [{**B, "nodes": 1}],
                "products": [{"name": "x", **B, "term_years": 1}]})
    assert str(exc.value) == ("products[0].usd_per_hour: catalog hand has no 1-year rate for "
                              "lab/r1/small; give usd_per_hour")
    with pytest.raises(InputError) as exc:
        _build({"demand": [{**B, "nodes": 1}],
                "products": [{"name": "x", **B, "instance_type": "bigg", "term_years": 1}]})
    assert str(exc.value) == (
        "products[0].instance_type: 'bigg' has no on-demand price in catalog hand for "
        "lab/r1 (did you mean: big?); fix the name or give on_demand_usd_per_hour")
    # a product of a key with no demand but a catalog price: its on-demand price is known
    pb = _build({"demand": [{**B, "nodes": 1}],
                 "products": [{"name": "x", **A, "term_years": 1, "usd_per_hour": 6.0}]})
    assert pb.keys == [("lab", "r1", "small"), ("lab", "r1", "big")]
    assert pb.on_demand == [2.0, 10.0]


def test_unknown_region_and_type_messages() -> None:
    with pytest.raises(InputError) as exc:
        _build({"demand": [{**A, "region": "r11", "nodes": 1}]})
    assert str(exc.value) == ("demand[0].region: lab region 'r11' is not in catalog hand "
                              "(did you mean: r1?); fix the region or give prices")
    with pytest.raises(InputError) as exc:
        _build({"demand": [{**A, "instance_type": "spotty", "nodes": 1}]})
    assert str(exc.value) == (
        "demand[0].instance_type: 'spotty' has no on-demand price in catalog hand for lab/r1 "
        "(did you mean: spotty?); fix the name or give on_demand_usd_per_hour")
    with pytest.raises(InputError) as exc:  # "other" is in r2 only: no suggestion from r1
        _build({"demand": [{**A, "instance_type": "othr", "nodes": 1}]})
    assert str(exc.value) == ("demand[0].instance_type: 'othr' has no on-demand price in "
                              "catalog hand for lab/r1; fix the name or give "
                              "on_demand_usd_per_hour")
    with pytest.raises(InputError) as exc:
        _build({"demand": [{**B, "nodes": 1}],
                "existing": [{**A, "instance_type": "zzz", "count": 1, "usd_per_hour": 1.0,
                              "expires_week": 2}]})
    assert str(exc.value) == ("existing[0].instance_type: 'zzz' has no on-demand price in "
                              "catalog hand for lab/r1; fix the name or give "
                              "on_demand_usd_per_hour")


def test_given_on_demand_prices() -> None:
    """A row's own on-demand price replaces the catalog's; two rows giving different prices
    for one key are refused, equal ones are not; a spot-only key with a given price is fine."""
    pb = _build({"demand": [{**A, "nodes": 1}, {**A, "nodes": 1, "on_demand_usd_per_hour": 9.0},
                            {**A, "nodes": 1, "on_demand_usd_per_hour": 9.0},
                            {**A, "instance_type": "spotty", "nodes": 1,
                             "on_demand_usd_per_hour": 1.5}]})
    assert pb.on_demand == [9.0, 1.5]
    with pytest.raises(InputError) as exc:
        _build({"demand": [{**A, "nodes": 1, "on_demand_usd_per_hour": 9.0},
                           {**A, "nodes": 1, "on_demand_usd_per_hour": 8.0}]})
    assert str(exc.value) == ("demand[1].on_demand_usd_per_hour = 8.0: demand[0] gives 9.0 "
                              "for lab/r1/big; use one on-demand price per instance type and "
                              "region")
    # a row without a price after one with a price keeps the given price
    pb = _build({"demand": [{**A, "nodes": 1, "on_demand_usd_per_hour": 9.0},
                            {**A, "nodes": 1}]})
    assert pb.on_demand == [9.0]


def test_rows_profiles_spot_and_classes() -> None:
    """Rows over a 6-week horizon: constant nodes with an end, weekly nodes from a start week
    running past the horizon (cut, with a warning), spot from the catalog, from the row, and
    dearer than on demand (then never used: an on-demand-only class); classes in key order,
    on-demand-only first, then by spot price."""
    pb = _build({"horizon_weeks": 6, "demand": [
        {**B, "nodes": 2, "start_week": 1, "end_week": 3, "label": "two"},
        {**A, "nodes": 1, "spot_ok": True, "end_week": 9},
        {**A, "weekly_nodes": [1, 2, 3, 4], "start_week": 4},
        {**A, "nodes": 0.5, "spot_ok": True, "spot_usd_per_hour": 3.0},
        {**A, "nodes": 1, "spot_ok": True, "spot_usd_per_hour": 10.0},
        {**A, "weekly_nodes": [7], "start_week": 5},
        {**A, "nodes": 0.25, "spot_ok": True, "spot_usd_per_hour": 3.4},
        {**B, "nodes": 0}]})
    assert _classes(pb) == [
        ("lab/r1/small", None, [0.0, 2.0, 2.0, 0.0, 0.0, 0.0]),  # the 0-node row adds 0
        ("lab/r1/big", None, [0.0, 0.0, 0.0, 0.0, 1.0, 9.0]),
        ("lab/r1/big", 3.0, [0.5] * 6),
        ("lab/r1/big", 3.4, [0.25] * 6),  # a class per spot price (to 9 decimals)
        ("lab/r1/big", 4.0, [1.0] * 6),
        ("lab/r1/big", None, [1.0] * 6)]  # 10 $/h spot >= 10 $/h on demand: never used
    assert [sorted(c.sources) for c in pb.classes] == [
        ["demand[7]", "two"], ["demand[2]", "demand[5]"], ["demand[3]"], ["demand[6]"],
        ["demand[1]"], ["demand[4]"]]
    assert pb.name == "portfolio"
    assert [w for w in pb.warnings if w.startswith("demand")] == [
        "demand[2]: weekly_nodes run past the 6-week horizon; those weeks are not evaluated"]
    with pytest.raises(InputError) as exc:
        _build({"demand": [{**B, "nodes": 1, "spot_ok": True}]})
    assert str(exc.value) == ("demand[0].spot_ok: catalog hand has no spot offer for "
                              "lab/r1/small; give spot_usd_per_hour or set spot_ok: false")
    # weekly nodes that start after the horizon add nothing (and warn)
    pb = _build({"horizon_weeks": 2, "demand": [{**A, "nodes": 1},
                                                {**A, "weekly_nodes": [5], "start_week": 3}]})
    assert _classes(pb) == [("lab/r1/big", None, [1.0, 1.0])]


def test_scenario_rows_multipliers_and_weights() -> None:
    pb = _build({"horizon_weeks": 2, "demand": [{**A, "nodes": 1}],
                 "scenarios": [{"name": "lo", "weight": 1.0, "demand_multiplier": 0.5},
                               {"name": "own", "weight": 3.0, "demand_multiplier": 2.0,
                                "demand": [{**B, "nodes": 3}]}]})
    assert [(c.key, c.nodes.tolist()) for c in pb.classes] == [
        (0, [[0.5, 0.5], [0.0, 0.0]]), (1, [[0.0, 0.0], [6.0, 6.0]])]
    assert [sorted(c.sources) for c in pb.classes] == [["demand[0]"], ["scenarios[1].demand[0]"]]
    assert pb.prob.tolist() == [0.25, 0.75] and pb.weights == [1.0, 3.0]
    assert pb.multipliers == [0.5, 2.0]
    assert "scenario weights normalised to probabilities (they summed to 4)" in pb.defaults
    one = _build({"horizon_weeks": 2, "demand": [{**A, "nodes": 1}],
                  "scenarios": [{"name": "a", "weight": 0.5}, {"name": "b", "weight": 0.5}]})
    assert not any("normalised" in d for d in one.defaults)


def test_two_holdings_of_a_key_and_their_cost() -> None:
    """Two holdings of big (2 nodes at 6 $/h until week 3, 1 at 5 $/h past the horizon) and
    one of a type without demand: nodes per week add up, the cost is count × rate × weeks
    held inside the horizon × 168."""
    pb = _build({"horizon_weeks": 4, "demand": [{**A, "nodes": 4}], "existing": [
        {**A, "count": 2, "usd_per_hour": 6.0, "expires_week": 3},
        {**A, "count": 1, "usd_per_hour": 5.0, "expires_week": 10},
        {**A, "instance_type": "spotty", "count": 3, "usd_per_hour": 0.5, "expires_week": 1}]})
    assert pb.keys == [("lab", "r1", "big"), ("lab", "r1", "spotty")]
    assert pb.existing_nodes.tolist() == [[3.0, 3.0, 3.0, 1.0], [3.0, 0.0, 0.0, 0.0]]
    assert pb.existing_cost_usd == pytest.approx(
        (2 * 6.0 * 3 + 1 * 5.0 * 4 + 3 * 0.5 * 1) * WEEK, abs=1e-9)
    assert pb.on_demand == [10.0, None]


def test_nothing_to_buy_for() -> None:
    with pytest.raises(InfeasibleError) as exc:
        _build({"horizon_weeks": 4, "demand": [{**A, "nodes": 1, "start_week": 4}],
                "projects": [{"spec": "examples/sft-8b.yaml", "start_week": 4},
                             {"spec": "examples/sft-8b.yaml", "start_week": 9}]})
    assert str(exc.value) == (
        "portfolio portfolio: nothing to buy for: no demand inside the 4-week horizon "
        "(2 projects, 2 starting after it; 1 demand rows); add projects or demand rows, or "
        "move start weeks into the horizon")


def test_ladder_purchase_weeks() -> None:
    assert buy_weeks(30, None) == [0]
    assert buy_weeks(27, "quarterly") == [0, 13, 26]
    assert buy_weeks(26, "quarterly") == [0, 13]
    with pytest.raises(InputError) as exc:
        buy_weeks(26, "monthly")
    assert str(exc.value) == "--ladder: 'monthly' is not a ladder; use one of quarterly"
    pb = _build({"horizon_weeks": 27, "demand": [{**A, "nodes": 1}],
                 "products": [{"name": "p", **A, "term_years": 1, "usd_per_hour": 6.0}]},
                ladder="quarterly")
    assert [(p.name, p.buy_week) for p in pb.products] == [("p", 0), ("p@w13", 13),
                                                           ("p@w26", 26)]
    assert pb.products[1].active.tolist() == [0.0] * 13 + [1.0] * 14
    assert ("--ladder quarterly: purchases in weeks 0, 13, 26; week 0's is the answer, later "
            "ones the plan (one plan for every scenario), revised each quarter") in pb.defaults


@pytest.mark.parametrize(("start", "every", "weeks", "expected"), [
    (0, None, 52, [0]), (0, 13, 52, [0, 13, 26, 39]), (0, 26, 52, [0, 26]),
    (1, 25, 52, [1, 26, 51]), (52, 1, 52, []), (51, 1, 52, [51]), (5, 50, 52, [5]),
])
def test_run_starts(start: int, every: int | None, weeks: int, expected: list[int]) -> None:
    """A project repeats every ``every`` weeks while the next start is inside the horizon."""
    assert _run_starts(start, every, weeks) == expected


def _plan(capacity: str, eff: float, nodes: int = 2, hours: float = 84.0,
          small: int = 0) -> Plan:
    """The pinned GRPO plan cut to one pool with one allocation of ``big`` (and ``small``
    on-demand nodes of ``small``) on the catalog above (a plan's own figures are not re-checked
    here: only its allocations are read)."""
    data = json.loads((ROOT / "tests" / "golden" / "cli" / "plan-grpo-7b.json").read_text())
    pool = data["pools"][0]
    alloc = {**pool["allocations"][0], **A, "zone": "r1-a", "capacity_type": capacity,
             "nodes": nodes, "hours": hours, "usd_per_hour": 4.0, "effective_fraction": eff}
    more = [{**alloc, **B, "capacity_type": "on_demand", "nodes": small, "usd_per_hour": 2.0,
             "effective_fraction": 1.0}] if small else []
    data["pools"] = [{**pool, "allocations": [alloc, *more]}]
    return Plan.model_validate(data)


@pytest.mark.parametrize(("capacity", "eff", "nodes", "spot"), [
    ("spot", 0.8, 2 * 0.8, 4.0 / 0.8),  # useful nodes and the $ per useful node-hour
    ("on_demand", 0.5, 2.0, None),
    ("reserved", 1.0, 2.0, None),
])
def test_project_demand_of_a_plan(capacity: str, eff: float, nodes: float,
                                  spot: float | None) -> None:
    """A project of 84 h runs (half a week) starting in week 1 and repeating every 2 weeks
    over a 6-week horizon: runs in weeks 1, 3, 5, each 0.5 of its week."""
    b = _Builder(_pf({"horizon_weeks": 6, "scenarios": [
        {"name": "a", "weight": 1.0}, {"name": "b", "weight": 1.0, "demand_multiplier": 3.0}]}),
        CATALOG, ROOT, default_policy(), "highs")
    pr = validate(Project, {"spec": "x.yaml", "start_week": 1, "repeat_every_weeks": 2,
                            "scenario_weights": {"b": 0.5}}, "project")
    p = _plan(capacity, eff)
    row = b.project_demand(pr, p, "proj", "projects[0]")
    assert row == {"name": "proj", "spec_name": p.spec_name, "start_week": 1,
                   "repeat_every_weeks": 2, "runs_in_horizon": 3,
                   "makespan_hours": p.makespan_hours, "plan_cost_usd": p.total_cost_usd,
                   "node_hours_in_horizon": pytest.approx(nodes * 3 * 84.0, abs=1e-6),
                   "instance_types": ["lab/r1/big"]}
    (cls,) = b.classes.values()
    week = [0.0, 0.5, 0.0, 0.5, 0.0, 0.5]
    assert cls.key == 0 and cls.sources == {"project proj"}
    assert cls.spot_usd_per_hour == (None if spot is None else pytest.approx(spot))
    np.testing.assert_allclose(cls.nodes, [[nodes * w for w in week],
                                           [1.5 * nodes * w for w in week]], rtol=1e-12)
    assert b.od == {0: (10.0, "catalog hand")}
    held = [w for w in b.warnings if "held reserved capacity" in w]
    assert held == ([] if capacity != "reserved" else [
        "project proj: its plan uses held reserved capacity of lab/r1/big; it is counted as "
        "demand here, and the holding counts only if listed under existing (so nothing counts "
        "twice)"])


def test_project_allocation_without_a_catalog_price() -> None:
    b = _Builder(_pf({}), Catalog("hand", "2026-11-01", OFFERS[6:]), ROOT, default_policy(),
                 "highs")
    pr = validate(Project, {"spec": "x.yaml"}, "project")
    with pytest.raises(InputError) as exc:
        b.project_demand(pr, _plan("on_demand", 1.0), "proj", "projects[0]")
    assert str(exc.value) == ("projects[0] (proj) plan allocation.instance_type: 'big' has no "
                              "on-demand price in catalog hand for lab/r1; fix the name or "
                              "give on_demand_usd_per_hour")


def test_project_spec_paths_and_names(tmp_path: Path) -> None:
    """Projects name their spec by a path relative to the portfolio (or absolute) or inline;
    two projects of one spec are planned once and named ``name``, ``name#2``; a bad spec is
    one error naming the project."""
    spec = (ROOT / "examples" / "sft-8b.yaml").read_text(encoding="utf-8")
    (tmp_path / "s.yaml").write_text(spec, encoding="utf-8")
    catalog = Catalog("hand", "2026-11-01", ())
    b = _Builder(_pf({}), catalog, tmp_path, default_policy(), "highs")
    rel = b.spec_of(validate(Project, {"spec": "s.yaml"}, "p"), "projects[0]")
    absolute = b.spec_of(validate(Project, {"spec": str(tmp_path / "s.yaml")}, "p"), "x")
    assert rel.name == absolute.name == "sft-8b-chat"
    with pytest.raises(InputError) as exc:
        b.spec_of(validate(Project, {"spec": "missing.yaml"}, "p"), "projects[3]")
    assert str(exc.value).startswith("portfolio projects[3].spec: ")
    with pytest.raises(InputError) as exc:
        b.spec_of(validate(Project, {"spec": {"name": "x"}}, "p"), "projects[4]")
    assert str(exc.value).startswith("portfolio projects[4].spec: ")
    assert "projects[4].spec" in str(exc.value)[len("portfolio projects[4].spec: "):]


def test_profiles_are_arrays_of_the_horizon() -> None:
    """Every class's nodes are (scenarios × weeks) floats."""
    pb = _build({"horizon_weeks": 3, "demand": [{**A, "weekly_nodes": [1, 2]}]})
    (cls,) = pb.classes
    assert isinstance(cls.nodes, np.ndarray) and cls.nodes.shape == (1, 3)
    assert cls.nodes.tolist() == [[1.0, 2.0, 0.0]]


def test_projects_are_planned_once_per_spec_and_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """Three projects, two of one spec: two plans (the cache is keyed by the spec's digest),
    each asked without explanation or timings, with the builder's solver and policy; the
    repeated name gets ``#2``; ``progress`` is told before each project; the planning seconds
    are the time spent in the planner."""
    calls: list[tuple[str, dict[str, Any]]] = []
    canned = _plan("on_demand", 1.0)

    def fake_plan(spec: Any, catalog: Any, **kw: Any) -> Plan:
        calls.append((spec.name, kw))
        return canned

    monkeypatch.setattr(api, "plan", fake_plan)
    sft = example_dict("sft-8b.yaml")
    other = {**example_dict("sft-8b.yaml"), "name": "other"}
    policy = default_policy()
    b = _Builder(_pf({"horizon_weeks": 4, "projects": [
        {"spec": sft}, {"spec": other, "name": "mine"}, {"spec": sft, "start_week": 2}]}),
        CATALOG, ROOT, policy, "cbc")
    told: list[tuple[int, int]] = []
    rows, seconds, distinct = b.projects(lambda n, total: told.append((n, total)))
    assert [name for name, _ in calls] == ["sft-8b-chat", "other"] and distinct == 2
    assert all(kw == {"solver": "cbc", "explain": False, "timings": False, "policy": policy}
               for _, kw in calls)
    assert [r["name"] for r in rows] == ["sft-8b-chat", "mine", "sft-8b-chat#2"]
    assert told == [(0, 3), (1, 3), (2, 3)]
    assert 0.0 <= seconds < 5.0

    def failing(spec: Any, catalog: Any, **kw: Any) -> Plan:
        raise InfeasibleError("deadline 1 h: too short")

    monkeypatch.setattr(api, "plan", failing)
    b = _Builder(_pf({"projects": [{"spec": sft}]}), CATALOG, ROOT, policy, "highs")
    with pytest.raises(InfeasibleError) as exc:
        b.projects()
    assert str(exc.value) == "portfolio projects[0] (sft-8b-chat): deadline 1 h: too short"


def test_project_node_hours_add_over_allocations() -> None:
    """2 big nodes and 3 small ones for 84 h, one run: (2 + 3) × 84 = 420 node-hours."""
    b = _Builder(_pf({"horizon_weeks": 2}), CATALOG, ROOT, default_policy(), "highs")
    pr = validate(Project, {"spec": "x.yaml"}, "project")
    row = b.project_demand(pr, _plan("on_demand", 1.0, small=3), "proj", "projects[0]")
    assert row["node_hours_in_horizon"] == pytest.approx(420.0, abs=1e-6)
    assert row["instance_types"] == ["lab/r1/big", "lab/r1/small"]
    assert [(c.key, c.nodes.tolist()) for c in b.classes.values()] == [
        (0, [[1.0, 0.0]]), (1, [[1.5, 0.0]])]


def test_catalog_products_in_key_order_with_a_three_year_rate_only() -> None:
    """Demand on small (listed first) and big: the catalog's products come in key order (big
    before small), and small, with only a 3-year rate, still gets that product."""
    catalog = Catalog("hand", "2026-11-01", OFFERS,
                      reserved_rates=(*RATES, _rate("small", 3, 1.5, "small-3y")))
    pb = build_problem(_pf({"horizon_weeks": 4, "demand": [{**B, "nodes": 1},
                                                           {**A, "nodes": 1}]}),
                       catalog, ROOT)
    assert pb.keys == [("lab", "r1", "small"), ("lab", "r1", "big")]
    assert [(p.name, p.key, p.source) for p in pb.products] == [
        ("lab/r1/big/1y", 1, "conv-all"), ("lab/r1/big/3y", 1, "assumed"),
        ("lab/r1/small/3y", 0, "small-3y")]
    assert not any("no reserved rate" in w for w in pb.warnings)
