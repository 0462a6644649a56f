"""Deployment configs from a verified plan: targets → files.

Rendering sees only a :class:`~ptplan.planfile.schema.Plan` (read by
:func:`ptplan.planfile.load.load_plan`; and, for plans of schema 1 that do not record their
lifecycle, optionally the spec it was made from). It never re-plans. The
template context (pools → groups, cost labels) is built by :mod:`ptplan.rendering.context`,
launch arguments by :mod:`ptplan.rendering.launch`, bucket rules by
:mod:`ptplan.rendering.lifecycle`; names are sanitised by :mod:`ptplan.planfile.names`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from ptplan.core.errors import InputError
from ptplan.planfile.names import k8s_label
from ptplan.planfile.schema import Plan
from ptplan.rendering.context import DEFAULT_IMAGE, build_context
from ptplan.rendering.facts import facts_for
from ptplan.rendering.frameworks import framework_for
from ptplan.rendering.kinds import Target
from ptplan.rendering.lifecycle import gcs_lifecycle, lifecycle_rules, s3_lifecycle

__all__ = ["DEFAULT_IMAGE", "RENDERERS", "TARGETS", "NotApplicable", "build_context",
           "facts_for", "k8s_label", "lifecycle_rules", "render_plan", "write_files"]

OPT_IN = (Target.guard, Target.budgets)
"""Targets only written when asked for by name (``--target all`` leaves them out)."""
TARGETS: tuple[str, ...] = tuple(t.value for t in Target
                                 if t is not Target.all and t not in OPT_IN)


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
    from ptplan.templates import render

    out = {}
    if ctx["launch"]["verl"]:
        out["launch/verl.sh"] = render("launch/verl.sh.j2", **ctx)
    if ctx["launch"]["openrlhf"]:
        out["launch/openrlhf.sh"] = render("launch/openrlhf.sh.j2", **ctx)
    return out


def _t_skypilot(ctx: dict[str, Any]) -> dict[str, str]:
    """One SkyPilot job group (``execution: parallel``): a task per group, the update group's
    task primary; the others are stopped when it ends."""
    from ptplan.templates import render

    total = sum(g["nodes"] for g in ctx["groups"])
    head = next((g for g in ctx["groups"] if g["runs_update"]), ctx["groups"][0])
    path = f"skypilot/{ctx['project']['slug']}.yaml"
    return {path: render("skypilot/job_group.yaml.j2", head=head, total_nodes=total,
                         run_script=sky_run, **ctx), **_launch_files(ctx)}


_HEAD_HOST = '"$PTPLAN_HEAD_TASK-0.$SKYPILOT_JOBGROUP_NAME"'
_WAIT = ("deadline=$((SECONDS + {wait}))\n"
         "  until [ \"$(ray list nodes --filter state=ALIVE --format yaml"
         " | grep -c node_id)\" -ge \"$PTPLAN_TOTAL_NODES\" ]; do\n"
         "    [ \"$SECONDS\" -lt \"$deadline\" ] || {{ echo 'ptplan: capacity did not arrive in"
         " {wait} s' >&2; exit 1; }}\n"
         "    sleep 10\n  done\n")


def sky_run(g: dict[str, Any], head: dict[str, Any], launch: dict[str, Any]) -> str:
    """The ``run`` script of a job-group task. The primary (update) task starts the Ray head on
    rank 0 with its pool's custom resource, waits (bounded) until all nodes joined, runs the
    driver and stops Ray when it ends; its other ranks join and leave when the head is gone.
    Other tasks join the head by its job-group hostname and block until stopped."""
    from ptplan.templates import shell_join, shell_word

    res = "--resources=" + shell_word(json.dumps({g["ray_resource"]: g["gpus_per_node"]}))
    join = (f"ray start --address={_HEAD_HOST}:6379 --num-gpus=$SKYPILOT_NUM_GPUS_PER_NODE "
            f"{res}")
    run = launch.get("run_words", launch["words"])
    wrapper = shell_join(run[:len(run) - len(launch["words"])]) + " " \
        if len(run) > len(launch["words"]) else ""  # the archiving wrapper (rendering.archive)
    if launch["torchrun"]:
        return ("set -euo pipefail\n"
                + wrapper +
                "torchrun --nnodes=$SKYPILOT_NUM_NODES --nproc_per_node=$SKYPILOT_NUM_GPUS_PER_NODE"
                " --node_rank=$SKYPILOT_NODE_RANK"
                " --master_addr=$(echo \"$SKYPILOT_NODE_IPS\" | head -n1) --master_port=29500 -m "
                + shell_join(launch["words"][5:]) + "\n")
    if g["name"] == head["name"]:
        from ptplan.rendering.deploy import CAPACITY_WAIT_SECONDS

        return ("set -euo pipefail\n"
                "if [ \"$SKYPILOT_NODE_RANK\" = 0 ]; then\n"
                f"  ray start --head --port=6379 --num-gpus=$SKYPILOT_NUM_GPUS_PER_NODE {res}\n"
                "  trap 'ray stop --force' EXIT\n"
                "  " + _WAIT.format(wait=CAPACITY_WAIT_SECONDS)
                + "  " + shell_join(run) + "\n"
                "else\n"
                f"  {join}\n"
                f"  while ray health-check --address={_HEAD_HOST}:6379 >/dev/null 2>&1; do"
                " sleep 30; done\n"
                "fi\n")
    return f"set -euo pipefail\n{join} --block\n"


def _t_kuberay(ctx: dict[str, Any]) -> dict[str, str]:
    from ptplan.templates import render

    _one_region(ctx, "kuberay")
    launch = ctx["launch"]
    if launch["torchrun"] and sum(g["nodes"] for g in ctx["groups"]) > 1:
        raise NotApplicable("kuberay: multi-node SFT runs under torchrun, not Ray; use "
                            "--target skypilot (or the karpenter/kueue node pools)")
    nets = ({"kuberay/gke-networks.yaml": render("kuberay/gke_networks.yaml.j2", **ctx)}
            if ctx["gpudirect_networks"] else {})
    return {"kuberay/rayjob.yaml": render("kuberay/rayjob.yaml.j2", **ctx), **nets,
            **_launch_files(ctx)}


def _t_karpenter(ctx: dict[str, Any]) -> dict[str, str]:
    from ptplan.templates import render

    _one_region(ctx, "karpenter")
    if ctx["project"]["provider"] == "gcp":
        return {"gke/main.tf": render("terraform/gcp_main.tf.j2", **ctx),
                "gke/node_pools.tf": render("terraform/gcp_node_pools.tf.j2", **ctx),
                **_gke_cpu(ctx, "gke")}
    if ctx["project"]["provider"] != "aws":
        raise NotApplicable(f"karpenter: the plan runs on {ctx['project']['provider']}; "
                            "Karpenter NodePools are emitted for AWS plans only")
    cpu = ({"karpenter/cpu-nodepools.yaml": render("karpenter/cpu_nodepools.yaml.j2", **ctx)}
           if ctx["cpu_groups"] else {})
    return {"karpenter/nodepools.yaml": render("karpenter/nodepools.yaml.j2", **ctx), **cpu}


def _gke_cpu(ctx: dict[str, Any], d: str) -> dict[str, str]:
    """The plan's CPU pools as GKE node pools (``<d>/cpu_node_pools.tf``), when it has any."""
    from ptplan.templates import render

    if not ctx["cpu_groups"]:
        return {}
    return {f"{d}/cpu_node_pools.tf": render("terraform/gcp_cpu_node_pools.tf.j2", **ctx)}


