"""Ray pool pinning (issue 24): the rendered launch makes each framework role ask for its planned
pool's custom resource, and Ray then places the role on that pool's nodes only.

Run against the pinned frameworks' own code (``.frameworks``, see tests/test_launch_frameworks.py)
on a real local Ray cluster (``ray.cluster_utils.Cluster``) whose nodes are the rendered RayJob's
worker groups (``rayStartParams``: ``num-gpus`` and the ``resources`` JSON; GPUs are logical
counts, no GPU is needed). Upstream code followed:

* veRL 0.9.1 ``verl/single_controller/ray/base.py``: ``RayResourcePool.get_placement_groups``
  (lines 131-163: bundles ``{"CPU": max_colocate_count, "GPU": 1}``, group name =
  ``name_prefix`` + ``verl_group_…``) and ``ResourcePoolManager.create_resource_pool`` (lines
  195-216: ``name_prefix`` = the resource pool's name). Pools:
  ``verl/trainer/ppo/v1/trainer_base.py`` lines 817-848 (``global_pool`` =
  ``[trainer.n_gpus_per_node] * trainer.nnodes``, ``reward_pool``, ``teacher_pool``) and
  ``verl/workers/rollout/replica.py`` lines 107-117 and 188-203 (``init_standalone``:
  ``rollout_pool_<rank>`` = ``[gpus_per_replica_node] * nnodes``, world size tp × dp × pp);
  ``verl/workers/rollout/llm_server.py`` line 460 (replicas = rollout GPUs / replica world
  size). The module is loaded from the wheel's file;
  its imports that need torch/tensordict (``verl.protocol``, the worker decorators) are stubbed,
  ``ResourcePool`` is the wheel's own ``verl/single_controller/base/worker_group.py``.
* OpenRLHF 0.11.2 ``openrlhf/trainer/ray/launcher.py`` ``RayActorGroup`` (lines 217-251:
  ``resources``, ``num_resources_per_node``; bundles ``{"GPU": 1, "CPU": 1}`` + the resource)
  loaded from the wheel with torch/deepspeed stubbed; ``openrlhf/trainer/ray/vllm_engine.py``
  ``create_vllm_engines`` (lines 247-251) and ``openrlhf/cli/train_ppo_ray.py`` ``train``
  (lines 47-50 and 114-117) read by AST.
* Ray ``worker_process_setup_hook`` (``ray/_private/runtime_env/setup_hook.py``: a callable is
  pickled into GCS and run by every worker of the job).
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import threading
import types
import warnings
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_launch_frameworks import package_dir

from ptplan.planfile.load import load_plan
from ptplan.rendering import pinning
from ptplan.rendering.archive import unwrap
from ptplan.rendering.checks.paths import entry_words as _entry_words
from ptplan.rendering.frameworks import raypin
from ptplan.rendering.targets import render_plan
from ptplan.spec.project import load_spec

HERE = Path(__file__).resolve().parent
PLANS = HERE / "data" / "plans"



def _render(name: str, framework: str = "verl==0.9") -> dict[str, str]:
    plan = load_plan(PLANS / f"{name}.json")
    return render_plan(plan, "kuberay", load_spec(str(PLANS / f"{name}.spec.yaml")),
                       framework=framework)[0]


def _job(files: dict[str, str]) -> dict[str, Any]:
    return next(d for d in yaml.safe_load_all(files["kuberay/rayjob.yaml"])
                if d and d["kind"] == "RayJob")


def _groups(job: dict[str, Any]) -> list[dict[str, Any]]:
    """(pool resource, GPUs, resources, replicas) of every rendered worker group."""
    out = []
    for g in job["spec"]["rayClusterSpec"]["workerGroupSpecs"]:
        res = json.loads(g["rayStartParams"]["resources"].strip("'"))
        out.append({"name": g["groupName"], "gpus": int(g["rayStartParams"]["num-gpus"]),
                    "resources": res, "replicas": g["replicas"]})
    return out


def _overrides(words: list[str]) -> dict[str, str]:
    return dict(w.partition("=")[::2] for w in words if "=" in w and not w.startswith("-"))


# ---- units ---------------------------------------------------------------------------------

def test_bundles_ask_for_the_pool_resource_per_gpu() -> None:
    out = raypin.pin_bundles([{"CPU": 3, "GPU": 1}, {"CPU": 1}], "ptplan_pool_update")
    assert out == [{"CPU": 3, "GPU": 1, "ptplan_pool_update": 1}, {"CPU": 1}]
    assert raypin.pin_bundles([{"GPU": 1, "ptplan_pool_update": 1}], "ptplan_pool_update") == \
        [{"GPU": 1, "ptplan_pool_update": 1}]
    with pytest.raises(RuntimeError, match="ptplan_pool_rollout"):
        raypin.pin_bundles([{"GPU": 1, "ptplan_pool_rollout": 1}], "ptplan_pool_update")


def test_verl_group_names_map_to_roles() -> None:
    """Names as RayResourcePool.get_placement_groups writes them (name_prefix + 'verl_group_'
    + counts + ':' + index) for every resource pool veRL 0.9.1 creates."""
    cases = {"global_poolverl_group_8_8:0": "trainer", "trainer_poolverl_group_8:0": "trainer",
             "rollout_pool_3verl_group_2:0": "rollout", "reward_poolverl_group_1:0": "reward",
             "rollout_pool_reward_0verl_group_1:0": "reward",
             "teacher_poolverl_group_4_4:1": "teacher",
             "rollout_pool_teacher_2qwenverl_group_4:0": "teacher"}
    for name, role in cases.items():
        assert raypin.role_of(name, None) == role, name
    assert raypin.role_of("xyzverl_group_8:0", None) is None


def test_every_verl_resource_pool_name_is_known() -> None:
    """Every resource pool name the pinned veRL source gives to ResourcePoolManager maps to a
    role (a new pool in a new release fails here)."""
    names = set()
    root = package_dir("verl")
    for path in root.rglob("*.py"):
        if "tests" in path.parts:
            continue
        text = path.read_text(encoding="utf-8")
        if "resource_pool_spec" not in text and "resource_pool_name" not in text:
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and \
                    node.value.id == "resource_pool_spec" and \
                    isinstance(node.slice, ast.Constant):
                names.add(node.slice.value)
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in (
                    "global_pool_id", "resource_pool_name") for t in node.targets):
                v = node.value
                if isinstance(v, ast.Constant):
                    names.add(v.value)
                elif isinstance(v, ast.JoinedStr) and isinstance(v.values[0], ast.Constant):
                    names.add(v.values[0].value)
    assert {"global_pool", "trainer_pool", "reward_pool", "teacher_pool", "rollout_pool_",
            "rollout_pool_reward_", "rollout_pool_teacher_"} <= names
    for n in names:
        assert raypin.role_of(n + "0verl_group_8:0", None) is not None, n


def test_openrlhf_groups_are_found_where_the_source_creates_them() -> None:
    """train(): the colocated actor(+ref) group is created before ``actor_model`` is assigned,
    the critic(+reward) group after; create_vllm_engines makes the engines' group; these are
    every placement_group call of OpenRLHF 0.11.2 (raypin.role_of relies on it)."""
    root = package_dir("openrlhf")
    calls = {}
    for path in sorted(root.rglob("*.py")):
        with warnings.catch_warnings():  # invalid escapes in some of its docstrings
            warnings.simplefilter("ignore", SyntaxWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            tree = ast.parse(path.read_text(encoding="utf-8"))
        for fn in ast.walk(tree):
            if isinstance(fn, ast.FunctionDef):
                for node in ast.walk(fn):
                    if isinstance(node, ast.Call) and getattr(node.func, "id", "") == \
                            "placement_group":
                        calls.setdefault(f"{path.relative_to(root)}:{fn.name}", []).append(
                            node.lineno)
    assert set(calls) == {"cli/train_ppo_ray.py:train", "trainer/ray/launcher.py:_initiate_actors",
                          "trainer/ray/vllm_engine.py:create_vllm_engines"}
    train = next(f for f in ast.walk(ast.parse((root / "cli/train_ppo_ray.py").read_text()))
                 if isinstance(f, ast.FunctionDef) and f.name == "train")
    actor_line = next(n.lineno for n in ast.walk(train) if isinstance(n, ast.Assign)
                      and any(getattr(t, "id", "") == "actor_model" for t in n.targets))
    first, second = calls["cli/train_ppo_ray.py:train"]
    assert first < actor_line < second
    src = (root / "cli/train_ppo_ray.py").read_text().splitlines()
    assert "colocate_actor_ref or args.train.colocate_all" in "".join(src[first - 12:first])
    assert "colocate_critic_reward" in "".join(src[second - 10:second])


def test_roles_word_in_every_ray_launch() -> None:
    """Each Ray launch runs through the launcher with the roles the framework creates groups
    for; the SFT launch (torchrun, no Ray) does not."""
    for name, framework, want in (
            ("grpo-aws", "verl==0.9", {"trainer": "update", "rollout": "rollout"}),
            ("grpo-aws", "openrlhf==0.11", {"trainer": "update", "rollout": "rollout",
                                             "reference": "scoring"}),
            ("opd-aws", "verl==0.9", None)):
        job = _job(_render(name, framework))
        words = unwrap(_entry_words(job["spec"]["entrypoint"]))
        if framework.startswith("openrlhf"):
            import shlex

            words = shlex.split(words[2])
        module, roles = pinning.parse_launch(words)
        assert module in ("verl.trainer.main_ppo", "openrlhf.cli.train_ppo_ray")
        if want is not None:
            assert roles == {r: f"ptplan_pool_{p}" for r, p in want.items()}
        else:
            assert roles["teacher"] == "ptplan_pool_scoring" and roles["trainer"] == \
                "ptplan_pool_update"
        assert words[words.index(pinning.BOOT) + 1] == pinning.source_b64()
    sft = render_plan(load_plan(PLANS / "sft-gcp.json"), "skypilot",
                      load_spec(str(PLANS / "sft-gcp.spec.yaml")))[0]
    assert pinning.BOOT not in "".join(sft.values())


# ---- the frameworks' code on a real Ray cluster ------------------------------------------------

@contextlib.contextmanager
def _modules(stubs: dict[str, types.ModuleType]):
    saved = {k: sys.modules.get(k) for k in stubs}
    sys.modules.update(stubs)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v


def _module(name: str, **attrs: Any) -> types.ModuleType:
    m = types.ModuleType(name)
    m.__path__ = []  # type: ignore[attr-defined]
    m.__dict__.update(attrs)
    return m


def _load(name: str, path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def verl_base():
    """The wheel's verl/single_controller/ray/base.py (imports needing torch stubbed)."""
    root = package_dir("verl")
    platform = types.SimpleNamespace(device_name="cuda", ray_resource_name=lambda: "GPU")
    decorator = _module("verl.single_controller.base.decorator", MAGIC_ATTR="x",
                        Dispatch=type("Dispatch", (), {}),
                        get_predefined_dispatch_fn=lambda *a: None,
                        get_predefined_execute_fn=lambda *a: None)
    stubs = {n: _module(n) for n in ("verl", "verl.single_controller", "verl.utils",
                                      "verl.plugin", "verl.single_controller.ray")}
    stubs.update({
        "verl.plugin.platform": _module("verl.plugin.platform", get_platform=lambda: platform),
        "verl.protocol": _module("verl.protocol", DataProto=object, _padding_size_key="p"),
        "verl.single_controller.base.decorator": decorator,
        "verl.utils.device": _module("verl.utils.device", get_device_name=lambda: "cuda"),
        "verl.utils.py_functional": _module("verl.utils.py_functional",
                                            temp_env_var=contextlib.nullcontext)})
    with _modules({**stubs, "verl.single_controller.base": None,
                   "verl.single_controller.base.worker_group": None,
                   "verl.single_controller.ray.base": None}):
        wg = _load("verl.single_controller.base.worker_group",
                   root / "single_controller/base/worker_group.py")
        sys.modules["verl.single_controller.base"] = _module(
            "verl.single_controller.base", ResourcePool=wg.ResourcePool,
            ClassWithInitArgs=wg.ClassWithInitArgs, WorkerGroup=wg.WorkerGroup,
            Worker=type("Worker", (), {}))
        yield _load("verl.single_controller.ray.base", root / "single_controller/ray/base.py")


