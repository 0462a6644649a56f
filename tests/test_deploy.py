"""Issue 24: a deployment that is admitted, starts, restarts, is torn down, bills as planned and
runs on capacity that can be bought. One regression test per defect of the issue, the
deployment check (``ptplan render --check``) on every example × target, and the entrypoint run
through the real chain of shells.

Upstream behaviour modelled here (cited where the test relies on it):

* KubeRay submitter: ray-project/kuberay ``ray-operator/controllers/ray/common/job.go``
  (``GetK8sJobCommand``: ``if ! ray job status …; then ray job submit … -- <entrypoint> ; fi``)
  run by ``/bin/bash -ce --`` (``rayjob_controller.go``, ``getSubmitterTemplate``); defaults of
  the submitter pod: ``GetDefaultSubmitterContainer`` (requests 500m / 200Mi).
* ``ray job submit``: ray-project/ray ``python/ray/dashboard/modules/job/cli.py``
  (``entrypoint=list2cmdline(entrypoint)``); the job supervisor runs it with ``shell=True``.
* Kueue RayJob pod sets (head, submitter, one per worker group): kubernetes-sigs/kueue
  ``pkg/controller/jobs/rayjob/rayjob_controller.go`` (``submitterJobPodSetName``).
* NVIDIA device plugin default tolerations: NVIDIA/k8s-device-plugin
  ``deployments/helm/nvidia-device-plugin/values.yaml``; the Neuron device plugin:
  aws-neuron/aws-neuron-sdk ``src/k8/k8s-neuron-device-plugin.yml`` (``CriticalAddonsOnly``
  Exists, ``aws.amazon.com/neuron`` Exists NoSchedule); GKE's managed device plugin:
  GoogleCloudPlatform/container-engine-accelerators ``cmd/nvidia_gpu/device-plugin.yaml``
  (``operator: Exists`` for NoSchedule and NoExecute: every such taint).
* veRL 0.9.1 placement groups: ``verl/single_controller/ray/base.py`` (``RayResourcePool``,
  ``ResourcePoolManager.create_resource_pool``); OpenRLHF 0.11.2: ``openrlhf/trainer/ray/
  launcher.py``, ``vllm_engine.py``, ``openrlhf/cli/train_ppo_ray.py`` (read from the pinned
  wheels under ``.frameworks``, never imported).
"""

from __future__ import annotations

import functools
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from ptplan.cli.app import app
from ptplan.core.errors import InputError
from ptplan.planfile.load import load_plan
from ptplan.planfile.schema import Plan
from ptplan.providers.buyability import opt_in, sold
from ptplan.rendering.checks.cluster import check_render, tolerates
from ptplan.rendering.context import build_context
from ptplan.rendering.deploy import restart_budget
from ptplan.rendering.targets import TARGETS, facts_for, render_plan
from ptplan.rendering.transport import ray_entrypoint
from ptplan.spec.project import load_spec

HERE = Path(__file__).resolve().parent
PLANS = HERE / "data" / "plans"
FIXTURES = ("grpo-gcp", "grpo-aws", "sft-gcp", "opd-aws", "opd-aws-mixed", "opd-gcp-mixed")


@functools.cache
def plan_of(name: str) -> Plan:
    return load_plan(PLANS / f"{name}.json")


@functools.cache
def spec_of(name: str) -> Any:
    """The fixture's spec: launches carry the spec's settings (batch, lengths, eval ...)."""
    return load_spec(str(PLANS / f"{name}.spec.yaml"))


@functools.cache
def files_of(name: str, target: str = "all") -> dict[str, str]:
    return render_plan(plan_of(name), target, spec_of(name))[0]


def _docs(text: str) -> list[dict]:
    return [d for d in yaml.safe_load_all(text) if d]


def _job(name: str) -> dict:
    return next(d for d in _docs(files_of(name)["kuberay/rayjob.yaml"]) if d["kind"] == "RayJob")


# ---- the deployment check on every example × target --------------------------------------------

