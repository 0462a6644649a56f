"""Options that another group's option beats at every site a group is placed at.

The prefilter (:func:`ptplan.planner.frontier.group_filter.prefilter`) drops what an option of the
*same* group beats. Most of what a site's Pareto filter drops is beaten by *other* groups of
the site (other GPU shapes of the region): on the RL example's rollout pools the own-group
filter kept 45 % of 1.24 million priced options and the site filter 0.8 %. Here, before any
option is extracted, each site gets the staircase of its groups' level-0 options (no remote
node: busy hours ascending, the least $/h of an option at most that slow), and an option is
dropped when, at every site its group is placed at, the staircase is cheaper than it by more
than the prefilter's margin at its busy time: a level-0 option there is at least as fast,
cheaper, and has no more remote nodes, so the option is dominated in (busy time, $/h, remote
nodes) at each of its sites and the site's filter
(:func:`ptplan.planner.frontier.site_filter.per_site_pareto`) would drop it anyway. The staircases
are made of options the site's filter also sees (its level-0 options that no earlier level-0
option of their group beats), so whatever a dropped option would have dominated, its beater
dominates too: the filter's result, ties included, is unchanged
(``tests/test_planner.py`` compares the frontier with the unfiltered one).

Vectorised per batch of groups that share a busy-time grid (one row each, the same busy
times): no Python loop runs per option, only per group.
"""

from __future__ import annotations

from typing import Any

import numpy as np

Priced = tuple[np.ndarray, np.ndarray, np.ndarray]
"""A batch priced in grid order: (cost matrix, options kept so far, level-0 staircase
points of each row), one row per group."""


def beaten_at_sites(raws: list[Any], batches: list[list[int]], priced: list[Priced],
                    sites: list[list[int]], margin: float) -> None:
    """Clear, in each batch's ``keep`` matrix, the options beaten at every one of their
    group's ``sites`` (see the module's docstring). ``raws[n].grid`` is the batch's shared
    grid (``busy`` and ``order``)."""
    pairs = [_pairs(members, sites) for members in batches]
    stairs = _staircases(raws, batches, priced, pairs)
    if stairs is None:
        return
    for members, (cost, keep, _), (pr, ps, starts) in zip(batches, priced, pairs, strict=True):
        if len(pr) == 0:
            continue
        grid = raws[members[0]].grid
        bound = _bounds(grid.sorted_busy, ps, stairs)
        if len(starts) < len(pr):  # a group at several sites: beaten at all of them
            bound = np.maximum.reduceat(bound, starts, axis=0)
        rows = pr[starts]
        keep[rows] &= ~(bound < cost[rows] - margin)


def _pairs(members: list[int], sites: list[list[int]]
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row, site) pairs of one batch, row by row (rows placed nowhere have none), and the
    index of each row's first pair."""
    rows: list[int] = []
    where: list[int] = []
    starts: list[int] = []
    for row, n in enumerate(members):
        if sites[n]:
            starts.append(len(rows))
            rows.extend([row] * len(sites[n]))
            where.extend(sites[n])
    return (np.asarray(rows, dtype=np.intp), np.asarray(where, dtype=np.intp),
            np.asarray(starts, dtype=np.intp))


def _staircases(raws: list[Any], batches: list[list[int]], priced: list[Priced],
                pairs: list[tuple[np.ndarray, np.ndarray, np.ndarray]]
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Every site's staircase: (busy hours, $/h) sorted by site, then busy hours, and each
    site's first index (``np.searchsorted`` on the sites)."""
    site_p: list[np.ndarray] = []
    t_p: list[np.ndarray] = []
    c_p: list[np.ndarray] = []
    for members, (cost, _, stair), (pr, ps, _) in zip(batches, priced, pairs, strict=True):
        if len(pr) == 0:
            continue
        grid = raws[members[0]].grid
        p, n = np.nonzero(stair[pr])
        site_p.append(ps[p])
        t_p.append(grid.sorted_busy[n])
        c_p.append(cost[pr[p], n])
    if not site_p:
        return None
    site, t, c = np.concatenate(site_p), np.concatenate(t_p), np.concatenate(c_p)
    order = np.lexsort((c, t, site))
    site, t, c = site[order], t[order], c[order]
    # the running minimum of c restarts at every site: each site's values are shifted below
    # every earlier site's (the shift only selects points; their own t and c are kept)
    span = float(c.max() - c.min()) + 1.0 if len(c) else 1.0
    shifted = c - site * span
    prev = np.concatenate(([np.inf], np.minimum.accumulate(shifted)[:-1]))
    first = np.concatenate(([True], site[1:] != site[:-1]))
    step = first | (shifted < prev)
    return site[step], t[step], c[step]


def _bounds(t: np.ndarray, ps: np.ndarray, stairs: tuple[np.ndarray, np.ndarray, np.ndarray]
            ) -> np.ndarray:
    """Per pair, at each busy time of ``t`` (ascending), the least $/h of its site's
    staircase at most that slow (+inf before the site's fastest point)."""
    site, st, sc = stairs
    lo = np.searchsorted(site, ps, side="left")
    hi = np.searchsorted(site, ps, side="right")
    lens = hi - lo
    total = int(lens.sum())
    out = np.full((len(ps), len(t) + 1), np.inf)
    if total:
        pair = np.repeat(np.arange(len(ps)), lens)
        idx = np.repeat(lo, lens) + np.arange(total) - np.repeat(np.cumsum(lens) - lens, lens)
        col = np.searchsorted(t, st[idx], side="left")  # first busy time it is as fast as
        np.minimum.at(out, (pair, col), sc[idx])
    return np.minimum.accumulate(out[:, :-1], axis=1)
