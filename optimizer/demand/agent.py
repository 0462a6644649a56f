"""Multi-turn tool-calling rollouts (``agent:``) on one inference replica.

An episode alternates K model turns (τ generated tokens each) with K − 1 tool calls (mean wait w,
90th percentile w₉₀); each call appends o observation tokens to the context. The asynchronous
agent loops of veRL (``AgentLoopManager``) and OpenRLHF (agent mode) keep c =
``concurrency_per_replica`` episodes in flight per replica and send each turn to the engine as
it is ready, so while one episode waits for its tool the others decode. Formulas and sources:
docs/demand-model.md §4.8.

* **Active batch.** An episode generates for t_gen(b) = τ · t_iter(b, S) per turn and waits
  w·(K − 1)/K per turn on average, so c·s(b) of the c episodes are decoding, s = t_gen /
  (t_gen + w·(K−1)/K). The replica's batch is the largest fixed point b* = min(B, c·s(b*))
  (s grows with b: a larger batch iterates slower), found by iterating from B. With enough
  episodes in flight (c·s(B) ≥ B) the tools are hidden: b* = B, the single-turn engine.
* **Prefix cache across a tool wait.** A turn's request ends when the model stops; vLLM frees
  its blocks into the prefix cache, where they survive until new sequences need the space
  (LRU). The c − b* waiting contexts (S tokens each) share what the b* decoding ones leave of
  the KV capacity C: the share that survives is h = clamp((C − b*·S) / ((c − b*)·S), 0, 1)
  (1 when nothing waits, 0 without prefix caching). An evicted context is prefilled again at
  the next turn: (1 − h) · Σ_{i=2..K} (P + (i−1)·τ + (i−2)·o) tokens per episode.
* **Floor.** However many GPUs: the slowest episode, the step's longest (ℓ* generated tokens,
  so (K − 1)·ℓ*/μ tool calls), waits for each call at the p90 and for its sandbox start-up, on
  top of generating its ℓ* tokens alone; and with ``tool_workers`` W, a run's N·(K − 1) calls
  take at least N·(K − 1)·w / W on the workers (the floor is the larger of the two).
"""

from __future__ import annotations

from dataclasses import dataclass

from ptplan.demand import lengths as ld
from ptplan.demand.inference import Engine, Rollout
from ptplan.demand.lengths import LengthDist
from ptplan.spec.agent import Agent, Turns

FIXED_POINT_ITERATIONS = 64
"""b ↦ min(B, c·s(b)) is monotone and starts at B: it decreases to the largest fixed point;
64 halvings of the step are far below one sequence."""


@dataclass(frozen=True)
class AgentEngine:
    """The agent loop's effect on one replica (docs/demand-model.md §4.8)."""

    batch: float
    """b*: sequences decoding at once (≤ the KV/engine batch B)."""
    kv_batch: int
    """B: the batch the engine sustains without tools."""
    cache_hit_share: float
    """h: share of waiting contexts still cached at their next turn."""
    reprefill_tokens: float
    """Tokens re-prefilled per episode because the cache evicted them: (1 − h) · Σ contexts."""
    idle_share: float
    """1 − throughput(b*) / throughput(B): the replica's idle share while tools run."""
    floor_seconds: float
    """Tool waits (K − 1 at p90) and sandbox start-up of the slowest episode."""


def active_share(engine: Engine, ro: Rollout, agent: Agent, batch: float) -> float:
    """s(b): the share of an episode's time spent decoding at batch b."""
    t_gen = agent.tokens_per_turn * float(
        engine.iteration_seconds(max(batch, 1.0), ro.prompt_tokens + ro.lengths.mean_age))
    wait = agent.tool_latency_s.mean * agent.tool_calls / agent.mean_turns
    return t_gen / (t_gen + wait) if t_gen + wait > 0 else 1.0


def active_batch(engine: Engine, ro: Rollout, agent: Agent, kv_batch: int) -> float:
    """b* = the largest b ≤ B with b = min(B, c·s(b))."""
    c = float(agent.concurrency_per_replica)
    b = float(kv_batch)
    for _ in range(FIXED_POINT_ITERATIONS):
        nxt = min(float(kv_batch), c * active_share(engine, ro, agent, b))
        if abs(nxt - b) < 1e-9:
            break
        b = nxt
    return b


