"""A group's options before its site's filter: the grid of node counts priced, and the
options that another option of the same group beats dropped (:func:`prefilter`).

A *group* is one (provider, region, GPU shape) of one pool arranged around one zone
(:mod:`ptplan.planner.frontier.pool`); its busy hours over the grid of node counts come
from :mod:`ptplan.planner.frontier.busy_grid` and do not depend on prices, so the groups that share
a grid are priced and filtered together, one matrix row each.
"""

from __future__ import annotations

from collections import defaultdict
from typing import NamedTuple

import numpy as np

from ptplan.planner.frontier.busy_grid import BusyGrid
from ptplan.planner.frontier.site_stairs import beaten_at_sites


class Entries(NamedTuple):
    """Options of a group: group index, busy hours, $/h, node counts, remote nodes."""

    gid: int
    t: np.ndarray
    c: np.ndarray
    i: np.ndarray
    j: np.ndarray
    level: np.ndarray


class CachedGrid(NamedTuple):
    grid: BusyGrid
    i: np.ndarray
    j: np.ndarray
    busy: np.ndarray
    """Busy hours at the valid counts (i, j)."""
    order: np.ndarray
    """Positions of the valid counts by busy hours (stable): the order every group that
    shares this grid is filtered in, whatever its prices."""
    sorted_busy: np.ndarray
    """``busy[order]``: the busy hours in that order (and ``i[order]``, ``j[order]``)."""
    sorted_i: np.ndarray
    sorted_j: np.ndarray
    ties: bool
    """Whether two valid counts have the same busy hours."""


class RawGroup(NamedTuple):
    """A group evaluated but not yet filtered: its grid and the cumulative prices and remote
    nodes of its node sequences."""

    gid: int
    grid: CachedGrid
    ns_cost: np.ndarray
    sp_cost: np.ndarray
    rem: np.ndarray
    all_remote: bool


def levels(raw: RawGroup, j: np.ndarray, i: np.ndarray) -> np.ndarray:
    return (i + j) if raw.all_remote else raw.rem[j]


PREFILTER_MARGIN = 1e-9
"""$/h by which an option must be beaten to be dropped before the site's filter (well above
the filter's own 1e-12 tie tolerance, so that the prefilter never decides a near-tie)."""


def prefilter(raws: list[RawGroup], sites: list[list[int]] | None = None) -> list[Entries]:
    """Each group's options that no option *of the same group* with no remote node beats:
    at least as fast and cheaper per hour by more than :data:`PREFILTER_MARGIN`; with
    ``sites`` (per group, the sites it is placed at), also none of the level-0 options of
    the *other groups at each of those sites*
    (:func:`ptplan.planner.frontier.site_stairs.beaten_at_sites`).

    Such a beaten option is dominated in (busy time, $/h, remote nodes) and would be dropped
    by the site's Pareto filter anyway
    (:func:`ptplan.planner.frontier.site_filter.per_site_pareto`), so dropping it first leaves
    the frontier unchanged (``tests/test_planner.py`` compares with no prefilter at all). The
    groups that share a busy-time grid (the same shape and class sizes in other regions and
    zones) share its order by busy time, so they are filtered together, one row each: the
    prices of every group and count as one matrix, and a running minimum along each row.
    The survivors are in (busy time, $/h, remote nodes) order, grid order among equals: the
    order a Pareto filter returns them in, so ties are broken as without the prefilter."""
    out: list[Entries | None] = [None] * len(raws)
    batches: dict[int, list[int]] = defaultdict(list)
    for n, raw in enumerate(raws):
        batches[id(raw.grid)].append(n)
    priced = [_priced(raws, members) for members in batches.values()]
    if sites is not None:
        beaten_at_sites(raws, list(batches.values()), priced, sites, PREFILTER_MARGIN)
    for members, (cost, keep, _) in zip(batches.values(), priced, strict=True):
        grid = raws[members[0]].grid
        # survivors in the order a Pareto filter returns them: (t, c, level), grid position
        # among equals; the grid's order by t is that order unless two counts tie on t
        ties = grid.ties
        rows, n_at = np.nonzero(keep)  # by row, then by busy time
        i_all, j_all = grid.sorted_i[n_at], grid.sorted_j[n_at]
        t_all, c_all = grid.sorted_busy[n_at], cost[rows, n_at]
        rem = np.stack([raws[n].rem for n in members])
        lv_all = rem[rows, j_all]
        ends = np.cumsum(np.bincount(rows, minlength=len(members)))
        for row, n in enumerate(members):
            raw = raws[n]
            a, b = (int(ends[row - 1]) if row else 0), int(ends[row])
            t, c, i, j = t_all[a:b], c_all[a:b], i_all[a:b], j_all[a:b]
            level = levels(raw, j, i) if raw.all_remote else lv_all[a:b]
            if ties and bool((t[1:] == t[:-1]).any()):  # survivors that tie: by (c, level)
                by = np.lexsort((level, c, t))
                t, c, i, j, level = t[by], c[by], i[by], j[by], level[by]
            out[n] = Entries(raw.gid, t, c, i, j, level)
    return out  # type: ignore[return-value]


def _priced(raws: list[RawGroup], members: list[int]
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One batch (groups sharing a grid) priced in grid order: (cost matrix, the options no
    level-0 option of the same row beats, the row's level-0 staircase points: level-0 options
    cheaper than every earlier level-0 option of the row)."""
    grid = raws[members[0]].grid
    ii, jj = grid.sorted_i, grid.sorted_j
    ns = np.stack([raws[n].ns_cost for n in members])
    sp = np.stack([raws[n].sp_cost for n in members])
    cost = ns[:, ii] + sp[:, jj]
    if any(raws[n].all_remote for n in members):  # every node remote: no beater
        beat = np.full(cost.shape, np.inf)
    elif any(raws[n].rem[-1] > 0 for n in members):
        # a row's level-0 options: its first spot nodes, up to its last local one (rem is 0
        # for them and rises by one per remote node after)
        local = np.asarray([int(np.count_nonzero(raws[n].rem == 0)) for n in members])
        beat = np.where(jj[None, :] < local[:, None], cost, np.inf)
    else:
        beat = cost
    run = np.minimum.accumulate(beat, axis=1)
    prev = np.concatenate((np.full((len(members), 1), np.inf), run[:, :-1]), axis=1)
    keep = ~(prev < cost - PREFILTER_MARGIN)
    return cost, keep, beat < prev


def select(got: Entries, keep: np.ndarray) -> Entries:
    return Entries(got.gid, got.t[keep], got.c[keep], got.i[keep], got.j[keep],
                    got.level[keep])
