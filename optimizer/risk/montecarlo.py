"""The Monte Carlo of one chunk of trials, vectorised over trials (docs/simulate.md).

Time is counted in *progress hours*: the run's base makespan M0 is the progress a run must
make. Interruptions arrive in wall-clock hours as Poisson processes (one stream per pool for
its nodes' independent interruptions, one per zone for zone-wide reclaims, shared by every
pool with spot nodes there: common random numbers); an event at wall time E after delays D
falls at progress P = E − D, and only events with P < M0 happen (the run is over after).

* **Stateless pool** (rollout, scoring): an interruption stops k nodes (the engine replica; a
  zone reclaim stops the pool's nodes in the zone): they lose their in-flight work L and are
  down for the replacement delay R (after a zone reclaim: R with an on-demand fallback where
  the policy allows it, else until spot capacity returns, max(R, shortage)). The pool shares
  its work among its N nodes, so its progress slips by k·(L + down)/N when the event hits it
  busy; idle (the pool's share 1 − B0/M0 of the run), only the part of the down time longer
  than its idle gap per step counts. The expected slip is exactly the planner's
  B0·λ(L+R)/(1 − λ(L+R)) when every event hits busy (renewal: E[T] = B0 + δ·Λ·E[T]).
* **Gang** (the update pool, stateful): an interruption of any of its spot nodes rolls the
  run back to its last checkpoint: the progress since then is lost, plus the restart R;
  events during a restart do not count (Daly's model). Checkpoints every
  ``lifecycle.every_steps`` steps (their writes are in the plan's checkpoint stall) or at
  Young's interval with a write of C each (``checkpoint_mode``).
* **Pipeline**: sync and colocated runs wait at the barrier, so every pool's slip adds to the
  makespan; an async run pipelines the pools one step off-policy, so the slip of step s of
  pool i passes through the recursion F[0,s] = max(F[0,s−1], F[last,s−2]) + t[0,s],
  F[i,s] = max(F[i,s−1], F[i−1,s]) + t[i,s]: a faster pool's slip is absorbed only up to its
  slack in that step; beyond it the bottleneck waits, and never makes the time up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ptplan.core.errors import InputError
from ptplan.risk.model import PoolModel, RunModel

CHUNK = 2000
"""Trials per chunk: each chunk has its own seed, whatever runs it."""
MAX_EVENTS = 4096
"""Events of one stream in one run beyond which the simulation stops: the run would hardly
finish (a gang whose hazard × checkpoint interval is far above 1)."""


@dataclass
class ChunkResult:
    makespan_hours: np.ndarray
    cost_usd: np.ndarray
    interruptions: np.ndarray
    fallback_usd: np.ndarray
    pool_slip_hours: np.ndarray
    """(trials, pools): each pool's own slip: the busy hours its interruptions added (a gang:
    its rollbacks, restarts and Young's writes), before the pipeline absorbs any of it."""
    time_multiplier: np.ndarray
    """Each trial's job-time multiplier (the model's uncertainty; 1 without it)."""


def _generator(seed: int, chunk: int, key: tuple[int, ...]) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(
        seed, spawn_key=(chunk, *key))))


class _Stream:
    """Poisson arrivals of one stream for every trial of a chunk, drawn column by column (event
    j of every trial before event j + 1), so that more columns extend the same draws."""

    def __init__(self, seed: int, chunk: int, key: tuple[int, ...], rate: float,
                 trials: int, horizon: float) -> None:
        self.seed, self.chunk, self.key, self.rate, self.trials = seed, chunk, key, rate, trials
        mu = rate * horizon * 1.25
        self.columns = int(mu + 6.0 * math.sqrt(mu) + 4)
        self._draw()

    def _draw(self) -> None:
        k, t = self.columns, self.trials
        gaps = _generator(self.seed, self.chunk, (*self.key, 0)).standard_exponential((k, t))
        self.times = np.cumsum(gaps, axis=0).T / self.rate
        self.uniform = _generator(self.seed, self.chunk, (*self.key, 1)).random((k, t)).T

    def grow(self) -> None:
        if self.columns >= MAX_EVENTS:
            raise InputError(f"simulate: more than {MAX_EVENTS:,} interruptions of one stream "
                             f"in a run ({self.rate:.4g} per hour): the run would hardly "
                             "finish; check the plan's interruption rates and checkpoints")
        self.columns = min(MAX_EVENTS, self.columns * 2)
        self._draw()


