"""The plan's pools and phases from the chosen pool options: allocations (with a block's
billed hours), each pool's held and idle cost with its boot disks, each phase's tokens, rate,
GPU-hours and cost, stalls, and the calibration records
(:func:`ptplan.planner.assembly.build.build_plan` assembles them with the costs, warnings and
solver figures)."""

from __future__ import annotations

from typing import Any

from ptplan.core.hardware import HIGH_PRECISIONS
from ptplan.demand.rates import PhaseRate
from ptplan.planfile.schema import (
    Allocation,
    CalibrationRecord,
    CapacityType,
    ParallelLayout,
    PhasePlan,
    PoolPlan,
    hours,
    usd,
)
from ptplan.planner.candidates import Layout, PoolOption, PoolSpec, spot_overhead
from ptplan.planner.search.engine import Context
from ptplan.providers.base import Offer
from ptplan.providers.blocks import billed_hours


def allocations(ctx: Context, pool: PoolSpec, opt: PoolOption, phase_hours: float,
                 held: float | None = None) -> list[Allocation]:
    """The option's nodes by offer for ``phase_hours``; with ``held`` (the pool's own
    allocations) a block's are billed for whole units (``billed_hours``)."""
    out = []
    for offer, n in sorted(opt.fill, key=lambda x: (x[0].capacity_type, x[0].zone,
                                                     x[0].instance_type)):
        billed = _billed(offer, held)
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
            usd_per_hour=offer.usd_per_hour,
            cost_usd=usd(n * offer.usd_per_hour * (billed or phase_hours)),
            max_nodes=ctx.caps.get(offer.key, offer.max_nodes),
            interruptions_per_hour=offer.interruptions_per_hour,
            effective_fraction=round(frac, 9), note=offer.note,
            billed_hours=hours(billed) if billed is not None else None,
        ))
    return out


def _billed(offer: Offer, held: float | None) -> float | None:
    """A block's billed hours for a pool held ``held`` hours (None: billed as held)."""
    if held is None or offer.capacity_type != "block" or not offer.block_unit_hours:
        return None
    return billed_hours(held, offer.block_unit_hours)


def rounding_cost(opt: PoolOption, held: float) -> float:
    """What the option's block nodes cost past the held hours (whole units)."""
    return sum(n * o.usd_per_hour * (b - held) for o, n in opt.fill
               if (b := _billed(o, held)) is not None)


def compute_rate(opt: PoolOption) -> float:
    """The instances' $/h of an option (its price less its boot disks)."""
    return sum(o.usd_per_hour * n for o, n in opt.fill)


def _disk_fields(lay: Layout, opt: PoolOption, held: float) -> dict[str, Any]:
    """The pool's boot disks: size, tier, rate and cost over the held time."""
    tier = lay.disks.tier(opt.provider, opt.region) if lay.disks is not None else None
    gb = lay.disks.gb if lay.disks is not None else lay.policy.boot_disk_gb
    return dict(boot_disk_gb=gb, disk_tier=tier.tier if tier else "",
                disk_usd_per_gb_month=tier.usd_per_gb_month if tier else 0.0,
                disk_usd_per_hour=round(opt.disk_usd_per_hour, 9),
                disk_cost_usd=usd(opt.disk_usd_per_hour * held))


def pool_plan(ctx: Context, lay: Layout, pool: PoolSpec, opt: PoolOption, held: float
               ) -> PoolPlan:
    """A pool held for the whole run: its nodes, busy and idle time and cost (instances), and
    its boot disks."""
    idle = max(0.0, held - opt.busy_hours)
    rate = compute_rate(opt)
    lost = rounding_cost(opt, held)
    return PoolPlan(
        name=pool.name, phases=list(pool.phases) + [p for p, _ in pool.stall_parts],
        provider=opt.provider, region=opt.region, gpu=opt.gpu,
        gpus_per_node=opt.gpus_per_node, nodes=opt.nodes, spot_ok=pool.spot_ok,
        held_hours=hours(held), busy_hours=hours(opt.busy_hours), idle_hours=hours(idle),
        usd_per_hour=round(rate, 6), cost_usd=usd(rate * held + lost),
        idle_cost_usd=usd(rate * idle + lost),
        gang_overhead_fraction=round(opt.overhead_fraction, 9) if pool.stateful else 0.0,
        allocations=allocations(ctx, pool, opt, held, held), **_disk_fields(lay, opt, held),
    )


