"""Responses padded to the cap (``efficiency.pad_responses_to_cap``; docs/demand-model.md §5.3,
docs/spec.md §11): open-instruct's PPO appends pad tokens to every response up to its
``response_length`` before the log-prob, reference, value and training passes, so those passes
run prompt + cap tokens per sequence whatever was generated. The generation itself is unchanged.

By hand for the grpo-7b example (256 prompts x 8 samples x 300 steps, prompt 512, mean response
2,048 of an 8,192 cap): a scored or trained sequence is 512 + 2,048 = 2,560 tokens, or padded
512 + 8,192 = 8,704 (3.4x); the decode part's generated tokens stay 2,048 per sequence.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from later_fields import assert_left_out_at_default
from typer.testing import CliRunner

from ptplan.cli.app import app
from ptplan.demand.cluster import run_on_cluster
from ptplan.demand.model import build_demand
from ptplan.spec.defaults import applied_defaults
from ptplan.spec.project import ProjectSpec

ROOT = Path(__file__).resolve().parents[1]


def _spec(name: str = "grpo-7b", **eff: object) -> dict:
    d = yaml.safe_load((ROOT / "examples" / f"{name}.yaml").read_text())
    d["efficiency"] = {**(d.get("efficiency") or {}), **eff}
    return d


def _parts(**eff: object) -> dict[str, tuple[float, int]]:
    demand = build_demand(ProjectSpec.model_validate(_spec(**eff)))
    return {p.name: (p.tokens, p.seq_tokens) for p in demand.parts}


def test_scored_and_trained_sequences_run_to_the_cap() -> None:
    d = _spec()["data"]
    seqs = d["steps"] * d["prompts_per_step"] * d["samples_per_prompt"]
    own, padded = _parts(), _parts(pad_responses_to_cap=True)
    assert own["actor"] == (seqs * (512 + 2048), 512 + 2048)
    assert padded["actor"] == (seqs * (512 + 8192), 512 + 8192)
    for name in ("reference", "old_logprob"):
        assert padded[name] == (seqs * 8704, 8704), name
        assert own[name] == (seqs * 2560, 2560), name
    assert padded["decode"] == own["decode"]  # generation is what it was
    assert padded["prefill"] == own["prefill"]


def test_padding_never_shortens_a_step_and_lengthens_the_update() -> None:
    own = run_on_cluster(ProjectSpec.model_validate(_spec()), "H100", 16, 8, "sync")
    padded = run_on_cluster(ProjectSpec.model_validate(_spec(pad_responses_to_cap=True)),
                            "H100", 16, 8, "sync")
    assert padded.phases["rollout"] == pytest.approx(own.phases["rollout"])
    assert padded.phases["update"] > 2.0 * own.phases["update"]
    assert padded.step_seconds > own.step_seconds


def test_the_default_keeps_old_digests_and_is_listed_for_rl_only() -> None:
    plain = ProjectSpec.model_validate(_spec())
    assert_left_out_at_default(plain, ProjectSpec.model_validate(_spec(pad_responses_to_cap=True)),
                               "efficiency", "pad_responses_to_cap")
    assert "efficiency.pad_responses_to_cap = false" in applied_defaults(plain)
    sft = ProjectSpec.model_validate(_spec("sft-8b"))
    assert not any("pad_responses_to_cap" in line for line in applied_defaults(sft))


@pytest.mark.parametrize("example", ["sft-8b", "generate-32b"])
def test_a_job_with_no_scored_responses_refuses_it(tmp_path: Path, example: str) -> None:
    f = tmp_path / "job.yaml"
    f.write_text(yaml.safe_dump(_spec(example, pad_responses_to_cap=True)))
    r = CliRunner().invoke(app, ["estimate", str(f)])
    assert r.exit_code == 2, r.output
    line = r.output.strip()
    assert "\n" not in line and "pad_responses_to_cap" in line and "remove" in line
