"""``render --check`` rule ``cpu_pools``: the CPU node pools read back from the rendered
files (``karpenter/cpu-nodepools.yaml``, ``gke/cpu_node_pools.tf``,
``terraform-gcp/cpu_node_pools.tf``; :mod:`ptplan.rendering.cpu_pools` writes them): every CPU
pool of the plan has exactly one node pool with its type, capacity type, node (and vCPU)
limits, zone and taint, and no node pool is left over."""

from __future__ import annotations

from typing import Any

import yaml

from ptplan.planfile.deployment import site_zone
from ptplan.planfile.schema import Plan
from ptplan.rendering.checks.readers import _hcl, _resources
from ptplan.rendering.cpu_pools import CAPACITY, CPU_TAINT, GKE_PATHS, PATH


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
