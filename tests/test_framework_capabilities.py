"""The capability table of each pinned release (``ptplan.spec.frameworks``) against the release
itself, read from the wheels README's test command installs under ``.frameworks`` (never
imported): every cited line must still say what the table relies on, and the values the table
holds are re-read from the release's own config and argument parser, so a release that changes
under the table fails here. ``docs/frameworks.md`` holds the same table; a test compares them.
"""

from __future__ import annotations

import ast
import re
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from test_launch_frameworks import FRAMEWORKS, package_dir

from ptplan.spec.frameworks import OPENRLHF_0_11, RELEASES, VERL_0_9, Release, capability_rows

ROOT = Path(__file__).resolve().parent.parent


def _line(rel: Release, path: str, line: int) -> str:
    package_dir(rel.package)  # the pinned release is installed (fails, never skips)
    lines = (FRAMEWORKS / path).read_text(encoding="utf-8").splitlines()
    assert line <= len(lines), f"{path} has {len(lines)} lines, the table cites line {line}"
    return lines[line - 1]


def stale(rel: Release) -> list[str]:
    """The table's citations of ``rel`` whose line no longer says what the table relies on."""
    out = []
    for what, cite in sorted(rel.sources.items()):
        text = _line(rel, cite.file, cite.line)
        if not cite.file.startswith(f"{rel.package}/") or cite.text not in text:
            out.append(f"{rel.key} {what}: {cite} reads {text.strip()!r}, the table relies on "
                       f"{cite.text!r}")
    return out


@pytest.mark.parametrize("key", sorted(RELEASES))
def test_every_cited_line_still_says_it(key: str) -> None:
    assert stale(RELEASES[key]) == []


def test_a_release_that_moved_a_line_fails() -> None:
    """What a new release looks like to the check: the same claim one line off, or reworded."""
    cite = VERL_0_9.sources["checkpoints"]
    moved = replace(VERL_0_9, sources={"checkpoints": replace(cite, line=cite.line + 1)})
    reworded = replace(VERL_0_9, sources={"checkpoints": replace(
        cite, text="max_actor_ckpt_to_keep: 3")})
    assert len(stale(moved)) == 1 and len(stale(reworded)) == 1


def _verl_yaml(name: str) -> dict:
    return yaml.safe_load((package_dir("verl") / "trainer" / "config" / name)
                          .read_text(encoding="utf-8"))


def test_verl_trainer_modes_and_rollout_pool() -> None:
    cfg = _verl_yaml("_generated_ppo_trainer.yaml")
    modes = set(re.findall(r'"(\w+)"', _line(VERL_0_9, VERL_0_9.sources["pipelines"].file,
                                                VERL_0_9.sources["pipelines"].line)))
    assert modes == {"sync", "colocate_async", "separate_async"}
    # the only mode with a standalone rollout pool overlaps rollout and update: async
    assert VERL_0_9.separate_rollout_pipelines == {"async"}
    assert cfg["actor_rollout_ref"]["rollout"]["nnodes"] == 0  # no rollout pool by default
    assert cfg["reward"]["reward_model"]["enable_resource_pool"] is False
    assert cfg["trainer"]["max_actor_ckpt_to_keep"] is None
    # validation has no response cap of its own: the training cap applies
    assert "max_tokens" not in cfg["actor_rollout_ref"]["rollout"]["val_kwargs"]
    assert "response_length" in cfg["actor_rollout_ref"]["rollout"]
    assert VERL_0_9.eval_cap == "training"


def test_verl_quantization_and_dtypes() -> None:
    src = (package_dir("verl") / "workers/rollout/vllm_rollout/vllm_async_server.py").read_text(
        encoding="utf-8")
    supported = ast.literal_eval(re.search(r"_SUPPORTED_QUANTIZATION = (\[[^\]]*\])",
                                           src).group(1))
    assert "fp8" in supported and "int8" not in supported
    assert VERL_0_9.rollout_precisions == {"bf16", "fp8"}
    fsdp = _verl_yaml("engine/fsdp.yaml")
    assert fsdp["dtype"] == "bfloat16"
    assert VERL_0_9.update_precisions <= {"bf16", "fp16"}
    dist = _verl_yaml("distillation/distillation.yaml")
    assert dist["nnodes"] == 0 and dist["enabled"] is False  # the teacher needs nnodes > 0
    assert VERL_0_9.teacher_needs_own_pool


def test_verl_rollout_has_no_pipeline_parallel() -> None:
    """A rollout engine spans nodes by tensor parallel only (the render writes TP = engine GPUs)."""
    cite = VERL_0_9.sources["no_rollout_pp"]
    following = "\n".join(_line(VERL_0_9, cite.file, cite.line + i) for i in range(4))
    assert "NotImplementedError" in following and "vllm" in following


def _openrlhf_parser_source() -> str:
    return (package_dir("openrlhf") / "cli" / "train_ppo_ray.py").read_text(encoding="utf-8")


def _flag_default(src: str, flag: str) -> str:
    m = re.search(rf'"{re.escape(flag)}"[^)]*', src)
    assert m is not None, f"{flag} is gone from openrlhf/cli/train_ppo_ray.py"
    return m.group(0)


def test_openrlhf_flags_the_table_relies_on() -> None:
    src = _openrlhf_parser_source()
    assert 'choices=["bf16", "fp16"]' in _flag_default(src, "--ds.param_dtype")
    assert set(OPENRLHF_0_11.update_precisions) == {"bf16", "fp16"}
    for flag in ("--ref.num_nodes", "--reward.num_nodes", "--critic.num_nodes",
                 "--vllm.num_engines", "--train.colocate_all", "--train.async_enable",
                 "--ds.lora.rank", "--train.agent_func_path"):
        _flag_default(src, flag)
    assert "default=3" in _flag_default(src, "--ckpt.max_num")
    assert not any(f in src for f in ("--vllm.quantization", "kv_cache_dtype"))
    assert OPENRLHF_0_11.rollout_precisions == {"bf16"}


def test_openrlhf_has_no_distillation() -> None:
    root = package_dir("openrlhf")
    hits = [p for p in root.rglob("*.py") if re.search(r"distill|teacher",
                                                       p.read_text(encoding="utf-8"), re.I)]
    assert hits == [], hits
    assert "opd" not in OPENRLHF_0_11.methods


def test_docs_table_equals_code() -> None:
    doc = (ROOT / "docs" / "frameworks.md").read_text(encoding="utf-8")
    for rel in RELEASES.values():
        for row in capability_rows(rel):
            line = "| " + " | ".join(row) + " |"
            assert line in doc, f"docs/frameworks.md lacks the row {line}"
