"""The plan's CPU pools (sandboxes, CPU reward, data preparation; plan schema 7) as Karpenter
NodePools (``karpenter/cpu-nodepools.yaml``, AWS plans) or GKE node pools
(``gke/cpu_node_pools.tf``, ``terraform-gcp/cpu_node_pools.tf``, GCP plans): one pool per CPU
pool, its instance type and capacity type, limited to the planned nodes (Karpenter: and vCPUs),
tainted so that only the pods of that pool land there (``ptplan.io/cpu-pool=<name>:NoSchedule``).
A Karpenter pool held for the run (sandboxes) is consolidated only when empty; a pool billed by
its work (reward, preparation) also when under-used, so it scales with its queue as the plan
priced it; GKE pools scale from zero to the planned nodes.

``render --check`` reads the files back (:func:`check_cpu_node_pools`): every CPU pool of the
plan has exactly one node pool with its type, capacity type, node (and vCPU) limits and taint,
and no node pool is left over."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import yaml

from ptplan.plan.schema import Plan
from ptplan.render.names import dns_name, tf_name

CPU_TAINT = "ptplan.io/cpu-pool"
"""Label and taint key of a CPU pool's nodes (value: the pool's name)."""
CAPACITY = {"on_demand": "on-demand", "spot": "spot", "reserved": "reserved"}
PATH = "karpenter/cpu-nodepools.yaml"
GKE_PATHS = ("gke/cpu_node_pools.tf", "terraform-gcp/cpu_node_pools.tf")


def cpu_groups(plan: Plan, slug: str,
               label_sets: Callable[[Plan, str, str, str], dict[str, dict[str, str]]],
               zone: str = "") -> list[dict[str, Any]]:
    """One node-pool group per CPU pool, pinned to ``zone`` (the zone the GPU pools are pinned
    to, :func:`ptplan.render.deploy.site_zone`): the plan prices sandbox and reward traffic
    to the rollout nodes as same-zone, which holds only if the CPU nodes are there too."""
    out = []
    for c in plan.cpu_pools or []:
        cap = CAPACITY.get(c.capacity_type, str(c.capacity_type))
        out.append({
            "name": c.name, "full_name": dns_name(f"{slug}-cpu-{c.name}", 63),
            "tf": tf_name(f"cpu_{c.name}"),
            "instance_type": c.instance_type, "capacity_label": cap, "nodes": c.nodes,
            "vcpus": round(c.nodes * c.vcpus_per_node), "basis": c.basis,
            "consolidation": "WhenEmpty" if c.basis == "held" else "WhenEmptyOrUnderutilized",
            "labels": label_sets(plan, f"cpu-{c.name}", c.name, cap),
            "node_labels": {CPU_TAINT: c.name, "ptplan.io/capacity-type": cap},
            "taints": [{"key": CPU_TAINT, "value": c.name, "effect": "NoSchedule"}],
            "cost_usd": c.cost_usd, "zone": zone})
    return out


def check_cpu_node_pools(plan: Plan, files: dict[str, str], out: list[str]) -> None:
    for path in GKE_PATHS:
        if path in files:
            _compare(plan, _gke_pools(path, files[path]), path, out)
    if PATH not in files:
        return
    docs = [d for d in yaml.safe_load_all(files[PATH]) if d]
    got: dict[str, dict[str, Any]] = {}
    for d in docs:
        if d.get("kind") != "NodePool":
            continue
        tmpl = d["spec"]["template"]
        name = tmpl["metadata"].get("labels", {}).get(CPU_TAINT, "")
        req = {r["key"]: r["values"] for r in tmpl["spec"]["requirements"]
               if r["operator"] == "In"}
        got[name] = {"where": f"{PATH} NodePool {d['metadata']['name']}",
                     "zones": req.get("topology.k8s.aws/zone-id", []),
                     "types": req.get("node.kubernetes.io/instance-type", []),
                     "capacity": req.get("karpenter.sh/capacity-type", []),
                     "limits": d["spec"].get("limits", {}),
                     "taints": tmpl["spec"].get("taints", [])}
    _compare(plan, got, PATH, out)


def _gke_pools(path: str, text: str) -> dict[str, dict[str, Any]]:
    from ptplan.render.check_io import _hcl, _resources

    got: dict[str, dict[str, Any]] = {}
    for name, body in _resources(_hcl(text), "google_container_node_pool"):
        cfg = body["node_config"][0] if isinstance(body["node_config"], list) \
            else body["node_config"]
        auto = body["autoscaling"][0] if isinstance(body["autoscaling"], list) \
            else body["autoscaling"]
        pool = cfg.get("labels", {}).get(CPU_TAINT, "")
        nodes = int(auto["total_max_node_count"])
        taints = [{"key": t["key"], "value": t.get("value", ""),
                   "effect": {"NO_SCHEDULE": "NoSchedule"}.get(t["effect"], t["effect"])}
                  for t in cfg.get("taint", [])]
        got[pool] = {"where": f"{path} {name}", "zones": list(body.get("node_locations", [])),
                     "types": [cfg["machine_type"]],
                     "capacity": ["spot" if cfg.get("spot") else "on-demand"],
                     "limits": {"nodes": str(nodes)},  # a GKE pool caps nodes, not vCPUs
                     "taints": taints}
    return got


def _compare(plan: Plan, got: dict[str, dict[str, Any]], path: str, out: list[str]) -> None:
    from ptplan.render.deploy import site_zone

    want = {c.name: c for c in plan.cpu_pools or []}
    zone = site_zone(plan)[0]
    for name in sorted(set(got) - set(want)):
        out.append(f"cpu_pools: {got[name]['where']} is for CPU pool {name!r}, which the plan "
                   "does not have")
    for name, c in sorted(want.items()):
        g = got.get(name)
        if g is None:
            out.append(f"cpu_pools: the plan's CPU pool {name} has no node pool in {path}")
            continue
        cap = CAPACITY.get(c.capacity_type, str(c.capacity_type))
        vcpus = str(round(c.nodes * c.vcpus_per_node))
        if g["types"] != [c.instance_type] or g["capacity"] != [cap]:
            out.append(f"cpu_pools: {g['where']} runs {g['types']} {g['capacity']}; the plan "
                       f"priced {c.instance_type} {cap}")
        limits = {"cpu": vcpus, "nodes": str(c.nodes)} if path == PATH \
            else {"nodes": str(c.nodes)}
        if g["limits"] != limits:
            out.append(f"cpu_pools: {g['where']} limits {g['limits']}; the plan priced "
                       f"{c.nodes} nodes, {vcpus} vCPUs")
        if zone and g["zones"] != [zone]:
            out.append(f"cpu_pools: {g['where']} may run in zones {g['zones'] or 'any'}; the "
                       f"plan priced its traffic to the rollout nodes as same-zone ({zone})")
        if {"key": CPU_TAINT, "value": name, "effect": "NoSchedule"} not in g["taints"]:
            out.append(f"cpu_pools: {g['where']} lacks the taint {CPU_TAINT}={name}:NoSchedule "
                       "(GPU work could land on it)")
