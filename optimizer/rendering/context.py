"""The template context of a verified plan: pools → groups, flavors, bucket rules, launch.

Pools → groups. A plan pool holds allocations per (instance type, capacity type, zone). Each
(pool, capacity type, zone, instance type) cell becomes one *group* (``<pool>-<capacity>``, the
zone or type appended only where a capacity type spans several): one KubeRay worker group, one
Karpenter NodePool with its own EC2NodeClass, one GKE node pool, one SkyPilot task. Region-level
allocations sit in the plan's zone (:func:`ptplan.planfile.deployment.site_zone`; the groups and
their names: :func:`ptplan.planfile.deployment.group_cells`). Groups carry the
node labels pods select (``ptplan.io/group``, ``ptplan.io/pool``, ``ptplan.io/capacity-type``),
only the accelerator taint (which the device plugins tolerate), the Ray custom resource of their
pool and, for multi-node AWS trainers, EFA.

Cost labels (every resource): ``ptplan-project``, ``ptplan-pool``, ``ptplan-phase``,
``ptplan-method``, ``ptplan-capacity-type``, sanitised per platform (Kubernetes label values,
GCP labels, AWS tags); see :mod:`ptplan.planfile.tags` and :mod:`ptplan.planfile.names`.
"""

from __future__ import annotations

import json
from typing import Any

from ptplan.core.errors import InputError
from ptplan.planfile.deployment import CAPACITY_ORDER, group_cells, site_zone
from ptplan.planfile.identity import PLAN_LABEL, plan_digest, project_slug
from ptplan.planfile.names import (
    SKY_ACCELERATOR,
    dns_name,
    gke_accelerator,
    gpu_resource,
    k8s_label,
    prefixed,
    tf_name,
)
from ptplan.planfile.schema import Plan
from ptplan.planfile.tags import CAPACITY_LABEL, label_sets
from ptplan.providers.blocks import calendar_reservation_name
from ptplan.rendering import gpudirect
from ptplan.rendering.budgets import extra_context, guard_context
from ptplan.rendering.cpu_pools import cpu_groups
from ptplan.rendering.deploy import (
    CONSOLIDATE_AFTER,
    RAYJOB_TTL_SECONDS,
    boot_disk_gb,
    boot_disk_note,
    deadlines,
    efa_count,
    ray_resource,
    restart_budget,
)
from ptplan.rendering.facts import Facts
from ptplan.rendering.launch import _pool, launch_args, verl_words
from ptplan.rendering.lifecycle import ABORT_MULTIPART_DAYS, lifecycle_rules
from ptplan.rendering.transport import ray_entrypoint
from ptplan.templates import shell_join, shell_word

DEFAULT_IMAGE = "verlai/verl:vllm012.latest"
"""veRL's published base image (CUDA, torch, vLLM 0.12, Ray; veRL itself is not in it): the
launch installs the framework at the pinned release (``launch.install``: SkyPilot ``setup``, the
launch scripts). Any image with CUDA, torch, vLLM and Ray works (--image)."""
HEAD_CPU, HEAD_MEMORY = "4", "16Gi"
"""The Ray head runs no work (num-cpus 0); its requests are a fixed small default."""
SUBMITTER = {"cpu": "500m", "memory": "200Mi"}
"""Requests of the RayJob submitter pod: KubeRay's default submitter template
(ray-operator/controllers/ray/common/job.go, GetDefaultSubmitterContainer: requests 500m /
200Mi, limits 1 / 1Gi), rendered explicitly so the Kueue quota matches it. Kueue admits the
submitter as its own pod set in K8sJobMode (kueue pkg/controller/jobs/rayjob/
rayjob_controller.go: submitterJobPodSetName)."""
EFA_RESOURCE = "vpc.amazonaws.com/efa"


def _booking(plan: Plan, pool: str, ct: str, it: str) -> dict[str, Any] | None:
    """The plan's booking (schema 6) for a group of booked capacity, as template values."""
    b = next((b for b in plan.bookings if (b.pool, b.capacity_type, b.instance_type)
              == (pool, ct, it)), None)
    if b is None:
        return None
    return {"nodes": b.nodes, "units": b.units, "unit_hours": b.unit_hours,
            "duration_hours": round(b.duration_hours), "earliest_start": b.earliest_start,
            "cost_usd": b.cost_usd, "wait_hours": b.wait_hours,
            "max_run_seconds": round(b.held_hours * 3600),
            # GCP calendar mode: the reservation the booking delivers, consumed by name
            "reservation": calendar_reservation_name(it, b.earliest_start)
            if ct == "block" and plan.provider == "gcp" else None}


