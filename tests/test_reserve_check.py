"""The reserve answer's independent re-check (``optimizer/reservations/check.py``) on problems small
enough to cost by hand, and every violation :func:`verify` reports, fired one at a time.

One instance type at $10/h on demand, 4 weeks (168 h each), two scenarios; one product: a
1-year commitment at $6/h with no upfront, active every week, so one node costs the horizon
4 × 168 × $6 = $4,032. Demand classes: ``firm`` may not run on spot; ``flex`` may, at $4/h.
A committed node saves the dearest alternative first: firm ($10) before flex ($4).
"""

from __future__ import annotations

import numpy as np
import pytest

from ptplan.reservations.check import evaluate, on_demand_only, verify
from ptplan.reservations.problem import DemandClass, Problem, ProductRow

W, H = 4, 168.0
KEY = ("aws", "us-east-1", "p5.48xlarge")


def _problem(classes: list[tuple[float | None, list[float]]], on_demand: float | None = 10.0
             ) -> Problem:
    """classes: (spot $/h or None, nodes per scenario, constant over the weeks)."""
    dcs = [DemandClass(0, spot, np.array([[n] * W for n in per_s], dtype=float))
           for spot, per_s in classes]
    product = ProductRow("p5-1y", 0, 1, 6.0, 0.0, "test", False, np.ones(W))
    return Problem(name="t", weeks=W, scenarios=["low", "high"], weights=[1.0, 1.0],
                   multipliers=[1.0, 1.0], prob=np.array([0.5, 0.5]), keys=[KEY],
                   on_demand=[on_demand], classes=dcs, products=[product],
                   existing_nodes=np.zeros((1, W)), existing_cost_usd=0.0, risk=None)


def test_product_costs_the_horizon() -> None:
    assert _problem([(None, [1, 1])]).products[0].unit_cost_usd == 4 * 168 * 6.0


def test_committed_nodes_serve_the_dearest_demand_first() -> None:
    """flex (spot $4) is listed first; firm (on demand $10) still gets the committed nodes.
    Scenario low: flex 2, firm 3; high: flex 2, firm 5. Buying 4: low → firm 3 + flex 1,
    flex 1 on spot; high → firm 4, firm 1 on demand, flex 2 on spot."""
    pb = _problem([(4.0, [2, 2]), (None, [3, 5])])
    ev = evaluate(pb, [4])
    flex, firm = 0, 1
    assert ev.used[firm][:, 0].tolist() == [3, 4] and ev.used[flex][:, 0].tolist() == [1, 0]
    assert ev.spot_cost.tolist() == [1 * 4 * W * H, 2 * 4 * W * H]
    assert ev.on_demand_cost.tolist() == [0.0, 1 * 10 * W * H]
    assert ev.new_cost_usd == 4 * 4032.0
    assert ev.total.tolist() == [16128.0 + 2688.0, 16128.0 + 5376.0 + 6720.0]


def test_spot_cheaper_than_on_demand_orders_by_spot_price() -> None:
    """Two spot-ok classes, $4 and $7: the $7 one is served first."""
    pb = _problem([(4.0, [1, 1]), (7.0, [1, 1])])
    ev = evaluate(pb, [1])
    assert ev.used[1][:, 0].tolist() == [1, 1] and ev.used[0][:, 0].tolist() == [0, 0]
    assert ev.spot_cost.tolist() == [4 * W * H] * 2


def test_two_classes_share_the_commitment() -> None:
    """Two firm classes of 2 nodes each and 3 nodes bought: 2 + 1 committed, 1 on demand; the
    remaining capacity goes down as each class takes its share."""
    pb = _problem([(None, [2, 2]), (None, [2, 2])])
    ev = evaluate(pb, [3])
    assert ev.used[0][:, 0].tolist() == [2, 2] and ev.used[1][:, 0].tolist() == [1, 1]
    assert ev.on_demand_cost.tolist() == [10 * W * H] * 2


