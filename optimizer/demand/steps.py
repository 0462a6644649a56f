"""A rollout step's decode on one engine replica (docs/demand-model.md §4.4–4.5): the fresh drain
of a batch that starts together, the saturated regime and its residual drain, preemption,
sequential static batches, and the asynchronous throughput. The engine's iteration time and
batch are :mod:`ptplan.demand.inference`'s."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache, cached_property

import numpy as np

from ptplan.demand.inference import GRID, Engine, Rollout

N_GRID = 32
"""Sequences-per-replica values at which the drain time is tabulated (log-spaced; at the
default batch cap of 256 consecutive sizes differ by 20 %)."""


def _drain_seconds(engine: Engine, start: np.ndarray | float, surv: np.ndarray, j: np.ndarray,
                   context: np.ndarray) -> np.ndarray:
    """Σ over decode iterations of t_iter with b_j = max(start·S(j), 1), by the trapezoid rule
    on the iteration grid (the batch and context change smoothly between grid points); one
    value per ``start``."""
    starts = np.atleast_1d(np.asarray(start, dtype=float))[:, None]
    b = np.maximum(starts * surv[None, :], 1.0)
    t = engine.iteration_seconds(b, context[None, :])
    if len(j) > 1:
        return np.trapezoid(t, j, axis=1)
    return t[:, 0]


@cache
def load_grid(batch: int) -> np.ndarray:
    """Sequences per replica at which a drain is tabulated: N_GRID sizes, log-spaced from 1 to
    the batch cap (computed once per batch cap; read-only)."""
    grid = np.unique(np.round(np.geomspace(1.0, max(batch, 1), N_GRID), 6))
    grid.flags.writeable = False
    return grid


def _grid_step(grid: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Index of the smallest tabulated load at or above ``n`` (the last one beyond it)."""
    k = np.searchsorted(grid, n * (1 - 1e-12), side="left")
    return np.minimum(k, len(grid) - 1)


@dataclass(frozen=True)
class StepModel:
    """Seconds of one synchronous step's decode on one replica as a function of the sequences
    it serves (tabulated; exact at the grid points, linear between them)."""

    n_grid: np.ndarray
    drain: np.ndarray
    """Fresh-start drain seconds at each n of ``n_grid`` (n ≤ B)."""
    batch: int
    """Sustained concurrent sequences B."""
    saturated_iter: float
    """Iteration seconds at batch B and the saturated mean context."""
    residual_drain: float
    """Seconds to drain B in-flight sequences after the queue empties."""
    mean_len: float
    mean_age: float
    recompute_tokens_per_seq: float
    """Prompt + context re-prefilled per preempted sequence."""
    admitted: float
    static_call: float = 0.0
    """Static batching (``generation_batching: static``): seconds of one full call of B
    sequences, which returns when the longest of its B responses ends; 0 for continuous
    batching."""

    def seconds(self, n: np.ndarray | float) -> np.ndarray:
        """A replica serving ``n`` sequences. Below the batch cap the load is rounded up to the
        next tabulated size: an upper bound within one grid step, and pools whose loads fall in
        one step are priced alike (which keeps the planner's Pareto frontiers small)."""
        n = np.maximum(np.asarray(n, dtype=float), 1.0)
        fresh = self.drain[_grid_step(self.n_grid, np.minimum(n, self.batch))]
        if self.static_call > 0.0:
            # sequential calls of B: every call but the last ends with the longest of its B
            # responses; the last (r ≤ B sequences) with the step's longest (as one call does)
            b = float(self.batch)
            full = np.maximum(np.ceil(n / b - 1e-9) - 1.0, 0.0)
            rest = n - full * b
            return full * self.static_call + self.drain[_grid_step(self.n_grid, rest)]
        saturated = np.maximum(self._saturated(n), self.drain[-1])
        # the saturated regime's equilibrium needs about a batch of queued sequences: up to 2B
        # the step moves linearly from the fresh drain of B to it (no jump at n = B)
        b = float(self.batch)
        blend = self.drain[-1] + (n - b) / b * (self._at_two_batches - self.drain[-1])
        return np.where(n <= b, fresh, np.where(n < 2.0 * b, np.minimum(saturated, blend),
                                                saturated))

    @cached_property
    def _at_two_batches(self) -> float:
        """The saturated step at n = 2B, where the blend above ends (once per model: the
        planner evaluates ``seconds`` many times)."""
        return max(float(self._saturated(2.0 * self.batch)), float(self.drain[-1]))

    def _saturated(self, n: np.ndarray | float) -> np.ndarray:
        """(n·μ − B·E[residual]) tokens at full batch, then the residual drain."""
        sat_tokens = np.maximum(np.asarray(n, dtype=float) * self.mean_len
                                - self.batch * self.mean_age, 0.0)
        return sat_tokens / self.batch * self.saturated_iter + self.residual_drain

    def preempted(self, n: np.ndarray | float) -> np.ndarray:
        """Sequences preempted (and re-prefilled) per replica per step (none in a static batch:
        its KV cache is allocated for the whole call up front)."""
        n = np.asarray(n, dtype=float)
        if self.static_call > 0.0:
            return np.zeros_like(n)
        return np.maximum(np.minimum(n, self.admitted) - self.batch, 0.0)


