"""One pool's frontier: its Pareto options at every site, as arrays.

At a site, region-level offers (no zone: on-demand, reserved) and the site zone's spot offers
are local; a pool with ``remote_ok`` (rollout) may also take the region's other zones' spot
offers, after the local ones, each such node paying the cross-zone rate on its weight-sync copy
(``e`` = remote nodes × steps × W × rate). Options are pruned by Pareto dominance in (busy time,
price per hour, remote nodes), which is exact because a plan's egress is non-decreasing in the
remote nodes; then, at sites where options pay egress, an option is dropped when another is
no slower and no dearer per hour and saves more per hour over its busy time than its extra
egress costs (:func:`ptplan.planner.frontier.pareto.egress_dominated`: it is in no optimum). With
``split`` the rollout pool also gets cross-region entries per region (every zone's spot offers
cheapest-first, all nodes remote), priced against the trainer's site during the search. The
exactness argument: :mod:`ptplan.planner.frontier.frontiers`.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from ptplan.core.hardware import gpus
from ptplan.costs.network import NetworkModel
from ptplan.demand.model import Demand
from ptplan.demand.rates import PhaseRate, phase_rates
from ptplan.planner.candidates import Layout, PoolSpec, spot_overhead
from ptplan.planner.frontier.busy_grid import busy_grid, cheapest_first, cheapest_runs, cumulative
from ptplan.planner.frontier.group_filter import CachedGrid, Entries, RawGroup, prefilter, select
from ptplan.planner.frontier.pareto import pareto_mask3
from ptplan.planner.frontier.parts import Group, PoolFrontier, Shape, Site
from ptplan.planner.frontier.site_filter import COLUMNS, Columns, per_site_pareto
from ptplan.providers.base import Offer

__all__ = ["SEQUENCES", "Enumerator", "Group", "PoolFrontier", "Shape", "Site", "by_shape",
           "empty_frontier", "pool_frontier", "site_entries"]

SEQUENCES = ("node sequences",)
"""The key of the node-sequence cache (``Enumerator(sequences=...)``) in a frontier cache."""
_MISSING = object()
_PINNED = "offers of groups with no valid count"
_RATES = "rates"


def pool_rates(demand: Demand, layout: Layout, pool: PoolSpec, gpu: Any, gpn: int
               ) -> list[list[PhaseRate]]:
    """Per phase of ``pool``, its demand-model rates on nodes of ``gpn`` ``gpu``s: under the
    layout's pipeline and policy, with the training engine's scoring forwards at the update's
    efficiency when the pool also runs the update (``phase_rates(with_trainer=...)``)."""
    return [phase_rates(demand, ph, gpu, gpn, layout.tail, layout.policy,
                        colocated=layout.mode == "colocated", with_trainer="update" in pool.phases)
            for ph in pool.phases]


class Enumerator:
    """Builds one pool's groups; holds what its sites share (rates per shape, spot weights,
    non-spot sequences, busy-time grids) and counts the grid points evaluated."""

    def __init__(self, demand: Demand, layout: Layout, pool: PoolSpec, cap: int,
                 grid_cache: dict, group_cache: dict | None = None,
                 sequences: dict | None = None) -> None:
        """``group_cache``: the groups already evaluated and prefiltered, by what they are
        made of (the pool's context, the shape, the identities of its offers, the disk rate):
        the capacity split search rebuilds a pool's frontier with one offer's cap changed (a
        new offer object) and reuses every other group. Each entry keeps its offers alive,
        so that an identity is never reused by another offer while the cache lives. Only the
        split search passes one: elsewhere (a plan, a what-if session) the groups' offers are
        new objects at every call and the cache would only grow. ``sequences``: node
        sequences and their cumulative prices by the identities of their offers, shared by
        the pools of one :func:`ptplan.planner.frontier.frontiers.build_candidates` (the sync and
        async rollout pools arrange the same offers); each entry pins its offers too."""
        self.demand, self.layout, self.pool, self.cap = demand, layout, pool, cap
        self.grid_cache = grid_cache
        self.prefiltered = group_cache
        self.pinned: list = group_cache.setdefault(_PINNED, []) if group_cache is not None \
            else []
        eff = demand.spec.efficiency
        self.context = (pool, layout.tail, layout.mode, cap, eff.checkpoint_minutes,
                        eff.restart_minutes,
                        demand.spec.placement.multi_node_training_min_gpus_per_node)
        self.table = gpus()
        self.disk = layout.disks.per_node_hour if layout.disks else lambda p, r: 0.0
        self.groups: list[Group] = []
        self.evaluated = 0
        self._weight: dict[int, float] = {}
        self.sequences = {} if sequences is None else sequences
        self.weight_key = (pool.stateful, eff.lost_work_minutes, eff.restart_minutes)

    def rates(self, gpu_name: str, gpn: int) -> list[list[PhaseRate]] | None:
        """Per phase of the pool, its rates on this shape (None if a phase cannot run)."""
        key = (_RATES, self.context, gpu_name, gpn)  # the grid cache's lifetime: one spec
        if key not in self.grid_cache:                # and policy (see grid())
            rates = pool_rates(self.demand, self.layout, self.pool, self.table[gpu_name], gpn)
            self.grid_cache[key] = rates if all(rates) else None
        return self.grid_cache[key]

    def weights(self, spot: list[Offer]) -> list[float]:
        """Effective nodes per spot node: 1 in a gang (its overhead is the gang's), else
        1 − the offer's spot overhead."""
        if self.pool.stateful:
            return [1.0] * len(spot)
        out = []
        for o in spot:
            w = self._weight.get(id(o))  # offers outlive the enumerator: ids are stable
            if w is None:
                w = self._weight[id(o)] = 1.0 - spot_overhead(o, self.demand)
            out.append(w)
        return out

    def nonspot_sequence(self, nonspot: list[Offer]) -> tuple[list[Offer], np.ndarray]:
        """Non-spot nodes cheapest first and the cumulative $/h of taking 0, 1, ... of them."""
        key = ("nonspot", self.cap, self.disk(nonspot[0].provider, nonspot[0].region)
               if nonspot else 0.0, tuple(map(id, nonspot)))  # one region
        hit = self.sequences.get(key)
        if hit is None:
            seq = cheapest_first(nonspot, [1.0] * len(nonspot), self.cap)
            disk = key[2]
            hit = self.sequences[key] = (seq, cumulative(o.usd_per_hour + disk for o in seq),
                                         nonspot)  # the list pins its offers' identities
        return hit[0], hit[1]

    def spot_arrays(self, local: list[Offer], remote: list[Offer], disk: float) -> tuple:
        """:meth:`spot_sequence` of a shape's spot offers with its cumulative $/h (boot
        ``disk`` included), effective nodes and interruption rates, and their signature in
        the busy-time grid's key (shared through ``sequences``)."""
        key = ("spot", self.weight_key, self.cap, disk, tuple(map(id, local)),
               tuple(map(id, remote)))
        hit = self.sequences.get(key)
        if hit is None:
            sp_seq, rem, runs = self.spot_sequence(local, remote)
            sp_cost, sp_eff, sp_lam = _running3(runs, disk)
            sig = (sp_eff.round(12).tobytes(),
                   sp_lam.round(15).tobytes() if self.pool.stateful else b"")
            hit = self.sequences[key] = (sp_seq, rem, sp_cost, sp_eff, sp_lam, sig, local,
                                         remote)
        return hit

    def spot_sequence(self, local: list[Offer], remote: list[Offer]
                      ) -> tuple[list[Offer], np.ndarray, list[tuple[Offer, float, int]]]:
        """Spot nodes, local ones first, each class cheapest first, the cumulative number
        of remote nodes among the first 0, 1, ... of them, and the sequence as runs (offer,
        effective nodes per node, nodes)."""
        runs: list[tuple[Offer, float, int]] = []
        n_local = 0
        for part, room in ((local, self.cap), (remote, None)):
            if not part:
                continue
            weights = self.weights(part)
            room = self.cap - n_local if room is None else room
            for i, take in cheapest_runs(part, weights, room,
                                         self.disk(part[0].provider, part[0].region)):
                runs.append((part[i], weights[i], take))
            if part is local:
                n_local = sum(take for _, _, take in runs)
        seq = [o for o, _, take in runs for _ in range(take)]
        rem = np.concatenate((np.zeros(n_local + 1, dtype=int),
                              np.arange(1, len(seq) - n_local + 1)))
        return seq, rem, runs

    def grid(self, gpu_name: str, gpn: int, rates: list[list[PhaseRate]], n_nonspot: int,
             sp_eff: np.ndarray, sp_lam: np.ndarray, sig: tuple[bytes, bytes]) -> CachedGrid:
        """The busy-time grid of a shape (cached: it does not depend on prices); ``sig``
        identifies ``sp_eff`` and (gangs) ``sp_lam`` (:meth:`spot_arrays`)."""
        key = (self.context, gpu_name, gpn, n_nonspot, *sig)
        if key not in self.grid_cache:
            memo = self.grid_cache.setdefault(("effective nodes", self.context, gpu_name, gpn),
                                              {})
            grid = busy_grid(self.demand, self.pool, rates, gpn, self.cap, n_nonspot, sp_eff,
                             sp_lam, memo)
            ii, jj = np.nonzero(grid.valid)
            busy = grid.busy[ii, jj]
            order = np.argsort(busy, kind="stable")
            sorted_busy = busy[order]
            self.grid_cache[key] = CachedGrid(grid, ii, jj, busy, order, sorted_busy,
                                               ii[order], jj[order],
                                               bool((np.diff(sorted_busy) == 0).any()))
        return self.grid_cache[key]

    def cached_or_raw(self, shape: Shape, rates: list[list[PhaseRate]],
                      parts: tuple[list[Offer], list[Offer], list[Offer]], arrangement: tuple,
                      slots: list, misses: list) -> int | None:
        """Index into ``slots`` of the group of this arrangement: filled from the cache, or
        left None with the evaluated group queued in ``misses`` for :func:`prefilter`; None
        when no node count is valid."""
        # the boot disk's $/h is in every node's price (a what-if may change it alone)
        key = (self.context, shape, arrangement, self.disk(shape[0], shape[1]))
        hit: Any = _MISSING if self.prefiltered is None else self.prefiltered.get(key, _MISSING)
        if hit is None:
            return None
        if hit is not _MISSING:
            group, got, evaluated, _ = hit
            self.evaluated += evaluated
            gid = len(self.groups)
            self.groups.append(group)
            slots.append((group, got._replace(gid=gid)))
            return len(slots) - 1
        raw = self.add_group(shape, rates, *parts)
        if raw is None:
            if self.prefiltered is not None:
                self.prefiltered[key] = None
                self.pinned.append(parts)
            return None
        slots.append(None)
        misses.append((len(slots) - 1, key, raw, parts))
        return len(slots) - 1

    def add_group(self, shape: Shape, rates: list[list[PhaseRate]], nonspot: list[Offer],
                  local: list[Offer], remote: list[Offer], all_remote: bool = False
                  ) -> RawGroup | None:
        """Evaluate one arrangement of a shape's offers over its grid of node counts (None if
        no count is valid); :func:`prefilter` and the site's Pareto filter keep its options."""
        provider, region, gpu_name, gpn = shape
        ns_seq, ns_cost = self.nonspot_sequence(nonspot)
        disk = self.disk(provider, region)
        sp_seq, rem, sp_cost, sp_eff, sp_lam, sig, _, _ = self.spot_arrays(local, remote, disk)
        cached = self.grid(gpu_name, gpn, rates, len(ns_cost), sp_eff, sp_lam, sig)
        self.evaluated += len(cached.i)
        if len(cached.i) == 0:
            return None
        gid = len(self.groups)
        self.groups.append(Group(provider, region, gpu_name, gpn, ns_seq, sp_seq, rates,
                                 nonspot, local, cached.grid.e_nodes, cached.grid.omega,
                                 cached.grid.picks, rem, all_remote,
                                 self.disk(provider, region)))
        return RawGroup(gid, cached, ns_cost, sp_cost, rem, all_remote)


def _running3(runs: list[tuple[Offer, float, int]], disk: float
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Running sums from 0 of a spot sequence given as runs (offer, effective nodes per
    node, nodes): its $/h (boot ``disk`` included), effective nodes and interruption rates,
    each run's value repeated once per node (the same sums, in the same order, as
    :func:`ptplan.planner.frontier.busy_grid.cumulative` over the sequence node by node)."""
    per_run = np.asarray([(o.usd_per_hour + disk, w, o.interruptions_per_hour or 0.0)
                          for o, w, _ in runs], dtype=float).reshape(-1, 3)
    takes = np.asarray([take for _, _, take in runs], dtype=int)
    sums = np.cumsum(np.repeat(per_run, takes, axis=0), axis=0)
    cost, eff, lam = np.ascontiguousarray(np.concatenate((np.zeros((1, 3)), sums)).T)
    return cost, eff, lam


def by_shape(pool: PoolSpec, offers: list[Offer]) -> dict[Shape, list[Offer]]:
    """The pool's offers (capacity types it allows) by shape."""
    out: dict[Shape, list[Offer]] = defaultdict(list)
    for o in offers:
        if o.capacity_type in pool.capacity_types:
            out[(o.provider, o.region, o.gpu, o.gpus_per_node)].append(o)
    return out


def _arrangement(group: list[Offer], zone: str, remote_ok: bool
                 ) -> tuple[list[Offer], list[Offer], list[Offer]]:
    """(non-spot, local spot, remote spot) offers of a shape for a site in ``zone``."""
    here = [o for o in group if not o.zone or o.zone == zone]
    nonspot = [o for o in here if o.capacity_type != "spot"]
    local = [o for o in here if o.capacity_type == "spot"]
    remote = [o for o in group if o.capacity_type == "spot" and o.zone
              and o.zone != zone] if remote_ok else []
    return nonspot, local, remote


def site_entries(enum: Enumerator, shapes: dict[Shape, list[Offer]], sites: list[Site],
                  network: NetworkModel | None, cols: Columns,
                  ranks: dict[Shape, int] | None = None) -> None:
    """Site-bound entries: every shape at every site of its region (sites whose zones hold
    the same offers share a group), prefiltered (:func:`prefilter`), in (region, shape, site)
    order. A group made of the same offers as one evaluated before for the same pool is taken
    from the enumerator's group cache (the split search's; see :class:`Enumerator`)."""
    zones: dict[tuple[str, str], list[int]] = defaultdict(list)
    for n, site in enumerate(sites):
        zones[site[:2]].append(n)
    slots: list[tuple[Group, Entries] | None] = []
    misses: list[tuple[int, tuple, RawGroup, tuple]] = []
    placed: list[tuple[Shape, int, int]] = []  # (shape, site, index into slots)
    for shape, group in sorted(shapes.items()):
        rates = enum.rates(shape[2], shape[3])
        if rates is None:
            continue
        # sites in zones holding none of the shape's offers see the same arrangement (the
        # region's offers local, every zone's spot offers remote); the others each their own
        zoned = {o.zone for o in group if o.zone}
        done: dict[str | None, int | None] = {}
        for s in zones[shape[:2]]:
            zone = sites[s][2] if sites[s][2] in zoned else None
            if zone not in done:
                parts = _arrangement(group, sites[s][2], enum.pool.remote_ok)
                # the offers' identities key the split search's group cache (only it has one)
                arrangement = tuple(tuple(map(id, part)) for part in parts) \
                    if enum.prefiltered is not None else ()
                done[zone] = enum.cached_or_raw(shape, rates, parts, arrangement, slots,
                                                misses)
            slot = done[zone]
            if slot is not None:
                placed.append((shape, s, slot))
    at: dict[int, list[int]] = defaultdict(list)  # slot -> the sites it is placed at
    for _, s, n in placed:
        at[n].append(s)
    # the sites' staircases (ptplan.planner.frontier.site_stairs) for pools with remote nodes,
    # whose own-group filter keeps most options (elsewhere it keeps few and the staircases
    # cost more than they save), and only where the groups are not cached for other calls
    # (the split search's cache keeps a group's own options, whatever its neighbours)
    where = [at[m[0]] for m in misses] \
        if enum.prefiltered is None and enum.pool.remote_ok else None
    for (n, key, raw, parts), got in zip(misses, prefilter([m[2] for m in misses], where),
                                         strict=True):
        g = enum.groups[got.gid]
        if enum.prefiltered is not None:
            enum.prefiltered[key] = (g, got, len(raw.grid.i), parts)
        slots[n] = (g, got)
    per_node: dict[str, float] = {}
    for shape, s, n in placed:
        got = slots[n][1]  # type: ignore[index]
        if len(got.t) == 0:
            continue
        provider = shape[0]
        if provider not in per_node and network is not None:
            per_node[provider] = network.cross_zone_per_node(provider)
        e_node = per_node.get(provider, 0.0) if enum.pool.remote_ok else 0.0
        cols.add(got, s, got.level * e_node, -1, ranks[shape] if ranks else 0)


def _cross_region_entries(enum: Enumerator, shapes: dict[Shape, list[Offer]],
                          places: list[tuple[str, str]], cols: Columns) -> None:
    """Split plans: per shape, every zone's offers with all nodes remote, to be priced
    against the trainer's site during the search."""
    place_index = {p: n for n, p in enumerate(places)}
    raws: list[tuple[Shape, RawGroup]] = []
    for shape, group in sorted(shapes.items()):
        rates = enum.rates(shape[2], shape[3])
        if rates is None:
            continue
        nonspot = [o for o in group if o.capacity_type != "spot"]
        spot = [o for o in group if o.capacity_type == "spot"]
        raw = enum.add_group(shape, rates, nonspot, spot, [], all_remote=True)
        if raw is not None:
            raws.append((shape, raw))
    for (shape, _), got in zip(raws, prefilter([r for _, r in raws]), strict=True):
        got = select(got, pareto_mask3(got.t, got.c, got.level))
        cols.add(got, -1, np.zeros(len(got.t)), place_index[shape[:2]])


def empty_frontier(pool: PoolSpec) -> PoolFrontier:
    empty = np.zeros(0)
    ints = empty.astype(int)
    return PoolFrontier(pool, [], empty, empty, ints, ints, ints, ints, empty, ints, ints)


REGIONS_PER_CHUNK = 8
"""Regions whose options are built and filtered together: the filters of a site see only its
own region's options, so the frontier is built chunk by chunk, each chunk filtered before
the next is built. Memory is then bounded by a chunk, not the catalog; groups sharing a grid
are still priced together within a chunk."""


def pool_frontier(demand: Demand, layout: Layout, pool: PoolSpec, offers: list[Offer],
                  cap: int, sites: list[Site],
                  grid_cache: dict | None = None, network: NetworkModel | None = None,
                  split: bool = False, sequences: dict | None = None
                  ) -> tuple[PoolFrontier, int]:
    """Pareto options of one pool per site (the trainer's provider, region and zone); also
    the number of grid points evaluated (see the module's docstring).

    ``grid_cache`` keeps the busy-time grids (which do not depend on prices) across calls,
    e.g. across the price scenarios of a what-if sweep. Built :data:`REGIONS_PER_CHUNK`
    regions at a time; the columns are in the order of one build (site-bound entries in
    (region, shape, site) order, then cross-region entries)."""
    shapes = by_shape(pool, offers)
    enum = Enumerator(demand, layout, pool, cap, {} if grid_cache is None else grid_cache,
                      sequences=sequences)
    places = sorted({s[:2] for s in sites})
    regions = sorted({sh[:2] for sh in shapes})
    kept: dict[str, list[dict[str, np.ndarray]]] = {"site": [], "cross": []}
    for start in range(0, len(regions), REGIONS_PER_CHUNK):
        chunk = set(regions[start:start + REGIONS_PER_CHUNK])
        part = {sh: g for sh, g in shapes.items() if sh[:2] in chunk}
        for kind in ("site", "cross"):
            cols = Columns()
            if kind == "site":
                site_entries(enum, part, sites, network, cols)
            elif split and pool.remote_ok:
                _cross_region_entries(enum, part, places, cols)
            if cols.sizes:
                arrays = cols.arrays()
                sel = per_site_pareto(arrays)
                kept[kind].append({k: v[sel] for k, v in arrays.items()})
    parts = kept["site"] + kept["cross"]
    if not enum.groups or not parts:
        return empty_frontier(pool), enum.evaluated
    arrays = {k: np.concatenate([a[k] for a in parts]) for k in COLUMNS}
    return PoolFrontier(pool, enum.groups, *(arrays[k] for k in (
        "t", "c", "gid", "i", "j", "region", "e", "remote", "place"))), enum.evaluated
