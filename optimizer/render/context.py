"""The template context of a verified plan: pools → groups, flavors, bucket rules, launch.

Pools → groups. A plan pool holds allocations per (instance type, capacity type, zone). Each
pool becomes one *group* per capacity type it uses (``<pool>-<capacity>``): nodes = Σ
allocation nodes of that type, instance types and zones = the allocations' (an allocation
without a zone, as on-demand rows, allows any zone of the region). One group is one KubeRay
worker group, one Karpenter NodePool or GKE node pool, one SkyPilot task, one ASG / node pool
in Terraform; spot groups get spot capacity, a spot taint and its toleration, and SkyPilot
``use_spot`` with ``job_recovery``.

Cost labels (every resource): ``ptplan-project``, ``ptplan-pool``, ``ptplan-phase``,
``ptplan-method``, ``ptplan-capacity-type``, sanitised per platform (Kubernetes label values,
GCP labels, AWS tags); see :mod:`optimizer.render.names`.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from typing import Any

from optimizer.core.errors import InputError
from optimizer.plan.schema import Plan
from optimizer.render.facts import Facts
from optimizer.render.launch import _pool, launch_args, verl_words
from optimizer.render.lifecycle import ABORT_MULTIPART_DAYS, lifecycle_rules
from optimizer.render.names import (
    SKY_ACCELERATOR,
    aws_tag,
    dns_name,
    gcp_label,
    gke_accelerator,
    gpu_resource,
    k8s_label,
    tf_name,
)

DEFAULT_IMAGE = "verlai/verl:vllm012.latest"
"""veRL's published base image (CUDA, torch, vLLM 0.12, Ray; veRL itself is not in it): the
launch installs the framework at the pinned release (``launch.install``: SkyPilot ``setup``, the
launch scripts). Any image with CUDA, torch, vLLM and Ray works (--image)."""
CAPACITY_LABEL = {"on_demand": "on-demand", "spot": "spot", "reserved": "reserved"}
CAPACITY_ORDER = {"reserved": 0, "on_demand": 1, "spot": 2}
"""Kueue flavor preference: capacity already paid for first, then on-demand, then spot."""
HEAD_CPU, HEAD_MEMORY = "4", "16Gi"
"""The Ray head runs no work (num-cpus 0); its requests are a fixed small default."""


def _labels(project: str, pool: str, phase: str, method: str, capacity: str,
            sanitize: Callable[[str], str]) -> dict[str, str]:
    return {"ptplan-project": sanitize(project), "ptplan-pool": sanitize(pool),
            "ptplan-phase": sanitize(phase), "ptplan-method": sanitize(method),
            "ptplan-capacity-type": sanitize(capacity)}


def _label_sets(plan: Plan, pool: str, phase: str, capacity: str) -> dict[str, dict[str, str]]:
    return {name: _labels(plan.spec_name, pool, phase, plan.method, capacity, f)
            for name, f in (("k8s", k8s_label), ("gcp", gcp_label), ("aws", aws_tag))}


def _groups(plan: Plan, slug: str) -> list[dict[str, Any]]:
    groups = []
    for pool in plan.pools:
        by_type: dict[str, list[Any]] = {}
        for a in pool.allocations:
            if a.nodes > 0:
                by_type.setdefault(a.capacity_type, []).append(a)
        for ct in sorted(by_type, key=lambda c: (CAPACITY_ORDER.get(c, 9), c)):
            allocs = by_type[ct]
            zones = sorted({a.zone for a in allocs})
            label = CAPACITY_LABEL.get(ct, ct)
            name = dns_name(f"{pool.name}-{label}", 30)
            phase = "-".join(pool.phases)
            groups.append({
                "name": name, "full_name": dns_name(f"{slug}-{name}", 63), "tf": tf_name(name),
                "pool": pool.name, "phases": list(pool.phases), "gpu": pool.gpu,
                "provider": pool.provider, "region": pool.region,
                "gpu_resource": gpu_resource(pool.gpu),
                "sky_accelerator": SKY_ACCELERATOR.get(pool.gpu, pool.gpu),
                "gpus_per_node": pool.gpus_per_node, "nodes": sum(a.nodes for a in allocs),
                "capacity_type": ct, "capacity_label": label, "spot": ct == "spot",
                "reserved": ct == "reserved",
                "instance_types": sorted({a.instance_type for a in allocs}),
                "zones": [] if "" in zones else zones,
                "usd_per_hour": round(sum(a.nodes * a.usd_per_hour for a in allocs), 6),
                "runs_update": "update" in pool.phases,
                "labels": _label_sets(plan, pool.name, phase, label),
            })
    return groups


def build_context(plan: Plan, facts: Facts, image: str = DEFAULT_IMAGE,
                  cluster: str = "ptplan") -> dict[str, Any]:
    slug = dns_name(plan.spec_name, 30)
    groups = _groups(plan, slug)
    for g in groups:
        pool = _pool(plan, g["pool"])
        by_type: dict[str, dict[str, Any]] = {}
        for a in pool.allocations:
            if a.nodes > 0 and a.capacity_type == g["capacity_type"]:
                e = by_type.setdefault(a.instance_type, {"nodes": 0, "zones": set()})
                e["nodes"] += a.nodes
                e["zones"].add(a.zone)
        g["by_instance"] = [
            {"instance_type": it, "nodes": e["nodes"],
             "zones": [] if "" in e["zones"] else sorted(e["zones"]),
             "name": dns_name(f"{g['name']}-{it}", 40) if len(by_type) > 1 else g["name"],
             "accelerator": gke_accelerator(g["gpu"], it)}
            for it, e in sorted(by_type.items())]
        for e in g["by_instance"]:
            e["tf"] = tf_name(e["name"])
    spot_key = "karpenter.sh/capacity-type" if plan.provider == "aws" else \
        "cloud.google.com/gke-spot"
    for g in groups:
        if plan.provider == "aws":
            g["node_selector"] = {"karpenter.sh/capacity-type": g["capacity_label"],
                                  "karpenter.sh/nodepool": g["full_name"]}
        else:
            g["node_selector"] = {"cloud.google.com/gke-nodepool": g["by_instance"][0]["name"]}
            if g["spot"]:
                g["node_selector"]["cloud.google.com/gke-spot"] = "true"
        tol = [{"key": g["gpu_resource"], "operator": "Exists", "effect": "NoSchedule"}]
        if g["spot"]:
            key = "ptplan.io/spot" if plan.provider == "aws" else "cloud.google.com/gke-spot"
            tol.append({"key": key, "operator": "Equal", "value": "true",
                        "effect": "NoSchedule"})
        g["tolerations"] = tol
    launch = launch_args(plan, facts)
    upool = _pool(plan, launch["update_pool"])
    launch["words"] = verl_words(launch, slug, upool.gpus_per_node)
    launch["command"] = shlex.join(launch["words"])
    launch["nproc"] = upool.gpus_per_node
    rules: list[dict[str, Any]] = []
    notes: list[str] = []
    try:
        rules, notes = lifecycle_rules(plan, facts, slug)
        lifecycle_error = None
    except InputError as exc:
        lifecycle_error = str(exc)
    flavors = []
    for ct in sorted({g["capacity_type"] for g in groups},
                     key=lambda c: (CAPACITY_ORDER.get(c, 9), c)):
        label = CAPACITY_LABEL.get(ct, ct)
        node_labels = {spot_key: label} if plan.provider == "aws" else \
            ({spot_key: "true"} if ct == "spot" else {})
        quotas = {}
        for res in sorted({g["gpu_resource"] for g in groups}):
            quotas[res] = sum(g["nodes"] * g["gpus_per_node"] for g in groups
                              if g["capacity_type"] == ct and g["gpu_resource"] == res)
        flavors.append({"name": dns_name(f"{slug}-{label}", 63), "capacity_label": label,
                        "node_labels": node_labels, "quotas": quotas,
                        "tolerations": [t for g in groups if g["capacity_type"] == ct
                                        for t in g["tolerations"][1:]][:1],
                        "labels": _label_sets(plan, "all", "all", label)})
    project_labels = _label_sets(plan, "all", "all", "mixed" if len(flavors) > 1 else
                                 (flavors[0]["capacity_label"] if flavors else "none"))
    return {
        "project": {"name": plan.spec_name, "slug": slug, "tf": tf_name(slug),
                    "method": plan.method, "algorithm": plan.algorithm or "",
                    "provider": plan.provider, "region": plan.region,
                    "pipeline_mode": plan.pipeline_mode, "layout": plan.layout,
                    "digest": plan.spec_digest, "total_cost_usd": plan.total_cost_usd,
                    "makespan_hours": round(plan.makespan_hours, 2), "steps": plan.steps,
                    "cluster": cluster, "image": image},
        "labels": project_labels,
        "storage_labels": _label_sets(plan, "storage", "checkpoint", "none"),
        "groups": groups, "flavors": flavors,
        "resources": sorted({g["gpu_resource"] for g in groups}),
        "bucket": {"name": dns_name(f"ptplan-{slug}-{plan.spec_digest[7:15]}", 63),
                   "store": "s3" if plan.provider == "aws" else "gcs",
                   "rules": rules, "notes": notes, "error": lifecycle_error},
        "queue": {"cluster": dns_name(f"{slug}-cq", 63), "local": dns_name(f"{slug}-lq", 63)},
        "launch": launch,
        "head_pod": {"cpu": HEAD_CPU, "memory": HEAD_MEMORY},
        "abort_days": ABORT_MULTIPART_DAYS,
    }
