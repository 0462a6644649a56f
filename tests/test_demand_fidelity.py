"""The demand model's mechanisms: response lengths, the rollout drain, training layouts,
precision as deployed, calibration that binds. Hand-derived cases first, then properties."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ptplan.core.errors import InputError
from ptplan.core.hardware import gpus
from ptplan.demand import inference as inf
from ptplan.demand import lengths as ld
from ptplan.demand import steps as stp
from ptplan.demand import training as tr
from ptplan.demand.cells import Conditions, cell, phase_cell
from ptplan.demand.cluster import run_on_cluster
from ptplan.demand.model import build_demand, prefill_sequences, response_lengths
from ptplan.demand.rates import gpu_precisions, phase_rates
from ptplan.policies.model import parse_policy
from ptplan.spec.project import Efficiency, ModelBlock, parse_spec
from tests.conftest import example_dict

H100 = gpus()["H100"]
ANY_PRECISION = parse_policy("name: any-precision")
"""A policy without precision floors (the default keeps the update at bf16 or better)."""
QWEN7B = {"params_b": 7.6, "layers": 28, "hidden_size": 3584, "heads": 28, "kv_heads": 4,
          "head_dim": 128}


def grpo(**data: Any) -> dict[str, Any]:
    d = example_dict("grpo-7b.yaml")
    d["data"].update(data)
    return d


# ---- response lengths -----------------------------------------------------------------------

@pytest.mark.parametrize(("mean", "cap"), [(500, 4096), (2048, 4096), (3500, 4096), (100, 32768)])
def test_max_entropy_keeps_the_mean_and_the_cap(mean: float, cap: float) -> None:
    d = ld.max_entropy(mean, cap)
    assert d.mean == pytest.approx(mean, rel=1e-9)
    assert d.lengths.max() <= cap and d.lengths.min() >= 1
    assert d.weights.sum() == pytest.approx(1.0)


def test_max_entropy_at_half_the_cap_is_uniform() -> None:
    d = ld.max_entropy(2048, 4096)
    # uniform on [0, 4096]: quantile midpoints (k + 0.5)/K x 4096
    expected = (np.arange(ld.K) + 0.5) / ld.K * 4096
    assert np.allclose(d.lengths, expected, rtol=1e-6)


def test_low_mean_decays_and_high_mean_piles_at_the_cap() -> None:
    low, high = ld.max_entropy(800, 4096), ld.max_entropy(3300, 4096)
    assert np.median(low.lengths) < 800  # a decaying tail: median below the mean
    assert np.median(high.lengths) > 3300  # mass towards the cap: median above the mean


def test_truncated_share_is_a_point_mass_at_the_cap() -> None:
    d = ld.with_truncation(2000, 8192, 0.1)
    assert d.mean == pytest.approx(2000, rel=1e-9)
    assert float(d.weights[d.lengths == 8192].sum()) >= 0.1
    assert d.longest(100) == 8192  # 100 draws: 10 expected at the cap


def test_survival_and_residual() -> None:
    d = ld.fixed(100)
    assert d.survival(np.array([1, 100, 101])).tolist() == [1.0, 1.0, 0.0]
    # fixed length L: residual of a sequence caught in flight is uniform on [0, L]
    assert float(d.residual_survival(np.array([50.0]))[0]) == pytest.approx(0.5)
    assert d.mean_age == pytest.approx(50.0)  # E[L^2] / 2E[L]


def test_quantile_and_histogram_specs(grpo: dict[str, Any]) -> None:
    grpo["data"].update(response_tokens=1000, max_response_tokens=8192,
                        response_length={"p50": 600, "p90": 1800, "p99": 4000})
    s = parse_spec(grpo)
    d = response_lengths(s)
    assert d.shape == "quantiles"
    assert float(np.median(d.lengths)) == pytest.approx(600, rel=0.05)
    assert d.mean == pytest.approx(952, rel=0.01)  # the piecewise-linear quantile's mean
    grpo["data"].update(response_tokens=750,
                        response_length={"histogram": [[500, 3], [1500, 1]]})
    assert response_lengths(parse_spec(grpo)).mean == pytest.approx(750)


@pytest.mark.parametrize(("block", "needle"), [
    ({"p50": 9000}, "exceeds max_response_tokens"),
    ({"p50": 200, "p90": 400}, "implies a mean"),
    ({"p90": 300, "p50": 400}, "must not decrease"),
    ({"p50": 700, "histogram": [[100, 1]]}, "not both"),
    ({"truncated_share": 0.9}, "alone exceeds the mean"),
])
def test_response_length_errors_name_the_field(grpo: dict[str, Any], block: dict[str, Any],
                                               needle: str) -> None:
    grpo["data"].update(response_tokens=1000, max_response_tokens=8192, response_length=block)
    with pytest.raises(InputError, match=needle):
        parse_spec(grpo)


def test_tail_factor_is_retired_with_a_pointer(grpo: dict[str, Any]) -> None:
    grpo["efficiency"] = {"tail_factor": 1.5}
    with pytest.raises(InputError, match=r"data\.response_length"):
        parse_spec(grpo)


# ---- the rollout drain ------------------------------------------------------------------------

def engine(eff: Efficiency | None = None, gpu: str = "H100", precision: str = "bf16",
           kv_bytes: float = 2.0, batch_cap: int = 256, model: dict[str, Any] = QWEN7B,
           util: float = 0.9) -> inf.Engine:
    m = ModelBlock(**model)
    g = gpus()[gpu]
    eff = eff or Efficiency()
    weights = m.params_b * 1e9 * (1 if precision in ("fp8", "int8") else 2)
    kv = inf.kv_bytes_per_token(m, kv_bytes)
    cap = (g.memory_gb * 1e9 * util - weights) / kv
    return inf.Engine(g, precision, 1, weights, kv, cap, batch_cap, False, m, eff)


def test_iteration_time_hand_derived() -> None:
    eff = Efficiency(decode_step_overhead_ms=2.0)
    e = engine(eff)
    # batch 1 at context 1,000: weights + 1,000 tokens of KV over 3.35 TB/s x 0.6, plus 2 ms
    kv = 2 * 28 * 4 * 128 * 2
    t_mem = (7.6e9 * 2 + 1000 * kv) / (3.35e12 * 0.6)
    assert float(e.iteration_seconds(1, 1000)) == pytest.approx(t_mem + 0.002, rel=1e-9)


def test_fixed_lengths_drain_is_length_iterations_at_full_batch() -> None:
    eff = Efficiency(decode_step_overhead_ms=0.0)
    e = engine(eff)
    ro = inf.Rollout(64, 100, ld.fixed(1000))
    batch, admitted = inf.effective_batch(e, ro)
    sm = stp.step_model(e, ro, batch, admitted)
    n = float(sm.n_grid[sm.n_grid <= 64][-1])  # a tabulated load (others round up to one)
    by_hand = sum(float(e.iteration_seconds(n, 100 + j)) for j in range(1, 1001))
    assert float(sm.seconds(n)) == pytest.approx(by_hand, rel=0.01)
    # a load between two tabulated sizes is priced at the next one up: never optimistic
    assert float(sm.seconds(n * 1.01)) >= float(sm.seconds(n))


def test_drain_sits_between_full_batch_and_longest_alone() -> None:
    e = engine()
    ro = inf.Rollout(128, 200, ld.max_entropy(2000, 16384))
    batch, admitted = inf.effective_batch(e, ro)
    sm = stp.step_model(e, ro, batch, admitted)
    t = float(sm.seconds(128))
    alone = stp.single_stream_seconds(e, ro)
    full_batch = 128 * ro.lengths.mean / 128 * float(e.iteration_seconds(128, 200 + 2000))
    assert t > alone  # more work than one sequence
    assert t > full_batch  # the batch drains: the longest response sets the end
    assert alone > 0.5 * t  # long tail: most of the step is spent on a few sequences


def test_saturated_engine_grows_linearly_in_sequences() -> None:
    e = engine(batch_cap=32)
    ro = inf.Rollout(4096, 200, ld.max_entropy(1000, 4096))
    batch, admitted = inf.effective_batch(e, ro)
    sm = stp.step_model(e, ro, batch, admitted)
    t1, t2, t3 = (float(sm.seconds(n)) for n in (1000, 2000, 3000))
    assert t3 - t2 == pytest.approx(t2 - t1, rel=1e-6)
    assert (t2 - t1) == pytest.approx(1000 * 1000 / 32 * sm.saturated_iter, rel=1e-6)


def test_kv_capacity_caps_the_batch() -> None:
    small = engine(util=0.25)  # 20 GB - 15.2 GB weights: room for ~84K tokens
    ro = inf.Rollout(4096, 1000, ld.max_entropy(4000, 16384))
    batch, _ = inf.effective_batch(small, ro)
    assert 1 <= batch < 256
    assert batch * (1000 + ro.lengths.mean_age) <= small.kv_capacity_tokens


def test_prefix_caching_prefills_a_prompt_once_per_group(grpo: dict[str, Any]) -> None:
    grpo["data"].update(prompts_per_step=64, samples_per_prompt=16, prompt_tokens=512)
    on = parse_spec(grpo)
    grpo["efficiency"] = {"prefix_caching": False}
    off = parse_spec(grpo)
    assert prefill_sequences(off) == 64 * 16
    # 512 tokens = 32 full blocks: each further sample re-prefills one block (16 tokens)
    assert prefill_sequences(on) == pytest.approx(64 * (1 + 15 * 16 / 512))


def test_eager_and_cross_node_tp_add_per_iteration_cost() -> None:
    base = engine().fixed_seconds
    eager = engine(Efficiency(cuda_graphs=False)).fixed_seconds
    assert eager - base == pytest.approx(28 * 340e-6)  # EAGER_LAUNCH_US["dense"]
    stated = engine(Efficiency(cuda_graphs=False, eager_launch_us_per_layer=45.0)).fixed_seconds
    assert stated - base == pytest.approx(28 * 45e-6)
    e2 = inf.Engine(H100, "bf16", 16, 1e9, 1e5, 1e6, 256, True, ModelBlock(**QWEN7B),
                    Efficiency())
    assert e2.fixed_seconds - base == pytest.approx(2 * 28 * 30e-6)


# ---- training layouts -------------------------------------------------------------------------

def ultra(**data: Any) -> dict[str, Any]:
    return {
        "name": "ln-ultra", "method": "rl", "algorithm": "grpo",
        "model": {"params_b": 253, "layers": 162, "hidden_size": 16384, "heads": 128,
                  "kv_heads": 8, "head_dim": 128},
        "data": {"steps": 10, "prompts_per_step": 72, "samples_per_prompt": 16,
                 "prompt_tokens": 300, "response_tokens": 8000, "max_response_tokens": 24000,
                 "mini_batches_per_step": 2, **data},
        "pipeline": "colocated",
        "precisions": {"rollout": ["fp8"], "scoring": ["bf16"], "update": ["bf16"]},
        "efficiency": {"train_backend": "megatron"},
    }


def test_253b_grpo_with_24k_sequences_fits_h100_at_bf16() -> None:
    s = parse_spec(ultra())
    d = build_demand(s)
    pc = phase_cell(d, "update", H100, "bf16", cond=Conditions(8))
    assert pc.fits, pc.reason
    assert pc.layout is not None and pc.layout["tp"] == 8  # TP within the node
    assert pc.replica_gpus > 8  # model state spread over nodes


def test_253b_runs_on_its_published_cluster_with_replicas_over_64_gpus() -> None:
    r = run_on_cluster(parse_spec(ultra()), "H100", 576, 8, "colocated")
    assert r.layout["update"] is not None
    lay = r.layout["update"]
    assert lay["tp"] * lay["cp"] * lay["pp"] * lay["dp"] > 64


def test_405b_ppo_plans_on_32_nodes() -> None:
    spec = parse_spec({
        "name": "405b", "method": "rl", "algorithm": "ppo",
        "model": {"params_b": 405, "layers": 126, "hidden_size": 16384, "heads": 128,
                  "kv_heads": 8, "head_dim": 128},
        "data": {"steps": 10, "prompts_per_step": 1856, "samples_per_prompt": 1,
                 "prompt_tokens": 200, "response_tokens": 500, "max_response_tokens": 1024,
                 "update_epochs": 4},
    })
    r = run_on_cluster(spec, "H100", 256, 8, "sync", {"rollout": 16, "update": 240})
    assert r.step_seconds > 0 and math.isfinite(r.step_seconds)


@given(tp=st.sampled_from([1, 2, 4, 8]), cp=st.sampled_from([1, 2, 4]),
       seq=st.integers(1024, 65536), rec=st.sampled_from(["full", "selective", "none"]))
@settings(max_examples=60, deadline=None)
def test_more_tp_or_cp_never_needs_more_activation_memory(tp: int, cp: int, seq: int,
                                                           rec: str) -> None:
    eff = Efficiency(activation_recompute=rec)  # type: ignore[arg-type]
    job = tr.TrainJob(ModelBlock(**QWEN7B), 6 * 7.6e9, 4 * 7.6e9, 12 * 7.6e9, seq, 1e6, 0.25)
    a = tr.activation_bytes(job, eff, tp, cp, "bf16")
    assert tr.activation_bytes(job, eff, tp * 2, cp, "bf16") <= a
    assert tr.activation_bytes(job, eff, tp, cp * 2, "bf16") <= a


def test_offload_only_where_nothing_else_fits_or_asked() -> None:
    job = tr.TrainJob(ModelBlock(**QWEN7B), 6 * 7.6e9, 4 * 7.6e9, 12 * 7.6e9, 4096, 1e6, 0.25)
    usable = 80e9 * 0.9
    auto = tr.choose_layout(job, H100, "bf16", Efficiency(), usable, 8)
    assert not isinstance(auto, str)
    # one GPU cannot hold 7.6B x 16 B: only the offloaded layout fits there; a node does not
    assert auto.at(1).layout.offload  # type: ignore[union-attr]
    assert not auto.at(8).layout.offload  # type: ignore[union-attr]
    forced = tr.choose_layout(job, H100, "bf16", Efficiency(optimizer_offload="always"), usable, 8)
    assert not isinstance(forced, str)
    assert forced.at(8).layout.offload  # type: ignore[union-attr]
    assert forced.at(8).seconds_per_token_per_gpu > auto.at(8).seconds_per_token_per_gpu


def test_zero3_across_nodes_pays_the_network() -> None:
    job = tr.TrainJob(ModelBlock(**QWEN7B), 6 * 7.6e9, 4 * 7.6e9, 12 * 7.6e9, 2048, 1e6, 0.25)
    curve = tr.choose_layout(job, H100, "bf16", Efficiency(train_backend="fsdp"), 72e9, 8)
    assert not isinstance(curve, str)
    assert curve.at(16).seconds_per_token_per_gpu > curve.at(8).seconds_per_token_per_gpu


def test_update_latency_floor_uses_the_layout() -> None:
    s = parse_spec(ultra())
    d = build_demand(s)
    c = cell(d.phase_parts("update")[-1], H100, "bf16", s, cond=Conditions(8))
    assert c.fits and c.layout is not None
    one_gpu = s.data.max_response_tokens * 6 * 253e9 / (989.4e12 * 0.22)
    assert c.single_seconds < one_gpu / 4  # spread over tp·cp GPUs, not one


# ---- precision as deployed ----------------------------------------------------------------------

def test_fp16_is_not_a_default_update_precision() -> None:
    spec = example_dict("grpo-7b.yaml")
    del spec["precisions"]
    d = build_demand(parse_spec(spec))
    assert gpu_precisions(d, "update", H100) == ("bf16",)
    assert gpu_precisions(d, "update", gpus()["T4"]) == ("fp16",)


def test_fp8_keeps_a_16_bit_kv_cache_unless_allowed() -> None:
    s = parse_spec(example_dict("grpo-7b.yaml"))
    d = build_demand(s)
    decode = d.phase_parts("rollout")[-1]
    bf16 = cell(decode, H100, "bf16", s)
    fp8 = cell(decode, H100, "fp8", s)
    fp8_kv = cell(decode, H100, "fp8", s, cond=Conditions(8, False, True))
    assert fp8.engine.kv_bytes_per_token == bf16.engine.kv_bytes_per_token
    assert fp8_kv.engine.kv_bytes_per_token == bf16.engine.kv_bytes_per_token / 2


def _rollout_hours(spec: dict[str, Any], q: str, gpu: str = "H100", nodes: float = 4) -> float:
    d = build_demand(parse_spec(spec))
    (r,) = [r for r in phase_rates(d, "rollout", gpus()[gpu], 8, True) if r.precision == q]
    return r.busy(nodes)


def test_fp8_gains_more_for_big_weight_bound_models_than_small_long_context() -> None:
    small = grpo(response_tokens=8000, max_response_tokens=16384, prompts_per_step=64)
    small["model"] = {"params_b": 1.78, "layers": 28, "hidden_size": 1536, "heads": 12,
                      "kv_heads": 2, "head_dim": 128}
    big = grpo(response_tokens=600, max_response_tokens=1024, prompts_per_step=64)
    big["model"] = {"params_b": 70.6, "layers": 80, "hidden_size": 8192, "heads": 64,
                    "kv_heads": 8, "head_dim": 128}
    gain_small = _rollout_hours(small, "bf16") / _rollout_hours(small, "fp8")
    gain_big = _rollout_hours(big, "bf16") / _rollout_hours(big, "fp8")
    assert 1.0 <= gain_small < gain_big < 2.0


@given(mean=st.integers(200, 4000), extra=st.integers(0, 12000))
@settings(max_examples=25, deadline=None)
def test_longer_maximum_response_is_never_faster(mean: int, extra: int) -> None:
    a = grpo(response_tokens=mean, max_response_tokens=mean + 100)
    b = grpo(response_tokens=mean, max_response_tokens=mean + 100 + extra)
    assert _rollout_hours(b, "bf16") >= _rollout_hours(a, "bf16") * (1 - 1e-9)


@given(u=st.floats(0.5, 0.85), du=st.floats(0.0, 0.1))
@settings(max_examples=25, deadline=None)
def test_more_kv_memory_is_never_slower(u: float, du: float) -> None:
    a, b = grpo(), grpo()
    a["efficiency"] = {"gpu_memory_utilization": u}
    b["efficiency"] = {"gpu_memory_utilization": min(0.95, u + du)}
    # drains are tabulated at N_GRID batch sizes: allow the interpolation's 0.01 %
    assert _rollout_hours(b, "bf16") <= _rollout_hours(a, "bf16") * (1 + 1e-4)


@pytest.mark.parametrize("phase", ["rollout", "scoring", "update"])
@pytest.mark.parametrize("nodes", [1, 2, 8])
def test_fp8_is_never_slower_than_bf16(phase: str, nodes: int) -> None:
    spec = example_dict("grpo-7b.yaml")
    spec["precisions"] = {"rollout": ["bf16", "fp8"], "scoring": ["bf16", "fp8"],
                          "update": ["bf16", "fp8"]}
    d = build_demand(parse_spec(spec))
    rates = {r.precision: r for r in phase_rates(d, phase, H100, 8, True, ANY_PRECISION)}
    assert rates["fp8"].busy(nodes) <= rates["bf16"].busy(nodes) * (1 + 1e-9)


def test_async_rollout_is_never_slower_than_sync() -> None:
    d = build_demand(parse_spec(example_dict("grpo-7b.yaml")))
    sync = phase_rates(d, "rollout", H100, 8, True)[0]
    asyn = phase_rates(d, "rollout", H100, 8, False)[0]
    for n in (1, 2, 4, 16, 64):
        assert asyn.busy(n) <= sync.busy(n) * (1 + 1e-9)


def test_more_nodes_never_slow_a_phase_down() -> None:
    d = build_demand(parse_spec(example_dict("grpo-7b.yaml")))
    for phase in ("rollout", "scoring", "update", "eval"):
        for r in phase_rates(d, phase, H100, 8, True):
            hours = [r.busy(n) for n in range(1, 65)]
            assert all(b <= a * (1 + 1e-9) for a, b in itertools.pairwise(hours))
            assert min(hours) >= r.floor_hours * (1 - 1e-9)


# ---- calibration that binds --------------------------------------------------------------------

def test_calibration_rescales_every_precision_of_that_phase_and_gpu() -> None:
    spec = example_dict("grpo-7b.yaml")
    spec["precisions"] = {"update": ["bf16", "fp16", "fp8"]}
    plain = build_demand(parse_spec(spec))
    spec["calibration"] = [{"phase": "update", "gpu": "H100", "precision": "bf16",
                            "tokens_per_second_per_gpu": 3000}]
    cal = build_demand(parse_spec(spec))
    tokens = cal.primary_tokens("update")
    rates = {r.precision: r for r in phase_rates(cal, "update", H100, 8, True, ANY_PRECISION)}
    base = {r.precision: r for r in phase_rates(plain, "update", H100, 8, True, ANY_PRECISION)}
    measured_hours = tokens / 3000 / 3600
    assert rates["bf16"].gpu_hours == pytest.approx(measured_hours, rel=1e-6)
    factor = base["bf16"].gpu_hours / rates["bf16"].gpu_hours
    for q in ("fp16", "fp8"):
        assert rates[q].calibrated
        assert rates[q].gpu_hours == pytest.approx(base[q].gpu_hours / factor, rel=1e-6)
        # no uncalibrated precision beats the measurement by more than the model's own ratio
        assert rates[q].gpu_hours >= measured_hours * base[q].gpu_hours / base["bf16"].gpu_hours \
            * (1 - 1e-9)
    assert rates["fp16"].calibration is not None
    assert rates["fp16"].calibration.precision == "bf16"


def test_decode_grid_is_per_range_and_read_only() -> None:
    """A distribution's decode grids (shared by every engine that drains it) are kept per
    (start, end, points): two ranges never share a grid, each equals what it replaces
    (linspace, survival at max(j, 1), residual survival), a second call returns the same
    arrays, and they cannot be written to (they are shared)."""
    dist = ld.max_entropy(900.0, 4096.0)
    a = dist.decode_grid(0.0, 4096.0, inf.GRID)
    b = dist.decode_grid(1.0, 2500.0, inf.GRID)
    for (j, surv, res), (start, end) in ((a, (0.0, 4096.0)), (b, (1.0, 2500.0))):
        want = np.linspace(start, end, inf.GRID)
        assert np.array_equal(j, want)
        assert np.array_equal(surv, dist.survival(np.maximum(want, 1.0)))
        assert np.array_equal(res, dist.residual_survival(want))
        assert not any(x.flags.writeable for x in (j, surv, res))
    assert a[0][-1] == 4096.0 and b[0][-1] == 2500.0
    assert all(x is y for x, y in zip(dist.decode_grid(1.0, 2500.0, inf.GRID), b, strict=True))
    assert dist.decode_grid(1.0, 2500.0, 8)[0].shape == (8,)
    assert dist.longest(512.0) == dist._longest(512.0) != dist.longest(4.0)
