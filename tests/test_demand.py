"""The demand model against hand-computed formulas (DESIGN.md §2, notes/cost-model.md §2–3).

Every expected value is written out as arithmetic from the spec's numbers and the GPU datasheet
figures (H100 SXM: 989.4 dense bf16 TFLOPS, 1978.9 fp8, 80 GB, 3.35 TB/s; L4: 24 GB; T4: 16 GB).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import pytest
from conftest import example_dict

from optimizer.core.errors import InputError
from optimizer.core.hardware import gpus, resolve_gpu
from optimizer.demand.model import Demand, Part, build_demand, cell, phase_cell
from optimizer.spec.project import ProjectSpec, parse_spec

H100 = resolve_gpu("H100")
A100 = resolve_gpu("A100-80GB")
L4 = resolve_gpu("L4")
T4 = resolve_gpu("T4")

# Llama-70B-like shape
MODEL_70B = {
    "params_b": 70.0,
    "layers": 80,
    "hidden_size": 8192,
    "heads": 64,
    "kv_heads": 8,
    "head_dim": 128,
}


def make(example: str, efficiency: dict[str, Any] | None = None, **top: Any) -> ProjectSpec:
    d = example_dict(example)
    if efficiency:
        d["efficiency"] = {**d.get("efficiency", {}), **efficiency}
    for key, value in top.items():
        if value is None:
            d.pop(key, None)
        else:
            d[key] = value
    return parse_spec(d)


def part(demand: Demand, phase: str, name: str) -> Part:
    (found,) = [p for p in demand.parts if p.phase == phase and p.name == name]
    return found


def phase_flops(demand: Demand, phase: str) -> float:
    return sum(p.flops for p in demand.phase_parts(phase))


def test_datasheet_figures_used_below() -> None:
    """The hand computations in this file use these datasheet numbers."""
    assert H100.peak_tflops["bf16"] == 989.4 and H100.peak_tflops["fp8"] == 1978.9
    assert (H100.memory_gb, H100.mem_bw_tbps) == (80, 3.35)
    assert (L4.memory_gb, T4.memory_gb) == (24, 16)
    assert "fp8" not in A100.peak_tflops and "bf16" not in T4.peak_tflops


# ------------------------------------------------------------------------------ FLOPs: SFT


def test_sft_update_is_6nd_without_attention() -> None:
    spec = make("sft-8b.yaml", {"attention_flops": False})
    demand = build_demand(spec)
    n = 8.03 * 1e9
    d = 200_000 * 2048 * 3  # examples x tokens_per_example x epochs
    assert demand.primary_tokens("update") == d
    assert phase_flops(demand, "update") == 6 * n * d


def test_sft_update_adds_attention_term() -> None:
    spec = make("sft-8b.yaml")  # attention_flops defaults to true
    demand = build_demand(spec)
    n = 8.03 * 1e9
    d = 200_000 * 2048 * 3
    layers, heads, head_dim, seq = 32, 32, 128, 2048
    expected = 6 * n * d + 12 * layers * heads * head_dim * seq * d
    assert phase_flops(demand, "update") == pytest.approx(expected, rel=1e-12)
    # the attention term is ~6 % here: 12*32*32*128*2048 / (6*8.03e9)
    assert expected / (6 * n * d) == pytest.approx(1 + 12 * 32 * 32 * 128 * 2048 / (6 * n))


def test_lora_update_is_4nd() -> None:
    d = example_dict("sft-8b.yaml")
    d["model"]["finetune"] = "lora"
    d["efficiency"] = {"attention_flops": False}
    demand = build_demand(parse_spec(d))
    assert phase_flops(demand, "update") == pytest.approx(
        4 * 8.03e9 * (200_000 * 2048 * 3), rel=1e-12
    )


def test_sft_without_epochs_defaults_to_one() -> None:
    d = example_dict("sft-8b.yaml")
    del d["data"]["epochs"]
    demand = build_demand(parse_spec(d))
    assert demand.primary_tokens("update") == 200_000 * 2048 * 1


def test_sft_eval_and_checkpoints() -> None:
    demand = build_demand(make("sft-8b.yaml"))
    # 2344 optimizer steps; eval every 500 -> 4 runs x 1000 prompts x 1 sample x 512 tokens
    assert demand.steps == 2344
    assert demand.primary_tokens("eval") == 4 * 1000 * 1 * 512
    assert demand.checkpoints == 2344 // 500
    # bf16 weights 2 B + fp32 master/m/v 12 B per parameter
    assert demand.checkpoint_gb == pytest.approx(8.03 * (2 + 12))


# ------------------------------------------------------------------------------ FLOPs: OPD


def test_opd_student_rollout_plus_update_is_8n_per_token() -> None:
    spec = make("opd-8b-from-32b.yaml", {"attention_flops": False, "recompute_old_logprobs": False})
    demand = build_demand(spec)
    n = 8.2e9
    seqs = 150 * 256 * 4  # steps x prompts x samples (oversample 1)
    tokens = seqs * (1024 + 4096)  # prompt + response tokens
    rollout = phase_flops(demand, "rollout")
    update = phase_flops(demand, "update")
    assert rollout == pytest.approx(2 * n * tokens, rel=1e-12)
    assert update == pytest.approx(6 * n * tokens, rel=1e-12)
    assert rollout + update == pytest.approx(8 * n * tokens, rel=1e-12)
    assert {p.name for p in demand.phase_parts("update")} == {"actor"}


def test_opd_teacher_scores_every_token() -> None:
    spec = make("opd-8b-from-32b.yaml", {"attention_flops": False})
    demand = build_demand(spec)
    seqs = 150 * 256 * 4
    teacher = part(demand, "scoring", "teacher")
    assert teacher.tokens == seqs * (1024 + 4096)
    assert teacher.flops == pytest.approx(2 * 32.8e9 * (1024 + 4096) * seqs, rel=1e-12)
    # reference_model: false in the example -> the teacher is the only scorer
    assert [p.name for p in demand.phase_parts("scoring")] == ["teacher"]


def test_opd_teacher_attention_term_uses_teacher_shape() -> None:
    demand = build_demand(make("opd-8b-from-32b.yaml"))
    teacher = part(demand, "scoring", "teacher")
    seq = 1024 + 4096  # mean sequence: prompt + mean response (max_response sizes memory)
    assert teacher.flops_per_token == pytest.approx(2 * 32.8e9 + 4 * 64 * 64 * 128 * seq)


def test_old_logprob_recompute_adds_a_2n_forward() -> None:
    on = build_demand(make("opd-8b-from-32b.yaml", {"attention_flops": False}))
    off = build_demand(
        make("opd-8b-from-32b.yaml", {"attention_flops": False, "recompute_old_logprobs": False})
    )
    seqs = 150 * 256 * 4
    extra = phase_flops(on, "update") - phase_flops(off, "update")
    assert extra == pytest.approx(2 * 8.2e9 * seqs * (1024 + 4096), rel=1e-9)


# ------------------------------------------------------------------------------ FLOPs: RL


def test_grpo_reference_scoring_is_2n() -> None:
    demand = build_demand(make("grpo-7b.yaml", {"attention_flops": False}))
    seqs = 300 * 256 * 8
    ref = part(demand, "scoring", "reference")
    assert ref.tokens == seqs * (512 + 2048)
    assert ref.flops == pytest.approx(2 * 7.6e9 * seqs * (512 + 2048), rel=1e-12)


def test_grpo_rollout_tokens() -> None:
    demand = build_demand(make("grpo-7b.yaml"))
    seqs = 300 * 256 * 8
    assert part(demand, "rollout", "prefill").tokens == seqs * 512
    assert part(demand, "rollout", "decode").tokens == seqs * 2048
    assert demand.primary_tokens("rollout") == seqs * 2048
    assert part(demand, "rollout", "decode").context_tokens == 512 + 2048 / 2


def test_grpo_eval_and_checkpoints() -> None:
    demand = build_demand(make("grpo-7b.yaml"))
    runs = 300 // 25
    assert demand.primary_tokens("eval") == runs * 500 * 4 * 2048
    assert part(demand, "eval", "prefill").tokens == runs * 500 * 4 * 512  # data.prompt_tokens
    assert demand.checkpoints == 300 // 25
    assert demand.checkpoint_gb == pytest.approx(7.6 * 14)


def test_reference_dropped_when_disabled() -> None:
    demand = build_demand(make("grpo-7b.yaml", reference_model=False))
    assert "scoring" not in demand.phases


def test_reward_model_scores_every_generated_sample() -> None:
    rm = {"params_b": 1.5, "layers": 28, "hidden_size": 1536, "kv_heads": 2, "head_dim": 128}
    demand = build_demand(
        make(
            "grpo-7b.yaml",
            {"attention_flops": False},
            reward_model=rm,
            algorithm="dapo",
            reference_model=None,
        )
    )
    generated = 300 * 256 * 8 * 2  # DAPO oversample 2
    reward = part(demand, "scoring", "reward")
    assert reward.tokens == generated * (512 + 2048)
    assert reward.flops == pytest.approx(2 * 1.5e9 * generated * (512 + 2048), rel=1e-12)


def test_ppo_adds_critic_parts() -> None:
    grpo = build_demand(make("grpo-7b.yaml", {"attention_flops": False}))
    ppo = build_demand(make("grpo-7b.yaml", {"attention_flops": False}, algorithm="ppo"))
    assert {p.name for p in grpo.phase_parts("update")} == {"old_logprob", "actor"}
    assert {p.name for p in ppo.phase_parts("update")} == {
        "old_logprob",
        "actor",
        "critic_values",
        "critic",
    }
    seqs = 300 * 256 * 8
    tokens = seqs * (512 + 2048)
    assert part(ppo, "update", "critic").flops == pytest.approx(6 * 7.6e9 * tokens, rel=1e-12)
    assert part(ppo, "update", "critic_values").flops == pytest.approx(
        2 * 7.6e9 * tokens, rel=1e-12
    )
    # critic training + value forward = 8N per token on top of GRPO's update
    extra = phase_flops(ppo, "update") - phase_flops(grpo, "update")
    assert extra == pytest.approx(8 * 7.6e9 * tokens, rel=1e-9)
    # the critic's optimizer state is checkpointed too
    assert ppo.checkpoint_gb == pytest.approx(2 * 7.6 * 14)


def test_ppo_explicit_critic_shape() -> None:
    critic = {"params_b": 1.0, "layers": 16, "hidden_size": 2048, "kv_heads": 8, "head_dim": 128}
    demand = build_demand(
        make("grpo-7b.yaml", {"attention_flops": False}, algorithm="ppo", critic=critic)
    )
    tokens = 300 * 256 * 8 * (512 + 2048)
    assert part(demand, "update", "critic").flops == pytest.approx(6 * 1.0e9 * tokens, rel=1e-12)


def test_update_epochs_multiply_training_tokens() -> None:
    d = example_dict("grpo-7b.yaml")
    d["data"]["update_epochs"] = 3
    demand = build_demand(parse_spec(d))
    assert part(demand, "update", "actor").tokens == 300 * 256 * 8 * (512 + 2048) * 3
    assert part(demand, "update", "old_logprob").tokens == 300 * 256 * 8 * (512 + 2048)


def test_dapo_default_oversampling_doubles_rollout() -> None:
    grpo = build_demand(make("grpo-7b.yaml"))
    dapo = build_demand(make("grpo-7b.yaml", algorithm="dapo", reference_model=None))
    assert dapo.primary_tokens("rollout") == 2 * grpo.primary_tokens("rollout")
    assert part(dapo, "rollout", "prefill").tokens == 2 * part(grpo, "rollout", "prefill").tokens
    # trained tokens are not oversampled
    assert dapo.primary_tokens("update") == grpo.primary_tokens("update")
    assert "scoring" not in dapo.phases  # DAPO drops the KL reference by default


def test_explicit_oversample_factor() -> None:
    d = example_dict("grpo-7b.yaml")
    d["data"]["oversample_factor"] = 3
    demand = build_demand(parse_spec(d))
    assert demand.primary_tokens("rollout") == 300 * 256 * 8 * 3 * 2048


def test_moe_uses_active_params_for_flops() -> None:
    d = example_dict("grpo-7b.yaml")
    d["model"]["params_b"] = 30.0
    d["model"]["active_params_b"] = 3.0
    d["efficiency"] = {"attention_flops": False}
    demand = build_demand(parse_spec(d))
    tokens = 300 * 256 * 8 * (512 + 2048)
    assert part(demand, "update", "actor").flops == pytest.approx(6 * 3.0e9 * tokens, rel=1e-12)
    # ... but total params for memory: 30B bf16 weights = 60 GB on one H100 (72 GB usable)
    c = cell(part(demand, "scoring", "reference"), H100, "bf16", demand.spec)
    assert c.memory_gb_per_gpu == pytest.approx(30 * 2 / 2)  # 60 GB over a 2-GPU replica
    assert c.replica_gpus == 2  # 60 GB > 0.8 x 72 GB: needs KV headroom


# ------------------------------------------------------------------------------ throughput


def test_decode_small_batch_is_memory_bandwidth_bound_roofline() -> None:
    spec = make("grpo-7b.yaml", {"max_batch_per_replica": 1})
    demand = build_demand(spec)
    c = cell(part(demand, "rollout", "decode"), H100, "bf16", spec)
    assert c.fits and c.bound == "memory-bandwidth"
    assert (c.batch, c.replica_gpus) == (1, 1)
    weights = 7.6e9 * 2  # bf16 bytes
    kv = 2 * 28 * 4 * 128 * 2  # 2 (K,V) x layers x kv_heads x head_dim x bf16 bytes
    context = 512 + 2048 / 2  # prompt + half the response, mean resident context
    b, g = 1, 1
    t_step = (weights + b * context * kv) / (g * 3.35e12 * 0.6)  # HBM TB/s x default MBU
    assert c.tokens_per_second_per_gpu == pytest.approx(b / t_step / g, rel=1e-9)
    # ~ 130 tokens/s for a 7.6B bf16 model at batch 1 on one H100
    assert 120 < c.tokens_per_second_per_gpu < 140


def test_decode_batch_capped_by_hbm() -> None:
    spec = make("grpo-7b.yaml")
    c = cell(part(build_demand(spec), "rollout", "decode"), L4, "bf16", spec)
    kv = 2 * 28 * 4 * 128 * 2
    free = 24e9 * 0.9 - 7.6e9 * 2  # usable HBM (util 0.9) minus weights
    assert c.batch == min(256, int(free // ((512 + 1024) * kv)))
    assert c.batch < 256


@pytest.mark.parametrize("vary", ["response_tokens", "prompt_tokens"])
def test_decode_rate_falls_as_context_grows(vary: str) -> None:
    rates = []
    for length in (256, 1024, 4096, 16384):
        d = example_dict("grpo-7b.yaml")
        d["data"][vary] = length
        d["data"]["max_response_tokens"] = max(d["data"]["response_tokens"], 8192)
        spec = parse_spec(d)
        c = cell(part(build_demand(spec), "rollout", "decode"), H100, "bf16", spec)
        assert c.fits
        rates.append(c.tokens_per_second_per_gpu)
    assert all(a > b for a, b in itertools.pairwise(rates)), rates


def test_fp8_speeds_up_decode_and_prefill_on_h100() -> None:
    spec = make("grpo-7b.yaml")
    demand = build_demand(spec)
    decode, prefill = part(demand, "rollout", "decode"), part(demand, "rollout", "prefill")
    d16, d8 = cell(decode, H100, "bf16", spec), cell(decode, H100, "fp8", spec)
    p16, p8 = cell(prefill, H100, "bf16", spec), cell(prefill, H100, "fp8", spec)
    assert d8.tokens_per_second_per_gpu > d16.tokens_per_second_per_gpu
    # prefill is compute-bound: the ratio is the peak ratio 1978.9 / 989.4
    assert p8.tokens_per_second_per_gpu / p16.tokens_per_second_per_gpu == pytest.approx(
        1978.9 / 989.4
    )
    fast = phase_cell(demand, "rollout", H100, "fp8")
    slow = phase_cell(demand, "rollout", H100, "bf16")
    assert fast.gpu_hours < slow.gpu_hours


def test_fp8_unavailable_on_a100() -> None:
    spec = make("grpo-7b.yaml")
    demand = build_demand(spec)
    c = cell(part(demand, "rollout", "decode"), A100, "fp8", spec)
    assert not c.fits and "fp8" in c.reason
    pc = phase_cell(demand, "rollout", A100, "fp8")
    assert not pc.fits and "fp8" in pc.reason and math.isinf(pc.gpu_hours)


def test_int8_is_not_a_training_precision() -> None:
    spec = make("grpo-7b.yaml")
    c = cell(part(build_demand(spec), "update", "actor"), H100, "int8", spec)
    assert not c.fits and "int8" in c.reason


def test_prefill_rate_is_compute_roofline() -> None:
    spec = make("grpo-7b.yaml", {"attention_flops": False})
    c = cell(part(build_demand(spec), "rollout", "prefill"), H100, "bf16", spec)
    assert c.bound == "compute"
    assert c.tokens_per_second_per_gpu == pytest.approx(989.4e12 * 0.5 / (2 * 7.6e9))


def test_sft_training_rate_and_memory() -> None:
    spec = make("sft-8b.yaml", {"attention_flops": False})
    c = cell(part(build_demand(spec), "update", "actor"), H100, "bf16", spec)
    n = 8.03e9
    # MFU counts model FLOPs (6N per token; the recompute forward is not counted again)
    assert c.tokens_per_second_per_gpu == pytest.approx(989.4e12 * 0.35 / (6 * n))
    state = n * 16  # Adam mixed precision bytes/param
    act = 2 * 2048 * 1 * 4096 * 32  # full recompute: 2·s·b·h·L
    usable = 80e9 * 0.9
    assert c.replica_gpus == math.ceil(state / (usable - act)) == 2
    assert c.memory_gb_per_gpu == pytest.approx((state / 2 + act) / 1e9)


def test_rl_training_uses_rl_mfu() -> None:
    spec = make("grpo-7b.yaml", {"attention_flops": False, "rl_train_mfu": 0.2})
    c = cell(part(build_demand(spec), "update", "actor"), H100, "bf16", spec)
    assert c.tokens_per_second_per_gpu == pytest.approx(989.4e12 * 0.2 / (6 * 7.6e9))


def test_70b_decode_does_not_fit_one_l4() -> None:
    d = example_dict("grpo-7b.yaml")
    d["model"] = dict(MODEL_70B)
    spec = parse_spec(d)
    demand = build_demand(spec)
    c = cell(part(demand, "rollout", "decode"), L4, "bf16", spec)
    assert c.fits
    # 140 GB of bf16 weights over 24 GB x 0.9 usable x 0.8 (KV headroom) = 8.1 -> 16 GPUs
    assert c.replica_gpus == 16 == 2 ** math.ceil(math.log2(70e9 * 2 / (24e9 * 0.9 * 0.8)))
    assert c.replica_gpus > 1
    forced = cell(part(demand, "rollout", "decode"), L4, "bf16", spec, replica_gpus=1)
    assert not forced.fits
    forced_fwd = cell(part(demand, "scoring", "reference"), L4, "bf16", spec, replica_gpus=1)
    assert not forced_fwd.fits and "16" in forced_fwd.reason
    pc = phase_cell(demand, "rollout", L4, "bf16")
    assert pc.fits and pc.replica_gpus == 16


def test_large_model_training_on_t4_reports_gpus_needed() -> None:
    d = example_dict("sft-8b.yaml")
    d["model"] = dict(MODEL_70B)
    spec = parse_spec(d)
    demand = build_demand(spec)
    actor = part(demand, "update", "actor")
    assert not cell(actor, T4, "bf16", spec).fits  # T4 has no bf16
    c = cell(actor, T4, "fp16", spec)
    state = 70e9 * 16
    act = 2 * 2048 * 1 * 8192 * 80  # full recompute, 16-bit activations
    usable = 16e9 * 0.9
    assert c.fits and c.replica_gpus == math.ceil(state / (usable - act)) == 96
    too_few = cell(actor, T4, "fp16", spec, replica_gpus=8)
    assert not too_few.fits and "96" in too_few.reason
    assert cell(actor, T4, "fp16", spec, replica_gpus=128).fits


def test_activations_that_exceed_hbm_do_not_fit() -> None:
    d = example_dict("sft-8b.yaml")
    d["data"]["tokens_per_example"] = 1_000_000
    d["efficiency"] = {"activation_recompute": "none"}
    spec = parse_spec(d)
    c = cell(part(build_demand(spec), "update", "actor"), H100, "bf16", spec)
    assert not c.fits and "activations" in c.reason


def test_calibration_replaces_phase_throughput() -> None:
    d = example_dict("grpo-7b.yaml")
    d["calibration"] = [
        {"phase": "rollout", "gpu": "h100", "precision": "bf16", "tokens_per_second_per_gpu": 5000}
    ]
    spec = parse_spec(d)
    demand = build_demand(spec)
    pc = phase_cell(demand, "rollout", H100, "bf16")
    generated = 300 * 256 * 8 * 2048
    assert pc.calibrated
    assert pc.gpu_hours == pytest.approx(generated / 5000 / 3600)
    assert pc.decode_gpu_hours == pc.gpu_hours
    # other precisions / GPUs / phases keep the model
    assert not phase_cell(demand, "rollout", H100, "fp8").calibrated
    assert not phase_cell(demand, "rollout", L4, "bf16").calibrated
    assert not phase_cell(demand, "update", H100, "bf16").calibrated


def test_calibrated_update_counts_trained_tokens() -> None:
    d = example_dict("sft-8b.yaml")
    d["calibration"] = [
        {"phase": "update", "gpu": "H100", "precision": "bf16", "tokens_per_second_per_gpu": 4000}
    ]
    pc = phase_cell(build_demand(parse_spec(d)), "update", H100, "bf16")
    assert pc.calibrated
    assert pc.gpu_hours == pytest.approx(200_000 * 2048 * 3 / 4000 / 3600)
    assert pc.decode_gpu_hours == 0


def test_phase_gpu_hours_sum_parts() -> None:
    spec = make("grpo-7b.yaml")
    demand = build_demand(spec)
    pc = phase_cell(demand, "rollout", H100, "bf16")
    by_part = dict(pc.cells)
    expected = sum(
        p.tokens / by_part[p.name].tokens_per_second_per_gpu / 3600
        for p in demand.phase_parts("rollout")
    )
    assert pc.gpu_hours == pytest.approx(expected)
    assert pc.decode_gpu_hours == pytest.approx(
        part(demand, "rollout", "decode").tokens
        / by_part["decode"].tokens_per_second_per_gpu
        / 3600
    )


@pytest.mark.parametrize("gpu_name", sorted(gpus()))
def test_every_gpu_gives_finite_or_explained_cells(gpu_name: str) -> None:
    spec = make("grpo-7b.yaml")
    demand = build_demand(spec)
    gpu = gpus()[gpu_name]
    for phase in demand.phases:
        if phase == "checkpoint":
            continue
        for precision in ("fp32", "bf16", "fp16", "fp8", "int8"):
            pc = phase_cell(demand, phase, gpu, precision)
            if pc.fits:
                assert 0 < pc.gpu_hours < math.inf and pc.replica_gpus >= 1
            else:
                assert pc.reason


def test_absurd_model_size_is_reported_not_hung() -> None:
    # 1e300 B params: bf16 weight bytes overflow to inf; replica sizing must still terminate
    d = example_dict("grpo-7b.yaml")
    d["model"]["params_b"] = 1e300
    with pytest.raises(InputError, match=r"model\.params_b = 1e\+300"):
        parse_spec(d)  # the loader refuses it (one line, exit 2) ...
    ok = parse_spec(example_dict("grpo-7b.yaml"))  # ... and the model terminates anyway
    spec = ok.model_copy(update={"model": ok.model.model_copy(update={"params_b": 1e300})})
    demand = build_demand(spec)
    for name in ("prefill", "decode"):
        c = cell(part(demand, "rollout", name), H100, "bf16", spec)
        assert not c.fits and "64 GPUs" in c.reason
    forced = cell(part(demand, "rollout", "prefill"), H100, "bf16", spec, replica_gpus=8)
    assert not forced.fits and "more than 64" in forced.reason
    assert not phase_cell(demand, "rollout", H100, "bf16").fits