def _groups(plan: Plan, slug: str, site: str, digest: str, prefix: str,
            nets_root: str) -> list[dict[str, Any]]:
    """One group per (pool, capacity type, zone, instance type) of the plan: one node pool, one
    Ray worker group, one SkyPilot task. Region-level allocations sit in ``site``."""
    groups = []
    for cell in group_cells(plan, slug, site, digest):
        pool, ct, zone, it = cell.pool, cell.capacity_type, cell.zone, cell.instance_type
        allocs, label, name, full = cell.allocations, cell.label, cell.name, cell.full_name
        phase = "-".join(pool.phases)
        node_labels = {"ptplan.io/group": full, "ptplan.io/pool": k8s_label(pool.name),
                       "ptplan.io/capacity-type": label}
        efa = efa_count(plan, pool, it)
        res = gpu_resource(pool.gpu)
        gd = gpudirect.stack(plan, pool, it)
        groups.append({
            "name": name, "full_name": full, "tf": tf_name(full),
            "pool": pool.name, "phases": list(pool.phases), "gpu": pool.gpu,
            "provider": pool.provider, "region": pool.region, "gpu_resource": res,
            "sky_accelerator": SKY_ACCELERATOR.get(pool.gpu, pool.gpu),
            "gpus_per_node": pool.gpus_per_node, "nodes": sum(a.nodes for a in allocs),
            "capacity_type": ct, "capacity_label": label, "spot": ct == "spot",
            "reserved": ct in ("reserved", "block"), "block": ct == "block",
            "flex_start": ct == "flex_start",
            # Karpenter's capacity types: a capacity block is a capacity reservation
            "karpenter_capacity": "reserved" if ct == "block" else label,
            "booking": _booking(plan, pool.name, ct, it),
            "instance_type": it, "instance_types": [it],
            "zone": zone, "zones": [zone] if zone else [],
            "accelerator": gke_accelerator(pool.gpu, it),
            "usd_per_hour": round(sum(a.nodes * a.usd_per_hour for a in allocs), 6),
            "runs_update": "update" in pool.phases,
            "labels": label_sets(plan, pool.name, phase, label, prefix),
            "node_labels": node_labels, "node_selector": dict(node_labels), "efa": efa,
            "ray_resource": ray_resource(pool.name),
            "boot_disk_gb": boot_disk_gb(plan, pool),
            "taints": [{"key": res, "effect": "NoSchedule"}],
            "tolerations": [{"key": res, "operator": "Exists", "effect": "NoSchedule"}],
            "pod_resources": {res: pool.gpus_per_node, **({EFA_RESOURCE: efa} if efa else {})},
            "gpudirect": gpudirect.pod(gd, gpudirect.networks(nets_root, gd.nics)) if gd
            else None,
            "sky_network_tier": "best" if gd and it in gpudirect.SKY_TCPX_TYPES else None,
        })
    for g in groups:
        # KubeRay pastes rayStartParams into `ray start` run by bash; it writes custom
        # resources itself as '<json>' (ray-operator/controllers/ray/common/pod.go,
        # addWellKnownAcceleratorResources): the names here are [a-z0-9_] only
        custom = json.dumps({g["ray_resource"]: g["gpus_per_node"]})
        g["ray_start_params"] = {"num-gpus": str(g["gpus_per_node"]),
                                 "resources": shell_word(custom)}
    return groups


