"""Pool frontiers: every option of every pool at every site, Pareto-pruned.

Enumeration and pruning (exactness): for each (pool, region, shape) every pair (non-spot nodes
Nn, spot nodes Ns) with 1 ≤ Nn + Ns ≤ cap is evaluated; within a capacity class nodes are taken
from the cheapest offers first (non-spot: by price, rates are equal; spot: by price per effective
node-hour price/(1−ω)). An option is dropped when another option of the same pool and region is
at least as fast and at least as cheap per hour (Pareto filter): any plan using the dropped
option is matched or beaten by the same plan with the other one, in every mode, because run time
is non-decreasing in each pool's busy time and cost = run time × Σ usd_per_hour. The one
approximation: spot offers of one shape and region with *different* interruption rates are
ordered by price/(1−ω), which is exact when the rates are equal (the embedded catalog's case).

With egress (the rollout pool's nodes outside the trainer's zone or region) options are pruned
in (busy time, price per hour, nodes paying egress) instead (:func:`pareto_mask3`), which is
exact because a plan's egress is non-decreasing in those nodes.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, replace
from itertools import accumulate

import numpy as np

from optimizer.core.hardware import gpus
from optimizer.costs.network import NetworkModel
from optimizer.demand.model import Demand
from optimizer.demand.rates import PhaseRate, phase_rates
from optimizer.planner.candidates import Layout, PoolOption, PoolSpec, spot_overhead
from providers.base import Offer


def _class_arrays(offers: list[Offer], weights: list[float], cap: int
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[Offer]]:
    """Cumulative (cost/h, effective nodes, Σλ) for taking 0..k nodes cheapest-first."""
    order = sorted(range(len(offers)),
                   key=lambda i: (offers[i].usd_per_hour / max(weights[i], 1e-9), offers[i].key))
    idx: list[int] = []
    for i in order:
        room = min(offers[i].max_nodes or cap, cap - len(idx))
        idx.extend([i] * room)
        if len(idx) >= cap:
            break
    seq = [offers[i] for i in idx]
    cost = np.fromiter(accumulate((o.usd_per_hour for o in seq), initial=0.0), float)
    eff = np.fromiter(accumulate((weights[i] for i in idx), initial=0.0), float)
    lam = np.fromiter(accumulate((o.interruptions_per_hour or 0.0 for o in seq), initial=0.0),
                      float)
    return cost, eff, lam, seq


def _fill(seq: list[Offer], k: int) -> list[tuple[Offer, int]]:
    counts: dict[str, list] = {}
    for o in seq[:k]:
        counts.setdefault(o.key, [o, 0])[1] += 1
    return [(o, n) for o, n in counts.values()]


def fill_variants(option: PoolOption, group: Group, limit: int = 4) -> list[PoolOption]:
    """The same node counts drawn from other offers of the same class (rotating which offer
    is used first), where every offer of the class has the same interruption rate, so the
    busy time is unchanged and only the price and the offers used differ. Used when pools
    compete for capped offers."""
    out: list[PoolOption] = []
    by_class = {"nonspot": group.nonspot_offers, "spot": group.spot_offers}
    counts = {"nonspot": sum(n for o, n in option.fill if o.capacity_type != "spot"),
              "spot": sum(n for o, n in option.fill if o.capacity_type == "spot")}
    for cls, offers in by_class.items():
        k = counts[cls]
        rates = {o.interruptions_per_hour for o in offers}
        if k == 0 or len(offers) < 2 or len(rates) > 1 or \
                (cls == "spot" and (option.remote_nodes or group.all_remote)):
            continue  # rotating remote spot nodes would change the egress
        ordered = sorted(offers, key=lambda o: (o.usd_per_hour, o.key))
        keep = [(o, n) for o, n in option.fill
                if (o.capacity_type == "spot") != (cls == "spot")]
        for r in range(1, min(limit, len(ordered))):
            rotated = ordered[r:] + ordered[:r]
            fill: list[tuple[Offer, int]] = []
            left = k
            for o in rotated:
                take = min(left, o.max_nodes or left)
                if take:
                    fill.append((o, take))
                    left -= take
                if left == 0:
                    break
            if left:
                continue
            new_fill = tuple(keep + fill)
            price = sum(o.usd_per_hour * n for o, n in new_fill)
            out.append(replace(option, fill=new_fill, usd_per_hour=price))
    return out


def offer_usage(options: list[PoolOption]) -> dict[str, int]:
    """Nodes taken from each offer (by key) by a set of pool options held at the same time."""
    used: dict[str, int] = defaultdict(int)
    for opt in options:
        for o, n in opt.fill:
            used[o.key] += n
    return dict(used)


def over_capacity(options: list[PoolOption], caps: dict[str, int | None] | None = None
                  ) -> list[str]:
    """Offers whose cap the options exceed together (pools are held at the same time).
    ``caps`` gives the offers' real caps when the options' offers carry per-pool shares."""
    if caps is None:
        caps = {o.key: o.max_nodes for opt in options for o, _ in opt.fill}
    return sorted(k for k, n in offer_usage(options).items()
                  if (cap := caps[k]) is not None and n > cap)


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
    lv = level.astype(int)
    order = np.lexsort((c, t, lv))
    span = float(c.max() - c.min()) + 1.0
    shifted = c[order] - lv[order] * span
    prev = np.concatenate(([np.inf], np.minimum.accumulate(shifted)[:-1]))
    first = np.concatenate(([True], lv[order][1:] != lv[order][:-1]))
    cand = order[first | (shifted < prev - 1e-12)]
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


@dataclass
class Group:
    """One (provider, region, GPU shape) for one pool and one arrangement of its offers
    around a zone: the grid of node counts. Non-spot nodes come first from
    ``nonspot_seq``; spot nodes from ``spot_seq``, the site's zone first, then (rollout pool)
    the region's other zones, whose nodes are *remote*."""

    provider: str
    region: str
    gpu: str
    gpus_per_node: int
    nonspot_seq: list[Offer]
    spot_seq: list[Offer]
    rates: list[list[PhaseRate]]
    nonspot_offers: list[Offer]
    spot_offers: list[Offer]
    """Spot offers of the site's zone (rotated by :func:`fill_variants`)."""
    e_nodes: np.ndarray
    omega: np.ndarray
    picks: list[np.ndarray]
    remote: np.ndarray = field(default_factory=lambda: np.zeros(1, dtype=int))
    """Remote nodes among the first j spot nodes (cumulative)."""
    all_remote: bool = False
    """Cross-region entries (split plans): every node is remote."""


