"""The KV cache and the decode replica by hand (``docs/demand-model.md``; kipply, Transformer
Inference Arithmetic): bytes per token 2·L·kv_heads·head_dim·bytes, the replica's GPUs (the
smallest power of two whose usable HBM holds the weights with 20 % left for KV) and the KV
capacity (replica HBM − weights) / bytes per token, for the rollout of
``examples/grpo-7b.yaml`` (7.6156 B params, 28 layers, 4 KV heads of 128) on an H100 (80 GB, 90 %
usable)."""

from __future__ import annotations

import pytest
from conftest import EXAMPLES

from ptplan.core.hardware import gpus
from ptplan.demand.decode import Conditions, decode_engine, kv_element_bytes
from ptplan.demand.inference import kv_bytes_per_token, replica_gpus_for
from ptplan.demand.model import build_demand
from ptplan.spec.project import load_spec


@pytest.fixture(scope="module")
def grpo():
    spec = load_spec(str(EXAMPLES / "grpo-7b.yaml"))
    demand = build_demand(spec)
    part = next(p for p in demand.parts if (p.phase, p.kind) == ("rollout", "decode"))
    return spec, part


def test_kv_element_bytes() -> None:
    """16-bit KV unless fp8 KV is allowed and the weights are 8-bit (fp8 or int8); fp32 models
    keep fp32 KV."""
    assert kv_element_bytes("fp8", True) == kv_element_bytes("int8", True) == 1.0
    assert kv_element_bytes("fp8", False) == kv_element_bytes("int8", False) == 2.0
    assert kv_element_bytes("bf16", True) == kv_element_bytes("fp16", True) == 2.0
    assert kv_element_bytes("fp32", False) == kv_element_bytes("fp32", True) == 4.0


def test_replica_gpus_by_hand() -> None:
    """Usable 72 GB per GPU, 80 % of it for weights: 57.6 GB per GPU. 15.2 GB → 1 GPU;
    140 GB → 4 (2 × 57.6 = 115.2 is short); beyond 64 GPUs the doubling stops at 128."""
    assert replica_gpus_for(15.2e9, 72e9, 0.2, 64) == 1
    assert replica_gpus_for(140e9, 72e9, 0.2, 64) == 4
    assert replica_gpus_for(115.2e9, 72e9, 0.2, 64) == 2  # exactly fits 2
    assert replica_gpus_for(1e13, 72e9, 0.2, 64) == 128


@pytest.mark.parametrize(("precision", "kv_fp8", "colocated", "weights", "kv_tok", "hbm"), [
    # fp8 weights 7.6156 GB; bf16 KV 2 × 28 × 4 × 128 × 2 = 57,344 B/token; 72 GB usable
    ("fp8", False, False, 7.6156e9, 57_344.0, 72e9),
    # fp8 KV allowed: 28,672 B/token
    ("fp8", True, False, 7.6156e9, 28_672.0, 72e9),
    # bf16 weights 15.2312 GB
    ("bf16", True, False, 15.2312e9, 57_344.0, 72e9),
    # colocated: the engine gets half the 80 GB beside the training state
    ("fp8", False, True, 7.6156e9, 57_344.0, 40e9),
])
def test_decode_engine_by_hand(grpo, precision: str, kv_fp8: bool, colocated: bool,
                               weights: float, kv_tok: float, hbm: float) -> None:
    spec, part = grpo
    h100 = gpus()["H100"]
    eng = decode_engine(part, h100, precision, spec, 0, Conditions(8, colocated, kv_fp8))
    assert not isinstance(eng, str)
    assert eng.gpus == 1 and not eng.spans_nodes
    assert eng.weights_bytes == pytest.approx(weights, rel=1e-12)
    assert eng.kv_bytes_per_token == kv_tok
    assert eng.kv_capacity_tokens == pytest.approx((hbm - weights) / kv_tok, rel=1e-12)
    assert eng.batch_cap == 256
    assert kv_bytes_per_token(part.model, kv_tok / (2 * 28 * 4 * 128)) == kv_tok


