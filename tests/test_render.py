"""``ptplan render``: schema validity, golden files, determinism, injection, CLI errors.

Fixtures: real plans in ``tests/data/plans`` (see its README), re-verified here. Golden files in
``tests/golden/<fixture>/``; regenerate with ``PTPLAN_UPDATE_GOLDEN=1 python -m pytest
tests/test_render.py`` and review the diff. Kubernetes objects are validated against the CRD
schemas in ``tests/data/crds`` (strict: unknown fields rejected), Terraform is parsed with
python-hcl2, the S3 lifecycle with botocore's parameter validation (plus the enums botocore
does not check), SkyPilot tasks against SkyPilot's own schema when ``skypilot`` is importable
(it is ~460 MB, so not a test extra) and otherwise against the documented key set.
"""

from __future__ import annotations

import copy
import difflib
import functools
import json
import os
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from ptplan.cli.app import app
from ptplan.planfile.load import load_plan
from ptplan.planfile.names import dns_name, short_hash
from ptplan.planfile.schema import SCHEMA_VERSION, Plan
from ptplan.planfile.verify import verify_plan
from ptplan.rendering.targets import (
    TARGETS,
    build_context,
    facts_for,
    k8s_label,
    lifecycle_rules,
    render_plan,
)
from ptplan.spec.project import load_spec

HERE = Path(__file__).resolve().parent
PLANS = HERE / "data" / "plans"
CRDS = HERE / "data" / "crds"
GOLDEN = HERE / "golden"
FIXTURES = ("grpo-gcp", "grpo-aws", "sft-gcp", "opd-aws", "opd-aws-mixed", "opd-gcp-mixed")
UPDATE = os.environ.get("PTPLAN_UPDATE_GOLDEN") == "1"
K8S_LABEL = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
GCP_LABEL = re.compile(r"^[a-z0-9_-]{0,63}$")


@functools.cache
def plan_of(name: str) -> Plan:
    return load_plan(PLANS / f"{name}.json")


@functools.cache
def spec_of(name: str) -> Any:
    return load_spec(str(PLANS / f"{name}.spec.yaml"))


@functools.cache
def rendered(name: str) -> tuple[tuple[str, str], ...]:
    files, _ = render_plan(plan_of(name), "all", spec_of(name))
    return tuple(files.items())


def _yaml_docs(text: str) -> list[Any]:
    return [d for d in yaml.load_all(text, Loader=yaml.CSafeLoader) if d is not None]


# ---- fixtures are real, verified plans --------------------------------------------------------

@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_plans_verify(name: str) -> None:
    assert verify_plan(plan_of(name)) == []


# ---- golden files and determinism -------------------------------------------------------------

@pytest.mark.parametrize("name", FIXTURES)
def test_golden(name: str) -> None:
    files = dict(rendered(name))
    root = GOLDEN / name
    if UPDATE:
        for old in sorted(root.rglob("*")) if root.exists() else []:
            if old.is_file() and old.relative_to(root).as_posix() not in files:
                old.unlink()
        for rel, text in files.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text, encoding="utf-8", newline="\n")
    expected = {p.relative_to(root).as_posix(): p.read_text(encoding="utf-8")
                for p in sorted(root.rglob("*")) if p.is_file()}
    assert sorted(files) == sorted(expected), "file list differs (PTPLAN_UPDATE_GOLDEN=1 " \
        "regenerates)"
    for rel, text in files.items():
        if text != expected[rel]:
            diff = "".join(difflib.unified_diff(expected[rel].splitlines(True),
                                                text.splitlines(True), f"golden/{rel}",
                                                f"rendered/{rel}"))
            pytest.fail(f"{name}/{rel} differs from its golden file (PTPLAN_UPDATE_GOLDEN=1 "
                        f"regenerates):\n{diff}")


def test_same_plan_same_bytes(tmp_path: Path) -> None:
    name = "opd-aws-mixed"
    again, _ = render_plan(load_plan(PLANS / f"{name}.json"), "all",
                           load_spec(str(PLANS / f"{name}.spec.yaml")))
    assert again == dict(rendered(name))
    runner = CliRunner()
    outs = []
    for d in ("a", "b"):
        res = runner.invoke(app, ["render", str(PLANS / f"{name}.json"), "--target", "all",
                                  "--spec", str(PLANS / f"{name}.spec.yaml"), "-o",
                                  str(tmp_path / d)])
        assert res.exit_code == 0, res.output
        outs.append({p.relative_to(tmp_path / d).as_posix(): p.read_bytes()
                     for p in sorted((tmp_path / d).rglob("*")) if p.is_file()})
    assert outs[0] == outs[1] and len(outs[0]) == len(again)


