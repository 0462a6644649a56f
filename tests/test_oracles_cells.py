"""The demand model's cells (``ptplan.demand.cells``) by hand: precisions per phase, the
training job of an update part, a phase's latency floor, its timing on a pool and the cell of
a phase that does not fit (docs/testing.md, mutation testing of ``cells.py``).

Inputs are the example specs (``examples/``), with the figures cited in each test; each test
builds its own demand (no module-level state: mutmut forks its runs after import).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from conftest import EXAMPLES, example_dict

from ptplan.core.hardware import resolve_gpu
from ptplan.demand.cells import (
    Conditions,
    Timing,
    _part_floor,
    cell,
    default_precision,
    phase_cell,
    precision_options,
    train_job,
)
from ptplan.demand.model import build_demand
from ptplan.spec.project import load_spec, parse_spec


def _demand(name: str, **data: Any) -> Any:
    raw = example_dict(name)
    raw["data"] = {**raw["data"], **data}
    return build_demand(parse_spec(raw, name))


def _part(demand: Any, phase: str, name: str) -> Any:
    return next(p for p in demand.phase_parts(phase) if p.name == name)


def test_precision_options_and_defaults_by_hand() -> None:
    """The update trains in fp32, bf16, fp16 or fp8; generation also runs int8. The default:
    bf16 where the GPU has it (H100), else fp16 (T4), else fp32."""
    assert precision_options("update") == ("fp32", "bf16", "fp16", "fp8")
    assert precision_options("rollout") == ("fp32", "bf16", "fp16", "fp8", "int8")
    assert precision_options("scoring") == precision_options("eval") == \
        precision_options("rollout")
    h100, t4 = resolve_gpu("H100", "gpu"), resolve_gpu("T4", "gpu")
    assert [default_precision(g, p) for g in (h100, t4) for p in ("update", "rollout")] == [
        "bf16", "bf16", "fp16", "fp16"]


def test_train_job_by_hand() -> None:
    """GRPO example (7.6156 B, 300 steps of 256 prompts × 8 samples × (512 + 2,048) tokens =
    1,572,864,000 tokens per epoch) with 2 update epochs of 4 mini-batches: the part trains
    3,145,728,000 tokens, 5,242,880 per step and epoch, 1,310,720 per optimizer step; bf16
    weights + fp32 grads 4 B and Adam 16 − 4 = 12 B per parameter
    (``efficiency.adam_bytes_per_param`` 16); RL MFU 0.22. SFT example: 256 × 2,048 tokens per
    optimizer step, MFU 0.35. LoRA with ``adam_bytes_per_param`` 4: no optimizer
    state."""
    d = _demand("grpo-7b.yaml", update_epochs=2, mini_batches_per_step=4)
    job = train_job(_part(d, "update", "actor"), d.spec)
    assert _part(d, "update", "actor").tokens == 2 * 1_572_864_000
    assert job.tokens_per_optimizer_step == pytest.approx(1_310_720.0, rel=1e-12)
    assert job.state_weights_grads == pytest.approx(7.6156e9 * 4, rel=1e-12)
    assert job.state_optimizer == pytest.approx(7.6156e9 * 12, rel=1e-12)
    assert job.mfu == 0.22 and job.longest == 8704
    sft = build_demand(load_spec(str(EXAMPLES / "sft-8b.yaml")))
    sjob = train_job(_part(sft, "update", "actor"), sft.spec)
    assert sjob.tokens_per_optimizer_step == 256 * 2048 and sjob.mfu == 0.35
    raw = example_dict("grpo-7b.yaml")
    raw["model"] = {**raw["model"], "finetune": "lora", "lora_rank": 16}
    raw["efficiency"] = {"adam_bytes_per_param": 4.0}
    lora = build_demand(parse_spec(raw, "lora"))
    ljob = train_job(_part(lora, "update", "actor"), lora.spec)
    assert ljob.state_optimizer == 0.0
    assert ljob.state_weights_grads > 7.6156e9 * 2  # frozen bf16 weights + the adapter's
    raw = example_dict("grpo-7b.yaml")
    raw["efficiency"] = {"adam_bytes_per_param": 4.0}
    full = build_demand(parse_spec(raw, "no-adam"))
    assert train_job(_part(full, "update", "actor"), full.spec).state_optimizer == 0.0
    # one epoch, no mini-batches given: the whole step is one optimizer step
    plain = build_demand(load_spec(str(EXAMPLES / "grpo-7b.yaml")))
    assert train_job(_part(plain, "update", "actor"), plain.spec).tokens_per_optimizer_step \
        == pytest.approx(1_572_864_000 / 300, rel=1e-12)


def _sequence_parallel(longest: float, query_heads: int, layout_cp: int) -> int:
    """docs/demand-model.md §3.12 (sequence parallel in the update floor): the floor's longest
    sequence is split over sp ranks, the largest power of two ≤ 8 (one node), ≤ longest ÷
    4,096 tokens and dividing the query heads; the layout's own cp already splits it (its
    single-sequence time counts that), so the floor divides by sp ÷ cp, at least 1."""
    sp = max(k for k in (1, 2, 4, 8) if k == 1 or (longest / k >= 4096 and query_heads % k == 0))
    return max(1, sp // layout_cp)


def test_part_floors_by_hand() -> None:
    """A training part's floor is steps × epochs × mini-batches × one longest micro-batch
    (300 × 2 × 4 × its single-sequence seconds), that sequence split over sequence-parallel
    ranks (§3.12: 8,704 tokens ÷ 4,096 ≥ 2 and 28 query heads: sp 2, on a cp 1 layout); SFT
    counts one optimizer step per step (2,048 tokens: sp 1); a prefill part has none; a
    scoring pass is runs × the longest sequence ÷ (tokens/s/GPU × replica GPUs) (OPD's 32.7621 B
    teacher on two H100s: 150 × 17,408 tokens)."""
    h100 = resolve_gpu("H100", "gpu")
    d = _demand("grpo-7b.yaml", update_epochs=2, mini_batches_per_step=4)
    actor = _part(d, "update", "actor")
    c = cell(actor, h100, "bf16", d.spec)
    assert actor.longest == 8704 and actor.model.query_heads == 28 and c.layout.cp == 1
    sp = _sequence_parallel(actor.longest, actor.model.query_heads, c.layout.cp)
    assert sp == 2
    assert _part_floor(d, actor, c) == pytest.approx(300 * 2 * 4 * c.single_seconds / sp,
                                                     rel=1e-12)
    sft = build_demand(load_spec(str(EXAMPLES / "sft-8b.yaml")))
    s_actor = _part(sft, "update", "actor")
    sc = cell(s_actor, h100, "bf16", sft.spec)
    assert _sequence_parallel(s_actor.longest, s_actor.model.query_heads, sc.layout.cp) == 1
    assert _part_floor(sft, s_actor, sc) == pytest.approx(sft.steps * sc.single_seconds,
                                                          rel=1e-12)
    prefill = _part(d, "rollout", "prefill")
    assert _part_floor(d, prefill, cell(prefill, h100, "bf16", d.spec)) == 0.0
    opd = build_demand(load_spec(str(EXAMPLES / "opd-8b-from-32b.yaml")))
    teacher = _part(opd, "scoring", "teacher")
    tc = cell(teacher, h100, "bf16", opd.spec)
    assert tc.replica_gpus == 2
    assert _part_floor(opd, teacher, tc) == pytest.approx(
        150 * 17408 / (tc.tokens_per_second_per_gpu * 2), rel=1e-12)


def test_timing_by_hand() -> None:
    """Linear work of 100 GPU-seconds takes 100 / g s on g GPUs (200 s on half a GPU), never
    under the floor, times the calibration scale; prefill overlaps the decode (the longer
    counts)."""
    t = Timing(100.0, (), 30.0, 1, scale=2.0)
    assert t.busy_seconds(np.array([0.5, 1.0, 2.0, 4.0])).tolist() == [400.0, 200.0, 100.0,
                                                                       60.0]
    p = Timing(0.0, (), 0.0, 1, prefill_gpu_seconds=50.0)
    assert p.busy_seconds(2.0).tolist() == 25.0
    assert t.gpu_hours_at(2.0) == pytest.approx(100.0 * 2 / 3600, rel=1e-12)
    # a decode curve: the reference pool is its full replicas × the replica's GPUs
    gen = build_demand(load_spec(str(EXAMPLES / "generate-32b.yaml")))
    pc = phase_cell(gen, "rollout", resolve_gpu("H100", "gpu"), "bf16")
    (curve,) = pc.timing.curves
    assert curve.engine.gpus == 2
    assert pc.timing.reference_gpus() == math.ceil(curve.sequences / curve.batch) * 2


def test_phase_cells_that_do_not_fit_and_forced_replicas() -> None:
    """fp8 on an A10G (no fp8): the update's first part fails, the cell says which; a forced
    replica size is kept; colocation shrinks the rollout's KV room (the policy's part keeps its
    layout, generation has none)."""
    d = build_demand(load_spec(str(EXAMPLES / "grpo-7b.yaml")))
    a10g, h100 = resolve_gpu("A10G", "gpu"), resolve_gpu("H100", "gpu")
    pc = phase_cell(d, "update", a10g, "fp8")
    assert (pc.phase, pc.gpu, pc.precision, pc.fits, pc.gpu_hours, pc.replica_gpus,
            pc.memory_gb_per_gpu, pc.calibrated) == ("update", "A10G", "fp8", False, math.inf,
                                                     0, 0.0, False)
    assert pc.reason == "update.old_logprob: A10G has no fp8 support"
    assert [name for name, _ in pc.cells] == ["old_logprob"]
    assert pc.timing is None
    rollout = phase_cell(d, "rollout", h100, "bf16")
    assert rollout.layout is None and rollout.layout_multinode is None
    assert rollout.replica_gpus == 1
    forced = phase_cell(d, "rollout", h100, "bf16", replica_gpus=4)
    assert forced.replica_gpus == 4
    colocated = phase_cell(d, "rollout", h100, "bf16", cond=Conditions(8, True))
    assert colocated.timing.curves[0].batch < rollout.timing.curves[0].batch
    update = phase_cell(d, "update", h100, "bf16")
    assert update.layout is not None and update.layout["tp"] >= 1


def test_phase_cell_composed_from_its_parts() -> None:
    """A phase's cell from its parts' cells (``cell``): scoring's linear work = tokens ÷
    tokens/s/GPU; the rollout's prefill overlapped with the decode; the update's replica and
    memory are the largest of its parts', its layouts the actor's (one node and the largest
    multi-node one); the GPU-hours are the timing's at the reference pool."""
    h100 = resolve_gpu("H100", "gpu")
    d = build_demand(load_spec(str(EXAMPLES / "grpo-7b.yaml")))
    scoring = phase_cell(d, "scoring", h100, "bf16")
    ref = _part(d, "scoring", "reference")
    c = cell(ref, h100, "bf16", d.spec)
    assert (scoring.phase, scoring.gpu, scoring.precision, scoring.fits) == (
        "scoring", "H100", "bf16", True)
    assert scoring.timing.linear_gpu_seconds == pytest.approx(
        1_572_864_000 / c.tokens_per_second_per_gpu, rel=1e-12)
    assert scoring.gpu_hours == pytest.approx(
        scoring.timing.gpu_hours_at(scoring.timing.reference_gpus()), rel=1e-12)
    rollout = phase_cell(d, "rollout", h100, "bf16")
    pre = _part(d, "rollout", "prefill")
    assert rollout.timing.prefill_gpu_seconds == pytest.approx(
        pre.tokens / cell(pre, h100, "bf16", d.spec).tokens_per_second_per_gpu, rel=1e-12)
    assert rollout.timing.linear_gpu_seconds == 0.0
    l4 = resolve_gpu("L4", "gpu")
    update = phase_cell(d, "update", l4, "bf16")
    parts = [cell(p, l4, "bf16", d.spec) for p in d.phase_parts("update")]
    assert update.replica_gpus == max(p.replica_gpus for p in parts) == 2
    assert update.memory_gb_per_gpu == max(p.memory_gb_per_gpu for p in parts)
    actor = parts[1]
    assert update.layout == actor.layout.as_dict()
    assert update.layout_multinode == actor.curve.multi_node[-1][1].layout.as_dict()
    assert [name for name, _ in update.cells] == ["old_logprob", "actor"]


