"""The training layouts considered and the one chosen, against a reference restated here from
``optimizer/demand/training.py``'s docstring and docs/demand-model.md §5; the reference imports
only data types and the memory formulas of ``tests/test_oracles_train_memory.py``, and finds
the smallest data-parallel degree by bisection over dp (memory per GPU falls as dp grows),
not by the package's closed form.

The rules restated: tensor parallel within a node, dividing the query heads and the KV groups
(Megatron replicates no group; an MLA model has none), up to the
backend's largest (FSDP: none); context parallel only for sequences of at least 2,048 tokens
per rank; a (tp, cp) whose activations alone fill the usable memory is skipped; ZeRO stages per
backend (auto 3 then 1, Megatron 1, FSDP 3); the optimizer kept on the GPU then offloaded
(auto), only offloaded (always) or only on the GPU (never); pipeline depths up to the layer
count (FSDP: none); for each, the smallest dp that fits (or the fixed replica's), a deeper
pipeline not tried once one data-parallel rank suffices (unless the replica is fixed); an
offloaded layout kept only where it needs fewer GPUs than the same layout on the GPU.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from test_oracles_train_memory import ref_activations, ref_state

from ptplan.core.hardware import GPU
from ptplan.demand.training import Layout, TrainJob, _candidates, choose_layout
from ptplan.spec.project import Efficiency, ModelBlock

MAX_GPUS = 8192
TP = (1, 2, 4, 8, 16)
CP = (1, 2, 4, 8, 16)
PP = (1, 2, 3, 4, 6, 8, 9, 12, 16, 18, 24, 32, 36, 48, 64)
BACKEND_TP = {"auto": 16, "megatron": 16, "fsdp": 1}
ZERO = {"auto": (3, 1), "megatron": (1,), "fsdp": (3,)}
OFFLOAD = {"auto": (False, True), "always": (True,), "never": (False,)}


def ref_layout(job: TrainJob, eff: Efficiency, usable: float, tp: int, cp: int, pp: int,
               zero: int, off: bool, precision: str, replica: int, cap: float | None
               ) -> Layout | None:
    base = tp * cp * pp
    act = ref_activations(job, eff, tp, cp, precision)

    def fits(dp: int) -> bool:
        state = ref_state(job, eff, Layout(tp, cp, pp, dp, zero, off))
        return state + act <= usable and (cap is None or state <= cap)

    if replica:
        if replica % base:
            return None
        dp = replica // base
        return Layout(tp, cp, pp, dp, zero, off) if fits(dp) else None
    lo, hi = 1, MAX_GPUS // base
    if hi < 1 or not fits(hi):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if fits(mid):
            hi = mid
        else:
            lo = mid + 1
    return Layout(tp, cp, pp, lo, zero, off)


def ref_candidates(job: TrainJob, eff: Efficiency, usable: float, gpn: int, precision: str,
                   replica: int = 0, cap: float | None = None) -> tuple[list[Layout], float]:
    backend, m = eff.train_backend, job.model
    out: list[Layout] = []
    smallest = math.inf
    for tp in TP:
        if tp > gpn or tp > BACKEND_TP[backend] or m.query_heads % tp or (
                m.kv_latent_dim is None and m.kv_heads % tp):
            continue
        for cp in CP:
            if cp > 1 and job.longest < 2048 * cp:
                continue
            act = ref_activations(job, eff, tp, cp, precision)
            smallest = min(smallest, act)
            if act >= usable:
                continue
            for zero in ZERO[backend]:
                for off in OFFLOAD[eff.optimizer_offload]:
                    for pp in PP:
                        if pp > m.layers or (backend == "fsdp" and pp > 1):
                            break
                        lay = ref_layout(job, eff, usable, tp, cp, pp, zero, off, precision,
                                         replica, cap)
                        if lay is None:
                            continue
                        out.append(lay)
                        if lay.dp == 1 and not replica:
                            break
    plain = {(x.tp, x.cp, x.pp, x.zero): x.gpus for x in out if not x.offload}
    kept = [x for x in out if not x.offload or x.gpus < plain.get((x.tp, x.cp, x.pp, x.zero),
                                                                  MAX_GPUS + 1)]
    return kept, smallest


def _job(params_b: float, layers: int, hidden: int, heads: int, longest: int,
         kv_heads: int = 0) -> TrainJob:
    model = ModelBlock(params_b=params_b, layers=layers, hidden_size=hidden, heads=heads,
                       kv_heads=kv_heads or heads, head_dim=hidden // heads)
    n = params_b * 1e9
    return TrainJob(model, 6 * n, 4 * n, 12 * n, longest, 1e6, 0.3)


SEVEN_B = dict(params_b=7.6, layers=28, hidden=3584, heads=28)
SCENARIOS: dict[str, dict[str, Any]] = {
    # 20 B params on 2 layers, Megatron: pipelines of 1 and 2 stages only
    "two-layers-megatron": dict(job=dict(params_b=20, layers=2, hidden=4096, heads=32,
                                         longest=8192), eff=dict(train_backend="megatron")),
    "two-layers-offload-never": dict(job=dict(params_b=20, layers=2, hidden=4096, heads=32,
                                              longest=8192),
                                     eff=dict(train_backend="megatron",
                                              optimizer_offload="never")),
    "fsdp-7b": dict(job=dict(SEVEN_B, longest=8192), eff=dict(train_backend="fsdp")),
    "fsdp-7b-always-offload": dict(job=dict(SEVEN_B, longest=8192),
                                   eff=dict(train_backend="fsdp", optimizer_offload="always")),
    # 7 query heads: only tp 1 divides them
    # 12 query heads in 2 KV groups (DeepSeek-R1-Distill-Qwen-1.5B): Megatron's tp 1 and 2 only
    "two-kv-groups": dict(job=dict(params_b=1.78, layers=28, hidden=1536, heads=12, kv_heads=2,
                                   longest=8192), eff=dict(train_backend="megatron")),
    "seven-heads": dict(job=dict(params_b=14, layers=24, hidden=896, heads=7, longest=2048)),
    # exactly 2,048 tokens per context-parallel rank at cp 2
    "cp2-exactly": dict(job=dict(SEVEN_B, longest=4096)),
    # activations of one 16,384-token sequence fill a GPU at cp 1 (21.5 GB), not at cp 2
    "cp-needed": dict(job=dict(params_b=1, layers=80, hidden=8192, heads=64, longest=16384),
                      usable=15e9, gpn=1),
    "fp32": dict(job=dict(SEVEN_B, longest=32768), precision="fp32"),
    "auto-7b": dict(job=dict(SEVEN_B, longest=8192)),
    "auto-70b-selective": dict(job=dict(params_b=70, layers=80, hidden=8192, heads=64,
                                        longest=8192),
                               eff=dict(activation_recompute="selective")),
    "replica-8": dict(job=dict(SEVEN_B, longest=8192), replica=8),
    "replica-16-cap": dict(job=dict(params_b=30, layers=48, hidden=5120, heads=40,
                                    longest=8192), replica=16, cap=20e9, gpn=8),
    "param-offload": dict(job=dict(params_b=30, layers=48, hidden=5120, heads=40,
                                   longest=8192), eff=dict(param_offload=True), gpn=4),
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_candidates_equal_the_reference(name: str) -> None:
    sc = SCENARIOS[name]
    job, eff = _job(**sc["job"]), Efficiency(**sc.get("eff", {}))
    args = (sc.get("usable", 72e9), sc.get("gpn", 8), sc.get("precision", "bf16"),
            sc.get("replica", 0), sc.get("cap"))
    got, smallest = _candidates(job, eff, *args)
    want, want_smallest = ref_candidates(job, eff, *args)
    assert got == want
    assert smallest == pytest.approx(want_smallest, rel=1e-12, abs=0)
    assert got, "the scenario should have layouts"


def test_the_scenarios_reach_the_rules_they_name() -> None:
    """The reference's answers themselves, so each scenario exercises what its name says."""
    def layouts(name: str) -> list[Layout]:
        sc = SCENARIOS[name]
        return ref_candidates(_job(**sc["job"]), Efficiency(**sc.get("eff", {})),
                              sc.get("usable", 72e9), sc.get("gpn", 8),
                              sc.get("precision", "bf16"), sc.get("replica", 0),
                              sc.get("cap"))[0]

    assert {x.pp for x in layouts("two-layers-megatron")} == {1, 2}
    assert {(x.tp, x.pp) for x in layouts("fsdp-7b")} == {(1, 1)}
    assert {x.tp for x in layouts("seven-heads")} == {1}
    assert {x.cp for x in layouts("cp2-exactly")} == {1, 2}
    assert {x.cp for x in layouts("cp-needed")} == {2, 4, 8}
    assert any(x.dp > 1 for x in layouts("auto-7b")) and any(x.pp > 1
                                                            for x in layouts("auto-7b"))
    assert {x.gpus for x in layouts("replica-8")} == {8}


