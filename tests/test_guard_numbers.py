"""The guard's decision under damaged numbers: nothing non-finite, negative or out of order can
turn a stop into ok (issue: a guard a NaN silences).

Properties over the decision table of :func:`ptplan.spend.guard.decide`:

* any NaN or infinity in the series, the hours, the window or the target values is refused
  (one-line :class:`InputError`, exit 2), never decided;
* the series' order does not matter;
* spending at or past the stop threshold without a target is always ``stop``;
* ``ok`` only when both the spend and the forecast are below the warn threshold;
* a bill that reaches the stop threshold by now is ``stop``, whatever came before it;
* figures that overflow trip the breaker and are reported as null, never as NaN.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_guard import plan as load_test_plan

from ptplan.core.errors import InputError
from ptplan.spend.guard import decide, parse_target

PLAN = load_test_plan("grpo-aws")
BAD = [math.nan, math.inf, -math.inf]
finite_hours = st.floats(0.0, 500.0, allow_nan=False)
finite_cost = st.floats(0.0, 200_000.0, allow_nan=False)
series_st = st.lists(st.tuples(finite_hours, finite_cost), min_size=1, max_size=12)


def _cumulative(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """A plausible cumulative series: costs rising with the hours."""
    hs = sorted(h for h, _ in points)
    cs = sorted(c for _, c in points)
    return list(zip(hs, cs, strict=True))


@given(series_st, st.integers(0, 11), st.sampled_from(BAD), st.booleans())
def test_non_finite_series_point_is_refused(points: list[tuple[float, float]], i: int,
                                           bad: float, in_hours: bool) -> None:
    pts = list(points)
    k = i % len(pts)
    pts[k] = (bad, pts[k][1]) if in_hours else (pts[k][0], bad)
    with pytest.raises(InputError, match="not a finite number"):
        decide(PLAN, pts, 10.0, None)


@given(series_st, st.sampled_from([*BAD, -1.0]))
def test_non_finite_or_negative_hours_refused(points: list[tuple[float, float]],
                                              bad: float) -> None:
    with pytest.raises(InputError, match="not a finite number"):
        decide(PLAN, _cumulative(points), bad, None)


@pytest.mark.parametrize("window", [math.nan, math.inf, -math.inf, 0.0, -5.0])
def test_bad_window_refused(window: float) -> None:
    """--window nan used to turn a stop into ok."""
    stop = float(PLAN.budget_stop_usd or PLAN.total_cost_usd)
    with pytest.raises(InputError, match="--window"):
        decide(PLAN, [(10.0, stop * 2)], 10.0, None, window=window)


def test_nan_last_point_after_overspend_is_refused() -> None:
    """The reported repro: $30,000 spent, then a point of "nan"."""
    with pytest.raises(InputError):
        decide(PLAN, [(10.0, 30_000.0), (11.0, float("nan"))], 11.0, None)


@pytest.mark.parametrize("bad", BAD)
def test_non_finite_target_value_refused(bad: float) -> None:
    goal = parse_target("reward>=0.8")
    with pytest.raises(InputError, match="reward"):
        decide(PLAN, [(10.0, 100.0)], 10.0, 5, goal, [(4, 0.5), (5, bad)])


def test_negative_steps_refused() -> None:
    with pytest.raises(InputError, match="steps"):
        decide(PLAN, [(10.0, 100.0)], 10.0, -3)


@settings(max_examples=200, deadline=None)
@given(series_st, st.randoms(use_true_random=False), finite_hours, st.none() | st.integers(0, 900))
def test_order_of_points_does_not_matter(points: list[tuple[float, float]], rnd: object,
                                         hours: float, done: int | None) -> None:
    pts = _cumulative(points)
    shuffled = list(pts)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    assert decide(PLAN, shuffled, hours, done) == decide(PLAN, pts, hours, done)


@settings(max_examples=200, deadline=None)
@given(series_st, finite_hours, st.none() | st.integers(0, 900),
       st.floats(0.01, 1000.0, allow_nan=False))
def test_decision_table_invariants(points: list[tuple[float, float]], hours: float,
                                   done: int | None, window: float) -> None:
    pts = _cumulative(points)
    r = decide(PLAN, pts, hours, done, window=window)
    for key in ("spent_usd", "burn_usd_per_hour", "forecast_usd", "warn_usd", "stop_usd"):
        assert r[key] is None or math.isfinite(r[key])
    if any(r[k] is None for k in ("spent_usd", "burn_usd_per_hour", "forecast_usd")):
        assert r["decision"] == "stop"
    if r["spent_usd"] is not None and r["spent_usd"] >= r["stop_usd"] + 0.01:  # rounded to cents
        assert r["decision"] == "stop"
    if r["decision"] == "ok":
        assert r["spent_usd"] < r["warn_usd"] and r["forecast_usd"] < r["warn_usd"]
    if hours > 0:
        over = [*pts, (hours, max(c for _, c in pts) + r["stop_usd"])]
        assert decide(PLAN, over, hours, done, window=window)["decision"] == "stop"


def test_overflowing_figures_trip_the_breaker() -> None:
    """Finite inputs whose forecast overflows: stop, never ok."""
    r = decide(PLAN, [(1e-300, 1e308), (1.0, 1e308)], 1.0, 1, window=1e-300)
    assert r["decision"] == "stop"
    r = decide(PLAN, [(5e-324, 1.0)], 8.0, None)
    assert r["decision"] == "stop" and r["burn_usd_per_hour"] is None
    assert any("not a finite number" in line for line in r["reasons"])


def test_repeated_hours_and_falling_series_never_unsee_spend() -> None:
    """Two rows for one hour (a re-pulled bill) or a cumulative cost that falls: the guard
    reads the running maximum, so a stop stays a stop."""
    stop = float(PLAN.budget_stop_usd or PLAN.total_cost_usd)
    assert decide(PLAN, [(1.0, 0.0), (1.0, stop)], 1.0, None)["decision"] == "stop"
    assert decide(PLAN, [(1.0, stop), (2.0, 0.0)], 2.0, None)["decision"] == "stop"