@pytest.fixture(scope="module")
def cluster():
    import ray
    from ray.cluster_utils import Cluster

    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    ray.init(address=c.address, logging_level="ERROR")
    yield c
    ray.shutdown()
    c.shutdown()


def _add_nodes(c: Any, groups: list[dict[str, Any]]) -> None:
    """Ray nodes as the rendered worker groups start them, those not in the cluster yet."""
    import ray

    have: dict[str, int] = {}
    for n in ray.nodes():
        for k in n["Resources"] if n["Alive"] else ():
            have[k] = have.get(k, 0) + 1
    for g in groups:
        (res,) = g["resources"]
        for _ in range(g["replicas"] - have.get(res, 0)):
            c.add_node(num_cpus=32, num_gpus=g["gpus"], resources=g["resources"])
        have[res] = max(have.get(res, 0) - g["replicas"], 0)
    c.wait_for_nodes()


@contextlib.contextmanager
def _restored():
    """Put Ray's own placement_group back after a test patched it."""
    import ray.util

    mod = sys.modules["ray.util.placement_group"]
    original = getattr(mod.placement_group, "ptplan_original", mod.placement_group)
    try:
        yield
    finally:
        mod.placement_group = original
        ray.util.placement_group = original
        base = sys.modules.get("verl.single_controller.ray.base")
        if base is not None:
            base.placement_group = original


