"""Training time per token, the layout curve and its running minimum, worked by hand from the
formulas of ``optimizer/demand/training.py``'s docstring (docs/demand-model.md §5); this file
imports only data types and the functions under test, never a second package function to
compute an expected value.

The GPU is made up so the arithmetic is short: 1,000 dense bf16 TFLOPs (500 at fp32), 3 TB/s
of HBM, a 100 GB/s scale-up link, Hopper (so 50 GB/s per GPU across nodes). The model has
N = 1e9 parameters, 4 layers of hidden size 1,024; a job trains at 6·N FLOPs per token and MFU
0.5, so one token costs 6e9 / (1e15 × 0.5) = 1.2e-5 GPU-seconds at bf16 times the roofline
factor s + (1 − s)·R of compute-bound work (docs/demand-model.md §3.12: the non-GEMM share
1 − s = 0.45 scales with the GPU's ops:byte ratio against H100's, R = (1,000 / 3) ÷ (989.4 /
3.35) ≈ 1.1286), ≈ 1.2695e-5.

Per token (GPU-seconds): compute × (1 + (pp − 1)/m) + TP traffic, m = max(1, tokens per step
/ (dp × micro-batch tokens)); TP traffic tp·16·h·(tp − 1)/tp·L / link; ZeRO-3 gathers
3·(N/(tp·pp))·2 B·share / link × tp·cp·pp / micro-batch tokens, share (dp − 1)/dp within a
node, 1 across nodes, overlapped (max); optimizer offload adds (shard·4 B / PCIe + shard / CPU
Adam) × GPUs / tokens per step with shard N/(tp·pp·dp); parameter offload adds
3·(2N/GPUs)/PCIe × tp·cp·pp / micro-batch tokens. One micro-batch's wall time is its tokens ×
(compute + TP traffic) / (tp·cp).
"""

from __future__ import annotations

import numpy as np
import pytest

from ptplan.core.hardware import GPU
from ptplan.demand.training import (
    Layout,
    LayoutCurve,
    TrainCell,
    TrainJob,
    _fit,
    _running_min,
    _time_per_token,
    _undominated,
)
from ptplan.spec.project import Efficiency, ModelBlock

GIB = 2.0 ** 30
EXACT = 1e-12
"""Relative tolerance, with abs=0: pytest's default absolute 1e-12 would swamp seconds of 1e-5."""
# docs/demand-model.md §3.12 (roofline of each GPU): compute-bound time × [s·peak_ref/peak_q +
# (1 − s)·R], R = (peak ÷ HBM bandwidth) ÷ H100's (989.4 TFLOPS ÷ 3.35 TB/s), s =
# gemm_time_share (default 0.55); at bf16 peak_ref/peak_q = 1
ROOFLINE = (1000e12 / 3e12) / (989.4e12 / 3.35e12)
BF16_FACTOR = 0.55 + (1 - 0.55) * ROOFLINE
COMPUTE = 6e9 * BF16_FACTOR / (1e15 * 0.5)
"""GPU-seconds per token at bf16 on the made-up GPU (§5.3 compute with f_q of §3.12)."""


def _gpu() -> GPU:
    return GPU(name="X1", row_name="X1", architecture="Hopper",
               peak_tflops={"bf16": 1000.0, "fp32": 500.0, "fp8": 2000.0}, memory_gb=80.0,
               mem_bw_tbps=3.0, interconnect="NVLink", confidence="test", source="test",
               scaleup_gb_per_s=100.0)


def _job(longest: int, tokens_per_step: float) -> TrainJob:
    model = ModelBlock(params_b=1.0, layers=4, hidden_size=1024, heads=8, kv_heads=8,
                       head_dim=128)
    return TrainJob(model, 6e9, 4e9, 12e9, longest, tokens_per_step, 0.5)