def _busy_mask(u: np.ndarray, offset: float, share: float) -> np.ndarray:
    """Whether the event finds the pool busy: its busy window is [offset, offset + share) of
    each step (sync: pools take turns; async: all start together)."""
    return np.mod(u - offset, 1.0) < share


def _times(s: _Stream, m: np.ndarray | None) -> np.ndarray:
    """The stream's event times in base progress units: a trial whose job takes m × the plan's
    time is, in units of its own progress, exposed at m × the rate."""
    return s.times if m is None else s.times / m[:, None]


def _per(x: float, m: np.ndarray | None) -> float | np.ndarray:
    """A fixed duration (lost work, restart, shortage) in a trial's base progress units."""
    return x if m is None else x / m[:, None]


def _pool_events(model: RunModel, pool: PoolModel, own: _Stream | None,
                 zones: dict[int, _Stream], offset: float, m: np.ndarray | None = None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[_Stream]]:
    """(times, slips, fallback $, kind) of every event that may hit the pool, sorted by time per
    trial; kind 0 for the pool's own events, 1 for zone reclaims. With job-time multipliers
    ``m``, times and slips are in each trial's base progress units (real hours ÷ m)."""
    m0 = model.base_makespan_hours
    share = min(1.0, pool.base_busy_hours / m0) if m0 > 0 else 1.0
    gap = (m0 - pool.base_busy_hours) / model.steps
    lost, r = _per(model.lost_work_hours, m), _per(model.restart_hours, m)
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    used: list[_Stream] = []
    if own is not None:
        busy = _busy_mask(own.uniform, offset, share)
        k = min(pool.replica_nodes, pool.nodes) / pool.nodes
        slip = np.where(busy, k * (lost + r), k * np.maximum(0.0, r - gap))
        parts.append((_times(own, m), slip, np.zeros_like(slip), np.zeros_like(slip)))
        used.append(own)
    for hit in pool.zone_hits:
        s = zones[hit.zone]
        down = r if hit.fallback_premium_usd_per_hour is not None \
            else _per(max(model.restart_hours, model.shortage_hours), m)
        nodes = min(pool.nodes, pool.replica_nodes * math.ceil(hit.nodes / pool.replica_nodes))
        busy = _busy_mask(s.uniform, offset, share)
        slip = np.where(busy, nodes * (lost + down),
                        nodes * np.maximum(0.0, down - gap)) / pool.nodes
        prem = (hit.fallback_premium_usd_per_hour or 0.0) * max(
            0.0, model.shortage_hours - model.restart_hours)
        parts.append((_times(s, m), slip, np.full_like(slip, prem), np.ones_like(slip)))
        used.append(s)
    times = np.concatenate([p[0] for p in parts], axis=1)
    order = np.argsort(times, axis=1, kind="stable")
    take = [np.take_along_axis(np.concatenate([p[i] for p in parts], axis=1), order, axis=1)
            for i in range(4)]
    return take[0], take[1], take[2], take[3], used


def _stateless(model: RunModel, pool: PoolModel, own: _Stream | None,
               zones: dict[int, _Stream], offset: float, m: np.ndarray | None = None
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, bool]:
    """Per trial: slip, events, fallback $; per event: progress and slip (for the pipeline);
    and whether every stream reached past the end (else grow and redo)."""
    times, slip, prem, _, used = _pool_events(model, pool, own, zones, offset, m)
    m0 = model.base_makespan_hours
    cum = np.cumsum(slip, axis=1)
    progress = times - (cum - slip)
    active = np.logical_and.accumulate(progress < m0, axis=1)
    total = np.where(active, slip, 0.0).sum(axis=1)
    covered = all(bool(np.all(_times(s, m)[:, -1] - total >= m0)) for s in used)
    return (total, active.sum(axis=1), np.where(active, prem, 0.0).sum(axis=1),
            np.where(active, progress, np.nan), np.where(active, slip, 0.0), covered)


