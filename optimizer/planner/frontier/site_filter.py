"""A pool's options at its sites: the columns they are gathered in, and the filter that
keeps, at each site, the options no other option there beats (:func:`per_site_pareto`)."""

from __future__ import annotations

import numpy as np

from ptplan.planner.frontier.group_filter import Entries
from ptplan.planner.frontier.pareto import egress_dominated, pareto_mask3

COLUMNS = ("t", "c", "gid", "i", "j", "region", "remote", "e", "place", "rank", "pos")


class Columns:
    """The frontier's arrays, built up group by group (per-group scalars repeated once, at
    the end)."""

    _ARRAYS = ("t", "c", "i", "j", "remote", "e")
    _SCALARS = ("gid", "region", "place", "rank")

    def __init__(self) -> None:
        self.parts: dict[str, list] = {k: [] for k in COLUMNS}
        self.sizes: list[int] = []

    def add(self, got: Entries, region: int, e: np.ndarray, place: int, rank: int = 0
            ) -> None:
        """``rank``: the shape's position among the pool's shapes (the columns' order is
        shape, then site, then position in the group; see
        :func:`ptplan.planner.frontier.merged.merged_frontier`)."""
        for k, v in (("t", got.t), ("c", got.c), ("i", got.i), ("j", got.j),
                     ("remote", got.level), ("e", e), ("gid", got.gid), ("region", region),
                     ("place", place), ("rank", rank)):
            self.parts[k].append(v)
        self.sizes.append(len(got.t))

    def arrays(self) -> dict[str, np.ndarray]:
        out = {k: np.concatenate(self.parts[k]) for k in self._ARRAYS}
        for k in self._SCALARS:
            out[k] = np.repeat(np.asarray(self.parts[k], dtype=int), self.sizes)
        sizes = np.asarray(self.sizes, dtype=int)
        starts = np.repeat(np.cumsum(sizes) - sizes, sizes)
        out["pos"] = np.arange(int(sizes.sum())) - starts
        return out


def per_site_pareto(arrays: dict[str, np.ndarray]) -> np.ndarray:
    """Indices kept by a Pareto filter in (t, c, remote) within each site and each place;
    at a site where options pay egress, then by
    :func:`ptplan.planner.frontier.pareto.egress_dominated` as well."""
    kept: list[np.ndarray] = []
    for key in ("region", "place"):
        col = arrays[key]
        if len(col) == 0 or int(col.max()) < 0:
            continue  # no entry of this kind
        by_site = np.argsort(col, kind="stable")  # each site's indices, ascending
        starts = np.flatnonzero(np.diff(col[by_site])) + 1
        for idx in np.split(by_site, starts):
            if col[idx[0]] < 0:
                continue
            idx = idx[pareto_mask3(arrays["t"][idx], arrays["c"][idx], arrays["remote"][idx])]
            if key == "region" and len(idx) > 1 and float(arrays["e"][idx].max()) > 0:
                idx = idx[~egress_dominated(arrays["t"][idx], arrays["c"][idx],
                                             arrays["e"][idx])]
            kept.append(idx)
    return np.sort(np.concatenate(kept))