def test_layout_as_dict_and_label() -> None:
    lay = Layout(tp=2, cp=4, pp=3, dp=5, zero=3, offload=True)
    assert lay.gpus == 120
    assert lay.as_dict() == {"tp": 2, "cp": 4, "pp": 3, "dp": 5, "zero_stage": 3,
                             "optimizer_offload": True}
    assert lay.label() == "tp2 cp4 pp3 dp5 zero3 +offload"
    assert Layout(1, 1, 1, 8, 1, False).label() == "tp1 cp1 pp1 dp8 zero1"


def test_zero3_gathers_bind_with_both_offloads_on_a_2x2x2x2_layout() -> None:
    """tp = cp = pp = dp = 2 (16 GPUs) on nodes of 16: the gathers stay inside the node.

    1,024-token micro-batches, 2,048 tokens per step: m = 2,048 / (2 × 1,024) = 1, bubble
    (2 − 1)/1 = 1, so compute 2 × COMPUTE; TP 2·16·1,024·(1/2)·4 / 1e11 = 6.5536e-7 s.
    Gathers: shard 1e9 / 4 = 2.5e8, 3 × 2.5e8 × 2 B × 1/2 / 1e11 = 7.5e-3 s per micro-batch
    per GPU, × 8 / 1,024 tokens = 5.859375e-5 s per token: more than the ≈2.6e-5 of compute
    and TP, so it binds. Optimizer offload: shard 1e9 / 8 = 1.25e8, 1.25e8 × 4 / 32e9 +
    1.25e8 / 0.4e9 = 0.328125 s per step, × 16 GPUs / 2,048 tokens. Parameter offload:
    3 × (2e9 / 16) / 32e9 × 8 / 1,024."""
    job, gpu = _job(1024, 2048), _gpu()
    lay = Layout(2, 2, 2, 2, 3, True)
    eff = Efficiency(param_offload=True)
    tp_comm = 2 * 16 * 1024 * 0.5 * 4 / 1e11
    assert tp_comm == pytest.approx(6.5536e-7, rel=EXACT, abs=0)
    gather = 3 * 2.5e8 * 2 * 0.5 / 1e11 * 8 / 1024
    assert gather == pytest.approx(5.859375e-5, rel=EXACT, abs=0)
    assert gather > 2 * COMPUTE + tp_comm
    optimizer = (1.25e8 * 4 / 32e9 + 1.25e8 / 0.4e9) * 16 / 2048
    params = 3 * (2e9 / 16) / 32e9 * 8 / 1024
    per_token, single = _time_per_token(job, gpu, "bf16", eff, lay, 16)  # spans: default no
    assert per_token == pytest.approx(gather + optimizer + params, rel=EXACT, abs=0)
    assert single == pytest.approx(1024 * (COMPUTE + tp_comm) / 4, rel=EXACT, abs=0)
    # each part alone
    plain, _ = _time_per_token(job, gpu, "bf16", Efficiency(), Layout(2, 2, 2, 2, 3, False), 16)
    assert plain == pytest.approx(gather, rel=EXACT, abs=0)
    off, _ = _time_per_token(job, gpu, "bf16", Efficiency(), lay, 16, False)
    assert off == pytest.approx(gather + optimizer, rel=EXACT, abs=0)
    # 16 GPUs on nodes of 8: the gathers cross the 50 GB/s network, still at (dp − 1)/dp
    cross, _ = _time_per_token(job, gpu, "bf16", Efficiency(), Layout(2, 2, 2, 2, 3, False), 8)
    assert cross == pytest.approx(3 * 2.5e8 * 2 * 0.5 / 50e9 * 8 / 1024, rel=EXACT, abs=0)
    # a pool spanning nodes: all of the traffic (share 1) over the network
    spans, _ = _time_per_token(job, gpu, "bf16", Efficiency(), Layout(2, 2, 2, 2, 3, False),
                               16, True)
    assert spans == pytest.approx(3 * 2.5e8 * 2 / 50e9 * 8 / 1024, rel=EXACT, abs=0)
    # ZeRO-1 gathers nothing and parameter offload needs ZeRO-3
    z1, _ = _time_per_token(job, gpu, "bf16", eff, Layout(2, 2, 2, 2, 1, False), 16)
    assert z1 == pytest.approx(2 * COMPUTE + tp_comm, rel=EXACT, abs=0)


