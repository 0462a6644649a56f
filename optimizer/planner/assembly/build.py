"""Turn the chosen pool options into a :class:`~ptplan.planfile.schema.Plan`, with its explanation.

Run time (held hours of every pool): colocated/sync = Σ pool busy hours; async = max pool busy
hours + fill_fraction × rollout busy hours. A phase's cost is what its pool's nodes cost while
the phase runs; a pool's idle cost is the rest of its held time. Nothing is re-optimised here.
Storage and network items: :mod:`ptplan.planner.assembly.items`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from ptplan.costs.storage import lifecycle
from ptplan.planfile.schema import (
    PLAIN_SCHEMA_VERSION,
    SCHEMA_VERSION,
    CpuPoolItem,
    Explain,
    Lifecycle,
    NetworkItem,
    OtherCostItem,
    Plan,
    SolverInfo,
    SpotModel,
    Status,
    StorageItem,
    hours,
    spec_digest,
    usd,
)
from ptplan.planner.assembly.cpu_items import cpu_pool_items
from ptplan.planner.assembly.items import network_items, plan_site, storage_items
from ptplan.planner.assembly.phases import (
    calibration_records,
    compute_rate,
    phase_plans,
    pool_plan,
    rounding_cost,
)
from ptplan.planner.candidates import Layout, PoolOption
from ptplan.planner.search.engine import Context, LayoutRun, run_hours, solution_key
from ptplan.spec.defaults import applied_defaults


def _winner(runs: list[LayoutRun], solved: list[LayoutRun], objective: str) -> LayoutRun:
    """The solved layout with the best (objective, other figure), first layout on ties
    (:func:`ptplan.planner.search.engine.solution_key`)."""
    return min(solved, key=lambda r: solution_key(r, objective, runs.index(r)))


@dataclass(frozen=True)
class _Costs:
    """The plan's cost terms, unrounded, with its storage and network items."""

    compute: float
    idle: float
    storage_items: list[StorageItem]
    storage: float
    network_items: list[NetworkItem]
    network: float
    disks: float = 0.0
    other_items: list[OtherCostItem] | None = None
    """The spec's ``other_costs`` (None without the section)."""
    other: float = 0.0
    cpu_items: list[CpuPoolItem] | None = None
    """The CPU pools (None without CPU work)."""
    cpu: float = 0.0

    @property
    def total(self) -> float:
        return self.compute + self.disks + self.storage + self.network + self.other + self.cpu


def compute_share(costs: _Costs) -> str:
    """The printed compute cost: the rounded total less the rounded disks, storage and network,
    so that the printed parts add up to the printed total to the cent (compute, the largest
    part, takes the rounding: at most 2 cents from its exact figure)."""
    parts = Decimal(usd(costs.disks)) + Decimal(usd(costs.storage)) + Decimal(usd(costs.network))
    if costs.other_items is not None:
        parts += Decimal(usd(costs.other))
    if costs.cpu_items is not None:
        parts += Decimal(usd(costs.cpu))
    return str(Decimal(usd(costs.total)) - parts)


def _costs(winner: LayoutRun, chosen: dict[str, PoolOption], held: float) -> _Costs:
    pools = winner.cands.layout.pools
    lost = sum(rounding_cost(chosen[p.name], held) for p in pools)  # blocks' whole units
    compute = sum(compute_rate(chosen[p.name]) * held for p in pools) + lost
    idle = sum(compute_rate(chosen[p.name]) * max(0.0, held - chosen[p.name].busy_hours)
               for p in pools) + lost
    disks = sum(chosen[p.name].disk_usd_per_hour * held for p in pools)
    stored, storage_total = storage_items(winner, chosen, held)
    sent, network_total = network_items(winner, chosen)
    site = plan_site(chosen)
    cpu_items, cpu = cpu_pool_items(winner.cands.cpu, site[0], site[1], held)
    model = winner.cands.other
    if model is None:
        return _Costs(compute, idle, stored, storage_total, sent, network_total, disks,
                      cpu_items=cpu_items, cpu=cpu)
    items = [OtherCostItem(name=ln.name, basis=ln.basis,
                           quantity=held if ln.basis == "per_hour" else ln.quantity,
                           usd_per_unit=ln.usd_per_unit, cost_usd=usd(ln.cost(held)))
             for ln in model.lines]
    other = float(model.cost(held))
    return _Costs(compute, idle, stored, storage_total, sent, network_total, disks, items,
                  other, cpu_items, cpu)


