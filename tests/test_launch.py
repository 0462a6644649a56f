"""Launch files: one regression test per defect of issue 23, paths under the lifecycle rules,
``--framework`` handling, and golden launch files per example and framework
(``tests/golden/launch/``; ``PTPLAN_UPDATE_GOLDEN=1`` regenerates)."""

from __future__ import annotations

import difflib
import json
import os
import re
import shlex

import pytest
import yaml
from test_launch_frameworks import ROOT, cases, launch
from typer.testing import CliRunner

from ptplan.cli.app import app
from ptplan.planfile.load import load_plan
from ptplan.rendering.paths import MOUNT, PREFIX, bucket_key
from ptplan.rendering.targets import render_plan
from ptplan.spec.project import load_spec

pytestmark = pytest.mark.shipped_framework
"""The examples as a user plans them: specs without ``framework:`` take verl==0.9."""

GOLDEN = ROOT / "tests" / "golden" / "launch"
UPDATE = os.environ.get("PTPLAN_UPDATE_GOLDEN") == "1"
CLI = ROOT / "tests" / "golden" / "cli"


def _render(example: str, framework: str, target: str = "all") -> tuple[dict[str, str],
                                                                          list[str]]:
    from test_launch_frameworks import plan_path, spec_for

    return render_plan(load_plan(plan_path(example, framework)), target,
                       spec_for(example, framework), framework=framework)


# ---- goldens --------------------------------------------------------------------------------

@pytest.mark.parametrize(("example", "framework"), cases())
def test_golden_launch(example: str, framework: str) -> None:
    files, _ = _render(example, framework, "kuberay" if "sft" not in example else "skypilot")
    name = framework.split("==")[0]
    text = files[f"launch/{name}.sh"]
    golden = GOLDEN / example / f"{framework.replace('==', '-')}.sh"
    if UPDATE:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text, encoding="utf-8", newline="\n")
    expected = golden.read_text(encoding="utf-8")
    if text != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(True), text.splitlines(True)))
        pytest.fail(f"{golden.name} differs (PTPLAN_UPDATE_GOLDEN=1 regenerates):\n{diff}")


# ---- one test per defect of the issue -------------------------------------------------------

def test_versions_coexist_and_are_stated() -> None:
    """RL on main_ppo (v1 trainer), SFT on sft_trainer: both exist in veRL 0.9.1; OpenRLHF
    flags are the dotted 0.11 names; the version is in every launch file and install step."""
    assert launch("grpo-7b", "verl==0.9")["module"] == "verl.trainer.main_ppo"
    assert launch("sft-8b", "verl==0.9")["module"] == "verl.trainer.sft_trainer"
    words = launch("grpo-7b", "openrlhf==0.11")["words"]
    assert "--actor.num_nodes=1" in words and not any("_num_nodes" in w for w in words)
    for example, framework in cases():
        files, _ = _render(example, framework, "skypilot")
        version = framework.split("==")[0] + " " + ("0.9.1" if "verl" in framework else "0.11.2")
        for rel, text in files.items():
            if rel.startswith("launch/"):
                assert version.replace("verl", "veRL").replace("openrlhf", "OpenRLHF") in \
                    text.splitlines()[1]
                assert f"pip install {framework.split('==')[0]}==" in text
            else:  # the job group: a header, then one task per group, each installing it
                tasks = [d for d in yaml.safe_load_all(text) if d and "run" in d]
                assert tasks
                for task in tasks:
                    setup = task["setup"]
                    assert "pip install" in setup and ("0.9.1" in setup or "0.11.2" in setup)


def test_startup_failures_are_gone() -> None:
    """Micro-batching by token budget, console logger, group_norm with > 1 sample, a reward
    function instead of an unplaced reward-model group."""
    la = launch("grpo-7b", "verl==0.9")
    assert "actor_rollout_ref.actor.use_dynamic_bsz=True" in la["words"]
    assert "trainer.logger=[console]" in la["words"]
    assert "reward.custom_reward_function.path=${oc.env:REWARD_FN}" in la["words"]
    assert not any(w.startswith("reward.reward_model.enable=True") for w in la["words"])
    orl = launch("grpo-7b", "openrlhf==0.11")["words"]
    assert "--rollout.n_samples_per_prompt=8" in orl
    assert '--reward.remote_url "$REWARD_FN"' in orl[2]


