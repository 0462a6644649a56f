"""A sweep's rounds aimed at where the two ends' plans' costs cross (ptplan.scenarios.sweep):
which points they choose, and that aiming changes only how many points are solved, never a
reported plan, price or switch."""

from __future__ import annotations

import pytest

from ptplan.scenarios.runner import Outcome, Runner
from ptplan.scenarios.sweep import _next_round, linspace, sweep, sweep_report
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


class _NoPlanAbove:
    """A runner whose scenarios above a swept value have no plan (as a budget would make
    them); the others are solved for real."""

    def __init__(self, inner: Runner, limit: float) -> None:
        self.inner, self.limit, self.workers = inner, limit, inner.workers

    def ready(self) -> None:
        self.inner.ready()

    def map(self, jobs):
        out = []
        for job in jobs:
            value = job[-1].value if job else 1.0
            if value > self.limit:
                out.append(Outcome(tuple(r.text for r in job), None, "no plan (test)"))
            else:
                out.extend(self.inner.map([job]))
        return out


def test_gaps_with_an_end_without_a_plan_are_bisected() -> None:
    s = setup()
    sel, op = parse_partial("capacity_type=spot *=")
    values = linspace(0.2, 3.0, 29)
    with Runner(s, workers=1) as r:
        base, points = sweep(s, sel, op, values, _NoPlanAbove(r, 1.55))
    rep = sweep_report(s, sel, op, base, points)
    rows = rep["points"]
    # the switch to "no plan" is found exactly: the last value with a plan and the first
    # without are both solved
    last = max(k for k, v in enumerate(values) if v <= 1.55)
    assert rows[last]["solved"] and rows[last + 1]["solved"]
    assert rows[last]["error"] is None and rows[last + 1]["error"] == "no plan (test)"
    assert all(row["error"] == "no plan (test)" for row in rows[last + 1:])


def test_objective_time_sweeps_are_bisected_evenly() -> None:
    s = setup(objective="time")
    sel, op = parse_partial("capacity_type=spot *=")
    values = linspace(0.2, 3.0, 21)
    with Runner(s, workers=1) as r:
        _, p1 = sweep(s, sel, op, values, r)
        _, p2 = sweep(s, sel, op, values, r, aim=False)
    # no cost crossing is aimed at: the same points are solved
    assert [p.outcome is not None for p in p1] == [p.outcome is not None for p in p2]


def test_the_baseline_is_the_base_rules_alone() -> None:
    s = setup()
    sel, op = parse_partial("capacity_type=spot *=")
    values = linspace(0.5, 2.0, 5)
    with Runner(s, workers=1) as r:
        base, points = sweep(s, sel, op, values, r)
    assert base.rules == ()
    assert points[0].outcome is not None and points[0].outcome.rules != ()


def test_the_last_value_where_the_left_plan_costs_no_more() -> None:
    from ptplan.scenarios.sweep import _last_no_dearer

    def line(slope: float, at: float):
        return lambda k: slope * (k - at)  # A's excess over B crosses 0 at ``at``

    zero = lambda k: 0.0  # noqa: E731
    assert _last_no_dearer(0, 10, line(1.0, 6.0), zero) == 6  # equal at 6: still A
    assert _last_no_dearer(0, 10, line(1.0, 6.5), zero) == 6
    assert _last_no_dearer(0, 10, line(1.0, 0.5), zero) == 0  # dearer from the first inside
    assert _last_no_dearer(0, 10, line(1.0, 20.0), zero) == 9  # never dearer inside
    assert _last_no_dearer(3, 4, line(1.0, 0.0), zero) == 3  # no value inside
    assert _last_no_dearer(5, 9, line(1.0, 7.0), zero) == 7
    # only values inside the gap are priced
    priced: list[int] = []
    _last_no_dearer(5, 9, lambda k: priced.append(k) or 0.0, zero)
    assert priced == [6, 7, 8]


def test_adjacent_solved_points_are_no_gap() -> None:
    solved = _solved(0, 1, 10)  # plans differ at 0 and 1, but nothing lies between them
    assert _next_round(solved, 2) == [4, 7]
    assert _next_round(solved, 2, lambda i, j: None) == [4, 7]
