"""Capped offers shared by pools: exact resolution by splitting caps.

Pools of a plan are held at the same time, so together they take at most an offer's
``max_nodes`` (spot capacity per zone, reserved holdings, on-prem node counts). The pool
frontiers and the enumeration treat pools as independent (each may take the whole cap): a
relaxation. When its best plan at a site (the trainer's zone) over-uses an offer, the offer's
cap is split among the pools that can use it at that site, in every possible way; under a
split the pools are independent again, so each split is solved exactly, and the best over all
splits is the exact optimum at that site. A split that reveals another contested offer is
split further (up to :data:`MAX_DEPTH` offers, at most :data:`MAX_SPLITS` split
combinations). Sites are visited in order of their relaxed bound, which stays a valid lower
bound, and the search stops when the bound exceeds the best plan found. The splits of one
region's sites share each pool's frontier per share (:class:`_Memo`).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterator
from dataclasses import dataclass, replace

from ptplan.planner.frontier.frontiers import Candidates, build_candidates, sites_of
from ptplan.planner.search.exact import Best, best, rank
from ptplan.planner.search.fills import over_capacity
from ptplan.planner.search.site_bounds import regions_by_bound
from ptplan.providers.base import Offer

MAX_DEPTH = 3
MAX_SPLITS = 400


@dataclass(frozen=True)
class Resolved:
    cands: Candidates
    best: Best
    exact: bool
    """False when the split search hit its limits (the plan is then feasible, not proven)."""


def _compositions(total: int, parts: int) -> list[tuple[int, ...]]:
    if parts == 1:
        return [(total,)]
    out = []
    for first in range(total + 1):
        for rest in _compositions(total - first, parts - 1):
            out.append((first, *rest))
    return out


def resolve(c: Candidates, offers: list[Offer], demand, cap: int,
            deadline: float | None, budget: float | None, objective: str,
            relaxed: Best | None = None, limit: tuple[float, float] | None = None
            ) -> Resolved | None:
    """The best plan of layout ``c.layout`` that respects shared caps, or None.

    ``relaxed``: the layout's relaxed best, when the caller has it. ``limit``: a rank
    (see :func:`ptplan.planner.search.exact.rank`) that a plan found elsewhere has; regions and
    splits whose relaxed best is not below it are skipped, so that None may also mean "no
    plan below ``limit``"."""
    relaxed = relaxed if relaxed is not None else best(c, deadline, budget, objective)
    if relaxed is None:
        return None
    if not _contested(c, relaxed):
        return Resolved(c, relaxed, True)
    incumbent: Resolved | None = None
    exact = True
    split = _split(c)
    for region, rb in _regional_bests(c, deadline, budget, objective):
        if incumbent is not None and rank(rb, objective) >= rank(incumbent.best, objective):
            break  # relaxed bound of the remaining regions cannot beat the incumbent
        if limit is not None and rank(rb, objective) >= limit:
            break  # nor the plan the caller has
        if not _contested(c, rb):
            found: Resolved | None = Resolved(c, rb, True)
        else:
            # split plans: the rollout pool may use other regions, so every offer stays
            place = c.regions[region][:2]
            region_offers = offers if split else [
                o for o in offers if (o.provider, o.region) == place]
            bound = [rank(incumbent.best, objective)] if incumbent is not None else \
                ([limit] if limit is not None else [])
            key = ("split", None if split else place)
            memo = c.memo.get(key)
            if memo is None:
                memo = c.memo[key] = _Memo(region_offers, split)
            found, ok = _split_search(c, region_offers, demand, cap, deadline, budget,
                                      objective, {}, 0, memo,
                                      memo.sites.index(c.regions[region]), bound)
            exact = exact and ok
        if found is not None and (incumbent is None or
                                  rank(found.best, objective) < rank(incumbent.best, objective)):
            incumbent = found
    if incumbent is None:
        return None
    return replace(incumbent, exact=exact)


def _split(c: Candidates) -> bool:
    return any(bool((f.place >= 0).any()) for f in c.frontiers.values())


def _contested(c: Candidates, b: Best, offers: list[Offer] | None = None) -> list[str]:
    caps = {o.key: o.max_nodes for o in offers} if offers is not None else None
    return over_capacity([c.frontiers[n].option(k, c.regions, b.region, c.network)
                          for n, k in b.picks.items()], caps)