def test_high_precision_fallback_share_by_hand() -> None:
    """OPD's teacher scoring at fp8 with 30 % at bf16 or better: linear work = 0.7 × tokens ÷
    fp8 tokens/s/GPU + 0.3 × tokens ÷ the fastest of bf16/fp16/fp32 (786,432,000 teacher
    tokens); at bf16 the share changes nothing. A 600 B teacher fits an L4 replica at fp8
    only: the fallback share cannot run, and the cell says so."""
    h100 = resolve_gpu("H100", "gpu")
    opd = build_demand(load_spec(str(EXAMPLES / "opd-8b-from-32b.yaml")))
    teacher = _part(opd, "scoring", "teacher")
    fp8 = cell(teacher, h100, "fp8", opd.spec).tokens_per_second_per_gpu
    hp = max(cell(teacher, h100, q, opd.spec).tokens_per_second_per_gpu
             for q in ("bf16", "fp16", "fp32") if cell(teacher, h100, q, opd.spec).fits)
    pc = phase_cell(opd, "scoring", h100, "fp8", fallback={"teacher": 0.3})
    assert pc.timing.linear_gpu_seconds == pytest.approx(
        0.7 * 786_432_000 / fp8 + 0.3 * 786_432_000 / hp, rel=1e-12)
    assert [name for name, _ in pc.cells] == ["teacher", "teacher@fallback"]
    plain = phase_cell(opd, "scoring", h100, "fp8")
    assert plain.timing.linear_gpu_seconds == pytest.approx(786_432_000 / fp8, rel=1e-12)
    assert phase_cell(opd, "scoring", h100, "fp8", fallback={"reward": 0.3}) == plain
    bf16 = phase_cell(opd, "scoring", h100, "bf16")
    assert phase_cell(opd, "scoring", h100, "bf16", fallback={"teacher": 0.3}) == bf16
    raw = example_dict("opd-8b-from-32b.yaml")
    raw["teacher"] = {"params_b": 600, "layers": 126, "hidden_size": 16384, "heads": 128,
                      "kv_heads": 8, "head_dim": 128}
    big = build_demand(parse_spec(raw, "big-teacher"))
    l4 = resolve_gpu("L4", "gpu")
    assert phase_cell(big, "scoring", l4, "fp8").fits
    none = phase_cell(big, "scoring", l4, "fp8", fallback={"teacher": 0.1})
    assert (none.phase, none.gpu, none.precision, none.fits, none.gpu_hours, none.replica_gpus,
            none.memory_gb_per_gpu, none.calibrated) == ("scoring", "L4", "fp8", False,
                                                         math.inf, 0, 0.0, False)
    assert none.reason == ("scoring.teacher: its high-precision fallback share needs bf16 or "
                           "better, which does not fit L4")
    assert [name for name, _ in none.cells] == ["teacher"]


