"""Run the trials of a simulation in chunks: in this process, in worker processes, or on Ray.

Trial t belongs to chunk t // CHUNK, and chunk c draws only from the seed ``(seed, c)``; chunks
are joined in their order, so the result is the same bit for bit whatever runs them.
"""

from __future__ import annotations

import logging
import multiprocessing
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from ptplan.core.errors import InputError
from ptplan.risk.model import RunModel
from ptplan.risk.montecarlo import CHUNK, ChunkResult, simulate_chunk

MAX_TRIALS = 2_000_000
"""Results are kept per trial (makespan, cost, interruptions, fallback, per-pool slips)."""
MAX_SEED = 2**64 - 1


def chunks(trials: int) -> list[tuple[int, int]]:
    """(chunk index, trials in it) for ``trials`` trials."""
    return [(c, min(CHUNK, trials - c * CHUNK)) for c in range(-(-trials // CHUNK))]


def _one(args: tuple[RunModel, int, int, int]) -> ChunkResult:
    return simulate_chunk(*args)


def check_counts(trials: int, workers: int | None, seed: int = 0) -> None:
    if not 0 <= seed <= MAX_SEED:
        raise InputError(f"--seed: {seed} is not a seed; use an integer from 0 to 2**64 − 1")
    if trials < 1 or trials > MAX_TRIALS:
        raise InputError(f"--trials: {trials} is not a trial count; use 1 to {MAX_TRIALS:,}")
    if workers is not None and workers < 1:
        raise InputError(f"--workers: {workers} is not a worker count; use 1 or more")


def run_trials(model: RunModel, trials: int, seed: int, workers: int | None = None,
               ray_address: str | None = None,
               progress: Callable[[int, int], None] | None = None) -> ChunkResult:
    """All trials, joined in chunk order."""
    check_counts(trials, workers, seed)
    jobs = [(model, seed, c, n) for c, n in chunks(trials)]
    tick = progress or (lambda done, total: None)
    out: list[ChunkResult] = []
    if ray_address is not None:
        out = _ray(jobs, ray_address, workers, tick)
    elif (workers or 1) > 1 and len(jobs) > 1:
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=min(workers or 1, len(jobs)), mp_context=ctx) as ex:
            for res in ex.map(_one, jobs):
                out.append(res)
                tick(sum(len(r.makespan_hours) for r in out), trials)
    else:
        for job in jobs:
            out.append(_one(job))
            tick(sum(len(r.makespan_hours) for r in out), trials)
    return ChunkResult(*(np.concatenate([getattr(r, f) for r in out]) for f in
                         ("makespan_hours", "cost_usd", "interruptions", "fallback_usd",
                          "pool_slip_hours", "time_multiplier")))


def _ray(jobs: list[tuple[RunModel, int, int, int]], address: str, workers: int | None,
         tick: Callable[[int, int], None]) -> list[ChunkResult]:
    try:
        import ray
    except ImportError:
        raise InputError("--ray: the ray package is not installed; install the extra: "
                         "pip install 'ptplan[ray]'") from None
    started = False
    if not ray.is_initialized():
        try:
            ray.init(address=address, include_dashboard=False,
                     log_to_driver=False, logging_level=logging.ERROR)
        except (ConnectionError, ValueError, RuntimeError) as exc:
            raise InputError(f"--ray: cannot connect to {address!r} ({exc}); give a running "
                             "cluster's address (ray://host:10001, host:6379, auto) or 'local' "
                             "to start one") from None
        started = True
    try:
        remote = ray.remote(num_cpus=1)(_one)
        refs = [remote.remote(job) for job in jobs]
        out: list[ChunkResult] = []
        for ref in refs:  # in chunk order
            out.append(ray.get(ref))
            tick(sum(len(r.makespan_hours) for r in out), sum(j[3] for j in jobs))
        return out
    finally:
        if started:
            ray.shutdown()
