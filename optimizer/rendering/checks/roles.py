"""``render --check`` rule ``roles``: each framework role's Ray placement groups ask for the
custom resource of the pool the plan gave it, and exactly that pool's Ray nodes offer it, one
unit per GPU.

A Ray launch runs through ptplan's pinning launcher (:mod:`ptplan.rendering.pinning`): its
``role=ptplan_pool_<pool>`` word is what every GPU bundle of the role asks for (one unit per
GPU). The plan's phases say where each role belongs: the trainer (and OpenRLHF's critic) on
the pool running ``update``, rollout on the ``rollout`` pool, reference / reward / teacher
models on the ``scoring`` pool. A role is placeable on a node only if the node offers the
resource (Ray's resource-based scheduling: ``ray start --resources``; KubeRay
``rayStartParams.resources``), so the rule checks, per rendered launch (RayJob entrypoint,
decoded through the shells; the SkyPilot primary task; ``launch/*.sh``):

* the role's resource is ``ptplan_pool_<its planned pool>``;
* that resource is offered by the Ray nodes of that pool only (RayJob worker groups by their
  ``ptplan.io/pool`` nodeSelector, SkyPilot tasks by their ``ptplan-pool`` label), by each
  node as many units as it has GPUs (``num-gpus``), so the pool's nodes × units = its planned
  GPUs: every bundle the pool's roles place (one per GPU) finds a unit, and no more.
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

import yaml

from ptplan.planfile.names import aws_tag, gcp_label, k8s_label
from ptplan.planfile.schema import Plan
from ptplan.rendering.archive import unwrap
from ptplan.rendering.deploy import ray_resource
from ptplan.rendering.pinning import BOOT, parse_launch

ROLE_PHASE = {"trainer": "update", "critic": "update", "rollout": "rollout",
              "reference": "scoring", "reward": "scoring", "teacher": "scoring"}
_SKY_RES = re.compile(r"--resources='(\{[^']*\})'")


def _planned(plan: Plan, role: str) -> Any:
    phase = ROLE_PHASE.get(role)
    pools = [p for p in plan.pools if phase in p.phases] or \
        [p for p in plan.pools if "update" in p.phases]
    return pools[0] if pools else None


def _launches(files: dict[str, str],
              entry_words: Any) -> list[tuple[str, list[str], str | None]]:
    """(where, words, the cluster file whose Ray nodes run it; None: any) of every launch."""
    out: list[tuple[str, list[str], str | None]] = []

    def add(where: str, words: list[str], cluster: str | None) -> None:
        words = unwrap(words)  # the archiving wrapper runs the framework's command as "$@"
        if len(words) > 2 and words[0] == "sh" and words[1] == "-c":  # OpenRLHF's sh -c script
            words = shlex.split(words[2])
        if BOOT in words:
            out.append((where, words, cluster))

    text = files.get("kuberay/rayjob.yaml")
    if text:
        for d in yaml.safe_load_all(text):
            if isinstance(d, dict) and d.get("kind") == "RayJob":
                add("RayJob entrypoint", entry_words(d["spec"]["entrypoint"]),
                    "kuberay/rayjob.yaml")
    for rel, body in sorted(files.items()):
        lines = body.splitlines()
        if rel.startswith("launch/") and lines:
            last = shlex.split(lines[-1])
            add(rel, last[1:] if last[:1] == ["exec"] else last, None)
        elif rel.startswith("skypilot/"):
            for t in [d for d in yaml.safe_load_all(body) if isinstance(d, dict)][1:]:
                for line in t.get("run", "").splitlines():
                    if BOOT[:10] in line:
                        add(f"{rel} {t.get('name')}", shlex.split(line), rel)
    return out


Offer = tuple[str, str, str, int, int, int]


def _offers(files: dict[str, str]) -> dict[str, list[Offer]]:
    """resource → (cluster file, where, pool label, nodes, units per node, GPUs per node) of
    every Ray node group that offers it."""
    out: dict[str, list[Offer]] = {}
    text = files.get("kuberay/rayjob.yaml")
    for d in yaml.safe_load_all(text) if text else ():
        if not (isinstance(d, dict) and d.get("kind") == "RayJob"):
            continue
        for g in d["spec"]["rayClusterSpec"]["workerGroupSpecs"]:
            params = g.get("rayStartParams", {})
            pool = g["template"]["spec"].get("nodeSelector", {}).get("ptplan.io/pool", "")
            for res, n in json.loads(params.get("resources", "'{}'").strip("'")).items():
                out.setdefault(res, []).append(("kuberay/rayjob.yaml",
                                                f"worker group {g['groupName']}", pool,
                                                int(g["replicas"]), int(n),
                                                int(params.get("num-gpus", 0))))
    for rel, body in sorted(files.items()):
        if not rel.startswith("skypilot/"):
            continue
        for t in [d for d in yaml.safe_load_all(body) if isinstance(d, dict)][1:]:
            m = _SKY_RES.search(t.get("run", ""))
            if not m:
                continue
            acc = str(t.get("resources", {}).get("accelerators", ":0"))
            pool = t.get("resources", {}).get("labels", {}).get("ptplan-pool", "")
            for res, n in json.loads(m.group(1)).items():
                out.setdefault(res, []).append((rel, f"{rel} task {t.get('name')}", pool,
                                                int(t.get("num_nodes", 1)), int(n),
                                                int(acc.rsplit(":", 1)[-1] or 0)))
    return out


def check_roles(plan: Plan, files: dict[str, str], entry_words: Any, out: list[str]) -> None:
    found: list[str] = []
    _check(plan, files, entry_words, found)
    out.extend(dict.fromkeys(found))  # roles sharing a pool report its nodes once


def _check(plan: Plan, files: dict[str, str], entry_words: Any, out: list[str]) -> None:
    launches = _launches(files, entry_words)
    if not launches:
        return
    offers = _offers(files)
    for where, words, cluster in launches:
        parsed = parse_launch(words)
        if parsed is None:
            out.append(f"roles: {where} has no roles word after the pinning launcher")
            continue
        _, roles = parsed
        for role, res in sorted(roles.items()):
            pool = _planned(plan, role)
            if pool is None:
                out.append(f"roles: {where}: role {role} has no planned pool")
                continue
            want = ray_resource(pool.name)
            if res != want:
                out.append(f"roles: {where}: role {role} asks for {res}, but the plan runs it "
                           f"on pool {pool.name} ({want})")
                continue
            labels = {k8s_label(pool.name), gcp_label(pool.name), aws_tag(pool.name)}
            scope = sorted({o[0] for v in offers.values() for o in v
                            if cluster is None or o[0] == cluster})
            offered = [o for o in offers.get(res, []) if o[0] in scope]
            for c in scope:
                if not any(o[0] == c for o in offered):
                    out.append(f"roles: {where}: no Ray node in {c} offers {res} (role {role}): "
                               "its placement groups never start")
            for _, w, label, _nodes, units, gpus in offered:
                if label not in labels:
                    out.append(f"roles: {w} offers {res} but runs pool {label!r}: role {role} "
                               f"could be placed off its planned pool {pool.name}")
                elif units != gpus or units != pool.gpus_per_node:
                    out.append(f"roles: {w} offers {units} {res} per node for {gpus} GPUs "
                               f"(planned {pool.gpus_per_node}): role {role}'s bundles ask one "
                               "per GPU")
            for c in sorted({o[0] for o in offered}):
                total = sum(n * u for oc, _, label, n, u, _ in offered
                            if oc == c and label in labels)
                if total != pool.nodes * pool.gpus_per_node:
                    out.append(f"roles: pool {pool.name}'s Ray nodes in {c} offer {total} "
                               f"{res}, the plan has {pool.nodes} x {pool.gpus_per_node} GPUs")
