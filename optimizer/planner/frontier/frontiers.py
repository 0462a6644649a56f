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
A second one, for pools whose spot nodes may sit in other zones (rollout): at a site the
sequence takes every spot node of the site's zone before any remote one, so a cheap remote
node behind a dear local offer of the same shape is never taken alone. Found by
``tests/test_properties.py::test_adding_an_offer_never_costs_more`` (not derandomised: two
H100 spot offers in zone a at $3 and $19/h, one in zone b at $3.15/h; adding the $19 offer
raises a GRPO plan from $63.77 to $63.99); the fix is a second, cheapest-first arrangement
across zones with its remote nodes counted, to be added with its own exactness tests.

With egress (the rollout pool's nodes outside the trainer's zone or region) options are pruned
in (busy time, price per hour, nodes paying egress) instead (:func:`pareto_mask3`), which is
exact because a plan's egress is non-decreasing in those nodes.

Modules: :mod:`ptplan.planner.frontier.pool` enumerates one pool's options,
:mod:`ptplan.planner.frontier.busy_grid` computes their busy times,
:mod:`ptplan.planner.frontier.pareto` prunes them; this module gathers every pool's frontier of
a layout.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ptplan.core.forked import balance, split_run
from ptplan.core.hardware import gpus
from ptplan.costs.cpu import CpuPoolModel
from ptplan.costs.network import NetworkModel
from ptplan.costs.other import OtherCostModel
from ptplan.demand.model import Demand
from ptplan.demand.rates import PhaseRate
from ptplan.planner.candidates import Layout, PoolSpec
from ptplan.planner.frontier.merged import merged_frontier
from ptplan.planner.frontier.parts import LazyRates, RatesKey
from ptplan.planner.frontier.pool import (
    SEQUENCES,
    PoolFrontier,
    by_shape,
    pool_frontier,
    pool_rates,
)
from ptplan.providers.base import Offer


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
                     split: bool = False, share_keys: dict[str, tuple] | None = None,
                     changed: frozenset[str] = frozenset(),
                     sites: list[tuple[str, str, str]] | None = None,
                     places: list[tuple[str, str]] | None = None) -> Candidates:
    """Frontiers of every pool of ``layout``. ``cache`` shares frontiers between layouts that
    have the same pool (same phases, capacity rules, stalls and tail treatment);
    ``pool_offers`` gives a pool its own offers (shares of capped offers, see
    :mod:`ptplan.planner.search.capacity`); with ``share_keys`` (per pool, a key naming exactly
    what its ``pool_offers`` are) such frontiers are cached too, so that the splits of a
    contested cap that give a pool the same share reuse its frontier, and ``changed`` (the
    keys of the offers given in shares) lets a new share re-evaluate only the shapes holding
    those offers (:func:`ptplan.planner.frontier.merged.merged_frontier`). ``sites`` and
    ``places`` (:func:`sites_of` the offers, their regions) may be passed when known."""
    sites = sites if sites is not None else sites_of(offers)
    frontiers: dict[str, PoolFrontier] = {}
    considered = 0
    cache = {} if cache is None else cache
    for pool in layout.pools:
        key: tuple = pool_key(layout, pool)
        if pool_offers is not None:
            if share_keys is not None:
                key = (key, share_keys[pool.name])
            if share_keys is None or key not in cache:
                if share_keys is not None and changed and not (split and pool.remote_ok):
                    cache[key] = merged_frontier(
                        demand, layout, pool, pool_offers[pool.name], cap, sites, changed,
                        cache, ("base", key[0]), grid_cache, network)
                else:
                    cache[key] = pool_frontier(demand, layout, pool, pool_offers[pool.name],
                                               cap, sites, grid_cache, network, split,
                                               cache.setdefault(SEQUENCES, {}))
        elif key not in cache:
            cache[key] = pool_frontier(demand, layout, pool, offers, cap, sites, grid_cache,
                                       network, split, cache.setdefault(SEQUENCES, {}))
        frontiers[pool.name], n = cache[key]
        considered += n
    kept = sum(len(f.t) for f in frontiers.values())
    places = places if places is not None else sorted({(o.provider, o.region) for o in offers})
    return Candidates(layout, frontiers, sites, considered, considered - kept, network=network,
                      places=places)


def pool_key(layout: Layout, pool: PoolSpec) -> tuple:
    """What a pool's frontier depends on besides the offers: layouts with the same pool (the
    same phases, capacity rules and stalls), tail treatment (pools that decode) and
    colocation share one frontier."""
    decode = any(p in ("rollout", "eval") for p in pool.phases)
    return (pool, layout.tail if decode else None, layout.mode == "colocated")