def _unpriced_disks(lay: Layout, chosen: dict[str, PoolOption]) -> list[str]:
    """Providers whose boot disks the catalog has no block-storage rate for (priced at $0)."""
    if lay.disks is None:
        return []
    missing = sorted({o.provider for o in chosen.values()
                      if lay.disks.tier(o.provider, o.region) is None})
    return [f"catalog {lay.disks.catalog.name} has no block-storage tier for "
            f"{', '.join(missing)}: boot disks ({lay.disks.gb} GB per node) are priced at $0; "
            "add a storage tier with access: block"] if missing else []


def _unpriced_warning(ctx: Context, winner: LayoutRun, items: list[NetworkItem]) -> list[str]:
    """Egress the catalog has no rate for (priced at $0)."""
    net = winner.cands.network
    unpriced = sorted({f"{i.src.provider} {i.path}" for i in items
                       if net is not None and i.path != "same_zone"
                       and f"{i.src.provider} {i.path}" in net.missing})
    if not unpriced:
        return []
    return [f"catalog {ctx.catalog.name} has no egress rate for "
            f"{', '.join(unpriced)}: that traffic is priced at $0; add egress "
            "rows to the catalog"]


@dataclass(frozen=True)
class _Optimality:
    status: str
    gap: float
    cross_check: str
    warnings: list[str]


def _optimality(runs: list[LayoutRun], winner: LayoutRun, objective: str, costs: _Costs,
                held: float) -> _Optimality:
    """The enumeration's best over all layouts is a lower bound (exact when pools do not
    compete for capped offers); the plan is proven optimal when it reaches it."""
    assert winner.solution is not None
    bounds = [r.best for r in runs if r.best is not None]
    if objective == "cost":
        bound, value = min(b.usd for b in bounds), costs.total
    else:
        bound, value = min(b.run_hours for b in bounds), held
    bound_gap = max(0.0, value / bound - 1.0) if bound > 0 else 0.0
    status, gap = winner.solution.status, winner.solution.gap
    if bound_gap <= 1e-6 or abs(value - bound) <= 0.005:
        return _Optimality(status, gap, "agree", [])
    if winner.shared_capacity or any(r.shared_capacity for r in runs):
        return _Optimality(
            "feasible", max(gap, bound_gap),
            f"bound {bound:,.2f} from the relaxation that lets pools share capped offers "
            f"freely; the plan is within {bound_gap:.2%} of it",
            ["pools compete for capped offers: the plan respects every cap; its "
             f"cost is within {bound_gap:.2%} of a lower bound (status feasible)"])
    cross = f"differ: enumeration {bound:,.4f} vs plan {value:,.4f}"
    return _Optimality("feasible", max(gap, bound_gap), cross,
                       [f"internal cross-check: MILP and enumeration {cross}; the verified "
                        "MILP plan is shown"])


def _solver_info(ctx: Context, runs: list[LayoutRun], solver: str, opt: _Optimality,
                 start: float, timings: bool) -> SolverInfo:
    return SolverInfo(
        name=solver, status=Status(opt.status), gap=round(opt.gap, 9),
        seconds=round(time.perf_counter() - start, 3) if timings else 0.0,
        layouts=len(runs), options_considered=sum(r.cands.considered for r in runs),
        options_pruned=sum(r.cands.pruned for r in runs),
        milp_options=sum(r.milp_options for r in runs),
        offers_considered=ctx.offers_considered, cross_check=opt.cross_check,
    )


def _spec_fields(ctx: Context, lay: Layout) -> dict[str, Any]:
    """What the plan records of the spec, the policy and the catalog it was made from."""
    spec, demand = ctx.spec, ctx.demand
    max_usd = spec.budget.max_usd
    return dict(
        spec_name=spec.name, spec_digest=spec_digest(spec.model_dump(mode="json")),
        method=spec.method, algorithm=spec.algorithm,
        lifecycle=Lifecycle(every_steps=spec.checkpoint_every_steps,
                            **lifecycle(demand, lay.policy)),
        deadline_hours=spec.sla.deadline_hours,
        budget_usd=usd(max_usd) if max_usd is not None else None,
        pipeline_mode=lay.mode, layout=lay.name, split_regions=lay.policy.split_regions,
        steps=demand.steps, fill_fraction=lay.fill_fraction,
        max_nodes_per_pool=spec.placement.max_nodes_per_pool,
        multi_node_training_min_gpus_per_node=(
            spec.placement.multi_node_training_min_gpus_per_node),
        spot_model=SpotModel(
            lost_work_minutes=spec.efficiency.lost_work_minutes,
            restart_minutes=spec.efficiency.restart_minutes,
            checkpoint_minutes=spec.efficiency.checkpoint_minutes,
        ),
        policy=lay.policy.recorded(),
        budget_warn_usd=(usd(max_usd * lay.policy.budget.warn_at)
                         if max_usd is not None else None),
        budget_stop_usd=(usd(max_usd * lay.policy.budget.stop_at)
                         if max_usd is not None else None),
        defaults_applied=applied_defaults(spec),
        catalog={"name": ctx.catalog.name, "as_of": ctx.catalog.as_of,
                 "age_days": ctx.catalog.age_days(), "offers": len(ctx.catalog.offers),
                 "notes": list(ctx.catalog.notes)},
        catalog_as_of=ctx.catalog.as_of,
    )


