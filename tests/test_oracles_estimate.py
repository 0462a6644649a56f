"""``ptplan estimate``'s report against a reference restated here (docs/testing.md, mutation
testing of ``optimizer/demand/estimate.py``).

The reference composes the report from the demand layer's inputs (``build_demand`` and the
per-phase cells of ``ptplan.demand.cells.phase_cell``), restating what ``estimate`` derives
from them: the default precision per GPU (bf16, else fp16, else fp32), which precisions a phase
takes, the reference pool's figures (tokens per second = tokens ÷ (GPU-hours × 3600), busy hours
= GPU-hours ÷ reference GPUs, the latency floor), the decode report of a generation run (replicas
= reference GPUs ÷ replica GPUs, the run at a full batch = sequences per replica × mean length ÷
batch × one iteration's seconds), the checkpoint stall's GPU-hours on the smallest update replica
and the totals, each figure rounded to 4 significant digits (tokens to 6). The whole report is
compared exactly, key for key, on the examples and on the hard cases: a GPU without bf16, a
precision a phase does not take, a model that does not fit, an async pipeline, calibration.
A few figures are also worked out by hand from the example specs.
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import EXAMPLES, example_dict

from ptplan.core.errors import InputError
from ptplan.core.hardware import resolve_gpu
from ptplan.demand.cells import phase_cell
from ptplan.demand.estimate import _round, estimate
from ptplan.demand.model import build_demand
from ptplan.spec.defaults import applied_defaults
from ptplan.spec.project import ProjectSpec, load_spec, parse_spec

ALL = ("fp32", "bf16", "fp16", "fp8", "int8")
TRAIN = ("fp32", "bf16", "fp16", "fp8")


def r4(x: float, digits: int = 4) -> float:
    """Significant digits as the report shows them (0 stays 0)."""
    return float(f"{x:.{digits}g}") if x else 0.0


def default_q(gpu: Any, phase: str) -> str | None:
    for q in ("bf16", "fp16", "fp32"):
        if gpu.supports(q) and q in (TRAIN if phase == "update" else ALL):
            return q
    return None


def ref_decode(curve: Any, ref: float) -> dict[str, Any]:
    replicas = ref / curve.engine.gpus
    per_replica = curve.sequences / replicas
    run = float(curve.seconds(ref)) / max(curve.runs, 1)
    lengths = curve.rollout.lengths
    iteration = float(curve.engine.iteration_seconds(
        curve.batch, curve.rollout.prompt_tokens + lengths.mean_age))
    full = per_replica * lengths.mean / curve.batch * iteration
    return {"replica_gpus": curve.engine.gpus, "replicas": r4(replicas),
            "sequences_per_replica": r4(per_replica), "batch_cap": curve.batch,
            "kv_capacity_tokens": r4(curve.engine.kv_capacity_tokens),
            "iteration_overhead_ms": r4(curve.engine.fixed_seconds * 1000.0),
            "longest_response_tokens": r4(curve.rollout.longest),
            "length_shape": lengths.shape, "seconds_per_run": r4(run),
            "seconds_per_run_if_batch_stayed_full": r4(full),
            "drain_share": r4(max(0.0, 1.0 - full / run))}


STEP_UNIT = {"sft": "optimizer step",
             "generate": "one offline generation batch (every prompt at once)",
             "rl": "rollout→update step (optimizer mini-batches inside are counted separately)",
             "opd": "rollout→update step (optimizer mini-batches inside are counted separately)"}


def ref_estimate(spec: ProjectSpec, names: list[str], precision: str | None = None
                 ) -> dict[str, Any]:
    d = build_demand(spec)
    gpus = [resolve_gpu(n, "--gpu") for n in names]
    sync = spec.pipeline != "async"
    totals: dict[str, float | None] = {g.name: 0.0 for g in gpus}
    phases, flops_total = [], 0.0
    for phase in d.phases:
        parts = d.phase_parts(phase)
        flops = sum(p.flops for p in parts)
        flops_total += flops
        by_gpu: dict[str, Any] = {}
        hours_by: dict[str, float | None] = {}
        for g in gpus:
            q = precision or default_q(g, phase)
            options = TRAIN if phase == "update" else ALL
            pc = phase_cell(d, phase, g, q, synchronous=sync) if q in options else None
            if pc is None or not pc.fits:
                reason = (pc.reason if pc is not None else f"{q} is not a {phase} precision")
                by_gpu[g.name] = {"precision": q, "fits": False, "reason": reason}
                hours_by[g.name] = totals[g.name] = None
                continue
            assert pc.timing is not None
            h, ref = pc.gpu_hours, pc.timing.reference_gpus()
            cell = {"precision": q, "fits": True, "gpu_hours": r4(h),
                    "tokens_per_second_per_gpu": r4(d.primary_tokens(phase) / h / 3600.0),
                    "reference_gpus": r4(ref), "busy_hours_at_reference": r4(h / ref),
                    "latency_floor_hours": r4(pc.timing.floor_seconds * pc.timing.scale / 3600),
                    "replica_gpus": pc.replica_gpus, "memory_gb_per_gpu": r4(pc.memory_gb_per_gpu),
                    "calibrated": pc.calibrated,
                    "parts": {n: {"tokens_per_second_per_gpu": r4(c.tokens_per_second_per_gpu),
                                  "replica_gpus": c.replica_gpus, "batch": c.batch,
                                  "bound": c.bound} for n, c in pc.cells}}
            if pc.timing.train:
                at = pc.timing.train[0][1].at(ref)
                if at.layout is not None:
                    cell["layout"] = at.layout.as_dict()
                    cell["memory_gb_per_gpu"] = r4(at.memory_gb_per_gpu)
            for curve in pc.timing.curves:
                cell["decode"] = ref_decode(curve, ref)
            if pc.calibration is not None:
                use = pc.calibration
                cell["calibration"] = {
                    "measured_precision": use.precision,
                    "measured_tokens_per_second_per_gpu": use.measured,
                    "modelled_tokens_per_second_per_gpu": r4(use.modelled),
                    "factor": r4(use.factor)}
            by_gpu[g.name] = cell
            hours_by[g.name] = r4(h)
            if totals[g.name] is not None:
                totals[g.name] = (totals[g.name] or 0.0) + h
        phases.append({"name": phase, "tokens": r4(d.primary_tokens(phase), 6),
                       "flops": r4(flops),
                       "parts": [{"name": p.name, "model": p.role, "kind": p.kind,
                                  "tokens": r4(p.tokens, 6), "flops": r4(p.flops)}
                                 for p in parts],
                       "gpu_hours": hours_by,
                       "synchronous_drain": sync if phase in ("rollout", "eval") else None,
                       "by_gpu": by_gpu})
    stall = d.checkpoint_stall_hours
    ck_hours: dict[str, float | None] = {}
    for g in gpus:
        q = default_q(g, "update")
        pc = phase_cell(d, "update", g, q) if q else None
        ck_hours[g.name] = r4(stall * pc.replica_gpus) if pc is not None and pc.fits else None
        if totals[g.name] is not None and ck_hours[g.name] is not None:
            totals[g.name] = (totals[g.name] or 0.0) + ck_hours[g.name]  # type: ignore[operator]
    return {
        "schema_version": 2, "spec_name": spec.name, "method": spec.method,
        "algorithm": spec.algorithm, "steps": d.steps, "step_unit": STEP_UNIT[spec.method],
        "pipeline_assumed": spec.pipeline,
        "precision": precision or "default (bf16; fp16/fp32 where the GPU lacks bf16)",
        "phases": phases,
        "checkpoint": {
            "count": d.checkpoints, "every_steps": spec.checkpoint_every_steps,
            "gb_each": r4(d.checkpoint_gb), "stall_hours": r4(stall), "gpu_hours": ck_hours,
            "note": "stall = size / efficiency.checkpoint_write_gb_per_s; GPU-hours on the "
                    "smallest update replica"},
        "totals": {"flops": r4(flops_total),
                   "gpu_hours": {k: (r4(v) if v is not None else None)
                                 for k, v in totals.items()}},
        "defaults_applied": applied_defaults(spec), "notes": list(d.notes)}


def _example(name: str) -> ProjectSpec:
    return load_spec(str(EXAMPLES / name))


def _big_model_spec() -> ProjectSpec:
    """The generate example with a 300 B model: at fp32 no replica of at most 64 L4 GPUs holds
    it (bf16 does), and the update of nothing is run (method generate)."""
    raw = yaml_example("generate-32b.yaml")
    raw["model"] = {"params_b": 300, "layers": 126, "hidden_size": 16384, "heads": 128,
                    "kv_heads": 8, "head_dim": 128}
    return parse_spec(raw, "big")


def yaml_example(name: str) -> dict[str, Any]:
    import yaml

    return yaml.safe_load((EXAMPLES / name).read_text(encoding="utf-8"))


CASES = [
    ("grpo-7b.yaml", ["H100", "L4"], None),
    ("grpo-7b.yaml", ["T4", "H100"], None),          # T4: no bf16, fp16 is the default
    ("sft-8b.yaml", ["H100", "A10G"], "fp8"),        # A10G has no fp8: not fitting first
    ("sft-8b.yaml", ["H100", "L4"], "int8"),         # int8 is not an update precision
    ("opd-8b-from-32b.yaml", ["H100"], None),
    ("generate-32b.yaml", ["L4", "H100"], None),
]


@pytest.mark.parametrize(("example", "gpus", "precision"), CASES)
def test_estimate_equals_the_reference(example: str, gpus: list[str], precision: str | None
                                       ) -> None:
    spec = _example(example)
    assert estimate(spec, gpus, precision) == ref_estimate(spec, gpus, precision)


def test_async_calibrated_and_unfit_cases_equal_the_reference() -> None:
    d = example_dict("grpo-7b.yaml")
    d["pipeline"] = "async"
    d["calibration"] = [{"phase": "rollout", "gpu": "H100", "precision": "bf16",
                         "tokens_per_second_per_gpu": 1500.0}]
    spec = parse_spec(d, "async")
    report = estimate(spec, ["H100", "L4"])
    assert report == ref_estimate(spec, ["H100", "L4"])
    cell = report["phases"][0]["by_gpu"]["H100"]
    assert cell["calibrated"] is True
    assert cell["calibration"]["measured_tokens_per_second_per_gpu"] == 1500.0
    assert report["phases"][0]["synchronous_drain"] is False
    # an eval of one 8-token response: a decode run shorter than a second
    d = example_dict("grpo-7b.yaml")
    d["eval"] = {"every_steps": 100, "prompts": 1, "samples_per_prompt": 1, "response_tokens": 8}
    tiny = parse_spec(d, "tiny-eval")
    report = estimate(tiny, ["H100"])
    assert report == ref_estimate(tiny, ["H100"])
    decode = report["phases"][-1]["by_gpu"]["H100"]["decode"]
    assert 0 < decode["seconds_per_run"] < 1 and decode["drain_share"] > 0.9
    big = _big_model_spec()
    for precision in ("fp32", None):
        report = estimate(big, ["L4", "H100"], precision)
        assert report == ref_estimate(big, ["L4", "H100"], precision)
    fp32 = estimate(big, ["L4", "H100"], "fp32")["phases"][0]["by_gpu"]
    assert fp32["L4"]["fits"] is False and fp32["H100"]["fits"] is True


def test_unfit_cells_and_totals_by_hand() -> None:
    """int8 is not an update precision: the SFT update is reported as not fitting, with that
    reason, and the GPU's total is unknown; fp8 on an A10G (no fp8) does not fit either,
    and the H100 after it is still estimated."""
    report = estimate(_example("sft-8b.yaml"), ["H100"], "int8")
    update = next(p for p in report["phases"] if p["name"] == "update")
    assert update["by_gpu"]["H100"] == {"precision": "int8", "fits": False,
                                        "reason": "int8 is not a update precision"}
    assert update["gpu_hours"] == {"H100": None}
    assert report["totals"]["gpu_hours"] == {"H100": None}
    report = estimate(_example("sft-8b.yaml"), ["A10G", "H100"], "fp8")
    for phase in report["phases"]:
        assert phase["by_gpu"]["A10G"]["fits"] is False
        assert phase["by_gpu"]["A10G"]["precision"] == "fp8"
        assert phase["gpu_hours"]["A10G"] is None
        assert phase["by_gpu"]["H100"]["fits"] is True
    assert report["totals"]["gpu_hours"]["A10G"] is None
    assert report["totals"]["gpu_hours"]["H100"] > 0


def test_step_units_and_precision_line_by_hand() -> None:
    units = {name: estimate(_example(name), ["H100"])["step_unit"]
             for name in ("sft-8b.yaml", "generate-32b.yaml", "grpo-7b.yaml")}
    assert units == {"sft-8b.yaml": "optimizer step",
                     "generate-32b.yaml": "one offline generation batch (every prompt at once)",
                     "grpo-7b.yaml": "rollout→update step (optimizer mini-batches inside are "
                                     "counted separately)"}
    grpo = _example("grpo-7b.yaml")
    assert estimate(grpo, ["H100"])["precision"] == ("default (bf16; fp16/fp32 where the GPU "
                                                     "lacks bf16)")
    assert estimate(grpo, ["H100"], "fp8")["precision"] == "fp8"


def test_checkpoint_and_totals_by_hand() -> None:
    """GRPO example: 7.6156 B parameters × 14 B (bf16 weights 2 + Adam state 12, the default
    ``adam_bytes_per_param``) = 106.6184 GB per checkpoint, 300 / 25 = 12 checkpoints, written at
    2 GB/s (``efficiency.checkpoint_write_gb_per_s``): 12 × 53.3092 s = 0.17770 h of stall, on
    the update replica's 1 H100 or 2 L4 GPUs (test_estimate_json); each GPU's total is its
    phases' GPU-hours plus that."""
    report = estimate(_example("grpo-7b.yaml"), ["H100", "L4"])
    ck = report["checkpoint"]
    assert (ck["count"], ck["every_steps"], ck["gb_each"]) == (12, 25, 106.6)  # 1 decimal
    assert ck["stall_hours"] == 0.1777
    assert ck["gpu_hours"] == {"H100": 0.1777, "L4": 0.3554}
    for gpu in ("H100", "L4"):
        phases = sum(p["gpu_hours"][gpu] for p in report["phases"])
        assert report["totals"]["gpu_hours"][gpu] == pytest.approx(
            phases + ck["gpu_hours"][gpu], rel=5e-4)


def test_round_and_the_precision_error() -> None:
    assert _round(0.0) == 0.0 and _round(0.0, 6) == 0.0
    assert _round(123456.0) == 123500.0 and _round(123456.0, 6) == 123456.0
    assert _round(0.000123456) == 0.0001235
    with pytest.raises(InputError) as exc:
        estimate(_example("grpo-7b.yaml"), ["H100"], "bf61")
    assert str(exc.value) == ("--precision: unknown precision 'bf61' (did you mean: bf16?); "
                              "use one of fp32, bf16, fp16, fp8, int8")
    with pytest.raises(InputError) as exc:
        estimate(_example("grpo-7b.yaml"), ["H1000"])
    assert str(exc.value).startswith("--gpu")
