"""Independent oracles for ``optimizer/demand/agent.py`` (the agent loop on one replica,
docs/demand-model.md §4.8), written for the survivors of the 2026-12-05 mutation run.

Every expected value is worked out by hand in the test from the module's documented formulas on
a made-up engine whose decode iteration takes t(b, S) = a + k·b·S seconds (a fixed step plus a
KV read growing with the batch b and the context S) — the package's engine model is not used, so
a bug there cannot move the expected values — and a rollout with two response lengths, 400 and
1,200 tokens, half each: mean μ = 800, E[L²] = 800,000, mean age E[L²]/(2μ) = 500 tokens, so a
1,000-token prompt gives a context S = 1,500; the longest of 256 episodes is 1,200.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from ptplan.demand import agent as ag
from ptplan.demand.inference import Rollout
from ptplan.demand.lengths import LengthDist
from ptplan.spec.agent import Agent, Sandbox, ToolLatency, Turns

EXACT = {"rel": 1e-9, "abs": 0}
CTX = 1000.0 + 500.0


class LinearEngine:
    """t(b, S) = a + k·b·S seconds per decode iteration; ``kv_capacity_tokens`` C."""

    def __init__(self, a: float = 0.01, k: float = 1e-6, kv: float = 90_000.0) -> None:
        self.a, self.k, self.kv_capacity_tokens = a, k, kv

    def iteration_seconds(self, batch: Any, context: Any) -> np.ndarray:
        return np.asarray(self.a + self.k * np.asarray(batch, dtype=float) * context)


def rollout(prompt: float = 1000.0, lengths: tuple[float, ...] = (400.0, 1200.0)) -> Rollout:
    dist = LengthDist(np.array(lengths), np.full(len(lengths), 1.0 / len(lengths)),
                      math.ceil(max(lengths)), "histogram")
    return Rollout(sequences=256.0, prompt_tokens=prompt, lengths=dist)


def agent(turns: Any = 8, mean: float = 4.0, p90: float = 10.0, c: int = 64,
          **over: Any) -> Agent:
    return Agent(turns=turns, tokens_per_turn=100, observation_tokens_per_turn=50,
                 tool_latency_s=ToolLatency(mean=mean, p90=p90), concurrency_per_replica=c,
                 **over)


def fixed_point(c: float, tau: float, a: float, m: float, wait: float) -> float:
    """The positive root of b = c·τt/(τt + W) with t = a + m·b: τm·b² + (τa + W − cτm)·b − cτa
    = 0."""
    qa, qb, qc = tau * m, tau * a + wait - c * tau * m, -c * tau * a
    return (-qb + math.sqrt(qb * qb - 4 * qa * qc)) / (2 * qa)


def test_the_rollout_fixture_by_hand() -> None:
    ro = rollout()
    assert ro.lengths.mean == 800.0 and ro.lengths.mean_age == 500.0 and ro.longest == 1200.0


# ------------------------------------------------------------------------- s(b), the active share
def test_active_share_by_hand() -> None:
    """s(b) = τ·t(max(b, 1), S) / (τ·t + w·(K − 1)/K); W = 4 × 7/8 = 3.5 s. At b = 1.5: t =
    0.01 + 1e-6 × 1.5 × 1,500 = 0.01225 s, τ·t = 1.225 s, s = 1.225/4.725 = 7/27; at b = 0.5
    the engine still iterates one sequence: t = 0.0115, s = 1.15/4.65."""
    e, ro, a = LinearEngine(), rollout(), agent()
    assert ag.active_share(e, ro, a, 1.5) == pytest.approx(7 / 27, **EXACT)
    assert ag.active_share(e, ro, a, 0.5) == pytest.approx(1.15 / 4.65, **EXACT)
    assert ag.active_share(e, ro, a, 0.5) == ag.active_share(e, ro, a, 1.0)


def test_active_share_of_a_short_turn_and_of_no_time_at_all() -> None:
    """Under a second in all: t = 0.002 s flat, τ·t = 0.2 s, 5 turns with a 0.8-s tool, W =
    0.8 × 4/5 = 0.64 s: s = 0.2/0.84 = 5/21. An engine that takes no time with tools that
    take none decodes all the time: s = 1 (the guard of 0/0)."""
    ro = rollout()
    quick = ag.active_share(LinearEngine(a=0.002, k=0.0), ro, agent(turns=5, mean=0.8, p90=1),
                            3.0)
    assert quick == pytest.approx(5 / 21, **EXACT)
    assert ag.active_share(LinearEngine(a=0.0, k=0.0), ro, agent(mean=0.0, p90=0.0), 3.0) == 1.0


# --------------------------------------------------------------------------- b*, the fixed point
def test_active_batch_is_the_fixed_point_of_the_quadratic() -> None:
    """b = c·s(b) with t = 0.01 + 1.5e-3·b (S = 1,500): 0.15·b² − 5.1·b − 64 = 0, b* = (5.1 +
    √64.41)/0.3 ≈ 43.75 < B = 64; with B = 40 the engine's batch binds (c·s(40) = 64 × 7/10.5
    ≈ 42.7 > 40): b* = 40."""
    e, ro, a = LinearEngine(), rollout(), agent()
    root = fixed_point(64, 100, 0.01, 1.5e-3, 3.5)
    assert root == pytest.approx((5.1 + math.sqrt(64.41)) / 0.3, **EXACT)
    assert ag.active_batch(e, ro, a, 64) == pytest.approx(root, rel=1e-8, abs=0)
    assert ag.active_batch(e, ro, a, 40) == 40.0


# ------------------------------------------------------------------- h, the prefix cache's share
def test_cache_hit_share_by_hand() -> None:
    """c = 64, b = 40: 24 contexts of 1,500 tokens wait; C = 90,000 leaves 90,000 − 40 × 1,500 =
    30,000 tokens: h = 30,000 / 36,000 = 5/6; with C = 50,000 nothing is left (h = 0), with
    C = 200,000 all of them fit (h = 1); prefix caching off: 0."""
    ro, a = rollout(), agent()
    assert ag.cache_hit_share(LinearEngine(), ro, a, 40.0, True) == pytest.approx(5 / 6, **EXACT)
    assert ag.cache_hit_share(LinearEngine(kv=50_000.0), ro, a, 40.0, True) == 0.0
    assert ag.cache_hit_share(LinearEngine(kv=200_000.0), ro, a, 40.0, True) == 1.0
    assert ag.cache_hit_share(LinearEngine(), ro, a, 40.0, False) == 0.0


def test_cache_hit_share_when_nothing_waits_or_no_tool_runs() -> None:
    """Nothing waits (b = c) or an episode of one turn (no tool call): nothing is evicted, h = 1
    even without prefix caching; half an episode waiting, or two turns (one call), without
    prefix caching: h = 0."""
    e, ro = LinearEngine(), rollout()
    assert ag.cache_hit_share(e, ro, agent(), 64.0, False) == 1.0
    assert ag.cache_hit_share(e, ro, agent(turns=1, mean=0.0, p90=0.0), 40.0, False) == 1.0
    assert ag.cache_hit_share(e, ro, agent(), 63.5, False) == 0.0
    assert ag.cache_hit_share(e, ro, agent(turns=2), 40.0, False) == 0.0


def test_reprefilled_context_is_the_sum_over_turns() -> None:
    """Σ_{i=2..K} (P + (i−1)·τ + (i−2)·o), K = 5, P = 1,000, τ = 100, o = 50: 4 × 1,000 + 100 ×
    (1+2+3+4) + 50 × (0+1+2+3) = 5,300; one turn re-prefills nothing."""
    assert ag.context_tokens_reprefilled(1000.0, agent(turns=5)) == 5300.0
    assert ag.context_tokens_reprefilled(1000.0, agent(turns=1, mean=0.0, p90=0.0)) == 0.0


# ------------------------------------------------------------------------ turns and the floor
def test_turns_of_a_mean_and_max_only_are_the_max_entropy_shape() -> None:
    """Neither quantiles nor a histogram: the maximum-entropy shape on [1, max] with the mean
    kept (8 of at most 12, to 1e-5: the points are clipped to [1, 12] after the rescaling); with
    p50, p90 and p99: the quantile shape; a histogram: point masses, shares normalised."""
    me = ag.turns_dist(agent(turns=Turns(mean=8, max=12)))
    assert me is not None and me.shape == "max-entropy" and me.cap == 12
    assert me.mean == pytest.approx(8.0, rel=1e-5, abs=0)
    assert float(me.lengths.min()) >= 1.0 and float(me.lengths.max()) <= 12.0
    q = ag.turns_dist(agent(turns=Turns(mean=8, max=24, p50=6, p90=16, p99=22)))
    assert q is not None and q.shape == "quantiles" and q.cap == 24
    h = ag.turns_dist(agent(turns=Turns(mean=8, max=12, histogram=[(4, 1.0), (12, 1.0)])))
    assert h is not None and h.shape == "histogram" and list(h.weights) == [0.5, 0.5]
    assert ag.turns_dist(agent()) is None


def test_slowest_episode_calls_by_hand() -> None:
    """A plain mean of 8 turns: (K − 1)·ℓ*/μ = 7 × 1,200/800 = 10.5 calls; episodes of one turn
    each (a histogram at 1): the longest makes no call (not −0 nor 1); a distribution whose mean
    length is 0 (the guard): K − 1 = 7."""
    ro = rollout()
    assert ag.slowest_episode_calls(ro, agent()) == 10.5
    one = agent(turns=Turns(mean=1, max=1, histogram=[(1, 1.0)]))
    assert ag.slowest_episode_calls(ro, one) == 0.0
    empty = Rollout(256.0, 1000.0, LengthDist(np.array([0.0]), np.array([1.0]), 1, "fixed"))
    assert ag.slowest_episode_calls(empty, agent()) == 7.0


def test_tool_capacity_by_hand() -> None:
    """N·(K − 1)·w / W = 256 × 7 × 4 / 16 = 448 s; unset workers: 0."""
    assert ag.tool_capacity_seconds(rollout(), agent(tool_workers=16)) == 448.0
    assert ag.tool_capacity_seconds(rollout(), agent()) == 0.0


# --------------------------------------------------------------------------- the whole engine
def test_agent_engine_by_hand() -> None:
    """B = 64, c = 64: b* the root above (≈ 43.75); h = (90,000 − 1,500·b*) / (1,500·(64 − b*));
    re-prefilled (1 − h) × (7 × 800 + 100 × 28 + 50 × 21 = 9,450) tokens for an 800-token
    episode prompt; idle 1 − (b*/t(b*)) / (64/t(64)); floor: 10.5 calls × 10 s + 20 s of sandbox
    start-up = 125 s, or with 16 tool workers their 448 s, with 1,024 workers 7 s (125 binds)."""
    e, ro = LinearEngine(), rollout()
    box = Sandbox(vcpus=2, memory_gib=4, startup_s=20)
    b = fixed_point(64, 100, 0.01, 1.5e-3, 3.5)
    h = (90_000 - CTX * b) / (CTX * (64 - b))
    assert 0.0 < h < 1.0
    full, held = 64 / (0.01 + 1e-6 * 64 * CTX), b / (0.01 + 1e-6 * b * CTX)
    got = ag.agent_engine(e, ro, agent(sandbox=box), 64, 800.0, True)
    assert got.kv_batch == 64
    assert got.batch == pytest.approx(b, rel=1e-8, abs=0)
    assert got.cache_hit_share == pytest.approx(h, rel=1e-7, abs=0)
    assert got.reprefill_tokens == pytest.approx((1 - h) * 9450, rel=1e-7, abs=0)
    assert got.idle_share == pytest.approx(1 - held / full, rel=1e-7, abs=0)
    assert got.floor_seconds == 125.0
    assert ag.agent_engine(e, ro, agent(sandbox=box, tool_workers=16), 64, 800.0,
                           True).floor_seconds == 448.0
    assert ag.agent_engine(e, ro, agent(sandbox=box, tool_workers=1024), 64, 800.0,
                           True).floor_seconds == 125.0
    assert ag.agent_engine(e, ro, agent(), 64, 800.0, True).floor_seconds == 105.0


def test_agent_engine_of_one_episode_per_replica() -> None:
    """c = 1, B = 1: the engine iterates one sequence however small b* is, so s is constant,
    b* = s = 1.15/4.65 and the replica idles 1 − b* = 3.5/4.65 of the time; the cache keeps the
    waiting context (1,500 tokens, 90,000 free): h = 1, nothing re-prefilled."""
    got = ag.agent_engine(LinearEngine(), rollout(), agent(c=1), 1, 800.0, True)
    assert got.batch == pytest.approx(1.15 / 4.65, **EXACT)
    assert got.idle_share == pytest.approx(3.5 / 4.65, **EXACT)
    assert (got.cache_hit_share, got.reprefill_tokens) == (1.0, 0.0)


def test_idle_share_of_a_slow_engine_and_of_no_engine_batch() -> None:
    """A 1.25-s iteration (under one sequence a second at B = 1): b* = 125/128.5 (τ·t = 125 s,
    W = 3.5 s), idle 1 − b* = 3.5/128.5; an engine batch of 0 (nothing fits) idles 0 (the
    guard), with b* = 0."""
    slow = ag.agent_engine(LinearEngine(a=1.25, k=0.0), rollout(), agent(c=1), 1, 800.0, True)
    assert slow.batch == pytest.approx(125 / 128.5, **EXACT)
    assert slow.idle_share == pytest.approx(3.5 / 128.5, **EXACT)
    none = ag.agent_engine(LinearEngine(), rollout(), agent(), 0, 800.0, True)
    assert (none.batch, none.idle_share) == (0.0, 0.0)
