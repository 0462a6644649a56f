"""Verifier rules on phases: ``coverage`` (tokens and latency floors) and ``memory`` (see
:mod:`ptplan.planfile.verify`)."""

from __future__ import annotations

from collections.abc import Iterator

from ptplan.planfile.rules_base import REL, close
from ptplan.planfile.schema import PhasePlan, Plan, PoolPlan


def _work_phases(plan: Plan) -> Iterator[tuple[PhasePlan, PoolPlan]]:
    """Phases that process tokens (not stalls), with their pool when it has nodes."""
    pools = {p.name: p for p in plan.pools}
    for ph in plan.phases:
        owner = pools.get(ph.pool)
        if owner is None or ph.tokens_per_node_hour is None or owner.nodes < 1:
            continue
        yield ph, owner


def check_coverage(plan: Plan) -> list[str]:
    """Σ nodes × effective fraction × tokens/node-hour × usable fraction × busy hours covers
    each phase's tokens; every phase names a pool of the plan."""
    pools = {p.name for p in plan.pools}
    v = [f"coverage: phase {ph.name} names unknown pool {ph.pool!r}"
         for ph in plan.phases if ph.pool not in pools]
    for ph, owner in _work_phases(plan):
        assert ph.tokens_per_node_hour is not None
        done = sum(a.nodes * a.effective_fraction for a in owner.allocations) \
            * ph.tokens_per_node_hour * ph.usable_node_fraction * ph.busy_hours
        if done < ph.tokens * (1 - 1e-5):
            v.append(f"coverage: phase {ph.name} covers {done:.6g} of {ph.tokens:.6g} tokens")
    return v


def check_latency_floors(plan: Plan) -> list[str]:
    """No phase is faster than its latency floor (the longest sequence's decode)."""
    return [f"coverage: phase {ph.name} busy {ph.busy_hours:.6g} h is below its "
            f"latency floor {ph.latency_floor_hours:.6g} h"
            for ph, _ in _work_phases(plan)
            if ph.busy_hours < ph.latency_floor_hours * (1 - REL)]


def check_memory_fit(plan: Plan) -> list[str]:
    """Pool nodes ≥ nodes per replica, nodes per replica × GPUs/node ≥ replica GPUs, and the
    usable fraction is the nodes that form whole replicas."""
    v: list[str] = []
    for ph, owner in _work_phases(plan):
        npr = ph.nodes_per_replica
        if owner.nodes < npr or npr * owner.gpus_per_node < ph.replica_gpus:
            v.append(f"memory: phase {ph.name} needs {ph.replica_gpus} GPUs per replica; pool "
                     f"{owner.name} has {owner.nodes} x {owner.gpus_per_node}")
        usable = (owner.nodes // npr) * npr / owner.nodes if npr > 1 else 1.0
        if not close(usable, ph.usable_node_fraction):
            v.append(f"memory: phase {ph.name} usable fraction {ph.usable_node_fraction} != "
                     f"{usable}")
    return v
