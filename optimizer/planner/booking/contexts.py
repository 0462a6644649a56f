"""Planning contexts of one spec, catalog and policy with different booked offers added, their
pool frontiers reused (:mod:`ptplan.planner.booking.exact` solves many such subproblems).

Every subproblem of the booking search is the plain catalog plus a few *extra* offers (block
offers free per hour with a node cap, flex-start offers at their rate, or booked offers priced
per held hour). Built by :func:`ptplan.planner.search.engine.prepare` each time, every pool's
frontier would be rebuilt from the whole catalog. Here:

* a pool that may not book (its capacity types hold neither ``block`` nor ``flex_start``: the
  policy's ``block_phases``) has the same frontier in every subproblem: built once;
* a pool that may book is rebuilt by
  :func:`ptplan.planner.frontier.merged.merged_frontier`, which re-evaluates only the
  shapes holding an extra offer and merges them with the cached frontier of the other shapes
  (exact, and in the order of one build: see that function); groups made of the same offer
  objects are taken from its group cache, so the extras are made once per (offer, price, cap)
  (:meth:`Contexts.variant`);
* the busy-time grids, the demand and the storage, network, other-cost and CPU-pool models
  are shared (they do not depend on prices or caps).

Frontiers are cached per set of sites, as :mod:`ptplan.planner.search.capacity` does within one
split search, so an extra offer in a new zone cannot reuse a frontier built for other sites.
"""

from __future__ import annotations

from dataclasses import replace

from ptplan.planner.candidates import filter_offers
from ptplan.planner.frontier.frontiers import build_candidates, sites_of
from ptplan.planner.search.context import Context
from ptplan.planner.search.engine import prepare
from ptplan.policies.model import Policy, default_policy
from ptplan.providers.base import BOOKED_TYPES, Catalog, Offer
from ptplan.spec.project import ProjectSpec


class Contexts:
    """Contexts of ``spec`` on ``catalog`` plus extra offers (see the module's docstring)."""

    def __init__(self, spec: ProjectSpec, catalog: Catalog, policy: Policy | None,
                 booked: list[Offer]) -> None:
        self.spec, self.catalog, self.booked = spec, catalog, booked
        self.policy = policy or default_policy()
        self.grids: dict = {}
        self.base = prepare(spec, catalog, policy, grid_cache=self.grids)
        self.changed = frozenset(o.key for o in booked)
        self._variants: dict[tuple, Offer] = {}
        self._frontiers: dict[tuple, dict] = {}
        self._contexts: dict[tuple, Context] = {}
        self._pinned: list[list[Offer]] = []  # the extras behind the ids of _contexts' keys

    def variant(self, offer: Offer, usd_per_hour: float, max_nodes: int | None) -> Offer:
        """``offer`` at this price and cap: one object per (offer, price, cap), so that the
        frontier caches (keyed by offer identity) recognise it in every subproblem."""
        key = (offer.key, offer.usd_per_hour, offer.max_nodes, usd_per_hour, max_nodes)
        if key not in self._variants:
            self._variants[key] = offer if (usd_per_hour, max_nodes) == (
                offer.usd_per_hour, offer.max_nodes) else replace(
                offer, usd_per_hour=usd_per_hour, max_nodes=max_nodes)
        return self._variants[key]

    def get(self, extra: list[Offer], regional: bool = False) -> Context:
        """The context of the catalog plus ``extra`` (booked offers, made by :meth:`variant`
        or the booked offers themselves), with the base spec (callers replace its deadline and
        budget). ``regional``: only the offers of the regions of ``extra`` (unless the policy
        splits pools across regions), for a subproblem whose plans that use none of
        ``extra`` are matched by a plan found without it (see
        :func:`ptplan.planner.booking.exact.solve`)."""
        if not extra:
            return self.base
        regional = regional and not self.policy.split_regions
        ident = (regional, *map(id, extra))
        hit = self._contexts.get(ident)
        if hit is not None:
            return hit
        catalog = replace(self.catalog, offers=self.catalog.offers + tuple(extra))
        offers = filter_offers(self.spec.placement, catalog, self.policy, self.spec.release).offers
        if regional:
            mine = {(o.provider, o.region) for o in extra}
            offers = [o for o in offers if (o.provider, o.region) in mine]
        added = [o for o in offers if o.capacity_type in BOOKED_TYPES]
        sites = sites_of(offers)
        places = sorted({(o.provider, o.region) for o in offers})
        cache = self._frontiers.setdefault((tuple(sites), tuple(places)), {})
        cap = self.spec.placement.max_nodes_per_pool
        runs = []
        for base in self.base.runs:
            lay = base.layout
            share_keys = {pool.name: tuple(sorted(
                (o.key, o.usd_per_hour, o.max_nodes) for o in added
                if o.capacity_type in pool.capacity_types)) for pool in lay.pools}
            c = build_candidates(self.base.demand, lay, offers, cap, cache,
                                 pool_offers={pool.name: offers for pool in lay.pools},
                                 grid_cache=self.grids, network=base.network,
                                 split=lay.policy.split_regions, share_keys=share_keys,
                                 changed=self.changed, sites=sites, places=places)
            c.storage, c.other, c.cpu = base.storage, base.other, base.cpu
            runs.append(c)
        ctx = Context(self.spec, self.base.demand, catalog, runs, len(offers), offers)
        self._contexts[ident] = ctx
        self._pinned.append(list(extra))
        return ctx
