"""Launch commands checked by the frameworks themselves, for every example × framework × version.

* **veRL 0.9.1**: the Hydra config is composed from the pinned wheel's own YAML files
  (``verl/trainer/config``; hydra-core's compose API, no veRL module imported) with the rendered
  overrides; every planned :class:`Setting` must hold its value in the composed config, and the
  start-up conditions veRL asserts (quoted from its source below) must hold.
* **OpenRLHF 0.11.2**: the rendered flags go through the release's own argument parser and its
  start-up checks: the ``if __name__ == "__main__":`` block of ``openrlhf/cli/train_ppo_ray.py``
  is taken from the installed wheel's source by AST, everything after the checks (``train``,
  ``use_ms``) cut, and executed with ``openrlhf.utils.config`` loaded from its file (the
  package ``__init__`` modules import torch/ray/deepspeed, which CI does not install).

The wheels come from README's test command (``pip install --no-deps --upgrade --target
.frameworks verl==0.9.1 openrlhf==0.11.2``: a directory apart, never on ``sys.path``); without
them these tests fail (never skip) naming that command.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import os
import shlex
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from ptplan.planfile.load import load_plan
from ptplan.rendering.frameworks import FIELDS, SUPPORTED, Setting, openrlhf_0_11
from ptplan.spec.project import load_spec

pytestmark = pytest.mark.shipped_framework
"""The examples as a user plans them: specs without ``framework:`` take verl==0.9."""

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = {"grpo-7b": "plan-grpo-7b", "opd-8b-from-32b": "plan-opd-8b-from-32b",
            "sft-8b": "plan-sft-8b"}
FOR_FRAMEWORK = {("grpo-7b", "openrlhf==0.11"): "plan-grpo-7b-openrlhf"}
"""Plans made for another release than the default (a plan renders for its own release)."""


def plan_path(example: str, framework: str) -> Path:
    """The golden plan of ``example`` made for ``framework``."""
    name = FOR_FRAMEWORK.get((example, framework), EXAMPLES[example])
    return ROOT / "tests" / "golden" / "cli" / f"{name}.json"


def spec_for(example: str, framework: str) -> Any:
    """The example's spec as that plan was made from it (``plan --framework``)."""
    from ptplan.spec.project import with_framework

    spec = load_spec(str(ROOT / "examples" / f"{example}.yaml"))
    return with_framework(spec, framework) if (example, framework) in FOR_FRAMEWORK else spec
"""Each example with its plan (the golden plan of tests/golden/cli, schema 3)."""
INSTALL = ("python -m pip install --no-deps --upgrade --target .frameworks verl==0.9.1 "
           "openrlhf==0.11.2")
FRAMEWORKS = Path(os.environ.get("PTPLAN_FRAMEWORKS", ROOT / ".frameworks"))
"""The pinned wheels, installed apart (``pip install --target``): veRL's wheel ships top-level
``tests`` and ``scripts`` packages that would shadow this repository's ``tests``."""
ENV = {"MODEL_PATH": "/m", "TRAIN_FILES": "/d/train.jsonl", "VAL_FILES": "/d/val.jsonl",
       "REWARD_FN": "/r/reward.py", "TEACHER_PATH": "/t", "REWARD_MODEL_PATH": "/rm"}


@functools.cache
def package_dir(name: str) -> Path:
    """The pinned release's package directory under :data:`FRAMEWORKS` (never imported)."""
    fw = next(f for f in SUPPORTED.values() if f.name == name)
    path = FRAMEWORKS / name
    infos = sorted(FRAMEWORKS.glob(f"{name}-*.dist-info"))
    if not path.is_dir() or not infos:
        pytest.fail(f"{name}=={fw.pin} is not under {FRAMEWORKS}; run `{INSTALL}` (README's "
                    "test command does)")
    meta = (infos[0] / "METADATA").read_text(encoding="utf-8")
    version = next(line.split(":", 1)[1].strip() for line in meta.splitlines()
                   if line.startswith("Version:"))
    assert version == fw.pin, f"{name} {version} under {FRAMEWORKS}; the render pins {fw.pin}"
    return path


@functools.cache
def launch(example: str, framework: str) -> dict[str, Any]:
    from ptplan.rendering.context import build_context
    from ptplan.rendering.facts import facts_for
    from ptplan.rendering.frameworks import parse_framework

    plan = load_plan(plan_path(example, framework))
    spec = spec_for(example, framework)
    from dataclasses import replace

    facts = replace(facts_for(plan, spec), framework=parse_framework(framework))
    return dict(build_context(plan, facts)["launch"])


