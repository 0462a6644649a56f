"""``agent.turns`` as a distribution (issue #25; shaped as ``data.response_length``): its mean
drives the work, the step's longest episode in turns sets the floor's tool calls, and the
episode's response lengths are tokens_per_turn × turns. Hand-computed on a two-point histogram:
half the episodes take 4 turns, half 12 (mean 8, max 12)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from conftest import assert_one_line, example_dict
from test_agent import AGENT, rollout_seconds

from ptplan.core.errors import InputError
from ptplan.demand import agent as ag
from ptplan.demand.decode import rollout_of
from ptplan.demand.model import build_demand, response_lengths
from ptplan.spec.project import ProjectSpec, parse_spec

TWO_POINT = {"mean": 8, "max": 12, "histogram": [[4, 0.5], [12, 0.5]]}


def spec(turns: Any, **over: Any) -> ProjectSpec:
    d = example_dict("grpo-7b.yaml")
    d.pop("eval", None)
    d["data"].update(steps=10, prompts_per_step=32, max_response_tokens=6144)
    d["data"].pop("response_tokens", None)
    a = copy.deepcopy(AGENT)
    a.update(turns=turns, **over)
    d["agent"] = a
    return parse_spec(d)


def _decode_tokens(s: ProjectSpec) -> float:
    return next(p.tokens for p in build_demand(s).parts
                if p.phase == "rollout" and p.kind == "decode")


def test_mean_drives_the_work() -> None:
    """Mean 8 turns of 256 tokens: response_tokens 2048, 7 tool calls, 7 x 512 observation
    tokens, and the same decoded tokens as a plain `turns: 8`."""
    s = spec(TWO_POINT)
    a = s.agent
    assert a is not None
    assert s.data.response_tokens == 2048 and a.tool_calls == 7 and a.max_turns == 12
    assert a.observation_tokens == 7 * 512
    assert _decode_tokens(s) == _decode_tokens(spec(8))
    # episode lengths: 256 x 4 = 1024 and 256 x 12 = 3072, half each: mean 2048, longest 3072
    lengths = response_lengths(s)
    assert lengths.mean == pytest.approx(2048.0) and lengths.longest(256) == 3072.0


def test_longest_episode_sets_the_floor() -> None:
    """320 episodes a step: the expected longest in turns is 12 (the histogram's quantile at
    320/321 > 0.5), so the slowest episode waits for 11 calls at the p90 (400 s) plus its
    sandbox's 20 s start-up, every one of the 10 steps: 10 x (11 x 400 + 20) = 44,200 s over
    the same run without tool latency."""
    s = spec(TWO_POINT, tool_latency_s={"mean": 100, "p90": 400})
    d = build_demand(s)
    part = next(p for p in d.parts if p.phase == "rollout" and p.kind == "decode")
    ro = rollout_of(part)
    assert ro.sequences == 32 * 8
    assert s.agent is not None and ag.slowest_episode_calls(ro, s.agent) == 11.0
    t = rollout_seconds(s, 4096.0)  # so many GPUs that only the floor binds
    without = rollout_seconds(spec(TWO_POINT, tool_latency_s={"mean": 0, "p90": 0},
                                   sandbox=None), 4096.0)
    assert t == pytest.approx(without + 10 * (11 * 400 + 20), rel=1e-9)
    # a plain mean of 8 has no longest episode in turns: (K - 1) x l*/mu calls instead
    plain = spec(8)
    assert plain.agent is not None
    ro8 = rollout_of(next(p for p in build_demand(plain).parts
                          if p.phase == "rollout" and p.kind == "decode"))
    assert ag.slowest_episode_calls(ro8, plain.agent) == pytest.approx(
        7 * ro8.longest / ro8.lengths.mean)


def test_quantile_turns_floor_between_mean_and_max() -> None:
    """p50 6, p90 16, max 24 (implied mean 0.5 x 3.5 + 0.4 x 11 + 0.1 x 20 = 8.15, within 10 %
    of 8): the longest of 256 episodes lies between p90 and max."""
    s = spec({"mean": 8, "max": 24, "p50": 6, "p90": 16})
    d = build_demand(s)
    ro = rollout_of(next(p for p in d.parts if p.phase == "rollout" and p.kind == "decode"))
    assert s.agent is not None
    calls = ag.slowest_episode_calls(ro, s.agent)
    assert 15.0 < calls <= 23.0


@pytest.mark.parametrize(("turns", "words"), [
    ({"mean": 8, "max": 6}, "must not exceed max 6"),
    ({"mean": 8, "max": 20, "p50": 9, "p90": 7}, "quantiles must not decrease"),
    ({"mean": 8, "max": 20, "histogram": [[30, 1.0]]}, "histogram has turns above max 20"),
    ({"mean": 8, "max": 20, "histogram": [[2, 1.0]]}, "implies a mean of 2.00 turns"),
    ({"mean": 8, "max": 20, "p50": 6, "histogram": [[8, 1.0]]}, "not both"),
])
def test_bad_turn_distributions_are_one_line(turns: dict[str, Any], words: str) -> None:
    with pytest.raises(InputError) as info:
        spec(turns)
    assert_one_line(str(info.value))
    assert words in str(info.value) and info.value.exit_code == 2
