"""The demand model on a cluster you already have (``ptplan estimate --cluster``): per step the
seconds of each phase on a fixed set of GPUs split into pools, the step, the run's wall time,
GPU-hours and utilisation, each with its 80 % interval.

The planner chooses pools; this answers "how long does this job take on *that* cluster", which
is what a published run reports and what ``benchmarks/validation.py`` compares against.
Layouts as in the planner: ``colocated`` (every phase on every GPU, one after another),
``sync`` (phases on their own pools, one after another, plus the weight sync to the rollout
pool), ``async`` (rollout overlaps scoring and update; a step takes the longer of the two).
Without ``pools``, sync and async runs split the cluster in whole nodes (or GPUs within one
node) the way that gives the shortest step.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from ptplan.core.errors import InputError
from ptplan.core.fit import model_interval
from ptplan.core.hardware import resolve_gpu
from ptplan.demand.model import Demand, build_demand
from ptplan.demand.rates import PhaseRate, phase_rates
from ptplan.policies.model import Policy, default_policy
from ptplan.spec.project import ProjectSpec

POOL_OF = {"rollout": "rollout", "eval": "rollout", "scoring": "scoring", "update": "update"}
MODES = ("colocated", "sync", "async")


@dataclass(frozen=True)
class ClusterRun:
    """Seconds per step of each phase on its pool, and the step."""

    phases: dict[str, float]
    """Busy seconds per step of rollout, eval (amortised over the steps), scoring and update
    (the update includes the framework's per-step time, ``overhead_seconds``)."""
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
    gpu: str = ""
    gpus_per_node: int = 8
    mode: str = "colocated"
    pools: dict[str, int] = field(default_factory=dict)
    reference_gpu_hours: float = 0.0
    """The phases' GPU-hours at their most efficient pool sizes (``ptplan estimate``)."""
    overhead_seconds: float = 0.0
    """The framework's per-step time outside the modelled phases (fitted; in ``update``)."""
    method: str = "rl"

    @property
    def wall_hours(self) -> float:
        return (self.step_seconds * self.steps + self.checkpoint_seconds) / 3600.0

    @property
    def gpu_hours(self) -> float:
        """The whole run on the whole cluster, checkpoint stalls included."""
        return self.wall_hours * self.gpus

    @property
    def utilisation(self) -> float:
        """The share of the cluster's GPU-hours the job would need at its most efficient pool
        sizes: the rest is idle (drain tails, barriers, pools waiting for each other)."""
        return min(1.0, self.reference_gpu_hours / self.gpu_hours) if self.gpu_hours else 0.0

    def phase_list(self) -> list[dict[str, Any]]:
        """Per step: generation (its drain tail included), eval, scoring, update, framework
        overhead, weight sync and checkpoint (amortised)."""
        names = [("generation", self.phases.get("rollout")), ("eval", self.phases.get("eval")),
                 ("scoring", self.phases.get("scoring")),
                 ("update", (self.phases["update"] - self.overhead_seconds)
                  if "update" in self.phases else None),
                 ("framework_overhead", self.overhead_seconds if self.overhead_seconds else None),
                 ("weight_sync", self.weight_sync_seconds or None),
                 ("checkpoint", self.checkpoint_seconds / self.steps
                  if self.checkpoint_seconds and self.steps else None)]
        return [{"name": n, "seconds_per_step": v} for n, v in names if v is not None]

    def to_json(self) -> dict[str, Any]:
        """The ``cluster_run`` block of ``ptplan estimate --cluster --format json``."""
        iv = model_interval(self.method)
        per_step = self.step_seconds + (self.checkpoint_seconds / self.steps if self.steps
                                        else 0.0)
        return {
            "gpu": self.gpu, "gpus": self.gpus, "gpus_per_node": self.gpus_per_node,
            "pipeline": self.mode, "pools": dict(self.pools),
            "seconds_per_step": per_step,
            "seconds_per_step_without_checkpoint": self.step_seconds,
            "steps": self.steps,
            "wall_hours": self.wall_hours, "gpu_hours": self.gpu_hours,
            "utilisation": self.utilisation,
            "reference_pool_gpu_hours": self.reference_gpu_hours,
            "phases": self.phase_list(),
            "precision": dict(self.precision), "layout": dict(self.layout),
            "interval": {"level": iv.level,
                         "seconds_per_step": list(iv.of(per_step)),
                         "wall_hours": list(iv.of(self.wall_hours)),
                         "gpu_hours": list(iv.of(self.gpu_hours)),
                         "basis": iv.basis},
            "notes": list(self.notes),
        }


def _best(rates: list[PhaseRate], nodes: float) -> PhaseRate | None:
    """The fastest allowed precision at this pool size."""
    return min(rates, key=lambda r: (r.busy(nodes), r.precision), default=None)


def run_on_cluster(spec: ProjectSpec, gpu_name: str, gpus: int, gpus_per_node: int,
                   mode: str, pools: dict[str, int] | None = None,
                   policy: Policy | None = None) -> ClusterRun:
    """Per-step seconds of ``spec`` on ``gpus`` GPUs of one type. ``pools`` (sync/async) gives
    GPUs per pool (``rollout``, ``scoring``, ``update``; scoring defaults to the update pool);
    without it the split with the shortest step is taken."""
    if mode not in MODES:
        raise InputError(f"mode {mode!r}: use colocated, sync or async")
    if gpus < 1 or gpus_per_node < 1:
        raise InputError(f"cluster: {gpus} GPUs in nodes of {gpus_per_node}: both must be ≥ 1")
    gpu = resolve_gpu(gpu_name, "gpu")
    policy = policy or default_policy()
    demand: Demand = build_demand(spec)
    if mode != "colocated" and spec.method in ("sft", "generate"):
        raise InputError(f"--pipeline {mode}: a {spec.method} job has one pool; use colocated")
    _framework_pools(spec, mode, pools)
    return _vendor_noted(spec, gpu, _run_split(spec, demand, gpu, gpus, gpus_per_node, mode,
                                               pools, policy))


def _run_split(spec: ProjectSpec, demand: Demand, gpu: Any, gpus: int, gpus_per_node: int,
               mode: str, pools: dict[str, int] | None, policy: Policy) -> ClusterRun:
    """The run on every GPU (colocated), on the pools given, or on the best split."""
    if mode == "colocated":
        return _run(spec, demand, gpu, gpus, gpus_per_node, mode,
                    {"rollout": gpus, "scoring": gpus, "update": gpus}, policy, [])
    if pools is not None:
        if "rollout" not in pools or "update" not in pools:
            raise InputError("pools: sync and async runs need GPUs per pool for rollout and "
                             "update (scoring defaults to the update pool)")
        pool_gpus = {"rollout": pools["rollout"], "update": pools["update"],
                     "scoring": pools.get("scoring", pools["update"])}
        notes = []
        if sum(set(pools.values())) > gpus and sum(pools.values()) > gpus:
            notes.append(f"pools hold {sum(pools.values())} GPUs, more than the {gpus} given")
        return _run(spec, demand, gpu, gpus, gpus_per_node, mode, pool_gpus, policy, notes,
                    scoring_apart="scoring" in pools)
    return _best_split(spec, demand, gpu, gpus, gpus_per_node, mode, policy)


def _vendor_noted(spec: ProjectSpec, gpu: Any, run: ClusterRun) -> ClusterRun:
    """A part no fitted run used (AMD Instinct, AWS Trainium): the estimate says that its
    efficiency factors come from NVIDIA runs, and whether the spec's framework release plans for
    that vendor at all."""
    if gpu.vendor == "NVIDIA":
        return run
    note = (f"{gpu.name} is an {gpu.vendor} part: its figures apply the efficiency factors "
            "fitted on NVIDIA runs (docs/validation.md), so they assume its software reaches "
            "the same share of its peaks")
    rel = spec.release
    if rel is not None and gpu.vendor not in rel.accelerators:
        note += (f"; framework {rel.key} as ptplan pins and renders it runs "
                 f"{', '.join(sorted(rel.accelerators))} builds ({rel.cite('accelerators')}), "
                 "so plan never buys this part for it")
    return replace(run, notes=[*run.notes, note])


def _framework_pools(spec: ProjectSpec, mode: str, pools: dict[str, int] | None) -> None:
    """What the spec's framework release cannot run on a cluster split that way (one line,
    exit 2; docs/frameworks.md)."""
    rel = spec.release
    if rel is None or spec.method not in ("rl", "opd"):
        return
    if mode != "colocated" and mode not in rel.separate_rollout_pipelines:
        ok = " or ".join(sorted(rel.separate_rollout_pipelines))
        raise InputError(f"--pipeline {mode}: framework {rel.key} runs rollout engines on a pool "
                         f"of their own only {ok} ({rel.cite('separate_rollout')}); use "
                         f"--pipeline {ok} or colocated, or set framework: any")
    apart = pools is not None and "scoring" in pools
    teacher = spec.teacher is not None and rel.teacher_needs_own_pool
    if teacher and not apart:
        use = mode if mode != "colocated" else "async"
        raise InputError(f"framework {rel.key} runs the OPD teacher on a pool of its own "
                         f"({rel.cite('teacher_pool')}); use --pipeline {use} with --pools "
                         "rollout=N,update=M,scoring=K")
    bad = [r for r in spec.scoring_roles if r not in rel.own_pool_roles]
    if apart and bad:
        raise InputError(f"--pools scoring=: framework {rel.key} runs {', '.join(bad)} on the "
                         f"trainer's pool ({rel.cite('trainer_roles')}); drop scoring= (it "
                         "then shares the update pool)")


def _best_split(spec: ProjectSpec, demand: Demand, gpu: Any, gpus: int, gpn: int, mode: str,
                policy: Policy) -> ClusterRun:
    unit = gpn if gpus >= 2 * gpn else 1
    best: ClusterRun | None = None
    errors: list[str] = []
    for r in range(unit, gpus, unit):
        pool_gpus = {"rollout": r, "update": gpus - r, "scoring": gpus - r}
        try:
            run = _run(spec, demand, gpu, gpus, gpn, mode, pool_gpus, policy,
                       [f"pools: the split of {gpus} GPUs with the shortest step, rollout {r}, "
                        f"scoring and update {gpus - r}"])
        except InputError as e:
            errors.append(str(e))
            continue
        if best is None or run.step_seconds < best.step_seconds:
            best = run
    if best is None:
        why = errors[-1] if errors else f"{gpus} GPUs cannot be split into two pools"
        raise InputError(f"--pipeline {mode}: no split of {gpus} x {gpu.name} runs the job "
                         f"({why}); give more GPUs or use colocated")
    return best


def _run(spec: ProjectSpec, demand: Demand, gpu: Any, gpus: int, gpus_per_node: int, mode: str,
         pool_gpus: dict[str, int], policy: Policy, notes: list[str],
         scoring_apart: bool = False) -> ClusterRun:
    """``scoring_apart``: scoring has a pool of its own (``scoring=`` given); otherwise it runs
    on the update's GPUs, where the training engine's forwards take its efficiency."""
    phases, precision, layout = {}, {}, {}
    reference = 0.0
    overhead = 0.0
    for phase in demand.phases:
        if phase == "checkpoint":
            continue
        g = pool_gpus[POOL_OF[phase]]
        gpn = min(gpus_per_node, g)
        rates = phase_rates(demand, phase, gpu, gpn, mode != "async", policy,
                            colocated=(mode == "colocated"),
                            with_trainer=not scoring_apart)  # rates apply it to scoring only
        best = _best(rates, g / gpn)
        if best is None:
            tp = spec.efficiency.rollout_tp
            if tp and phase in ("rollout", "eval"):
                raise InputError(f"efficiency.rollout_tp {tp}: an engine of {tp} x {gpu.name} "
                                 f"does not hold the {spec.model.params_b:g}B weights and a KV "
                                 f"cache for {phase}; raise rollout_tp or remove it")
            raise InputError(f"{phase} does not fit {g} x {gpu.name} (nodes of {gpn})")
        phases[phase] = best.busy(g / gpn) * 3600.0 / demand.steps
        precision[phase] = best.precision
        layout[phase] = best.layout_for(g / gpn)
        reference += best.gpu_hours
        if best.timing is not None and best.timing.fixed_seconds:
            overhead = best.timing.fixed_seconds / demand.steps
    ws = 0.0  # weight sync to separate engines, or the refit of colocated ones
    if spec.method not in ("sft", "generate"):
        ws = demand.refit_seconds if mode == "colocated" else demand.weight_sync_seconds
    ckpt = demand.checkpoint_stall_hours * 3600.0
    if mode == "async":
        rest = sum(v for k, v in phases.items() if k not in ("rollout", "eval"))
        gen = phases.get("rollout", 0.0) + phases.get("eval", 0.0)
        step = max(gen + ws, rest)
    else:
        step = sum(phases.values()) + ws
    shown = {} if mode == "colocated" else dict(pool_gpus)
    return ClusterRun(phases, precision, layout, ws, step, gpus, demand.steps, ckpt, notes,
                      gpu.name, gpus_per_node, mode, shown, reference, overhead, spec.method)