PHASE_ORDER = {"rollout": 0, "eval": 1, "weight_sync": 2, "scoring": 3, "update": 4,
               "checkpoint": 5}
"""Order of the plan's phases (others last)."""


def phase_plans(ctx: Context, lay: Layout, chosen: dict[str, PoolOption]) -> list[PhasePlan]:
    """Every phase and stall of every pool, in :data:`PHASE_ORDER`."""
    phases: list[PhasePlan] = []
    for pool in lay.pools:
        opt = chosen[pool.name]
        rates = dict(zip(pool.phases, opt.rates, strict=True))
        for phase, busy in opt.phase_hours:
            phases.append(_work_phase(ctx, lay, pool, opt, phase, busy, rates[phase]))
        for stall_name, stall in pool.stall_parts:
            phases.append(_stall_phase(ctx, pool, opt, stall_name, stall))
    phases.sort(key=lambda p: PHASE_ORDER.get(p.name, 9))
    return phases


def _work_phase(ctx: Context, lay: Layout, pool: PoolSpec, opt: PoolOption, phase: str,
                busy: float, r: PhaseRate) -> PhasePlan:
    """A phase that processes tokens at rate ``r`` for ``busy`` hours."""
    demand = ctx.demand
    npr = r.nodes_per_replica
    usable = ((opt.nodes // npr) * npr / opt.nodes) if npr > 1 else 1.0
    tokens = demand.primary_tokens(phase)
    roles = sorted({part.role for part in demand.phase_parts(phase)})
    fallback: dict[str, float] = (
        {str(k): v for k, v in lay.policy.high_precision_fallback.items()
         if k in roles and v > 0}
        if phase == "scoring" and r.precision not in HIGH_PRECISIONS else {})
    effective = opt.effective_nodes * usable
    rounded = hours(busy)
    layout = r.layout_for(effective)
    return PhasePlan(
        name=phase, pool=pool.name, precision=r.precision, tokens=tokens,
        tokens_per_node_hour=tokens / (rounded * effective) if rounded * effective > 0
        else tokens / r.node_hours,
        usable_node_fraction=usable,
        replica_gpus=r.replica_gpus, nodes_per_replica=npr, busy_hours=hours(busy),
        latency_floor_hours=hours(r.floor_hours),
        gpu_hours=hours(busy * opt.nodes * opt.gpus_per_node),
        cost_usd=usd(busy * compute_rate(opt)), calibrated=r.calibrated,
        models=roles, fallback=fallback,
        parallel_layout=ParallelLayout.model_validate(layout) if layout is not None else None,
        allocations=allocations(ctx, pool, opt, busy),
    )


def calibration_records(lay: Layout, chosen: dict[str, PoolOption]) -> list[CalibrationRecord]:
    """Measured cells that rescaled the phases of the plan, with the precisions they rescaled."""
    found: dict[tuple[str, str], tuple[Any, list[str]]] = {}
    for pool in lay.pools:
        opt = chosen[pool.name]
        for r in opt.rates:
            use = r.calibration
            if use is None:
                continue
            _, applied = found.setdefault((use.phase, use.gpu), (use, []))
            if r.precision not in applied:
                applied.append(r.precision)
    return [CalibrationRecord(phase=use.phase, gpu=use.gpu, measured_precision=use.precision,
                              measured_tokens_per_second_per_gpu=use.measured,
                              modelled_tokens_per_second_per_gpu=round(use.modelled, 6),
                              factor=round(use.factor, 9), applied_to=sorted(applied),
                              runs=list(use.runs))
            for (_, _), (use, applied) in sorted(found.items())]


def _stall_phase(ctx: Context, pool: PoolSpec, opt: PoolOption, name: str, stall: float
                 ) -> PhasePlan:
    """A fixed stall of the pool (checkpoint writes, weight-sync receive)."""
    return PhasePlan(
        name=name, pool=pool.name, precision=None, tokens=0.0,
        tokens_per_node_hour=None, usable_node_fraction=1.0, replica_gpus=0,
        nodes_per_replica=0, busy_hours=hours(stall), latency_floor_hours=hours(stall),
        gpu_hours=hours(stall * opt.nodes * opt.gpus_per_node),
        cost_usd=usd(stall * compute_rate(opt)), calibrated=False,
        allocations=allocations(ctx, pool, opt, stall),
    )
