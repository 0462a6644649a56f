"""``spec_match`` (``verify_against_spec``) beyond the SFT plan of ``test_verifier_rules``: the
RL plans of every pipeline mode, the policy the plan records, and a bad phase never hiding the
next phase's violations.

The plans are the pinned example plans (``tests/golden/cli``) and two more the planner makes
from ``examples/grpo-7b.yaml`` with ``pipeline`` fixed to ``colocated`` and to ``sync`` (the
pinned GRPO plan is async). Each test starts from a plan that matches its spec and edits one
figure, so the expected violation follows from the edit alone.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ptplan.cli.app import app
from ptplan.planfile import verify
from ptplan.planfile.schema import Plan
from ptplan.spec.project import load_spec

pytestmark = pytest.mark.shipped_framework
"""The golden plans are the examples as a user plans them (framework verl==0.9 by default)."""

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden" / "cli"
EXAMPLE_PLANS = {"grpo-7b": "plan-grpo-7b.json", "opd-8b-from-32b": "plan-opd-8b-from-32b.json",
                 "sft-8b": "plan-sft-8b.json"}
runner = CliRunner()

Plan_ = dict[str, Any]


def _phase(p: Plan_, name: str) -> dict[str, Any]:
    return next(x for x in p["phases"] if x["name"] == name)


def _pool(p: Plan_, name: str) -> dict[str, Any]:
    return next(x for x in p["pools"] if x["name"] == name)


def _spec_text(example: str, pipeline: str | None = None) -> str:
    text = (ROOT / "examples" / f"{example}.yaml").read_text(encoding="utf-8")
    if pipeline is not None:
        assert "\npipeline: auto\n" in text
        text = text.replace("\npipeline: auto\n", f"\npipeline: {pipeline}\n")
    return text


@pytest.fixture(scope="module")
def grpo_modes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Plan_, Any]]:
    """GRPO plans made by the planner with the pipeline fixed, and their specs."""
    out: dict[str, tuple[Plan_, Any]] = {}
    d = tmp_path_factory.mktemp("grpo-modes")
    for mode in ("colocated", "sync"):
        spec_path = d / f"grpo-{mode}.yaml"
        # a sync pipeline on separate pools is the abstract plan's (veRL 0.9 runs none)
        extra = "framework: any\n" if mode == "sync" else ""
        spec_path.write_text(_spec_text("grpo-7b", mode) + extra, encoding="utf-8")
        plan_path = d / f"plan-{mode}.json"
        res = runner.invoke(app, ["plan", str(spec_path), "--format", "json", "--no-timings",
                                  "-o", str(plan_path)])
        assert res.exit_code == 0, res.output
        plan = json.loads(plan_path.read_text(encoding="utf-8"))
        assert plan["pipeline_mode"] == mode
        out[mode] = (plan, load_spec(str(spec_path)))
    return out


def _example(name: str) -> tuple[Plan_, Any]:
    plan = json.loads((GOLDEN / EXAMPLE_PLANS[name]).read_text(encoding="utf-8"))
    return plan, load_spec(str(ROOT / "examples" / f"{name}.yaml"))


def _match(plan: Plan_, spec: Any) -> list[str]:
    return verify.verify_against_spec(Plan.model_validate(plan), spec)


@pytest.mark.parametrize("name", sorted(EXAMPLE_PLANS))
def test_example_plans_match_their_specs(name: str) -> None:
    """The async RL plans (spot rollout and scoring nodes, effective fraction 0.99995) match:
    busy hours are recomputed on Σ nodes × effective fraction, with the drain of async
    generation."""
    assert _match(*_example(name)) == []


@pytest.mark.parametrize("mode", ["colocated", "sync"])
def test_grpo_plans_of_each_pipeline_match(mode: str, grpo_modes) -> None:
    plan, spec = grpo_modes[mode]
    assert _match(plan, spec) == []


@pytest.mark.parametrize("mode", ["colocated", "sync"])
def test_grpo_rollout_busy_off_by_one_percent_is_named(mode: str, grpo_modes) -> None:
    """Rollout busy hours depend on the pipeline (a colocated engine has less memory beside the
    training state; sync generation waits for the longest response): 1 % off is a mismatch."""
    plan, spec = grpo_modes[mode]
    bad = copy.deepcopy(plan)
    _phase(bad, "rollout")["busy_hours"] *= 1.01
    got = _match(bad, spec)
    assert any(x.startswith("spec_match: phase rollout busy ") for x in got), got


def test_colocated_figures_checked_as_sync_do_not_match(grpo_modes) -> None:
    """The colocated rollout engine gets only part of the HBM beside the resident training
    state (``colocated_rollout_memory_fraction``): checked as a sync plan (the whole HBM, same
    tail) its busy hours do not match. The recomputation uses the plan's own mode."""
    plan, spec = grpo_modes["colocated"]
    bad = copy.deepcopy(plan)
    bad["pipeline_mode"] = "sync"
    got = _match(bad, spec)
    assert any("phase rollout busy" in x for x in got), got