def _placement(pg: Any) -> list[tuple[dict[str, float], dict[str, float]]]:
    """(bundle request, resources of the node it was placed on) of every bundle."""
    import ray
    from ray.util.placement_group import placement_group_table

    nodes = {n["NodeID"]: n["Resources"] for n in ray.nodes() if n["Alive"]}
    t = placement_group_table(pg)
    return [(t["bundles"][i], nodes[n]) for i, n in sorted(t["bundles_to_node_id"].items())]


def test_verl_roles_land_on_their_pools(cluster: Any, verl_base: Any) -> None:
    """AWS GRPO fixture: the trainer (8 x B200, on demand; policy keeps the update off spot)
    has the same GPU shape as the spot rollout and scoring nodes (8 x A100). Unpinned, veRL's
    trainer group is placed on a spot node; pinned, it waits for the update node and lands
    there, and the rollout replicas land on the rollout pool."""
    import ray

    files = _render("grpo-aws")
    job = _job(files)
    groups = _groups(job)
    words = _entry_words(job["spec"]["entrypoint"])
    _, roles = pinning.parse_launch(words)
    over = _overrides(words)
    update = [g for g in groups if roles["trainer"] in g["resources"]]
    assert [g["name"] for g in update] == ["update-on-demand"]
    _add_nodes(cluster, [g for g in groups if g not in update])

    nnodes, gpn = int(over["trainer.nnodes"]), int(over["trainer.n_gpus_per_node"])
    unpinned = verl_base.RayResourcePool([gpn] * nnodes, name_prefix="global_pool",
                                         max_colocate_count=3)
    for bundle, node in _placement(unpinned.get_placement_groups()[0]):
        assert "ptplan_pool_update" not in bundle
        assert "ptplan_pool_update" not in node  # the defect: a spot rollout/scoring node
    ray.util.remove_placement_group(unpinned.pgs[0])

    with _restored():
        raypin.install(raypin.parse_roles(pinning.roles_word(
            {r: v.removeprefix("ptplan_pool_") for r, v in roles.items()})))
        assert verl_base.placement_group is sys.modules["ray.util.placement_group"].placement_group
        manager = verl_base.ResourcePoolManager({"global_pool": [gpn] * nnodes}, mapping={})
        manager.create_resource_pool()
        done: list[Any] = []
        t = threading.Thread(target=lambda: done.append(
            manager.resource_pool_dict["global_pool"].get_placement_groups()), daemon=True)
        t.start()
        t.join(5)
        assert not done, "the pinned trainer group was placed without an update node"
        _add_nodes(cluster, update)
        t.join(60)
        assert done
        for pg in done[0]:
            for bundle, node in _placement(pg):
                assert bundle == {"CPU": 3.0, "GPU": 1.0, roles["trainer"]: 1.0}
                assert node.get(roles["trainer"]) == gpn  # one unit per GPU = bundles per node
        # rollout replicas (replica.py init_standalone), rollout.nnodes x n_gpus_per_node
        tp = int(over["actor_rollout_ref.rollout.tensor_model_parallel_size"])
        rgpn = int(over["actor_rollout_ref.rollout.n_gpus_per_node"])
        rnodes = int(over["actor_rollout_ref.rollout.nnodes"])
        per_node = min(rgpn, tp)
        replicas = rgpn * rnodes // tp
        rollout_groups = [g for g in groups if roles["rollout"] in g["resources"]]
        offered = sum(g["replicas"] * g["resources"][roles["rollout"]] for g in rollout_groups)
        assert offered == rgpn * rnodes == replicas * tp  # count = bundles x nodes
        for rank in range(replicas):
            m = verl_base.ResourcePoolManager(
                {f"rollout_pool_{rank}": [per_node] * (tp // per_node)}, mapping=None,
                max_colocate_count=2)
            m.create_resource_pool()
            for pg in m.resource_pool_dict[f"rollout_pool_{rank}"].get_placement_groups():
                for bundle, node in _placement(pg):
                    assert bundle[roles["rollout"]] == 1.0 and node.get(roles["rollout"])
                    assert not any(k.startswith("ptplan_pool_") and k != roles["rollout"]
                                   for k in bundle)


@pytest.fixture(scope="module")
def openrlhf_launcher():
    root = package_dir("openrlhf")
    stubs = {n: _module(n) for n in ("openrlhf", "openrlhf.trainer", "openrlhf.trainer.ray")}
    stubs.update({"torch": _module("torch", __getattr__=lambda name: object),
                  "tqdm": _module("tqdm", tqdm=lambda x, **k: x),
                  "openrlhf.models": _module("openrlhf.models", Actor=object,
                                             get_llm_for_sequence_regression=None),
                  "openrlhf.utils": _module("openrlhf.utils"),
                  "openrlhf.utils.deepspeed": _module("openrlhf.utils.deepspeed",
                                                      DeepspeedStrategy=object),
                  "openrlhf.trainer.ray.launcher": None, "openrlhf.trainer.ray.utils": None})
    with _modules(stubs):
        _load("openrlhf.trainer.ray.utils", root / "trainer/ray/utils.py")
        yield _load("openrlhf.trainer.ray.launcher", root / "trainer/ray/launcher.py")


def test_openrlhf_groups_land_on_their_pools(cluster: Any, openrlhf_launcher: Any) -> None:
    """OpenRLHF's RayActorGroup, given the role's resource by the launcher (its own
    ``resources`` argument): a 2-GPU reference group builds bundles with the resource and its
    actors land on the scoring pool; a 1-GPU group (no placement group) too."""
    import shlex

    import ray

    files = _render("grpo-aws", "openrlhf==0.11")
    job = _job(files)
    _add_nodes(cluster, _groups(job))

    _, roles = pinning.parse_launch(shlex.split(
        unwrap(_entry_words(job["spec"]["entrypoint"]))[2]))

    @ray.remote(num_cpus=0)
    class ReferenceModelActor:  # the name OpenRLHF's reference group has
        def __init__(self, world_size, rank, master_addr, master_port):
            pass

        def get_master_addr_port(self):
            return "127.0.0.1", 1

        def node(self):
            return ray.get_runtime_context().get_node_id()

    raypin.install_openrlhf_groups(raypin.parse_roles(",".join(
        f"{k}={v}" for k, v in roles.items())))
    try:
        nodes = {n["NodeID"]: n["Resources"] for n in ray.nodes() if n["Alive"]}
        for gpus in (2, 1):
            group = openrlhf_launcher.RayActorGroup(1, gpus, ReferenceModelActor)
            where = ray.get([a.node.remote() for a in group._actor_handlers], timeout=120)
            assert len(where) == gpus
            assert all(roles["reference"] in nodes[n] for n in where)
            for a in group._actor_handlers:
                ray.kill(a)
    finally:
        cls = openrlhf_launcher.RayActorGroup
        cls.__init__ = cls.__init__.ptplan_original


def test_launcher_pins_in_the_workers(cluster: Any, tmp_path: Path) -> None:
    """The rendered command line (python3 -c BOOT <source> <roles> <module>): its ray.init
    carries the setup hook (pickled by value from __main__), and a placement group a Ray worker
    creates (as veRL's TaskRunner does) asks for the role's resource there."""
    (tmp_path / "ptplan_fake_main.py").write_text(textwrap.dedent(f"""
        import json, sys, ray
        ray.init(address={cluster.address!r}, runtime_env={{"env_vars": {{"A": "1"}}}})

        @ray.remote(num_cpus=0)
        def make():
            from ray.util.placement_group import placement_group, placement_group_table
            pg = placement_group([{{"CPU": 1, "GPU": 1}}], name="teacher_poolverl_group_1:0")
            ray.get(pg.ready(), timeout=60)
            return placement_group_table(pg)["bundles"][0], sys.argv

        print(json.dumps({{"bundle": ray.get(make.remote())[0], "argv": sys.argv[1:]}}))
        """), encoding="utf-8")
    _add_nodes(cluster, [{"gpus": 1, "resources": {"ptplan_pool_scoring": 1}, "replicas": 1}])
    spec = "teacher=ptplan_pool_scoring"
    words = pinning.launcher_words("ptplan_fake_main", {"teacher": "scoring"})
    assert words[4] == spec
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    r = subprocess.run([sys.executable, *words[1:], "x=1"], capture_output=True, text=True,
                       env=env, timeout=240, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out == {"bundle": {"CPU": 1.0, "GPU": 1.0, "ptplan_pool_scoring": 1.0},
                   "argv": ["x=1"]}
