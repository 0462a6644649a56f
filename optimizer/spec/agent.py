"""``agent:``: multi-turn, tool-calling rollouts (agentic RL). The names are fixed by issue #25
so that specs stay portable; what the demand model does with them: docs/demand-model.md §4.8,
field reference: docs/spec.md.

An episode is ``turns`` model turns of ``tokens_per_turn`` generated tokens each; between two
turns a tool runs (``tool_latency_s``) in the episode's sandbox and appends
``observation_tokens_per_turn`` tokens to the context. ``concurrency_per_replica`` episodes are
in flight per inference replica (the asynchronous agent loop of veRL / OpenRLHF)."""

from __future__ import annotations

from itertools import pairwise
from typing import Annotated, Any

from pydantic import Discriminator, Field, Tag, model_validator

from ptplan.spec.types import Count, _Strict

Seconds = Annotated[float, Field(ge=0, le=86_400, strict=True)]
"""A duration in seconds, 0 to one day (ints accepted)."""


class ToolLatency(_Strict):
    """Wall time of one tool call (execution in the sandbox, including its queueing)."""

    mean: Seconds
    p90: Seconds

    @model_validator(mode="after")
    def _p90_at_least_mean(self) -> ToolLatency:
        if self.p90 < self.mean:
            raise ValueError(f"agent.tool_latency_s.p90 {self.p90:g} is below mean "
                             f"{self.mean:g}; a tail cannot be shorter than the mean "
                             "(set p90 >= mean)")
        return self


class Sandbox(_Strict):
    """One episode's execution environment (a container): its CPU, memory and start-up."""

    vcpus: Annotated[float, Field(gt=0, le=1024, strict=True)]
    memory_gib: Annotated[float, Field(gt=0, le=4096, strict=True)]
    startup_s: Seconds = 0.0


class Turns(_Strict):
    """Model turns per episode as a distribution (issue #25; shaped as ``data.response_length``):
    its ``mean`` drives the work (response tokens, tool calls, prefill), ``max`` caps an episode
    (the frameworks' turn limit), and quantiles (p50/p90/p99) or a histogram give its shape
    (neither: the maximum-entropy shape for the mean on [1, max]). The step's longest episode
    in turns, read from it, sets the floor's tool calls (docs/demand-model.md §4.8)."""

    mean: Annotated[float, Field(ge=1, le=10**6, strict=False)]
    max: Count
    p50: Count | None = None
    p90: Count | None = None
    p99: Count | None = None
    histogram: list[tuple[Count, Annotated[float, Field(gt=0, strict=False)]]] | None = None
    """``[[turns, share], ...]``: shares are normalised to sum to one."""

    @model_validator(mode="after")
    def _shape(self) -> Turns:
        where = "agent.turns"
        quant = [q for q in (self.p50, self.p90, self.p99) if q is not None]
        if quant and self.histogram:
            raise ValueError(f"{where}: give quantiles (p50/p90/p99) or a histogram, not both")
        if quant != sorted(quant):
            raise ValueError(f"{where}: quantiles must not decrease (p50 <= p90 <= p99), got "
                             f"{quant}")
        if self.mean > self.max or any(q > self.max for q in quant):
            raise ValueError(f"{where}: mean {self.mean:g} and quantiles {quant} must not "
                             f"exceed max {self.max}; raise max or fix them")
        implied: float | None = None
        if self.histogram is not None:
            if not self.histogram:
                raise ValueError(f"{where}.histogram is empty; give [[turns, share], ...]")
            if max(t for t, _ in self.histogram) > self.max:
                raise ValueError(f"{where}.histogram has turns above max {self.max}; raise "
                                 "max or fix the bins")
            total = sum(w for _, w in self.histogram)
            implied = sum(t * w for t, w in self.histogram) / total
        elif quant:
            implied = sum((u1 - u0) * (a + b) / 2 for (u0, a), (u1, b) in pairwise(self.knots()))
        if implied is not None and abs(implied - self.mean) > 0.1 * self.mean:
            raise ValueError(f"{where} implies a mean of {implied:.2f} turns but its mean is "
                             f"{self.mean:g}; make them agree within 10 %")
        return self

    def knots(self) -> list[tuple[float, float]]:
        """(u, turns) knots of the piecewise-linear quantile function: (0, 1), the given
        quantiles, (1, max), as for ``data.response_length`` (ptplan.spec.lengths)."""
        given = [(u, float(q)) for u, q in ((0.5, self.p50), (0.9, self.p90),
                                             (0.99, self.p99)) if q is not None]
        return [(0.0, 1.0), *given, (1.0, float(self.max))]


def _turns_kind(value: Any) -> str:
    return "distribution" if isinstance(value, dict | Turns) else "mean"


TurnsField = Annotated[Annotated[Count, Tag("mean")] | Annotated[Turns, Tag("distribution")],
                       Discriminator(_turns_kind)]
"""A mean (an integer) or a mapping (:class:`Turns`), each validated on its own: a bad
distribution is reported as such, not as "not an integer"."""


class Agent(_Strict):
    turns: TurnsField
    """Model turns per episode: the mean, or a distribution (:class:`Turns`)."""
    tokens_per_turn: Count
    """Model output per turn."""
    observation_tokens_per_turn: Annotated[int, Field(ge=0, le=10**7, strict=True)] = 0
    """Tool output appended to the context after every turn but the last."""
    tool_latency_s: ToolLatency = ToolLatency(mean=0.0, p90=0.0)
    sandbox: Sandbox | None = None
    concurrency_per_replica: Count
    """Episodes in flight per inference replica."""
    tool_workers: Count | None = None
    """Tool calls that can run at once in the whole job (sandboxes, environment workers);
    unset: one per episode in flight (never the bottleneck)."""
    trajectory_days: Annotated[int, Field(ge=1, le=3650, strict=True)] | None = None
    """Days each episode's trajectory (and replay state) is kept after it is written (the
    ``agent_trajectories`` storage class); unset: the checkpoints' ``retention_days``."""
    replay_state_mb: Annotated[float, Field(ge=0, le=1e6, strict=True)] = 0.0
    """Replay state stored per episode beside its trajectory (e.g. the sandbox's file-system
    diff, in MB = 10^6 bytes); 0: the trajectory's actions replay it on the task image."""

    @property
    def mean_turns(self) -> float:
        """K: model turns per episode on average (the distribution's mean)."""
        return self.turns.mean if isinstance(self.turns, Turns) else self.turns

    @property
    def max_turns(self) -> int:
        """The longest episode's turns: ``turns.max`` (a plain mean caps itself)."""
        return self.turns.max if isinstance(self.turns, Turns) else self.turns

    @property
    def tool_calls(self) -> float:
        """Tool calls per episode: one between two consecutive turns (K − 1 on average)."""
        return self.mean_turns - 1

    @property
    def observation_tokens(self) -> int:
        """Observation tokens an episode's context gains: (turns − 1) × per turn (rounded
        when the mean of a distribution is not whole)."""
        if isinstance(self.turns, Turns):
            return round((self.turns.mean - 1) * self.observation_tokens_per_turn)
        return (self.turns - 1) * self.observation_tokens_per_turn

    @property
    def response_tokens(self) -> int:
        """Generated tokens per episode: turns × tokens_per_turn (rounded when the mean of a
        distribution is not whole)."""
        if isinstance(self.turns, Turns):
            return round(self.turns.mean * self.tokens_per_turn)
        return self.turns * self.tokens_per_turn
