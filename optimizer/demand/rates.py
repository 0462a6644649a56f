"""Phase rates: node-hours of a phase's whole work on one node of a shape, per precision the
spec and the policy allow (the demand model's answer in the unit the planner prices).

Used by the planner (:mod:`ptplan.planner.candidates`) and, independently of the planner, by
the verifier (:mod:`ptplan.planfile.verify`) when it recomputes a plan's demand.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ptplan.core.hardware import GPU
from ptplan.demand.cells import CalibrationUse, Conditions, Timing, phase_cell, precision_options
from ptplan.demand.model import Demand
from ptplan.policies.model import Policy, default_policy
from ptplan.spec.frameworks import framework_precisions
from ptplan.spec.project import ModelBlock

GEN_PHASES = frozenset({"rollout", "eval", "scoring"})
"""Phases served by inference replicas (whole replicas per node, or nodes per replica)."""


@dataclass(frozen=True)
class PhaseRate:
    """A phase on one node shape at one precision: busy hours as a function of the nodes that
    run it (decode steps drain, so generation is not linear in nodes), and its floor."""

    phase: str
    precision: str
    node_hours: float
    """Busy node-hours at the reference pool (every decode replica full; ``estimate``)."""
    nodes_per_replica: int
    replica_gpus: int
    gpu_hours: float
    calibrated: bool
    floor_hours: float = 0.0
    """Least busy time whatever the node count (sequential work inside each step)."""
    timing: Timing | None = field(default=None, compare=False, repr=False)
    usable_gpus: int = 0
    """GPUs of each node that the phase uses (whole replicas)."""
    layout: dict[str, int | bool] | None = None
    """Training: the parallel layout on a pool within one node."""
    layout_multinode: dict[str, int | bool] | None = None
    """Training: the layout on a pool that spans nodes."""
    calibration: CalibrationUse | None = None

    def layout_for(self, nodes: float) -> dict[str, int | bool] | None:
        """How the phase runs on ``nodes`` effective nodes: its training layout, or for
        generation the engine's tensor-parallel size and replicas (None: forward passes only)."""
        if self.timing is None:
            return self.layout
        gpus = nodes * self.usable_gpus
        if self.timing.train:
            cell = self.timing.train[0][1].at(gpus)
            return cell.layout.as_dict() if cell.layout is not None else None
        if self.timing.curves:
            engine = self.timing.curves[0].option_at(gpus).engine
            return {"tp": engine.gpus, "dp": max(1, int(gpus // engine.gpus))}
        return None

    def busy(self, effective_nodes: float) -> float:
        return float(self.busy_array(np.asarray([effective_nodes], dtype=float))[0])

    def busy_array(self, effective_nodes: np.ndarray) -> np.ndarray:
        """Busy hours on ``effective_nodes`` nodes (fractional: spot nodes lose a share)."""
        if self.timing is None:
            return np.maximum(self.node_hours / effective_nodes, self.floor_hours)
        return self.timing.busy_seconds(effective_nodes * self.usable_gpus) / 3600.0

    def node_hours_at(self, effective_nodes: float) -> float:
        """Busy node-hours on that many effective nodes (tokens per node-hour = tokens / this)."""
        return self.busy(effective_nodes) * effective_nodes


def allowed_precisions(demand: Demand, phase: str, policy: Policy | None = None
                       ) -> tuple[str, ...]:
    """Precisions a phase may use: what the phase supports ∩ the spec's ``precisions`` (eval
    follows rollout when it has no entry; the update defaults to bf16, or fp16/fp32 on GPUs
    without bf16, which :func:`phase_rates` applies per GPU) ∩ the policy's."""
    policy = policy or default_policy()
    allowed = precision_options(phase)
    spec_p = demand.spec.precisions or {}
    if phase in spec_p:
        allowed = tuple(q for q in allowed if q in spec_p[phase])  # type: ignore[index]
    elif phase == "eval" and "rollout" in spec_p:
        allowed = tuple(q for q in allowed if q in spec_p["rollout"])  # type: ignore[index]
    from_policy = policy.precisions(phase)
    if from_policy is not None:
        allowed = tuple(q for q in allowed if q in from_policy)
    ok = framework_precisions(demand.spec, phase)
    if ok is not None:
        allowed = tuple(q for q in allowed if q in ok)
    return allowed


def gpu_precisions(demand: Demand, phase: str, gpu: GPU, policy: Policy | None = None
                   ) -> tuple[str, ...]:
    """The allowed precisions this GPU runs the phase in. Without a spec entry for the update,
    training is bf16 (what veRL, OpenRLHF, NeMo RL and Megatron train in), or the best 16/32-bit
    format a GPU without bf16 has; fp16 and fp8 training are opt-in via ``precisions.update``."""
    allowed = tuple(q for q in allowed_precisions(demand, phase, policy) if gpu.supports(q))
    if phase == "update" and "update" not in (demand.spec.precisions or {}):
        if "bf16" in allowed:
            return ("bf16",)
        fallback = [q for q in ("fp16", "fp32") if q in allowed]
        return tuple(fallback[:1])
    return allowed


def phase_rates(demand: Demand, phase: str, gpu: GPU, gpn: int, tail: bool,
                policy: Policy | None = None, colocated: bool = False,
                with_trainer: bool = False) -> list[PhaseRate]:
    """Per allowed precision that fits: the phase's timing on nodes of ``gpn`` GPUs (with the
    policy's high-precision fallback share for teacher and reward scoring). ``tail``: the
    layout is synchronous (each step waits for its longest response); ``colocated``: the rollout
    engine shares the GPUs with resident training state; ``with_trainer``: the pool also runs
    the update (colocated, or scoring merged into the update pool), so the training engine's
    scoring forwards take its fitted efficiency (:func:`ptplan.demand.cells.scoring_on_trainer`)."""
    policy = policy or default_policy()
    synchronous = tail if phase in GEN_PHASES else True
    together = colocated and demand.spec.method not in ("sft", "generate")
    trainer = (with_trainer or colocated) and phase == "scoring"
    pinned = demand.memo.get(("policy", id(policy)))  # its JSON, once per policy object
    if pinned is None or pinned[0] is not policy:
        pinned = demand.memo[("policy", id(policy))] = (policy, policy.model_dump_json())
    key = (phase, gpu.name, gpn, synchronous, together, trainer, pinned[1])
    hit = demand.memo.get(key)
    if hit is None:
        hit = demand.memo[key] = _phase_rates(demand, phase, gpu, gpn, synchronous, policy,
                                              together, trainer)
    return list(hit)


def engine_models(demand: Demand, phase: str) -> tuple[ModelBlock, ...]:
    """The models a phase runs in inference engines whose tensor parallel must split their
    heads (vLLM): the policy for rollout and eval, the teacher for scoring (the reference and
    reward forwards run in the training engine, which shards them otherwise)."""
    if phase != "scoring":
        return (demand.spec.model,)
    return tuple(p.model for p in demand.phase_parts(phase) if p.role == "teacher")


def _phase_rates(demand: Demand, phase: str, gpu: GPU, gpn: int, tail: bool, policy: Policy,
                 colocated: bool, with_trainer: bool = False) -> list[PhaseRate]:
    out: list[PhaseRate] = []
    fallback: dict[str, float] | None = (
        {str(k): v for k, v in policy.high_precision_fallback.items()}
        if phase == "scoring" else None)
    cond = Conditions(gpn, colocated,
                      policy.kv_cache_fp8, with_trainer)
    rel = demand.spec.release
    spans_ok = rel is None or rel.engine_spans_nodes
    for q in gpu_precisions(demand, phase, gpu, policy):
        pc = phase_cell(demand, phase, gpu, q, fallback=fallback, cond=cond, synchronous=tail)
        if not pc.fits:
            continue
        g = pc.replica_gpus
        if phase in GEN_PHASES:
            if g <= gpn:
                npr, usable = 1, (gpn // g) * g
            elif not spans_ok and phase != "scoring":  # engines stay within a node
                continue
            else:
                npr = math.ceil(g / gpn)
                if not all(m.splits_tp(npr * gpn) for m in engine_models(demand, phase)):
                    continue  # whole nodes of tensor parallel that vLLM cannot shard the heads on
                pc = phase_cell(demand, phase, gpu, q, replica_gpus=npr * gpn,
                                fallback=fallback, cond=cond, synchronous=tail)
                if not pc.fits:
                    continue
                usable = gpn
        else:
            npr, usable = math.ceil(g / gpn), gpn
        assert pc.timing is not None
        # pc.gpu_hours is the busy time at the reference pool times its GPUs
        out.append(PhaseRate(phase, q, pc.gpu_hours / usable, npr, pc.replica_gpus,
                             pc.gpu_hours, pc.calibrated,
                             pc.timing.floor_seconds * pc.timing.scale / 3600.0, pc.timing,
                             usable, pc.layout, pc.layout_multinode, pc.calibration))
    return out
