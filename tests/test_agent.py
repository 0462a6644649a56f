"""Multi-turn tool-calling rollouts (``agent:``, docs/demand-model.md §4.8, issue #25).

Hand-derived cases: one turn without tools is today's single-turn model; a longer tool wait
never shortens a step; enough episodes in flight hide the tools up to the KV limit; the prefix
cache survives a wait only in the KV the decoding sequences leave; bad sections are one line,
exit 2.
"""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import assert_one_line, example_dict

from ptplan.core.errors import InputError
from ptplan.core.hardware import resolve_gpu
from ptplan.demand import agent as ag
from ptplan.demand.cells import phase_cell
from ptplan.demand.decode import decode_engine, rollout_batch, rollout_of
from ptplan.demand.model import build_demand
from ptplan.spec.project import ProjectSpec, parse_spec

H100 = resolve_gpu("H100")
ROOT = Path(__file__).resolve().parents[1]
AGENT = {"turns": 8, "tokens_per_turn": 256, "observation_tokens_per_turn": 512,
         "tool_latency_s": {"mean": 4, "p90": 15},
         "sandbox": {"vcpus": 2, "memory_gib": 4, "startup_s": 20},
         "concurrency_per_replica": 64}


def spec(agent: dict[str, Any] | None = None, **data: Any) -> ProjectSpec:
    d = example_dict("grpo-7b.yaml")
    d.pop("eval", None)
    d["data"].update(steps=10, prompts_per_step=32)
    d["data"].update(data)
    if agent is not None:
        d["data"].pop("response_tokens", None)
        if agent["turns"] > 0:
            d["data"]["max_response_tokens"] = 2 * agent["turns"] * agent["tokens_per_turn"]
        d["agent"] = agent
    return parse_spec(d)


def agent(**over: Any) -> dict[str, Any]:
    a = copy.deepcopy(AGENT)
    for k, v in over.items():
        a[k] = v
    return a


def rollout_seconds(s: ProjectSpec, gpus: float = 16.0) -> float:
    pc = phase_cell(build_demand(s), "rollout", H100, "bf16")
    assert pc.fits and pc.timing is not None, pc.reason
    return float(pc.timing.busy_seconds(gpus))


# ---------------------------------------------------------------------------------- the spec
def test_response_tokens_derived_from_turns() -> None:
    s = spec(agent())
    assert s.data.response_tokens == 8 * 256
    assert s.agent is not None and s.agent.tool_calls == 7 and s.agent.observation_tokens == 7 * 512


@pytest.mark.parametrize(("change", "words"), [
    ({"tool_latency_s": {"mean": -1, "p90": 2}}, "agent.tool_latency_s.mean"),
    ({"tool_latency_s": {"mean": 5, "p90": 2}}, "p90 2 is below mean 5"),
    ({"concurrency_per_replica": 0}, "agent.concurrency_per_replica"),
    ({"turns": 0}, "agent.turns"),
    ({"sandbox": {"vcpus": 0, "memory_gib": 4}}, "agent.sandbox.vcpus"),
    ({"sandbox": {"vcpus": 2, "memory_gib": 4, "startup": 3}}, "unknown key 'startup'"),
    ({"tool_latency_s": {"mean": True, "p90": 2}}, "agent.tool_latency_s.mean"),
])
def test_bad_agent_section_is_one_line(change: dict[str, Any], words: str) -> None:
    with pytest.raises(InputError) as info:
        spec(agent(**change))
    assert_one_line(str(info.value))
    assert words in str(info.value)
    assert info.value.exit_code == 2


def test_response_tokens_must_agree_and_method_must_generate() -> None:
    d = example_dict("grpo-7b.yaml")
    d["agent"] = agent(turns=4)
    with pytest.raises(InputError, match=r"data.response_tokens 2048 differs from agent.turns "
                                         r"× agent.tokens_per_turn = 1024"):
        parse_spec(d)
    sft = example_dict("sft-8b.yaml")
    sft["agent"] = AGENT
    with pytest.raises(InputError, match="agent applies to methods rl and opd"):
        parse_spec(sft)