def static_call_seconds(engine: Engine, ro: Rollout, batch: float, end: float) -> float:
    """One static-batch call: ``batch`` sequences decoded together for ``end`` iterations
    (until the call's longest response ends). The batch keeps its shape to the end: finished
    sequences still occupy their rows (HF ``generate`` pads them; TensorRT-LLM's ``GptSession``
    decodes the whole static batch), so every iteration costs t_iter(batch, context)."""
    j = ro.lengths.decode_grid(1.0, max(end, 1.0), GRID)[0]
    t = engine.iteration_seconds(float(batch), ro.prompt_tokens + j)
    return float(np.trapezoid(t, j)) if len(j) > 1 else float(t[0])


def step_model(engine: Engine, ro: Rollout, batch: int, admitted: float,
               static: bool = False) -> StepModel:
    """``static``: the engine decodes in sequential static batches of ``batch`` sequences
    (docs/demand-model.md §4.3): no draining (a call's batch keeps its shape), no refill
    (the next call starts when the longest response of this one ends)."""
    L = ro.lengths
    end = max(ro.longest, 1.0)
    j, surv, res = L.decode_grid(1.0, end, GRID)
    ctx = ro.prompt_tokens + j
    n_grid = load_grid(batch)
    drain = _drain_seconds(engine, n_grid, np.ones_like(surv) if static else surv, j, ctx)
    age = L.mean_age
    sat_iter = float(engine.iteration_seconds(batch, ro.prompt_tokens + age))
    res_ctx = np.minimum(ro.prompt_tokens + age + j, ro.prompt_tokens + L.cap)
    residual = float(_drain_seconds(engine, float(batch), res, j, res_ctx)[0])
    call = static_call_seconds(engine, ro, batch, L.expected_max(batch)) if static else 0.0
    return StepModel(n_grid, drain, batch, sat_iter, residual, L.mean, age,
                     ro.prompt_tokens + age, admitted, call)


@dataclass(frozen=True)
class AsyncModel:
    """One step's decode on one replica when the drain overlaps training (one or more steps
    off policy): the throughput at batch min(lag·n, B), floored by the longest response alone
    (÷ lag).
    Below the batch cap the load is rounded up to the drain table's sizes, as for synchronous
    steps."""

    n_grid: np.ndarray
    work: np.ndarray
    """Seconds at each tabulated load below the cap."""
    batch: int
    per_sequence_saturated: float
    """Seconds per sequence at the cap (mean length x iteration time / B)."""
    floor: float

    def seconds(self, n: np.ndarray | float) -> np.ndarray:
        n = np.maximum(np.asarray(n, dtype=float), 1.0)
        below = self.work[_grid_step(self.n_grid, np.minimum(n, self.batch))]
        t = np.where(n < self.batch, below, n * self.per_sequence_saturated)
        return np.maximum(t, self.floor)


def async_model(engine: Engine, ro: Rollout, batch: int, static: bool = False,
                lag: int = 1) -> AsyncModel:
    """``static``: sequential static batches (a call of n sequences lasts until the longest of
    its n responses ends), so the throughput is B sequences per full call. ``lag``: the rollout
    may run that many steps ahead of the update (``max_staleness_steps``), so an engine serving
    n sequences a step holds min(lag·n, B) in flight, and a response may take up to ``lag``
    steps to finish: the longest alone floors a step at 1/lag of its time
    (docs/demand-model.md §4.5)."""
    grid = load_grid(batch)
    floor = single_stream_seconds(engine, ro) / lag
    if static:
        work = np.array([static_call_seconds(engine, ro, float(n),
                                             ro.lengths.expected_max(float(n))) for n in grid])
        per_seq = float(work[-1]) / batch
        return AsyncModel(grid, work, batch, per_seq, floor)
    ctx = ro.prompt_tokens + ro.lengths.mean_age
    held = np.minimum(grid * lag, float(batch))  # the grid never exceeds B: held = n at lag 1
    work = ro.lengths.mean * (grid / held) * engine.iteration_seconds(held, ctx)  # n·μ·t(b)/b
    per_seq = ro.lengths.mean / batch * float(engine.iteration_seconds(batch, ctx))
    return AsyncModel(grid, work, batch, per_seq, floor)


def async_seconds(engine: Engine, ro: Rollout, batch: int, n: np.ndarray | float) -> np.ndarray:
    """:class:`AsyncModel` built and evaluated once (tests, reports)."""
    return async_model(engine, ro, batch).seconds(n)


def single_stream_seconds(engine: Engine, ro: Rollout) -> float:
    """The step's longest response generated alone (batch 1): no pool size goes faster."""
    end = max(ro.longest, 1.0)
    j = ro.lengths.decode_grid(1.0, end, GRID)[0]
    t = engine.iteration_seconds(1.0, ro.prompt_tokens + j)
    return float(np.trapezoid(t, j)) if len(j) > 1 else float(t[0])