def test_a_step_of_one_micro_batch_pays_the_whole_bubble() -> None:
    """One micro-batch per step (or less: m is at least 1): bubble pp − 1 = 1, so twice the
    compute, plus TP traffic at tp = 2 (the smallest tp that communicates)."""
    tp_comm = 2 * 16 * 1024 * 0.5 * 4 / 1e11
    lay = Layout(2, 1, 2, 1, 1, False)
    for tokens in (1024, 512):
        per_token, single = _time_per_token(_job(1024, tokens), _gpu(), "bf16", Efficiency(),
                                            lay, 8)
        assert per_token == pytest.approx(2 * COMPUTE + tp_comm, rel=EXACT, abs=0)
        assert single == pytest.approx(1024 * (COMPUTE + tp_comm) / 2, rel=EXACT, abs=0)
    # three micro-batches: bubble 1/3
    per_token, _ = _time_per_token(_job(1024, 3072), _gpu(), "bf16", Efficiency(), lay, 8)
    assert per_token == pytest.approx(COMPUTE * (1 + 1 / 3) + tp_comm, rel=EXACT, abs=0)


def test_offload_of_a_one_token_step_is_paid_by_that_token() -> None:
    """One GPU, 1 token per optimizer step: the step, 1e9 × 4 / 32e9 + 1e9 / 0.4e9 = 2.625 s,
    falls on that token (tokens per step floor at 1, not more)."""
    lay = Layout(1, 1, 1, 1, 1, True)
    per_token, _ = _time_per_token(_job(1024, 1.0), _gpu(), "bf16", Efficiency(), lay, 8)
    assert per_token == pytest.approx(COMPUTE + 2.625, rel=EXACT, abs=0)
    half, _ = _time_per_token(_job(1024, 0.5), _gpu(), "bf16", Efficiency(), lay, 8)
    assert half == pytest.approx(COMPUTE + 2.625, rel=EXACT, abs=0)


# ---- the layout curve ----------------------------------------------------------------------

A = TrainCell(True, Layout(1, 1, 1, 1, 3, False), 5.0)
B = TrainCell(True, Layout(2, 2, 2, 1, 1, False), 4.0)
C = TrainCell(True, Layout(1, 1, 1, 1, 1, True), 6.0)
D = TrainCell(True, Layout(2, 2, 2, 2, 1, False), 5.5)


def _curve(in_node: bool = True, timed: bool = True
           ) -> tuple[LayoutCurve, list[tuple[Layout, object]]]:
    """Nodes of 8: within a node A from 1 GPU, B (8 GPUs) from 8; across nodes C from 1, D
    (16 GPUs) from 16. ``time_of`` records its calls and marks its cells."""
    calls: list[tuple[Layout, object]] = []

    def time_of(lay: Layout, spans: bool) -> TrainCell:
        calls.append((lay, spans))
        return TrainCell(True, lay, 100.0 + lay.dp, reason=f"timed {spans}")

    curve = LayoutCurve(8, ((1, A), (8, B)) if in_node else (), ((1, C), (16, D)),
                        time_of if timed else None)  # type: ignore[arg-type]
    return curve, calls


