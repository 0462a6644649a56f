"""Training memory per GPU and the smallest data-parallel degree that fits, against a reference
restated here from the documented formulas (``docs/demand-model.md``, ZeRO paper, Korthikanti
et al. for activations); it imports only data types (``ModelBlock``, ``Efficiency``,
``TrainJob``, ``Layout``).

Per GPU, for a layout tp × cp × pp × dp with ZeRO stage z:

* weights + gradients: W / (tp·pp), further / (dp·cp) with z = 3; halved with parameter
  offload under z = 3 (the 16-bit weights live in host memory);
* optimizer state: O / (tp·pp·dp·cp), nothing when it is offloaded;
* activations: a·(longest / cp)·micro_batch·hidden·layers / tp, a = 2 bytes per element with
  full recompute, 34 otherwise; × 2 for fp32.

The smallest fitting layout is found here by trying dp = 1, 2, … (brute force), the package by
a closed form.
"""

from __future__ import annotations

import itertools
import math

import pytest

from ptplan.demand.training import MAX_TRAIN_GPUS, Layout, TrainJob, _fit, memory_bytes
from ptplan.spec.efficiency import Efficiency
from ptplan.spec.project import ModelBlock

GIB = 2.0 ** 30


def _job(w: float, o: float, longest: int = 8192, hidden: int = 3584, layers: int = 28
         ) -> TrainJob:
    model = ModelBlock(params_b=7.6, layers=layers, hidden_size=hidden, heads=28, kv_heads=4,
                       head_dim=128)
    return TrainJob(model=model, flops_per_token=6 * 7.6e9, state_weights_grads=w,
                    state_optimizer=o, longest=longest, tokens_per_optimizer_step=1e6, mfu=0.3)


def ref_activations(job: TrainJob, eff: Efficiency, tp: int, cp: int, precision: str) -> float:
    a = 2.0 if eff.activation_recompute == "full" else 34.0
    fp32 = 2.0 if precision == "fp32" else 1.0
    return a * (job.longest / cp) * eff.micro_batch_size * job.model.hidden_size \
        * job.model.layers / tp * fp32


def ref_state(job: TrainJob, eff: Efficiency, lay: Layout) -> float:
    wg = job.state_weights_grads / (lay.tp * lay.pp)
    if lay.zero == 3:
        wg /= lay.dp * lay.cp
        if eff.param_offload:
            wg /= 2.0
    opt = 0.0 if lay.offload else job.state_optimizer / (lay.tp * lay.pp * lay.dp * lay.cp)
    return wg + opt


def ref_memory(job: TrainJob, eff: Efficiency, lay: Layout, precision: str) -> float:
    return ref_state(job, eff, lay) + ref_activations(job, eff, lay.tp, lay.cp, precision)