def _t_kueue(ctx: dict[str, Any]) -> dict[str, str]:
    from ptplan.templates import render

    _one_region(ctx, "kueue")
    return {"kueue/queues.yaml": render("kueue/queues.yaml.j2", **ctx)}


def _bucket_ok(ctx: dict[str, Any]) -> None:
    if ctx["bucket"]["error"]:
        raise InputError(ctx["bucket"]["error"])


def _t_terraform(provider: str) -> Callable[[dict[str, Any]], dict[str, str]]:
    def go(ctx: dict[str, Any]) -> dict[str, str]:
        from ptplan.templates import render

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
            out = {f"{d}/main.tf": render("terraform/aws_main.tf.j2", **ctx),
                   f"{d}/cost_tags.tf": render("terraform/aws_cost_tags.tf.j2", **ctx),
                   f"{d}/zones.tf": render("terraform/aws_zones.tf.j2", **ctx),
                   f"{d}/bucket.tf": render("terraform/aws_bucket.tf.j2", **ctx)}
            if any(g["block"] and g["booking"] for g in ctx["groups"]):  # plan bookings
                out[f"{d}/capacity_blocks.tf"] = render("terraform/aws_capacity_blocks.tf.j2",
                                                        **ctx)
            return out
        return {f"{d}/main.tf": render("terraform/gcp_main.tf.j2", **ctx),
                f"{d}/node_pools.tf": render("terraform/gcp_node_pools.tf.j2", **ctx),
                f"{d}/bucket.tf": render("terraform/gcp_bucket.tf.j2", **ctx),
                **_gke_cpu(ctx, d)}

    return go


