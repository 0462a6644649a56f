"""``method: generate``: a sampling-only job (issue #18, part 1).

Its spec takes prompts × samples × lengths and rejects what trains; its demand is the rollout's
prefill and decode only (one offline batch), with no update, no checkpoint and no weight sync; it
plans on one stateless pool that the default policy lets run on spot; the verifier re-checks it
(the rule cases are in ``tests/test_verifier_rules.py``); ``render`` says in one line that no
framework launch fits.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ptplan.cli.app import app
from ptplan.core.errors import InputError
from ptplan.demand.model import build_demand
from ptplan.spec.defaults import applied_defaults
from ptplan.spec.project import load_spec, parse_spec

pytestmark = pytest.mark.shipped_framework
"""The golden plans are the examples as a user plans them (framework verl==0.9 by default)."""

ROOT = Path(__file__).resolve().parent.parent
EX = ROOT / "examples" / "generate-32b.yaml"
GOLDEN = ROOT / "tests" / "golden" / "cli" / "plan-generate-32b.json"
runner = CliRunner()

MODEL = {"params_b": 32.8, "layers": 64, "hidden_size": 5120, "heads": 64, "kv_heads": 8,
         "head_dim": 128}
DATA = {"prompts": 1000, "samples_per_prompt": 4, "prompt_tokens": 512, "response_tokens": 1536}


def _spec(**over):
    base = {"name": "g", "method": "generate", "model": dict(MODEL), "data": dict(DATA)}
    base.update(over)
    return parse_spec(base)


@pytest.mark.parametrize(("over", "words"), [
    ({"eval": {"every_steps": 1, "prompts": 10, "response_tokens": 10}}, "eval applies"),
    ({"algorithm": "grpo"}, "algorithm applies to method rl only"),
    ({"reward_model": MODEL}, "reward_model applies to trained methods"),
    ({"pipeline": "async"}, "one pool"),
    ({"checkpoints": {"keep_hot": 2}}, "a generate job writes no checkpoint"),
    ({"model": {**MODEL, "finetune": "lora"}}, "model.finetune applies to trained methods"),
    ({"data": {**DATA, "steps": 3}}, "data.steps is not used by method generate"),
    ({"data": {**DATA, "examples": 3}}, "data.examples is not used by method generate"),
    ({"data": {k: v for k, v in DATA.items() if k != "prompts"}},
     "data.prompts is required for method generate"),
    ({"precisions": {"update": ["bf16"]}}, "list rollout only"),
])
def test_generate_rejects_what_trains(over: dict, words: str) -> None:
    with pytest.raises(InputError, match=re.escape(words)):
        _spec(**over)


def test_generated_by_and_prompts_belong_to_their_methods() -> None:
    sft = {"name": "s", "method": "sft", "model": dict(MODEL),
           "data": {"examples": 10, "tokens_per_example": 10, "generated_by": "gen.yaml"}}
    assert parse_spec(sft).data.generated_by == "gen.yaml"
    rl = {"name": "r", "method": "rl", "algorithm": "grpo", "model": dict(MODEL),
          "data": {"steps": 1, "prompts_per_step": 1, "samples_per_prompt": 1,
                   "prompt_tokens": 1, "response_tokens": 1, "generated_by": "gen.yaml"}}
    with pytest.raises(InputError, match=re.escape("data.generated_by is not used by method rl")):
        parse_spec(rl)
    with pytest.raises(InputError, match=re.escape("data.prompts is not used by method sft")):
        parse_spec({**sft, "data": {"examples": 10, "tokens_per_example": 10, "prompts": 3}})


def test_generate_demand_by_hand() -> None:
    """Decode: prompts × samples × response tokens; prefill with prefix caching: each prompt
    once, each further sample its last partial 16-token block plus one block, (512 mod 16) + 16
    = 16 of 512 tokens; no update, checkpoint or weight sync; one run of every sequence."""
    spec = _spec()
    d = build_demand(spec)
    assert d.phases == ("rollout",)
    decode = next(p for p in d.parts if p.kind == "decode")
    prefill = next(p for p in d.parts if p.kind == "prefill")
    assert decode.tokens == 1000 * 4 * 1536
    assert decode.runs == 1 and decode.run_sequences == 4000
    assert prefill.tokens == pytest.approx(1000 * (1 + 3 * 16 / 512) * 512)
    assert d.checkpoints == 0 and d.checkpoint_gb > 0 and d.checkpoint_stall_hours == 0
    assert d.weight_sync_gb_per_step == 0 and d.steps == 1
    shown = applied_defaults(spec)
    assert "data.max_response_tokens = 3072 (2 x mean)" in shown
    assert not any(x.startswith(("checkpoints.", "efficiency.train_mfu", "pipeline")) for x in
                   shown)
    no_cache = _spec(efficiency={"prefix_caching": False})
    assert next(p for p in build_demand(no_cache).parts if p.kind == "prefill").tokens == \
        4000 * 512


def test_generate_plan_is_one_stateless_spot_pool() -> None:
    """The pinned plan of the example (the planner's own output, tests/test_golden_cli.py):
    one pool running rollout only, on spot (the default policy allows spot for rollout), no
    weight sync, no checkpoint storage."""
    plan = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert plan["method"] == "generate"
    (pool,) = plan["pools"]
    assert pool["phases"] == ["rollout"]
    assert {a["capacity_type"] for a in pool["allocations"]} == {"spot"}
    assert [p["name"] for p in plan["phases"]] == ["rollout"]
    assert plan["weight_sync_gb_per_node_step"] == 0
    assert not any("checkpoint" in s["data_class"] for s in plan["storage"])
    rollout = plan["phases"][0]
    assert rollout["tokens"] == pytest.approx(50000 * 4 * 1536)


def test_check_with_spec_accepts_the_generate_plan() -> None:
    result = runner.invoke(app, ["check", str(GOLDEN), "--spec", str(EX)])
    assert result.exit_code == 0, result.output
    other = load_spec(str(EX)).model_copy(update={"name": "other"})
    assert other.name == "other"


def test_render_says_no_launch_fits(tmp_path: Path) -> None:
    result = runner.invoke(app, ["render", str(GOLDEN), "-t", "all", "-o", str(tmp_path),
                                 "--spec", str(EX)])
    assert result.exit_code == 0, result.output
    notes = [x for x in result.output.splitlines() if "no launch for method generate" in x]
    assert len(notes) == 1, result.output
    script = (tmp_path / "launch" / "verl.sh").read_text(encoding="utf-8")
    assert "exit 2" in script.splitlines()[-1]
    assert "verl.trainer" not in script