def test_part_cells_by_hand() -> None:
    """One part's cell: refusals (no fp8 on an A10G; int8 is no training format; a forced
    replica too small for the weights; weights over 64 GPUs), a training cell (micro-batch,
    compute-bound, its single-sequence time), a forward cell (weights ÷ replica GPUs), a decode
    cell (batch ÷ iteration seconds ÷ replica GPUs; weights + the batch's KV per GPU)."""
    h100, a10g, l4 = (resolve_gpu(n, "gpu") for n in ("H100", "A10G", "L4"))
    d = build_demand(load_spec(str(EXAMPLES / "grpo-7b.yaml")))
    actor, ref = _part(d, "update", "actor"), _part(d, "scoring", "reference")
    no = cell(actor, a10g, "fp8", d.spec)
    assert no.fits is False and no.reason == "A10G has no fp8 support"
    inf8 = cell(actor, h100, "int8", d.spec)
    assert inf8.fits is False and inf8.reason == ("int8 is an inference format; train in "
                                                  "fp32, bf16, fp16, fp8")
    t = cell(actor, h100, "bf16", d.spec)
    assert (t.fits, t.batch, t.bound) == (True, d.spec.efficiency.micro_batch_size, "compute")
    assert t.single_seconds > 0 and t.layout is not None
    f = cell(ref, h100, "bf16", d.spec)
    assert (f.fits, f.replica_gpus, f.batch, f.bound) == (True, 1, 0, "compute")
    assert f.memory_gb_per_gpu == pytest.approx(7.6156e9 * 2 / 1e9, rel=1e-12)  # 15.2 GB
    opd = build_demand(load_spec(str(EXAMPLES / "opd-8b-from-32b.yaml")))
    teacher = _part(opd, "scoring", "teacher")
    small = cell(teacher, h100, "bf16", opd.spec, replica_gpus=1)
    assert small.fits is False
    assert small.reason == "weights need 2 GPUs per replica; 1 given"
    assert cell(teacher, h100, "bf16", opd.spec, replica_gpus=2).fits
    raw = example_dict("opd-8b-from-32b.yaml")
    raw["teacher"] = {"params_b": 2000, "layers": 126, "hidden_size": 16384, "heads": 128,
                      "kv_heads": 8, "head_dim": 128}
    huge = build_demand(parse_spec(raw, "huge"))
    over = cell(_part(huge, "scoring", "teacher"), l4, "bf16", huge.spec)
    assert over.fits is False
    assert over.reason == "weights (4000 GB) need more than 64 GPUs per inference replica"
    forced = cell(_part(huge, "scoring", "teacher"), l4, "bf16", huge.spec, replica_gpus=8)
    assert forced.reason == "weights need more than 64 GPUs per replica; 8 given"
    raw = example_dict("opd-8b-from-32b.yaml")
    raw["model"] = {**raw["teacher"], "params_b": 2000}
    giant = build_demand(parse_spec(raw, "giant"))
    nodec = cell(_part(giant, "rollout", "decode"), l4, "bf16", giant.spec)
    assert nodec.fits is False and nodec.reason
    gen = build_demand(load_spec(str(EXAMPLES / "generate-32b.yaml")))
    dec = _part(gen, "rollout", "decode")
    c = cell(dec, h100, "bf16", gen.spec)
    e, ro = c.engine, dec
    assert c.replica_gpus == e.gpus == 2
    ctx = 512 + ro.lengths.mean_age
    step = float(e.iteration_seconds(c.batch, ctx))
    assert c.tokens_per_second_per_gpu == pytest.approx(c.batch / step / 2, rel=1e-12)
    assert c.memory_gb_per_gpu == pytest.approx(
        (32.7621e9 * 2 + c.batch * ctx * e.kv_bytes_per_token) / 2 / 1e9, rel=1e-12)


