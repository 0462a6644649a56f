"""What-if execution: solve price scenarios in worker processes or on Ray actors.

Each worker parses the spec, catalog and policy once and keeps what does not depend on
prices (the demand model and the busy-time grids) across the scenarios it solves; results come
back in submission order, so the output does not depend on the number of workers or the
backend (see :mod:`ptplan.scenarios.analysis` for why every scenario is a full, verified re-solve).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

from ptplan.core.errors import InfeasibleError, InputError
from ptplan.planfile.schema import Plan
from ptplan.policies.model import Policy
from ptplan.providers.base import Catalog
from ptplan.scenarios.pricerules import PriceRule, RuleEffect, apply_rules
from ptplan.spec.project import ProjectSpec


@dataclass(frozen=True)
class Setup:
    """Everything a worker needs; loaded once per worker."""

    spec: ProjectSpec
    catalog: Catalog
    policy: Policy
    objective: str = "cost"
    solver: str = "highs"
    timings: bool = True


@dataclass(frozen=True)
class Outcome:
    """One scenario's result: a verified plan, or why there is none."""

    rules: tuple[str, ...]
    plan: Plan | None
    error: str | None = None
    effects: tuple[RuleEffect, ...] = ()
    seconds: float = 0.0


class Session:
    """Solves scenarios of one spec, keeping everything that does not depend on prices."""

    def __init__(self, setup: Setup) -> None:
        from ptplan.demand.model import build_demand

        self.setup = setup
        self.demand = build_demand(setup.spec)
        self.grid_cache: dict = {}
        self.indices: dict[str, tuple[int, ...]] = {}

    def solve(self, rules: Sequence[PriceRule]) -> Outcome:
        from ptplan.planner.api import plan
        from ptplan.planner.search.engine import prepare

        s = self.setup
        start = time.perf_counter()
        catalog, effects = apply_rules(s.catalog, rules, self.indices)
        texts = tuple(r.text for r in rules)
        try:
            # with sla.start_after the scenario books capacity blocks and flex-start exactly
            # as `ptplan plan` does (planner.booking.plans: no shared context there)
            ctx = None if s.spec.sla.start_after is not None else prepare(
                s.spec, catalog, s.policy, demand=self.demand, grid_cache=self.grid_cache)
            p = plan(s.spec, catalog, s.objective, s.solver, explain=False, timings=s.timings,
                     ctx=ctx, policy=s.policy)
        except InfeasibleError as exc:
            return Outcome(texts, None, str(exc), tuple(effects),
                           time.perf_counter() - start)
        return Outcome(texts, p, None, tuple(effects), time.perf_counter() - start)


_SESSION: Session | None = None


def _init_worker(setup: Setup) -> None:
    global _SESSION
    _SESSION = Session(setup)


def _solve_in_worker(rules: tuple[PriceRule, ...]) -> Outcome:
    assert _SESSION is not None, "worker not initialised"
    return _SESSION.solve(rules)


class _RayActor:
    """A Ray actor holding one :class:`Session` (created with ``ray.remote`` at run time)."""

    def __init__(self, setup: Setup) -> None:
        self.session = Session(setup)

    def solve(self, rules: tuple[PriceRule, ...]) -> Outcome:
        return self.session.solve(rules)


def default_workers() -> int:
    return max(1, min(2, os.cpu_count() or 1))


class Runner:
    """Runs scenarios in this process (1 worker), a spawn process pool, or on Ray actors.
    Use as a context manager; :meth:`map` returns outcomes in the order of its jobs."""

    def __init__(self, setup: Setup, workers: int | None = None, ray_address: str | None = None,
                 progress: Callable[[int, int], None] | None = None) -> None:
        if workers is not None and workers < 1:
            raise InputError(f"--workers: {workers} is not a worker count; use 1 or more")
        self.setup = setup
        self.requested = workers
        self.workers = workers or default_workers()
        self.ray_address = ray_address
        self.progress = progress
        self.backend = "ray" if ray_address else ("process" if self.workers > 1 else "serial")
        self._local: Session | None = None
        self._pool: ProcessPoolExecutor | None = None
        self._actors: Any = None
        self._ray_started = False
        self.solves = 0

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        if self._actors is not None:
            import ray

            for a in self._actors:
                ray.kill(a)
            self._actors = None
            if self._ray_started:
                ray.shutdown()

    def local(self) -> Session:
        if self._local is None:
            self._local = Session(self.setup)
        return self._local

    def map(self, jobs: Sequence[tuple[PriceRule, ...]]) -> list[Outcome]:
        self.solves += len(jobs)
        if self.backend == "ray":
            return self._map_ray(jobs)
        if self.backend == "serial" or len(jobs) <= 1:
            out = []
            for n, job in enumerate(jobs):
                out.append(self.local().solve(job))
                self._tick(n + 1, len(jobs))
            return out
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                max_workers=self.workers, mp_context=multiprocessing.get_context("spawn"),
                initializer=_init_worker, initargs=(self.setup,))
        out = []
        for n, res in enumerate(self._pool.map(_solve_in_worker, jobs)):
            out.append(res)
            self._tick(n + 1, len(jobs))
        return out

    def _tick(self, done: int, total: int) -> None:
        if self.progress is not None:
            self.progress(done, total)

    def ready(self) -> None:
        """Start the Ray actors now (their number, one per cluster CPU unless ``workers`` was
        given, sets :attr:`workers`, which sweeps and searches use to size their rounds)."""
        if self.backend == "ray":
            self._start_ray()

    def _start_ray(self) -> None:
        try:
            import ray
        except ImportError:
            raise InputError("--ray: the ray package is not installed; install the extra: "
                             "pip install 'ptplan[ray]'") from None
        if self._actors is None:
            if not ray.is_initialized():
                try:
                    ray.init(address=self.ray_address, include_dashboard=False,
                             log_to_driver=False, logging_level=logging.ERROR)
                except (ConnectionError, ValueError, RuntimeError) as exc:
                    raise InputError(f"--ray: cannot connect to {self.ray_address!r} ({exc}); "
                                     "give a running cluster's address (ray://host:10001, "
                                     "host:6379, auto) or 'local' to start one") from None
                self._ray_started = True
            cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
            n = min(self.requested or cpus, cpus)
            actor_cls = ray.remote(num_cpus=1)(_RayActor)
            setup_ref = ray.put(self.setup)
            self._actors = [actor_cls.remote(setup_ref) for _ in range(n)]
            self.workers = n

    def _map_ray(self, jobs: Sequence[tuple[PriceRule, ...]]) -> list[Outcome]:
        from ray.util import ActorPool

        self._start_ray()
        pool = ActorPool(self._actors)
        out = []
        for n, res in enumerate(pool.map(lambda a, job: a.solve.remote(job), list(jobs))):
            out.append(res)
            self._tick(n + 1, len(jobs))
        return out


def validate_jobs(setup: Setup, jobs: Sequence[Sequence[PriceRule]]) -> None:
    """Apply every job's rules once here, so that a bad rule (nothing matched, a negative
    price) stops the run with one line before any worker starts."""
    indices: dict[str, tuple[int, ...]] = {}
    for job in jobs:
        apply_rules(setup.catalog, job, indices)


