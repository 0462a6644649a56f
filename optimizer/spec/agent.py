"""``agent:``: multi-turn, tool-calling rollouts (agentic RL). The names are fixed by issue #25
so that specs stay portable; what the demand model does with them: docs/demand-model.md §4.8,
field reference: docs/spec.md.

An episode is ``turns`` model turns of ``tokens_per_turn`` generated tokens each; between two
turns a tool runs (``tool_latency_s``) in the episode's sandbox and appends
``observation_tokens_per_turn`` tokens to the context. ``concurrency_per_replica`` episodes are
in flight per inference replica (the asynchronous agent loop of veRL / OpenRLHF)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from optimizer.spec.types import Count, _Strict

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


class Agent(_Strict):
    turns: Count
    """Model turns per episode (the mean)."""
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
    def tool_calls(self) -> int:
        """Tool calls per episode: one between two consecutive turns."""
        return self.turns - 1

    @property
    def observation_tokens(self) -> int:
        """Observation tokens an episode's context gains: (turns − 1) × per turn."""
        return self.tool_calls * self.observation_tokens_per_turn

    @property
    def response_tokens(self) -> int:
        """Generated tokens per episode: turns × tokens_per_turn."""
        return self.turns * self.tokens_per_turn
