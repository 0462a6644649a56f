"""One decode iteration, its bound, prefill time and the 16-bit reference by hand
(``optimizer/demand/inference.py``; docs/demand-model.md §4; issue #27, the survivors of the
whole-module mutation run, docs/testing.md).

t_iter(b, c) = max(t_mem, t_cmp) + t_fixed + t_tp with t_mem = (W + b·c·kv) / (g·BW·MBU) and
t_cmp = b·2N / (g·peak_q·eff) + b·4·L·H·Q·c / (g·peak_16·eff), peak_16 the bf16 peak, else
fp16, else the precision's own; t_tp the tensor-parallel all-reduce bytes of a replica of
g > 1 GPUs (§3.12). Prefill takes the roofline factor f_q of §3.12. Inputs are the round-number
engines of ``tests/inference_engines.py``; the unit factors (TB/s and TFLOPS = 1e12, billions =
1e9) are exact, so several checks hold to 1e-13.
"""

from __future__ import annotations

import numpy as np
import pytest
from inference_engines import eff, engine, gpu, model

from ptplan.demand.inference import (
    ceil_div,
    precision_time_factor,
    prefill_seconds_per_token,
    reference_peak,
    reference_precision,
)
from ptplan.spec.sections import ModelBlock

TIGHT = 1e-13


def roofline(peak_tflops: float, bw_tbps: float) -> float:
    """R of docs/demand-model.md §3.12 (roofline of each GPU): the GPU's reference peak ÷ its
    HBM bandwidth, relative to H100's 989.4 TFLOPS ÷ 3.35 TB/s. The non-GEMM share (1 − s) of
    compute-bound time scales by it: f_q = s·peak_ref/peak_q + (1 − s)·R."""
    return (peak_tflops * 1e12 / (bw_tbps * 1e12)) / (989.4e12 / 3.35e12)


def test_memory_bound_iteration_in_exact_units() -> None:
    """2 GB of weights and b·c·1,000 B of KV over 2 TB/s × 0.5: b = 4, c = 1,000 reads
    2.004 GB, 2.004 ms; b = 1 at 1,000: 2.001 ms; b = 4 at 2,000: 2.008 ms. The GEMMs
    (4 × 2e9 FLOPs at 1,000 TFLOPS × 0.5 = 16 µs) stay below."""
    e = engine()
    assert float(e.iteration_seconds(4, 1000)) == pytest.approx(2.004e-3, rel=TIGHT, abs=0)
    got = e.iteration_seconds(np.array([1.0, 4.0]), np.array([1000.0, 2000.0]))
    assert list(got) == pytest.approx([2.001e-3, 2.008e-3], rel=TIGHT, abs=0)
    assert e.bound(4, 1000) == "memory-bandwidth"


def test_compute_bound_gemms_without_attention() -> None:
    """fp8 at 400 TFLOPS × 0.5 = 2e14 FLOP/s, 1 B active: b = 8 → 8 × 2e9 / 2e14 = 80 µs.
    The KV read (8 × 1,000 × 1 B at 1,000 TB/s × 0.5) is 16 ps; with attention FLOPs off
    nothing else is added (no 1-FLOP or 1-s placeholder)."""
    e = engine({"fp8": 400.0, "bf16": 200.0}, "fp8", bw_tbps=1000.0, weights=0.0, kv=1.0,
               attention=False)
    assert float(e.iteration_seconds(8, 1000)) == pytest.approx(8e-5, rel=TIGHT, abs=0)
    assert e.bound(8, 1000) == "compute"


@pytest.mark.parametrize(("peaks", "attention"), [
    # attention at bf16: 8 × 2,048 × 100,000 / (200e12 × 0.5) = 16.384 µs
    ({"fp8": 400.0, "bf16": 200.0, "fp16": 100.0}, 1.6384e-5),
    # no bf16: fp16's 100 TFLOPS, 32.768 µs
    ({"fp8": 400.0, "fp16": 100.0}, 3.2768e-5),
    # neither: the precision's own 400 TFLOPS, 8.192 µs
    ({"fp8": 400.0}, 8.192e-6),
])
def test_attention_runs_at_the_16_bit_peak(peaks: dict[str, float], attention: float) -> None:
    """A 1 M-parameter model at fp8 (GEMMs 8 × 2e6 / 2e14 = 80 ns) and 100,000 tokens of
    context: the attention term 4·L·H·Q·c = 2,048 × 100,000 FLOPs per sequence dominates, at
    the bf16 peak, else fp16, else the weight precision's."""
    e = engine(peaks, "fp8", bw_tbps=1000.0, active_b=0.001, weights=0.0, kv=1.0)
    assert float(e.iteration_seconds(8, 100_000)) == pytest.approx(8e-8 + attention, rel=TIGHT,
                                                                   abs=0)