# ---- Kubernetes objects against their CRD schemas ---------------------------------------------

def _strict(schema: Any) -> Any:
    """Reject unknown fields (the API server would prune them silently) and accept
    ``int-or-string`` values as the server does."""
    if isinstance(schema, dict):
        out = {k: _strict(v) for k, v in schema.items()}
        if "properties" in out and not out.get("x-kubernetes-preserve-unknown-fields"):
            out.setdefault("additionalProperties", False)
        if out.get("x-kubernetes-int-or-string"):
            out.pop("type", None)
        return out
    if isinstance(schema, list):
        return [_strict(v) for v in schema]
    return schema


@functools.cache
def crd_schemas() -> dict[tuple[str, str], Any]:
    out = {}
    for path in sorted(CRDS.glob("*.yaml")):
        crd = yaml.load(path.read_text(encoding="utf-8"), Loader=yaml.CSafeLoader)
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        for v in crd["spec"]["versions"]:
            out[(f"{group}/{v['name']}", kind)] = _strict(v["schema"]["openAPIV3Schema"])
    return out


def _k8s_objects() -> list[tuple[str, dict[str, Any]]]:
    objs = []
    for name in FIXTURES:
        for rel, text in rendered(name):
            if rel.endswith(".yaml") and not rel.startswith("skypilot/"):
                objs += [(f"{name}/{rel}", d) for d in _yaml_docs(text)]
    return objs


def test_kubernetes_objects_match_crds() -> None:
    import jsonschema

    schemas = crd_schemas()
    kinds = set()
    objs = _k8s_objects()
    for where, obj in objs:
        key = (obj["apiVersion"], obj["kind"])
        assert key in schemas, f"{where}: no CRD for {key}"
        errors = sorted(jsonschema.Draft7Validator(schemas[key]).iter_errors(obj), key=str)
        assert not errors, f"{where} {obj['kind']}: {errors[0].message} at " \
            f"{list(errors[0].absolute_path)}"
        kinds.add(obj["kind"])
        for k, v in obj["metadata"].get("labels", {}).items():
            assert K8S_LABEL.match(v) and len(v) <= 63, f"{where}: label {k}={v!r}"
    assert kinds == {"RayJob", "NodePool", "EC2NodeClass", "ResourceFlavor", "ClusterQueue",
                     "LocalQueue"}


def test_crd_check_catches_a_typo() -> None:
    import jsonschema

    where, obj = next((w, o) for w, o in _k8s_objects() if o["kind"] == "NodePool")
    bad = copy.deepcopy(obj)
    bad["spec"]["disruption"]["consolidationPolicy"] = "Sometimes"
    bad["spec"]["template"]["spec"]["requirement"] = []
    assert len(list(jsonschema.Draft7Validator(
        crd_schemas()[("karpenter.sh/v1", "NodePool")]).iter_errors(bad))) >= 2, where


# ---- content: pools → groups, capacity types, launch arguments --------------------------------

def test_rayjob_groups_follow_pools_and_capacity_types() -> None:
    plan = plan_of("opd-gcp-mixed")
    job = _yaml_docs(dict(rendered("opd-gcp-mixed"))["kuberay/rayjob.yaml"])[0]
    groups = {g["groupName"]: g for g in job["spec"]["rayClusterSpec"]["workerGroupSpecs"]}
    expected = {}
    for pool in plan.pools:
        cells = {(a.capacity_type, a.instance_type) for a in pool.allocations}
        for ct, it in cells:
            n = sum(a.nodes for a in pool.allocations
                    if (a.capacity_type, a.instance_type) == (ct, it))
            split = len({c for c in cells if c[0] == ct}) > 1
            name = f"{pool.name}-{ct.replace('_', '-')}" + (f"-{it}" if split else "")
            expected[name] = (n, pool.gpus_per_node, ct)
    assert set(groups) == set(expected)
    for name, (nodes, gpus, ct) in expected.items():
        g = groups[name]
        assert g["replicas"] == g["minReplicas"] == g["maxReplicas"] == nodes
        pod = g["template"]["spec"]
        assert pod["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": gpus}
        assert pod["nodeSelector"]["ptplan.io/capacity-type"] == ct.replace("_", "-")
        # only the accelerator taint, tolerated by the device plugin (issue 24)
        assert [t["key"] for t in pod["tolerations"]] == ["nvidia.com/gpu"]
        assert g["template"]["metadata"]["labels"]["ptplan-capacity-type"] == \
            ct.replace("_", "-")
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
    assert job["spec"]["shutdownAfterJobFinishes"] is True


