"""Deployment configs from a verified plan: template context, targets, lifecycle rules, files.

Rendering sees only a :class:`~optimizer.plan.schema.Plan` (and, optionally, the spec it was made
from, for the checkpoint cadence and lifecycle the plan does not record). It never re-plans.

Pools → groups. A plan pool holds allocations per (instance type, capacity type, zone). Each
pool becomes one *group* per capacity type it uses (``<pool>-<capacity>``): nodes = Σ
allocation nodes of that type, instance types and zones = the allocations' (an allocation
without a zone, as on-demand rows, allows any zone of the region). One group is one KubeRay
worker group, one Karpenter NodePool or GKE node pool, one SkyPilot task, one ASG / node pool
in Terraform; spot groups get spot capacity, a spot taint and its toleration, and SkyPilot
``use_spot`` with ``job_recovery``.

Launch arguments (veRL, OpenRLHF), all from the plan (docs/render.md has the table):
``trainer.nnodes`` / ``n_gpus_per_node`` = the update pool's nodes and GPUs per node; the
rollout's tensor-parallel size = min(replica GPUs of the rollout phase, GPUs per node) and its
pipeline-parallel size = replica GPUs / TP (a replica spanning nodes); vLLM engines = rollout
pool GPUs // replica GPUs; a rollout pool distinct from the update pool switches veRL off its
hybrid engine (``rollout.nnodes`` / ``rollout.n_gpus_per_node``); fp8/int8 rollout precision →
vLLM quantization. ``trainer.save_freq`` = the spec's ``checkpoints.every_steps``.

Cost labels (every resource): ``ptplan-project``, ``ptplan-pool``, ``ptplan-phase``,
``ptplan-method``, ``ptplan-capacity-type``, sanitised per platform (Kubernetes label values,
GCP labels, AWS tags); see :func:`k8s_label`, :func:`gcp_label`, :func:`aws_tag`.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

from optimizer.core.errors import InputError
from optimizer.plan.schema import Plan
from optimizer.render.facts import Facts, facts_for
from optimizer.render.lifecycle import (
    ABORT_MULTIPART_DAYS,
    gcs_lifecycle,
    lifecycle_rules,
    s3_lifecycle,
)

TARGETS: tuple[str, ...] = ("skypilot", "kuberay", "karpenter", "kueue", "terraform-aws",
                            "terraform-gcp", "lifecycle")
DEFAULT_IMAGE = "verlai/verl:vllm012.latest"
"""veRL's published image (vLLM 0.12); any image with veRL, vLLM and Ray works (--image)."""
CAPACITY_LABEL = {"on_demand": "on-demand", "spot": "spot", "reserved": "reserved"}
CAPACITY_ORDER = {"reserved": 0, "on_demand": 1, "spot": 2}
"""Kueue flavor preference: capacity already paid for first, then on-demand, then spot."""
SKY_ACCELERATOR = {"A100-40GB": "A100", "Trainium1": "Trainium"}
"""ptplan GPU ids whose SkyPilot catalog name differs (SkyPilot calls the 40 GB A100 'A100')."""
VERL_ESTIMATOR = {"ppo": "gae", "grpo": "grpo", "dapo": "grpo"}
"""veRL ``algorithm.adv_estimator`` (DAPO = GRPO advantages + dynamic sampling in its recipe)."""
OPENRLHF_ESTIMATOR = {"ppo": "gae", "grpo": "group_norm", "dapo": "group_norm"}
HEAD_CPU, HEAD_MEMORY = "4", "16Gi"
"""The Ray head runs no work (num-cpus 0); its requests are a fixed small default."""


# ---- label and name syntax -------------------------------------------------------------------

def _trim(s: str, n: int, ok_end: str) -> str:
    s = s[:n]
    while s and s[0] not in ok_end:
        s = s[1:]
    while s and s[-1] not in ok_end:
        s = s[:-1]
    return s


_ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def k8s_label(value: str) -> str:
    """A Kubernetes label value: ≤ 63 of [A-Za-z0-9._-], alphanumeric at both ends."""
    return _trim(re.sub(r"[^A-Za-z0-9._-]+", "-", value), 63, _ALNUM)


def gcp_label(value: str) -> str:
    """A GCP label value: ≤ 63 of [a-z0-9_-] (lowercase)."""
    return re.sub(r"[^a-z0-9_-]+", "-", value.lower())[:63]


def aws_tag(value: str) -> str:
    """An AWS tag value: ≤ 256 of letters, digits, spaces and ``_ . : / = + - @``."""
    return re.sub(r"[^A-Za-z0-9 _.:/=+\-@]+", "-", value)[:256]


