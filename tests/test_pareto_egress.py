"""``egress_dominated`` (per class of equal egress, running minima) against the definition
checked on every pair, on random and adversarial sites: ties in busy time, in $/h and in
egress, one class only, every option its own class, zero egress, break-even exactly."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ptplan.planner.frontier.pareto import egress_dominated


def every_pair(t: np.ndarray, c: np.ndarray, e: np.ndarray) -> np.ndarray:
    """The definition: b is dropped when some a has t_a ≤ t_b, c_a ≤ c_b and
    e_a + c_a·t_b < e_b + c_b·t_b (with a relative tolerance of 1e-9 on b's side)."""
    out = np.zeros(len(t), dtype=bool)
    for b in range(len(t)):
        at_b = e[b] + c[b] * t[b]
        tol = 1e-9 * max(1.0, abs(at_b))
        for a in range(len(t)):
            if t[a] <= t[b] and c[a] <= c[b] and e[a] + c[a] * t[b] < at_b - tol:
                out[b] = True
                break
    return out


def _site(draw_t, draw_c, draw_l, rate):
    t = np.asarray(draw_t, dtype=float)
    c = np.asarray(draw_c, dtype=float)
    e = np.asarray(draw_l, dtype=float) * rate
    return t, c, e


small = st.sampled_from([0.5, 1.0, 1.5, 2.0, 3.0, 8.0])  # few values: many ties


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_equals_every_pair(data):
    n = data.draw(st.integers(0, 40))
    if n == 0:
        empty = egress_dominated(np.zeros(0), np.zeros(0), np.zeros(0))
        assert len(empty) == 0 and empty.dtype == bool
        return
    tie_heavy = data.draw(st.booleans())
    floats = small if tie_heavy else st.floats(0.1, 50.0, allow_nan=False)
    t = data.draw(st.lists(floats, min_size=n, max_size=n))
    c = data.draw(st.lists(st.floats(1.0, 100.0) if not tie_heavy else small.map(lambda x: 10 * x),
                           min_size=n, max_size=n))
    levels = data.draw(st.lists(st.integers(0, 6), min_size=n, max_size=n))
    rate = data.draw(st.sampled_from([0.0, 0.37, 5.0, 40.0]))
    t, c, e = _site(t, c, levels, rate)
    assert egress_dominated(t, c, e).tolist() == every_pair(t, c, e).tolist()


def test_hand_shapes():
    cases = [
        # one class (no egress anywhere): nothing beats strictly on a plateau except cheaper
        (np.array([2.0, 2.0, 1.0]), np.array([10.0, 9.0, 20.0]), np.zeros(3)),
        # every option its own egress class
        (np.array([1.0, 2.0, 3.0, 4.0]), np.array([4.0, 3.0, 2.0, 1.0]),
         np.array([0.0, 1.0, 2.0, 3.0])),
        # break-even exactly: 15 = (100 − 90)·1.5 → kept; a cent less egress → dropped
        (np.array([1.5, 1.5]), np.array([100.0, 90.0]), np.array([0.0, 15.0])),
        (np.array([1.5, 1.5]), np.array([100.0, 90.0]), np.array([0.0, 14.99])),
        # duplicates: identical options never drop each other
        (np.array([2.0, 2.0, 2.0]), np.array([5.0, 5.0, 5.0]), np.array([3.0, 3.0, 3.0])),
        # the cheapest option (t 3, $1/h) is slower than the others: it beats none of them;
        # (t 2, $60/h, $1) loses to (t 1, $50/h, no egress): 0 + 50·2 < 1 + 60·2
        (np.array([1.0, 3.0, 2.0]), np.array([50.0, 1.0, 60.0]), np.array([0.0, 1.0, 1.0])),
        # a single option
        (np.array([1.0]), np.array([1.0]), np.array([1.0])),
    ]
    for t, c, e in cases:
        assert egress_dominated(t, c, e).tolist() == every_pair(t, c, e).tolist(), (t, c, e)
    t, c, e = cases[3]
    assert egress_dominated(t, c, e).tolist() == [True, False]
    t, c, e = cases[5]
    assert egress_dominated(t, c, e).tolist() == [False, False, True]


def test_large_random_sites():
    rng = np.random.default_rng(7)
    for _ in range(20):
        n = int(rng.integers(50, 300))
        t = np.round(rng.uniform(0.5, 20.0, n), 1)
        c = np.round(rng.uniform(1.0, 200.0, n), 0)
        e = rng.integers(0, 12, n) * float(rng.choice([0.25, 3.0, 17.5]))
        assert egress_dominated(t, c, e).tolist() == every_pair(t, c, e).tolist()


def test_the_tolerance_is_relative_to_bs_cost_share_and_at_least_1e_9():
    """At b's share 150 (t 1.5 h × $100/h) the tolerance is 1.5e-7: a saving 1e-8 short of
    break-even is a tie, kept; below a share of 1 it is 1e-9 absolute: 1.5e-9 short is not."""
    t, c = np.array([1.5, 1.5]), np.array([100.0, 90.0])
    e = np.array([0.0, 15.0 - 1e-8])
    assert egress_dominated(t, c, e).tolist() == every_pair(t, c, e).tolist() == [False, False]
    t, c = np.array([1.0, 1.0]), np.array([1.0, 0.5])
    e = np.array([0.0, 0.5 - 1.5e-9])
    assert egress_dominated(t, c, e).tolist() == every_pair(t, c, e).tolist() == [True, False]