def test_async_figures_checked_as_sync_do_not_match() -> None:
    plan, spec = _example("grpo-7b")
    bad = copy.deepcopy(plan)
    bad["pipeline_mode"] = "sync"
    got = _match(bad, spec)
    assert any("phase rollout busy" in x for x in got), got


def test_spot_fraction_enters_the_effective_nodes() -> None:
    """The rollout pool's one spot allocation: effective nodes = nodes × fraction. Recorded
    as on-demand (fraction 1) the same busy hours are 1/0.99995 too many node-hours: the
    busy hours and the throughput no longer match the model."""
    plan, spec = _example("grpo-7b")
    alloc = _pool(plan, "rollout")["allocations"][0]
    assert alloc["capacity_type"] == "spot" and alloc["effective_fraction"] < 1.0
    bad = copy.deepcopy(plan)
    _pool(bad, "rollout")["allocations"][0]["effective_fraction"] = 1.0
    got = _match(bad, spec)
    assert any("phase rollout busy" in x for x in got), got


# ---- a bad phase does not hide the next phase's violations -------------------------------------

def _first_unknown_pool(p: Plan_) -> None:
    _phase(p, "rollout")["pool"] = "nowhere"


def _first_unknown_gpu(p: Plan_) -> None:
    _pool(p, "rollout")["gpu"] = "NoSuchGPU"


def _first_precision_does_not_fit(p: Plan_) -> None:
    _phase(p, "rollout")["precision"] = "int4"


def _first_no_effective_nodes(p: Plan_) -> None:
    _phase(p, "rollout")["usable_node_fraction"] = 0.0


FIRST = {"unknown_pool": (_first_unknown_pool, "names unknown pool"),
         "unknown_gpu": (_first_unknown_gpu, "unknown GPU"),
         "precision": (_first_precision_does_not_fit, "does not fit"),
         "no_effective_nodes": (_first_no_effective_nodes, "no effective nodes")}


@pytest.mark.parametrize("case", sorted(FIRST))
def test_a_bad_phase_does_not_hide_later_ones(case: str) -> None:
    """The GRPO plan's phases in order: rollout, eval, weight_sync (a stall), scoring, update,
    checkpoint. The rollout phase is broken so its check stops early; the update phase's busy
    hours are 1 % off and must still be named."""
    brk, words = FIRST[case]
    plan, spec = _example("grpo-7b")
    names = [ph["name"] for ph in plan["phases"]]
    assert names.index("rollout") < names.index("weight_sync") < names.index("update")
    bad = copy.deepcopy(plan)
    brk(bad)
    _phase(bad, "update")["busy_hours"] *= 1.01
    got = _match(bad, spec)
    assert any(words in x for x in got), got
    assert any(x.startswith("spec_match: phase update busy ") for x in got), got


def test_after_a_stall_phase_later_phases_are_checked() -> None:
    """weight_sync has no throughput (a stall) and is skipped; scoring after it is checked."""
    plan, spec = _example("grpo-7b")
    bad = copy.deepcopy(plan)
    _phase(bad, "scoring")["tokens_per_node_hour"] *= 1.01
    got = _match(bad, spec)
    assert got == [x for x in got if "phase scoring throughput" in x] and got, got


