"""``ptplan estimate``: per phase the FLOPs, tokens, memory fit and GPU-hours per GPU type.

The report is a plain dict (JSON-ready, deterministic key order). Each phase is reported at its
*reference pool*: the fewest replicas that keep every decode replica's batch full (the most
efficient size; the planner sizes pools against deadline and price instead). Generation phases
include the drain of each synchronous step (the batch shrinks as responses finish and the step
waits for its longest) unless the spec's pipeline is ``async``. Training phases report the
parallel layout chosen (tp, cp, pp, dp, ZeRO stage, offload). Precision: the one asked
(``--precision``), else each phase's default (bf16, or fp16/fp32 where the GPU lacks bf16).
"""

from __future__ import annotations

from typing import Any

from ptplan.core.errors import InputError, suggest
from ptplan.core.hardware import GPU, PRECISIONS, resolve_gpu
from ptplan.demand.cells import (
    CalibrationUse,
    DecodeCurve,
    default_precision,
    phase_cell,
    precision_options,
)
from ptplan.demand.decode import Conditions
from ptplan.demand.model import Demand, build_demand
from ptplan.spec.defaults import applied_defaults
from ptplan.spec.project import ProjectSpec

SCHEMA_VERSION = 2
"""2: reference pools, decode drain, training layouts, calibration factors (tail_factor gone)."""


def _round(x: float, digits: int = 4) -> float:
    return float(f"{x:.{digits}g}") if x else 0.0


def estimate(spec: ProjectSpec, gpu_names: list[str], precision: str | None = None
             ) -> dict[str, Any]:
    if precision is not None and precision not in PRECISIONS:
        raise InputError(f"--precision: unknown precision {precision!r}"
                         f"{suggest(precision, PRECISIONS)}; use one of {', '.join(PRECISIONS)}")
    demand = build_demand(spec)
    chosen: list[GPU] = [resolve_gpu(n, "--gpu") for n in gpu_names]
    synchronous = spec.pipeline != "async"
    phases: list[dict[str, Any]] = []
    totals: dict[str, float | None] = {g.name: 0.0 for g in chosen}
    total_flops = 0.0
    for phase in demand.phases:
        if phase == "checkpoint":
            continue
        parts = demand.phase_parts(phase)
        flops = sum(p.flops for p in parts)
        total_flops += flops
        cells: dict[str, Any] = {}
        hours_by_gpu: dict[str, float | None] = {}
        for g in chosen:
            q = precision or default_precision(g, phase)
            if q is None or q not in precision_options(phase):
                reason = f"{q} is not a {phase} precision" if q else f"{g.name}: no precision"
                cells[g.name] = {"precision": q, "fits": False, "reason": reason}
                hours_by_gpu[g.name] = None
                totals[g.name] = None
                continue
            # the most efficient placement: the training engine's scoring forwards on the
            # trainer's own GPUs (a layout every pipeline offers; cells.scoring_on_trainer)
            pc = phase_cell(demand, phase, g, q, synchronous=synchronous,
                            cond=Conditions(with_trainer=True))
            if not pc.fits or pc.timing is None:
                cells[g.name] = {"precision": q, "fits": False, "reason": pc.reason}
                hours_by_gpu[g.name] = None
                totals[g.name] = None
                continue
            hours = pc.gpu_hours
            hours_by_gpu[g.name] = _round(hours)
            if totals[g.name] is not None:
                totals[g.name] = (totals[g.name] or 0.0) + hours
            ref = pc.timing.reference_gpus()
            entry: dict[str, Any] = {
                "precision": q,
                "fits": True,
                "gpu_hours": _round(hours),
                "tokens_per_second_per_gpu": _round(
                    demand.primary_tokens(phase) / (hours * 3600.0)),
                "reference_gpus": _round(ref),
                "busy_hours_at_reference": _round(hours / ref),
                "latency_floor_hours": _round(pc.timing.floor_seconds * pc.timing.scale / 3600),
                "replica_gpus": pc.replica_gpus,
                "memory_gb_per_gpu": _round(pc.memory_gb_per_gpu),
                "calibrated": pc.calibrated,
                "parts": {
                    name: {"tokens_per_second_per_gpu": _round(c.tokens_per_second_per_gpu),
                           "replica_gpus": c.replica_gpus, "batch": c.batch, "bound": c.bound}
                    for name, c in pc.cells
                },
            }
            if pc.timing.train:
                at_ref = pc.timing.train[0][1].at(ref)
                if at_ref.layout is not None:
                    entry["layout"] = at_ref.layout.as_dict()
                    entry["memory_gb_per_gpu"] = _round(at_ref.memory_gb_per_gpu)
            for curve in pc.timing.curves:
                entry["decode"] = _decode_report(curve, ref)
            if pc.calibration is not None:
                entry["calibration"] = _calibration_report(pc.calibration)
            cells[g.name] = entry
        phases.append({
            "name": phase,
            "tokens": _round(demand.primary_tokens(phase), 6),
            "flops": _round(flops),
            "parts": [
                {"name": p.name, "model": p.role, "kind": p.kind, "tokens": _round(p.tokens, 6),
                 "flops": _round(p.flops)} for p in parts
            ],
            "gpu_hours": hours_by_gpu,
            "synchronous_drain": synchronous if phase in ("rollout", "eval") else None,
            "by_gpu": cells,
        })
    ckpt = _checkpoint(demand, chosen)
    for name, hours in ckpt["gpu_hours"].items():
        if totals.get(name) is not None and hours is not None:
            totals[name] = (totals[name] or 0.0) + hours
    return {
        "schema_version": SCHEMA_VERSION,
        "spec_name": spec.name,
        "method": spec.method,
        "algorithm": spec.algorithm,
        "steps": demand.steps,
        "step_unit": ("optimizer step" if spec.method == "sft"
                      else "one offline generation batch (every prompt at once)"
                      if spec.method == "generate"
                      else "rollout→update step (optimizer mini-batches inside are counted "
                           "separately)"),
        "pipeline_assumed": spec.pipeline,
        "precision": precision or "default (bf16; fp16/fp32 where the GPU lacks bf16)",
        "phases": phases,
        "checkpoint": ckpt,
        "totals": {
            "flops": _round(total_flops),
            "gpu_hours": {k: (_round(v) if v is not None else None) for k, v in totals.items()},
        },
        "defaults_applied": applied_defaults(spec),
        "notes": list(demand.notes),
    }


