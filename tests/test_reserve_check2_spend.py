"""The reserve re-check (``optimizer/reservations/check.py``) with a spend commitment over two
demand classes and two scenarios, costed by hand, and the spend checks of :func:`verify`.

Two GCP machine types and one flexible CUD, 28 % off the eligible part of the price:

* key 0 at 10 $/h, 20 % eligible: a covered node-hour consumes c = 2 × 0.72 = 1.44 $ of the
  commitment, replaces s = 2 $ and leaves 8 $ on demand;
* key 1 at 5 $/h, 60 % eligible: c = 3 × 0.72 = 2.16, s = 3, 2 $ left on demand.

Both save 1/0.72 $ per commitment dollar, so the CUD covers class 0 first (ties go by class
index). It is bought at 10 steps of 0.72 $/h = 7.2 $/h, active all of week 0 and half of week
1 (3.6 $/h there): paid 1.5 × 168 = 252 h, 10 × 0.72 × 252 = 1,814.4 $. Demand (nodes, both
weeks): scenario ``low`` class 0: 2, class 1: 2; ``high`` class 0: 3, class 1: 4;
probabilities 0.25 and 0.75. No products.
"""

from __future__ import annotations

import numpy as np
import pytest

from ptplan.reservations.check import evaluate, objective, verify
from ptplan.reservations.problem import DemandClass, Problem, Risk, SpendRow

W, H = 2, 168.0
KEYS = [("gcp", "us-central1", "a3-highgpu-8g"), ("gcp", "us-central1", "a2-highgpu-1g")]


def exact(x: float) -> object:
    return pytest.approx(x, rel=1e-9, abs=0)


def close(got: np.ndarray, want: list[list[float]]) -> None:
    """Node counts to 1e-9 (a float residue of 4e-16 stands for 0)."""
    np.testing.assert_allclose(got, np.array(want), rtol=1e-9, atol=1e-9)


def _problem(risk: Risk | None = None) -> Problem:
    cud = SpendRow(
        name="cud",
        kind="flexible_cud",
        provider="gcp",
        term_years=1,
        rates={0: (1.44, 2.0), 1: (2.16, 3.0)},
        step=0.72,
        source="test",
        assumption=False,
        active=np.array([1.0, 0.5]),
    )
    classes = [
        DemandClass(0, None, np.array([[2.0, 2.0], [3.0, 3.0]])),
        DemandClass(1, None, np.array([[2.0, 2.0], [4.0, 4.0]])),
    ]
    return Problem(
        name="t",
        weeks=W,
        scenarios=["low", "high"],
        weights=[1.0, 3.0],
        multipliers=[1.0, 1.0],
        prob=np.array([0.25, 0.75]),
        keys=KEYS,
        on_demand=[10.0, 5.0],
        classes=classes,
        products=[],
        existing_nodes=np.zeros((2, W)),
        existing_cost_usd=0.0,
        risk=risk,
        spend=[cud],
    )


def test_one_commitment_over_two_classes_in_two_scenarios() -> None:
    """Week 0 (budget 7.2 $/h): low covers class 0's 2 nodes (2.88 $) and class 1's 2
    (4.32 $); high covers class 0's 3 (4.32 $), then 2.88 / 2.16 = 4/3 of class 1, whose
    other 8/3 run on demand. Week 1 (budget 3.6 $/h): low covers class 0's 2 (2.88 $), then
    0.72 / 2.16 = 1/3 of class 1; high covers 3.6 / 1.44 = 2.5 of class 0 and none of class
    1. The on-demand $/h: week 0 low 2×8 + 2×2 = 20, high 3×8 + 4/3×2 + 8/3×5 = 40; week 1
    low 2×8 + 1/3×2 + 5/3×5 = 25, high 2.5×8 + 0.5×10 + 4×5 = 45."""
    ev = evaluate(_problem(), [], [10])
    close(ev.spent[0], [[7.2, 3.6], [7.2, 3.6]])
    close(ev.covered[0], [[2.0, 2.0], [3.0, 2.5]])
    close(ev.covered[1], [[2.0, 1 / 3], [4 / 3, 0.0]])
    close(ev.on_demand[0], [[0.0, 0.0], [0.0, 0.5]])
    close(ev.on_demand[1], [[0.0, 5 / 3], [8 / 3, 4.0]])
    close(ev.used[0], [[0.0, 0.0], [0.0, 0.0]])
    assert ev.new_cost_usd == exact(1814.4)
    assert ev.on_demand_cost.tolist() == [exact(H * (20 + 25)), exact(H * (40 + 45))]
    assert ev.total.tolist() == [exact(1814.4 + 7560.0), exact(1814.4 + 14280.0)]
    assert ev.expected(_problem()) == exact(0.25 * 9374.4 + 0.75 * 16094.4)