def _regional_bests(c: Candidates, deadline, budget, objective) -> Iterator[tuple[int, Best]]:
    """Each region's relaxed best plan, best first (ties by region; a lower bound on what the
    region holds). Computed lazily, in the order of the regions' lower bounds
    (:func:`ptplan.planner.search.site_bounds.regions_by_bound`): a region's plan is given out once
    every region not yet computed has a bound above it, so a caller that stops early does not
    pay for the rest, and the order is that of sorting them all."""
    pending: list[tuple[tuple[float, float], int, Best]] = []
    for bound, region, _ in regions_by_bound(c, objective):
        while pending and bound > pending[0][0][0] * (1 + 1e-9) + 1e-9:
            _, r, rb = heapq.heappop(pending)
            yield r, rb
        found = best(c, deadline, budget, objective, only_region=region)
        if found is not None:
            heapq.heappush(pending, (rank(found, objective), region, found))
    while pending:
        _, r, rb = heapq.heappop(pending)
        yield r, rb


class _Memo:
    """What the split searches of one region's sites share (with split plans, of every
    site): the offers, each pool's frontier per share of the contested offers it is given (a
    pool's frontier depends on its own share only), and busy grids."""

    def __init__(self, offers: list[Offer], split: bool) -> None:
        self.split = split
        """Whether the layout has split plans (:func:`_split`)."""
        self.keyed = [(o.key, o) for o in offers]
        self.by_key = dict(self.keyed)
        self.sites = sites_of(offers)
        self.places = sorted({(o.provider, o.region) for o in offers})
        self.frontiers: dict = {}
        self.grids: dict = {}
        self.evaluated: dict = {}
        """Per (site, deadline, budget, objective, shares): the region's candidates, the
        site's relaxed best and the limit it was searched with."""
        self.candidates: dict = {}
        """Per shares: the region's candidates (shared by its sites' searches)."""


def _evaluate(c: Candidates, offers: list[Offer], demand, cap: int, deadline, budget,
              objective: str, shares: dict[str, dict[str, int]], memo: _Memo, site: int,
              limit: float = math.inf) -> tuple[Candidates, Best | None]:
    """The candidates of the memo's offers with the given per-pool shares of contested
    offers, and the relaxed best plan at ``site`` (an index into ``memo.sites``; the offers
    not yet split are shared freely), or None when it is not below ``limit`` (see
    :func:`ptplan.planner.search.exact.best`): computed once per shares, and again only for a
    looser limit."""
    skey = (site, deadline, budget, objective,
            tuple(sorted((k, tuple(sorted(v.items()))) for k, v in shares.items())))
    hit = memo.evaluated.get(skey)
    if hit is not None:
        sub, b, used = hit
        if b is not None and rank(b, objective)[0] <= used:
            return sub, b  # the optimum
        if limit <= used:
            return sub, None  # no plan below the limit it was searched with, so none below
        #                       this one either
        out = sub, best(sub, deadline, budget, objective, only_region=site, limit=limit)
        memo.evaluated[skey] = (*out, limit)
        return out
    sub = _candidates(c, offers, demand, cap, shares, skey[4], memo)
    out = sub, best(sub, deadline, budget, objective, only_region=site, limit=limit)
    memo.evaluated[skey] = (*out, limit)
    return out


def _candidates(c: Candidates, offers: list[Offer], demand, cap: int,
                shares: dict[str, dict[str, int]], shares_key: tuple, memo: _Memo
                ) -> Candidates:
    """The candidates of the memo's offers with the given per-pool shares (built once per
    shares, for every site of the region)."""
    sub = memo.candidates.get(shares_key)
    if sub is not None:
        return sub
    layout = c.layout
    by_key = memo.by_key
    pool_offers = {}
    for pool in layout.pools:
        mine = []
        for k, o in memo.keyed:
            if k in shares:
                n = shares[k].get(pool.name, 0)
                if n > 0:
                    mine.append(replace(o, max_nodes=n))
            else:
                mine.append(o)
        pool_offers[pool.name] = mine
    # a pool's frontier depends only on the shares that restrict it: of offers it may use,
    # below their cap (a share of the whole cap, or of an offer it cannot use, is no share)
    share_keys = {pool.name: tuple(sorted(
        (k, n) for k, v in shares.items()
        if by_key[k].capacity_type in pool.capacity_types
        and (n := v.get(pool.name, 0)) < (by_key[k].max_nodes or cap)))
        for pool in layout.pools}
    sub = build_candidates(demand, layout, offers, cap, memo.frontiers,
                           pool_offers=pool_offers, grid_cache=memo.grids,
                           network=c.network, split=memo.split, share_keys=share_keys,
                           changed=frozenset(shares), sites=memo.sites, places=memo.places)
    sub.storage = c.storage
    sub.other = c.other
    sub.cpu = c.cpu
    memo.candidates[shares_key] = sub
    return sub