def test_fixed_costs_add_to_the_iteration() -> None:
    """2 ms step overhead, eager launches 2 dense layers × 340 µs (``EAGER_LAUNCH_US``), a
    2-GPU replica inside a node: 2 × 2 layers × 10 µs all-reduce: 2.72 ms on top of t_mem
    (2 GB over 2 × 1e12 B/s = 1 ms, plus 1 × 1,000 × 1,000 B = 0.5 µs). The all-reduce bytes
    come on top (§3.12): 2 layers × 2 all-reduces × 1 sequence × 256 hidden × 2 B × 2(2 − 1)/2
    = 2,048 B per GPU over the 32 GB/s PCIe of a GPU without a scale-up link: 64 ns."""
    e = engine()
    e2 = type(e)(**{**e.__dict__, "gpus": 2,
                    "eff": eff(decode_step_overhead_ms=2.0, cuda_graphs=False)})
    assert e2.fixed_seconds == pytest.approx(2e-3 + 680e-6 + 40e-6, rel=1e-12, abs=0)
    # docs/demand-model.md §3.12 (engines that span nodes: TP bytes): the decode iteration adds
    # 2·L·b·h·2 B·2(g − 1)/g per GPU over the link (§5.3: the scale-up link, else PCIe
    # `pcie_gb_per_s` = 32 GB/s; the network only when the replica spans nodes)
    tp_bytes = 2 * 2 * 1 * 256 * 2.0 * 2 * (2 - 1) / 2
    assert tp_bytes == 2048.0
    assert float(e2.iteration_seconds(1, 1000)) == pytest.approx(
        (2e9 + 1e6) / 2e12 + 2.72e-3 + tp_bytes / 32e9, rel=1e-12, abs=0)


def test_eager_launches_cost_per_layer_by_kind_unless_stated() -> None:
    """Without CUDA graphs an iteration adds L × the launch cost of a layer: unset, 340 µs a
    dense layer and 500 µs a mixture-of-experts layer (``EAGER_LAUNCH_US``: vllm-omni #7960,
    vLLM #45709); a stated ``eager_launch_us_per_layer`` holds for every layer, 0 included.
    With graphs nothing is added (2 layers, one GPU, no step overhead)."""
    e = engine()
    dense = type(e)(**{**e.__dict__, "eff": eff(cuda_graphs=False)})
    assert dense.fixed_seconds == pytest.approx(2 * 340e-6, rel=1e-12, abs=0)
    moe_block = ModelBlock(params_b=8.0, active_params_b=1.0, experts_per_token=2, layers=2,
                           hidden_size=256, kv_heads=1, head_dim=64, heads=4)
    assert moe_block.is_moe
    moe = type(e)(**{**dense.__dict__, "model": moe_block})
    assert moe.fixed_seconds == pytest.approx(2 * 500e-6, rel=1e-12, abs=0)
    for stated in (45.0, 0.0):
        pinned = eff(cuda_graphs=False, eager_launch_us_per_layer=stated)
        for m in (dense.model, moe_block):
            got = type(e)(**{**e.__dict__, "eff": pinned, "model": m}).fixed_seconds
            assert got == pytest.approx(2 * stated * 1e-6, rel=1e-12, abs=0)
    graphs = type(e)(**{**e.__dict__, "model": moe_block})
    assert graphs.fixed_seconds == 0.0


def test_bound_at_the_tie_and_a_hair_either_side() -> None:
    """t_mem = (1 GB + 1 × 1,000 × 1 MB) / (2 TB/s × 0.5) = 2 ms and t_cmp = 1 × 2 × 1e9 /
    (2 TFLOPS × 0.5) = 2 ms: a tie is memory-bandwidth bound. 1 mB less of weights (t_mem
    1e-15 s shorter) is compute bound; 1 mB more, memory bound."""
    tie = engine({"bf16": 2.0}, weights=1e9, kv=1e6)
    assert tie.bound(1, 1000) == "memory-bandwidth"
    below = engine({"bf16": 2.0}, weights=1e9 - 1e-3, kv=1e6)
    assert below.bound(1, 1000) == "compute"
    above = engine({"bf16": 2.0}, weights=1e9 + 1e-3, kv=1e6)
    assert above.bound(1, 1000) == "memory-bandwidth"
    # twice the batch: KV 2 GB (t_mem 3 ms) against 4 ms of GEMMs
    assert tie.bound(2, 1000) == "compute"