GB = 1e9
ACT32 = 2.0 * 1024 * 1 * 1024 * 4 * 2
"""fp32 activations of a 1,024-token sequence, full recompute, 4 layers of 1,024: 16 MiB."""


def _gpu() -> GPU:
    return GPU(name="X1", row_name="X1", architecture="Hopper",
               peak_tflops={"bf16": 1000.0, "fp32": 500.0}, memory_gb=80.0, mem_bw_tbps=3.0,
               interconnect="NVLink", confidence="test", source="test",
               scaleup_gb_per_s=100.0)


def _small_job(w: float, o: float, longest: int = 1024) -> TrainJob:
    model = ModelBlock(params_b=1.0, layers=4, hidden_size=1024, heads=8, kv_heads=8,
                       head_dim=128)
    return TrainJob(model, 6e9, w, o, longest, 2048, 0.5)


def test_activations_filling_the_memory_exactly_are_refused_with_their_size() -> None:
    """One node of one GPU, 1,024-token sequences (no context parallel below 4,096): the fp32
    activations are 2 × 1,024 × 1,024 × 4 × 2 = 16 MiB = 0.0168 GB; 16 MiB usable is full."""
    job = _small_job(1e6, 3e6)
    got = choose_layout(job, _gpu(), "fp32", Efficiency(), ACT32, 1)
    assert got == ("activations of one 1024-token sequence (0.0 GB at the best tp/cp) exceed "
                   "X1 usable HBM")
    big = _small_job(1e6, 3e6, longest=2 ** 20)  # 16 GiB at cp 1, 1 GiB at cp 16
    got = choose_layout(big, _gpu(), "fp32", Efficiency(), 2 ** 30, 1)
    assert got == ("activations of one 1048576-token sequence (1.1 GB at the best tp/cp) "
                   "exceed X1 usable HBM")
    # twice that memory holds the activations and the 4 MB of state on one GPU
    curve = choose_layout(job, _gpu(), "fp32", Efficiency(), 2 * ACT32, 1)
    assert not isinstance(curve, str) and curve.smallest.layout == Layout(1, 1, 1, 1, 3, False)