def cases() -> list[tuple[str, str]]:
    out = []
    for ex in EXAMPLES:
        for fw in SUPPORTED:
            method = load_spec(str(ROOT / "examples" / f"{ex}.yaml")).method
            if fw.startswith("openrlhf") and method != "rl":
                continue  # refused in one line (test_openrlhf_refuses_opd_and_sft)
            out.append((ex, fw))
    return out


# ---- veRL: Hydra compose from the wheel's own YAML --------------------------------------------

def compose_verl(words: list[str], config_name: str) -> Any:
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    config_dir = package_dir("verl") / "trainer" / "config"
    i = next(k for k, w in enumerate(words) if w.startswith("verl.trainer.")) + 1
    overrides = [w for w in words[i:] if not w.startswith("--")]
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        return compose(config_name=config_name, overrides=overrides)


def _get(cfg: Any, key: str) -> Any:
    """The value at ``key`` as composed (interpolations such as ``${oc.env:…}`` unresolved)."""
    from omegaconf import OmegaConf

    node: Any = OmegaConf.to_container(cfg, resolve=False)
    for part in key.split("."):
        assert isinstance(node, dict) and part in node, f"{key}: no such key in the config"
        node = node[part]
    return node


@pytest.mark.parametrize(("example", "framework"),
                         [c for c in cases() if c[1].startswith("verl")])
def test_verl_composes_planned_values(example: str, framework: str) -> None:
    la = launch(example, framework)
    cfg = compose_verl(la["words"], la["config_name"])
    for s in la["settings"]:
        assert _get(cfg, s.key) == s.value, f"{example}: {s.field} → {s.key}"
    t, a, r = cfg.trainer, cfg.get("actor_rollout_ref"), None
    # veRL start-up conditions (verl 0.9.1 sources)
    assert "wandb" not in list(t.logger)  # default [console, wandb] needs a key
    if la["torchrun"]:
        assert cfg.data.use_dynamic_bsz or cfg.data.micro_batch_size_per_gpu
        assert cfg.data.max_length >= 1
        return
    r = a.rollout
    # ppo/utils check_mutually_exclusive: a micro-batch size or dynamic batching
    assert a.actor.use_dynamic_bsz or a.actor.ppo_micro_batch_size_per_gpu
    assert a.actor.ppo_max_token_len_per_gpu >= cfg.data.max_prompt_length + \
        cfg.data.max_response_length
    assert cfg.data.train_batch_size % a.actor.ppo_mini_batch_size == 0
    if t.v1.trainer_mode == "separate_async":  # trainer_separate_async.py __init__
        assert cfg.data.train_batch_size == \
            t.v1.separate_async.parameter_sync_step * a.actor.ppo_mini_batch_size
        assert r.nnodes > 0 and r.n_gpus_per_node > 0
        assert r.checkpoint_engine.backend != "naive"
        assert a.hybrid_engine is False
    else:  # ppo_trainer.yaml: all other trainers require the hybrid engine
        assert a.hybrid_engine is True
    if cfg.distillation.enabled:  # trainer_base.py init_resource_pool_mgr, distillation.py
        d = cfg.distillation
        assert d.nnodes > 0 and d.n_gpus_per_node > 0
        tm = d.teacher_models.teacher_model
        assert tm.num_replicas * tm.inference.tensor_model_parallel_size <= \
            d.nnodes * d.n_gpus_per_node
        assert d.distillation_loss.use_policy_gradient or d.distillation_loss.loss_mode != "k1"
        assert cfg.algorithm.adv_estimator != "gae"  # no critic in OPD
    assert r.name == "vllm" and r.quantization in (None, "fp8")


def test_verl_rejects_a_misspelt_key() -> None:
    """The check is real: Hydra refuses a key the 0.9.1 YAML does not have."""
    from hydra.errors import ConfigCompositionException

    la = launch("grpo-7b", "verl==0.9")
    with pytest.raises(ConfigCompositionException):
        compose_verl([*la["words"], "actor_rollout_ref.teacher.n_server_workers=2"],
                     "ppo_trainer")


# ---- OpenRLHF: its own parser and start-up checks ---------------------------------------------

