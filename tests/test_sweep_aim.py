"""A sweep's rounds aimed at where the two ends' plans' costs cross (optimizer.whatif.sweep):
which points they choose, and that aiming changes only how many points are solved, never a
reported plan, price or switch."""

from __future__ import annotations

import pytest

from optimizer.whatif.runner import Outcome, Runner
from optimizer.whatif.sweep import _next_round, linspace, sweep, sweep_report
from tests.test_whatif import parse_partial, setup


def _solved(*at: int) -> dict[int, Outcome]:
    # distinct infeasible outcomes: never "the same optimum", so every gap is open
    return {i: Outcome((f"r{i}",), None, f"e{i}") for i in at}


def test_an_aimed_gap_gets_the_two_points_around_its_crossing() -> None:
    solved = _solved(0, 10)
    assert _next_round(solved, 2, lambda i, j: 6) == [6, 7]
    assert _next_round(solved, 2, lambda i, j: 0) == [1]  # crossing at the left end
    assert _next_round(solved, 2, lambda i, j: 9) == [9]  # at the right end
    assert _next_round(solved, 8, lambda i, j: 4) == [4, 5]  # idle workers: still two


def test_gaps_without_a_crossing_are_bisected_evenly() -> None:
    solved = _solved(0, 10, 20)
    assert _next_round(solved, 2) == [5, 15]
    assert _next_round(solved, 4) == [3, 6, 13, 16]
    # one gap aimed, the other bisected with the workers to itself
    aimed = _next_round(solved, 2, lambda i, j: 2 if i == 0 else None)
    assert aimed == [2, 3, 13, 16]
    assert _next_round(_solved(0, 1, 2), 2, lambda i, j: 0) == []  # no gap left


@pytest.mark.parametrize("swept, lo, hi, steps", [("capacity_type=spot *=", 0.2, 3.0, 41),
                                                  ("gpu=H100,capacity_type=on_demand =",
                                                   5.0, 40.0, 41)])
def test_aiming_solves_fewer_points_and_reports_the_same(swept: str, lo: float, hi: float,
                                                         steps: int) -> None:
    s = setup()
    sel, op = parse_partial(swept)
    values = linspace(lo, hi, steps)
    with Runner(s, workers=1) as r:
        b1, p1 = sweep(s, sel, op, values, r)
        b2, p2 = sweep(s, sel, op, values, r, aim=False)
    r1, r2 = sweep_report(s, sel, op, b1, p1), sweep_report(s, sel, op, b2, p2)
    assert r1["switches"] == r2["switches"] and r1["switches"]
    for a, b in zip(r1["points"], r2["points"], strict=True):
        a, b = dict(a), dict(b)
        a.pop("solved"), b.pop("solved")
        assert a == b
    assert r1["points_solved"] < r2["points_solved"]