def context_tokens_reprefilled(prompt: float, agent: Agent) -> float:
    """Σ_{i=2..K} (P + (i−1)·τ + (i−2)·o): what every turn after the first would prefill again
    if its cached context were gone."""
    k, tau, o = agent.mean_turns, agent.tokens_per_turn, agent.observation_tokens_per_turn
    return (k - 1) * prompt + tau * k * (k - 1) / 2.0 + o * (k - 1) * (k - 2) / 2.0


def cache_hit_share(engine: Engine, ro: Rollout, agent: Agent, batch: float,
                    prefix_caching: bool) -> float:
    """h: the waiting contexts' share of the KV capacity left by the decoding ones."""
    waiting = agent.concurrency_per_replica - batch
    if waiting <= 1e-9 or agent.tool_calls == 0:
        return 1.0
    if not prefix_caching:
        return 0.0
    context = ro.prompt_tokens + ro.lengths.mean_age
    free = engine.kv_capacity_tokens - batch * context
    return min(1.0, max(0.0, free / (waiting * context)))


def turns_dist(agent: Agent) -> LengthDist | None:
    """``agent.turns`` as a distribution (None for a plain mean): a histogram's point masses,
    quantiles' piecewise-linear quantile function through (0, 1) and (1, max), or the
    maximum-entropy shape for the mean on [1, max] (:mod:`ptplan.demand.lengths`)."""
    t = agent.turns
    if not isinstance(t, Turns):
        return None
    if t.histogram:
        return ld.from_histogram([(float(k), float(w)) for k, w in t.histogram], float(t.max))
    if any(q is not None for q in (t.p50, t.p90, t.p99)):
        return ld.from_quantiles(t.knots(), float(t.max))
    return ld.max_entropy(t.mean, float(t.max))


def slowest_episode_calls(ro: Rollout, agent: Agent) -> float:
    """Tool calls of a step's slowest episode. With a turns distribution: the step's longest
    episode in turns, K* (its expected longest of the step's episodes, as ℓ* in §4.1), makes
    K* − 1 calls. With a plain mean: its longest one, ℓ* generated tokens (the response-length
    distribution's expected longest of the step), makes (K − 1)·ℓ*/μ calls at the mean's K − 1
    calls per μ tokens."""
    dist = turns_dist(agent)
    if dist is not None:
        return max(0.0, dist.longest(ro.sequences) - 1.0)
    mean = ro.lengths.mean
    return agent.tool_calls * (ro.longest / mean if mean > 0 else 1.0)


def tool_capacity_seconds(ro: Rollout, agent: Agent) -> float:
    """With ``tool_workers`` W: a run's N episodes make N·(K − 1) calls of mean w, which W
    workers cannot finish in less than N·(K − 1)·w / W (0 when unset: a worker per episode)."""
    if agent.tool_workers is None:
        return 0.0
    return ro.sequences * agent.tool_calls * agent.tool_latency_s.mean / agent.tool_workers


def agent_engine(engine: Engine, ro: Rollout, agent: Agent, kv_batch: int, prompt: float,
                 prefix_caching: bool) -> AgentEngine:
    """The agent loop on one replica whose engine sustains ``kv_batch`` sequences; ``prompt``
    is the episode's own prompt P (``ro.prompt_tokens`` already holds half its observations,
    the mean over its turns)."""
    b = active_batch(engine, ro, agent, kv_batch)
    h = cache_hit_share(engine, ro, agent, b, prefix_caching)
    ctx = ro.prompt_tokens + ro.lengths.mean_age
    full = kv_batch / float(engine.iteration_seconds(max(kv_batch, 1), ctx))
    held = b / float(engine.iteration_seconds(max(b, 1.0), ctx))
    floor = max(slowest_episode_calls(ro, agent) * agent.tool_latency_s.p90
                + (agent.sandbox.startup_s if agent.sandbox is not None else 0.0),
                tool_capacity_seconds(ro, agent))
    return AgentEngine(b, kv_batch, h, (1.0 - h) * context_tokens_reprefilled(prompt, agent),
                       max(0.0, 1.0 - held / full) if full > 0 else 0.0, floor)