def test_launch_arguments_match_pools() -> None:
    plan = plan_of("grpo-gcp")
    from ptplan.rendering.checks.paths import entry_words as _entry_words

    words = _entry_words(_yaml_docs(dict(rendered("grpo-gcp"))["kuberay/rayjob.yaml"])[0]
                         ["spec"]["entrypoint"])
    args = dict(w.split("=", 1) for w in words if "=" in w and not w.startswith("-"))
    pools = {p.name: p for p in plan.pools}
    assert args["trainer.nnodes"] == str(pools["update"].nodes)
    assert args["trainer.n_gpus_per_node"] == str(pools["update"].gpus_per_node)
    assert args["actor_rollout_ref.rollout.nnodes"] == str(pools["rollout"].nodes)
    assert args["actor_rollout_ref.hybrid_engine"] == "False"
    rollout = next(p for p in plan.phases if p.name == "rollout")
    # the engine the plan priced (docs/render.md, rollout_tp): its parallel_layout.tp, at least
    # replica_gpus (the memory minimum), tensor-parallel within a node
    engine = max(rollout.replica_gpus,
                 rollout.parallel_layout.tp if rollout.parallel_layout else 1)
    assert args["actor_rollout_ref.rollout.tensor_model_parallel_size"] == \
        str(min(engine, pools["rollout"].gpus_per_node))
    assert args["trainer.save_freq"] == str(spec_of("grpo-gcp").checkpoints.every_steps)
    assert args["trainer.total_training_steps"] == str(plan.steps)
    orl = render_plan(plan, "kuberay", spec_of("grpo-gcp"),
                      framework="openrlhf==0.11")[0]["launch/openrlhf.sh"]
    engines = pools["rollout"].nodes * pools["rollout"].gpus_per_node // engine
    assert f"--vllm.num_engines={engines}" in orl
    assert f"--actor.num_gpus_per_node={pools['update'].gpus_per_node}" in orl


def test_karpenter_nodepools_per_capacity_type() -> None:
    docs = _yaml_docs(dict(rendered("opd-aws-mixed"))["karpenter/nodepools.yaml"])
    pools = [d for d in docs if d["kind"] == "NodePool"]
    plan = plan_of("opd-aws-mixed")
    assert len(pools) == sum(len({a.capacity_type for a in p.allocations}) for p in plan.pools)
    for np in pools:
        req = {r["key"]: r["values"] for r in np["spec"]["template"]["spec"]["requirements"]}
        ct = req["karpenter.sh/capacity-type"][0]
        assert ct in ("spot", "on-demand")
        taints = {t["key"] for t in np["spec"]["template"]["spec"]["taints"]}
        # only the accelerator taint: the device plugins tolerate it (issue 24: a custom
        # spot taint kept the NVIDIA device plugin off the node)
        assert taints in ({"nvidia.com/gpu"}, {"aws.amazon.com/neuron"})
        assert len(req["node.kubernetes.io/instance-type"]) == 1
        assert len(req["topology.k8s.aws/zone-id"]) == 1
        nodes = int(np["spec"]["limits"]["nodes"])
        res = next(k for k in np["spec"]["limits"] if k != "nodes")
        assert int(np["spec"]["limits"][res]) % nodes == 0
    # Trainium pools ask for Neuron devices, not NVIDIA GPUs
    assert any("aws.amazon.com/neuron" in np["spec"]["limits"] for np in pools)


def test_kueue_quotas_equal_plan_accelerators() -> None:
    for name in FIXTURES:
        plan = plan_of(name)
        docs = _yaml_docs(dict(rendered(name))["kueue/queues.yaml"])
        cq = next(d for d in docs if d["kind"] == "ClusterQueue")
        total = sum(int(r["nominalQuota"]) for f in cq["spec"]["resourceGroups"][0]["flavors"]
                    for r in f["resources"])
        assert total == sum(p.nodes * p.gpus_per_node for p in plan.pools), name


# ---- Terraform ----------------------------------------------------------------------------------

def _hcl(text: str) -> dict[str, Any]:
    import hcl2
    from hcl2 import SerializationOptions

    return hcl2.loads(text, serialization_options=SerializationOptions(
        strip_string_quotes=True, explicit_blocks=False))


