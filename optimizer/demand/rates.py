"""Phase rates: node-hours of a phase's whole work on one node of a shape, per precision the
spec and the policy allow (the demand model's answer in the unit the planner prices).

Used by the planner (:mod:`optimizer.planner.candidates`) and, independently of the planner, by
the verifier (:mod:`optimizer.plan.verify`) when it recomputes a plan's demand.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from optimizer.core.hardware import GPU
from optimizer.demand.model import Demand, latency_floor_hours, phase_cell, precision_options
from policies.model import Policy, default_policy

GEN_PHASES = frozenset({"rollout", "eval", "scoring"})
"""Phases served by inference replicas (whole replicas per node, or nodes per replica)."""


@dataclass(frozen=True)
class PhaseRate:
    """Node-hours for a phase's whole work on one effective node of a shape, at a precision."""

    phase: str
    precision: str
    node_hours: float
    nodes_per_replica: int
    replica_gpus: int
    gpu_hours: float
    calibrated: bool
    floor_hours: float = 0.0
    """Least busy time whatever the node count (sequential work inside each step)."""

    def busy(self, effective_nodes: float) -> float:
        return max(self.node_hours / effective_nodes, self.floor_hours)


def allowed_precisions(demand: Demand, phase: str, policy: Policy | None = None
                       ) -> tuple[str, ...]:
    """Precisions a phase may use: what the phase supports ∩ the spec's ``precisions`` (eval
    follows rollout when it has no entry) ∩ the policy's."""
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
    return allowed


def phase_rates(demand: Demand, phase: str, gpu: GPU, gpn: int, tail: bool,
                policy: Policy | None = None) -> list[PhaseRate]:
    """Per allowed precision that fits: node-hours on one node of ``gpn`` GPUs (with the
    policy's high-precision fallback share for teacher and reward scoring)."""
    policy = policy or default_policy()
    out: list[PhaseRate] = []
    tail_factor = demand.spec.efficiency.tail_factor if tail else 1.0
    fallback: dict[str, float] | None = (
        {str(k): v for k, v in policy.high_precision_fallback.items()}
        if phase == "scoring" else None)
    for q in allowed_precisions(demand, phase, policy):
        if not gpu.supports(q):
            continue
        pc = phase_cell(demand, phase, gpu, q, fallback=fallback)
        if not pc.fits:
            continue
        g = pc.replica_gpus
        if phase in GEN_PHASES:
            if g <= gpn:
                npr, usable = 1, (gpn // g) * g
            else:
                npr = math.ceil(g / gpn)
                pc = phase_cell(demand, phase, gpu, q, replica_gpus=npr * gpn,
                                fallback=fallback)
                if not pc.fits:
                    continue
                usable = gpn
        else:
            npr, usable = math.ceil(g / gpn), gpn
        busy_gpu_hours = pc.gpu_hours + pc.decode_gpu_hours * (tail_factor - 1.0)
        floor = latency_floor_hours(demand, phase, gpu, q, pc.replica_gpus)
        out.append(PhaseRate(phase, q, busy_gpu_hours / usable, npr, pc.replica_gpus,
                             busy_gpu_hours, pc.calibrated, floor))
    return out