def dns_name(value: str, n: int = 40) -> str:
    """A DNS-1123 label (lowercase alphanumerics and '-'); a hash keeps cut names distinct."""
    s = re.sub(r"[^a-z0-9-]+", "-", value.lower()).strip("-")
    if len(s) > n or s != value:
        digest = hashlib.sha256(value.encode()).hexdigest()[:6]
        s = _trim(s, n - 7, "abcdefghijklmnopqrstuvwxyz0123456789")
        s = f"{s}-{digest}" if s else f"p-{digest}"
    return s or "p"


def tf_name(value: str) -> str:
    """A Terraform identifier from a DNS name."""
    return "r_" + value.replace("-", "_")


def gpu_resource(gpu: str) -> str:
    """Kubernetes extended resource of an accelerator (device plugins' names)."""
    g = gpu.lower()
    if g.startswith(("trainium", "inferentia")):
        return "aws.amazon.com/neuron"
    if g.startswith("mi") or g.startswith("amd"):
        return "amd.com/gpu"
    if g.startswith("tpu"):
        return "google.com/tpu"
    return "nvidia.com/gpu"


# ---- plan input and facts the plan does not record -------------------------------------------

def load_plan(path: str | Path) -> Plan:
    from optimizer.core.yamlio import read_mapping, validate

    return validate(Plan, read_mapping(str(path), "plan"), f"plan {path}")


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


def _phase(plan: Plan, name: str) -> Any:
    return next((p for p in plan.phases if p.name == name), None)


def _pool(plan: Plan, name: str | None) -> Any:
    return next((p for p in plan.pools if p.name == name), None)


