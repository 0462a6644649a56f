"""``ptplan reserve``'s report worked out by hand, and the wiring of :func:`reserve` (policy,
progress, timings, the re-check that must refuse a wrong MILP answer).

The small catalog of ``tests/data/portfolios/catalog.yaml`` (aws/us-east-1 p5.48xlarge: on
demand 55.04 $/h, reserved 1 year 35.776 $/h; g6e.xlarge: on demand 1.861 $/h, spot 0.9154
$/h, reserved 1 year 1.20965 $/h); a week is 168 h, a 52-week horizon 8,736 h. Every money
figure below is computed here from those prices (docs/reserve.md: the horizon cost of a
product, greedy use of committed nodes, on-demand for the rest, spot where allowed and
cheaper). Written for the surviving mutants of the 2026-12-03 mutation run
(docs/testing.md).
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import ROOT

from ptplan.core.errors import PlannerError
from ptplan.core.yamlio import validate
from ptplan.providers.registry import load_catalog
from ptplan.reservations import purchase
from ptplan.reservations.portfolio import Portfolio
from ptplan.reservations.problem import Risk

DATA = ROOT / "tests" / "data" / "portfolios"
CATALOG = load_catalog(str(DATA / "catalog.yaml"))
P5 = {"provider": "aws", "region": "us-east-1", "instance_type": "p5.48xlarge"}
G6E = {"provider": "aws", "region": "us-east-1", "instance_type": "g6e.xlarge"}
OD_P5, R1_P5, OD_G6E, SPOT_G6E, R1_G6E = 55.04, 35.776, 1.861, 0.9154, 1.20965
H52 = 52 * 168.0


def _pf(data: dict[str, Any]) -> Portfolio:
    return validate(Portfolio, data, "portfolio")


def _money(x: float) -> str:
    return f"{x + 1e-9:.2f}"


# ---- purchases, one scenario -------------------------------------------------------------------

PURCHASE = {
    "demand": [{**P5, "nodes": 2}, {**P5, "nodes": 1, "end_week": 26},
               {**G6E, "nodes": 1, "spot_ok": True, "spot_usd_per_hour": 1.5}],
    "products": [{"name": "p5-1y", **P5, "term_years": 1},
                 {"name": "p5-3y", **P5, "term_years": 3, "usd_per_hour": 34.0,
                  "upfront_usd": 100_000.0},
                 {"name": "g6e-1y", **G6E, "term_years": 1}],
}


def test_purchase_report_by_hand() -> None:
    """Two p5 nodes all year and a third for 26 weeks; one g6e node that may run on spot at
    1.5 $/h. p5-1y pays 35.776 $/h < on demand (break-even 35.776 / 55.04 = 0.65): two are
    bought, the third node's 26/52 = 0.5 is below break-even. p5-3y costs 34 + 100,000 /
    26,280 = 37.805175 $/h effective, dearer than p5-1y: none. g6e-1y at 1.20965 $/h beats
    spot at 1.5: one. Horizon cost 2 × 35.776 × 8,736 + 1.20965 × 8,736 + the third p5 node
    on demand 26 × 168 × 55.04."""
    r = purchase.reserve(_pf(PURCHASE), CATALOG, DATA)  # default: timings on
    rep = r.report
    third = 26 * 168 * OD_P5
    total = 2 * R1_P5 * H52 + R1_G6E * H52 + third
    existing_only = 2 * OD_P5 * H52 + third + 1.5 * H52  # nothing bought, g6e on spot
    od_only = 2 * OD_P5 * H52 + third + OD_G6E * H52
    assert r.counts == [2, 0, 1]
    assert r.evaluation.total.tolist() == pytest.approx([total])
    assert (rep["schema_version"], rep["portfolio"], rep["horizon_weeks"], rep["status"],
            rep["objective"], rep["risk"]) == (1, "portfolio", 52, "optimal", "expected cost",
                                               None)
    assert rep["expected_total_cost_usd"] == _money(total) == "876060.49"
    assert rep["existing_only_cost_usd"] == _money(existing_only) == "1215177.60"
    assert rep["on_demand_only_cost_usd"] == _money(od_only) == "1218331.30"
    assert rep["expected_savings_vs_existing_only_usd"] == _money(existing_only - total)
    assert rep["expected_savings_vs_on_demand_only_usd"] == _money(od_only - total)
    assert rep["upfront_due_now_usd"] == "0.00"
    assert rep["existing"] == []
    rows = {p["product"]: p for p in rep["purchases"]}
    assert [p["product"] for p in rep["purchases"]] == ["g6e-1y", "p5-1y", "p5-3y"]
    common = {"provider": "aws", "region": "us-east-1", "upfront_usd": "0.00",
              "upfront_total_usd": "0.00", "paid_hours_in_horizon": pytest.approx(H52)}
    assert rows["g6e-1y"] == {
        **rows["g6e-1y"], **common, "instance_type": "g6e.xlarge", "term_years": 1, "count": 1,
        "usd_per_hour": R1_G6E, "effective_usd_per_hour": R1_G6E,
        "on_demand_usd_per_hour": OD_G6E, "break_even_utilization": 0.65,
        "spot_usd_per_hour": 1.5, "expected_utilization": 1.0, "next_unit_utilization": 0.0,
        "horizon_cost_usd": _money(R1_G6E * H52)}
    assert rows["p5-1y"] == {
        **rows["p5-1y"], **common, "instance_type": "p5.48xlarge", "term_years": 1, "count": 2,
        "usd_per_hour": R1_P5, "effective_usd_per_hour": R1_P5, "on_demand_usd_per_hour": OD_P5,
        "break_even_utilization": 0.65, "spot_usd_per_hour": None, "expected_utilization": 1.0,
        "next_unit_utilization": 0.5, "horizon_cost_usd": _money(2 * R1_P5 * H52)}
    eff = 34.0 + 100_000 / 26_280
    assert rows["p5-3y"] == {
        **rows["p5-3y"], **common, "upfront_usd": "100000.00", "instance_type": "p5.48xlarge",
        "term_years": 3, "count": 0, "usd_per_hour": 34.0,
        "effective_usd_per_hour": round(eff, 6), "on_demand_usd_per_hour": OD_P5,
        "break_even_utilization": round(eff / OD_P5, 6), "spot_usd_per_hour": None,
        "expected_utilization": None, "next_unit_utilization": 0.5, "horizon_cost_usd": "0.00",
        "rate_source": "portfolio", "rate_assumed": False}
    [sc] = rep["scenarios"]
    assert sc == {**sc, "name": "expected", "probability": 1.0, "demand_multiplier": 1.0,
                  "total_cost_usd": _money(total),
                  "new_commitment_cost_usd": _money((2 * R1_P5 + R1_G6E) * H52),
                  "existing_commitment_cost_usd": "0.00", "on_demand_cost_usd": _money(third),
                  "spot_cost_usd": "0.00", "existing_only_cost_usd": _money(existing_only),
                  "on_demand_only_cost_usd": _money(od_only),
                  "demand_node_hours": pytest.approx((3 * 52 + 26) * 168.0),
                  "committed_node_hours_used": pytest.approx(3 * H52),
                  "spend_covered_node_hours": 0.0}
    # the products left at the catalog's rate are named; the horizon and scenario defaults
    assert rep["defaults_applied"] == [
        "horizon_weeks = 52", "scenarios = [expected: weight 1, demand_multiplier 1]",
        "products p5-1y: usd_per_hour = the catalog's 1-year reserved rate",
        "products g6e-1y: usd_per_hour = the catalog's 1-year reserved rate"]
    solver = rep["solver"]
    assert 0 < solver["seconds"] < 3 and solver["planning_seconds"] == 0.0
    assert solver["gap"] == 0.0 and isinstance(solver["gap"], float)
    assert rep["verification"] == (
        "ok: costs recomputed from the purchase and the demand without the MILP; coverage and "
        "capacity rows checked for every scenario and week")
    assert (solver["name"], solver["integer_variables"], solver["distinct_plans"]) == \
        ("highs", 3, 0)
    cov = [c for c in rep["coverage"] if c["instance_type"] == "p5.48xlarge"]
    assert len(cov) == 52 and len(rep["coverage"]) == 104
    assert cov[25] == {"scenario": "expected", **P5, "week": 25, "demand_nodes": 3.0,
                       "spot_ok_nodes": 0.0, "committed_nodes": 2.0,
                       "committed_used_nodes": 2.0,
        "spend_covered_nodes": 0.0, "on_demand_nodes": 1.0, "spot_nodes": 0.0}
    assert cov[26]["demand_nodes"] == 2.0 and cov[26]["on_demand_nodes"] == 0.0


# ---- scenarios, holdings, spot, CVaR ---------------------------------------------------------

SCENARIOS = {
    "horizon_weeks": 4,
    "scenarios": [{"name": "low", "weight": 1.0, "demand_multiplier": 0.5},
                  {"name": "high", "weight": 3.0}],
    "demand": [{**P5, "nodes": 2}, {**G6E, "nodes": 4, "spot_ok": True, "start_week": 1,
                                    "end_week": 3}],
    "existing": [{**P5, "count": 1, "usd_per_hour": 30.0, "expires_week": 2}],
    "products": [],
}


def test_scenario_report_by_hand() -> None:
    """4 weeks; scenario low (weight 1, demand × 0.5) and high (weight 3): probabilities 0.25
    and 0.75. p5: 1 or 2 nodes all 4 weeks; one held node (30 $/h) until week 2 serves weeks
    0-1: on demand low 2, high 6 node-weeks. g6e: 2 or 4 nodes in weeks 1-2, on spot (0.9154 <
    1.861): low 4, high 8 node-weeks. Held nodes cost 1 × 30 × 2 × 168 = 10,080 in both."""
    r = purchase.reserve(_pf(SCENARIOS), CATALOG, DATA, risk=Risk(0.5, 0.5), timings=False)
    rep = r.report
    held = 30.0 * 2 * 168
    low = held + 2 * 168 * OD_P5 + 4 * 168 * SPOT_G6E
    high = held + 6 * 168 * OD_P5 + 8 * 168 * SPOT_G6E
    od = {"low": 4 * 168 * OD_P5 + 4 * 168 * OD_G6E, "high": 8 * 168 * OD_P5 + 8 * 168 * OD_G6E}
    expected = 0.25 * low + 0.75 * high
    assert rep["objective"] == "(1 - 0.5) x expected cost + 0.5 x CVaR_0.5"
    assert rep["expected_total_cost_usd"] == _money(expected) == "57390.11"
    assert rep["existing_only_cost_usd"] == _money(expected)  # nothing to buy
    assert rep["on_demand_only_cost_usd"] == _money(0.25 * od["low"] + 0.75 * od["high"])
    # CVaR_0.5: the worst half of the probability mass lies in "high" (0.75)
    assert rep["risk"] == {"measure": "cvar", "alpha": 0.5, "weight": 0.5,
                           "cvar_usd": _money(high), "existing_only_cvar_usd": _money(high)}
    assert rep["existing"] == [{**P5, "count": 1, "usd_per_hour": 30.0, "expires_week": 2,
                                "cost_in_horizon_usd": "10080.00"}]
    assert rep["defaults_applied"] == [
        "scenario weights normalised to probabilities (they summed to 4)"]
    assert rep["purchases"] == []
    assert rep["solver"]["seconds"] == 0.0
    rows = {s["name"]: s for s in rep["scenarios"]}
    for name, total, weight, prob, mult, on_demand, spot, node_weeks in (
            ("low", low, 1.0, 0.25, 0.5, 2 * 168 * OD_P5, 4 * 168 * SPOT_G6E, 8),
            ("high", high, 3.0, 0.75, 1.0, 6 * 168 * OD_P5, 8 * 168 * SPOT_G6E, 16)):
        assert rows[name] == {
            "name": name, "weight": weight, "probability": prob, "demand_multiplier": mult,
            "total_cost_usd": _money(total), "new_commitment_cost_usd": "0.00",
            "existing_commitment_cost_usd": "10080.00", "on_demand_cost_usd": _money(on_demand),
            "spot_cost_usd": _money(spot), "existing_only_cost_usd": _money(total),
            "on_demand_only_cost_usd": _money(od[name]),
            "demand_node_hours": pytest.approx(node_weeks * 168.0),
            "committed_node_hours_used": pytest.approx(2 * 168.0),
                  "spend_covered_node_hours": 0.0}
    cov = {(c["scenario"], c["instance_type"], c["week"]): c for c in rep["coverage"]}
    assert len(cov) == 12  # per scenario: p5 in 4 weeks, g6e in weeks 1 and 2
    assert cov["low", "p5.48xlarge", 0] == {
        "scenario": "low", **P5, "week": 0, "demand_nodes": 1.0, "spot_ok_nodes": 0.0,
        "committed_nodes": 1.0, "committed_used_nodes": 1.0,
        "spend_covered_nodes": 0.0, "on_demand_nodes": 0.0,
        "spot_nodes": 0.0}
    assert cov["high", "p5.48xlarge", 3] == {
        "scenario": "high", **P5, "week": 3, "demand_nodes": 2.0, "spot_ok_nodes": 0.0,
        "committed_nodes": 0.0, "committed_used_nodes": 0.0,
        "spend_covered_nodes": 0.0, "on_demand_nodes": 2.0,
        "spot_nodes": 0.0}
    assert cov["high", "g6e.xlarge", 2] == {
        "scenario": "high", **G6E, "week": 2, "demand_nodes": 4.0, "spot_ok_nodes": 4.0,
        "committed_nodes": 0.0, "committed_used_nodes": 0.0,
        "spend_covered_nodes": 0.0, "on_demand_nodes": 0.0,
        "spot_nodes": 4.0}


# ---- wiring ------------------------------------------------------------------------------------

def test_a_wrong_milp_answer_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """The purchase is re-checked without the MILP: an answer whose objective is 1 % above the
    cheapest use of its purchase, with negative committed nodes and spot for firm demand in
    both classes, is refused with its first three problems (objective; class 0's dispatch;
    class 0's spot) and a request to report a bug."""
    real = purchase.reserve_model.solve

    def wrong(pb, solver, time_limit):
        sol = real(pb, solver, time_limit)
        sol.objective *= 1.01
        sol.used = [u - 5.0 for u in sol.used]
        sol.spot = [s + 0.5 for s in sol.spot]
        return sol

    monkeypatch.setattr(purchase.reserve_model, "solve", wrong)
    data = {"demand": [{**P5, "nodes": 2}, {**G6E, "nodes": 1}],
            "products": [{"name": "p5-1y", **P5, "term_years": 1}]}
    with pytest.raises(PlannerError) as err:
        purchase.reserve(_pf(data), CATALOG, DATA, timings=False)
    msg = str(err.value)
    assert msg.startswith("reserve: the purchase failed its independent re-check (the MILP's "
                          "objective ") and msg.endswith("); report a bug")
    inner = msg[len("reserve: the purchase failed its independent re-check ("):
                -len("); report a bug")].split("; ")
    assert len(inner) == 3
    assert inner[0].startswith("the MILP's objective ") and "exceeds the cheapest use" in inner[0]
    assert inner[1:] == ["class 0 (aws/us-east-1/p5.48xlarge): dispatch outside 0 <= committed "
                         "+ spot <= demand", "class 0: spot used by demand that may not run on "
                         "spot"]


def test_projects_are_planned_with_the_policy_and_progress_is_told() -> None:
    """Two copies of the brute-force fixture's small GRPO spec (one plan, cached) on the small
    test catalog, planned under a policy that allows region r2 only (its offers cost 1.1 × r1's,
    so the default policy plans in r1): every instance type of the project rows is in r2, and
    ``progress`` is told (0, 2) and (1, 2) as each project is planned."""
    from planner_fixtures import small_catalog, small_spec

    from ptplan.policies.model import parse_policy

    only_r2 = parse_policy("name: r2\nextends: default\nregions: [r2]\n")
    spec = small_spec().model_dump(mode="json", exclude_unset=True)
    told: list[tuple[int, int]] = []
    pf = _pf({"projects": [{"spec": spec}, {"spec": spec, "start_week": 4}]})
    r = purchase.reserve(pf, small_catalog(), DATA, policy=only_r2,
                         progress=lambda done, total: told.append((done, total)))
    assert told == [(0, 2), (1, 2)]
    types = [t for p in r.report["projects"] for t in p["instance_types"]]
    assert types and all(t.startswith("lab/r2/") for t in types), types
    assert r.report["solver"]["distinct_plans"] == 1
    assert 0.0 < r.report["solver"]["planning_seconds"] < 60.0  # timings on: a duration
    default = purchase.reserve(_pf({"projects": [{"spec": spec}]}), small_catalog(), DATA,
                               timings=False)
    assert all(t.startswith("lab/r1/") for t in default.report["projects"][0]["instance_types"])
    solver = default.report["solver"]
    assert (solver["seconds"], solver["planning_seconds"]) == (0.0, 0.0)  # timings off


def test_catalog_products_are_a_named_default() -> None:
    """Without a ``products`` block the catalog's 1- and 3-year rates are the candidates, and
    the report says so (docs/reserve.md)."""
    r = purchase.reserve(_pf({"demand": [{**P5, "nodes": 1}]}), CATALOG, DATA, timings=False)
    assert r.report["defaults_applied"] == [
        "horizon_weeks = 52", "scenarios = [expected: weight 1, demand_multiplier 1]",
        "products = the catalog's 1- and 3-year reserved rates for every instance type with "
        "demand (no upfront)"]


def test_portfolio_file_errors_name_the_file(tmp_path) -> None:
    """``load_portfolio``: a missing file and a bad field are one line each, naming the
    portfolio file."""
    from ptplan.core.errors import InputError
    from ptplan.core.yamlio import quoted
    from ptplan.reservations.portfolio import load_portfolio

    missing = tmp_path / "none.yaml"
    with pytest.raises(InputError) as err:
        load_portfolio(str(missing))
    assert str(err.value) == f"portfolio: file {quoted(str(missing))} not found; check the path"
    bad = tmp_path / "bad.yaml"
    bad.write_text("horizon_weeks: 0\n", encoding="utf-8")
    with pytest.raises(InputError) as err:
        load_portfolio(str(bad))
    assert str(err.value).startswith(f"portfolio {quoted(str(bad))}")
    assert "horizon_weeks" in str(err.value)


# ---- the MILP ------------------------------------------------------------------------------------

def test_the_purchase_bound_counts_every_class_of_a_key() -> None:
    """Two p5 demand classes of 2 nodes each all year: firm, and one that may run on spot at
    50 $/h (below on demand 55.04, above the 1-year rate 35.776). Committing costs less than
    both, so 4 are bought: the bound on a product's count is the key's peak over all its
    classes (2 + 2), not one class's."""
    data = {"demand": [{**P5, "nodes": 2},
                       {**P5, "nodes": 2, "spot_ok": True, "spot_usd_per_hour": 50.0}],
            "products": [{"name": "p5-1y", **P5, "term_years": 1}]}
    r = purchase.reserve(_pf(data), CATALOG, DATA, timings=False)
    assert r.counts == [4]
    assert r.report["expected_total_cost_usd"] == _money(4 * R1_P5 * H52)


def test_model_names_map_every_variable_and_row() -> None:
    """``ReserveModel.names``: variable and constraint name → (family, key), as documented in
    :mod:`ptplan.reservations.milp`. 2 weeks, one scenario, class 0 = p5 (firm, 1 node), class 1
    = g6e (spot allowed, 1 node), product p5-1y, a CVaR term."""
    from ptplan.reservations import milp
    from ptplan.reservations.build import build_problem

    data = {"horizon_weeks": 2, "demand": [{**P5, "nodes": 1},
                                           {**G6E, "nodes": 1, "spot_ok": True}],
            "products": [{"name": "p5-1y", **P5, "term_years": 1}]}
    pb = build_problem(_pf(data), CATALOG, DATA, risk=Risk(0.9, 0.5))
    names = milp.build(pb).names
    p5, g6e = "aws/us-east-1/p5.48xlarge", "aws/us-east-1/g6e.xlarge"
    want = {"x_0": ("buy", "p5-1y"), "cvar_0": ("cvar", "expected")}
    for w in (0, 1):
        want |= {f"u_0_0_{w}": ("use", f"expected:0:{w}"),
                 f"u_0_1_{w}": ("use", f"expected:1:{w}"),
                 f"v_0_1_{w}": ("spot", f"expected:1:{w}"),
                 f"cover_0_1_{w}": ("cover", f"expected:1:{w}"),
                 f"capacity_0_0_{w}": ("capacity", f"expected:{p5}:{w}"),
                 f"capacity_0_1_{w}": ("capacity", f"expected:{g6e}:{w}")}
    assert names == want


def test_solve_returns_its_dispatch_and_record() -> None:
    """``milp.solve`` on two p5 nodes (firm) and one g6e node that may run on spot (0.9154 $/h,
    cheaper than g6e's 1-year rate 1.20965): 2 p5-1y bought, the p5 class served by committed
    nodes every week, the g6e class on spot; the model's size by hand. Proven optimal: a MIP
    gap of 0 from HiGHS and from CBC (which reports none); with no product to buy the model is
    an LP, whose gap HiGHS reports as infinite: 0 too. The solve's seconds are a duration, not
    a clock reading."""
    from ptplan.reservations import milp
    from ptplan.reservations.build import build_problem

    data = {"horizon_weeks": 3, "demand": [{**P5, "nodes": 2}, {**G6E, "nodes": 1,
                                                                   "spot_ok": True}],
            "products": [{"name": "p5-1y", **P5, "term_years": 1}]}
    pb = build_problem(_pf(data), CATALOG, DATA)
    for solver in ("highs", "cbc"):
        sol = milp.solve(pb, solver)
        assert (sol.counts, sol.status, sol.gap, sol.solver) == ([2], "optimal", 0.0, solver)
        assert [u.tolist() for u in sol.used] == [[[2.0, 2.0, 2.0]], [[0.0, 0.0, 0.0]]]
        assert [s.tolist() for s in sol.spot] == [[[0.0, 0.0, 0.0]], [[1.0, 1.0, 1.0]]]
        assert 0.0 < sol.seconds < 60.0
        # variables: 1 purchase count, u for 2 classes × 3 weeks, v for g6e's 3 weeks; rows:
        # g6e's 3 cover rows, a capacity row per key and week (2 × 3)
        assert (sol.variables, sol.integers, sol.constraints) == (10, 1, 9)
        assert sol.objective == pytest.approx(3 * 168 * (2 * R1_P5 + SPOT_G6E))
    lp = build_problem(_pf({**data, "products": []}), CATALOG, DATA)
    sol = milp.solve(lp)
    assert (sol.counts, sol.status, sol.gap, sol.integers) == ([], "optimal", 0.0, 0)


def test_a_solver_failure_is_one_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """The model is always feasible; a solver that still returns no solution is a
    PlannerError naming its status and the way out."""
    from ptplan.reservations import milp
    from ptplan.reservations.build import build_problem

    pb = build_problem(_pf({"demand": [{**P5, "nodes": 1}]}), CATALOG, DATA)
    monkeypatch.setattr(milp, "run", lambda *args: "error")
    with pytest.raises(PlannerError) as err:
        milp.solve(pb)
    assert str(err.value) == ("the MILP solver returned 'error' for a model that is always "
                              "feasible; retry with --solver cbc or report a bug")
    monkeypatch.setattr(milp, "run", lambda *args: "time_limit")
    assert milp.solve(pb).status == "time_limit"  # a solution, not proven optimal: kept


def test_held_nodes_are_attributed_first_and_the_next_unit() -> None:
    """p5 on the small catalog, 52 weeks: 1 firm node all year and a 2nd in weeks 40-49; 2
    nodes that may run on spot at 50 $/h in weeks 20-29; 1 node held (30 $/h) until week 10.
    One p5-1y is bought (useful in weeks 10-51: 42/52 = 0.81 > break-even 0.65; a 2nd would be
    useful 10 weeks). Committed use is attributed to held nodes first: the product's
    utilisation is 42/52 = 0.807692. The next unit: demand above the committed capacity, at
    most one node, in weeks 20-29 (spot class) and 40-49 (firm): 20/52 = 0.384615. Costs:
    35.776 × 8,736 + held 30 × 10 × 168 + on demand 10 × 168 × 55.04 + spot 2 × 10 × 168 ×
    50 = 623,406.34."""
    data = {"demand": [{**P5, "nodes": 1}, {**P5, "nodes": 1, "start_week": 40, "end_week": 50},
                       {**P5, "nodes": 2, "start_week": 20, "end_week": 30, "spot_ok": True,
                        "spot_usd_per_hour": 50.0}],
            "existing": [{**P5, "count": 1, "usd_per_hour": 30.0, "expires_week": 10}],
            "products": [{"name": "p5-1y", **P5, "term_years": 1}]}
    r = purchase.reserve(_pf(data), CATALOG, DATA, timings=False)
    assert r.counts == [1]
    total = R1_P5 * H52 + 30 * 10 * 168 + 10 * 168 * OD_P5 + 2 * 10 * 168 * 50.0
    assert r.report["expected_total_cost_usd"] == _money(total) == "623406.34"
    [row] = r.report["purchases"]
    assert (row["expected_utilization"], row["next_unit_utilization"]) == (0.807692, 0.384615)
    assert row["spot_usd_per_hour"] == 50.0


def test_fractional_figures_are_rounded_to_their_places() -> None:
    """Fractional demand keeps 6 decimals in nodes, node-hours, rates and utilisations, 12 in
    probabilities (weights 1 and 2: 1/3, 2/3). 5 weeks: p5 0.12345678 nodes (firm; one node
    held until week 2), g6e 0.76543211 nodes on spot at 1.23456789 $/h (a g6e-1y at 1.2222222
    $/h would serve 0.77 of a node: 205.33 $ a week against 158.75 $ on spot, not bought); one
    lab node held until week 3 with no lab demand (committed capacity alone gets rows)."""
    lab = {"provider": "lab", "region": "local", "instance_type": "h100x8"}
    data = {"horizon_weeks": 5,
            "scenarios": [{"name": "a", "weight": 1.0}, {"name": "b", "weight": 2.0}],
            "demand": [{**P5, "nodes": 0.12345678},
                       {**G6E, "nodes": 0.76543211, "spot_ok": True,
                        "spot_usd_per_hour": 1.23456789}],
            "existing": [{**P5, "count": 1, "usd_per_hour": 30.0, "expires_week": 2},
                         {**lab, "count": 1, "usd_per_hour": 5.0, "expires_week": 3}],
            "products": [{"name": "g6e-1y", **G6E, "term_years": 1, "usd_per_hour": 1.2222222}]}
    r = purchase.reserve(_pf(data), CATALOG, DATA, timings=False)
    rep = r.report
    assert r.counts == [0]
    assert [s["probability"] for s in rep["scenarios"]] == [0.333333333333, 0.666666666667]
    for s in rep["scenarios"]:
        # (0.12345678 + 0.76543211) × 5 × 168 = 746.6666676; held p5 serves 2 weeks:
        # 2 × 0.12345678 × 168 = 41.48147808
        assert (s["demand_node_hours"], s["committed_node_hours_used"]) == (746.666668,
                                                                             41.481478)
    [row] = rep["purchases"]
    assert (row["effective_usd_per_hour"], row["spot_usd_per_hour"], row["count"],
            row["expected_utilization"]) == (1.222222, 1.234568, 0, None)
    cov = {(c["scenario"], c["instance_type"], c["week"]): c for c in rep["coverage"]}
    assert cov["a", "p5.48xlarge", 0] == {
        "scenario": "a", **P5, "week": 0, "demand_nodes": 0.123457, "spot_ok_nodes": 0.0,
        "committed_nodes": 1.0, "committed_used_nodes": 0.123457,
        "spend_covered_nodes": 0.0, "on_demand_nodes": 0.0,
        "spot_nodes": 0.0}
    assert cov["b", "p5.48xlarge", 3]["on_demand_nodes"] == 0.123457
    assert cov["b", "g6e.xlarge", 4] == {
        "scenario": "b", **G6E, "week": 4, "demand_nodes": 0.765432, "spot_ok_nodes": 0.765432,
        "committed_nodes": 0.0, "committed_used_nodes": 0.0,
        "spend_covered_nodes": 0.0, "on_demand_nodes": 0.0,
        "spot_nodes": 0.765432}
    for scenario in ("a", "b"):
        for w in range(3):
            assert cov[scenario, "h100x8", w] == {
                "scenario": scenario, **lab, "week": w, "demand_nodes": 0.0,
                "spot_ok_nodes": 0.0, "committed_nodes": 1.0, "committed_used_nodes": 0.0,
        "spend_covered_nodes": 0.0,
                "on_demand_nodes": 0.0, "spot_nodes": 0.0}
        assert (scenario, "h100x8", 3) not in cov
    assert len(cov) == 2 * (5 + 5 + 3)


def test_a_terms_last_partial_week() -> None:
    """53 weeks, one p5 node all along, one p5-1y bought: its term (8,760 h) covers 52 weeks and
    24 h of week 52, committed there 24/168 = 0.142857 of a node; the next unit is that week's
    uncovered 6/7 node over its 1/7 week: (6/7 × 1/7) / (52 + 1/7) = 0.002348."""
    data = {"horizon_weeks": 53, "demand": [{**P5, "nodes": 1}],
            "products": [{"name": "p5-1y", **P5, "term_years": 1}]}
    r = purchase.reserve(_pf(data), CATALOG, DATA, timings=False)
    assert r.counts == [1]
    week = next(c for c in r.report["coverage"] if c["week"] == 52)
    assert (week["committed_nodes"], week["committed_used_nodes"], week["on_demand_nodes"]) == \
        (0.142857, 0.142857, 0.857143)
    row = r.report["purchases"][0]
    assert row["next_unit_utilization"] == round(6 / 49 / (52 + 1 / 7), 6)
    assert row["expected_utilization"] == 1.0  # used in every hour of its term


def test_a_stale_catalog_is_warned_about_once() -> None:
    """The catalog's staleness warning is appended to the problem's warnings when it has one,
    and nothing is appended when it has none."""
    import datetime as dt
    from dataclasses import replace

    data = {"demand": [{**P5, "nodes": 1}], "products": [{"name": "p5-1y", **P5,
                                                           "term_years": 1}]}
    stale = replace(CATALOG, as_of="2001-01-01")
    warning = stale.staleness_warning()
    assert warning and "days old" in warning
    assert purchase.reserve(_pf(data), stale, DATA, timings=False).report["warnings"] == [warning]
    fresh = replace(CATALOG, as_of=dt.date.today().isoformat())
    assert purchase.reserve(_pf(data), fresh, DATA, timings=False).report["warnings"] == []
