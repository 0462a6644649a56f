"""Verifier rules on pools and their allocations: ``pool_accounting``, ``zones``, ``hold``,
``spot_overhead`` and ``capacity`` (see :mod:`ptplan.planfile.verify`)."""

from __future__ import annotations

import math

from ptplan.planfile.rules_base import REL, close, money
from ptplan.planfile.rules_blocks import billed, rounding_usd
from ptplan.planfile.schema import Plan, PoolPlan


def pool_price(pool: PoolPlan) -> float:
    """$/h of a pool from its allocations."""
    return sum(a.nodes * a.usd_per_hour for a in pool.allocations)


def check_pool_accounting(plan: Plan) -> list[str]:
    """A pool's nodes, $/h and cost are the sums over its allocations; every allocation is of
    the pool's shape, provider and region; pools are in the plan's region (with
    ``split_regions`` the rollout pool may be elsewhere)."""
    v: list[str] = []
    held = plan.makespan_hours
    for pool in plan.pools:
        allocs = pool.allocations
        if sum(a.nodes for a in allocs) != pool.nodes:
            v.append(f"pool_accounting: pool {pool.name} nodes {pool.nodes} != sum of "
                     "allocations")
        price = pool_price(pool)
        if not close(price, pool.usd_per_hour):
            v.append(f"pool_accounting: pool {pool.name} ${pool.usd_per_hour}/h != "
                     f"{price:.6f} from allocations")
        for a in allocs:
            if (a.gpu, a.gpus_per_node) != (pool.gpu, pool.gpus_per_node):
                v.append(f"pool_accounting: pool {pool.name} mixes shapes ({a.instance_type})")
            if (a.provider, a.region) != (pool.provider, pool.region):
                v.append(f"pool_accounting: {a.instance_type} in {a.provider}/{a.region} is "
                         f"outside pool {pool.name}'s region {pool.provider}/{pool.region}")
            if not close(money(a.cost_usd), a.nodes * a.usd_per_hour * billed(a), abs_=0.006):
                v.append(f"pool_accounting: {a.instance_type} cost {a.cost_usd} != nodes x "
                         "price x hours")
        if (pool.provider, pool.region) != (plan.provider, plan.region) and \
                (pool.name != "rollout" or not plan.split_regions):
            v.append(f"pool_accounting: pool {pool.name} is in {pool.provider}/{pool.region}, "
                     f"outside the plan's region {plan.provider}/{plan.region}")
        if pool.nodes < 1:
            v.append(f"pool_accounting: pool {pool.name} has no nodes")
        elif not close(money(pool.cost_usd), price * held + rounding_usd(pool), abs_=0.006):
            v.append(f"pool_accounting: pool {pool.name} cost {pool.cost_usd} != "
                     f"{price * held + rounding_usd(pool):.2f}")
    return v


def check_zones(plan: Plan) -> list[str]:
    """Zoned allocations of pools other than rollout are in the plan's (trainer's) zone."""
    return [f"zones: pool {pool.name} has {a.nodes} {a.instance_type} in {a.zone}, "
            f"outside the trainer's zone {plan.zone}"
            for pool in plan.pools if pool.name != "rollout"
            for a in pool.allocations if a.zone and plan.zone and a.zone != plan.zone]


def check_hold(plan: Plan) -> list[str]:
    """Every pool is held (and billed) for the whole run; its busy time is its phases';
    idle = held − busy ≥ 0."""
    v: list[str] = []
    held = plan.makespan_hours
    for pool in plan.pools:
        for a in pool.allocations:
            if not close(a.hours, held):
                v.append(f"hold: {a.instance_type} in pool {pool.name} billed {a.hours} h, "
                         f"the run lasts {held} h")
        if pool.nodes < 1:
            continue
        busy = sum(ph.busy_hours for ph in plan.phases if ph.pool == pool.name)
        if not close(busy, pool.busy_hours, abs_=1e-5):
            v.append(f"hold: pool {pool.name} busy {pool.busy_hours} h != phases' {busy:.6f} h")
        if pool.busy_hours > held * (1 + REL) + 1e-6:
            v.append(f"hold: pool {pool.name} busy {pool.busy_hours} h exceeds the run {held} h")
        if not close(pool.idle_hours, max(0.0, held - pool.busy_hours), abs_=1e-5):
            v.append(f"hold: pool {pool.name} idle {pool.idle_hours} h != held - busy")
    return v


