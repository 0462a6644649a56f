"""Turn the chosen pool options into a :class:`~optimizer.plan.schema.Plan`, with its explanation.

Run time (held hours of every pool): colocated/sync = Σ pool busy hours; async = max pool busy
hours + fill_fraction × rollout busy hours. A phase's cost is what its pool's nodes cost while
the phase runs; a pool's idle cost is the rest of its held time. Nothing is re-optimised here.
"""

from __future__ import annotations

import time

from optimizer.core.hardware import HIGH_PRECISIONS
from optimizer.costs.network import path_between
from optimizer.costs.storage import lifecycle
from optimizer.plan.schema import (
    Allocation,
    CapacityType,
    Explain,
    Flow,
    Lifecycle,
    NetworkItem,
    NetworkPath,
    PhasePlan,
    Place,
    Plan,
    PoolPlan,
    SolverInfo,
    SpotModel,
    Status,
    StorageItem,
    hours,
    spec_digest,
    usd,
)
from optimizer.planner.candidates import PoolOption, PoolSpec, spot_overhead
from optimizer.planner.engine import Context, LayoutRun
from optimizer.spec.project import applied_defaults


def run_hours(mode: str, chosen: dict[str, PoolOption], fill_fraction: float) -> float:
    if mode == "async":
        fill = fill_fraction * chosen["rollout"].busy_hours if "rollout" in chosen else 0.0
        return max(o.busy_hours for o in chosen.values()) + fill
    return sum(o.busy_hours for o in chosen.values())


def _allocations(ctx: Context, pool: PoolSpec, opt: PoolOption, phase_hours: float
                 ) -> list[Allocation]:
    out = []
    for offer, n in sorted(opt.fill, key=lambda x: (x[0].capacity_type, x[0].zone,
                                                     x[0].instance_type)):
        if pool.stateful:
            frac = 1.0 - opt.overhead_fraction
        elif offer.capacity_type == "spot":
            frac = 1.0 - spot_overhead(offer, ctx.demand)
        else:
            frac = 1.0
        out.append(Allocation(
            provider=offer.provider, region=offer.region, zone=offer.zone,
            instance_type=offer.instance_type, gpu=offer.gpu, gpus_per_node=offer.gpus_per_node,
            capacity_type=CapacityType(offer.capacity_type), nodes=n, hours=hours(phase_hours),
            usd_per_hour=offer.usd_per_hour, cost_usd=usd(n * offer.usd_per_hour * phase_hours),
            max_nodes=ctx.caps.get(offer.key, offer.max_nodes),
            interruptions_per_hour=offer.interruptions_per_hour,
            effective_fraction=round(frac, 9), note=offer.note,
        ))
    return out