def _split_search(c: Candidates, offers: list[Offer], demand, cap: int,
                  deadline, budget, objective: str, shares: dict[str, dict[str, int]],
                  depth: int, memo: _Memo, site: int, bound: list
                  ) -> tuple[Resolved | None, bool]:
    """Best plan at one site (``memo.sites[site]``) with the given per-pool shares of
    contested offers.

    ``bound`` holds the rank of the best plan found so far (any site, any split): a split
    whose relaxed best (shares of the offers contested so far, the rest shared freely) does not
    beat it is pruned, since splitting further only restricts the pools more. The splits of a
    contested offer are searched best-first (by their relaxed best), so that the first plan
    found is usually the optimum and the bound prunes the rest. An offer is split only among
    the pools that can use it at this site (:func:`_can_use`): the others keep its whole cap,
    which they cannot use here, so their frontiers are not rebuilt and a site's search splits
    only what its plans contest (a zone's spot offer is contested by the rollout and scoring
    pools at that zone, by the rollout pool alone at the region's other zones)."""
    sub, b = _evaluate(c, offers, demand, cap, deadline, budget, objective, shares, memo, site,
                       bound[0][0] if bound else math.inf)
    if b is None or (bound and rank(b, objective) >= bound[0]):
        return None, True
    contested = [k for k in _contested(sub, b, offers) if k not in shares]
    if not contested:
        bound[:] = [rank(b, objective)]
        return Resolved(sub, b, True), True
    if depth >= MAX_DEPTH:
        return None, False
    key = contested[0]
    offer = memo.by_key[key]
    whole = offer.max_nodes or cap
    eligible = [p.name for p in c.layout.pools
                if _can_use(p, offer, memo.sites[site], memo.split)]
    if len(eligible) < 2:  # contested, so at least two pools use it: every pool that may
        eligible = [p.name for p in c.layout.pools  # take its capacity type at all
                    if offer.capacity_type != "spot" or p.spot_ok]
    others = {p.name: whole for p in c.layout.pools if p.name not in eligible}
    splits = _compositions(whole, len(eligible))
    if len(splits) > MAX_SPLITS:
        return None, False
    children = []
    for n, split in enumerate(splits):
        new = dict(shares)
        new[key] = {**dict(zip(eligible, split, strict=True)), **others}
        kb = _evaluate(c, offers, demand, cap, deadline, budget, objective, new, memo, site,
                       bound[0][0] if bound else math.inf)[1]
        if kb is not None:
            children.append((rank(kb, objective), n, new))
    children.sort(key=lambda x: (x[0], x[1]))
    found: Resolved | None = None
    exact = True
    for r, _, new in children:
        if bound and r >= bound[0]:
            break  # sorted: no later split can beat the best plan found either
        res, ok = _split_search(c, offers, demand, cap, deadline, budget, objective, new,
                                depth + 1, memo, site, bound)
        exact = exact and ok
        if res is not None and (found is None or
                                rank(res.best, objective) < rank(found.best, objective)):
            found = res
    return found, exact


def _can_use(pool, offer: Offer, site: tuple[str, str, str], split: bool) -> bool:
    """Whether ``pool`` may take nodes of ``offer`` in a plan anchored at ``site`` (see
    :func:`ptplan.planner.frontier.pool._arrangement` and the cross-region entries of
    split plans); erring towards True only adds splits."""
    if offer.capacity_type not in pool.capacity_types or \
            (offer.capacity_type == "spot" and not pool.spot_ok):
        return False
    if (offer.provider, offer.region) != site[:2]:
        return split and pool.remote_ok
    if offer.zone and offer.zone != site[2]:
        return pool.remote_ok and offer.capacity_type == "spot"
    return True