@functools.cache
def openrlhf_main() -> types.CodeType:
    src = (package_dir("openrlhf") / "cli" / "train_ppo_ray.py").read_text(encoding="utf-8")
    tree = ast.parse(src)
    main = next(n for n in tree.body if isinstance(n, ast.If)
                and "__name__" in ast.unparse(n.test))
    body = []
    for stmt in main.body:
        text = ast.unparse(stmt)
        if text.startswith("train(") or "use_ms" in text.split("\n")[0]:
            continue
        body.append(stmt)
    module = ast.Module(body=body, type_ignores=[])
    return compile(module, "openrlhf/cli/train_ppo_ray.py:__main__", "exec")


def parse_openrlhf(argv: list[str]) -> Any:
    import argparse
    from datetime import datetime

    base = package_dir("openrlhf")
    code = openrlhf_main()
    spec = importlib.util.spec_from_file_location("openrlhf.utils.config",
                                                  base / "utils" / "config.py")
    assert spec and spec.loader
    config = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(config)
    stubs = {"openrlhf": types.ModuleType("openrlhf"),
             "openrlhf.utils": types.ModuleType("openrlhf.utils"),
             "openrlhf.utils.config": config}
    saved = {k: sys.modules.get(k) for k in stubs}
    old_argv = sys.argv
    ns: dict[str, Any] = {"argparse": argparse, "datetime": datetime, "os": __import__("os")}
    try:
        sys.modules.update(stubs)
        sys.argv = ["train_ppo_ray.py", *argv]
        exec(code, ns)
    finally:
        sys.argv = old_argv
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    return ns["args"]


def _attr(args: Any, key: str) -> Any:
    node = args
    for part in key.lstrip("-").split("."):
        node = getattr(node, part)
    return node


@pytest.mark.parametrize(("example", "framework"),
                         [c for c in cases() if c[1].startswith("openrlhf")])
def test_openrlhf_parses_planned_values(example: str, framework: str) -> None:
    la = launch(example, framework)
    args = parse_openrlhf(openrlhf_0_11.argv(la["words"], ENV))
    for s in la["settings"]:
        want = ENV[s.value[1:]] if isinstance(s.value, str) and s.value.startswith("$") \
            else s.value
        got = _attr(args, s.key)
        if s.key == "--reward.remote_url":
            got = got[0]  # the parser splits the URL list
        assert got == want, f"{example}: {s.field} → {s.key}"
    assert args.critic.model_name_or_path is None  # group_norm: no critic group
    assert args.reward.model_name_or_path is None  # rule-based: no reward-model group
    assert args.logger.wandb.key is None


def test_openrlhf_checks_are_real() -> None:
    """The parser rejects pre-0.10.2 names, and its checks fire: group_norm with one sample."""
    la = launch("grpo-7b", "openrlhf==0.11")
    with pytest.raises(SystemExit):
        parse_openrlhf([*openrlhf_0_11.argv(la["words"], ENV), "--actor_num_nodes=1"])
    argv = [w for w in openrlhf_0_11.argv(la["words"], ENV)
            if not w.startswith("--rollout.n_samples_per_prompt")]
    with pytest.raises(AssertionError, match="n_samples_per_prompt"):
        parse_openrlhf(argv)


def test_openrlhf_refuses_opd_and_sft() -> None:
    from ptplan.core.errors import InputError

    for ex in ("opd-8b-from-32b", "sft-8b"):
        with pytest.raises(InputError, match=r"verl==0\.9") as err:
            launch(ex, "openrlhf==0.11")
        assert "\n" not in str(err.value)


# ---- the mapping: code, docs, rendered commands -----------------------------------------------

def test_every_setting_is_in_the_mapping_and_the_command() -> None:
    """Walk every example × framework: each planned setting's key is the mapping's key for
    its field, and the rendered command carries exactly that value."""
    from ptplan.rendering.frameworks import verl_0_9

    seen: set[tuple[str, str]] = set()
    for example, framework in cases():
        la = launch(example, framework)
        col = "openrlhf" if framework.startswith("openrlhf") else \
            ("verl-sft" if la["torchrun"] else "verl")
        text = shlex.join(la["words"])
        for s in la["settings"]:
            assert isinstance(s, Setting)
            assert FIELDS[s.field][col] == s.key, (example, s.field)
            seen.add((s.field, col))
            if col == "openrlhf":
                if isinstance(s.value, bool):
                    assert (s.key in la["words"]) == s.value or s.key == "--reward.remote_url"
                elif str(s.value).startswith("$"):
                    assert f'{s.key} "{s.value}"' in la["words"][2]
                else:
                    assert f"{s.key}={s.value}" in la["words"], (example, s.key)
            else:
                assert verl_0_9.word(s) in la["words"], (example, s.key, text[:200])
    # the planned quantities the issue lists all arrive in some command
    fields = {f for f, _ in seen}
    for f in ("prompts_per_step", "samples_per_prompt", "prompt_tokens", "max_response_tokens",
              "rollout_precision", "kv_cache_precision", "update_precision", "dynamic_batch",
              "gpu_memory_utilization", "eval_every_steps", "eval_prompts",
              "eval_samples_per_prompt", "checkpoint_every_steps", "checkpoint_contents",
              "reward_function", "reference", "teacher_weights", "teacher_replicas", "steps",
              "epochs", "logger", "checkpoint_dir", "rollout_log_dir"):
        assert f in fields, f