def test_terraform_parses_and_sizes_match() -> None:
    n_tf = 0
    for name in FIXTURES:
        plan = plan_of(name)
        files = dict(rendered(name))
        for rel, text in files.items():
            if rel.endswith(".tf"):
                _hcl(text)
                n_tf += 1
        if plan.provider == "aws":
            # Karpenter alone provides nodes (issue 24: bare ASGs joined no cluster and were
            # billed beside Karpenter's nodes); Terraform activates the cost tags
            assert not any(r.startswith("terraform-aws/asg") for r in files)
            tags = _hcl(files["terraform-aws/cost_tags.tf"])["resource"]
            keys = {v["tag_key"] for r in tags for b in r.values() for v in b.values()}
            assert keys == {"ptplan-plan", "ptplan-project", "ptplan-pool", "ptplan-phase",
                            "ptplan-method", "ptplan-capacity-type"}
            main = files["terraform-aws/main.tf"]
            assert '"~> 6.0"' in main and ">= 5.0" not in main
        else:
            res = _hcl(files["terraform-gcp/node_pools.tf"])["resource"]
            nps = [v for r in res for b in r.values() for v in b.values()]
            assert sum(n["autoscaling"][0]["total_max_node_count"] for n in nps) == \
                sum(p.nodes for p in plan.pools)
            # pools scale to zero when the job ends, and sit in one zone each (issue 24)
            assert all(n["autoscaling"][0]["total_min_node_count"] == 0 for n in nps)
            assert all(len(n["node_locations"]) == 1 for n in nps)
            assert '"~> 7.0"' in files["terraform-gcp/main.tf"]
            assert all("ptplan-project" in n["node_config"][0]["resource_labels"] for n in nps)
    assert n_tf >= 15


# ---- lifecycle ----------------------------------------------------------------------------------

def test_s3_lifecycle_passes_botocore_validation() -> None:
    import botocore.session
    from botocore.exceptions import ParamValidationError
    from botocore.validate import validate_parameters

    model = botocore.session.get_session().get_service_model("s3")
    shape = model.operation_model("PutBucketLifecycleConfiguration").input_shape
    rule_shape = shape.members["LifecycleConfiguration"].members["Rules"].member
    classes = set(rule_shape.members["Transitions"].member.members["StorageClass"].enum)
    checked = 0
    for name in FIXTURES:
        for rel, text in rendered(name):
            if rel == "lifecycle/s3-lifecycle.json":
                doc = json.loads(text)
                validate_parameters({"Bucket": "b", "LifecycleConfiguration": doc}, shape)
                for rule in doc["Rules"]:
                    assert rule["Status"] in rule_shape.members["Status"].enum
                    days = [t["Days"] for t in rule.get("Transitions", [])]
                    assert days == sorted(days)
                    for t in rule.get("Transitions", []):
                        assert t["StorageClass"] in classes
                        if t["StorageClass"] in ("STANDARD_IA", "ONEZONE_IA"):
                            assert t["Days"] >= 30
                    if "Expiration" in rule and days:
                        assert rule["Expiration"]["Days"] > max(days)
                checked += 1
    assert checked == sum(plan_of(n).provider == "aws" for n in FIXTURES)
    with pytest.raises(ParamValidationError, match="Unknown parameter"):
        validate_parameters({"Bucket": "b", "LifecycleConfiguration": {"Rules": [
            {"ID": "x", "Status": "Enabled", "Filter": {"Prefix": ""}, "Expire": {}}]}}, shape)


@pytest.mark.parametrize("name", FIXTURES)
def test_lifecycle_never_deletes_before_priced_lifetime(name: str) -> None:
    plan, spec = plan_of(name), spec_of(name)
    facts = facts_for(plan, spec)
    rules, _ = lifecycle_rules(plan, facts, "p")
    by_prefix = {r["prefix"]: r for r in rules}
    interval_h = facts.need("every_steps") / plan.steps * plan.makespan_hours
    ckpt = by_prefix["p/checkpoints/"]
    # the last hot checkpoint lives (keep_hot - 1) intervals + retention in the plan's model
    lived_h = (facts.need("keep_hot") - 1) * interval_h + facts.need("retention_days") * 24
    assert ckpt["expire_days"] * 24 >= lived_h
    tiers = {s.data_class: s.tier for s in plan.storage}
    if "archived_checkpoints" in tiers:
        assert by_prefix["p/archive/"]["expire_days"] == facts.metrics_days
    if "rollout_logs" in tiers:
        assert by_prefix["p/rollout_logs/"]["expire_days"] == facts.rollout_log_days
    assert "p/dataset/" not in by_prefix or by_prefix["p/dataset/"]["expire_days"] is None


