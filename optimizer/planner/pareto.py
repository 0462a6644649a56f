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
    cand = _per_level_survivors(t, c, level.astype(int))
    return _across_levels(t, c, level.astype(int), cand)


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