@pytest.mark.parametrize("target", [*TARGETS, "all"])
@pytest.mark.parametrize("name", FIXTURES)
def test_render_check_passes(name: str, target: str) -> None:
    try:
        files = files_of(name, target)
    except InputError as exc:  # a target that does not apply (terraform-aws on GCP, ...)
        assert "\n" not in str(exc)
        return
    assert check_render(plan_of(name), files) == []


def _mutated(name: str, rel: str, old: str, new: str) -> list[str]:
    files = dict(files_of(name))
    assert old in files[rel], (rel, old)
    files[rel] = files[rel].replace(old, new)
    return check_render(plan_of(name), files)


# ---- 2. admitted and started -------------------------------------------------------------------

def test_kueue_quota_covers_the_submitter_pod_set() -> None:
    """Defect: the ClusterQueue's cpu/memory equalled the head's requests, and Kueue adds the
    RayJob submitter pod set: the workload never fit. Now the quota is head + submitter, the
    job is admitted and no quota admits more."""
    for name in FIXTURES:
        cq = next(d for d in _docs(files_of(name)["kueue/queues.yaml"])
                  if d["kind"] == "ClusterQueue")
        cpu = {r["name"]: r["nominalQuota"] for r in cq["spec"]["resourceGroups"][1]["flavors"]
               [0]["resources"]}
        assert cpu == {"cpu": "4500m", "memory": "16584Mi"}
        sub = _job(name)["spec"]["submitterPodTemplate"]["spec"]["containers"][0]
        assert sub["resources"]["requests"] == {"cpu": "500m", "memory": "200Mi"}
    old = _mutated("grpo-aws", "kueue/queues.yaml", '"nominalQuota": "4500m"',
                   '"nominalQuota": "4"')
    assert any("pod set submitter" in v and "no flavor" in v for v in old)
    loose = _mutated("grpo-aws", "kueue/queues.yaml", '"nominalQuota": 8}', '"nominalQuota": 9}')
    assert any("admits more than the job uses" in v for v in loose)


STUB_RAY = """#!{python}
import subprocess, sys
args = sys.argv[1:]
if args[:2] == ["job", "status"]:
    sys.exit(1)
if args[:2] == ["job", "submit"]:
    entry = args[args.index("--") + 1:]
    sys.exit(subprocess.run(subprocess.list2cmdline(entry), shell=True).returncode)
"""
STUB_RECORD = "#!/bin/sh\nprintf '%s\\0' \"$(basename \"$0\")\" \"$@\" > \"$PTPLAN_ARGV\"\n"


