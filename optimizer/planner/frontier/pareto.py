"""Pareto filters on arrays of options: lower is better in every coordinate."""

from __future__ import annotations

import numpy as np


def pareto_mask(t: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Indices (sorted by t) of points not dominated in (t, c), lower is better in both."""
    if len(t) == 0:
        return np.zeros(0, dtype=int)
    order = np.lexsort((c, t))
    cs = c[order]
    running = np.minimum.accumulate(cs)
    prev = np.concatenate(([np.inf], running[:-1]))
    return order[cs < prev - 1e-12]


def pareto_mask3(t: np.ndarray, c: np.ndarray, level: np.ndarray) -> np.ndarray:
    """Indices of points not dominated in (t, c, level), lower is better in all three;
    ``level`` holds small non-negative integers (e.g. nodes paying egress).

    First a Pareto filter in (t, c) within each level (one pass: sorted by level, then t,
    then c; the running minimum of c − level·K restarts at every level because K exceeds the
    range of c), then the survivors are checked against every lower-or-equal level: a point
    is dropped when an earlier point in (t, c) order has a level no higher and a cost no
    higher."""
    if len(t) == 0 or int(level.max(initial=0)) == int(level.min(initial=0)):
        return pareto_mask(t, c)
    rest = _beaten_by_lowest_level(t, c, level)
    if len(rest) < len(t):
        return rest[pareto_mask3(t[rest], c[rest], level[rest])]
    cand = _per_level_survivors(t, c, level.astype(int))
    return _across_levels(t, c, level.astype(int), cand)


BEATEN_MARGIN = 1e-9
"""How much cheaper (in c) a point of the lowest level must be to drop a point before the
exact filter runs: far above the filter's 1e-12 tie tolerance, so no near-tie is decided
early."""


def _beaten_by_lowest_level(t: np.ndarray, c: np.ndarray, level: np.ndarray) -> np.ndarray:
    """Indices (ascending) of the points that no point of the lowest level beats: at least
    as fast and cheaper by more than :data:`BEATEN_MARGIN`. The others are dominated (the
    beater's level is no higher), and whatever they dominate the beater dominates too, so
    dropping them first leaves the filter's result, ties included, unchanged. Cheap (one 2-D
    staircase and a binary search), and on pools with remote nodes it removes most points."""
    low = np.nonzero(level == level.min())[0]
    stair = low[pareto_mask(t[low], c[low])]
    st, sc = t[stair], c[stair]
    k = np.searchsorted(st, t, side="right") - 1
    beaten = (k >= 0) & (sc[np.maximum(k, 0)] < c - BEATEN_MARGIN)
    return np.nonzero(~beaten)[0]


def _per_level_survivors(t: np.ndarray, c: np.ndarray, lv: np.ndarray) -> np.ndarray:
    """Indices not dominated in (t, c) by a point of their own level."""
    order = np.lexsort((c, t, lv))
    span = float(c.max() - c.min()) + 1.0
    shifted = c[order] - lv[order] * span
    prev = np.concatenate(([np.inf], np.minimum.accumulate(shifted)[:-1]))
    first = np.concatenate(([True], lv[order][1:] != lv[order][:-1]))
    return order[first | (shifted < prev - 1e-12)]


def _across_levels(t: np.ndarray, c: np.ndarray, lv: np.ndarray, cand: np.ndarray
                   ) -> np.ndarray:
    """Of the candidates ``cand``, those not dominated by an earlier one (in (t, c) order)
    whose level is no higher and whose cost is no higher."""
    order = cand[np.lexsort((lv[cand], c[cand], t[cand]))]
    cs, ls = c[order], lv[order]
    base = int(ls.min())
    ls = ls - base
    n, width = len(cs), int(ls.max()) + 1
    m = np.full((n, width), np.inf)
    m[np.arange(n), ls] = cs
    run = np.minimum.accumulate(np.minimum.accumulate(m, axis=0), axis=1)
    prev2 = np.vstack([np.full((1, width), np.inf), run[:-1]])
    return order[cs < prev2[np.arange(n), ls] - 1e-12]


def egress_dominated(t: np.ndarray, c: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Options of one site that another option beats in every plan.

    A plan holds every pool for the whole run D and pays its egress once: cost = Σ c·D + Σ e
    (:mod:`ptplan.planner.search.milp`, ``hold``), and D is at least the busy time of each chosen
    option. Option a beats option b when t_a ≤ t_b, c_a ≤ c_b and e_a + c_a·t_b < e_b + c_b·t_b:
    swapping b for a in any plan does not lengthen it (D' ≤ D) and, since D ≥ t_b and
    c_a ≤ c_b, costs strictly less (e_a − e_b < (c_b − c_a)·t_b ≤ (c_b − c_a)·D). So b is in no
    optimum, for either objective, and in no point of a cost–time frontier. This catches what the
    Pareto filter in (t, c, remote nodes) keeps on a plateau of busy time (e.g. at the latency
    floor): a remote spot node that saves more per hour than its weight-sync egress costs.

    Computed per class of equal egress (a site's egress is its remote nodes × one rate, so
    there are few classes): within a class the candidate beater of b is the cheapest option
    with t_a ≤ t_b (e_a + c_a·t_b grows with c_a, and if that one is dearer than b so are all
    the others), read from each class's running minimum of c in t order. O(n·K) for K classes
    instead of every pair; the same test, term for term, as comparing every pair
    (``tests/test_pareto_egress.py``)."""
    n = len(t)
    if n == 0:
        return np.zeros(0, dtype=bool)
    values, cls = np.unique(e, return_inverse=True)
    order = np.argsort(t, kind="stable")
    ts = t[order]
    m = np.full((n, len(values)), np.inf)
    m[np.arange(n), cls[order]] = c[order]
    run = np.minimum.accumulate(m, axis=0)  # per class: least c among the first p + 1 by t
    last = np.searchsorted(ts, t, side="right") - 1  # every a with t_a <= t_b, ties included
    best_c = run[last]  # (b, class): the class's cheapest option no slower than b
    at_b = e + c * t  # b's cost share at D = t_b
    tol = 1e-9 * np.maximum(1.0, np.abs(at_b))
    with np.errstate(invalid="ignore"):  # inf * 0: no option in that class yet
        at_a = values[None, :] + best_c * t[:, None]
        beats = (best_c <= c[:, None]) & (at_a < (at_b - tol)[:, None])
    return beats.any(axis=1)