def check_spot_overheads(plan: Plan) -> list[str]:
    """Effective fractions follow from the interruption rates and the plan's spot model
    (stateless: 1 − λ·(lost + restart); gang: 1 − √(2CΛ) − RΛ)."""
    v: list[str] = []
    sm = plan.spot_model
    lost_r = (sm.lost_work_minutes + sm.restart_minutes) / 60.0
    c_h, r_h = sm.checkpoint_minutes / 60.0, sm.restart_minutes / 60.0
    for pool in plan.pools:
        allocs = pool.allocations
        if "update" in pool.phases:
            lam = sum(a.nodes * (a.interruptions_per_hour or 0.0) for a in allocs
                      if a.capacity_type == "spot")
            want = 1.0 - (math.sqrt(2.0 * c_h * lam) + r_h * lam)
            for a in allocs:
                if not close(a.effective_fraction, want, abs_=1e-8):
                    v.append(f"spot_overhead: pool {pool.name} effective fraction "
                             f"{a.effective_fraction} != {want:.9f} (gang model)")
            continue
        for a in allocs:
            want = 1.0 - (a.interruptions_per_hour or 0.0) * lost_r \
                if a.capacity_type == "spot" else 1.0
            if not close(a.effective_fraction, want, abs_=1e-8):
                v.append(f"spot_overhead: {a.instance_type} effective fraction "
                         f"{a.effective_fraction} != {want:.9f}")
    return v


def check_capacity(plan: Plan) -> list[str]:
    """Nodes ≤ each offer's cap (per allocation and together over pools) and ≤ the pool cap;
    spot only where allowed; multi-node training only on large enough nodes."""
    v: list[str] = []
    for pool in plan.pools:
        for a in pool.allocations:
            if a.capacity_type not in ("on_demand", "spot", "reserved", "block",
                                       "flex_start"):
                v.append(f"capacity: unknown capacity_type {a.capacity_type!r}")
            if a.max_nodes is not None and a.nodes > a.max_nodes:
                v.append(f"capacity: {a.nodes} {a.instance_type} {a.capacity_type} in "
                         f"{a.zone or a.region} exceeds the offer's cap {a.max_nodes}")
            if a.capacity_type == "spot" and not pool.spot_ok:
                v.append(f"capacity: pool {pool.name} uses spot but spot is not allowed there")
        if "update" in pool.phases and pool.nodes > 1 and \
                pool.gpus_per_node < plan.multi_node_training_min_gpus_per_node:
            v.append(f"capacity: pool {pool.name} trains across {pool.nodes} nodes of "
                     f"{pool.gpus_per_node} GPUs; multi-node training needs "
                     f"{plan.multi_node_training_min_gpus_per_node}+ GPUs per node")
        if pool.nodes >= 1 and pool.nodes > plan.max_nodes_per_pool:
            v.append(f"capacity: pool {pool.name} has {pool.nodes} nodes, the pool cap is "
                     f"{plan.max_nodes_per_pool}")
    return v + _shared_caps(plan)


def _shared_caps(plan: Plan) -> list[str]:
    """Pools are held at the same time: together at most each offer's cap."""
    used: dict[tuple, int] = {}
    caps: dict[tuple, int | None] = {}
    for pool in plan.pools:
        for a in pool.allocations:
            key = (a.provider, a.region, a.zone, a.instance_type, a.capacity_type)
            used[key] = used.get(key, 0) + a.nodes
            caps[key] = a.max_nodes
    v: list[str] = []
    for key, n in sorted(used.items()):
        cap = caps[key]
        if cap is not None and n > cap:
            v.append(f"capacity: pools together hold {n} {key[3]} {key[4]} in "
                     f"{key[2] or key[1]}, the offer's cap is {cap}")
    return v