@dataclass
class PoolFrontier:
    """Pareto options of one pool, per site, as arrays (objects built on demand)."""

    pool: PoolSpec
    groups: list[Group]
    t: np.ndarray
    c: np.ndarray
    gid: np.ndarray
    i: np.ndarray
    j: np.ndarray
    region: np.ndarray
    """Index into :attr:`Candidates.regions` (sites); -1 for cross-region entries."""
    e: np.ndarray
    """Egress (USD over the run) of site-bound entries, priced against their site."""
    remote: np.ndarray
    """Nodes paying egress (outside the site's zone, or all nodes of cross-region entries)."""
    place: np.ndarray
    """Cross-region entries: index into :attr:`Candidates.places` (-1 for site-bound)."""

    def option(self, k: int, sites: list[tuple[str, str, str]], site: int | None = None,
               network: NetworkModel | None = None) -> PoolOption:
        """Option ``k`` priced against its site (``sites`` = :attr:`Candidates.regions`);
        cross-region entries need the trainer's ``site`` (an index into ``sites``) and the
        ``network`` model."""
        g = self.groups[int(self.gid[k])]
        i, j = int(self.i[k]), int(self.j[k])
        fill = _fill(g.nonspot_seq, i) + _fill(g.spot_seq, j)
        hours, precisions, rates_used = [], [], []
        for ph, rates, pick in zip(self.pool.phases, g.rates, g.picks, strict=True):
            r = rates[int(pick[i, j])]
            scale = 1.0
            if r.nodes_per_replica > 1:
                scale = ((i + j) // r.nodes_per_replica) * r.nodes_per_replica / (i + j)
            hours.append((ph, r.busy(float(g.e_nodes[i, j]) * scale)))
            precisions.append((ph, r.precision))
            rates_used.append(r)
        own = int(self.region[k])
        if own >= 0:
            home = sites[own]
            egress, remote = float(self.e[k]), int(self.remote[k])
            path = "cross_zone" if remote else "same_zone"
        else:
            if site is None or network is None:
                raise ValueError("a cross-region option needs the trainer's site")
            home = sites[site]
            path, per_node, fixed = network.cross_region_terms(home, (g.provider, g.region))
            egress = (i + j) * per_node + fixed
            remote = i + j
        return PoolOption(
            pool=self.pool.name, provider=g.provider, region=g.region, gpu=g.gpu,
            gpus_per_node=g.gpus_per_node, fill=tuple(fill), nodes=i + j,
            effective_nodes=float(g.e_nodes[i, j]), usd_per_hour=float(self.c[k]),
            busy_hours=float(self.t[k]), phase_hours=tuple(hours),
            precisions=tuple(precisions), rates=tuple(rates_used),
            overhead_fraction=float(g.omega[i, j]), site=home, egress_usd=egress,
            remote_nodes=remote, egress_path=path,
        )


def _grid(demand: Demand, pool: PoolSpec, rates_per_phase: list[list[PhaseRate]], gpn: int,
          cap: int, n_nonspot: int, sp_eff: np.ndarray, sp_lam: np.ndarray) -> tuple:
    """Busy hours over the (non-spot nodes × spot nodes) grid of one shape; it depends on the
    shape, the class sizes and the spot classes' overheads, not on prices, so it is shared by
    every region where those agree."""
    eff = demand.spec.efficiency
    nn = np.arange(n_nonspot)[:, None]
    ns = np.arange(len(sp_eff))[None, :]
    total = nn + ns
    valid = (total >= 1) & (total <= cap)
    if pool.max_spot_share < 1.0:  # policy: at most this share of the pool's nodes on spot
        valid &= ns <= pool.max_spot_share * total + 1e-9
    if pool.stateful and gpn < demand.spec.placement.multi_node_training_min_gpus_per_node:
        valid &= total <= 1  # data-parallel training across small nodes: not modelled
    n_tot = np.maximum(total, 1).astype(float)
    if pool.stateful:
        lam = np.broadcast_to(sp_lam[None, :], total.shape)
        c_h, r_h = eff.checkpoint_minutes / 60.0, eff.restart_minutes / 60.0
        omega = np.sqrt(2.0 * c_h * lam) + r_h * lam
        e_nodes = n_tot * (1.0 - omega)
        valid &= omega < 0.9
    else:
        e_nodes = nn + sp_eff[None, :]
        omega = 1.0 - e_nodes / n_tot
    busy = np.full(total.shape, pool.stall_hours)
    picks: list[np.ndarray] = []
    for rates in rates_per_phase:
        best = np.full(total.shape, np.inf)
        pick = np.zeros(total.shape, dtype=int)
        for idx, r in enumerate(rates):
            scale = 1.0
            if r.nodes_per_replica > 1:
                scale = (total // r.nodes_per_replica) * r.nodes_per_replica / n_tot
            with np.errstate(divide="ignore", invalid="ignore"):
                t = np.where(total >= r.nodes_per_replica,
                             np.maximum(r.node_hours / (e_nodes * scale), r.floor_hours),
                             np.inf)
            better = t < best
            best = np.where(better, t, best)
            pick = np.where(better, idx, pick)
        busy = busy + best
        picks.append(pick)
    valid &= np.isfinite(busy)
    return valid, busy, picks, e_nodes, omega


def pool_frontier(demand: Demand, layout: Layout, pool: PoolSpec, offers: list[Offer],
                  cap: int, sites: list[tuple[str, str, str]],
                  grid_cache: dict | None = None, network: NetworkModel | None = None,
                  split: bool = False) -> tuple[PoolFrontier, int]:
    """Pareto options of one pool per site (the trainer's provider, region and zone); also
    the number of grid points evaluated.

    At a site, region-level offers (no zone: on-demand, reserved) and the site zone's spot
    offers are local; a pool with ``remote_ok`` (rollout) may also take the region's other
    zones' spot offers, after the local ones, each such node paying the cross-zone rate on
    its weight-sync copy (``e`` = remote nodes × steps × W × rate). Options are pruned by
    Pareto dominance in (busy time, price per hour, remote nodes), which is exact because a
    plan's egress is non-decreasing in the remote nodes. With ``split`` the rollout pool also
    gets cross-region entries per region (every zone's spot offers cheapest-first, all nodes
    remote), priced against the trainer's site during the search.

    ``grid_cache`` keeps the busy-time grids (which do not depend on prices) across calls,
    e.g. across the price scenarios of a what-if sweep."""
    by_group: dict[tuple[str, str, str, int], list[Offer]] = defaultdict(list)
    for o in offers:
        if o.capacity_type not in pool.capacity_types:
            continue
        by_group[(o.provider, o.region, o.gpu, o.gpus_per_node)].append(o)
    zones: dict[tuple[str, str], list[int]] = defaultdict(list)
    for n, site in enumerate(sites):
        zones[site[:2]].append(n)
    table = gpus()
    rate_cache: dict[tuple[str, int], list[list[PhaseRate]] | None] = {}
    grid_cache = {} if grid_cache is None else grid_cache
    eff = demand.spec.efficiency
    context = (pool, layout.tail, cap, eff.checkpoint_minutes, eff.restart_minutes,
               demand.spec.placement.multi_node_training_min_gpus_per_node)
    groups: list[Group] = []
    cols: dict[str, list[np.ndarray]] = defaultdict(list)
    evaluated = 0
    per_node: dict[str, float] = {}
    omega_of: dict[str, float] = {}
    ns_cache: dict[tuple, tuple] = {}

    def weights_of(spot: list[Offer]) -> list[float]:
        if pool.stateful:
            return [1.0] * len(spot)
        out = []
        for o in spot:
            w = omega_of.get(o.key)
            if w is None:
                w = omega_of[o.key] = 1.0 - spot_overhead(o, demand)
            out.append(w)
        return out

    def ordered(group: list[Offer], weights: list[float], room: int) -> list[Offer]:
        """Cheapest first (by price per effective node-hour), each offer up to its cap."""
        order = sorted(range(len(group)), key=lambda i: (
            group[i].usd_per_hour / max(weights[i], 1e-9), group[i].key))
        seq: list[Offer] = []
        for i in order:
            take = min(group[i].max_nodes or room, room - len(seq))
            seq.extend([group[i]] * take)
            if len(seq) >= room:
                break
        return seq

    def add_group(provider: str, region: str, gpu_name: str, gpn: int,
                  rates_per_phase: list[list[PhaseRate]], nonspot: list[Offer],
                  local: list[Offer], remote: list[Offer], all_remote: bool = False
                  ) -> tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                             np.ndarray] | None:
        nonlocal evaluated
        ns_key = tuple(o.key for o in nonspot)
        if ns_key not in ns_cache:
            ns_cache[ns_key] = _class_arrays(nonspot, [1.0] * len(nonspot), cap)
        ns_cost, _, _, ns_seq = ns_cache[ns_key]
        local_seq = ordered(local, weights_of(local), cap)
        remote_seq = ordered(remote, weights_of(remote), cap - len(local_seq)) if remote else []
        sp_seq = local_seq + remote_seq
        w = weights_of(sp_seq)
        sp_cost = np.fromiter(accumulate((o.usd_per_hour for o in sp_seq), initial=0.0), float)
        sp_eff = np.fromiter(accumulate(w, initial=0.0), float)
        sp_lam = np.fromiter(accumulate((o.interruptions_per_hour or 0.0 for o in sp_seq),
                                        initial=0.0), float)
        rem = np.concatenate((np.zeros(len(local_seq) + 1, dtype=int),
                              np.arange(1, len(remote_seq) + 1)))
        grid_key = (context, gpu_name, gpn, len(ns_cost), sp_eff.round(12).tobytes(),
                    sp_lam.round(15).tobytes() if pool.stateful else b"")
        if grid_key not in grid_cache:
            grid = _grid(demand, pool, rates_per_phase, gpn, cap, len(ns_cost), sp_eff, sp_lam)
            ii, jj = np.nonzero(grid[0])
            grid_cache[grid_key] = (*grid, ii, jj, grid[1][ii, jj])
        _, _, picks, e_nodes, omega, ii, jj, b = grid_cache[grid_key]
        evaluated += len(ii)
        if len(ii) == 0:
            return None
        c = ns_cost[ii] + sp_cost[jj]
        level = (ii + jj) if all_remote else rem[jj]
        keep = pareto_mask3(b, c, level)
        gid = len(groups)
        groups.append(Group(provider, region, gpu_name, gpn, ns_seq, sp_seq, rates_per_phase,
                            nonspot, local, e_nodes, omega, picks, rem, all_remote))
        return gid, b[keep], c[keep], ii[keep], jj[keep], level[keep]

    for (provider, region, gpu_name, gpn), group in sorted(by_group.items()):
        rk = (gpu_name, gpn)
        if rk not in rate_cache:
            rates = [phase_rates(demand, ph, table[gpu_name], gpn, layout.tail, layout.policy)
                     for ph in pool.phases]
            rate_cache[rk] = rates if all(rates) else None
        rates_per_phase = rate_cache[rk]
        if rates_per_phase is None:
            continue
        done: dict[tuple, tuple | None] = {}
        for s in zones[(provider, region)]:
            zone = sites[s][2]
            nonspot = [o for o in group if o.capacity_type != "spot"
                       and (not o.zone or o.zone == zone)]
            local = [o for o in group if o.capacity_type == "spot"
                     and (not o.zone or o.zone == zone)]
            remote = [o for o in group if o.capacity_type == "spot" and o.zone
                      and o.zone != zone] if pool.remote_ok else []
            arrangement = (tuple(o.key for o in nonspot), tuple(o.key for o in local),
                           tuple(o.key for o in remote))
            if arrangement not in done:
                done[arrangement] = add_group(provider, region, gpu_name, gpn,
                                              rates_per_phase, nonspot, local, remote)
            got = done[arrangement]
            if got is None:
                continue
            gid, b, c, ii, jj, level = got
            if provider not in per_node and network is not None:
                per_node[provider] = network.cross_zone_per_node(provider)
            e_node = per_node.get(provider, 0.0) if pool.remote_ok else 0.0
            cols["t"].append(b)
            cols["c"].append(c)
            cols["gid"].append(np.full(len(b), gid))
            cols["i"].append(ii)
            cols["j"].append(jj)
            cols["region"].append(np.full(len(b), s))
            cols["remote"].append(level)
            cols["e"].append(level * e_node)
            cols["place"].append(np.full(len(b), -1))
    places: list[tuple[str, str]] = sorted(zones)
    if split and pool.remote_ok:
        place_index = {p: n for n, p in enumerate(places)}
        for (provider, region, gpu_name, gpn), group in sorted(by_group.items()):
            rates_per_phase = rate_cache.get((gpu_name, gpn))
            if rates_per_phase is None:
                continue
            nonspot = [o for o in group if o.capacity_type != "spot"]
            spot = [o for o in group if o.capacity_type == "spot"]
            got = add_group(provider, region, gpu_name, gpn, rates_per_phase, nonspot, spot,
                            [], all_remote=True)
            if got is None:
                continue
            gid, b, c, ii, jj, level = got
            cols["t"].append(b)
            cols["c"].append(c)
            cols["gid"].append(np.full(len(b), gid))
            cols["i"].append(ii)
            cols["j"].append(jj)
            cols["region"].append(np.full(len(b), -1))
            cols["remote"].append(level)
            cols["e"].append(np.zeros(len(b)))
            cols["place"].append(np.full(len(b), place_index[(provider, region)]))
    if not groups or not cols["t"]:
        empty = np.zeros(0)
        ints = empty.astype(int)
        return PoolFrontier(pool, [], empty, empty, ints, ints, ints, ints, empty, ints,
                            ints), evaluated
    arrays = {k: np.concatenate(v) for k, v in cols.items()}
    kept: list[np.ndarray] = []
    for key in ("region", "place"):
        for r in np.unique(arrays[key]):
            if r < 0:
                continue
            idx = np.nonzero(arrays[key] == r)[0]
            kept.append(idx[pareto_mask3(arrays["t"][idx], arrays["c"][idx],
                                         arrays["remote"][idx])])
    sel = np.sort(np.concatenate(kept))
    return PoolFrontier(pool, groups, arrays["t"][sel], arrays["c"][sel], arrays["gid"][sel],
                        arrays["i"][sel], arrays["j"][sel], arrays["region"][sel],
                        arrays["e"][sel], arrays["remote"][sel], arrays["place"][sel]), evaluated


def sites_of(offers: list[Offer]) -> list[tuple[str, str, str]]:
    """Sites (provider, region, zone) where a plan can be anchored: every zone of a region
    that has zoned offers, or the region itself (zone "") when none has."""
    zones: dict[tuple[str, str], set[str]] = defaultdict(set)
    for o in offers:
        zones[(o.provider, o.region)]
        if o.zone:
            zones[(o.provider, o.region)].add(o.zone)
    out: list[tuple[str, str, str]] = []
    for (provider, region), zs in sorted(zones.items()):
        out.extend((provider, region, z) for z in sorted(zs or {""}))
    return out


def build_candidates(demand: Demand, layout: Layout, offers: list[Offer], cap: int,
                     cache: dict | None = None,
                     pool_offers: dict[str, list[Offer]] | None = None,
                     grid_cache: dict | None = None, network: NetworkModel | None = None,
                     split: bool = False) -> Candidates:
    """Frontiers of every pool of ``layout``. ``cache`` shares frontiers between layouts that
    have the same pool (same phases, capacity rules, stalls and tail treatment);
    ``pool_offers`` gives a pool its own offers (shares of capped offers, see
    :mod:`optimizer.planner.capacity`)."""
    sites = sites_of(offers)
    frontiers: dict[str, PoolFrontier] = {}
    considered = 0
    cache = {} if cache is None else cache
    for pool in layout.pools:
        decode = any(p in ("rollout", "eval") for p in pool.phases)
        key = (pool, layout.tail if decode else None)
        if pool_offers is not None:
            cache[key] = pool_frontier(demand, layout, pool, pool_offers[pool.name], cap,
                                       sites, grid_cache, network, split)
        elif key not in cache:
            cache[key] = pool_frontier(demand, layout, pool, offers, cap, sites, grid_cache,
                                       network, split)
        frontiers[pool.name], n = cache[key]
        considered += n
    kept = sum(len(f.t) for f in frontiers.values())
    places = sorted({(o.provider, o.region) for o in offers})
    return Candidates(layout, frontiers, sites, considered, considered - kept, network=network,
                      places=places)


@dataclass
class Candidates:
    layout: Layout
    frontiers: dict[str, PoolFrontier]
    """Per pool name: its Pareto options in every region."""
    regions: list[tuple[str, str, str]]
    """Sites: (provider, region, zone) where the trainer sits (see :func:`sites_of`)."""
    considered: int = 0
    """Grid points (pool × region × shape × node counts) evaluated."""
    pruned: int = 0
    """Of those, dropped as Pareto-dominated."""
    storage: object | None = None
    """A :class:`optimizer.costs.storage.StorageModel`: storage cost as a function of run time."""
    network: NetworkModel | None = None
    """Egress rates and flows; fixed flows (dataset staging, checkpoint copies) per site."""
    places: list[tuple[str, str]] = field(default_factory=list)
    """Regions of the rollout pool's cross-region entries (``split_regions``)."""
    memo: dict = field(default_factory=dict, repr=False)
    """Results derived from the frontiers (e.g. region bounds), computed once."""

    def storage_cost(self, region: int, run_hours):
        """Storage cost (USD) at site ``region`` at run time(s) D (0 without a storage model)."""
        if self.storage is None:
            return 0.0 * np.asarray(run_hours, dtype=float)
        provider, name = self.regions[region][:2]
        return self.storage.cost(provider, name, run_hours)  # type: ignore[attr-defined]

    def fixed_network(self, region: int) -> float:
        """Dataset staging and checkpoint copies of a plan anchored at site ``region`` whose
        rollout (if any) is in the same region."""
        if self.network is None:
            return 0.0
        key = ("fixed_network", region)
        if key not in self.memo:
            self.memo[key] = self.network.fixed_cost(self.regions[region])
        return float(self.memo[key])

    def extra_cost(self, region: int, run_hours):
        """Storage + fixed network cost at site ``region`` for run time(s) D."""
        return self.storage_cost(region, run_hours) + self.fixed_network(region)