def test_cvar_of_the_two_scenarios_with_the_commitment() -> None:
    """CVaR at 0.5 of costs 9,374.4 (p 0.25) and 16,094.4 (p 0.75): the worst half of the
    mass is all ``high``, 16,094.4; weight 0.5: 0.5 × 14,414.4 + 0.5 × 16,094.4."""
    pb = _problem(Risk(0.5, 0.5))
    assert objective(pb, evaluate(pb, [], [10])) == exact(0.5 * 14414.4 + 0.5 * 16094.4)


def test_no_steps_bought_is_all_on_demand() -> None:
    ev = evaluate(_problem(), [], [0])
    assert ev.spent[0].tolist() == [[0.0, 0.0], [0.0, 0.0]]
    assert ev.total.tolist() == [exact(H * 2 * (20 + 10)), exact(H * 2 * (30 + 20))]
    assert ev.total.tolist() == evaluate(_problem(), []).total.tolist()


# ---- verify with a spend commitment ------------------------------------------------------------


def _answer() -> tuple[Problem, float, dict]:
    pb = _problem()
    ev = evaluate(pb, [], [10])
    parts = {
        "used": [u.copy() for u in ev.used],
        "spot": [s.copy() for s in ev.spot],
        "steps": [10],
        "covered": [z.copy() for z in ev.covered],
        "spent": [q.copy() for q in ev.spent],
    }
    return pb, ev.expected(pb), parts


def test_the_recomputed_answer_passes() -> None:
    pb, obj, parts = _answer()
    assert verify(pb, [], obj, "optimal", **parts) == []


def test_steps_must_be_whole_and_non_negative() -> None:
    pb, obj, parts = _answer()
    for bad in ([-1], [2.5]):
        parts["steps"] = bad
        got = verify(pb, [], obj, "feasible", **parts)
        assert f"commitment steps must be whole and non-negative: {bad}" in got


@pytest.mark.parametrize(
    ("s", "w", "extra", "flagged"),
    [
        (0, 0, 1e-3, True),  # 7.201 $/h of a 7.2 $/h commitment
        (1, 1, 1e-3, True),  # 3.601 of the 3.6 $/h of the half-active week
        (1, 1, 3.6, True),  # the full 7.2 $/h in a week it is active half of
        (0, 0, 1e-6, False),  # within TOL × 7.2 = 7.2e-6
        (0, 0, 1e-5, True),  # beyond it
    ],
)
def test_more_spend_than_committed_is_flagged(s: int, w: int, extra: float, flagged: bool) -> None:
    pb, obj, parts = _answer()
    parts["spent"][0][s, w] += extra
    got = verify(pb, [], obj, "optimal", **parts)
    msg = "commitment cud: the MILP consumes more than its 7.2 $/h in some week"
    assert got == ([msg] if flagged else [])


def test_nothing_bought_and_nothing_spent_passes_without_spent() -> None:
    """No spend arrays passed: zero spend assumed, within 0 steps."""
    pb = _problem()
    ev = evaluate(pb, [], [0])
    assert verify(pb, [], ev.expected(pb), "optimal", ev.used, ev.spot, [0]) == []


@pytest.mark.parametrize("which", ["negative", "over_demand"])
def test_spend_coverage_outside_the_demand(which: str) -> None:
    pb, obj, parts = _answer()
    if which == "negative":
        parts["covered"][1][0, 1] = -1.0
    else:
        parts["covered"][1][1, 0] += 3.0  # 4/3 + 3 > 4 nodes
    got = verify(pb, [], obj, "optimal", **parts)
    assert got == [
        "class 1 (gcp/us-central1/a2-highgpu-1g): dispatch outside 0 <= committed + spot <= demand"
    ]


def test_the_tolerance_of_a_commitment_of_nothing_is_one_millionth_of_a_dollar() -> None:
    """TOL × max(1, committed $/h): with 0 steps bought, 1.5e-6 $/h spent is flagged, 0.5e-6
    is not."""
    pb = _problem()
    ev = evaluate(pb, [], [0])
    for extra, want in (
        (1.5e-6, ["commitment cud: the MILP consumes more than its 0 $/h in some week"]),
        (0.5e-6, []),
    ):
        spent = [np.full((2, W), extra)]
        got = verify(pb, [], ev.expected(pb), "optimal", ev.used, ev.spot, [0], ev.covered, spent)
        assert got == want


def test_no_steps_given_means_none_bought() -> None:
    """``verify`` without ``steps`` checks the purchase with no commitment bought: the
    all-on-demand cost passes, the cost with the 10 steps does not."""
    pb = _problem()
    none, ten = evaluate(pb, [], [0]), evaluate(pb, [], [10])
    assert verify(pb, [], none.expected(pb), "optimal", none.used, none.spot) == []
    got = verify(pb, [], ten.expected(pb), "feasible", ten.used, ten.spot)
    assert got == [
        f"recomputed objective {none.expected(pb):.4f} exceeds the MILP's "
        f"{ten.expected(pb):.4f} for the same purchase"
    ]