def test_state_that_fits_no_layout_is_refused() -> None:
    job = _small_job(4e9, 12e9)
    eff = Efficiency(optimizer_offload="never")
    assert choose_layout(job, _gpu(), "bf16", eff, 2e9, 8, replica_gpus=3) == (
        "training state does not fit 3 GPUs per replica in any layout")
    huge = _small_job(4e15, 12e15)
    assert choose_layout(huge, _gpu(), "bf16", eff, 1e9, 8) == (
        "training state needs more than 8192 GPUs in every layout")


def test_the_chosen_cells_within_a_node_and_across_nodes() -> None:
    """FSDP, optimizer never offloaded, fp32 on nodes of 2 GPUs: 16 GB of state over 10 GB
    free needs dp 2, the whole node. fp32 compute: 6e9 × (0.55 × 1,000/500 + 0.45·R) /
    (1e15 × 0.5) ≈ 1.929e-5 s per token, R = (1,000 TFLOPS / 3 TB/s) ÷ (989.4 / 3.35) the
    roofline ratio of the non-GEMM share (docs/demand-model.md §3.12). The gathers, 3 × 1e9 ×
    2 B × 1/2 / 1e11 = 0.03 s per 1,024-token micro-batch within the node (2.9296875e-5 s per
    token), bind; across nodes all of it over 50 GB/s: 0.12 s, 1.171875e-4 s per token. Memory
    16e9/2 + 16 MiB."""
    job = _small_job(4e9, 12e9)
    eff = Efficiency(train_backend="fsdp", optimizer_offload="never")
    curve = choose_layout(job, _gpu(), "fp32", eff, 10e9 + ACT32, 2)
    assert not isinstance(curve, str)
    lay = Layout(1, 1, 1, 2, 3, False)
    ((k, inside),) = curve.in_node
    ((k2, across),) = curve.multi_node
    assert (k, k2) == (2, 2) and inside.layout == lay == across.layout
    assert inside.fits is True and across.fits is True
    assert inside.reason == "" and across.reason == ""
    assert inside.seconds_per_token_per_gpu == pytest.approx(0.03 / 1024, rel=1e-12, abs=0)
    assert across.seconds_per_token_per_gpu == pytest.approx(0.12 / 1024, rel=1e-12, abs=0)
    assert inside.memory_gb_per_gpu == pytest.approx((8e9 + ACT32) / GB, rel=1e-12, abs=0)
    # docs/demand-model.md §3.12 (roofline of each GPU): f_q = s·peak_ref/peak_q + (1 − s)·R,
    # R = (peak ÷ HBM bandwidth) ÷ H100's (989.4 TFLOPS ÷ 3.35 TB/s), s = 0.55 (default)
    roofline = (1000e12 / 3e12) / (989.4e12 / 3.35e12)
    assert roofline == pytest.approx(1.12862, rel=1e-5)
    compute = 6e9 * (0.55 * 2 + 0.45 * roofline) / (1e15 * 0.5)
    assert compute == pytest.approx(1.92946e-5, rel=1e-5)
    assert compute < 0.03 / 1024  # the gathers still bind
    assert inside.single_sequence_seconds == pytest.approx(1024 * compute, rel=1e-12, abs=0)
    assert curve.smallest is inside and curve.at(2) is inside
    # four GPUs span two nodes: dp 4, every gather over the network, a quarter of the state
    four = curve.at(4)
    assert four.layout == Layout(1, 1, 1, 4, 3, False) and four.fits and four.reason == ""
    assert four.seconds_per_token_per_gpu == pytest.approx(0.12 / 1024, rel=1e-12, abs=0)
    assert four.memory_gb_per_gpu == pytest.approx((4e9 + ACT32) / GB, rel=1e-12, abs=0)


def test_megatron_tensor_parallel_splits_heads_and_kv_groups() -> None:
    """Megatron shards the query heads and the KV groups without replication: 12 heads in 2
    groups take tp 1 and 2; an MLA model (no KV groups, DeepSeek-style) only its query heads,
    so 12 MLA heads take 1, 2 and 4 but not 8; 8 heads in 8 groups take all of 1-8."""
    def sizes(heads: int, kv: int, latent: int | None = None) -> list[int]:
        m = ModelBlock(params_b=2.0, layers=4, hidden_size=128 * heads, heads=heads,
                       kv_heads=kv, head_dim=128, kv_latent_dim=latent)
        return [tp for tp in TP if m.splits_tp(tp, replicate_kv=False)]

    assert sizes(12, 2) == [1, 2]
    assert sizes(12, 12, latent=576) == [1, 2, 4]
    assert sizes(8, 8) == [1, 2, 4, 8]
