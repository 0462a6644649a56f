"""The plan's CPU pools (sandboxes, CPU reward, data preparation; plan schema 7) as Karpenter
NodePools (``karpenter/cpu-nodepools.yaml``, AWS plans) or GKE node pools
(``gke/cpu_node_pools.tf``, ``terraform-gcp/cpu_node_pools.tf``, GCP plans): one pool per CPU
pool, its instance type and capacity type, limited to the planned nodes (Karpenter: and vCPUs),
tainted so that only the pods of that pool land there (``ptplan.io/cpu-pool=<name>:NoSchedule``).
A Karpenter pool held for the run (sandboxes) is consolidated only when empty; a pool billed by
its work (reward, preparation) also when under-used, so it scales with its queue as the plan
priced it; GKE pools scale from zero to the planned nodes.

``render --check`` reads the files back (:mod:`ptplan.rendering.checks.cpu_pools`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ptplan.planfile.identity import GROUP_NAME_CHARS, plan_digest, plan_prefix
from ptplan.planfile.names import dns_name, prefixed, tf_name
from ptplan.planfile.schema import Plan

CPU_TAINT = "ptplan.io/cpu-pool"
"""Label and taint key of a CPU pool's nodes (value: the pool's name)."""
CAPACITY = {"on_demand": "on-demand", "spot": "spot", "reserved": "reserved"}
PATH = "karpenter/cpu-nodepools.yaml"
GKE_PATHS = ("gke/cpu_node_pools.tf", "terraform-gcp/cpu_node_pools.tf")


def cpu_groups(plan: Plan, slug: str,
               label_sets: Callable[..., dict[str, dict[str, str]]],
               zone: str = "", digest: str | None = None,
               prefix: str | None = None) -> list[dict[str, Any]]:
    """One node-pool group per CPU pool, pinned to ``zone`` (the zone the GPU pools are pinned
    to, :func:`ptplan.planfile.deployment.site_zone`): the plan prices sandbox and reward traffic
    to the rollout nodes as same-zone, which holds only if the CPU nodes are there too. Named
    ``<slug>-<digest>-cpu-<pool>`` (at most 40 characters, the slug cut to fit:
    :mod:`ptplan.planfile.identity`)."""
    digest = digest or plan_digest(plan)
    prefix = prefix or plan_prefix(plan)
    out = []
    for c in plan.cpu_pools or []:
        cap = CAPACITY.get(c.capacity_type, str(c.capacity_type))
        full = prefixed(slug, digest, dns_name(f"cpu-{c.name}", 30), GROUP_NAME_CHARS)
        out.append({
            "name": c.name, "full_name": full, "tf": tf_name(full),
            "instance_type": c.instance_type, "capacity_label": cap, "nodes": c.nodes,
            "vcpus": round(c.nodes * c.vcpus_per_node), "basis": c.basis,
            "consolidation": "WhenEmpty" if c.basis == "held" else "WhenEmptyOrUnderutilized",
            "labels": label_sets(plan, f"cpu-{c.name}", c.name, cap, prefix),
            "node_labels": {CPU_TAINT: c.name, "ptplan.io/capacity-type": cap},
            "taints": [{"key": CPU_TAINT, "value": c.name, "effect": "NoSchedule"}],
            "cost_usd": c.cost_usd, "zone": zone})
    return out