def test_planned_job_is_launched() -> None:
    """256 prompts × 8 samples × 8,192 tokens, eval cadence and samples, memory utilisation,
    checkpoint contents, SFT epochs and length, use_kl_loss with a priced reference, fp8
    through veRL's rollout.quantization (not raw vLLM engine args)."""
    w = launch("grpo-7b", "verl==0.9")["words"]
    for arg in ("data.train_batch_size=256", "actor_rollout_ref.rollout.n=8",
                "data.max_response_length=8192", "trainer.test_freq=25",
                "data.val_max_samples=500", "actor_rollout_ref.rollout.val_kwargs.n=4",
                "actor_rollout_ref.rollout.gpu_memory_utilization=0.9",
                "actor_rollout_ref.actor.checkpoint.save_contents=[model,optimizer,extra]",
                "actor_rollout_ref.actor.use_kl_loss=True"):
        assert arg in w, arg
    # the rollout's precision as the example's plan chose it (fp8 since issue #40: veRL's
    # rollout pool of its own is an async one; bf16 before)
    golden = load_plan(CLI / "plan-grpo-7b.json")
    q = next(p for p in golden.phases if p.name == "rollout").precision
    assert q in ("bf16", "fp8")
    assert f"actor_rollout_ref.rollout.quantization={'fp8' if q == 'fp8' else 'null'}" in w
    # fp8 where the plan chose it: the same spec planned on GCP (tests/data/plans/grpo-gcp.json,
    # gcp-only policy) rolls out in fp8
    from dataclasses import replace

    from ptplan.rendering.context import build_context
    from ptplan.rendering.facts import facts_for
    from ptplan.rendering.frameworks import parse_framework

    plans = ROOT / "tests" / "data" / "plans"
    fp8 = load_plan(plans / "grpo-gcp.json")
    assert next(p for p in fp8.phases if p.name == "rollout").precision == "fp8"
    facts = replace(facts_for(fp8, load_spec(str(plans / "grpo-gcp.spec.yaml"))),
                    framework=parse_framework("verl==0.9"))
    f = build_context(fp8, facts)["launch"]["words"]
    assert "actor_rollout_ref.rollout.quantization=fp8" in f
    for x in (w, f):
        assert not any("engine_kwargs.vllm.quantization" in y for y in x)
    s = launch("sft-8b", "verl==0.9")["words"]
    assert "trainer.total_epochs=3" in s and "data.max_length=2048" in s


def test_opd_on_the_distillation_trainer() -> None:
    """OPD: veRL's distillation.* with the teacher pool as planned, no GAE critic, no
    key from another recipe, teacher weights passed."""
    plan = load_plan(CLI / "plan-opd-8b-from-32b.json")
    pool = next(p for p in plan.pools if p.name == "scoring")
    scoring = next(p for p in plan.phases if p.name == "scoring")
    w = launch("opd-8b-from-32b", "verl==0.9")["words"]
    assert "distillation.enabled=True" in w
    assert f"distillation.nnodes={pool.nodes}" in w
    assert f"distillation.n_gpus_per_node={pool.gpus_per_node}" in w
    assert "distillation.teacher_models.teacher_model.num_replicas=" \
        f"{pool.nodes * pool.gpus_per_node // scoring.replica_gpus}" in w
    assert "distillation.teacher_models.teacher_model.model_path=${oc.env:TEACHER_PATH}" in w
    assert "algorithm.adv_estimator=gae" not in w
    assert not any("actor_rollout_ref.teacher" in x for x in w)