def _json(doc: Any) -> str:
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=True) + "\n"


def _t_lifecycle(ctx: dict[str, Any]) -> dict[str, str]:
    _bucket_ok(ctx)
    b, prefix = ctx["bucket"], ctx["project"]["slug"]
    if b["store"] == "s3":
        return {"lifecycle/s3-lifecycle.json": _json(s3_lifecycle(b["rules"], prefix))}
    return {"lifecycle/gcs-lifecycle.json": _json(gcs_lifecycle(b["rules"], prefix))}


def _t_guard(ctx: dict[str, Any]) -> dict[str, str]:
    from ptplan.rendering.budgets import guard_files

    _one_region(ctx, "guard")
    if ctx["project"]["provider"] not in ("aws", "gcp"):
        raise NotApplicable("guard: the plan runs on neither aws nor gcp; the guard reads "
                            "their bills only")
    if not ctx["guard"]["image"]:
        raise NotApplicable(f"guard: give --image, the image the guard's CronJob runs: one with "
                            f"{ctx['guard']['extras']} installed, pinned by digest "
                            "(REPO@sha256:<digest>); the guard installs nothing when it runs")
    return guard_files(ctx)


def _t_budgets(ctx: dict[str, Any]) -> dict[str, str]:
    from ptplan.rendering.budgets import budget_files

    if ctx["project"]["provider"] not in ("aws", "gcp"):
        raise NotApplicable("budgets: the plan runs on neither aws nor gcp")
    return budget_files(ctx)


RENDERERS: dict[str, Callable[[dict[str, Any]], dict[str, str]]] = {
    "skypilot": _t_skypilot, "kuberay": _t_kuberay, "karpenter": _t_karpenter,
    "kueue": _t_kueue, "terraform-aws": _t_terraform("aws"),
    "terraform-gcp": _t_terraform("gcp"), "lifecycle": _t_lifecycle,
    "guard": _t_guard, "budgets": _t_budgets,
}


CLUSTER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,99}")
"""A cluster name EKS accepts (letters, digits, ``-``, ``_``; up to 100, a letter or digit
first); GKE's (lowercase letters, digits, ``-``, up to 40) are a subset."""
IMAGE_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,1023}")
"""The characters of a container image reference (``[HOST[:PORT]/]PATH[:TAG][@DIGEST]``)."""