def test_cli_bad_agent_exits_2(tmp_path: Path) -> None:
    import yaml

    d = example_dict("grpo-7b.yaml")
    d["data"].pop("response_tokens")
    d["agent"] = agent(tool_latency_s={"mean": 9, "p90": 3})
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(d))
    r = subprocess.run([sys.executable, "-m", "ptplan.cli.app", "estimate", str(path)],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    assert "p90 3 is below mean 9" in r.stderr + r.stdout


# -------------------------------------------------------------------------- the demand model
def test_one_turn_without_tools_is_the_single_turn_model() -> None:
    one = agent(turns=1, tokens_per_turn=2048, observation_tokens_per_turn=777,
                tool_latency_s={"mean": 0, "p90": 0}, sandbox=None,
                concurrency_per_replica=10**6)
    single = spec(max_response_tokens=4096)
    multi = spec(one)
    assert multi.data.response_tokens == single.data.response_tokens
    assert multi.max_response_tokens == single.max_response_tokens
    for phase in ("rollout", "scoring", "update"):
        for g in (8.0, 16.0, 64.0):
            a = phase_cell(build_demand(single), phase, H100, "bf16").timing
            b = phase_cell(build_demand(multi), phase, H100, "bf16").timing
            assert a is not None and b is not None
            assert float(b.busy_seconds(g)) == pytest.approx(float(a.busy_seconds(g)),
                                                             rel=1e-12)


@pytest.mark.parametrize("gpus", [8.0, 32.0, 128.0])
def test_longer_tool_latency_never_shortens_a_step(gpus: float) -> None:
    prev = 0.0
    for mean in (0.0, 1.0, 4.0, 15.0, 60.0, 300.0):
        t = rollout_seconds(spec(agent(tool_latency_s={"mean": mean, "p90": 2 * mean})), gpus)
        assert t >= prev * (1 - 1e-12), (mean, t, prev)
        prev = t
    # and at a fixed mean, a longer tail (p90) never shortens it either
    a = rollout_seconds(spec(agent(tool_latency_s={"mean": 4, "p90": 4})), gpus)
    b = rollout_seconds(spec(agent(tool_latency_s={"mean": 4, "p90": 40})), gpus)
    assert b >= a


def _engine(s: ProjectSpec) -> tuple[Any, Any, Any]:
    part = next(p for p in build_demand(s).parts if p.name == "decode" and p.phase == "rollout")
    from ptplan.demand.decode import Conditions

    e = decode_engine(part, H100, "bf16", s, 0, Conditions())
    assert not isinstance(e, str)
    return part, e, rollout_of(part)


def test_enough_concurrency_hides_tools_up_to_the_kv_limit() -> None:
    few = spec(agent(concurrency_per_replica=8, tool_latency_s={"mean": 30, "p90": 60}))
    many = spec(agent(concurrency_per_replica=100_000, tool_latency_s={"mean": 30, "p90": 60}))
    part, e, ro = _engine(many)
    from ptplan.demand.inference import effective_batch

    kv_batch, _ = effective_batch(e, ro)
    batch, _, loop = rollout_batch(e, part, many)
    assert loop is not None and batch == kv_batch and loop.idle_share == pytest.approx(0.0)
    part_f, e_f, _ = _engine(few)
    batch_f, _, loop_f = rollout_batch(e_f, part_f, few)
    assert loop_f is not None and loop_f.batch < 8 and loop_f.idle_share > 0.5
    assert batch_f == max(1, int(loop_f.batch))
    # b* is the fixed point c·s(b*)
    s = ag.active_share(e_f, rollout_of(part_f), few.agent, loop_f.batch)  # type: ignore[arg-type]
    assert loop_f.batch == pytest.approx(8 * s, rel=1e-6)
    # hidden: beyond the KV limit more episodes in flight do not speed the decode up
    t_many = rollout_seconds(many, 64.0)
    t_more = rollout_seconds(spec(agent(concurrency_per_replica=200_000,
                                        tool_latency_s={"mean": 30, "p90": 60})), 64.0)
    assert t_more >= t_many * (1 - 1e-9)
    assert rollout_seconds(few, 8.0) > rollout_seconds(many, 8.0)


def test_prefix_cache_survives_a_wait_only_in_the_kv_left_over() -> None:
    s = spec(agent())
    _, e, ro = _engine(s)
    a = s.agent
    assert a is not None
    ctx = ro.prompt_tokens + ro.lengths.mean_age
    b = 10.0
    free = e.kv_capacity_tokens - b * ctx
    expect = min(1.0, max(0.0, free / ((a.concurrency_per_replica - b) * ctx)))
    assert ag.cache_hit_share(e, ro, a, b, True) == pytest.approx(expect)
    assert ag.cache_hit_share(e, ro, a, b, False) == 0.0
    assert ag.cache_hit_share(e, ro, a, 64.0, True) == 1.0  # nothing waits
    # Σ_{i=2..K} (P + (i−1)τ + (i−2)o) for K=8, τ=256, o=512, P=512
    assert ag.context_tokens_reprefilled(512, a) == sum(
        512 + (i - 1) * 256 + (i - 2) * 512 for i in range(2, 9))


def test_eviction_costs_time_and_prefix_caching_off_costs_more() -> None:
    on = spec(agent(concurrency_per_replica=4000), prompts_per_step=512)
    part, e, _ = _engine(on)
    loop = rollout_batch(e, part, on)[2]
    assert loop is not None and loop.cache_hit_share < 1.0 and loop.reprefill_tokens > 0
    roomy = spec(agent(concurrency_per_replica=loop.kv_batch), prompts_per_step=512)
    d = on.model_dump()
    d["efficiency"]["prefix_caching"] = False
    off = ProjectSpec.model_validate(d)
    assert rollout_seconds(off, 8.0) > rollout_seconds(on, 8.0) >= rollout_seconds(roomy, 8.0)


def test_observations_lengthen_trained_sequences_and_prefill() -> None:
    s = spec(agent())
    d = build_demand(s)
    a = s.agent
    assert a is not None
    per = 512 + 8 * 256 + 7 * 512  # P + K·τ + (K−1)·o
    actor = next(p for p in d.parts if p.name == "actor")
    assert actor.tokens == 10 * 32 * 8 * per
    prefill = next(p for p in d.parts if p.phase == "rollout" and p.name == "prefill")
    no_obs = build_demand(spec(agent(observation_tokens_per_turn=0)))
    base = next(p for p in no_obs.parts if p.phase == "rollout" and p.name == "prefill")
    assert prefill.tokens - base.tokens == pytest.approx(10 * 32 * 8 * 7 * 512)


def test_floor_holds_the_slowest_episodes_tool_waits() -> None:
    s = spec(agent(tool_latency_s={"mean": 100, "p90": 400}))
    t = rollout_seconds(s, 4096.0)  # so many GPUs that only the floor binds
    _, _, ro = _engine(s)
    # the longest episode of 256 makes (K − 1)·ℓ*/μ = 7·ℓ*/2048 tool calls
    calls = 7 * ro.longest / ro.lengths.mean
    assert ro.longest > ro.lengths.mean and ag.slowest_episode_calls(ro, s.agent) == calls
    assert t >= 10 * (calls * 400 + 20)
    without = rollout_seconds(spec(agent(tool_latency_s={"mean": 0, "p90": 0},
                                         sandbox=None)), 4096.0)
    assert t == pytest.approx(without + 10 * (calls * 400 + 20), rel=1e-9)
    assert np.isfinite(t)


def test_tool_workers_bound_a_step_by_the_tool_work() -> None:
    free = spec(agent(tool_latency_s={"mean": 2, "p90": 3}))
    capped = spec(agent(tool_latency_s={"mean": 2, "p90": 3}, tool_workers=16))
    _, _, ro = _engine(capped)
    assert ro.sequences == 32 * 8
    work = 256 * 7 * 2 / 16  # N·(K − 1)·w / W per step
    assert ag.tool_capacity_seconds(ro, capped.agent) == work  # type: ignore[arg-type]
    t = rollout_seconds(capped, 4096.0)
    assert t >= 10 * work and t > rollout_seconds(free, 4096.0)
    # more workers never lengthen a step
    more = spec(agent(tool_latency_s={"mean": 2, "p90": 3}, tool_workers=64))
    assert rollout_seconds(more, 4096.0) <= t


def test_agent_defaults_are_listed() -> None:
    from ptplan.spec.defaults import applied_defaults

    bare = spec({"turns": 4, "tokens_per_turn": 100, "concurrency_per_replica": 8})
    listed = applied_defaults(bare)
    assert "data.response_tokens = agent.turns x agent.tokens_per_turn = 400 " \
        "(generated tokens per episode)" in listed
    assert "agent.observation_tokens_per_turn = 0" in listed
    assert "agent.tool_latency_s = {mean: 0, p90: 0}" in listed
    assert any(x.startswith("agent.trajectory_days = checkpoints.retention_days") for x in listed)
    assert any(x.startswith("agent.replay_state_mb = 0") for x in listed)
    full = applied_defaults(spec(agent(tool_workers=4, trajectory_days=30, replay_state_mb=0.0)))
    assert not any(x.startswith("agent.") for x in full)
    assert not any("agent" in x for x in applied_defaults(spec(None)))


@pytest.mark.parametrize("framework", ["verl==0.9", "openrlhf==0.11"])
def test_agentic_example_renders_and_deploys_as_planned(framework: str, tmp_path: Path) -> None:
    """The example has no eval: its plan prices no eval outputs and its lifecycle has no
    ``eval/`` rule, so the launch must not write there (``render --check`` rule ``paths``
    failed on ``/checkpoints/eval`` before); it says so in a note instead."""
    from typer.testing import CliRunner

    from ptplan.cli.app import app

    spec = str(ROOT / "examples" / "agentic-swe-rl.yaml")
    plan = tmp_path / "plan.json"
    runner = CliRunner()
    made = runner.invoke(app, ["-q", "plan", spec, "--format", "json", "-o", str(plan)])
    assert made.exit_code == 0, made.output
    out = runner.invoke(app, ["render", str(plan), "--target", "all", "--check", "--spec", spec,
                              "--framework", framework, "-o", str(tmp_path / "out")])
    assert out.exit_code == 0, out.output
    assert "violation" not in out.output
    assert "no eval outputs in the plan" in out.output