def test_gcs_lifecycle_shape() -> None:
    doc = json.loads(dict(rendered("sft-gcp"))["lifecycle/gcs-lifecycle.json"])
    for rule in doc["lifecycle"]["rule"]:
        assert set(rule) == {"action", "condition"}
        assert rule["action"]["type"] in ("Delete", "SetStorageClass",
                                          "AbortIncompleteMultipartUpload")
        if rule["action"]["type"] == "SetStorageClass":
            assert rule["action"]["storageClass"] in ("NEARLINE", "COLDLINE", "ARCHIVE")
        assert isinstance(rule["condition"]["age"], int) and rule["condition"]["age"] >= 0
        assert all(p.startswith("sft-8b-chat/") for p in rule["condition"]["matchesPrefix"])


def _legacy(name: str) -> Plan:
    """The fixture as a plan of schema 1 written before plans recorded ``lifecycle``."""
    return plan_of(name).model_copy(update={"lifecycle": None, "schema_version": 1})


def test_schema1_plan_without_lifecycle_needs_the_spec_where_the_lifecycle_matters() -> None:
    """Plans of schema 1 written before plans recorded ``lifecycle`` still load and render; the
    targets that need the lifecycle take it from ``--spec`` (the spec where it set a value, else
    the plan's policy) and otherwise fail in one line saying how to proceed.
    ``defaults_applied`` (human text) is not read."""
    from ptplan.core.errors import InputError

    opd = _legacy("opd-aws")
    assert opd.schema_version == 1 and opd.lifecycle is None
    unknown = facts_for(opd)
    assert unknown.retention_days is None and unknown.every_steps is None
    assert unknown.rollout_log_days == opd.policy["storage"]["rollout_log_days"]
    # OPD's spec left keep_hot/archive_every/retention_days unset: the policy's apply
    known = facts_for(opd, spec_of("opd-aws"))
    assert known.retention_days == opd.policy["storage"]["retention_days"]
    assert known.every_steps == spec_of("opd-aws").checkpoint_every_steps
    # the text of defaults_applied changes nothing
    blank = opd.model_copy(update={"defaults_applied": []})
    assert facts_for(blank, spec_of("opd-aws")) == known
    # SFT's spec set retention_days: 60 (policy 30)
    assert facts_for(_legacy("sft-gcp"), spec_of("sft-gcp")).retention_days == 60
    files, notes = render_plan(_legacy("sft-gcp"), "kueue")  # needs no lifecycle
    assert files
    for target in ("lifecycle", "terraform-gcp"):
        with pytest.raises(InputError, match=r"checkpoints\..*--spec.*ptplan plan") as err:
            render_plan(_legacy("sft-gcp"), target)
        assert "\n" not in str(err.value)
    files, notes = render_plan(opd, "kuberay")
    assert "trainer.save_freq=" not in files["launch/verl.sh"]
    assert any("save_freq" in n and "--spec" in n for n in notes)
    files, notes = render_plan(opd, "kuberay", spec_of("opd-aws"))
    assert "trainer.save_freq=" in files["launch/verl.sh"]
    assert not any("save_freq" in n for n in notes)


# ---- SkyPilot -----------------------------------------------------------------------------------

SKY_TASK_KEYS = {"name", "num_nodes", "resources", "envs", "file_mounts", "setup", "run",
                 "workdir", "secrets", "volumes", "config"}
SKY_RESOURCE_KEYS = {"infra", "accelerators", "instance_type", "use_spot", "job_recovery",
                     "disk_size", "image_id", "labels", "cpus", "memory", "ports", "any_of",
                     "ordered", "disk_tier"}


def _sky_groups() -> list[tuple[str, Plan, str]]:
    return [(name, plan_of(name), text) for name in FIXTURES for r, text in rendered(name)
            if r.startswith("skypilot/")]