def _quantity(values: list[str]) -> str:
    """Sum of Kubernetes quantities (cpu: "4", "500m"; memory: "16Gi", "200Mi")."""
    if all(v.endswith(("Gi", "Mi")) for v in values):
        mi = sum(int(v[:-2]) * (1024 if v.endswith("Gi") else 1) for v in values)
        return f"{mi // 1024}Gi" if mi % 1024 == 0 else f"{mi}Mi"
    milli = sum(int(v[:-1]) if v.endswith("m") else int(v) * 1000 for v in values)
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def build_context(plan: Plan, facts: Facts, image: str = DEFAULT_IMAGE,
                  cluster: str = "ptplan", guard_image: str | None = None) -> dict[str, Any]:
    """The template context; ``guard_image``: the image the budget guard's CronJob runs (the
    ``--image`` given to render, None when none was: the guard target then refuses)."""
    slug = project_slug(plan)
    digest = plan_digest(plan)
    prefix = prefixed(slug, digest)
    site, deploy_notes = site_zone(plan)
    groups = _groups(plan, slug, site, digest, prefix, prefix)
    launch = launch_args(plan, facts)
    upool = _pool(plan, launch["update_pool"])
    launch["words"] = verl_words(launch, slug, upool.gpus_per_node)
    # what runs: the framework's command, inside the archiving wrapper when the plan archives
    # checkpoints (ptplan.rendering.archive)
    launch["command"] = shell_join(launch["run_words"])
    launch["entrypoint"] = ray_entrypoint(launch["run_words"])
    launch["nproc"] = upool.gpus_per_node
    rules: list[dict[str, Any]] = []
    notes: list[str] = []
    try:
        rules, notes = lifecycle_rules(plan, facts, slug)
        lifecycle_error = None
    except InputError as exc:
        lifecycle_error = str(exc)
    flavors = []
    resources = sorted({r for g in groups for r in g["pod_resources"]})
    for ct in sorted({g["capacity_type"] for g in groups},
                     key=lambda c: (CAPACITY_ORDER.get(c, 9), c)):
        label = CAPACITY_LABEL.get(ct, ct)
        quotas = {res: sum(g["nodes"] * g["pod_resources"].get(res, 0) for g in groups
                           if g["capacity_type"] == ct) for res in resources}
        flavors.append({"name": prefixed(slug, digest, label), "capacity_label": label,
                        "node_labels": {"ptplan.io/capacity-type": label}, "quotas": quotas,
                        "labels": label_sets(plan, "all", "all", label, prefix)})
    backoff, interruptions = restart_budget(plan)
    project_labels = label_sets(plan, "all", "all", "mixed" if len(flavors) > 1 else
                                 (flavors[0]["capacity_label"] if flavors else "none"), prefix)
    ctx = {
        "project": {"name": plan.spec_name, "slug": slug, "tf": tf_name(slug),
                    "prefix": prefix, "plan_label": PLAN_LABEL, "plan_digest": digest,
                    "method": plan.method, "algorithm": plan.algorithm or "",
                    "provider": plan.provider, "region": plan.region,
                    "pipeline_mode": plan.pipeline_mode, "layout": plan.layout,
                    "digest": plan.spec_digest, "total_cost_usd": plan.total_cost_usd,
                    "makespan_hours": round(plan.makespan_hours, 2), "steps": plan.steps,
                    "cluster": cluster, "image": image},
        "labels": project_labels,
        "storage_labels": label_sets(plan, "storage", "checkpoint", "none", prefix),
        "groups": groups, "flavors": flavors,
        "cpu_groups": cpu_groups(plan, slug, label_sets, site, digest, prefix),
        "resources": resources,
        "bucket": {"name": dns_name(f"ptplan-{slug}-{plan.spec_digest[7:15]}", 63),
                   "store": "s3" if plan.provider == "aws" else "gcs",
                   "rules": rules, "notes": notes, "error": lifecycle_error},
        "queue": {"cluster": prefixed(slug, digest, "cq"), "local": prefixed(slug, digest, "lq")},
        "launch": launch,
        "head_pod": {"cpu": HEAD_CPU, "memory": HEAD_MEMORY},
        "submitter": dict(SUBMITTER),
        "queue_cpu": _quantity([HEAD_CPU, SUBMITTER["cpu"]]),
        "queue_memory": _quantity([HEAD_MEMORY, SUBMITTER["memory"]]),
        "site_zone": site,
        "job": {"backoff_limit": backoff, "expected_interruptions": round(interruptions, 3),
                "ttl": RAYJOB_TTL_SECONDS, "consolidate_after": CONSOLIDATE_AFTER,
                **{f"{k}_deadline": v for k, v in deadlines(plan).items()}},
        "gpudirect_networks": gpudirect.networks(prefix, max(
            (g["gpudirect"]["nics"] for g in groups if g["gpudirect"]), default=0)),
        "deploy_notes": [*deploy_notes, boot_disk_note(plan), *gpudirect.notes(plan, groups)],
        "abort_days": ABORT_MULTIPART_DAYS,
        **extra_context(plan),
    }
    ctx["guard"] = guard_context(ctx, guard_image, prefixed(slug, digest, "guard", 52))
    return ctx