def test_the_curve_grows_data_parallelism_to_fill_the_pool() -> None:
    curve, calls = _curve()
    assert curve.fits and curve.smallest is A
    assert curve.at(1) is A and calls == []
    # 4 GPUs: A (1 GPU) with dp 4, timed within the node
    four = curve.at(4.0)
    assert calls == [(Layout(1, 1, 1, 4, 3, False), False)]
    assert four.seconds_per_token_per_gpu == 104.0 and four.reason == "timed False"
    # 8 GPUs: B, whose tp·cp·pp = 8 already fills the pool
    assert curve.at(8) is B and len(calls) == 1
    # the same pool again: the memo, no second timing
    assert curve.at(4) is four and curve.at(4.5) is four and len(calls) == 1
    # 9 GPUs span nodes: C with dp 9, timed across nodes
    spans = curve.at(9)
    assert calls[-1] == (Layout(1, 1, 1, 9, 1, True), True) and calls[-1][1] is True
    assert spans.seconds_per_token_per_gpu == 109.0
    # 16 GPUs: D as it is; 20 GPUs: D still (20 // 8 = 2 = its dp); 24 GPUs: D with dp 3
    assert curve.at(16) is D and curve.at(20) is D
    n = len(calls)
    assert curve.at(24).layout == Layout(2, 2, 2, 3, 1, False) and len(calls) == n + 1
    assert type(calls[-1][0].dp) is int


def test_pools_a_rounding_off_a_whole_number() -> None:
    """Pool sizes come out of float arithmetic: 8 − 1e-9 GPUs is the 8-GPU step B, 8 + 1e-9
    is still one node; 3.999999999 GPUs is 4."""
    curve, calls = _curve()
    assert curve.at(8 - 1e-9) is B and calls == []
    curve, calls = _curve()
    assert curve.at(8 + 1e-9) is B and calls == []
    curve, calls = _curve()
    curve.at(4 - 1e-10)
    assert calls == [(Layout(1, 1, 1, 4, 3, False), False)]


def test_a_fractional_pool_runs_the_layout_of_its_whole_gpus_whatever_was_asked_before(
        ) -> None:
    """8.5 GPUs on nodes of 8 run as 8 (B, within the node), as ``seconds_per_token`` prices
    them; asking for 8.5 first must not change what 8 GPUs cost (the memo is keyed by whole
    GPUs: before the fix, 8.5 was timed across nodes and memoised as 8)."""
    curve, calls = _curve()
    assert curve.at(8.5) is B and calls == []
    assert curve.seconds_per_token(np.array([8.0])).tolist() == [4.0]
    curve, calls = _curve()
    assert curve.seconds_per_token(np.array([8.0])).tolist() == [4.0]
    assert curve.at(8.5) is B
    curve, calls = _curve()
    assert curve.at(9.5).layout == Layout(1, 1, 1, 9, 1, True) and calls[-1][1] is True


def test_a_curve_without_in_node_layouts_spans_nodes_at_any_size() -> None:
    curve, calls = _curve(in_node=False)
    assert curve.smallest is C
    curve.at(4)
    assert calls == [(Layout(1, 1, 1, 4, 1, True), True)]


def test_a_curve_without_time_of_returns_its_cells_as_they_are() -> None:
    curve, _ = _curve(timed=False)
    assert curve.at(4) is A and curve.at(24) is D


def test_seconds_per_token_on_an_array_of_pools() -> None:
    """Fractional pools run their whole GPUs; pools under one GPU run the 1-GPU layout; the
    answer keeps the shape of the question."""
    curve, _ = _curve()
    got = curve.seconds_per_token(np.array([[0.5, 1.0], [8.2, 24.0]]))
    assert got.shape == (2, 2)
    assert got.tolist() == [[5.0, 5.0], [4.0, 103.0]]
    assert curve.seconds_per_token(np.array([3, 3])).tolist() == [103.0, 103.0]
    empty = LayoutCurve(8, (), ())
    assert not empty.fits