def test_calibration_by_hand() -> None:
    """A measured rollout throughput on H100 at bf16 (900 tokens/s/GPU) rescales the modelled
    time by modelled ÷ measured, at bf16 and at fp8 alike (the bf16 factor binds fp8 too);
    phase cells are synchronous unless asked."""
    h100 = resolve_gpu("H100", "gpu")
    plain = build_demand(load_spec(str(EXAMPLES / "grpo-7b.yaml")))
    sync = phase_cell(plain, "rollout", h100, "bf16")
    assert sync == phase_cell(plain, "rollout", h100, "bf16", synchronous=True)
    assert sync.gpu_hours != phase_cell(plain, "rollout", h100, "bf16",
                                        synchronous=False).gpu_hours
    modelled = 1_258_291_200 / (sync.gpu_hours * 3600.0)  # decode tokens ÷ GPU-seconds
    raw = example_dict("grpo-7b.yaml")
    raw["calibration"] = [{"phase": "rollout", "gpu": "H100", "precision": "bf16",
                           "tokens_per_second_per_gpu": 900.0}]
    cal = build_demand(parse_spec(raw, "cal"))
    for q in ("bf16", "fp8"):
        pc = phase_cell(cal, "rollout", h100, q)
        assert pc.calibrated is True and pc.calibration.precision == "bf16"
        assert pc.calibration.modelled == pytest.approx(modelled, rel=1e-12)
        assert pc.timing.scale == pytest.approx(modelled / 900.0, rel=1e-12)
    assert phase_cell(cal, "rollout", h100, "bf16").gpu_hours == pytest.approx(
        1_258_291_200 / 900.0 / 3600.0, rel=1e-9)