def test_prefill_seconds_per_token_by_hand() -> None:
    """(2N + 4·L·H·Q·T) · f_q / (g × 16-bit peak × efficiency): a 1,000-parameter model (2,000
    FLOPs a token) on 2 GPUs of 100 TFLOPS bf16 at 0.5: 2e3 / 1e14 = 2e-11 s × f without
    attention (no 1-FLOP placeholder), 4e-11 s × f at an explicit 0.25; with attention at
    T = 1,000 tokens (2,048,000 FLOPs) 2.05e-8 s × f. At bf16 f = s + (1 − s)·R (§3.12):
    0.55 + 0.45 × (100 / 2) ÷ (989.4 / 3.35) ≈ 0.626 on this compute-poor, 2 TB/s GPU."""
    g = gpu({"bf16": 100.0})
    m = model(1e-6)
    off = eff(attention_flops=False)
    # docs/demand-model.md §3.3 × §3.12: the non-GEMM share of compute-bound time follows HBM
    f = 0.55 + 0.45 * roofline(100.0, 2.0)
    assert f == pytest.approx(0.62618, rel=1e-5)
    assert prefill_seconds_per_token(m, g, "bf16", 2, off, 1000.0) == pytest.approx(
        2e-11 * f, rel=1e-12, abs=0)
    assert prefill_seconds_per_token(m, g, "bf16", 2, off, 1000.0, 0.25) == pytest.approx(
        4e-11 * f, rel=1e-12, abs=0)
    assert prefill_seconds_per_token(m, g, "bf16", 2, eff(), 1000.0) == pytest.approx(
        2.05e-8 * f, rel=1e-12, abs=0)


def test_prefill_at_low_precision_speeds_up_only_the_gemm_share() -> None:
    """fp8 at twice the bf16 peak with a GEMM share of 0.5: 0.5 × 0.5 + 0.5·R of the bf16-peak
    time (Amdahl, the non-GEMM half at the GPU's roofline ratio R, §3.12), 2e-11 s × that for
    the 2,000 FLOPs above. On a GPU with H100's ops:byte ratio (R = 1) it is 0.75."""
    g = gpu({"bf16": 100.0, "fp8": 200.0})
    e = eff(attention_flops=False, gemm_time_share=0.5)
    # docs/demand-model.md §3.12: f_q = s·peak_ref/peak_q + (1 − s)·R
    f = 0.5 * 0.5 + 0.5 * roofline(100.0, 2.0)
    assert precision_time_factor(g, "fp8", e) == pytest.approx(f, rel=1e-15, abs=0)
    assert prefill_seconds_per_token(model(1e-6), g, "fp8", 2, e, 10.0) == pytest.approx(
        2e-11 * f, rel=1e-12, abs=0)
    # H100's own ratio (989.4 TFLOPS over 3.35 TB/s): R = 1, the plain Amdahl 0.75
    h100_like = gpu({"bf16": 989.4, "fp8": 1978.8}, bw_tbps=3.35)
    assert precision_time_factor(h100_like, "fp8", e) == pytest.approx(0.75, rel=1e-15, abs=0)


def test_precision_time_factor_is_the_exact_peak_ratio() -> None:
    """With the whole time in GEMMs (share 1) the factor is the peak ratio: 1,000 / 2,000 TFLOPS
    = 0.5 exactly (1e15 / 2e15 in binary floating point). At the reference precision the GEMM
    share runs at 1 and the rest at R = (1,000 / 2) ÷ (989.4 / 3.35) ≈ 1.693 (§3.12): this
    2 TB/s GPU has more FLOP/s per byte than H100, so its memory-bound kernels take longer."""
    g = gpu({"bf16": 1000.0, "fp8": 2000.0})
    assert precision_time_factor(g, "fp8", eff(gemm_time_share=1.0)) == 0.5
    # docs/demand-model.md §3.12: s·1 + (1 − s)·R at the reference precision
    r = roofline(1000.0, 2.0)
    assert r == pytest.approx(1.69294, rel=1e-5)
    assert precision_time_factor(g, "bf16", eff(gemm_time_share=0.3)) == pytest.approx(
        0.3 + 0.7 * r, rel=1e-15, abs=0)


@pytest.mark.parametrize(("peaks", "expected"), [
    ({"fp32": 60.0, "fp16": 400.0, "bf16": 200.0}, "bf16"),   # bf16 first whatever the order
    ({"fp32": 60.0, "fp16": 400.0}, "fp16"),                  # no bf16: fp16
    ({"fp8": 100.0, "fp32": 60.0}, "fp32"),                   # neither: fp32
    ({"fp8": 100.0, "int8": 100.0}, "fp8"),                   # none of the three: the first
])
def test_reference_precision(peaks: dict[str, float], expected: str) -> None:
    g = gpu(peaks)
    assert reference_precision(g) == expected
    assert reference_peak(g) == peaks[expected] * 1e12


def test_reference_peak_in_flops() -> None:
    """989 TFLOPS (H100 SXM bf16 dense) is 9.89e14 FLOP/s, exactly."""
    assert reference_peak(gpu({"fp8": 1979.0, "bf16": 989.0})) == 9.89e14


def test_ceil_div() -> None:
    """⌈a / b⌉, forgiving a quotient 1e-9 above a whole number (floating-point noise)."""
    assert ceil_div(6, 3) == 2
    assert ceil_div(7, 3) == 3
    assert ceil_div(0.3, 0.1) == 3           # 0.3 / 0.1 = 2.9999999999999996
    assert ceil_div(2.0 + 1e-10, 1) == 2
    assert ceil_div(2.0 + 1e-8, 1) == 3
    assert ceil_div(0.5, 1) == 1