def test_skypilot_job_groups() -> None:
    """One job group per plan (issue 24: separate tasks joined by a hand-passed head IP, no
    teardown): header ``execution: parallel`` with the update task primary, then a task per
    group; spot tasks and the driver task carry managed-job recovery."""
    for name, plan, text in _sky_groups():
        header, *tasks = _yaml_docs(text)
        assert header["execution"] == "parallel" and header["termination_delay"] == "0s"
        primary = [t for t in tasks if t["name"] in header["primary_tasks"]]
        assert len(primary) == 1
        assert ("ray start --head" if plan.method != "sft" else "torchrun") in primary[0]["run"]
        assert sum(t["num_nodes"] for t in tasks) == sum(p.nodes for p in plan.pools), name
        for t in tasks:
            assert set(t) <= SKY_TASK_KEYS and set(t["resources"]) <= SKY_RESOURCE_KEYS
            r = t["resources"]
            assert r["infra"].startswith(f"{plan.provider}/{plan.region}")
            if plan.provider == "gcp":  # every task pinned to its zone (issue 24)
                assert r["infra"] == f"gcp/{plan.region}/{t['envs']['PTPLAN_ZONE']}"
            assert ("job_recovery" in r) == (r["use_spot"] or t in primary)
            assert t["file_mounts"]["/checkpoints"]["source"].endswith(
                "/" + dns_name(plan.spec_name, 30))
            for v in r["labels"].values():
                assert (GCP_LABEL if plan.provider == "gcp" else re.compile(".{0,256}")).match(v)
            if t not in primary:  # auxiliary tasks block until the primary ends
                assert "--block" in t["run"] and "SKYPILOT_JOBGROUP_NAME" in t["run"]


def test_skypilot_loads_with_skypilot() -> None:
    """Each job group loads with SkyPilot itself (skypilot 0.14.1, a test extra): its job-group
    loader and ``sky.Task.from_yaml_config`` on every task (unknown keys are errors there).
    Offline: no cloud credentials or catalog downloads are needed to load."""
    try:
        import sky
        from sky.utils import dag_utils
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("skypilot is a test extra (pip install '.[test]'); CI must run this")
        pytest.skip("skypilot not installed (pip install '.[test]')")
    assert sky.__version__ == "0.14.1"
    loaded = 0
    env = [("MODEL_PATH", "/m"), ("TRAIN_FILES", "/t"), ("VAL_FILES", "/v"),
           ("REWARD_FN", "/r.py"), ("TEACHER_PATH", "/teacher")]
    for name, _, text in _sky_groups():
        dag = dag_utils.load_job_group_from_yaml_str(text, env_overrides=env)
        _header, *tasks = _yaml_docs(text)
        assert dag.is_job_group() and [t.name for t in dag.tasks] == [t["name"] for t in tasks]
        for t in tasks:
            task = sky.Task.from_yaml_config(copy.deepcopy(t), env_overrides=env)
            assert task.num_nodes == t["num_nodes"], name
        loaded += 1
    assert loaded == len(FIXTURES)
    bad = _yaml_docs(_sky_groups()[0][2])[1]
    bad["resources"]["use_spott"] = True
    from sky.exceptions import InvalidSkyPilotConfigError

    with pytest.raises(InvalidSkyPilotConfigError, match="use_spot"):
        sky.Task.from_yaml_config(bad)


# ---- injection ---------------------------------------------------------------------------------

EVIL = 'x"y\'z\n  evil: {{ 7*7 }} ${var.x} %{ if 1 }: [a]\n---\nkind: Secret #'


def _evil_plan(plan: Plan) -> Plan:
    d = plan.model_dump(mode="json")
    d["spec_name"] = EVIL
    renames = {p["name"]: f"{p['name']}{EVIL}" for p in d["pools"]}
    for p in d["pools"]:
        p["name"] = renames[p["name"]]
    for ph in d["phases"]:
        ph["pool"] = renames[ph["pool"]]
    return Plan.model_validate(d)


def _paths(obj: Any, prefix: str = "") -> set[str]:
    """Key paths of a parsed document; Terraform identifiers (``r_<group>``, derived from pool
    names) are normalised, since the test renames pools."""
    if isinstance(obj, dict):
        return {prefix} | {q for k, v in obj.items()
                           for q in _paths(v, f"{prefix}/{re.sub(r'^r_.*', 'r_*', str(k))}")}
    if isinstance(obj, list):
        return {prefix} | {q for i, v in enumerate(obj) for q in _paths(v, f"{prefix}[{i}]")}
    return {prefix}


def _parse(rel: str, text: str) -> Any:
    if rel.endswith(".yaml"):
        return _yaml_docs(text)
    if rel.endswith(".json"):
        return json.loads(text)
    if rel.endswith(".tf"):
        return _hcl(text)
    return [shlex.split(line) for line in text.splitlines()
            if line and not line.startswith("#")]


