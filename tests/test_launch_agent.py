"""Launch files of an agentic plan (issue #25): the spec's ``agent:`` as veRL 0.9.1's
multi-turn agent loop and OpenRLHF 0.11.2's agent mode, accepted by the pinned releases' own
config YAML and argument parser (as tests/test_launch_frameworks.py checks every example);
a plan without ``agent:`` gets none of these settings."""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Any

import pytest
from test_launch_frameworks import ENV, ROOT, _attr, _get, compose_verl, launch, parse_openrlhf

from ptplan.rendering.frameworks import openrlhf_0_11, parse_framework
from ptplan.spec.project import load_spec

pytestmark = pytest.mark.shipped_framework
"""The examples as a user plans them: specs without ``framework:`` take verl==0.9."""

SPEC = ROOT / "examples" / "agentic-swe-rl.yaml"
AGENT_ENV = {**ENV, "AGENT_PATH": "/a/agent.py"}
AGENT_FIELDS = {"agent_multi_turn", "agent_loop", "agent_code", "agent_max_turns",
                "agent_max_tool_calls", "agent_concurrency"}


@functools.cache
def _plan() -> Any:
    from ptplan.planner.api import plan
    from ptplan.providers.registry import load_catalog

    return plan(load_spec(str(SPEC)), load_catalog("embedded"), explain=False, timings=False)


def agent_launch(framework: str) -> dict[str, Any]:
    from ptplan.rendering.context import build_context
    from ptplan.rendering.facts import facts_for

    p = _plan()
    facts = replace(facts_for(p, load_spec(str(SPEC))), framework=parse_framework(framework))
    return dict(build_context(p, facts)["launch"])


def test_verl_composes_the_agent_loop() -> None:
    """The spec: 24 turns, 128 episodes in flight per replica → max_assistant_turns 24,
    max_user_turns 23 (tool responses), max_num_seqs 128, the tool_agent loop."""
    la = agent_launch("verl==0.9")
    cfg = compose_verl(la["words"], la["config_name"])
    got = {s.field: s for s in la["settings"]}
    assert set(got) >= AGENT_FIELDS
    for s in la["settings"]:
        assert _get(cfg, s.key) == s.value, s.field
    r = cfg.actor_rollout_ref.rollout
    assert r.multi_turn.enable is True and r.agent.default_agent_loop == "tool_agent"
    assert r.multi_turn.max_assistant_turns == 24 and r.multi_turn.max_user_turns == 23
    assert r.max_num_seqs == 128
    assert _get(cfg, "actor_rollout_ref.rollout.multi_turn.tool_config_path") == \
        "${oc.env:AGENT_PATH}"
    assert any("no per-turn generation cap" in n for n in la["notes"])
    assert "AGENT_PATH" in (la.get("env") or {})


def test_openrlhf_parses_agent_mode() -> None:
    la = agent_launch("openrlhf==0.11")
    args = parse_openrlhf(openrlhf_0_11.argv(la["words"], AGENT_ENV))
    assert args.train.agent_func_path == "/a/agent.py"
    assert args.reward.remote_url == ["agent"]  # set by the release when an agent runs
    fields = {s.field for s in la["settings"]}
    assert "agent_code" in fields and "reward_function" not in fields
    for s in la["settings"]:
        want = AGENT_ENV[s.value[1:]] if isinstance(s.value, str) and s.value.startswith("$") \
            else s.value
        if s.key != "--reward.remote_url":
            assert _attr(args, s.key) == want, s.field
    assert any("stop it after 24 turns" in n for n in la["notes"])
    assert any("max_num_seqs" in n for n in la["notes"])


@pytest.mark.parametrize("framework", ["verl==0.9", "openrlhf==0.11"])
def test_no_agent_section_no_agent_settings(framework: str) -> None:
    la = launch("grpo-7b", framework)
    assert not AGENT_FIELDS & {s.field for s in la["settings"]}