def build_plan(ctx: Context, runs: list[LayoutRun], solved: list[LayoutRun], objective: str,
               solver: str, start: float, timings: bool) -> Plan:
    spec, demand = ctx.spec, ctx.demand

    def key(r: LayoutRun) -> tuple[float, float, int]:
        assert r.solution is not None
        run = run_hours(r.cands.layout.mode, r.solution.chosen, r.cands.layout.fill_fraction)
        cost = run * sum(o.usd_per_hour for o in r.solution.chosen.values()) + sum(
            o.egress_usd for o in r.solution.chosen.values())
        first = cost if objective == "cost" else run
        second = run if objective == "cost" else cost
        return (round(first, 9), round(second, 9), runs.index(r))

    winner = min(solved, key=key)
    assert winner.solution is not None and winner.best is not None
    lay = winner.cands.layout
    chosen = winner.solution.chosen
    held = run_hours(lay.mode, chosen, lay.fill_fraction)
    pools: list[PoolPlan] = []
    phases: list[PhasePlan] = []
    idle_total = 0.0
    compute_total = 0.0
    for pool in lay.pools:
        opt = chosen[pool.name]
        pool_cost = opt.usd_per_hour * held
        idle = max(0.0, held - opt.busy_hours)
        idle_total += opt.usd_per_hour * idle
        compute_total += pool_cost
        pools.append(PoolPlan(
            name=pool.name, phases=list(pool.phases) + [p for p, _ in pool.stall_parts],
            provider=opt.provider, region=opt.region, gpu=opt.gpu,
            gpus_per_node=opt.gpus_per_node, nodes=opt.nodes, spot_ok=pool.spot_ok,
            held_hours=hours(held), busy_hours=hours(opt.busy_hours), idle_hours=hours(idle),
            usd_per_hour=round(opt.usd_per_hour, 6), cost_usd=usd(pool_cost),
            idle_cost_usd=usd(opt.usd_per_hour * idle),
            gang_overhead_fraction=round(opt.overhead_fraction, 9) if pool.stateful else 0.0,
            allocations=_allocations(ctx, pool, opt, held),
        ))
        rates = dict(zip(pool.phases, opt.rates, strict=True))
        for phase, busy in opt.phase_hours:
            r = rates[phase]
            npr = r.nodes_per_replica
            usable = ((opt.nodes // npr) * npr / opt.nodes) if npr > 1 else 1.0
            tokens = demand.primary_tokens(phase)
            roles = sorted({part.role for part in demand.phase_parts(phase)})
            fallback: dict[str, float] = (
                {str(k): v for k, v in lay.policy.high_precision_fallback.items()
                 if k in roles and v > 0}
                        if phase == "scoring" and r.precision not in HIGH_PRECISIONS else {})
            phases.append(PhasePlan(
                name=phase, pool=pool.name, precision=r.precision, tokens=tokens,
                tokens_per_node_hour=tokens / r.node_hours, usable_node_fraction=usable,
                replica_gpus=r.replica_gpus, nodes_per_replica=npr, busy_hours=hours(busy),
                latency_floor_hours=hours(r.floor_hours),
                gpu_hours=hours(busy * opt.nodes * opt.gpus_per_node),
                cost_usd=usd(busy * opt.usd_per_hour), calibrated=r.calibrated,
                models=roles, fallback=fallback,
                allocations=_allocations(ctx, pool, opt, busy),
            ))
        for stall_name, stall in pool.stall_parts:
            phases.append(PhasePlan(
                name=stall_name, pool=pool.name, precision=None, tokens=0.0,
                tokens_per_node_hour=None, usable_node_fraction=1.0, replica_gpus=0,
                nodes_per_replica=0, busy_hours=hours(stall), latency_floor_hours=hours(stall),
                gpu_hours=hours(stall * opt.nodes * opt.gpus_per_node),
                cost_usd=usd(stall * opt.usd_per_hour), calibrated=False,
                allocations=_allocations(ctx, pool, opt, stall),
            ))
    order = {"rollout": 0, "eval": 1, "weight_sync": 2, "scoring": 3, "update": 4,
             "checkpoint": 5}
    phases.sort(key=lambda p: order.get(p.name, 9))
    warnings = _warnings(ctx, chosen)
    storage_items, storage_total = _storage_items(winner, chosen, held)
    network_items, network_total = _network_items(winner, chosen)
    site = plan_site(chosen)
    net = winner.cands.network
    unpriced = sorted({f"{i.src.provider} {i.path}" for i in network_items
                       if net is not None and i.path != "same_zone"
                       and f"{i.src.provider} {i.path}" in net.missing})
    if unpriced:
        warnings.append(f"catalog {ctx.catalog.name} has no egress rate for "
                        f"{', '.join(unpriced)}: that traffic is priced at $0; add egress "
                        "rows to the catalog")
    # Optimality: the enumeration's best over all layouts is a lower bound (exact when pools
    # do not compete for capped offers); the plan is proven optimal when it reaches it.
    bounds = [r.best for r in runs if r.best is not None]
    if objective == "cost":
        bound, value = min(b.usd for b in bounds), compute_total + storage_total + network_total
    else:
        bound, value = min(b.run_hours for b in bounds), held
    bound_gap = max(0.0, value / bound - 1.0) if bound > 0 else 0.0
    status, gap = winner.solution.status, winner.solution.gap
    if bound_gap <= 1e-6 or abs(value - bound) <= 0.005:
        cross = "agree"
    elif winner.shared_capacity or any(r.shared_capacity for r in runs):
        status, gap = "feasible", max(gap, bound_gap)
        cross = (f"bound {bound:,.2f} from the relaxation that lets pools share capped offers "
                 f"freely; the plan is within {bound_gap:.2%} of it")
        warnings.append("pools compete for capped offers: the plan respects every cap; its "
                        f"cost is within {bound_gap:.2%} of a lower bound (status feasible)")
    else:
        status, gap = "feasible", max(gap, bound_gap)
        cross = f"differ: enumeration {bound:,.4f} vs plan {value:,.4f}"
        warnings.append(f"internal cross-check: MILP and enumeration {cross}; the verified "
                        "MILP plan is shown")
    provider, region = site[0], site[1]
    spec_dump = spec.model_dump(mode="json")
    age = ctx.catalog.age_days()
    p = Plan(
        spec_name=spec.name, spec_digest=spec_digest(spec_dump), method=spec.method,
        algorithm=spec.algorithm, status=Status(status), objective=objective,
        total_cost_usd=usd(compute_total + storage_total + network_total),
        compute_cost_usd=usd(compute_total),
        storage_cost_usd=usd(storage_total), storage=storage_items,
        network_cost_usd=usd(network_total), network=network_items,
        lifecycle=Lifecycle(every_steps=spec.checkpoint_every_steps,
                            **lifecycle(demand, lay.policy)),
        weight_sync_gb_per_node_step=(winner.cands.network.weight_gb
                                      if winner.cands.network is not None else 0.0),
        idle_cost_usd=usd(idle_total), makespan_hours=hours(held),
        deadline_hours=spec.sla.deadline_hours,
        budget_usd=usd(spec.budget.max_usd) if spec.budget.max_usd is not None else None,
        pipeline_mode=lay.mode, layout=lay.name, provider=provider, region=region,
        zone=site[2], split_regions=lay.policy.split_regions,
        steps=demand.steps, fill_fraction=lay.fill_fraction,
        max_nodes_per_pool=spec.placement.max_nodes_per_pool,
        multi_node_training_min_gpus_per_node=(
            spec.placement.multi_node_training_min_gpus_per_node),
        spot_model=SpotModel(
            lost_work_minutes=spec.efficiency.lost_work_minutes,
            restart_minutes=spec.efficiency.restart_minutes,
            checkpoint_minutes=spec.efficiency.checkpoint_minutes,
        ),
        pools=pools, phases=phases,
        solver=SolverInfo(
            name=solver, status=Status(status), gap=round(gap, 9),
            seconds=round(time.perf_counter() - start, 3) if timings else 0.0,
            layouts=len(runs), options_considered=sum(r.cands.considered for r in runs),
            options_pruned=sum(r.cands.pruned for r in runs),
            milp_options=sum(r.milp_options for r in runs),
            offers_considered=ctx.offers_considered, cross_check=cross,
        ),
        policy=lay.policy.model_dump(mode="json"),
        budget_warn_usd=(usd(spec.budget.max_usd * lay.policy.budget.warn_at)
                         if spec.budget.max_usd is not None else None),
        budget_stop_usd=(usd(spec.budget.max_usd * lay.policy.budget.stop_at)
                         if spec.budget.max_usd is not None else None),
        warnings=warnings, defaults_applied=applied_defaults(spec),
        catalog={"name": ctx.catalog.name, "as_of": ctx.catalog.as_of, "age_days": age,
                 "offers": len(ctx.catalog.offers), "notes": list(ctx.catalog.notes)},
        catalog_as_of=ctx.catalog.as_of,
        explain=Explain(summary=[], binding=[], marginal=[], alternatives=[]),
    )
    return p


def plan_site(chosen: dict[str, PoolOption]) -> tuple[str, str, str]:
    """The trainer's (provider, region, zone); the zone is left empty when no pool holds a
    zoned (spot) node, since region-level nodes can then sit in any one zone."""
    site = next(iter(chosen.values())).site
    zoned = any(o.zone for opt in chosen.values() for o, _ in opt.fill)
    return site if zoned else (site[0], site[1], "")


def _network_items(winner: LayoutRun, chosen: dict[str, PoolOption]
                   ) -> tuple[list[NetworkItem], float]:
    """Egress of the chosen plan (see :mod:`optimizer.costs.network`) and its unrounded total,
    which equals the options' egress plus the site's fixed flows (the search's figure)."""
    net = winner.cands.network
    if net is None:
        return [], 0.0
    site = plan_site(chosen)
    trainer = Place(provider=site[0], region=site[1], zone=site[2])
    items: list[NetworkItem] = []
    rollout = chosen.get("rollout") if any(
        p.remote_ok for p in winner.cands.layout.pools) else None
    place = None
    if rollout is not None and net.weight_gb > 0:
        cross = (rollout.provider, rollout.region) != site[:2]
        if cross:
            place = (rollout.provider, rollout.region, "")
            path = path_between(site, place)
            groups: list[tuple[str, int, float, str]] = [
                (path, rollout.nodes, net.rate(site[0], path), "")]
        else:
            by_zone: dict[str, int] = {}
            for o, n in rollout.fill:
                if o.zone and o.zone != site[2]:
                    by_zone[o.zone] = by_zone.get(o.zone, 0) + n
            cross_zone = net.rate(site[0], "cross_zone")
            groups = [("same_zone", rollout.nodes - rollout.remote_nodes, 0.0, site[2])]
            groups += [("cross_zone", n, cross_zone, z) for z, n in sorted(by_zone.items())]
        for path, n, rate, zone in groups:
            if n <= 0:
                continue
            gb = n * net.steps * net.weight_gb
            items.append(NetworkItem(
                flow=Flow.weight_sync, src=trainer,
                dst=Place(provider=rollout.provider, region=rollout.region, zone=zone),
                path=NetworkPath(path), nodes=n, gb=gb, usd_per_gb=rate, cost_usd=usd(gb * rate),
                note=f"{net.steps} steps x {net.weight_gb:g} GB (bf16 weights) into each of "
                     f"{n} node(s)"))
        exp_gb = net.steps * net.experience_gb_per_step
        if exp_gb > 0:
            note = "token ids and log-probabilities of every sampled sequence"
            exp_path, exp_rate = (path, net.rate(site[0], path)) if cross else ("same_zone", 0.0)
            if not cross and rollout.remote_nodes:
                share = exp_gb * rollout.remote_nodes / rollout.nodes
                note += (f"; the {rollout.remote_nodes} cross-zone node(s)' share (about "
                         f"{share:.1f} GB) is not priced")
            items.append(NetworkItem(
                flow=Flow.experience, src=Place(provider=rollout.provider, region=rollout.region),
                dst=trainer, path=NetworkPath(exp_path), gb=exp_gb, usd_per_gb=exp_rate,
                cost_usd=usd(exp_gb * exp_rate), note=note))
    for f in net.fixed_flows(site, place):
        items.append(NetworkItem(
            flow=Flow(f.name), src=Place(provider=f.src[0], region=f.src[1], zone=f.src[2]),
            dst=Place(provider=f.dst[0], region=f.dst[1], zone=f.dst[2]), path=NetworkPath(f.path),
            gb=f.gb, usd_per_gb=f.usd_per_gb, cost_usd=usd(f.cost), note=f.note))
    total = sum(o.egress_usd for o in chosen.values()) + net.fixed_cost(site)
    return items, total


def _storage_items(winner: LayoutRun, chosen: dict[str, PoolOption], held: float
                   ) -> tuple[list[StorageItem], float]:
    """The storage of the trainer's region at the plan's run time, and its unrounded total."""
    model = winner.cands.storage
    if model is None:
        return [], 0.0
    site = plan_site(chosen)
    first = next(o for o in chosen.values() if (o.provider, o.region) == site[:2])
    out = []
    total = 0.0
    choice = model.choose(first.provider, first.region, held)  # type: ignore[attr-defined]
    for c, tier, gb_months, cost in choice:
        total += cost
        out.append(StorageItem(
            data_class=c.name, provider=first.provider, region=first.region, tier=tier.tier,
            access=c.access, gb=c.gb, gb_months=gb_months,
            usd_per_gb_month=tier.usd_per_gb_month, min_days=tier.min_days,
            retrieval_gb=c.retrieval_gb, retrieval_usd_per_gb=tier.retrieval_usd_per_gb,
            cost_usd=usd(cost)))
    return out, total


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