def test_running_min_keeps_only_layouts_faster_by_more_than_one_part_in_a_billion() -> None:
    def c(gpus: int, seconds: float) -> TrainCell:
        return TrainCell(True, Layout(1, 1, 1, gpus, 3, False), seconds)

    x, v = c(1, 10.0), c(16, 5.0)
    cells = [c(8, 15.0), v, c(2, 10.0 * (1 - 1e-9)), c(1, 12.0), c(4, 10.0 * (1 + 5e-10)), x]
    assert _running_min(cells) == ((1, x), (16, v))
    # a layout faster by more than the tolerance counts
    y = c(2, 10.0 * (1 - 2e-9))
    assert _running_min([x, y]) == ((1, x), (2, y))


def test_offload_is_kept_only_where_it_saves_gpus() -> None:
    plain2, off2 = Layout(1, 1, 1, 2, 3, False), Layout(1, 1, 1, 2, 3, True)
    plain3, off1 = Layout(1, 1, 1, 3, 3, False), Layout(1, 1, 1, 1, 3, True)
    assert _undominated([plain2, off2]) == [plain2]
    assert _undominated([plain3, off2]) == [plain3, off2]
    assert _undominated([off1, plain3]) == [off1, plain3]
    # another (tp, cp, pp, zero) is not a match; an offloaded layout alone is kept, up to the
    # largest replica
    z1 = Layout(1, 1, 1, 2, 1, False)
    assert _undominated([z1, off2]) == [z1, off2]
    biggest = Layout(1, 1, 1, 8192, 3, True)
    assert _undominated([biggest]) == [biggest]


# ---- the fit at its exact edges (binary-exact sizes) ---------------------------------------

def _binary_job(w: float, o: float) -> TrainJob:
    """Activations 2 × 1,024 × 1,024 × 16 = 32 MiB at bf16 with full recompute."""
    model = ModelBlock(params_b=8.0, layers=16, hidden_size=1024, heads=8, kv_heads=8,
                       head_dim=128)
    return TrainJob(model, 6 * 8e9, w, o, 1024, 1e6, 0.3)


ACT = 2.0 * 1024 * 1024 * 16


def test_a_fixed_replica_filling_memory_exactly_fits() -> None:
    """Two GPUs of ZeRO-3 hold 32 GiB of state as 16 GiB each: with 16 GiB + 32 MiB usable
    the replica fits exactly, and a state cap of exactly 16 GiB admits it."""
    job, eff = _binary_job(16 * GIB, 16 * GIB), Efficiency()
    usable = 16 * GIB + ACT
    want = Layout(1, 1, 1, 2, 3, False)
    assert _fit(job, eff, usable, 1, 1, 1, 3, False, "bf16", 2) == want
    assert _fit(job, eff, usable, 1, 1, 1, 3, False, "bf16", 2, 16 * GIB) == want
    assert _fit(job, eff, usable, 1, 1, 1, 3, False, "bf16", 2, 16 * GIB - 1) is None
    assert _fit(job, eff, usable - 1, 1, 1, 1, 3, False, "bf16", 2) is None


def test_an_offloaded_optimizer_takes_no_gpu_memory() -> None:
    """32 GiB of weights + gradients over 16 GiB free: exactly dp 2, whatever the optimizer
    state, once it is offloaded."""
    job, eff = _binary_job(32 * GIB, 64 * GIB), Efficiency()
    got = _fit(job, eff, 16 * GIB + ACT, 1, 1, 1, 3, True, "bf16", 0)
    assert got == Layout(1, 1, 1, 2, 3, True)


def test_zero1_weights_filling_the_free_memory_exactly_never_fit() -> None:
    """ZeRO-1 keeps the whole 16 GiB of weights + gradients on each GPU: with exactly 16 GiB
    free no data-parallel degree leaves room for the optimizer state (nor for none of it)."""
    for o, offload in ((16 * GIB, False), (0.0, False), (16 * GIB, True)):
        job = _binary_job(16 * GIB, o)
        assert _fit(job, Efficiency(), 16 * GIB + ACT, 1, 1, 1, 1, offload, "bf16", 0) is None