@pytest.mark.parametrize("name", ["opd-aws-mixed", "grpo-gcp"])
def test_injection_cannot_add_keys(name: str) -> None:
    base = dict(rendered(name))
    evil_plan = _evil_plan(plan_of(name))
    # the spec digest check is the spec's job; feed the same lifecycle facts
    facts = facts_for(plan_of(name), spec_of(name))
    import ptplan.rendering.targets as r

    orig = r.facts_for
    r.facts_for = lambda plan, spec=None: facts  # type: ignore[assignment]
    try:
        evil, _ = render_plan(evil_plan, "all")
    finally:
        r.facts_for = orig
    assert len(evil) == len(base)
    for (rel_b, text_b), (rel_e, text_e) in zip(sorted(base.items()), sorted(evil.items()),
                                                strict=True):
        assert rel_b.split("/")[0] == rel_e.split("/")[0]
        parsed_b, parsed_e = _parse(rel_b, text_b), _parse(rel_e, text_e)
        if rel_b.endswith(".sh"):
            assert [len(w) for w in parsed_b] == [len(w) for w in parsed_e], rel_b
        else:
            assert _paths(parsed_b) == _paths(parsed_e), rel_b
        assert not any("evil" in p for p in _paths(parsed_e)), rel_e
        if rel_e.endswith(".yaml"):
            assert "Secret" not in [d.get("kind") for d in parsed_e]
    ctx = build_context(evil_plan, facts)
    for g in ctx["groups"]:
        for v in g["labels"]["k8s"].values():
            assert K8S_LABEL.match(v) and len(v) <= 63
        for v in g["labels"]["gcp"].values():
            assert GCP_LABEL.match(v)
    # a value that had to change carries a hash of the original: never another value's label
    assert k8s_label("-a b-") == f"a-b-{short_hash('-a b-')}" and k8s_label("a-b") == "a-b"


def test_templates_refuse_unquoted_values() -> None:
    from jinja2 import TemplateError

    from ptplan.templates import environment

    with pytest.raises(TemplateError, match="unquoted"):
        environment().from_string("name: {{ x }}").render(x="a: b")
    assert environment().from_string("n: {{ x|q }}").render(x="a: b") == 'n: "a: b"'


# ---- CLI ----------------------------------------------------------------------------------------