def test_fixed_replica_across_nodes(grpo) -> None:
    """A replica fixed at 16 GPUs on 8-GPU nodes spans nodes; its KV holds 16 × 72 GB less the
    weights, in tokens of 16 / 4 = 4 copies each: Qwen2.5-7B has 4 KV heads, so vLLM gives
    each of the 16 ranks one head of a group of four (max(1, 4 // 16) = 1)."""
    spec, part = grpo
    eng = decode_engine(part, gpus()["H100"], "bf16", spec, 16, Conditions(8))
    assert not isinstance(eng, str)
    assert (eng.gpus, eng.spans_nodes) == (16, True)
    assert eng.kv_bytes_per_token == 4 * 57_344
    assert eng.kv_capacity_tokens == pytest.approx((16 * 72e9 - 15.2312e9) / (4 * 57_344),
                                                   rel=1e-12)
    # at 4 GPUs, one KV head per rank: no copies
    four = decode_engine(part, gpus()["H100"], "bf16", spec, 4, Conditions(8))
    assert not isinstance(four, str) and four.kv_bytes_per_token == 57_344


def test_replica_of_64_gpus_is_the_largest(grpo) -> None:
    """64 GPUs (vLLM TP64) is allowed; 128 is refused with the weights' size in GB."""
    spec, part = grpo
    h100 = gpus()["H100"]
    eng = decode_engine(part, h100, "bf16", spec, 64, Conditions(8))
    assert not isinstance(eng, str) and eng.gpus == 64
    assert decode_engine(part, h100, "bf16", spec, 128, Conditions(8)) == (
        "weights (15 GB) and a KV cache need more than 64 GPUs per inference replica")


def test_a_replica_filling_one_node_does_not_span_nodes(grpo) -> None:
    spec, part = grpo
    eng = decode_engine(part, gpus()["H100"], "bf16", spec, 8, Conditions(8))
    assert not isinstance(eng, str) and (eng.gpus, eng.spans_nodes) == (8, False)


def test_async_decode_step_by_hand(grpo) -> None:
    """One async step on one fp8 H100 replica, fixed 2,048-token responses after 512-token
    prompts: a sequence in flight holds on average 512 + 2,048² / (2 × 2,048) = 1,536 tokens of
    context. At or above the batch cap B a step costs n × 2,048 × t(B, 1,536) / B seconds; below
    it, at a tabulated load n, 2,048 × t(n, 1,536) (t: one decode iteration); never less than the
    longest response alone."""
    import numpy as np

    from ptplan.demand import inference as inf
    from ptplan.demand import steps as st
    from ptplan.demand.lengths import fixed

    spec, part = grpo
    eng = decode_engine(part, gpus()["H100"], "fp8", spec, 0, Conditions(8))
    assert not isinstance(eng, str)
    ro = inf.Rollout(2048.0, 512.0, fixed(2048))
    B = 64
    model = st.async_model(eng, ro, B)
    t_b = float(eng.iteration_seconds(B, 1536.0))
    assert model.per_sequence_saturated == pytest.approx(2048 * t_b / B, rel=1e-12)
    floor = st.single_stream_seconds(eng, ro)
    for n in (B, 3 * B):
        assert float(model.seconds(n)) == pytest.approx(max(n * 2048 * t_b / B, floor),
                                                        rel=1e-12)
    grid = st.load_grid(B)
    n = float(next(g for g in grid if 1 < g < B))
    want = max(2048 * float(eng.iteration_seconds(n, 1536.0)), floor)
    assert float(model.seconds(n)) == pytest.approx(want, rel=1e-12)
    assert float(st.async_seconds(eng, ro, B, n)) == pytest.approx(want, rel=1e-12)
    assert np.all(model.seconds(np.array([0.0, 0.5])) == model.seconds(1.0))