def build_frontiers(demand: Demand, layouts: list[Layout], offers: list[Offer], cap: int,
                    cache: dict, network: NetworkModel | None = None,
                    split: bool = False) -> None:
    """Every distinct pool frontier of ``layouts`` into ``cache`` (as :func:`build_candidates`
    keys it), on two cores where :func:`ptplan.core.forked.fork_ok`: the pools are shared
    between this process and a forked child by their estimated work
    (:func:`frontier_work`), the largest first. Each frontier is exactly the one a
    single process builds (but for groups no option refers to, which do not travel, and
    the group numbers). The child's frontiers travel with their groups' offers as
    indices into ``offers`` (they come back as this process's own offer objects) and their
    rates (the demand model's, which do not pickle) as :class:`RatesKey`, computed here when
    first read (:class:`LazyRates`)."""
    sites = sites_of(offers)
    tasks: dict[tuple, tuple[Layout, PoolSpec]] = {}
    for lay in layouts:
        for pool in lay.pools:
            tasks.setdefault(pool_key(lay, pool), (lay, pool))
    todo = [(k, lay, pool) for k, (lay, pool) in tasks.items() if k not in cache]
    if not todo:
        return
    sequences = cache.setdefault(SEQUENCES, {})

    def job(lay: Layout, pool: PoolSpec):
        return lambda: pool_frontier(demand, lay, pool, offers, cap, sites, None, network,
                                     split, sequences)

    def pack(n: int, got: tuple[PoolFrontier, int]) -> tuple[PoolFrontier, int]:
        f = got[0]
        used = np.unique(f.gid)  # only the groups that options refer to travel
        renumber = np.zeros(len(f.groups), dtype=f.gid.dtype)
        renumber[used] = np.arange(len(used))
        f.groups, f.gid = [f.groups[k] for k in used.tolist()], renumber[f.gid]
        index = {id(o): k for k, o in enumerate(offers)}
        for g in f.groups:  # offers by their index, rates by what they are
            for name in OFFER_LISTS:
                setattr(g, name, [index[id(o)] for o in getattr(g, name)])
            g.rates = RatesKey(g.gpu, g.gpus_per_node)  # type: ignore[assignment]
        return got

    def unpack(n: int, got: tuple[PoolFrontier, int]) -> tuple[PoolFrontier, int]:
        _, lay, pool = todo[n]
        table = gpus()
        lazy: dict[RatesKey, LazyRates] = {}

        def make(key: RatesKey) -> Callable[[], list[list[PhaseRate]]]:
            return lambda: pool_rates(demand, lay, pool, table[key.gpu], key.gpus_per_node)
        got[0].pool = pool
        for g in got[0].groups:
            for name in OFFER_LISTS:
                setattr(g, name, [offers[k] for k in getattr(g, name)])
            key = g.rates
            assert isinstance(key, RatesKey)
            if key not in lazy:
                lazy[key] = LazyRates(make(key))
            g.rates = lazy[key]
        return got

    work = [frontier_work(pool, offers) for _, _, pool in todo]
    sides = balance(work) if sum(work) >= FORK_MIN_WORK else [0] * len(todo)
    built = split_run([job(lay, pool) for _, lay, pool in todo], sides, pack, unpack)
    for (key, _, _), got in zip(todo, built, strict=True):
        cache[key] = got


OFFER_LISTS = ("nonspot_seq", "spot_seq", "nonspot_offers", "spot_offers")
"""The fields of a :class:`~ptplan.planner.frontier.parts.Group` that hold offers."""


def frontier_work(pool: PoolSpec, offers: list[Offer]) -> int:
    """A rough size of a pool frontier's work, only to share pools between two processes:
    its groups (per shape, one per zone holding the shape's offers and one for the other
    sites) times its phases, doubled for a pool that takes remote spot nodes (its site
    staircases). On the RL example a unit is about 45 µs of one core."""
    groups = sum(len({o.zone for o in group if o.zone}) + 1
                 for group in by_shape(pool, offers).values())
    return groups * len(pool.phases) * (2 if pool.remote_ok else 1)


FORK_MIN_WORK = 2000
"""Below this much :func:`frontier_work` in all (about 0.1 s of one core) the frontiers are
built in this process: a fork and the results' trip back would cost more than they save."""


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
    """A :class:`ptplan.costs.storage.StorageModel`: storage cost as a function of run time."""
    network: NetworkModel | None = None
    """Egress rates and flows; fixed flows (dataset staging, checkpoint copies) per site."""
    places: list[tuple[str, str]] = field(default_factory=list)
    """Regions of the rollout pool's cross-region entries (``split_regions``)."""
    memo: dict = field(default_factory=dict, repr=False)
    """Results derived from the frontiers (e.g. region bounds), computed once."""
    other: OtherCostModel | None = None
    """The spec's ``other_costs:``: fixed + per hour."""
    cpu: CpuPoolModel | None = None
    """The sandbox and reward CPU pools, priced per region."""

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
        """Storage + fixed network cost at site ``region`` for run time(s) D (+ the spec's
        other costs, which do not depend on the site)."""
        return self.extra_cost_with(region, self.fixed_network(region), run_hours)

    def extra_cost_with(self, region: int, fixed, run_hours):
        """:meth:`extra_cost` with the fixed network cost given: ``fixed`` may hold one value
        per run time, for sites of the same region as ``region`` whose fixed flows differ
        (:func:`ptplan.planner.search.site_bounds.regions_by_bound` prices many sites at once)."""
        extra = self.storage_cost(region, run_hours) + fixed
        if self.other is not None:
            extra = extra + self.other.cost(run_hours)
        if self.cpu is not None:
            provider, name = self.regions[region][:2]
            extra = extra + self.cpu.cost(provider, name, run_hours)
        return extra
