"""The demand model on a cluster you already have: per-phase seconds per step on a fixed set of
GPUs split into pools, as a team runs a published recipe.

The planner chooses pools; this answers "how long does this job take on *that* cluster", which
is what a published run reports and what ``benchmarks/validation.py`` compares against.
Layouts as in the planner: ``colocated`` (every phase on every GPU, one after another),
``sync`` (phases on their own pools, one after another, plus the weight sync to the rollout
pool), ``async`` (rollout overlaps scoring and update; a step takes the longer of the two).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ptplan.core.errors import InputError
from ptplan.core.hardware import resolve_gpu
from ptplan.demand.model import Demand, build_demand
from ptplan.demand.rates import PhaseRate, phase_rates
from ptplan.policies.model import Policy, default_policy
from ptplan.spec.project import ProjectSpec

POOL_OF = {"rollout": "rollout", "eval": "rollout", "scoring": "scoring", "update": "update"}


@dataclass(frozen=True)
class ClusterRun:
    """Seconds per step of each phase on its pool, and the step."""

    phases: dict[str, float]
    precision: dict[str, str]
    layout: dict[str, dict[str, int | bool] | None]
    weight_sync_seconds: float
    step_seconds: float
    """One step without checkpoint saves (what per-step timings average)."""
    gpus: int
    steps: int
    checkpoint_seconds: float = 0.0
    """All checkpoint write stalls of the run."""
    notes: list[str] = field(default_factory=list)

    @property
    def gpu_hours(self) -> float:
        """The whole run on the whole cluster, checkpoint stalls included."""
        return (self.step_seconds * self.steps + self.checkpoint_seconds) * self.gpus / 3600.0


def _best(rates: list[PhaseRate], nodes: float) -> PhaseRate | None:
    """The fastest allowed precision at this pool size."""
    return min(rates, key=lambda r: (r.busy(nodes), r.precision), default=None)


def run_on_cluster(spec: ProjectSpec, gpu_name: str, gpus: int, gpus_per_node: int,
                   mode: str, pools: dict[str, int] | None = None,
                   policy: Policy | None = None) -> ClusterRun:
    """Per-step seconds of ``spec`` on ``gpus`` GPUs of one type. ``pools`` (sync/async) gives
    GPUs per pool (``rollout``, ``scoring``, ``update``; scoring defaults to the update pool)."""
    if mode not in ("colocated", "sync", "async"):
        raise InputError(f"mode {mode!r}: use colocated, sync or async")
    gpu = resolve_gpu(gpu_name, "gpu")
    policy = policy or default_policy()
    demand: Demand = build_demand(spec)
    phases, precision, layout = {}, {}, {}
    notes: list[str] = []
    if mode == "colocated":
        pool_gpus = {"rollout": gpus, "scoring": gpus, "update": gpus}
    else:
        if not pools or "rollout" not in pools or "update" not in pools:
            raise InputError("pools: sync and async runs need GPUs per pool for rollout and "
                             "update (scoring defaults to the update pool)")
        pool_gpus = {"rollout": pools["rollout"], "update": pools["update"],
                     "scoring": pools.get("scoring", pools["update"])}
        if sum(set(pools.values())) > gpus and sum(pools.values()) > gpus:
            notes.append(f"pools hold {sum(pools.values())} GPUs, more than the {gpus} given")
    for phase in demand.phases:
        if phase == "checkpoint":
            continue
        g = pool_gpus[POOL_OF[phase]]
        gpn = min(gpus_per_node, g)
        rates = phase_rates(demand, phase, gpu, gpn, mode != "async", policy,
                            colocated=(mode == "colocated"))
        best = _best(rates, g / gpn)
        if best is None:
            raise InputError(f"{phase} does not fit {g} x {gpu.name} (nodes of {gpn})")
        phases[phase] = best.busy(g / gpn) * 3600.0 / demand.steps
        precision[phase] = best.precision
        layout[phase] = best.layout_for(g / gpn)
    ws = 0.0
    if mode != "colocated" and spec.method not in ("sft", "generate"):
        ws = demand.weight_sync_gb_per_step / spec.efficiency.weight_sync_gb_per_s
    ckpt = demand.checkpoint_stall_hours * 3600.0
    if mode == "async":
        rest = sum(v for k, v in phases.items() if k not in ("rollout", "eval"))
        gen = phases.get("rollout", 0.0) + phases.get("eval", 0.0)
        step = max(gen + ws, rest)
    else:
        step = sum(phases.values()) + ws
    return ClusterRun(phases, precision, layout, ws, step, gpus, demand.steps, ckpt, notes)
