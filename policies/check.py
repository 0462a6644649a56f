"""Check a plan against a policy, rule by rule (``ptplan check PLAN.json --policy P``).

Each violation is one line ``rule: detail`` where ``rule`` names the policy key that is broken
(``phases.update.capacity_types``, ``max_spot_share``, ``budget.stop_at`` ...). The check reads
only the plan and the policy.
"""

from __future__ import annotations

from typing import Any

from ptplan.core.hardware import HIGH_PRECISIONS
from ptplan.policies.model import Policy


def check_plan(plan: Any, policy: Policy) -> list[str]:
    """Violations of ``policy`` by ``plan`` (an :class:`ptplan.planfile.schema.Plan`)."""
    v: list[str] = []
    pools = {p.name: p for p in plan.pools}
    for ph in plan.phases:
        if ph.precision is None:
            continue  # stall phases (checkpoint, weight_sync)
        pool = pools.get(ph.pool)
        if pool is None:
            continue
        allowed = policy.capacity_types(ph.name)
        for a in pool.allocations:
            if a.capacity_type not in allowed:
                v.append(f"phases.{ph.name}.capacity_types: {ph.name} runs on {a.nodes} "
                         f"{a.capacity_type} {a.instance_type}; allowed: "
                         f"{', '.join(sorted(allowed))}")
        precisions = policy.precisions(ph.name)
        if precisions is not None and ph.precision not in precisions:
            v.append(f"phases.{ph.name}.precisions: {ph.name} runs at {ph.precision}; allowed: "
                     f"{', '.join(sorted(precisions))}")
        if ph.name == "scoring" and ph.precision not in HIGH_PRECISIONS:
            for role, share in sorted(policy.high_precision_fallback.items()):
                got = ph.fallback.get(role, 0.0) if role in ph.models else share
                if got < share - 1e-12:
                    v.append(f"high_precision_fallback.{role}: {got:.0%} of {role} scoring at "
                             f"bf16 or better; the policy asks {share:.0%}")
    if not policy.allows_region(plan.provider, plan.region):
        v.append(f"providers/regions: the plan runs in {plan.provider} {plan.region}, which the "
                 "policy does not allow")
    for pool in plan.pools:
        spot = sum(a.nodes for a in pool.allocations if a.capacity_type == "spot")
        if pool.nodes and spot > policy.max_spot_share * pool.nodes + 1e-9:
            v.append(f"max_spot_share: pool {pool.name} has {spot} of {pool.nodes} nodes on spot "
                     f"({spot / pool.nodes:.0%}); the policy allows {policy.max_spot_share:.0%}")
    if getattr(plan, "schema_version", 0) >= 4:
        for pool in plan.pools:
            if pool.boot_disk_gb != policy.boot_disk_gb:
                v.append(f"boot_disk_gb: pool {pool.name} is priced with {pool.boot_disk_gb} GB "
                         f"boot disks; the policy asks {policy.boot_disk_gb} GB")
    regions = {(a.provider, a.region) for p in plan.pools for a in p.allocations}
    if not policy.split_regions and len(regions) > 1:
        v.append(f"split_regions: the pools span {len(regions)} regions; the policy keeps a plan "
                 "in one region")
    if plan.budget_usd is not None:
        stop = float(plan.budget_usd) * policy.budget.stop_at
        if float(plan.total_cost_usd) > stop + 0.005:
            v.append(f"budget.stop_at: the plan costs ${plan.total_cost_usd}, above the stop "
                     f"threshold ${stop:,.2f} ({policy.budget.stop_at:.0%} of the budget)")
    return v