def _through_the_shells(entrypoint: str, tmp: Path) -> list[str]:
    """Run ``entrypoint`` as KubeRay's submitter does (bash -ce), with a ``ray`` that joins the
    words as ``ray job submit`` does and runs them with /bin/sh as the job supervisor does;
    ``python3``/``torchrun`` record the argv they receive."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "ray").write_text(STUB_RAY.format(python=sys.executable), encoding="utf-8")
    for tool in ("python3", "torchrun"):
        (bin_dir / tool).write_text(STUB_RECORD, encoding="utf-8")
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    script = ("if ! ray job status --address http://head:8265 job-1 >/dev/null 2>&1 ; then "
              "ray job submit --address http://head:8265 --no-wait --submission-id job-1 -- "
              f"{entrypoint} ; fi")
    out = tmp / "argv"
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "PTPLAN_ARGV": str(out), "HOME": str(tmp)}
    res = subprocess.run(["/bin/bash", "-ce", "--", script], env=env, capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    return out.read_text(encoding="utf-8").split("\0")[:-1]


@pytest.mark.parametrize("name", FIXTURES)
def test_entrypoint_arrives_intact_through_the_shells(name: str, tmp_path: Path) -> None:
    """Defect: the quotes around ``${oc.env:…}`` were lost between KubeRay's bash and Ray's
    /bin/sh ("Bad substitution"). Every launch word now reaches the process unchanged."""
    plan = plan_of(name)
    words = build_context(plan, facts_for(plan, spec_of(name)))["launch"]["words"]
    assert any("${oc.env:" in w for w in words)
    assert _through_the_shells(_job(name)["spec"]["entrypoint"], tmp_path) == words


@pytest.mark.parametrize("words", [
    ["python3", "-m", "m", "x=${oc.env:A}", "l=['a','b']", "q=$(id)`id`;|&<>*?~#!\\", "e="],
    ["python3", "a b", 'c"d', "tab\there", "", "line\nbreak", "${HOME}"],  # base64 path
])
def test_any_words_arrive_intact(words: list[str], tmp_path: Path) -> None:
    assert _through_the_shells(ray_entrypoint(words), tmp_path) == words


def test_ray_custom_resources_pin_roles_to_pools() -> None:
    """Defect: no custom resources, so veRL's placement groups could use any pool's GPUs. Each
    worker group starts Ray with ``ptplan_pool_<pool>`` = its GPUs per node (KubeRay passes
    rayStartParams to ``ray start --resources=…`` through bash: the value is the sample's
    quoted JSON); pools have distinct keys, the head has none."""
    for name in FIXTURES:
        job = _job(name)
        seen: dict[str, str] = {}
        for w in job["spec"]["rayClusterSpec"]["workerGroupSpecs"]:
            value = shlex.split(w["rayStartParams"]["resources"])[0]
            res = json.loads(value)
            (key, n), = res.items()
            assert n == int(w["rayStartParams"]["num-gpus"])
            pool = w["template"]["spec"]["nodeSelector"]["ptplan.io/pool"]
            assert seen.setdefault(pool, key) == key and key.startswith("ptplan_pool_")
        assert len(set(seen.values())) == len(seen)
        assert "resources" not in job["spec"]["rayClusterSpec"]["headGroupSpec"][
            "rayStartParams"]


# ---- 3. restartable and bounded ------------------------------------------------------------------

def test_restarts_deadlines_and_teardown() -> None:
    """Defects: backoffLimit 0 although the plan prices spot restarts; no deadlines; a 600 s
    TTL and 10 min consolidation billing the fleet after the job; GKE pools at min = max."""
    for name in FIXTURES:
        plan = plan_of(name)
        spec = _job(name)["spec"]
        limit, expected = restart_budget(plan)
        assert spec["backoffLimit"] == limit >= max(1, expected)
        assert spec["ttlSecondsAfterFinished"] == 0 and spec["shutdownAfterJobFinishes"]
        assert spec["preRunningDeadlineSeconds"] == 3600
        assert spec["activeDeadlineSeconds"] >= plan.makespan_hours * 3600
        files = files_of(name)
        if "karpenter/nodepools.yaml" in files:
            for d in _docs(files["karpenter/nodepools.yaml"]):
                if d["kind"] == "NodePool":
                    assert d["spec"]["disruption"]["consolidateAfter"] == "30s"
        if "terraform-gcp/node_pools.tf" in files:
            assert "total_min_node_count = 0" in files["terraform-gcp/node_pools.tf"]
    # more priced interruptions, more retries
    assert restart_budget(plan_of("opd-aws-mixed"))[0] >= 1


# ---- 4. pinned and tagged ------------------------------------------------------------------------

def test_device_plugin_tolerates_every_gpu_taint() -> None:
    """Defect: spot NodePools carried ``ptplan.io/spot``, which the NVIDIA device plugin does not
    tolerate: the node never reported ``nvidia.com/gpu``. The check catches it."""
    nvidia = [{"key": "CriticalAddonsOnly", "operator": "Exists"},
              {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert tolerates(nvidia, {"key": "nvidia.com/gpu", "effect": "NoSchedule"})
    assert not tolerates(nvidia, {"key": "ptplan.io/spot", "value": "true",
                                  "effect": "NoSchedule"})
    bad = _mutated("grpo-aws", "karpenter/nodepools.yaml",
                   'taints: [{"effect": "NoSchedule", "key": "nvidia.com/gpu"}]',
                   'taints: [{"effect": "NoSchedule", "key": "nvidia.com/gpu"}, '
                   '{"effect": "NoSchedule", "key": "ptplan.io/spot", "value": "true"}]')
    assert any(v.startswith("taints:") and "ptplan.io/spot" in v for v in bad)


def test_neuron_and_gke_device_plugins_tolerate_their_taints() -> None:
    """Review against upstream: a Trainium pool is served by the Neuron device plugin, which
    tolerates ``aws.amazon.com/neuron`` but not ``nvidia.com/gpu``; a GKE pool by GKE's managed
    plugin, which tolerates every NoSchedule/NoExecute taint (GKE's own ``nvidia.com/gpu=present``
    included), so an extra GKE taint does not hide GPUs (the pods rule still requires the
    workers to tolerate it)."""
    assert check_render(plan_of("opd-aws"), files_of("opd-aws")) == []
    bad = _mutated("opd-aws", "karpenter/nodepools.yaml",
                   'taints: [{"effect": "NoSchedule", "key": "aws.amazon.com/neuron"}]',
                   'taints: [{"effect": "NoSchedule", "key": "nvidia.com/gpu"}]')
    assert any(v.startswith("taints:") and "aws.amazon.com/neuron device plugin" in v
               for v in bad), bad
    rel = "terraform-gcp/node_pools.tf"
    extra = _mutated("grpo-gcp", rel, "    gvnic {",
                     '    taint {\n      key    = "ptplan.io/spot"\n      value  = "true"\n'
                     '      effect = "NO_SCHEDULE"\n    }\n\n    gvnic {')
    assert not any(v.startswith("taints:") for v in extra), extra
    assert any(v.startswith("pools:") for v in extra), extra  # workers do not tolerate it
    from ptplan.rendering.checks.cluster import DEVICE_PLUGIN_TOLERATIONS

    gke = DEVICE_PLUGIN_TOLERATIONS["gke"]
    assert tolerates(gke, {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"})
    assert tolerates(gke, {"key": "ptplan.io/spot", "value": "true", "effect": "NoExecute"})
    neuron = DEVICE_PLUGIN_TOLERATIONS["aws.amazon.com/neuron"]
    assert not tolerates(neuron, {"key": "nvidia.com/gpu", "effect": "NoSchedule"})


def test_boot_disks_are_priced_and_rendered_as_planned() -> None:
    """Defect: 500/100 GB boot disks were rendered but not priced. Every pool's disks are in the
    plan (nodes x GB x $/GB-month / 730 for the held hours, in the total) and every target writes
    that size on the priced volume type; ``--check`` catches a different size or type."""
    for name in FIXTURES:
        plan = plan_of(name)
        assert plan.schema_version >= 4  # boot disks priced from schema 4
        disks = 0.0
        for pool in plan.pools:
            assert pool.boot_disk_gb == 200
            assert pool.disk_tier == ("ebs_gp3" if plan.provider == "aws" else "pd_balanced")
            assert pool.disk_usd_per_hour == pytest.approx(
                pool.nodes * 200 * pool.disk_usd_per_gb_month / 730.0)
            disks += float(pool.disk_cost_usd)
        assert float(plan.disk_cost_usd) == pytest.approx(disks, abs=0.005 * len(plan.pools))
        files = files_of(name)
        for rel, text in files.items():
            if rel == "karpenter/nodepools.yaml":
                for d in _docs(text):
                    if d["kind"] == "EC2NodeClass":
                        ebs = d["spec"]["blockDeviceMappings"][0]["ebs"]
                        assert (ebs["volumeSize"], ebs["volumeType"]) == ("200Gi", "gp3")
            elif rel.endswith("node_pools.tf"):
                assert text.count("disk_size_gb    = 200") == text.count("node_config {")
            elif rel.startswith("skypilot/"):
                for t in _docs(text)[1:]:
                    assert (t["resources"]["disk_size"], t["resources"]["disk_tier"]) == \
                        (200, "medium")
    small = _mutated("grpo-aws", "karpenter/nodepools.yaml", '"volumeSize": "200Gi"',
                     '"volumeSize": "100Gi"')
    assert any(v.startswith("disks:") and "100 GB" in v for v in small), small
    io2 = _mutated("grpo-aws", "karpenter/nodepools.yaml", '"volumeType": "gp3"',
                   '"volumeType": "io2"')
    assert any(v.startswith("disks:") and "io2" in v for v in io2), io2
    ssd = _mutated("grpo-gcp", "terraform-gcp/node_pools.tf", '"pd-balanced"', '"pd-ssd"')
    assert any(v.startswith("disks:") and "pd-ssd" in v for v in ssd), ssd
    sky = _mutated("sft-gcp", "skypilot/sft-8b-chat.yaml", "disk_size: 200", "disk_size: 500")
    assert any(v.startswith("disks:") and "500 GB" in v for v in sky), sky
    # a plan made before disks were priced: rendered at the default size, with a note
    old = plan_of("sft-gcp").model_copy(update={"schema_version": 3})
    ctx = build_context(old, facts_for(old))
    assert {g["boot_disk_gb"] for g in ctx["groups"]} == {200}
    assert any("does not price them" in n for n in ctx["deploy_notes"])


def test_frameworks_ask_for_no_pool_resource_so_the_launch_pins_them() -> None:
    """veRL 0.9.1 builds every Ray resource pool without the one extra bundle key it supports
    (``RayResourcePool(accelerator_type=...)``, read from the wheel's source), and OpenRLHF
    0.11.2 asks for ``{"GPU": 1, "CPU": 1}`` bundles: neither requests ``ptplan_pool_*`` and no
    option reaches them, so every Ray launch goes through ptplan's pinning launcher
    (tests/test_raypin.py runs it against both frameworks' code on a Ray cluster), and the
    launch's notes name each role's resource."""
    import ast

    from test_launch_frameworks import package_dir

    base = (package_dir("verl") / "single_controller" / "ray" / "base.py").read_text(
        encoding="utf-8")
    tree = ast.parse(base)
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    init = next(f for f in classes["RayResourcePool"].body
                if isinstance(f, ast.FunctionDef) and f.name == "__init__")
    assert "accelerator_type" in [a.arg for a in init.args.args]
    assert "bundle[self.accelerator_type] = 1e-4" in base
    create = next(f for f in classes["ResourcePoolManager"].body
                  if isinstance(f, ast.FunctionDef) and f.name == "create_resource_pool")
    calls = [c for c in ast.walk(create) if isinstance(c, ast.Call)
             and getattr(c.func, "id", "") == "RayResourcePool"]
    assert calls and all("accelerator_type" not in {k.arg for k in c.keywords} for c in calls)
    orl = package_dir("openrlhf")
    for rel in ("trainer/ray/launcher.py", "trainer/ray/vllm_engine.py",
                "cli/train_ppo_ray.py"):
        assert '{"GPU": 1, "CPU": 1}' in (orl / rel).read_text(encoding="utf-8"), rel
    launch = build_context(plan_of("grpo-aws"), facts_for(plan_of("grpo-aws"),
                                                            spec_of("grpo-aws")))["launch"]
    assert any(n.startswith("ray pools:") and "rollout: ptplan_pool_rollout, trainer: "
               "ptplan_pool_update" in n for n in launch["notes"]), launch["notes"]
    assert launch["words"][0] == "python3" and launch["words"][1] == "-c"


GCP_ROLLOUT_GPUS = next(p.gpus_per_node for p in plan_of("grpo-gcp").pools
                        if p.name == "rollout")
"""GPUs per node of grpo-gcp's rollout pool: the units of ``ptplan_pool_rollout`` each of its
nodes advertises (8 on a3-edgegpu-8g-nolssd since issue #39; 2 on a3-highgpu-2g before)."""


@pytest.mark.parametrize(("name", "rel", "old", "new", "expect"), [
    # the trainer asks for the rollout pool's resource (in the launch file: the RayJob's
    # entrypoint travels base64 since the launch runs inside the archiving wrapper)
    ("grpo-aws", "launch/verl.sh", "rollout=ptplan_pool_rollout,trainer=ptplan_pool_update",
     "rollout=ptplan_pool_rollout,trainer=ptplan_pool_rollout", "role trainer asks for "
     "ptplan_pool_rollout, but the plan runs it on pool update"),
    # a spot scoring group advertises the trainer's resource
    ("grpo-aws", "kuberay/rayjob.yaml", '{\\"ptplan_pool_scoring\\": 8}',
     '{\\"ptplan_pool_update\\": 8}', "offers ptplan_pool_update but runs pool 'scoring'"),
    # one unit per node instead of one per GPU
    ("grpo-gcp", "kuberay/rayjob.yaml", '{\\"ptplan_pool_update\\": 8}',
     '{\\"ptplan_pool_update\\": 1}', "offers 1 ptplan_pool_update per node for 8 GPUs"),
    # SkyPilot: the primary task's head advertises another pool's resource
    ("grpo-gcp", "skypilot/grpo-7b-math.yaml",
     f'{{\\"ptplan_pool_rollout\\": {GCP_ROLLOUT_GPUS}}}',
     f'{{\\"ptplan_pool_other\\": {GCP_ROLLOUT_GPUS}}}',
     "in skypilot/grpo-7b-math.yaml offers ptplan_pool_rollout"),
])
def test_render_check_catches_roles_off_their_pools(name: str, rel: str, old: str, new: str,
                                                     expect: str) -> None:
    out = _mutated(name, rel, old, new)
    assert any(v.startswith("roles:") and expect in v for v in out), out


def test_render_check_reads_openrlhf_launches() -> None:
    """OpenRLHF's launch is ``sh -c '<script>'`` (its RayJob entrypoint travels base64): the
    rule finds the roles word inside the script, in the RayJob, the launch file and the SkyPilot
    primary task, and catches a reference group asking for the update pool."""
    from ptplan.rendering.checks.roles import _launches

    plan = plan_of("grpo-aws")
    files = render_plan(plan, "all", spec_of("grpo-aws"), framework="openrlhf==0.11")[0]
    assert check_render(plan, files) == []
    from ptplan.rendering.checks.paths import entry_words as _entry_words

    assert [w for w, _, _ in _launches(files, _entry_words)] == [
        "RayJob entrypoint", "launch/openrlhf.sh", "skypilot/grpo-7b-math.yaml update-on-demand"]
    files["launch/openrlhf.sh"] = files["launch/openrlhf.sh"].replace(
        "reference=ptplan_pool_scoring", "reference=ptplan_pool_update")
    assert any(v.startswith("roles: launch/openrlhf.sh: role reference asks for "
                            "ptplan_pool_update") for v in check_render(plan, files))


def test_every_pool_in_its_planned_zone() -> None:
    """Defect: update pools were not pinned to the plan's zone (weight sync priced same-zone).
    Every node pool names one zone: the allocation's, or the plan's for region-level rows."""
    for name in FIXTURES:
        plan = plan_of(name)
        zones = {a.zone for p in plan.pools for a in p.allocations if a.zone} | {plan.zone}
        files = files_of(name)
        if "karpenter/nodepools.yaml" in files:
            for d in _docs(files["karpenter/nodepools.yaml"]):
                if d["kind"] == "NodePool":
                    req = {r["key"]: r["values"] for r in
                           d["spec"]["template"]["spec"]["requirements"]}
                    assert len(req["topology.k8s.aws/zone-id"]) == 1
                    assert req["topology.k8s.aws/zone-id"][0] in zones
    unpinned = _mutated("grpo-aws", "karpenter/nodepools.yaml", '"use1-az1"', '"use1-az2"')
    assert any("does not have" in v for v in unpinned)


def test_one_node_class_per_pool_with_its_cost_tags() -> None:
    """Defect: one EC2NodeClass for all pools tagged every instance ``ptplan-pool=all``."""
    docs = _docs(files_of("opd-aws-mixed")["karpenter/nodepools.yaml"])
    classes = {d["metadata"]["name"]: d for d in docs if d["kind"] == "EC2NodeClass"}
    pools = [d for d in docs if d["kind"] == "NodePool"]
    assert len(classes) == len(pools)
    for np in pools:
        cls = classes[np["spec"]["template"]["spec"]["nodeClassRef"]["name"]]
        assert cls["spec"]["tags"]["ptplan-pool"] == \
            np["spec"]["template"]["metadata"]["labels"]["ptplan.io/pool"]
        assert cls["spec"]["blockDeviceMappings"][0]["ebs"]["volumeSize"] == "200Gi"
    shared = _mutated("opd-aws-mixed", "karpenter/nodepools.yaml", '"ptplan-pool": "scoring"',
                      '"ptplan-pool": "all"')
    assert any(v.startswith("tags:") and "'all'" in v for v in shared)


def test_multi_node_aws_trainers_request_efa() -> None:
    """A multi-node trainer is priced at the scale-out bandwidth only EFA gives on AWS."""
    import copy

    plan = plan_of("grpo-aws")
    d = plan.model_dump(mode="json")
    upd = next(p for p in d["pools"] if p["name"] == "update")
    upd["nodes"] = 2
    upd["allocations"][0]["nodes"] = 2
    two = Plan.model_validate(copy.deepcopy(d))
    ctx = build_context(two, facts_for(plan))
    g = next(g for g in ctx["groups"] if g["pool"] == "update")
    assert g["pod_resources"]["vpc.amazonaws.com/efa"] == 8  # p6-b200.48xlarge
    assert "vpc.amazonaws.com/efa" in ctx["resources"]
    one = build_context(plan, facts_for(plan))
    assert all("vpc.amazonaws.com/efa" not in g["pod_resources"] for g in one["groups"])


def test_hot_checkpoints_stay_hot_until_they_expire() -> None:
    """Defect: the newest ``keep_hot`` checkpoints moved to a cold class after a day although
    the plan prices them hot to the end and retention_days after."""
    for name in FIXTURES:
        files = files_of(name)
        rel = "lifecycle/s3-lifecycle.json" if plan_of(name).provider == "aws" else \
            "lifecycle/gcs-lifecycle.json"
        doc = json.loads(files[rel])
        # only the day-0 move to the hot tier the plan priced, then deletion
        if rel.startswith("lifecycle/s3"):
            rule = next(r for r in doc["Rules"] if r["ID"] == "checkpoints")
            assert all(t["Days"] == 0 for t in rule.get("Transitions", []))
        else:
            ckpt = [r for r in doc["lifecycle"]["rule"]
                    if any(p.endswith("/checkpoints/") for p in r["condition"]["matchesPrefix"])]
            assert all(r["action"]["type"] == "Delete" or r["condition"]["age"] == 0
                       for r in ckpt)


def test_check_catches_unlifecycled_paths_and_inactive_tags() -> None:
    moved = _mutated("grpo-aws", "kuberay/rayjob.yaml", '"subPath": "grpo-7b-math"',
                     '"subPath": "elsewhere"')
    assert any(v.startswith("paths:") and "elsewhere/checkpoints/" in v for v in moved)
    inactive = _mutated("grpo-aws", "terraform-aws/cost_tags.tf", '"ptplan-phase"', '"x"')
    assert any("ptplan-phase is never activated" in v for v in inactive)


# ---- 5. Terraform that stands on its own -------------------------------------------------------

def test_terraform_aws_has_no_bare_asgs_and_pins_providers() -> None:
    """Defects: ASGs launched bare instances that joined no cluster and were billed beside
    Karpenter's; providers pinned ``>= 5.0``. Karpenter alone provides nodes now."""
    for name in ("grpo-aws", "opd-aws", "opd-aws-mixed"):
        files = files_of(name)
        tf = "".join(t for r, t in files.items() if r.startswith("terraform-aws/"))
        assert "aws_autoscaling_group" not in tf and "aws_launch_template" not in tf
        assert 'version = "~> 6.0"' in tf and 'required_version = ">= 1.5"' in tf
        assert "aws_ce_cost_allocation_tag" in tf and "availability-zone-id" in tf
    gcp = files_of("grpo-gcp")["terraform-gcp/main.tf"]
    assert 'version = "~> 7.0"' in gcp


# ---- 1. buyable capacity -----------------------------------------------------------------------

def test_consumption_options_per_type() -> None:
    assert not sold("gcp", "a3-highgpu-2g", "us-central1", "on_demand")
    assert sold("gcp", "a3-highgpu-2g", "us-central1", "spot")
    assert sold("gcp", "a3-highgpu-8g", "us-central1", "on_demand")
    assert sold("aws", "p5.48xlarge", "us-east-1", "spot")
    assert sold("lab", "anything", "r", "on_demand")  # nothing recorded: sold
    assert opt_in("aws", "use1-atl2-az1") and opt_in("aws", "usw2-lax1-az1")
    assert opt_in("aws", "use1-az1") is None and opt_in("gcp", "us-central1-a") is None


@pytest.mark.parametrize("name", FIXTURES)
def test_plans_use_buyable_capacity_only(name: str) -> None:
    """Defects: GCP plans put the update (and SFT) pool on ``a3-highgpu-2g`` on demand; an AWS
    plan put a spot pool in the Local Zone ``use1-atl2-az1``."""
    plan = plan_of(name)
    for p in plan.pools:
        for a in p.allocations:
            assert sold(a.provider, a.instance_type, a.region, a.capacity_type), a
            assert opt_in(a.provider, a.zone) is None, a


def test_planner_filters_unbuyable_offers_and_opt_in_zones() -> None:
    from ptplan.planner.candidates import filter_offers
    from ptplan.policies.model import default_policy, parse_policy
    from ptplan.providers.registry import load_catalog
    from ptplan.spec.project import load_spec

    spec = load_spec(str(PLANS / "grpo-aws.spec.yaml"))
    cat = load_catalog("embedded")
    raw = [o for o in cat.offers if o.instance_type == "a3-highgpu-2g"
           and o.capacity_type == "on_demand"]
    assert raw, "the catalog has the price; the provider does not sell it"
    kept = filter_offers(spec.placement, cat, default_policy())
    assert not any(o.instance_type == "a3-highgpu-2g" and o.capacity_type == "on_demand"
                   for o in kept.offers)
    assert not any(opt_in(o.provider, o.zone) for o in kept.offers)
    assert kept.removed["opt-in zone (policy allow_opt_in_zones: false)"] > 0
    allowed = parse_policy("name: lz\nextends: default\nallow_opt_in_zones: true\n",
                           base_dir=Path("policies"))
    lz = filter_offers(spec.placement, cat, allowed)
    assert any(o.zone == "use1-atl2-az1" for o in lz.offers)


def test_allow_opt_in_zones_is_validated() -> None:
    from ptplan.policies.model import parse_policy

    with pytest.raises(InputError):
        parse_policy("name: x\nallow_opt_in_zones: maybe\n")


# ---- the CLI -----------------------------------------------------------------------------------

def test_cli_render_check(tmp_path: Path) -> None:
    runner = CliRunner()
    res = runner.invoke(app, ["render", str(PLANS / "opd-aws-mixed.json"), "--target", "all",
                              "--check", "-o", str(tmp_path / "ok")])
    assert res.exit_code == 0, res.output
    assert "deploy as planned" in res.output


@pytest.mark.skipif(os.name != "posix", reason="POSIX shells")
def test_bash_and_sh_exist() -> None:
    assert Path("/bin/bash").exists() and Path("/bin/sh").exists()
