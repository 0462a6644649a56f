"""A pool's frontier rebuilt after a few of its offers changed (a share of a contested cap):
only the shapes holding them are evaluated again and merged with the cached frontier of the
others (:func:`merged_frontier`; used by :mod:`ptplan.planner.search.capacity`)."""

from __future__ import annotations

import numpy as np

from ptplan.costs.network import NetworkModel
from ptplan.demand.model import Demand
from ptplan.planner.candidates import Layout, PoolSpec
from ptplan.planner.frontier.pool import (
    SEQUENCES,
    Enumerator,
    PoolFrontier,
    Site,
    by_shape,
    empty_frontier,
    site_entries,
)
from ptplan.planner.frontier.site_filter import COLUMNS, Columns, per_site_pareto
from ptplan.providers.base import Offer


def merged_frontier(demand: Demand, layout: Layout, pool: PoolSpec, offers: list[Offer],
                    cap: int, sites: list[Site], changed: frozenset[str], base_cache: dict,
                    base_key: tuple, grid_cache: dict | None = None,
                    network: NetworkModel | None = None) -> tuple[PoolFrontier, int]:
    """:func:`pool_frontier` of a pool whose offers ``changed`` (by key) differ from a
    previous call (e.g. a share of a contested cap), built by re-evaluating only the shapes
    holding those offers and merging them with the cached frontier of the other shapes.

    Exact: every filter of a site keeps the options that no other option beats, for a
    transitive relation (Pareto dominance in busy time, $/h and remote nodes; egress
    dominance; a mix of the two: see :func:`ptplan.planner.frontier.pareto.egress_dominated`), so
    filtering the other shapes first removes nothing the whole filter would keep; the merged
    columns are put back in the order of one call (shape, site, position in the group), so
    that ties are broken the same way too. Not for cross-region (split) entries."""
    shapes = by_shape(pool, offers)
    ranks = {sh: n for n, sh in enumerate(sorted(shapes))}
    moved = {sh for sh, group in shapes.items() if any(o.key in changed for o in group)}
    cache = {} if grid_cache is None else grid_cache
    groups_cache = base_cache.setdefault(("groups", base_key), {})
    sequences = base_cache.setdefault(SEQUENCES, {})
    # the other shapes hold no changed offer now; they may have lost one (a share of 0), so
    # the changed keys are part of what the cached frontier of the other shapes is
    key = (base_key, changed, frozenset(moved))
    if key not in base_cache:
        enum = Enumerator(demand, layout, pool, cap, cache, groups_cache, sequences)
        cols = Columns()
        site_entries(enum, {sh: g for sh, g in shapes.items() if sh not in moved}, sites,
                      network, cols, ranks)
        arrays = cols.arrays() if cols.sizes else None
        if arrays is not None:
            sel = per_site_pareto(arrays)
            arrays = {k: v[sel] for k, v in arrays.items()}
        base_cache[key] = (list(enum.groups), arrays, enum.evaluated)
    groups, base, evaluated = base_cache[key]
    enum = Enumerator(demand, layout, pool, cap, cache, groups_cache, sequences)
    enum.groups = list(groups)
    cols = Columns()
    site_entries(enum, {sh: g for sh, g in shapes.items() if sh in moved}, sites, network,
                  cols, ranks)
    moved_arrays = cols.arrays() if cols.sizes else None
    parts = [a for a in (base, moved_arrays) if a is not None]
    if not parts:
        return empty_frontier(pool), evaluated + enum.evaluated
    arrays = {k: np.concatenate([a[k] for a in parts]) for k in COLUMNS}
    order = np.lexsort((arrays["pos"], arrays["region"], arrays["rank"]))
    arrays = {k: v[order] for k, v in arrays.items()}
    # a site's filter sees only its own options: where no re-evaluated shape has an option,
    # the site holds the cached frontier's, already filtered, and filtering them again keeps
    # them all (every filter of a site is idempotent); only the touched sites are filtered
    touched = np.isin(arrays["region"], np.unique(moved_arrays["region"])) \
        if moved_arrays is not None else np.zeros(len(arrays["t"]), dtype=bool)
    at = np.nonzero(touched)[0]
    sel = np.nonzero(~touched)[0]
    if len(at):
        sel = np.sort(np.concatenate((sel, at[per_site_pareto(
            {k: v[at] for k, v in arrays.items()})])))
    return PoolFrontier(pool, enum.groups, *(arrays[k][sel] for k in (
        "t", "c", "gid", "i", "j", "region", "e", "remote", "place"))), \
        evaluated + enum.evaluated