def test_calibration_picks_the_exact_precision_else_the_binding_factor() -> None:
    """Rollout measured on H100 at bf16 (900) and at fp8 (1,000 tokens/s/GPU): each of those
    precisions uses its own measurement; fp16, unmeasured, takes the smaller factor
    (measured ÷ modelled), the one that binds. The calibrated cell keeps the uncalibrated
    one's parts, replica, memory and layouts; a forced replica size is modelled at that size
    for the factor too."""
    h100 = resolve_gpu("H100", "gpu")
    plain = build_demand(load_spec(str(EXAMPLES / "grpo-7b.yaml")))
    raw = example_dict("grpo-7b.yaml")
    raw["precisions"] = {**raw["precisions"], "rollout": ["bf16", "fp16", "fp8"]}
    raw["calibration"] = [
        {"phase": "rollout", "gpu": "H100", "precision": "bf16",
         "tokens_per_second_per_gpu": 900.0, "runs": ["run-a"]},
        {"phase": "rollout", "gpu": "H100", "precision": "fp8",
         "tokens_per_second_per_gpu": 1000.0},
        {"phase": "update", "gpu": "H100", "precision": "bf16",
         "tokens_per_second_per_gpu": 2000.0}]
    cal = build_demand(parse_spec(raw, "cal2"))

    def modelled(q: str, **kw: Any) -> float:
        return 1_258_291_200 / (phase_cell(plain, "rollout", h100, q, **kw).gpu_hours * 3600)

    factors = {"bf16": 900.0 / modelled("bf16"), "fp8": 1000.0 / modelled("fp8")}
    for q, expected in (("bf16", "bf16"), ("fp8", "fp8"),
                        ("fp16", min(factors, key=lambda k: factors[k]))):
        pc = phase_cell(cal, "rollout", h100, q)
        use = pc.calibration
        assert (use.phase, use.gpu, use.precision) == ("rollout", "H100", expected)
        assert pc.timing.scale == pytest.approx(1 / factors[expected], rel=1e-12)
        base = phase_cell(plain, "rollout", h100, q)
        assert (pc.phase, pc.gpu, pc.precision, pc.replica_gpus, pc.memory_gb_per_gpu,
                pc.cells, pc.layout, pc.layout_multinode) == (
            base.phase, base.gpu, base.precision, base.replica_gpus, base.memory_gb_per_gpu,
            base.cells, base.layout, base.layout_multinode)
    assert phase_cell(cal, "rollout", h100, "bf16").calibration.runs == ("run-a",)
    assert phase_cell(cal, "rollout", h100, "fp8").calibration.runs == ()
    upd, base = phase_cell(cal, "update", h100, "bf16"), phase_cell(plain, "update", h100, "bf16")
    assert (upd.calibrated, upd.layout, upd.layout_multinode, upd.cells) == (
        True, base.layout, base.layout_multinode, base.cells)
    forced = phase_cell(cal, "rollout", h100, "fp16", replica_gpus=2)
    f2 = {q: m / modelled(q, replica_gpus=2) for q, m in (("bf16", 900.0), ("fp8", 1000.0))}
    assert forced.timing.scale == pytest.approx(1 / min(f2.values()), rel=1e-12)
