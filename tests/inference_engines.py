"""Hand-made inputs for the inference-engine oracles (``tests/test_oracles_inference*.py``):
a GPU, a model shape, efficiencies and an :class:`Engine` record with round numbers, so each
expected time can be worked out by hand. Builders only (no module-level objects: mutmut forks
its runs from a process that imported the tests)."""

from __future__ import annotations

import numpy as np

from ptplan.core.hardware import GPU
from ptplan.demand.inference import Engine
from ptplan.demand.lengths import LengthDist
from ptplan.spec.project import Efficiency, ModelBlock


def gpu(peaks: dict[str, float], bw_tbps: float = 2.0) -> GPU:
    """A GPU with the given dense peaks (TFLOPS, in this key order) and HBM bandwidth."""
    return GPU(name="X1", row_name="X1", architecture="Test", peak_tflops=dict(peaks),
               memory_gb=80.0, mem_bw_tbps=bw_tbps, interconnect="none", confidence="test",
               source="test")


def model(active_b: float = 1.0) -> ModelBlock:
    """2 layers, 4 query heads of 64 (4·L·H·Q = 2,048 attention FLOPs per token of context),
    one KV head."""
    return ModelBlock(params_b=active_b, layers=2, hidden_size=256, kv_heads=1, head_dim=64,
                      heads=4)


def eff(**changes: object) -> Efficiency:
    """MBU 0.5, decode compute efficiency 0.5, no fixed step overhead (CUDA graphs, one GPU:
    no launches, no all-reduce), prefill efficiency 0.5."""
    base: dict[str, object] = {"decode_mbu": 0.5, "decode_compute_efficiency": 0.5,
                               "decode_step_overhead_ms": 0.0, "prefill_efficiency": 0.5}
    return Efficiency.model_validate({**base, **changes})


def engine(peaks: dict[str, float] | None = None, precision: str = "bf16", *,
           bw_tbps: float = 2.0, active_b: float = 1.0, weights: float = 2e9, kv: float = 1000.0,
           capacity: float = 1e9, batch_cap: int = 256, attention: bool = True) -> Engine:
    """One GPU. Defaults: 2 TB/s at MBU 0.5 = 1e12 B/s, 2 GB of weights, 1,000 B of KV per
    token, so t_iter(b, c) = 2e-3 + 1e-9·b·c s while memory-bound (bf16 peak 1,000 TFLOPS at
    0.5: the GEMMs take b·4e-6 s and attention b·c·4.096e-12 s)."""
    return Engine(gpu=gpu(peaks or {"bf16": 1000.0}, bw_tbps), precision=precision, gpus=1,
                  weights_bytes=weights, kv_bytes_per_token=kv, kv_capacity_tokens=capacity,
                  batch_cap=batch_cap, spans_nodes=False, model=model(active_b),
                  eff=eff(attention_flops=attention))


def lengths(values: list[float], weights: list[float], cap: int, shape: str) -> LengthDist:
    """A length distribution given point by point (the record, not a constructor)."""
    return LengthDist(np.array(values, dtype=float), np.array(weights, dtype=float), cap, shape)