def _decode_report(curve: DecodeCurve, ref_gpus: float) -> dict[str, Any]:
    """How one generation run behaves at the reference pool."""
    replicas = ref_gpus / curve.engine.gpus
    per_replica = curve.sequences / replicas
    run = float(curve.seconds(ref_gpus)) / max(curve.runs, 1)
    full = per_replica * curve.rollout.lengths.mean / curve.batch \
        * float(curve.engine.iteration_seconds(curve.batch, curve.rollout.prompt_tokens
                                               + curve.rollout.lengths.mean_age))
    return {
        "replica_gpus": curve.engine.gpus,
        "replicas": _round(replicas),
        "sequences_per_replica": _round(per_replica),
        "batch_cap": curve.batch,
        "kv_capacity_tokens": _round(curve.engine.kv_capacity_tokens),
        "iteration_overhead_ms": _round(curve.engine.fixed_seconds * 1e3),
        "longest_response_tokens": _round(curve.rollout.longest),
        "length_shape": curve.rollout.lengths.shape,
        "seconds_per_run": _round(run),
        "seconds_per_run_if_batch_stayed_full": _round(full),
        "drain_share": _round(max(0.0, 1.0 - full / run)) if run > 0 else 0.0,
    }


def _calibration_report(use: CalibrationUse) -> dict[str, Any]:
    return {"measured_precision": use.precision,
            "measured_tokens_per_second_per_gpu": use.measured,
            "modelled_tokens_per_second_per_gpu": _round(use.modelled),
            "factor": _round(use.factor)}


def _checkpoint(demand: Demand, chosen: list[GPU]) -> dict[str, Any]:
    stall = demand.checkpoint_stall_hours
    hours: dict[str, float | None] = {}
    for g in chosen:
        q = default_precision(g, "update")
        pc = phase_cell(demand, "update", g, q) if q else None
        hours[g.name] = _round(stall * pc.replica_gpus) if pc and pc.fits else None
    return {
        "count": demand.checkpoints,
        "every_steps": demand.spec.checkpoint_every_steps,
        "gb_each": _round(demand.checkpoint_gb),
        "stall_hours": _round(stall),
        "gpu_hours": hours,
        "note": "stall = size / efficiency.checkpoint_write_gb_per_s; GPU-hours on the smallest "
                "update replica",
    }