def check_options(cluster: str, image: str | None) -> None:
    """Refuse, in one line naming the option and the value, a ``--cluster`` that is not a
    cluster name or an ``--image`` that is not an image reference: both end up in YAML, HCL
    and the guard's command line, where they are quoted, but no real name holds a space, a
    quote, ``;``, ``$``, a backtick, ``#`` or a line break."""
    if not isinstance(cluster, str) or not CLUSTER_NAME.fullmatch(cluster):
        raise InputError(f"--cluster: {cluster!r} is not a cluster name (letters, digits, '-' "
                         "and '_', up to 100, a letter or digit first); give the EKS or GKE "
                         "cluster's name")
    if image is not None and (not isinstance(image, str) or not IMAGE_REF.fullmatch(image)):
        raise InputError(f"--image: {image!r} is not a container image reference "
                         "([HOST[:PORT]/]PATH[:TAG][@sha256:DIGEST]: letters, digits and "
                         "'._/:@+-'); give the image's reference")


def render_plan(plan: Plan, target: str, spec: Any = None, image: str | None = None,
                cluster: str = "ptplan", framework: str | None = None,
                ) -> tuple[dict[str, str], list[str]]:
    """Files (relative path → text) of ``target`` (or ``all``) and notes for stderr.

    A single target that does not apply raises :class:`InputError`; ``all`` skips it with a
    note. The plan must pass :func:`ptplan.planfile.verify.verify_plan` first (the caller checks).
    ``image``: the Ray pods' and SkyPilot tasks' image (default :data:`DEFAULT_IMAGE`), and the
    guard CronJob's (``guard`` needs one given: an image with ptplan installed).
    """
    if target != "all" and target not in RENDERERS:
        from ptplan.core.errors import suggest

        raise InputError(f"--target: unknown target {target!r}{suggest(target, RENDERERS)}; "
                         f"use one of {', '.join((*TARGETS, 'all'))}")
    if not plan.pools:
        raise InputError("plan: it has no pools; nothing to deploy")
    check_options(cluster, image)
    fw = framework_for(plan, framework)  # the plan's release; --framework for `any` plans
    facts = replace(facts_for(plan, spec), framework=fw)
    ctx = build_context(plan, facts, image or DEFAULT_IMAGE, cluster, guard_image=image)
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
    if any(p.startswith("launch/") for p in files):
        notes += [f"launch: {n}" for n in ctx["launch"]["notes"]]
    if "guard/guard.yaml" in files:
        from ptplan.rendering.budgets import guard_notes

        notes += guard_notes(ctx)
    notes += [f"deploy: {n}" for n in ctx["deploy_notes"]]
    if plan.cpu_pools and not any(p.endswith(("cpu-nodepools.yaml", "cpu_node_pools.tf"))
                                  for p in files):
        notes.append("cpu pools: " + ", ".join(f"{c.name} {c.nodes} x {c.instance_type}"
                                                for c in plan.cpu_pools)
                     + " are rendered only as Karpenter NodePools (--target karpenter, AWS) "
                     "and GKE node pools (--target karpenter or terraform-gcp, GCP); "
                     "provision them yourself here")
    return dict(sorted(files.items())), notes


def write_files(files: Mapping[str, str], out_dir: Path, *, force: bool = False,
                inputs: Iterable[Path] = ()) -> list[Path]:
    """Write ``files`` (relative name → text) under ``out_dir``, all of them or none; returns
    the paths written, in sorted order.

    Through :func:`ptplan.core.atomic.write_tree`: every name stays under ``out_dir`` (an
    absolute name, a ``..`` or a link on the way out is refused), each file is written to a
    temporary and renamed into place, and a failure part-way leaves the previous files as they
    were. ``out_dir`` itself a symbolic link, a file that is a link, or one of ``inputs`` (the
    plan, the spec) as a target is refused unless ``force``.
    """
    from ptplan.core.atomic import write_tree

    out_dir = Path(out_dir)
    if out_dir.is_symlink() and not force:
        raise InputError(f"-o: {str(out_dir)!r} is a symbolic link; ptplan does not write "
                         "through links: give the real directory, or --force")
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"-o: {str(out_dir)!r} is a file; give a directory to write into")
    names = sorted(files)
    write_tree(out_dir, {rel: files[rel] for rel in names}, force=force, inputs=inputs)
    return [out_dir / rel for rel in names]
