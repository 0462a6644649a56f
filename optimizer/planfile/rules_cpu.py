"""``cpu_pools`` rules (schema 7): the sandbox and reward CPU pools of a plan
(:mod:`ptplan.costs.cpu`, docs/demand-model.md §4.9), re-derived from the plan alone, from the
spec (``check --spec``) and, for a plan made on the embedded catalog, from its CPU offers."""

from __future__ import annotations

import math
from typing import Any

from ptplan.planfile.rules_base import close, money
from ptplan.planfile.schema import Plan

POOL_PHASE = {"sandbox": "rollout", "reward": "scoring", "prep": "rollout"}
"""The phase whose capacity types each CPU pool follows."""


def check_cpu_pools(plan: Plan) -> list[str]:
    """Each pool: in the plan's region, the fewest nodes that hold its vCPUs and memory,
    node-hours = nodes × the run (held) or vCPU-hours ÷ vCPUs per node (work), cost = node-hours
    × $/h, spot only where the recorded policy lets its phase use spot; Σ = ``cpu_cost_usd``."""
    if plan.cpu_pools is None or plan.cpu_cost_usd is None:
        return []
    v: list[str] = []
    total = 0.0
    for p in plan.cpu_pools:
        tag = f"cpu_pools: {p.name}"
        if (p.provider, p.region) != (plan.provider, plan.region):
            v.append(f"{tag} is in {p.provider}/{p.region}, the plan's GPU pools in "
                     f"{plan.provider}/{plan.region}")
        want = 0
        if p.vcpus_per_node > 0:
            want = math.ceil(p.vcpus_needed / p.vcpus_per_node - 1e-9)
        if p.memory_gib_needed > 0:
            want = max(want, math.ceil(p.memory_gib_needed / p.memory_gib_per_node - 1e-9)
                       if p.memory_gib_per_node > 0 else 10**18)
        if p.nodes != want:
            v.append(f"{tag} has {p.nodes} nodes; {p.vcpus_needed:g} vCPUs and "
                     f"{p.memory_gib_needed:g} GiB need {want} of {p.instance_type}")
        hours = p.nodes * plan.makespan_hours if p.basis == "held" else \
            (p.vcpu_hours / p.vcpus_per_node if p.vcpus_per_node > 0 else math.inf)
        if not close(p.node_hours, hours):
            v.append(f"{tag} bills {p.node_hours:g} node-hours, the {p.basis} basis gives "
                     f"{hours:g}")
        if not close(money(p.cost_usd), p.node_hours * p.usd_per_hour, abs_=0.006):
            v.append(f"{tag} {p.cost_usd} != node-hours x $/h = "
                     f"{p.node_hours * p.usd_per_hour:.2f}")
        if p.capacity_type == "spot" and not _spot_allowed(plan.policy, POOL_PHASE[p.name]):
            v.append(f"{tag} is on spot; the plan's policy does not let "
                     f"{POOL_PHASE[p.name]} use spot (or caps the spot share)")
        total += money(p.cost_usd)
    if not close(money(plan.cpu_cost_usd), total, abs_=0.006 * (len(plan.cpu_pools) + 1)):
        v.append(f"totals: CPU pools {plan.cpu_cost_usd} != {total:.2f} from their pools")
    return v


def _spot_allowed(policy: dict[str, Any], phase: str) -> bool:
    try:
        kinds = policy["phases"][phase]["capacity_types"]
        return "spot" in kinds and float(policy.get("max_spot_share", 1.0)) >= 1.0
    except (KeyError, TypeError, ValueError):
        return False


def check_cpu_against_spec(plan: Plan, demand: Any) -> list[str]:
    """Which CPU pools the spec makes, and each one's vCPUs, memory and vCPU-hours."""
    from ptplan.costs.cpu import cpu_needs

    needs = {n.name: n for n in cpu_needs(demand)}
    got: dict[str, Any] = {p.name: p for p in plan.cpu_pools or []}
    if sorted(needs) != sorted(got):
        return [f"spec_match: CPU pools {sorted(got)} != spec {sorted(needs)}"]
    v = []
    for name, n in needs.items():
        g = got[name]
        for field, want in (("basis", n.basis), ("vcpus_needed", n.vcpus),
                            ("memory_gib_needed", n.memory_gib), ("vcpu_hours", n.vcpu_hours)):
            have = getattr(g, field)
            if have != want and not (isinstance(want, float) and close(float(have), want)):
                v.append(f"spec_match: CPU pool {name} {field} {have} != spec {want}")
    return v


def check_cpu_against_catalog(plan: Plan, catalog: Any) -> list[str]:
    """Each CPU pool's instance type, shape and price are a CPU offer of the catalog, and no
    allowed offer of the region would have cost less."""
    from ptplan.costs.cpu import CpuNeed, choose

    v: list[str] = []
    offers = {(o.provider, o.region, o.instance_type, o.capacity_type): o
              for o in catalog.cpu_offers}
    for p in plan.cpu_pools or []:
        o = offers.get((p.provider, p.region, p.instance_type, p.capacity_type))
        if o is None:
            v.append(f"catalog_match: CPU {p.instance_type} {p.capacity_type} in {p.region} is "
                     f"not in catalog {catalog.name}")
            continue
        if not (close(o.usd_per_hour, p.usd_per_hour) and close(o.vcpus or 0, p.vcpus_per_node)
                and close(o.memory_gib or 0, p.memory_gib_per_node)):
            v.append(f"catalog_match: CPU {p.instance_type} {p.capacity_type}: "
                     f"{p.vcpus_per_node:g} vCPUs, {p.memory_gib_per_node:g} GiB at "
                     f"${p.usd_per_hour}/h; the catalog says {o.vcpus}, {o.memory_gib} at "
                     f"${o.usd_per_hour}/h")
        kinds = {"on_demand"} | ({"spot"} if _spot_allowed(plan.policy, POOL_PHASE[p.name])
                                 else set())
        need = CpuNeed(p.name, p.basis, p.vcpus_needed, p.memory_gib_needed, p.vcpu_hours,
                       POOL_PHASE[p.name])
        best = choose(need, [c for c in catalog.cpu_offers if (c.provider, c.region) ==
                             (p.provider, p.region) and c.capacity_type in kinds])
        if best is not None and best.cost(plan.makespan_hours) < \
                p.node_hours * p.usd_per_hour * (1 - 1e-9) - 1e-9:
            v.append(f"catalog_match: CPU pool {p.name} on {p.instance_type} costs "
                     f"${p.node_hours * p.usd_per_hour:.2f}; {best.offer.instance_type} "
                     f"{best.offer.capacity_type} would cost ${best.cost(plan.makespan_hours):.2f}")
    return v