def _one_line(text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, text
    return lines[0]


def test_cli_errors(tmp_path: Path) -> None:
    runner = CliRunner()
    plan = str(PLANS / "grpo-gcp.json")
    # the premise: a GCP plan (gcp-only policy, tests/data/plans/README.md), so terraform-aws is
    # the other cloud's target
    assert json.loads((PLANS / "grpo-gcp.json").read_text(encoding="utf-8"))["provider"] == "gcp"
    res = runner.invoke(app, ["render", plan, "--target", "terraform-aws", "-o", str(tmp_path)])
    assert res.exit_code == 2 and "terraform-gcp" in _one_line(res.output)
    res = runner.invoke(app, ["render", plan, "--target", "kuberey", "-o", str(tmp_path)])
    assert res.exit_code == 2 and "kuberay" in _one_line(res.output)
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema_version": 1, "spec_name": "x"}', encoding="utf-8")
    res = runner.invoke(app, ["render", str(bad), "--target", "all", "-o", str(tmp_path)])
    assert res.exit_code == 2 and "plan" in _one_line(res.output)
    d = json.loads((PLANS / "grpo-gcp.json").read_text(encoding="utf-8"))
    d["pools"][0]["nodes"] += 1
    tampered = tmp_path / "tampered.json"
    tampered.write_text(json.dumps(d), encoding="utf-8")
    res = runner.invoke(app, ["render", str(tampered), "--target", "kuberay", "-o",
                              str(tmp_path / "t")])
    assert res.exit_code == 1 and "fails verification" in res.output
    assert not (tmp_path / "t").exists()
    res = runner.invoke(app, ["render", plan, "--target", "lifecycle", "--spec",
                              str(PLANS / "sft-gcp.spec.yaml"), "-o", str(tmp_path)])
    assert res.exit_code == 2 and "not the spec of this plan" in _one_line(res.output)


def test_cli_writes_and_lists_files(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["render", str(PLANS / "opd-aws.json"), "--target",
                                   "karpenter", "-o", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert "wrote" in res.output and (tmp_path / "karpenter" / "nodepools.yaml").is_file()
    assert set(TARGETS) <= {"skypilot", "kuberay", "karpenter", "kueue", "terraform-aws",
                            "terraform-gcp", "lifecycle"}


def test_plans_record_their_lifecycle_so_render_needs_no_spec() -> None:
    """A plan made now records the checkpoint cadence and lifecycle it priced storage with, so
    the lifecycle and Terraform targets render without ``--spec`` (older plans still need it
    when the spec set those values)."""
    from ptplan.planner.api import plan as make_plan
    from ptplan.providers.registry import load_catalog

    spec = load_spec("examples/sft-8b.yaml")
    p = make_plan(spec, load_catalog("embedded"), explain=False, timings=False)
    assert p.lifecycle is not None
    assert p.lifecycle.every_steps == spec.checkpoint_every_steps
    files, _ = render_plan(p, "lifecycle")
    with_spec, _ = render_plan(p, "lifecycle", spec=spec)
    assert files == with_spec
    assert p.schema_version == SCHEMA_VERSION  # schema 8: every plan carries its interval
    # a schema-2 plan (lifecycle recorded, no parallel layouts) renders the same
    assert render_plan(p.model_copy(update={"schema_version": 2, "uncertainty": None}),
                       "lifecycle")[0] == files
    # the recorded lifecycle wins over the spec: render uses what the storage was priced with
    edited = spec.model_copy(update={"checkpoints": spec.checkpoints.model_copy(
        update={"retention_days": 999})})
    assert facts_for(p, edited).retention_days == p.lifecycle.retention_days
    legacy = p.model_copy(update={"lifecycle": None, "schema_version": 1, "uncertainty": None})
    from ptplan.core.errors import InputError

    with pytest.raises(InputError, match="--spec"):
        render_plan(legacy, "lifecycle")
    assert render_plan(legacy, "lifecycle", spec=spec)[0] == files


def test_split_region_plans_render_per_task_and_refuse_single_cluster_targets() -> None:
    """With split_regions the rollout pool sits in another region: SkyPilot tasks carry each
    pool's own region; cluster targets (one cluster, one region) refuse in one line, and
    ``all`` skips them with a note."""
    from test_network import split_policy, split_spec, two_region_catalog

    from ptplan.core.errors import InputError
    from ptplan.planner.api import plan as make_plan

    p = make_plan(split_spec(), two_region_catalog(inter_region=0.001), policy=split_policy(),
                  explain=False, timings=False)
    regions = {q.name: q.region for q in p.pools}
    assert regions["rollout"] != regions["update"]
    files, _ = render_plan(p, "skypilot")
    for path, text in files.items():
        if path.startswith("skypilot/"):
            for task in _yaml_docs(text)[1:]:
                pool = task["envs"]["PTPLAN_POOL"]
                assert task["resources"]["infra"] == f"lab/{regions[pool]}"
    for target in ("kuberay", "kueue", "terraform-aws"):
        with pytest.raises(InputError, match="span 2 regions") as err:
            render_plan(p, target)
        assert "\n" not in str(err.value)
    files, notes = render_plan(p, "all")
    assert any("span 2 regions" in n for n in notes)
    assert not any(f.startswith(("kuberay/", "kueue/")) for f in files)


def test_a_plan_priced_without_sequence_packing_says_the_render_packs() -> None:
    """The render writes token budgets (dynamic batching) for every plan; a plan priced with
    ``efficiency.sequence_packing: false`` (one micro-batch per micro_batch_size sequences)
    says that the job it starts runs fewer micro-batches than it priced."""
    from ptplan.planner.api import plan as make_plan
    from ptplan.policies.model import load_policy
    from ptplan.providers.embedded import embedded_catalog

    packed = spec_of("grpo-aws")
    eff = packed.efficiency.model_copy(update={"sequence_packing": False})
    unpacked = packed.model_copy(update={"efficiency": eff})
    policy = load_policy(str(PLANS / "aws-only.policy.yaml"))
    p = make_plan(unpacked, embedded_catalog(), policy=policy, explain=False, timings=False)
    files, notes = render_plan(p, "kuberay", unpacked)
    assert "actor_rollout_ref.actor.use_dynamic_bsz=True" in files["launch/verl.sh"]
    assert [n for n in notes if "sequence_packing" in n] == [
        "launch: the spec sets efficiency.sequence_packing: false, so the plan priced "
        "micro-batches "
        "of micro_batch_size sequences each; this render writes token budgets (dynamic "
        "batching), which run fewer micro-batches than priced: re-plan without "
        "sequence_packing: false for the plan to price the job this render starts"]
    _, notes = render_plan(plan_of("grpo-aws"), "kuberay", packed)
    assert not any("sequence_packing" in n for n in notes)