def _mount_root(files: dict[str, str]) -> str:
    """Where /checkpoints points in the bucket, as the rendered mounts say (SkyPilot
    ``file_mounts`` source path or KubeRay ``subPath``; none: the bucket root)."""
    for rel, text in files.items():
        if rel.startswith("kuberay/"):
            pod = yaml.safe_load(text)["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]
            for m in pod["spec"]["containers"][0].get("volumeMounts", []):
                if m["mountPath"] == MOUNT:
                    return str(m.get("subPath", ""))
    return ""


def test_every_launch_path_is_under_its_lifecycle_rule() -> None:
    """Checkpoints, rollout logs and eval outputs land under the prefixes the lifecycle rules
    of their data class filter on (SkyPilot, KubeRay and the launch scripts alike)."""
    checked = 0
    for example, framework in cases():
        files, _ = _render(example, framework)
        life = next(t for r, t in files.items() if r.startswith("lifecycle/"))
        doc = json.loads(life)
        rules = {r["ID"]: r["Filter"]["Prefix"] for r in doc.get("Rules", [])} or \
            {f"r{i}": r["condition"]["matchesPrefix"][0]
             for i, r in enumerate(doc["lifecycle"]["rule"])}
        prefixes = set(rules.values())
        root = _mount_root(files)
        la = launch(example, framework)
        for s in la["settings"]:
            if isinstance(s.value, str) and s.value.startswith(MOUNT + "/"):
                key = bucket_key(s.value, root)
                data_class = {"checkpoint_dir": "hot_checkpoints",
                              "rollout_log_dir": "rollout_logs",
                              "eval_output_dir": "eval_outputs"}[s.field]
                want = next(p for p in prefixes if p.endswith(f"/{PREFIX[data_class]}/"))
                assert key.startswith(want), (example, s.field, key, want)
                checked += 1
        for rel, text in files.items():  # every /checkpoints path in any rendered file
            for path in re.findall(r"(?<![\w/])(/checkpoints(?:/[\w.-]+)+)", text):
                key = bucket_key(path, root)
                assert any(key.startswith(p) for p in prefixes), (example, rel, path)
    assert checked >= 9


def test_framework_option() -> None:
    runner = CliRunner()
    plan = str(ROOT / "tests" / "data" / "plans" / "grpo-gcp.json")
    res = runner.invoke(app, ["render", plan, "--target", "kuberay", "--framework",
                              "verl==0.7", "-o", "/tmp/x-ptplan-none"])
    lines = [x for x in res.output.splitlines() if x.startswith("error:")]
    assert res.exit_code == 2 and len(lines) == 1
    assert "verl==0.7" in lines[0] and "verl==0.9" in lines[0] and "openrlhf==0.11" in lines[0]
    for ok in ("verl", "verl==0.9", "verl==0.9.1", "openrlhf==0.11.2"):
        files, _ = render_plan(load_plan(plan), "kuberay", framework=ok)
        assert files


def test_without_spec_the_launch_refuses_to_start() -> None:
    plan = load_plan(ROOT / "tests" / "data" / "plans" / "grpo-gcp.json")
    files, notes = render_plan(plan, "kuberay")
    words = shlex.split(files["launch/verl.sh"].splitlines()[-1])
    assert words[:3] == ["exec", "sh", "-c"] and "exit 2" in words[3] and "--spec" in words[3]
    assert any("--spec" in n for n in notes)


def test_docs_show_the_grpo_command() -> None:
    """docs/render.md shows the exact GRPO command and, per argument, the planned value."""
    text = (ROOT / "docs" / "render.md").read_text(encoding="utf-8")
    block = text[text.index("<!-- grpo-command:begin -->"):
                 text.index("<!-- grpo-command:end -->")]
    code = block.split("```bash", 1)[1].split("```", 1)[0].replace("\\\n", " ")
    la = launch("grpo-7b", "verl==0.9")
    from ptplan.rendering.pinning import source_b64

    shown = [source_b64() if w == "$(base64 -w0 optimizer/rendering/frameworks/raypin.py)" else w
             for w in shlex.split(code)]
    assert shown == la["words"]
    from ptplan.rendering.frameworks.verl_0_9 import word

    for s in la["settings"]:
        assert f"| `{word(s)}` | {s.field} = " in text, s.key


def test_every_example_and_framework_loads_in_skypilot() -> None:
    """Issue 23, part 5: each example x framework x version line, rendered for SkyPilot, loads
    with SkyPilot 0.14.1's own job-group loader and task parser (setup installing the pinned
    release, the run command, the required environment)."""
    import copy

    import sky
    from sky.utils import dag_utils

    env = [(k, "/x") for k in ("MODEL_PATH", "TRAIN_FILES", "VAL_FILES", "REWARD_FN",
                               "TEACHER_PATH")]
    loaded = 0
    for example, framework in cases():
        files, _ = _render(example, framework, "skypilot")
        (rel, text), = [(r, t) for r, t in files.items() if r.startswith("skypilot/")]
        dag = dag_utils.load_job_group_from_yaml_str(text, env_overrides=env)
        tasks = [d for d in yaml.safe_load_all(text) if d and "run" in d]
        assert [t.name for t in dag.tasks] == [t["name"] for t in tasks], (example, framework)
        for t in tasks:
            task = sky.Task.from_yaml_config(copy.deepcopy(t), env_overrides=env)
            assert framework.split("==")[0] + "==" in (task.setup or ""), (example, rel)
        loaded += 1
    assert loaded == len(cases()) >= 4