def ref_fit(job: TrainJob, eff: Efficiency, usable: float, tp: int, cp: int, pp: int, zero: int,
            offload: bool, precision: str, state_cap: float | None) -> Layout | None:
    """The smallest dp whose memory fits (state within the cap), trying every dp."""
    base = tp * cp * pp
    for dp in range(1, MAX_TRAIN_GPUS // base + 1):
        lay = Layout(tp, cp, pp, dp, zero, offload)
        state = ref_state(job, eff, lay)
        if state + ref_activations(job, eff, tp, cp, precision) <= usable \
                and (state_cap is None or state <= state_cap):
            return lay
        if zero != 3 and job.state_weights_grads / (tp * pp) >= usable:
            return None  # unsharded weights never fit, whatever dp
    return None


def test_7b_by_hand() -> None:
    """7.6 B params, bf16 weights + grads 4 B/param = 30.4 GB, Adam state 12 B/param = 91.2 GB;
    usable 72 GB (80 GB × 0.9); activations with full recompute 2 × 8,192 × 3,584 × 28 =
    1.644 GB. ZeRO-3: (30.4 + 91.2) / (72 − 1.644) = 1.73 → dp 2. ZeRO-1: the weights stay
    whole, 91.2 / (72 − 1.644 − 30.4) = 2.28 → dp 3."""
    job, eff = _job(30.4e9, 91.2e9), Efficiency()
    act = 2 * 8192 * 3584 * 28
    assert act == pytest.approx(1.644e9, rel=1e-3)
    assert _fit(job, eff, 72e9, 1, 1, 1, 3, False, "bf16", 0) == Layout(1, 1, 1, 2, 3, False)
    assert _fit(job, eff, 72e9, 1, 1, 1, 1, False, "bf16", 0) == Layout(1, 1, 1, 3, 1, False)
    lay = Layout(1, 1, 1, 2, 3, False)
    assert memory_bytes(job, eff, lay, "bf16") == pytest.approx(
        (30.4e9 + 91.2e9) / 2 + act, rel=1e-12)


EFFS = {
    "default": Efficiency(),
    "selective": Efficiency().model_copy(update={"activation_recompute": "selective"}),
    "param_offload": Efficiency().model_copy(update={"param_offload": True}),
    "micro2": Efficiency().model_copy(update={"micro_batch_size": 2}),
}
LAYOUTS = [Layout(tp, cp, pp, dp, zero, off) for tp, cp, pp, dp, zero, off in itertools.product(
    (1, 2, 8), (1, 2), (1, 4), (1, 3, 16), (1, 3), (False, True))]


@pytest.mark.parametrize("eff_name", sorted(EFFS))
@pytest.mark.parametrize("precision", ["bf16", "fp32", "fp8"])
def test_memory_per_gpu_equals_the_reference(eff_name: str, precision: str) -> None:
    job, eff = _job(30.4e9, 91.2e9), EFFS[eff_name]
    for lay in LAYOUTS:
        assert memory_bytes(job, eff, lay, precision) == pytest.approx(
            ref_memory(job, eff, lay, precision), rel=1e-12), lay


USABLE = [12e9, 20e9, 40e9, 72e9, 130e9]
SHAPES = list(itertools.product((1, 2, 4), (1, 2), (1, 2), (1, 3), (False, True)))


@pytest.mark.parametrize("eff_name", sorted(EFFS))
@pytest.mark.parametrize("precision", ["bf16", "fp32"])
@pytest.mark.parametrize("cap", [None, 30e9])
def test_smallest_fitting_dp_equals_brute_force(eff_name: str, precision: str,
                                                cap: float | None) -> None:
    job, eff = _job(30.4e9, 91.2e9), EFFS[eff_name]
    for usable, (tp, cp, pp, zero, off) in itertools.product(USABLE, SHAPES):
        got = _fit(job, eff, usable, tp, cp, pp, zero, off, precision, 0, cap)
        want = ref_fit(job, eff, usable, tp, cp, pp, zero, off, precision, cap)
        assert got == want, (usable, tp, cp, pp, zero, off)
        if got is not None:
            assert type(got.dp) is int


@pytest.mark.parametrize("eff_name", sorted(EFFS))
@pytest.mark.parametrize("precision", ["bf16", "fp32"])
def test_fixed_replica_fits_exactly_when_the_reference_does(eff_name: str,
                                                            precision: str) -> None:
    """A replica of 8 GPUs fixed beforehand (colocated engines): the layout's dp is 8 / base;
    it fits when its memory per GPU (and state, under a cap) fits."""
    job, eff = _job(30.4e9, 91.2e9), EFFS[eff_name]
    for usable, cap, (tp, cp, pp, zero, off) in itertools.product(
            USABLE, (None, 10e9), SHAPES):
        got = _fit(job, eff, usable, tp, cp, pp, zero, off, precision, 8, cap)
        if 8 % (tp * cp * pp):
            assert got is None
            continue
        lay = Layout(tp, cp, pp, 8 // (tp * cp * pp), zero, off)
        state = ref_state(job, eff, lay)
        fits = state + ref_activations(job, eff, tp, cp, precision) <= usable and \
            (cap is None or state <= cap)
        assert got == (lay if fits else None), (usable, cap, tp, cp, pp, zero, off)
        if got is not None:
            assert type(got.dp) is int
    assert _fit(job, eff, 1e12, 3, 1, 1, 3, False, precision, 8) is None  # 8 % 3


def test_a_need_of_exactly_two_replicas_is_two() -> None:
    """Binary-exact sizes: activations 2 × 1,024 × 1,024 × 16 = 32 MiB; usable 16 GiB + 32 MiB
    leaves 16 GiB; 32 GiB of state under ZeRO-3 needs exactly dp = 2."""
    job, eff = _job(16 * GIB, 16 * GIB, longest=1024, hidden=1024, layers=16), Efficiency()
    usable = 16 * GIB + 2 * 1024 * 1024 * 16
    assert _fit(job, eff, usable, 1, 1, 1, 3, False, "bf16", 0) == Layout(1, 1, 1, 2, 3, False)


def test_a_replica_beyond_the_largest_is_none() -> None:
    """Needing 8,192.5 GPUs of state (dp 8,193 > MAX_TRAIN_GPUS = 8,192): no layout."""
    assert MAX_TRAIN_GPUS == 8192
    job, eff = _job(8192.5 * GIB, 0.0, longest=1024, hidden=1024, layers=16), Efficiency()
    usable = GIB + 2 * 1024 * 1024 * 16
    assert _fit(job, eff, usable, 1, 1, 1, 3, True, "bf16", 0) is None
    assert ref_fit(job, eff, usable, 1, 1, 1, 3, True, "bf16", None) is None
    job = _job(8191.5 * GIB, 0.0, longest=1024, hidden=1024, layers=16)
    assert _fit(job, eff, usable, 1, 1, 1, 3, True, "bf16", 0) == Layout(1, 1, 1, 8192, 3, True)
    assert math.ceil(8191.5) == 8192