def test_a_phase_the_spec_lacks_does_not_hide_the_others() -> None:
    """The GRPO plan against the SFT spec: the spec has no rollout, eval or scoring to do, and the
    update's tokens differ (SFT's 1.23e9 against GRPO's 1.57e9)."""
    plan, _ = _example("grpo-7b")
    _, sft = _example("sft-8b")
    got = _match(plan, sft)
    assert any("has no rollout phase" in x for x in got), got
    assert any("has no scoring phase" in x for x in got), got
    want = 200_000 * 2048 * 3
    assert any(x.startswith("spec_match: phase update tokens ") and f"{want:.6g}" in x
               for x in got), got


# ---- edge figures ------------------------------------------------------------------------------

def test_zero_busy_hours_is_a_busy_mismatch_not_a_crash() -> None:
    """A work phase recorded with no busy time: the busy hours differ from the model, and the
    check does not divide by them (a crash before). (A throughput of 0 next to it, as this
    test first had it, is refused by the schema since #21: work phases run at a rate > 0.)"""
    plan, spec = _example("sft-8b")
    bad = copy.deepcopy(plan)
    _phase(bad, "update")["busy_hours"] = 0.0
    got = _match(bad, spec)
    assert got and "busy" in [x.split(" ")[3] for x in got], got


def test_missing_layout_is_a_layout_mismatch() -> None:
    """A version-3 plan must record the update's parallel layout; none recorded differs from the
    model's."""
    plan, spec = _example("sft-8b")
    assert plan["schema_version"] >= 3
    bad = copy.deepcopy(plan)
    _phase(bad, "update")["parallel_layout"] = None
    got = _match(bad, spec)
    assert any(x.startswith("spec_match: phase update layout None != model") for x in got), got


# ---- the policy the plan records ---------------------------------------------------------------

def test_recorded_policy_forbids_the_phase_precision() -> None:
    """The GRPO plan's rollout runs fp8 (veRL's OPD plan rolls out on A100s in bf16 since
    issue #40); a recorded policy that allows only bf16 for rollout (and says nothing of other
    phases) makes that precision not allowed, for rollout only."""
    plan, spec = _example("grpo-7b")
    assert _phase(plan, "rollout")["precision"] == "fp8"
    bad = copy.deepcopy(plan)
    bad["policy"]["phases"]["rollout"]["precisions"] = ["bf16"]
    got = _match(bad, spec)
    assert "spec_match: phase rollout precision fp8 is not allowed" in got, got
    assert not any("precision" in x and "rollout" not in x for x in got), got


def test_figures_are_recomputed_under_the_recorded_policy() -> None:
    """fp8 KV cache (``kv_cache_fp8``) halves the KV bytes of the fp8 rollout and so changes its
    batch and busy hours: the plan, made without it, does not match under a policy with it."""
    plan, spec = _example("grpo-7b")
    assert plan["policy"]["kv_cache_fp8"] is False
    bad = copy.deepcopy(plan)
    bad["policy"]["kv_cache_fp8"] = True
    got = _match(bad, spec)
    assert any(x.startswith("spec_match: phase rollout busy ") for x in got), got


def test_invalid_policy_record_says_what_is_done() -> None:
    plan, spec = _example("sft-8b")
    bad = copy.deepcopy(plan)
    bad["policy"] = {"no_such_key": 1}
    got = _match(bad, spec)
    assert got == ["spec_match: the plan's policy record is not a valid policy; demand "
                   "recomputed under the default policy"], got


def test_invalid_policy_block_names_the_validation_error() -> None:
    """``check`` without a spec: the policy family names pydantic's first line (the count of
    errors and the model), not the whole multi-line report."""
    plan, _ = _example("sft-8b")
    bad = copy.deepcopy(plan)
    bad["policy"] = {"no_such_key": 1}
    got = verify.check_policy(Plan.model_validate(bad))
    assert got == ["policy policy: the plan's policy block is invalid "
                   "(2 validation errors for Policy)"], got
