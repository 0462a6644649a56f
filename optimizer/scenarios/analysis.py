"""What-if price analysis: scenarios, sweeps, break-even prices and plan diffs, in parallel.

Every answer here is an exact, verified re-solve of the planner on a catalog edited by price
rules (:mod:`ptplan.scenarios.pricerules`); nothing is extrapolated from the baseline plan.

Why re-solve rather than re-price one MILP. The planner's MILP is solved over a pruned option
set: pool options are Pareto-filtered on (busy time, $/h) and then cut by exact cost bounds
against the incumbent (:mod:`ptplan.planner.search.exact`), and both cuts depend on prices. A
coefficient change on the kept MILP, or LP cost ranging (``highspy.Highs.getRanging``) on it, is
therefore
exact only for plans that survived the baseline's pruning, not for the full problem: an option
pruned at today's prices can be the optimum at tomorrow's. So a scenario re-runs the whole
pipeline (candidates → bound → MILP → verify) on the edited catalog, and reuses only what does
not depend on prices:

* the spec, catalog and policy, parsed once per worker process (or Ray actor);
* the demand model (:func:`ptplan.demand.model.build_demand`), passed as ``demand=``;
* the busy-time grids of every (pool, GPU shape, class sizes, spot overheads), kept in a
  per-worker ``grid_cache`` dict passed to :func:`ptplan.planner.search.engine.prepare`;
* the positions of the offers each selector matches, computed once per selector;
* no explanation pass (``explain=False``): the plan diff is the explanation.

The three modes, one module each: price scenarios (:mod:`ptplan.scenarios.scenarios`), sweeps
of one price (:mod:`ptplan.scenarios.sweep`) and break-even prices
(:mod:`ptplan.scenarios.breakeven`); plan diffs: :mod:`ptplan.scenarios.diff`. This module holds
what they share: plan summaries and signatures, and how a plan uses the items a selector
matches.

Break-even prices. Scaling the matched prices by a multiplier m, every plan P costs
a_P + m·b_P (b_P = its spend on the matched offers at m = 1), so the optimal cost
min_P (a_P + m·b_P) is concave and piecewise linear in m and the optimal plan's matched spend
b(m) is non-increasing: the multipliers at which the plan's use of the matched offers is the
baseline's form one interval around m = 1 (with a budget, plans that exceed it drop out as m
rises, which keeps the interval property). Its ends are found by k-section on exact re-solves
(k = the number of workers; bisection with one), to a stated tolerance on m; both bracketing
plans are reported with their diff, and the multiplier where their two cost lines cross,
m* = (a_B − a_A)/(b_A − b_B), when it lies inside the bracket (a switch forced by the budget
has no crossing). Ties at the break-even itself may be resolved either way.

Parallelism (:mod:`ptplan.scenarios.runner`). Scenarios run in a process pool (``spawn``; each
worker is initialised once with the spec, catalog and policy) or on Ray actors
(``ray.util.ActorPool``); results come back in submission order, and each plan is a
deterministic function of its inputs, so the output does not depend on the number of workers or
the backend.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from ptplan.costs.network import egress_rate, egress_rows
from ptplan.planfile.schema import Plan, usd
from ptplan.providers.base import Catalog, EgressRate, offer_key
from ptplan.scenarios.pricerules import PriceRule, Selector

METHOD_NOTE = ("every plan is an exact, verified re-solve on the catalog with the rules applied "
               "(explain pass skipped); deltas are scenario minus baseline")


# --------------------------------------------------------------------------- summaries


def allocation_key(a: Any) -> str:
    """:attr:`ptplan.providers.base.Offer.key` of a plan allocation."""
    return offer_key(a.provider, a.region, a.zone, a.instance_type, a.capacity_type)


def pool_label(pool: Any) -> str:
    kinds: dict[str, int] = {}
    for a in pool.allocations:
        kinds[a.capacity_type] = kinds.get(a.capacity_type, 0) + a.nodes
    types = sorted({a.instance_type for a in pool.allocations})
    mix = " + ".join(f"{k} {n}" for k, n in sorted(kinds.items()))
    return (f"{pool.name}: {pool.nodes} x {pool.gpu} x {pool.gpus_per_node} "
            f"({', '.join(types)}; {mix})")


def summary(p: Plan) -> dict[str, Any]:
    """What a plan rents, in a few strings (layout, region, per pool GPUs and capacity)."""
    return {"layout": p.layout, "pipeline_mode": p.pipeline_mode, "provider": p.provider,
            "region": p.region, "pools": [pool_label(pool) for pool in p.pools],
            "storage_tiers": sorted({i.tier for i in p.storage})}


def signature(p: Plan | None) -> tuple:
    """Plans with equal signatures rent the same nodes of the same offers (a sweep marks a
    switch where it changes)."""
    if p is None:
        return ("infeasible",)
    return (p.layout, tuple((pool.name, allocation_key(a), a.nodes) for pool in p.pools
                            for a in pool.allocations),
            tuple((i.data_class, i.tier) for i in p.storage))


def money_delta(new: str, old: str) -> str:
    return str(Decimal(new) - Decimal(old))


def plan_json(p: Plan | None) -> Any:
    return p.model_dump(mode="json") if p is not None else None


def scenario_notes(rules: Sequence[PriceRule]) -> list[str]:
    """Caveats a user needs next to the numbers."""
    return [f"egress rule {r.text!r} prices the plan's network flows on matching paths "
            "(plan.network: weight sync to rollout nodes outside the trainer's zone or region, "
            "experience data, dataset staging, checkpoint copies); a plan without such flows "
            "does not change" for r in rules if r.selector.kind == "egress"]


def exact_total_usd(p: Plan) -> float:
    """A plan's total before rounding to cents: Σ nodes × hours × $/h over the pools'
    allocations + Σ boot disks ($/h × held hours) + Σ (GB-months × $/GB-month + retrieval GB ×
    fee) over storage + Σ GB × $/GB over the network items."""
    compute = sum(a.nodes * a.hours * a.usd_per_hour for pool in p.pools
                  for a in pool.allocations)
    compute += sum(pool.disk_usd_per_hour * pool.held_hours for pool in p.pools)
    storage = sum(i.gb_months * i.usd_per_gb_month + i.retrieval_gb * i.retrieval_usd_per_gb
                  for i in p.storage)
    network = sum(i.gb * i.usd_per_gb for i in p.network)
    return compute + storage + network


# --------------------------------------------------------------------------- use of offers


@dataclass(frozen=True)
class Use:
    """How a plan uses the items a selector matches."""

    items: tuple[tuple[str, str, int], ...]
    """(pool or data class, offer key or tier, nodes or 0) of matched allocations."""
    quantity: float
    """Node-hours held on matched offers (GB-months on matched storage tiers)."""
    spend_usd: float

    def key(self) -> tuple:
        return (self.items, round(self.quantity, 6))


def use_json(u: Use | None) -> dict[str, Any] | None:
    if u is None:
        return None
    return {"items": [list(x) for x in u.items], "quantity": u.quantity,
            "spend_usd": usd(u.spend_usd)}


def egress_rate_of(catalog: Catalog, provider: str, path: str) -> EgressRate | None:
    """The catalog rate the planner priced a network item with
    (:func:`ptplan.costs.network.egress_rate`); None for same-zone traffic, which the
    planner never charges, and for paths the catalog lacks (priced at 0)."""
    if path == "same_zone":
        return None
    return egress_rate(egress_rows(catalog), provider, path)


def use_of(p: Plan | None, selector: Selector, catalog: Catalog) -> Use | None:
    """How plan ``p`` uses the offers, storage tiers or egress rates ``selector`` matches in
    ``catalog`` (None for no plan)."""
    if p is None:
        return None
    if selector.kind == "offer":
        return _offer_use(p, selector, catalog)
    if selector.kind == "storage":
        return _storage_use(p, selector, catalog)
    return _egress_use(p, selector, catalog)


def _offer_use(p: Plan, selector: Selector, catalog: Catalog) -> Use:
    keys = {o.key for o in catalog.offers if selector.matches(o)}
    items, qty, spend = [], 0.0, 0.0
    for pool in p.pools:
        for a in pool.allocations:
            k = allocation_key(a)
            if k in keys:
                items.append((pool.name, k, a.nodes))
                qty += a.nodes * a.hours
                spend += a.nodes * a.hours * a.usd_per_hour
    return Use(tuple(sorted(items)), qty, spend)


def _storage_use(p: Plan, selector: Selector, catalog: Catalog) -> Use:
    from ptplan.costs.storage import tiers_for

    items, qty, spend = [], 0.0, 0.0
    for i in p.storage:
        tiers = [t for t in tiers_for(catalog, i.provider, i.region) if t.tier == i.tier]
        if any(selector.matches(t) for t in tiers):
            items.append((i.data_class, i.tier, 0))
            qty += i.gb_months
            spend += i.gb_months * i.usd_per_gb_month
    for pool, gb_months in disk_use(p, selector, catalog):
        items.append((f"disks:{pool.name}", pool.disk_tier, pool.nodes))
        qty += gb_months
        spend += gb_months * pool.disk_usd_per_gb_month
    return Use(tuple(sorted(items)), qty, spend)


def disk_use(p: Plan, selector: Selector, catalog: Catalog) -> list[tuple[Any, float]]:
    """Pools whose boot disks sit on a block tier ``selector`` matches, with their billed
    GB-months (nodes × GB × held hours ÷ 730)."""
    from ptplan.costs.disks import block_tier
    from ptplan.costs.storage import HOURS_PER_MONTH

    out = []
    for pool in p.pools:
        t = block_tier(catalog, pool.provider, pool.region) if pool.disk_tier else None
        if t is not None and t.tier == pool.disk_tier and selector.matches(t):
            out.append((pool, pool.nodes * pool.boot_disk_gb * pool.held_hours
                        / HOURS_PER_MONTH))
    return out


def _egress_use(p: Plan, selector: Selector, catalog: Catalog) -> Use:
    """GB of the plan's network items on matched rates."""
    items, qty, spend = [], 0.0, 0.0
    for n in p.network:
        rate = egress_rate_of(catalog, n.src.provider, n.path)
        if rate is not None and selector.matches(rate):
            items.append((n.flow, n.path, n.nodes or 0))
            qty += n.gb
            spend += n.gb * n.usd_per_gb
    return Use(tuple(sorted(items)), qty, spend)