def launch_args(plan: Plan, facts: Facts) -> dict[str, Any]:
    """veRL and OpenRLHF arguments matching the plan's pools (see the module docstring)."""
    update = _phase(plan, "update")
    upool = _pool(plan, update.pool if update else None) or plan.pools[0]
    verl: list[str] = [f"trainer.nnodes={upool.nodes}",
                       f"trainer.n_gpus_per_node={upool.gpus_per_node}"]
    notes: list[str] = []
    out: dict[str, Any] = {"update_pool": upool.name, "notes": notes}
    save = [f"trainer.save_freq={facts.every_steps}"] if facts.every_steps else []
    ckpt = ["trainer.resume_mode=auto", "trainer.default_local_dir=/checkpoints/checkpoints"]
    if plan.method == "sft":
        out.update(module="verl.trainer.fsdp_sft_trainer", torchrun=True,
                   verl=[*verl, f"trainer.total_training_steps={plan.steps}", *save, *ckpt],
                   openrlhf=None)
        return out
    rollout = _phase(plan, "rollout")
    rpool = _pool(plan, rollout.pool) if rollout else upool
    rgpus = max(1, rollout.replica_gpus if rollout else 1)
    tp = min(rgpus, rpool.gpus_per_node)
    pp = max(1, rgpus // tp)
    engines = max(1, rpool.nodes * rpool.gpus_per_node // rgpus)
    separate = rpool.name != upool.name
    verl += ["actor_rollout_ref.rollout.name=vllm",
             f"actor_rollout_ref.rollout.tensor_model_parallel_size={tp}"]
    if pp > 1:
        verl.append(f"+actor_rollout_ref.rollout.pipeline_model_parallel_size={pp}")
    if rollout is not None and rollout.precision in ("fp8", "int8"):
        quant = "fp8" if rollout.precision == "fp8" else "bitsandbytes"
        verl.append(f"+actor_rollout_ref.rollout.engine_kwargs.vllm.quantization={quant}")
    if separate:
        verl += ["actor_rollout_ref.hybrid_engine=False", f"rollout.nnodes={rpool.nodes}",
                 f"rollout.n_gpus_per_node={rpool.gpus_per_node}"]
    scoring = _phase(plan, "scoring")
    spool = _pool(plan, scoring.pool) if scoring else None
    if spool is not None and spool.name not in (upool.name, rpool.name):
        if "teacher" in scoring.models:
            tgpus = max(1, scoring.replica_gpus)
            verl.append("actor_rollout_ref.teacher.n_server_workers="
                        f"{spool.nodes * spool.gpus_per_node // tgpus}")
            notes.append(f"teacher: a vLLM server group on pool {spool.name} "
                         f"({spool.nodes} x {spool.gpus_per_node} {spool.gpu}, {tgpus} GPUs "
                         "per server); set actor_rollout_ref.teacher.server_ip/port to it")
        elif "reward" in scoring.models:
            verl += ["reward_model.enable_resource_pool=True",
                     f"reward_model.nnodes={spool.nodes}",
                     f"reward_model.n_gpus_per_node={spool.gpus_per_node}"]
        else:
            notes.append(f"scoring ({', '.join(scoring.models)}) has its own pool {spool.name}; "
                         "veRL places reference/critic models on the trainer pool")
    verl += [f"trainer.total_training_steps={plan.steps}", *save, *ckpt]
    module = "verl.experimental.one_step_off_policy.main_ppo" if separate else \
        "verl.trainer.main_ppo"
    if plan.method == "rl":
        estimator = VERL_ESTIMATOR.get(plan.algorithm or "", "grpo")
        verl.insert(0, f"algorithm.adv_estimator={estimator}")
    if separate and plan.pipeline_mode == "sync":
        notes.append("sync pipeline on separate pools: veRL runs its one-step-off-policy "
                     "trainer; the plan priced the slower synchronous schedule")
    openrlhf = None
    if plan.method == "rl":
        estimator = OPENRLHF_ESTIMATOR.get(plan.algorithm or "", "group_norm")
        openrlhf = [f"--advantage_estimator={estimator}",
                    f"--actor_num_nodes={upool.nodes}",
                    f"--actor_num_gpus_per_node={upool.gpus_per_node}",
                    f"--vllm_num_engines={engines}", f"--vllm_tensor_parallel_size={tp}",
                    "--ckpt_path=/checkpoints/checkpoints", "--load_checkpoint"]
        if facts.every_steps:
            openrlhf.append(f"--save_steps={facts.every_steps}")
        if scoring is not None and "reference" in scoring.models:
            ref = spool or upool
            openrlhf += [f"--ref_num_nodes={ref.nodes}",
                         f"--ref_num_gpus_per_node={ref.gpus_per_node}"]
            if ref.name == upool.name and separate:
                openrlhf.append("--colocate_actor_ref")
        if not separate:
            openrlhf.append("--colocate_all_models")
        elif plan.pipeline_mode == "async":
            openrlhf.append("--async_train")
    out.update(module=module, torchrun=False, verl=verl, openrlhf=openrlhf, tp=tp, pp=pp,
               engines=engines, rollout_pool=rpool.name)
    return out


def verl_words(launch: dict[str, Any], slug: str, nproc: int) -> list[str]:
    """The veRL command line as words; data and model come from the environment (OmegaConf
    ``${oc.env:...}``, resolved by veRL, not by the shell)."""
    model = "model.partial_pretrain" if launch["torchrun"] else "actor_rollout_ref.model.path"
    head = (["torchrun", "--standalone", "--nnodes=1", f"--nproc_per_node={nproc}", "-m"]
            if launch["torchrun"] else ["python3", "-m"])
    return [*head, launch["module"], "data.train_files=${oc.env:TRAIN_FILES}",
            "data.val_files=${oc.env:VAL_FILES}", model + "=${oc.env:MODEL_PATH}",
            f"trainer.project_name={slug}", f"trainer.experiment_name={slug}", *launch["verl"]]


# ---- context and targets ------------------------------------------------------------------------

GKE_ACCELERATOR = {"H100": "nvidia-h100-80gb", "H200": "nvidia-h200-141gb",
                   "A100-40GB": "nvidia-tesla-a100", "A100-80GB": "nvidia-a100-80gb",
                   "L4": "nvidia-l4", "B200": "nvidia-b200", "T4": "nvidia-tesla-t4"}


def gke_accelerator(gpu: str, machine_type: str) -> str:
    if machine_type.startswith("a3-megagpu"):
        return "nvidia-h100-mega-80gb"
    return GKE_ACCELERATOR.get(gpu, "nvidia-" + re.sub(r"[^a-z0-9]+", "-", gpu.lower()))


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


# ---- targets → files ----------------------------------------------------------------------------

class NotApplicable(Exception):
    """A target that does not apply to this plan (the message says what to use instead)."""


def _one_region(ctx: dict[str, Any], target: str) -> None:
    """Cluster targets need every pool in one region; a split plan (``split_regions``) puts
    the rollout pool elsewhere, which only per-task targets (SkyPilot) can express."""
    places = sorted({(g["provider"], g["region"]) for g in ctx["groups"]})
    if len(places) > 1:
        where = ", ".join(f"{g['pool']} in {g['provider']}/{g['region']}" for g in ctx["groups"])
        raise NotApplicable(f"{target}: the pools span {len(places)} regions ({where}; a "
                            "split_regions plan) and one cluster lives in one region; use "
                            "--target skypilot, or plan without split_regions")


def _launch_files(ctx: dict[str, Any]) -> dict[str, str]:
    from templates import render

    out = {"launch/verl.sh": render("launch/verl.sh.j2", **ctx)}
    if ctx["launch"]["openrlhf"]:
        out["launch/openrlhf.sh"] = render("launch/openrlhf.sh.j2", **ctx)
    return out


def _t_skypilot(ctx: dict[str, Any]) -> dict[str, str]:
    from templates import render

    total = sum(g["nodes"] for g in ctx["groups"])
    head = next((g for g in ctx["groups"] if g["runs_update"]), ctx["groups"][0])
    out = {f"skypilot/{g['name']}.yaml": render("skypilot/task.yaml.j2", g=g, head=head,
                                                total_nodes=total, run_script=sky_run, **ctx)
           for g in ctx["groups"]}
    return {**out, **_launch_files(ctx)}


def sky_run(g: dict[str, Any], head: dict[str, Any], launch: dict[str, Any]) -> str:
    """The ``run`` script of a SkyPilot task: Ray head + driver on the update group's rank 0
    (after every node of every group joined), workers elsewhere (SkyPilot's veRL recipe)."""
    if launch["torchrun"]:
        return ("set -euo pipefail\n"
                "torchrun --nnodes=$SKYPILOT_NUM_NODES --nproc_per_node=$SKYPILOT_NUM_GPUS_PER_NODE"
                " --node_rank=$SKYPILOT_NODE_RANK"
                " --master_addr=$(echo \"$SKYPILOT_NODE_IPS\" | head -n1) --master_port=29500 -m "
                + shlex.join(launch["words"][5:]) + "\n")
    if g["name"] == head["name"]:
        return ("set -euo pipefail\n"
                "HEAD_IP=$(echo \"$SKYPILOT_NODE_IPS\" | head -n1)\n"
                "if [ \"$SKYPILOT_NODE_RANK\" = 0 ]; then\n"
                "  ray start --head --port=6379 --num-gpus=$SKYPILOT_NUM_GPUS_PER_NODE\n"
                "  until [ \"$(ray list nodes --filter state=ALIVE --format yaml"
                " | grep -c node_id)\" -ge \"$PTPLAN_TOTAL_NODES\" ]; do sleep 10; done\n"
                "  " + shlex.join(launch["words"]) + "\n"
                "else\n"
                "  ray start --address=$HEAD_IP:6379"
                " --num-gpus=$SKYPILOT_NUM_GPUS_PER_NODE --block\n"
                "fi\n")
    return ("set -euo pipefail\n"
            "ray start --address=$RAY_HEAD_IP:6379 --num-gpus=$SKYPILOT_NUM_GPUS_PER_NODE"
            " --block\n")


def _t_kuberay(ctx: dict[str, Any]) -> dict[str, str]:
    from templates import render

    _one_region(ctx, "kuberay")
    launch = ctx["launch"]
    if launch["torchrun"] and sum(g["nodes"] for g in ctx["groups"]) > 1:
        raise NotApplicable("kuberay: multi-node SFT runs under torchrun, not Ray; use "
                            "--target skypilot (or the karpenter/kueue node pools)")
    return {"kuberay/rayjob.yaml": render("kuberay/rayjob.yaml.j2", **ctx), **_launch_files(ctx)}


def _t_karpenter(ctx: dict[str, Any]) -> dict[str, str]:
    from templates import render

    _one_region(ctx, "karpenter")
    if ctx["project"]["provider"] == "gcp":
        return {"gke/main.tf": render("terraform/gcp_main.tf.j2", **ctx),
                "gke/node_pools.tf": render("terraform/gcp_node_pools.tf.j2", **ctx)}
    if ctx["project"]["provider"] != "aws":
        raise NotApplicable(f"karpenter: the plan runs on {ctx['project']['provider']}; "
                            "Karpenter NodePools are emitted for AWS plans only")
    return {"karpenter/nodepools.yaml": render("karpenter/nodepools.yaml.j2", **ctx)}


def _t_kueue(ctx: dict[str, Any]) -> dict[str, str]:
    from templates import render

    _one_region(ctx, "kueue")
    return {"kueue/queues.yaml": render("kueue/queues.yaml.j2", **ctx)}


def _bucket_ok(ctx: dict[str, Any]) -> None:
    if ctx["bucket"]["error"]:
        raise InputError(ctx["bucket"]["error"])


def _t_terraform(provider: str) -> Callable[[dict[str, Any]], dict[str, str]]:
    def go(ctx: dict[str, Any]) -> dict[str, str]:
        from templates import render

        where = f"{ctx['project']['provider']}/{ctx['project']['region']}"
        _one_region(ctx, f"terraform-{provider}")
        if ctx["project"]["provider"] not in ("aws", "gcp"):
            raise NotApplicable(f"terraform-{provider}: the plan runs on {where}; the "
                                "Terraform targets cover aws and gcp plans only")
        if ctx["project"]["provider"] != provider:
            other = "terraform-gcp" if provider == "aws" else "terraform-aws"
            raise NotApplicable(f"terraform-{provider}: the plan runs on {where}; "
                                f"use --target {other}")
        _bucket_ok(ctx)
        d = f"terraform-{provider}"
        if provider == "aws":
            return {f"{d}/main.tf": render("terraform/aws_main.tf.j2", **ctx),
                    f"{d}/asg.tf": render("terraform/aws_asg.tf.j2", **ctx),
                    f"{d}/bucket.tf": render("terraform/aws_bucket.tf.j2", **ctx)}
        return {f"{d}/main.tf": render("terraform/gcp_main.tf.j2", **ctx),
                f"{d}/node_pools.tf": render("terraform/gcp_node_pools.tf.j2", **ctx),
                f"{d}/bucket.tf": render("terraform/gcp_bucket.tf.j2", **ctx)}

    return go


def _json(doc: Any) -> str:
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=True) + "\n"


def _t_lifecycle(ctx: dict[str, Any]) -> dict[str, str]:
    _bucket_ok(ctx)
    b, prefix = ctx["bucket"], ctx["project"]["slug"]
    if b["store"] == "s3":
        return {"lifecycle/s3-lifecycle.json": _json(s3_lifecycle(b["rules"], prefix))}
    return {"lifecycle/gcs-lifecycle.json": _json(gcs_lifecycle(b["rules"], prefix))}


RENDERERS: dict[str, Callable[[dict[str, Any]], dict[str, str]]] = {
    "skypilot": _t_skypilot, "kuberay": _t_kuberay, "karpenter": _t_karpenter,
    "kueue": _t_kueue, "terraform-aws": _t_terraform("aws"),
    "terraform-gcp": _t_terraform("gcp"), "lifecycle": _t_lifecycle,
}


def render_plan(plan: Plan, target: str, spec: Any = None, image: str = DEFAULT_IMAGE,
                cluster: str = "ptplan") -> tuple[dict[str, str], list[str]]:
    """Files (relative path → text) of ``target`` (or ``all``) and notes for stderr.

    A single target that does not apply raises :class:`InputError`; ``all`` skips it with a
    note. The plan must pass :func:`optimizer.plan.verify.verify_plan` first (the caller checks).
    """
    if target != "all" and target not in RENDERERS:
        from optimizer.core.errors import suggest

        raise InputError(f"--target: unknown target {target!r}{suggest(target, RENDERERS)}; "
                         f"use one of {', '.join((*TARGETS, 'all'))}")
    if not plan.pools:
        raise InputError("plan: it has no pools; nothing to deploy")
    facts = facts_for(plan, spec)
    ctx = build_context(plan, facts, image, cluster)
    files: dict[str, str] = {}
    notes: list[str] = list(facts.notes)
    names = list(TARGETS) if target == "all" else [target]
    for name in names:
        if target == "all" and name == "karpenter" and plan.provider == "gcp":
            notes.append("karpenter: GCP plan; the GKE node pools are in terraform-gcp/")
            continue
        try:
            files.update(RENDERERS[name](ctx))
        except NotApplicable as exc:
            if target != "all":
                raise InputError(str(exc)) from None
            notes.append(str(exc))
    if any(p.startswith(("lifecycle/", "terraform-")) for p in files):
        notes += [f"lifecycle: {n}" for n in ctx["bucket"]["notes"]]
    notes += [f"launch: {n}" for n in ctx["launch"]["notes"] if "launch/verl.sh" in files]
    return dict(sorted(files.items())), notes


def write_files(files: dict[str, str], out_dir: Path) -> list[Path]:
    """Write files under ``out_dir`` (created); returns the paths in sorted order."""
    written = []
    try:
        for rel, text in sorted(files.items()):
            path = out_dir / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8", newline="\n")
            written.append(path)
    except OSError as exc:
        raise InputError(f"-o: cannot write under {str(out_dir)!r} ({exc.strerror}); "
                         "choose a writable directory") from None
    return written