def _gang(model: RunModel, pool: PoolModel, own: _Stream | None, zones: dict[int, _Stream],
          m: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """Per trial: the gang's extra hours (rollbacks, restarts, Young's checkpoint writes),
    failures and fallback $; and whether every stream reached past the end. With job-time
    multipliers ``m``, in each trial's base progress units (Young's interval and write are
    wall-clock: ÷ m; lifecycle checkpoints fall every so many steps: unchanged)."""
    times, _, prem, kind, used = _pool_events(model, pool, own, zones, 0.0, m)
    tau0, write0 = model.checkpoint_interval(pool)
    finite = math.isfinite(tau0)
    tau: float | np.ndarray = tau0
    write: float | np.ndarray = write0
    if m is not None and model.checkpoint_mode == "young":
        tau, write = tau0 / m, write0 / m
    m0 = model.base_makespan_hours
    writes = (math.floor(m0 / tau) if m is None else np.floor(m0 / tau)) if finite else 0
    goal = m0 + writes * write
    seg = tau + write
    down_zone = _per1(model.restart_hours if not pool.zone_hits or
                      pool.zone_hits[0].fallback_premium_usd_per_hour is not None
                      else max(model.restart_hours, model.shortage_hours), m)
    restart = _per1(model.restart_hours, m)
    trials = times.shape[0]
    delay = np.zeros(trials)
    resume = np.zeros(trials)
    fails = np.zeros(trials, dtype=int)
    fallback = np.zeros(trials)
    for j in range(times.shape[1]):
        p = times[:, j] - delay
        hit = (p < goal) & (p >= resume)
        start = np.floor(p / seg) * seg if finite else np.zeros(trials)
        down = np.where(kind[:, j] > 0, down_zone, restart)
        delay = np.where(hit, delay + (p - start) + down, delay)
        resume = np.where(hit, start, resume)
        fails += hit
        fallback += np.where(hit, prem[:, j], 0.0)
    covered = all(bool(np.all(_times(s, m)[:, -1] - delay >= goal)) for s in used)
    return delay + writes * write, fails, fallback, covered


def _per1(x: float, m: np.ndarray | None) -> float | np.ndarray:
    """A fixed duration in each trial's base progress units, one value per trial."""
    return x if m is None else x / m


def pipeline_finish(t: np.ndarray) -> np.ndarray:
    """When the last stage finishes its last step, one step off-policy: ``t[i, trial, s]`` is
    stage i's time for step s; rollout (stage 0) of step s needs the last stage's step s − 2,
    and every later stage needs its predecessor's step s."""
    stages, n, steps = t.shape
    fin = [np.zeros(n) for _ in range(stages)]
    last1 = np.zeros(n)
    last2 = np.zeros(n)
    for s in range(steps):
        fin[0] = np.maximum(fin[0], last2) + t[0, :, s]
        for i in range(1, stages):
            fin[i] = np.maximum(fin[i], fin[i - 1]) + t[i, :, s]
        last2, last1 = last1, fin[-1].copy()
    return fin[-1]


def _pipeline_delay(model: RunModel, slips: list[tuple[np.ndarray, np.ndarray] | None],
                    trials: int) -> np.ndarray:
    """Async: how much the per-step slips of every pool delay the end of the pipeline."""
    steps = model.steps
    base = [p.base_busy_hours / steps for p in model.pools]
    d = np.zeros((len(model.pools), trials, steps))
    for i, s in enumerate(slips):
        if s is None:
            continue
        progress, slip = s
        rows = np.broadcast_to(np.arange(trials)[:, None], progress.shape)
        ok = np.isfinite(progress)
        step = np.clip((progress[ok] / model.base_makespan_hours * steps).astype(int), 0,
                       steps - 1)
        d[i] = np.bincount(rows[ok] * steps + step, weights=slip[ok],
                           minlength=trials * steps).reshape(trials, steps)
    hit = np.flatnonzero(d.sum(axis=(0, 2)) > 0)
    out = np.zeros(trials)
    if hit.size == 0:
        return out

    b = np.array(base)[:, None, None]
    with_slip = pipeline_finish(b + d[:, hit, :])
    without = pipeline_finish(np.broadcast_to(b, (len(base), 1, steps)))
    out[hit] = with_slip - without[0]
    return out


def _totals_delay(model: RunModel, slips: list[tuple[np.ndarray, np.ndarray] | None],
                  trials: int) -> np.ndarray:
    """Async with an unbounded buffer (the planner's formula): the run lasts the longest
    pool's total plus one rollout step of fill, so a pool's slip counts only beyond its
    slack over the whole run."""
    busy = np.array([p.base_busy_hours for p in model.pools])[:, None] + np.array(
        [np.zeros(trials) if s is None else s[1].sum(axis=1) for s in slips])
    fill = sum(busy[i] for i, p in enumerate(model.pools) if p.name == "rollout")
    return busy.max(axis=0) + model.fill_fraction * fill - model.base_makespan_hours


def simulate_chunk(model: RunModel, seed: int, chunk: int, trials: int) -> ChunkResult:
    """``trials`` runs of ``model`` with the chunk's own seed ``(seed, chunk)``."""
    m = multipliers(model, seed, chunk, trials)
    horizon = (model.base_makespan_hours + model.plan_overhead_hours) * (
        1.0 if m is None else max(1.0, float(m.max())))
    zones = {z: _Stream(seed, chunk, (1, z), rate, trials, horizon)
             for z, rate in enumerate(model.zone_rates) if rate > 0}
    own = {i: _Stream(seed, chunk, (0, i), p.independent_rate, trials, horizon)
           for i, p in enumerate(model.pools) if p.independent_rate > 0}
    while True:
        result, covered = _run(model, own, zones, trials, m)
        if covered:
            return result
        for s in [*own.values(), *zones.values()]:
            s.grow()


def multipliers(model: RunModel, seed: int, chunk: int, trials: int) -> np.ndarray | None:
    """Each trial's job-time multiplier exp(N(μ, σ²)) from the chunk's own stream (key 2, apart
    from the interruption streams: the same seed gives the same interruptions with and
    without the model's uncertainty); ``None`` when the model has none."""
    if model.time_sigma == 0.0 and model.time_mu == 0.0:
        return None
    z = _generator(seed, chunk, (2,)).standard_normal(trials)
    return np.exp(model.time_mu + model.time_sigma * z)


def _run(model: RunModel, own: dict[int, _Stream], zones: dict[int, _Stream], trials: int,
         m: np.ndarray | None = None) -> tuple[ChunkResult, bool]:
    m0 = model.base_makespan_hours
    delay = np.zeros(trials)
    events = np.zeros(trials, dtype=int)
    fallback = np.zeros(trials)
    covered = True
    slips: list[tuple[np.ndarray, np.ndarray] | None] = []
    own_slip = np.zeros((trials, len(model.pools)))
    offset = 0.0
    for i, pool in enumerate(model.pools):
        mine = own.get(i)
        active_zones = {h.zone: zones[h.zone] for h in pool.zone_hits if h.zone in zones}
        if mine is None and not active_zones:
            slips.append(None)
        elif pool.stateful:
            extra, fails, prem, ok = _gang(model, pool, mine, active_zones, m)
            delay += extra
            own_slip[:, i] = extra
            events += fails
            fallback += prem
            covered &= ok
            slips.append(None)
        else:
            total, n, prem, progress, slip, ok = _stateless(model, pool, mine, active_zones,
                                                            offset, m)
            covered &= ok
            own_slip[:, i] = total
            events += n
            fallback += prem
            if model.mode == "async":
                slips.append((progress, slip))
            else:
                delay += total
                slips.append(None)
        if model.mode != "async" and m0 > 0:
            offset += pool.base_busy_hours / m0
    if model.mode == "async" and any(s is not None for s in slips):
        if model.async_buffer == "unbounded":
            delay += _totals_delay(model, slips, trials)
        else:
            delay += _pipeline_delay(model, slips, trials)
    if m is None:
        cost = model.base_cost_usd + model.usd_per_hour * delay + fallback
    else:  # base progress units → hours; the job itself takes m × M0, billed by the hour
        spot, job = m * delay, (m - 1.0) * m0
        own_slip = own_slip * m[:, None]
        cost = model.base_cost_usd + model.usd_per_hour * spot + model.time_rate * job + fallback
        delay = spot + job
    makespan = m0 + delay + model.wait_hours
    for slack, past in model.overruns:  # booked capacity: free until it ends, then on demand
        cost = cost + past * np.maximum(0.0, delay - slack)
    return ChunkResult(makespan, cost, events, fallback, own_slip,
                       np.ones(trials) if m is None else m), covered