def _doc_mapping() -> dict[str, dict[str, str]]:
    text = (ROOT / "docs" / "render.md").read_text(encoding="utf-8")
    start = text.index("<!-- mapping:begin -->")
    rows = text[start:text.index("<!-- mapping:end -->")].splitlines()
    out = {}
    for line in rows:
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0] not in ("field", "") and not set(cells[0]) <= set("-"):
            out[cells[0]] = {"source": cells[1], "verl": cells[2].replace("—", ""),
                             "verl-sft": cells[3].replace("—", ""),
                             "openrlhf": cells[4].replace("—", "")}
    return out


def test_docs_mapping_equals_code() -> None:
    doc = _doc_mapping()
    assert set(doc) == set(FIELDS)
    for field, row in FIELDS.items():
        for col in ("verl", "verl-sft", "openrlhf"):
            assert doc[field][col] == row[col], (field, col)


def test_verl_megatron_layout_composes() -> None:
    """A plan whose update was priced with tensor parallel runs veRL's Megatron engine
    (``--config-name=ppo_megatron_trainer``) with that layout."""
    from dataclasses import replace

    from ptplan.planfile.schema import ParallelLayout
    from ptplan.rendering.context import build_context
    from ptplan.rendering.facts import facts_for

    plan = load_plan(ROOT / "tests" / "golden" / "cli" / "plan-grpo-7b.json")
    phases = [p.model_copy(update={"parallel_layout": ParallelLayout(
        tp=2, pp=2, cp=1, dp=1, zero_stage=1, optimizer_offload=True)})
        if p.name == "update" else p for p in plan.phases]
    plan = plan.model_copy(update={"phases": phases})
    facts = facts_for(plan, load_spec(str(ROOT / "examples" / "grpo-7b.yaml")))
    la = build_context(plan, replace(facts))["launch"]
    assert la["config_name"] == "ppo_megatron_trainer"
    assert "--config-name=ppo_megatron_trainer" in la["words"]
    cfg = compose_verl(la["words"], la["config_name"])
    for s in la["settings"]:
        assert _get(cfg, s.key) == s.value, s.key
    assert cfg.actor_rollout_ref.actor.strategy == "megatron"
    assert cfg.actor_rollout_ref.actor.megatron.tensor_model_parallel_size == 2


def test_dapo_dynamic_sampling_in_both_frameworks() -> None:
    """DAPO turns on each framework's group filtering; both parsers accept it."""
    from dataclasses import replace

    from ptplan.rendering.context import build_context
    from ptplan.rendering.facts import facts_for
    from ptplan.rendering.frameworks import parse_framework

    plan = load_plan(ROOT / "tests" / "golden" / "cli" / "plan-grpo-7b.json")
    plan = plan.model_copy(update={"algorithm": "dapo"})
    spec = load_spec(str(ROOT / "examples" / "grpo-7b.yaml"))
    spec = spec.model_copy(update={"algorithm": "dapo"})
    for fw in ("verl==0.9", "openrlhf==0.11"):
        facts = replace(facts_for(plan, spec), framework=parse_framework(fw))
        la = build_context(plan, facts)["launch"]
        assert any(s.field == "dynamic_sampling" and s.value is True for s in la["settings"])
        assert any("DAPO" in n for n in la["notes"])
        if fw.startswith("verl"):
            cfg = compose_verl(la["words"], la["config_name"])
            assert cfg.algorithm.filter_groups.enable is True
            assert cfg.algorithm.adv_estimator == "grpo"
        else:
            args = parse_openrlhf(openrlhf_0_11.argv(la["words"], ENV))
            assert args.algo.dynamic_filtering_enable is True