def build_plan(ctx: Context, runs: list[LayoutRun], solved: list[LayoutRun], objective: str,
               solver: str, start: float, timings: bool) -> Plan:
    """The plan of the best solved layout (its explanation is added by
    :mod:`ptplan.planner.assembly.explain`)."""
    winner = _winner(runs, solved, objective)
    assert winner.solution is not None and winner.best is not None
    lay = winner.cands.layout
    chosen = winner.solution.chosen
    held = run_hours(lay.mode, chosen, lay.fill_fraction)
    pools = [pool_plan(ctx, lay, pool, chosen[pool.name], held) for pool in lay.pools]
    phases = phase_plans(ctx, lay, chosen)
    warnings = _warnings(ctx, chosen) + _unpriced_disks(lay, chosen)
    costs = _costs(winner, chosen, held)
    warnings += _unpriced_warning(ctx, winner, costs.network_items)
    optimality = _optimality(runs, winner, objective, costs, held)
    warnings += optimality.warnings
    site = plan_site(chosen)
    return Plan(
        **_spec_fields(ctx, lay),
        status=Status(optimality.status), objective=objective,
        total_cost_usd=usd(costs.total), compute_cost_usd=compute_share(costs),
        storage_cost_usd=usd(costs.storage), storage=costs.storage_items,
        disk_cost_usd=usd(costs.disks),
        network_cost_usd=usd(costs.network), network=costs.network_items,
        weight_sync_gb_per_node_step=(winner.cands.network.weight_gb
                                      if winner.cands.network is not None else 0.0),
        idle_cost_usd=usd(costs.idle), makespan_hours=hours(held),
        provider=site[0], region=site[1], zone=site[2], pools=pools, phases=phases,
        solver=_solver_info(ctx, runs, solver, optimality, start, timings),
        warnings=warnings, calibration=calibration_records(lay, chosen),
        explain=Explain(summary=[], binding=[], marginal=[], alternatives=[]),
        **_other_fields(costs),
    )


def _other_fields(costs: _Costs) -> dict[str, Any]:
    """Schema 6 fields, only when the spec has ``other_costs``, and schema 7 fields, only with
    CPU pools (else the plan is schema 5)."""
    out: dict[str, Any] = {"schema_version": PLAIN_SCHEMA_VERSION}
    if costs.other_items is not None:
        out.update(schema_version=6, other_cost_usd=usd(costs.other),
                   other_costs=costs.other_items)
    if costs.cpu_items is not None:
        out.update(schema_version=SCHEMA_VERSION, cpu_cost_usd=usd(costs.cpu),
                   cpu_pools=costs.cpu_items)
    return out


def _warnings(ctx: Context, chosen: dict[str, PoolOption]) -> list[str]:
    out: list[str] = []
    stale = ctx.catalog.staleness_warning()
    if stale:
        out.append(stale)
    types = {offer.instance_type for o in chosen.values() for offer, _ in o.fill}
    region = next(iter(chosen.values())).region
    relevant = [e for e in ctx.catalog.exclusions
                if region in e and any(t in e for t in types)]
    if relevant:
        out.append(f"{len(relevant)} catalog rows of the chosen instance types in {region} were "
                   f"excluded (e.g. {relevant[0]})")
    assumed = next((offer for o in chosen.values() for offer, _ in o.fill
                    if offer.capacity_type == "spot" and offer.max_nodes is not None
                    and (offer.source.startswith("embedded")
                         or "capacity assumed" in offer.note)), None)
    if assumed is not None:
        out.append(f"spot capacity in catalog {ctx.catalog.name} is an assumption "
                   f"({assumed.max_nodes} nodes per zone); confirm availability")
    if any(o.gpu.startswith("Trainium") for o in chosen.values()):
        out.append("a pool runs on AWS Trainium: it needs the Neuron SDK builds of the "
                   "training and inference stack; exclude it with placement.gpus if unsupported")
    return out