def test_two_spot_classes_add_up() -> None:
    pb = _problem([(4.0, [1, 2]), (5.0, [1, 1])])
    ev = evaluate(pb, [0])
    assert ev.spot_cost.tolist() == [(4 + 5) * W * H, (8 + 5) * W * H]


def test_on_demand_only_sums_every_class_per_scenario() -> None:
    pb = _problem([(4.0, [2, 2]), (None, [3, 5])])
    assert on_demand_only(pb).tolist() == [5 * 10 * W * H, 7 * 10 * W * H]


# ---- verify: every violation -------------------------------------------------------------------

def _answer(pb: Problem, counts: list[int]) -> tuple[float, list[np.ndarray], list[np.ndarray]]:
    ev = evaluate(pb, counts)
    return ev.expected(pb), [u.copy() for u in ev.used], [s.copy() for s in ev.spot]


@pytest.fixture
def case():
    pb = _problem([(4.0, [2, 2]), (None, [3, 5])])
    obj, used, spot = _answer(pb, [4])
    assert obj == 0.5 * (16128.0 + 2688.0) + 0.5 * (16128.0 + 5376.0 + 6720.0)
    return pb, obj, used, spot


def test_consistent_answer_passes(case) -> None:
    pb, obj, used, spot = case
    assert verify(pb, [4], obj, "optimal", used, spot) == []


def test_fractional_or_negative_counts(case) -> None:
    pb, obj, used, spot = case
    got = verify(pb, [-1], obj, "feasible", used, spot)
    assert "purchase counts must be whole and non-negative: [-1]" in got
    got = verify(pb, [3.5], obj, "feasible", used, spot)  # type: ignore[list-item]
    assert "purchase counts must be whole and non-negative: [3.5]" in got


def test_milp_objective_one_percent_low(case) -> None:
    pb, obj, used, spot = case
    got = verify(pb, [4], obj * 0.99, "optimal", used, spot)
    assert got == [f"recomputed objective {obj:.4f} exceeds the MILP's {obj * 0.99:.4f} for the "
                   "same purchase"]


def test_milp_objective_one_percent_high(case) -> None:
    """Only an optimal MILP must match the cheapest use of its purchase."""
    pb, obj, used, spot = case
    assert verify(pb, [4], obj * 1.01, "feasible", used, spot) == []
    got = verify(pb, [4], obj * 1.01, "optimal", used, spot)
    assert got == [f"the MILP's objective {obj * 1.01:.4f} exceeds the cheapest use of its own "
                   f"purchase ({obj:.4f})"]


@pytest.mark.parametrize("which", ["used_negative", "spot_negative", "over_demand"])
def test_dispatch_outside_the_demand(case, which: str) -> None:
    pb, obj, used, spot = case
    if which == "used_negative":
        used[0][0, 0] = -1.0
    elif which == "spot_negative":
        spot[0][0, 0] = -1.0
    else:
        spot[0][0, 0] += 1.0  # flex: committed 1 + spot 2 > demand 2
    got = verify(pb, [4], obj, "optimal", used, spot)
    assert got == ["class 0 (aws/us-east-1/p5.48xlarge): dispatch outside 0 <= committed + spot "
                   "<= demand"]


def test_spot_for_firm_demand(case) -> None:
    pb, obj, used, spot = case
    used[1][1, 0] -= 1.0
    spot[1][1, 0] += 1.0
    assert verify(pb, [4], obj, "optimal", used, spot) == [
        "class 1: spot used by demand that may not run on spot"]


def test_more_committed_nodes_than_bought(case) -> None:
    """Each class within its demand, together over the 4 nodes: firm 3 + flex 2 in scenario
    low."""
    pb, obj, used, spot = case
    used[0][0, :] = 2.0
    spot[0][0, :] = 0.0
    assert verify(pb, [4], obj, "optimal", used, spot) == [
        "the MILP uses more committed nodes than held + bought in some week"]
