"""The demand model against hand-computed formulas (docs/demand-model.md §3–§5).

Every expected value is written out as arithmetic from the spec's numbers, the efficiency
defaults and the GPU datasheet figures (H100 SXM: 989.4 dense bf16 TFLOPS, 1978.9 fp8, 80 GB,
3.35 TB/s, NVLink 450 GB/s per direction, 50 GB/s scale-out per GPU; L4: 24 GB, 0.3 TB/s;
T4: 16 GB, no bf16). The response-length distributions, the drain of a synchronous step and the
properties of the layouts and precisions are in tests/test_demand_fidelity.py.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest
from conftest import example_dict

from ptplan.core.errors import InputError
from ptplan.core.hardware import gpus, resolve_gpu
from ptplan.demand import inference as inf
from ptplan.demand import training as tr
from ptplan.demand.cells import Conditions, cell, phase_cell, train_job
from ptplan.demand.decode import decode_engine
from ptplan.demand.model import (
    Demand,
    Part,
    build_demand,
    checkpoint_gb,
    lora_params,
)
from ptplan.spec.project import Efficiency, ModelBlock, ProjectSpec, parse_spec

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
    """The hand computations in this file use these datasheet numbers and defaults."""
    assert H100.peak_tflops["bf16"] == 989.4 and H100.peak_tflops["fp8"] == 1978.9
    assert (H100.memory_gb, H100.mem_bw_tbps) == (80, 3.35)
    assert (H100.scaleup_gb_per_s, H100.scaleout_gb_per_s) == (450, 50)
    assert (L4.memory_gb, L4.mem_bw_tbps, T4.memory_gb) == (24, 0.3, 16)
    eff = Efficiency()
    assert (eff.train_mfu, eff.rl_train_mfu, eff.prefill_efficiency) == (0.35, 0.22, 0.5)
    assert (eff.decode_mbu, eff.decode_compute_efficiency, eff.decode_step_overhead_ms) == (
        0.6, 0.5, 2.0)
    assert (eff.gemm_time_share, eff.pcie_gb_per_s, eff.cpu_adam_b_params_per_s) == (
        0.55, 32, 0.4)
    assert (eff.gpu_memory_utilization, eff.colocated_rollout_memory_fraction) == (0.9, 0.5)
    assert "fp8" not in A100.peak_tflops and "bf16" not in T4.peak_tflops


# ------------------------------------------------------------------------------ FLOPs: SFT


def test_sft_update_is_6nd_without_attention() -> None:
    spec = make("sft-8b.yaml", {"attention_flops": False})
    demand = build_demand(spec)
    n = 8.0303 * 1e9
    d = 200_000 * 2048 * 3  # examples x tokens_per_example x epochs
    assert demand.primary_tokens("update") == d
    assert phase_flops(demand, "update") == 6 * n * d


def test_sft_update_adds_attention_term() -> None:
    spec = make("sft-8b.yaml")  # attention_flops defaults to true
    demand = build_demand(spec)
    n = 8.0303 * 1e9
    d = 200_000 * 2048 * 3
    layers, heads, head_dim, seq = 32, 32, 128, 2048
    expected = 6 * n * d + 12 * layers * heads * head_dim * seq * d
    assert phase_flops(demand, "update") == pytest.approx(expected, rel=1e-12)
    # the attention term is ~6 % here: 12*32*32*128*2048 / (6*8.0303e9)
    assert expected / (6 * n * d) == pytest.approx(1 + 12 * 32 * 32 * 128 * 2048 / (6 * n))


def test_lora_update_is_4nd() -> None:
    d = example_dict("sft-8b.yaml")
    d["model"]["finetune"] = "lora"
    d["efficiency"] = {"attention_flops": False}
    demand = build_demand(parse_spec(d))
    assert phase_flops(demand, "update") == pytest.approx(
        4 * 8.0303e9 * (200_000 * 2048 * 3), rel=1e-12
    )


def test_sft_without_epochs_defaults_to_one() -> None:
    d = example_dict("sft-8b.yaml")
    del d["data"]["epochs"]
    demand = build_demand(parse_spec(d))
    assert demand.primary_tokens("update") == 200_000 * 2048 * 1


def test_rl_only_efficiency_defaults_are_not_listed_for_sft() -> None:
    """An SFT spec's defaults name the efficiency fields its model uses: sequence packing and
    prefix caching are RL/OPD settings (SFT micro-batches hold whole examples)."""
    from ptplan.spec.defaults import applied_defaults
    sft = " ".join(applied_defaults(make("sft-8b.yaml")))
    rl = " ".join(applied_defaults(make("grpo-7b.yaml")))
    for field in ("sequence_packing", "prefix_caching", "rl_train_mfu",
                  "colocated_refit_gb_per_s"):
        assert f"efficiency.{field}" not in sft and f"efficiency.{field}" in rl
    for field in ("zero3_overlap_comm", "param_offload", "train_mfu"):
        assert f"efficiency.{field}" in sft


def test_sft_without_eval_lists_no_generation_defaults() -> None:
    """An SFT job generates only for its eval: without an eval block none of the decode fields
    is among its defaults (the mutation run of 2026-12-07 night found no test of that branch);
    with one (the example's) each is."""
    from ptplan.spec.defaults import applied_defaults
    decode = ("decode_step_overhead_ms", "cuda_graphs", "eager_launch_us_per_layer",
              "tp_allreduce_us_intra_node", "tp_allreduce_us_inter_node", "decode_mbu",
              "decode_compute_efficiency", "max_batch_per_replica", "generation_batching",
              "rollout_tp")
    bare = [line.split(" = ")[0] for line in applied_defaults(make("sft-8b.yaml", eval=None))]
    with_eval = [line.split(" = ")[0] for line in applied_defaults(make("sft-8b.yaml"))]
    for field in decode:
        assert f"efficiency.{field}" not in bare, field
        assert f"efficiency.{field}" in with_eval, field
    assert "efficiency.train_mfu" in bare
    for field in ("rl_train_mfu", "prefix_caching", "sequence_packing"):  # RL-only either way
        assert f"efficiency.{field}" not in bare, field


def test_sft_eval_and_checkpoints() -> None:
    demand = build_demand(make("sft-8b.yaml"))
    # 2344 optimizer steps; eval every 500 -> 4 runs x 1000 prompts x 1 sample x 512 tokens
    assert demand.steps == 2344
    assert demand.primary_tokens("eval") == 4 * 1000 * 1 * 512
    assert demand.checkpoints == 2344 // 500
    # bf16 weights 2 B + fp32 master/m/v 12 B per parameter
    assert demand.checkpoint_gb == pytest.approx(8.0303 * (2 + 12))


# ------------------------------------------------------------------------------ FLOPs: OPD


def test_opd_student_rollout_plus_update_is_8n_per_token() -> None:
    # without prefix caching every sample prefills its own prompt
    spec = make("opd-8b-from-32b.yaml", {"attention_flops": False, "recompute_old_logprobs": False,
                                         "prefix_caching": False})
    demand = build_demand(spec)
    n = 8.1907e9
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
    assert teacher.flops == pytest.approx(2 * 32.7621e9 * (1024 + 4096) * seqs, rel=1e-12)
    # reference_model: false in the example -> the teacher is the only scorer
    assert [p.name for p in demand.phase_parts("scoring")] == ["teacher"]


def test_opd_teacher_attention_term_uses_teacher_shape() -> None:
    demand = build_demand(make("opd-8b-from-32b.yaml"))
    teacher = part(demand, "scoring", "teacher")
    seq = 1024 + 4096  # mean sequence: prompt + mean response (max_response sizes memory)
    assert teacher.flops_per_token == pytest.approx(2 * 32.7621e9 + 4 * 64 * 64 * 128 * seq)


def test_old_logprob_recompute_adds_a_2n_forward() -> None:
    on = build_demand(make("opd-8b-from-32b.yaml", {"attention_flops": False}))
    off = build_demand(
        make("opd-8b-from-32b.yaml", {"attention_flops": False, "recompute_old_logprobs": False})
    )
    seqs = 150 * 256 * 4
    extra = phase_flops(on, "update") - phase_flops(off, "update")
    assert extra == pytest.approx(2 * 8.1907e9 * seqs * (1024 + 4096), rel=1e-9)


# ------------------------------------------------------------------------------ FLOPs: RL


def test_grpo_reference_scoring_is_2n() -> None:
    demand = build_demand(make("grpo-7b.yaml", {"attention_flops": False}))
    seqs = 300 * 256 * 8
    ref = part(demand, "scoring", "reference")
    assert ref.tokens == seqs * (512 + 2048)
    assert ref.flops == pytest.approx(2 * 7.6156e9 * seqs * (512 + 2048), rel=1e-12)


def test_grpo_rollout_tokens() -> None:
    demand = build_demand(make("grpo-7b.yaml", {"prefix_caching": False}))
    seqs = 300 * 256 * 8
    assert part(demand, "rollout", "prefill").tokens == seqs * 512
    decode = part(demand, "rollout", "decode")
    assert decode.tokens == seqs * 2048
    assert demand.primary_tokens("rollout") == seqs * 2048
    # one synchronous run per step of prompts x samples sequences, each after its prompt
    assert (decode.runs, decode.run_sequences, decode.prompt_tokens) == (300, 256 * 8, 512)
    assert decode.longest == 512 + 8192  # prompt + max_response_tokens (memory, floors)
    assert decode.lengths is not None
    assert decode.lengths.mean == pytest.approx(2048) and decode.lengths.cap == 8192
    # resident context: prompt + the length-biased mean age E[L²]/2E[L], above half the mean
    age = decode.lengths.second_moment / (2 * 2048)
    assert decode.context_tokens == pytest.approx(512 + age)
    assert age > 2048 / 2


def test_grpo_prefill_tokens_with_prefix_caching() -> None:
    demand = build_demand(make("grpo-7b.yaml"))  # prefix_caching defaults to true
    # 512 = 32 whole 16-token blocks: each further sample re-prefills (512 mod 16) + 16 tokens
    per_step = 256 * (1 + 7 * 16 / 512)
    assert part(demand, "rollout", "prefill").tokens == pytest.approx(300 * per_step * 512)
    assert part(demand, "rollout", "prefill").flops == pytest.approx(
        300 * per_step * 512 * (2 * 7.6156e9 + 4 * 28 * 28 * 128 * 512))


def test_grpo_eval_and_checkpoints() -> None:
    demand = build_demand(make("grpo-7b.yaml"))
    runs = 300 // 25
    assert demand.primary_tokens("eval") == runs * 500 * 4 * 2048
    assert part(demand, "eval", "prefill").tokens == runs * 500 * 4 * 512  # data.prompt_tokens
    assert demand.checkpoints == 300 // 25
    assert demand.checkpoint_gb == pytest.approx(7.6156 * 14)
    # each checkpoint stalls the update for its size over the write bandwidth (2 GB/s)
    assert demand.checkpoint_stall_hours == pytest.approx(12 * 7.6156 * 14 / 2.0 / 3600)
    assert demand.weight_sync_gb_per_step == pytest.approx(7.6156 * 2)  # bf16 weights


def test_checkpoint_without_optimizer_state_and_8bit_adam() -> None:
    d = example_dict("grpo-7b.yaml")
    d["checkpoints"]["with_optimizer"] = False
    assert checkpoint_gb(parse_spec(d)) == pytest.approx(7.6156 * 2)  # bf16 weights only
    d["checkpoints"]["with_optimizer"] = True
    d["efficiency"] = {"adam_bytes_per_param": 10}  # 8-bit Adam: 2 + (10 − 4) B/param
    assert checkpoint_gb(parse_spec(d)) == pytest.approx(7.6156 * 8)


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
    assert part(ppo, "update", "critic").flops == pytest.approx(6 * 7.6156e9 * tokens, rel=1e-12)
    assert part(ppo, "update", "critic_values").flops == pytest.approx(
        2 * 7.6156e9 * tokens, rel=1e-12
    )
    # critic training + value forward = 8N per token on top of GRPO's update
    extra = phase_flops(ppo, "update") - phase_flops(grpo, "update")
    assert extra == pytest.approx(8 * 7.6156e9 * tokens, rel=1e-9)
    # the critic's optimizer state is checkpointed too
    assert ppo.checkpoint_gb == pytest.approx(2 * 7.6156 * 14)


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


# ------------------------------------------------------------------------------ LoRA state


def test_lora_training_state_and_checkpoint_hold_the_adapter() -> None:
    d = example_dict("sft-8b.yaml")
    d["model"]["finetune"] = "lora"
    d["model"]["lora_rank"] = 32
    spec = parse_spec(d)
    demand = build_demand(spec)
    adapter = 20 * 32 * 4096 * 32  # 20·r·h·L
    assert lora_params(spec.model, 32) == adapter
    job = train_job(part(demand, "update", "actor"), spec)
    # frozen bf16 base (2 B) + adapter weights and gradients (4 B); Adam state for the adapter
    assert job.state_weights_grads == pytest.approx(8.0303e9 * 2 + adapter * 4)
    assert job.state_optimizer == pytest.approx(adapter * 12)
    assert job.flops_per_token == pytest.approx(4 * 8.0303e9 + 12 * 32 * 32 * 128 * 2048)
    # the checkpoint saves the adapter only: 2 B weights + 12 B optimizer state per parameter
    assert demand.checkpoint_gb == pytest.approx(adapter * 14 / 1e9)


# ------------------------------------------------------------------------------ inference engine

KV_7B = 2 * 28 * 4 * 128 * 2
"""K and V x layers x kv_heads x head_dim x 2 B (bf16): KV bytes per token of the 7.6156B policy."""


def histogram_spec(**efficiency: Any) -> ProjectSpec:
    """GRPO-7B whose responses are 1,000 or 3,000 tokens, half each: mean 2,000,
    E[L²] = (1000² + 3000²) / 2 = 5e6, mean age of a sequence in flight E[L²]/2E[L] = 1,250."""
    d = example_dict("grpo-7b.yaml")
    d["data"].update(response_tokens=2000,
                     response_length={"histogram": [[1000, 1], [3000, 1]]})
    d["efficiency"] = efficiency
    return parse_spec(d)


def test_kv_bytes_per_token_and_capacity() -> None:
    spec = make("grpo-7b.yaml")
    decode = part(build_demand(spec), "rollout", "decode")
    e = cell(decode, H100, "bf16", spec).engine
    assert e.kv_bytes_per_token == KV_7B == 57344
    # usable HBM (80 GB x 0.9) minus the bf16 weights, in tokens
    assert e.kv_capacity_tokens == pytest.approx((80e9 * 0.9 - 7.6156e9 * 2) / KV_7B)
    # an fp32 model keeps an fp32 cache (4 B per element) beside fp32 weights
    e32 = cell(decode, H100, "fp32", spec).engine
    assert e32.kv_bytes_per_token == 2 * KV_7B
    assert e32.kv_capacity_tokens == pytest.approx((80e9 * 0.9 - 7.6156e9 * 4) / (2 * KV_7B))
    # colocated with training, the engine gets colocated_rollout_memory_fraction of the HBM
    col = cell(decode, H100, "bf16", spec, cond=Conditions(8, colocated=True)).engine
    assert col.kv_capacity_tokens == pytest.approx((80e9 * 0.5 - 7.6156e9 * 2) / KV_7B)


def test_tensor_parallel_ranks_beyond_the_kv_heads_keep_copies() -> None:
    """vLLM gives each rank max(1, kv_heads // tp) KV heads, and MLA's latent whole to every
    rank: the replica stores (and reads) that many copies of each token's KV."""
    gqa = ModelBlock(params_b=70, layers=80, hidden_size=8192, heads=64, kv_heads=8,
                     head_dim=128)
    assert [inf.kv_replication(gqa, tp) for tp in (1, 2, 8, 16, 32)] == [1, 1, 1, 2, 4]
    mla = ModelBlock(params_b=671, active_params_b=37, layers=61, hidden_size=7168, heads=128,
                     kv_heads=128, head_dim=128, experts_per_token=8, kv_latent_dim=576)
    assert [inf.kv_replication(mla, tp) for tp in (1, 2, 8, 32)] == [1, 2, 8, 32]
    # the engine's capacity and per-iteration reads use the replicated bytes
    spec = parse_spec({**example_dict("grpo-7b.yaml"),
                       "model": {"params_b": 70, "layers": 80, "hidden_size": 8192,
                                 "heads": 64, "kv_heads": 8, "head_dim": 128}})
    decode = part(build_demand(spec), "rollout", "decode")
    per_token = inf.kv_bytes_per_token(spec.model, 2.0, decode.prompt_tokens
                                       + decode.lengths.mean_age)
    for g in (8, 16):
        e = decode_engine(decode, H100, "bf16", spec, g, Conditions(8))
        assert not isinstance(e, str)
        assert e.kv_bytes_per_token == pytest.approx(per_token * max(1, g / 8))
        assert e.kv_capacity_tokens == pytest.approx(
            (g * 80e9 * 0.9 - 70e9 * 2) / (per_token * max(1, g / 8)))


def test_decode_at_batch_one_reads_the_weights_and_kv_once_per_iteration() -> None:
    spec = histogram_spec(max_batch_per_replica=1)
    c = cell(part(build_demand(spec), "rollout", "decode"), H100, "bf16", spec)
    assert c.fits and c.bound == "memory-bandwidth"
    assert (c.batch, c.replica_gpus) == (1, 1)
    context = 512 + 1250  # prompt + mean age
    t_iter = (7.6156e9 * 2 + context * KV_7B) / (3.35e12 * 0.6) + 0.002  # HBM x MBU, + overhead
    assert c.tokens_per_second_per_gpu == pytest.approx(1 / t_iter, rel=1e-9)
    assert c.memory_gb_per_gpu == pytest.approx((7.6156e9 * 2 + context * KV_7B) / 1e9)
    # ~ 100 tokens/s for a 7.6156B bf16 model at batch 1 on one H100
    assert 95 < c.tokens_per_second_per_gpu < 110


def test_large_batch_decode_is_compute_bound_with_attention_at_16_bit() -> None:
    spec = make("grpo-7b.yaml")
    e = cell(part(build_demand(spec), "rollout", "decode"), H100, "fp8", spec).engine
    b, ctx = 4096, 100
    dense = b * 2 * 7.6156e9 / (1978.9e12 * 0.5)  # GEMMs at the fp8 peak x compute efficiency
    attn = b * 4 * 28 * 28 * 128 * ctx / (989.4e12 * 0.5)  # attention at the bf16 peak
    t_mem = (7.6156e9 * 1 + b * ctx * KV_7B) / (3.35e12 * 0.6)  # fp8 weights, 16-bit KV cache
    assert dense + attn > t_mem
    assert float(e.iteration_seconds(b, ctx)) == pytest.approx(dense + attn + 0.002, rel=1e-9)
    assert e.bound(b, ctx) == "compute" and e.bound(1, ctx) == "memory-bandwidth"


def test_decode_batch_is_capped_by_the_peak_kv_of_a_fresh_batch() -> None:
    """Every response runs to the 2,048-token cap: a batch that starts together peaks at
    b x (512 + 2,048) tokens of KV, which must fit beside the weights on one L4."""
    d = example_dict("grpo-7b.yaml")
    d["data"]["max_response_tokens"] = 2048
    spec = parse_spec(d)
    c = cell(part(build_demand(spec), "rollout", "decode"), L4, "bf16", spec)
    capacity = (24e9 * 0.9 - 7.6156e9 * 2) / KV_7B
    assert c.batch == int(capacity / (512 + 2048)) == 43
    # saturated throughput: the batch per iteration at the mean context 512 + 2048/2
    t_iter = (7.6156e9 * 2 + c.batch * (512 + 1024) * KV_7B) / (0.3e12 * 0.6) + 0.002
    assert c.tokens_per_second_per_gpu == pytest.approx(c.batch / t_iter, rel=1e-9)


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
    # prefill is compute-bound, but only the GEMM share (0.55) runs at the fp8 peak (Amdahl)
    assert p8.tokens_per_second_per_gpu / p16.tokens_per_second_per_gpu == pytest.approx(
        1 / (0.55 * 989.4 / 1978.9 + 0.45)
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
    assert c.tokens_per_second_per_gpu == pytest.approx(989.4e12 * 0.5 / (2 * 7.6156e9))


def test_prefill_with_attention_at_its_mean_sequence() -> None:
    spec = make("grpo-7b.yaml")
    c = cell(part(build_demand(spec), "rollout", "prefill"), H100, "bf16", spec)
    flops = 2 * 7.6156e9 + 4 * 28 * 28 * 128 * 512  # 2N + 4·L·H·Q·T at the 512-token prompt
    assert c.tokens_per_second_per_gpu == pytest.approx(989.4e12 * 0.5 / flops)


def test_training_engine_forwards_run_at_training_efficiency() -> None:
    """Log-probs, reference and values are computed by the training engine at rl_train_mfu;
    a teacher served by an inference engine scores at prefill_efficiency."""
    spec = make("grpo-7b.yaml", {"attention_flops": False, "rl_train_mfu": 0.2},
                algorithm="ppo")
    demand = build_demand(spec)
    forwards = [part(demand, "update", "old_logprob"), part(demand, "update", "critic_values"),
                part(demand, "scoring", "reference")]
    for p in forwards:
        c = cell(p, H100, "bf16", spec)
        assert c.tokens_per_second_per_gpu == pytest.approx(989.4e12 * 0.2 / (2 * 7.6156e9))
    opd = make("opd-8b-from-32b.yaml", {"attention_flops": False})
    teacher = cell(part(build_demand(opd), "scoring", "teacher"), H100, "bf16", opd)
    assert teacher.tokens_per_second_per_gpu == pytest.approx(989.4e12 * 0.5 / (2 * 32.7621e9))
    # 65.6 GB of bf16 weights > 72 GB x 0.8 (KV headroom): a 2-GPU replica, per-GPU rate kept
    assert teacher.replica_gpus == 2


def test_70b_decode_does_not_fit_one_l4() -> None:
    d = example_dict("grpo-7b.yaml")
    d["model"] = dict(MODEL_70B)
    spec = parse_spec(d)
    demand = build_demand(spec)
    c = cell(part(demand, "rollout", "decode"), L4, "bf16", spec)
    assert c.fits
    # 140 GB of bf16 weights over 24 GB x 0.9 usable x 0.8 (KV headroom) = 8.1 -> 16 GPUs
    assert c.replica_gpus == 16 == 2 ** math.ceil(math.log2(70e9 * 2 / (24e9 * 0.9 * 0.8)))
    forced = cell(part(demand, "rollout", "decode"), L4, "bf16", spec, replica_gpus=1)
    assert not forced.fits and "no room" in forced.reason
    forced_fwd = cell(part(demand, "scoring", "reference"), L4, "bf16", spec, replica_gpus=1)
    assert not forced_fwd.fits and "16" in forced_fwd.reason
    pc = phase_cell(demand, "rollout", L4, "bf16")
    assert pc.fits and pc.replica_gpus == 16


# ------------------------------------------------------------------------------ training cells


def test_sft_training_rate_and_memory_without_offload() -> None:
    spec = make("sft-8b.yaml", {"attention_flops": False, "optimizer_offload": "never"})
    c = cell(part(build_demand(spec), "update", "actor"), H100, "bf16", spec)
    n = 8.0303e9
    state = n * 16  # Adam mixed precision bytes/param
    act = 2 * 2048 * 1 * 4096 * 32  # full recompute: 2·s·b·h·L
    usable = 80e9 * 0.9
    # ZeRO-3 over data parallel on the fewest GPUs whose HBM holds the state
    assert c.replica_gpus == math.ceil(state / (usable - act)) == 2
    assert c.layout == tr.Layout(tp=1, cp=1, pp=1, dp=2, zero=3, offload=False)
    assert c.memory_gb_per_gpu == pytest.approx((state / 2 + act) / 1e9)
    # MFU counts model FLOPs (6N per token; the recompute forward is not counted again) ...
    compute = 6 * n / (989.4e12 * 0.35)
    assert c.tokens_per_second_per_gpu == pytest.approx(1 / compute)
    # ... and the ZeRO-3 traffic of a 2,048-token micro-batch hides under it
    assert 3 * n * 2 * (1 / 2) / 450e9 / 2048 < compute


def test_sft_on_one_h100_offloads_the_optimizer() -> None:
    """By default (optimizer_offload: auto) the smallest replica is one GPU holding the bf16
    weights and gradients, the Adam state on the host: each optimizer step moves 2 x 2 B per
    parameter over PCIe and runs CPU Adam."""
    spec = make("sft-8b.yaml", {"attention_flops": False})
    c = cell(part(build_demand(spec), "update", "actor"), H100, "bf16", spec)
    n = 8.0303e9
    assert c.replica_gpus == 1 and c.layout is not None and c.layout.offload
    assert c.memory_gb_per_gpu == pytest.approx((n * 4 + 2 * 2048 * 4096 * 32) / 1e9)
    step = n * 4 / 32e9 + n / 0.4e9  # PCIe both ways + CPU Adam at 0.4 B params/s
    per_token = 6 * n / (989.4e12 * 0.35) + step / (256 * 2048)  # batch x tokens per example
    assert 1 / c.tokens_per_second_per_gpu == pytest.approx(per_token)


def test_rl_training_uses_rl_mfu() -> None:
    spec = make("grpo-7b.yaml", {"attention_flops": False, "rl_train_mfu": 0.2,
                                 "optimizer_offload": "never"})
    c = cell(part(build_demand(spec), "update", "actor"), H100, "bf16", spec)
    assert c.tokens_per_second_per_gpu == pytest.approx(989.4e12 * 0.2 / (6 * 7.6156e9))


def test_large_model_training_on_t4_reports_gpus_needed() -> None:
    d = example_dict("sft-8b.yaml")
    d["model"] = dict(MODEL_70B)
    # FSDP (ZeRO-3, data parallel only) with the optimizer on the GPU: one layout family
    d["efficiency"] = {"train_backend": "fsdp", "optimizer_offload": "never"}
    spec = parse_spec(d)
    demand = build_demand(spec)
    actor = part(demand, "update", "actor")
    assert not cell(actor, T4, "bf16", spec).fits  # T4 has no bf16
    c = cell(actor, T4, "fp16", spec, cond=Conditions(4))
    state = 70e9 * 16
    act = 2 * 2048 * 1 * 8192 * 80  # full recompute, 16-bit activations
    usable = 16e9 * 0.9
    assert c.fits and c.replica_gpus == math.ceil(state / (usable - act)) == 96
    assert c.layout == tr.Layout(tp=1, cp=1, pp=1, dp=96, zero=3, offload=False)
    too_few = cell(actor, T4, "fp16", spec, replica_gpus=8)
    assert not too_few.fits and "8 GPUs" in too_few.reason
    assert cell(actor, T4, "fp16", spec, replica_gpus=128).fits


def test_activations_that_exceed_hbm_do_not_fit() -> None:
    d = example_dict("sft-8b.yaml")
    d["data"]["tokens_per_example"] = 4_000_000
    d["efficiency"] = {"activation_recompute": "none"}
    spec = parse_spec(d)
    c = cell(part(build_demand(spec), "update", "actor"), H100, "bf16", spec)
    # 34·s·b·h·L / (tp·cp) at the largest tp (8) and cp (16) still exceeds 72 GB usable
    assert 34 * 4e6 * 4096 * 32 / (8 * 16) > 80e9 * 0.9
    assert not c.fits and "activations" in c.reason


def test_colocated_training_state_fits_beside_the_rollout_engine() -> None:
    """Colocated, the training state stays resident while the rollout engine holds half the
    HBM: at most 80 GB x (0.9 − 0.5) = 32 GB of state per GPU."""
    spec = make("grpo-7b.yaml", {"optimizer_offload": "never"})
    actor = part(build_demand(spec), "update", "actor")
    alone = cell(actor, H100, "bf16", spec)
    together = cell(actor, H100, "bf16", spec, cond=Conditions(8, colocated=True))
    assert alone.replica_gpus == 2  # ⌈121.6 GB / (72 GB − activations)⌉
    assert together.replica_gpus == math.ceil(7.6156e9 * 16 / 32e9) == 4
    assert together.layout == tr.Layout(tp=1, cp=1, pp=1, dp=4, zero=3, offload=False)
    forced = cell(actor, H100, "bf16", spec, replica_gpus=2, cond=Conditions(8, colocated=True))
    assert not forced.fits and "colocated" in forced.reason and "32 GB" in forced.reason


# ------------------------------------------------------------------------------ training layouts

QWEN7B = ModelBlock(params_b=7.6156, layers=28, hidden_size=3584, heads=28, kv_heads=4,
                    head_dim=128)
N7 = 7.6156e9
COMPUTE_7B = 6 * N7 / (989.4e12 * 0.25)
"""GPU-seconds per trained token at MFU 0.25 on an H100 (bf16, no attention term). The roofline
factor of compute-bound work (docs/demand-model.md §3.12, s + (1 − s)·R at bf16) is 1 here: R is
the GPU's peak ÷ HBM bandwidth relative to H100's own 989.4 TFLOPS ÷ 3.35 TB/s."""


def job_7b(longest: int, tokens_per_step: float, model: ModelBlock = QWEN7B,
           flops: float = 6 * N7) -> tr.TrainJob:
    n = model.params_b * 1e9
    # no attention FLOPs here: every FLOP is a parameter GEMM's (what the MoE straggler slows)
    return tr.TrainJob(model, flops, 4 * n, 12 * n, longest, tokens_per_step, 0.25, flops)


def timed(job: tr.TrainJob, lay: tr.Layout, spans: bool = False,
          eff: Efficiency | None = None) -> tr.TrainCell:
    """``lay`` timed on H100 nodes of 8 GPUs (``spans``: the pool spans nodes)."""
    curve = tr.choose_layout(job, H100, "bf16", eff or Efficiency(), 80e9 * 0.9, 8)
    assert not isinstance(curve, str), curve
    return curve.time_of(lay, spans)


def test_training_state_bytes_per_gpu_for_a_layout() -> None:
    eff = Efficiency()
    job = job_7b(4096, 1e6)
    act = 2 * 4096 * 1 * 3584 * 28  # full recompute: 2·s·b·h·L, divided by tp·cp
    z1 = tr.Layout(tp=2, cp=1, pp=2, dp=4, zero=1, offload=False)
    # ZeRO-1: weights + grads split by tp·pp, the Adam state also over dp
    assert tr.memory_bytes(job, eff, z1, "bf16") == pytest.approx(
        4 * N7 / 4 + 12 * N7 / 16 + act / 2)
    z3 = tr.Layout(tp=2, cp=1, pp=2, dp=4, zero=3, offload=False)
    assert tr.memory_bytes(job, eff, z3, "bf16") == pytest.approx(16 * N7 / 16 + act / 2)
    offloaded = tr.Layout(tp=2, cp=1, pp=2, dp=4, zero=3, offload=True)
    assert tr.memory_bytes(job, eff, offloaded, "bf16") == pytest.approx(4 * N7 / 16 + act / 2)
    # context parallel splits the sequence, so the activations; the sharded state is split
    # over dp x cp ranks (Megatron's data-parallel group with context parallel; FSDP's mesh)
    cp2 = tr.Layout(tp=2, cp=2, pp=2, dp=4, zero=3, offload=False)
    assert tr.memory_bytes(job, eff, cp2, "bf16") == pytest.approx(16 * N7 / 32 + act / 4)
    cp2z1 = tr.Layout(tp=2, cp=2, pp=2, dp=4, zero=1, offload=False)
    assert tr.memory_bytes(job, eff, cp2z1, "bf16") == pytest.approx(
        4 * N7 / 4 + 12 * N7 / 32 + act / 4)
    # param offload keeps the bf16 weights on the host: half the weights + grads term
    po = Efficiency(param_offload=True)
    assert tr.memory_bytes(job, po, z3, "bf16") == pytest.approx(
        4 * N7 / 16 / 2 + 12 * N7 / 16 + act / 2)
    # selective recompute keeps 34·s·b·h per layer; fp32 activations are twice 16-bit ones
    sel = Efficiency(activation_recompute="selective")
    assert tr.activation_bytes(job, sel, 2, 1, "bf16") == pytest.approx(17 * act / 2)
    assert tr.activation_bytes(job, eff, 2, 1, "fp32") == pytest.approx(act)


def test_pipeline_bubble_is_pp_minus_one_over_micro_batches() -> None:
    # two pipelines, 16 micro-batches of 4,096 tokens each per optimizer step
    job = job_7b(4096, 2 * 16 * 4096)
    c = timed(job, tr.Layout(tp=1, cp=1, pp=4, dp=2, zero=1, offload=False))
    assert c.seconds_per_token_per_gpu == pytest.approx(COMPUTE_7B * (1 + 3 / 16))
    # one micro-batch passes the four stages one after another: pp does not shorten it
    assert c.single_sequence_seconds == pytest.approx(4096 * COMPUTE_7B)
    flat = timed(job, tr.Layout(tp=1, cp=1, pp=1, dp=8, zero=1, offload=False))
    assert flat.seconds_per_token_per_gpu == pytest.approx(COMPUTE_7B)


def test_tensor_parallel_adds_its_exposed_all_reduce_traffic() -> None:
    job = job_7b(4096, 1e6)
    c = timed(job, tr.Layout(tp=4, cp=1, pp=1, dp=1, zero=1, offload=False))
    # 8·s·b·h·(t−1)/t elements of 2 B per layer per micro-batch on each of the 4 devices,
    # over NVLink (450 GB/s), per token
    tp_comm = 4 * 16 * 3584 * (3 / 4) * 28 / 450e9
    assert c.seconds_per_token_per_gpu == pytest.approx(COMPUTE_7B + tp_comm)
    # a micro-batch's forward + backward is spread over the 4 tensor-parallel GPUs
    assert c.single_sequence_seconds == pytest.approx(4096 * (COMPUTE_7B + tp_comm) / 4)


def test_zero3_gathers_bind_on_short_micro_batches() -> None:
    """ZeRO-3 gathers the weights twice and reduce-scatters the gradients for every
    micro-batch: 3·N·2 B·(dp − 1)/dp per GPU over NVLink within a node, all of it over the
    50 GB/s network when the pool spans nodes, overlapped with compute (the longer binds)."""
    lay = tr.Layout(tp=1, cp=1, pp=1, dp=4, zero=3, offload=False)
    short = job_7b(256, 1e6)
    gather = 3 * N7 * 2 * (3 / 4) / 450e9 / 256
    assert gather > COMPUTE_7B
    assert timed(short, lay).seconds_per_token_per_gpu == pytest.approx(gather)
    assert timed(short, lay, spans=True).seconds_per_token_per_gpu == pytest.approx(
        3 * N7 * 2 / 50e9 / 256)
    # an 8,192-token micro-batch hides the same traffic under its compute
    assert timed(job_7b(8192, 1e6), lay).seconds_per_token_per_gpu == pytest.approx(COMPUTE_7B)


def test_zero3_gathers_add_to_compute_when_they_share_its_stream() -> None:
    """DeepSpeed ``overlap_comm: false`` (LLaMA-Factory's ds_z3 configs) issues the all-gathers
    and reduce-scatters on the compute stream: their time adds instead of hiding under it."""
    lay = tr.Layout(tp=1, cp=1, pp=1, dp=4, zero=3, offload=False)
    serial = Efficiency(zero3_overlap_comm=False)
    for tokens in (256, 8192):
        gather = 3 * N7 * 2 * (3 / 4) / 450e9 / tokens
        job = job_7b(tokens, 1e6)
        overlapped = timed(job, lay).seconds_per_token_per_gpu
        assert overlapped == pytest.approx(max(COMPUTE_7B, gather))
        assert timed(job, lay, eff=serial).seconds_per_token_per_gpu == pytest.approx(
            COMPUTE_7B + gather)
    # across nodes the same bytes cross the 50 GB/s network, all of it (share 1)
    assert timed(job_7b(4096, 1e6), lay, eff=serial, spans=True).seconds_per_token_per_gpu \
        == pytest.approx(COMPUTE_7B + 3 * N7 * 2 / 50e9 / 4096)
    # a single GPU gathers nothing: the flag changes nothing there
    one = tr.Layout(tp=1, cp=1, pp=1, dp=1, zero=3, offload=False)
    assert timed(job_7b(4096, 1e6), one, eff=serial).seconds_per_token_per_gpu \
        == pytest.approx(COMPUTE_7B)


def test_unpacked_micro_batches_pay_their_gathers_per_sequence() -> None:
    """Without sequence packing a micro-batch holds micro_batch_size sequences of the mean
    length, not a token budget of the longest: the same tokens take longest ÷ mean times more
    micro-batches, each paying ZeRO-3's gathers (open-instruct's PPO loop)."""
    lay = tr.Layout(tp=1, cp=1, pp=1, dp=4, zero=3, offload=False)
    longest, mean = 8192, 2048
    packed = tr.TrainJob(QWEN7B, 6 * N7, 4 * N7, 12 * N7, longest, 1e6, 0.25,
                         6 * N7)
    unpacked = tr.TrainJob(QWEN7B, 6 * N7, 4 * N7, 12 * N7, longest, 1e6, 0.25,
                           6 * N7, micro_sequence_tokens=mean)
    gather = 3 * N7 * 2 * (3 / 4) / 450e9
    compute = timed(packed, tr.Layout(tp=1, cp=1, pp=1, dp=1, zero=3, offload=False)) \
        .seconds_per_token_per_gpu
    assert timed(packed, lay).seconds_per_token_per_gpu == pytest.approx(
        max(compute, gather / longest))
    assert timed(unpacked, lay).seconds_per_token_per_gpu == pytest.approx(
        max(compute, gather / mean))
    # the latency floor is still one longest sequence's forward + backward
    assert timed(unpacked, lay).single_sequence_seconds == pytest.approx(
        timed(packed, lay).single_sequence_seconds)
    # the spec switch reaches the job: the update's slot is the mean sequence when unpacked
    d = example_dict("grpo-7b.yaml")
    for packing, slot in ((True, 512 + 8192), (False, 512 + 2048)):
        spec = parse_spec({**d, "efficiency": {"sequence_packing": packing}})
        actor = part(build_demand(spec), "update", "actor")
        assert train_job(actor, spec).micro_sequence_tokens == slot


def test_offload_adds_host_traffic_and_cpu_adam() -> None:
    tokens = 64 * 4096  # tokens per optimizer step
    job = job_7b(4096, tokens)
    on_gpu = timed(job, tr.Layout(tp=1, cp=1, pp=1, dp=2, zero=3, offload=False))
    assert on_gpu.seconds_per_token_per_gpu == pytest.approx(COMPUTE_7B)
    # optimizer offload: per optimizer step, each GPU's shard N/2 goes down and up over PCIe
    # (2 x 2 B) and through CPU Adam; amortised over the step's tokens on the 2 GPUs
    shard = N7 / 2
    step = shard * 4 / 32e9 + shard / 0.4e9
    off = timed(job, tr.Layout(tp=1, cp=1, pp=1, dp=2, zero=3, offload=True))
    assert off.seconds_per_token_per_gpu == pytest.approx(COMPUTE_7B + step * 2 / tokens)
    # parameter offload: three passes per micro-batch fetch each GPU's bf16 shard over PCIe
    po = timed(job, tr.Layout(tp=1, cp=1, pp=1, dp=2, zero=3, offload=False),
               eff=Efficiency(param_offload=True))
    assert po.seconds_per_token_per_gpu == pytest.approx(
        COMPUTE_7B + 3 * (N7 * 2 / 2) / 32e9 / 4096)


def test_moe_expert_all_to_all_per_token() -> None:
    moe = ModelBlock(params_b=30, active_params_b=3, layers=48, hidden_size=2048, heads=32,
                     kv_heads=4, head_dim=128, experts_per_token=8)
    job = job_7b(4096, 1e6, model=moe, flops=6 * 3e9)
    lay = tr.Layout(tp=1, cp=1, pp=1, dp=8, zero=1, offload=False)
    # docs/demand-model.md §3.12 (MoE expert-parallel straggler): the expert share of compute,
    # 1 − attention ÷ active parameters with attention L·h·Q·(2H + 2K) per model, takes
    # moe_load_imbalance (default 1.5) times its balanced time
    attention = 48 * 2048 * 128 * (2 * 32 + 2 * 4)
    expert_share = 1 - attention / 3e9
    assert expert_share == pytest.approx(0.698, abs=1e-3)
    straggler = (1 - expert_share) + expert_share * 1.5
    compute = 6 * 3e9 * straggler / (989.4e12 * 0.25)  # FLOPs of the active parameters
    a2a = 4 * 8 * 2048 * 2 * 48  # dispatch + combine, forward + backward, k experts, 2 B
    assert timed(job, lay).seconds_per_token_per_gpu == pytest.approx(compute + a2a / 450e9)
    assert timed(job, lay, spans=True).seconds_per_token_per_gpu == pytest.approx(
        compute + a2a / 50e9)


# ------------------------------------------------------------------------------ phases


def test_update_phase_time_adds_its_parts_on_the_pool() -> None:
    spec = make("grpo-7b.yaml")
    demand = build_demand(spec)
    pc = phase_cell(demand, "update", H100, "bf16")
    assert pc.timing is not None
    cells = dict(pc.cells)
    fwd, actor = part(demand, "update", "old_logprob"), part(demand, "update", "actor")
    fwd_tps = cells["old_logprob"].tokens_per_second_per_gpu
    curve = cells["actor"].curve
    # floor: one longest sequence's forward and one longest micro-batch's forward + backward
    # per step (one epoch, one mini-batch), whatever the pool; the micro-batch's sequence is
    # split over sp ranks (docs/demand-model.md §3.12, sequence parallel in the update floor:
    # the largest power of two ≤ 8 and ≤ 8,704 ÷ 4,096 dividing Qwen2.5-7B's 28 query heads,
    # on a layout of cp 1: 2)
    assert actor.model.query_heads == 28 and cells["actor"].layout.cp == 1
    sp = 2
    floor = 300 * (512 + 8192) / fwd_tps + 300 * cells["actor"].single_seconds / sp
    assert pc.timing.floor_seconds == pytest.approx(floor)
    for g in (1, 2, 8, 16, 64):
        t = fwd.tokens / fwd_tps / g + actor.tokens * curve.at(g).seconds_per_token_per_gpu / g
        assert float(pc.timing.busy_seconds(g)) == pytest.approx(max(t, floor))
    # estimate reports a training phase on one whole node
    assert pc.timing.reference_gpus() == 8
    assert pc.gpu_hours == pytest.approx(float(pc.timing.busy_seconds(8)) * 8 / 3600)


def test_rollout_prefill_overlaps_the_decode_of_its_step() -> None:
    """Chunked prefill runs inside decode iterations that are bound by memory: a step takes
    the longer of its decode and its prefill, not their sum."""
    spec = make("grpo-7b.yaml")
    demand = build_demand(spec)
    pc = phase_cell(demand, "rollout", H100, "bf16")
    assert pc.timing is not None
    (curve,) = pc.timing.curves
    prefill = part(demand, "rollout", "prefill").tokens \
        / dict(pc.cells)["prefill"].tokens_per_second_per_gpu
    for g in (1, 8, 64, 4096):
        want = max(float(curve.seconds(g)), prefill / g, pc.timing.floor_seconds)
        assert float(pc.timing.busy_seconds(g)) == pytest.approx(want)
    # the reference pool: the fewest one-GPU replicas that each hold a full batch
    assert pc.timing.reference_gpus() == math.ceil(256 * 8 / curve.batch) * curve.engine.gpus
    assert pc.gpu_hours == pytest.approx(
        float(pc.timing.busy_seconds(pc.timing.reference_gpus()))
        * pc.timing.reference_gpus() / 3600)


def test_scoring_is_linear_in_gpus_down_to_its_floor() -> None:
    spec = make("grpo-7b.yaml")
    demand = build_demand(spec)
    pc = phase_cell(demand, "scoring", H100, "bf16")
    assert pc.timing is not None
    ref = part(demand, "scoring", "reference")
    tps = dict(pc.cells)["reference"].tokens_per_second_per_gpu
    # each step's longest sequence (512 + 8,192 tokens) through one replica
    floor = 300 * (512 + 8192) / tps
    assert pc.timing.floor_seconds == pytest.approx(floor)
    hours = [float(pc.timing.busy_seconds(g)) for g in (1, 4, 1e6)]
    assert hours[:2] == pytest.approx([ref.tokens / tps, ref.tokens / tps / 4])
    assert hours[2] == pytest.approx(floor)


# ------------------------------------------------------------------------------ calibration


def test_calibration_replaces_phase_throughput() -> None:
    d = example_dict("grpo-7b.yaml")
    plain = phase_cell(build_demand(parse_spec(d)), "rollout", H100, "bf16")
    d["calibration"] = [
        {"phase": "rollout", "gpu": "h100", "precision": "bf16", "tokens_per_second_per_gpu": 5000}
    ]
    spec = parse_spec(d)
    demand = build_demand(spec)
    pc = phase_cell(demand, "rollout", H100, "bf16")
    generated = 300 * 256 * 8 * 2048
    assert pc.calibrated and pc.calibration is not None
    assert pc.gpu_hours == pytest.approx(generated / 5000 / 3600)
    # measured ÷ modelled at the reference pool rescales the whole timing: drain, prefill, floor
    factor = 5000 / (generated / (plain.gpu_hours * 3600))
    assert pc.calibration.factor == pytest.approx(factor)
    assert pc.timing is not None and plain.timing is not None
    for g in (8, 64):
        assert float(pc.timing.busy_seconds(g)) == pytest.approx(
            float(plain.timing.busy_seconds(g)) / factor)
    # fp8 on the same GPU is rescaled by the bf16 measurement; other GPUs and phases are not
    fp8 = phase_cell(demand, "rollout", H100, "fp8")
    assert fp8.calibrated and fp8.calibration is not None
    assert fp8.calibration.precision == "bf16"
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


# ------------------------------------------------------------------------------ robustness


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
                assert pc.timing is not None
                assert np.all(np.isfinite(pc.timing.busy_seconds(np.array([1.0, 8.0, 64.0]))))
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


def test_largest_loadable_model_reports_the_gpus_training_needs() -> None:
    d = example_dict("grpo-7b.yaml")
    d["model"]["params_b"] = 100_000  # the loader's largest
    d["efficiency"] = {"optimizer_offload": "never"}
    spec = parse_spec(d)
    # 1e14 x 16 B of training state over 72 GB per GPU: at least 22,223 GPUs in any layout
    assert math.ceil(1e14 * 16 / 72e9) > 8192
    c = cell(part(build_demand(spec), "update", "actor"), H100, "bf16", spec)
    assert not c.fits and "more than 8192 GPUs" in c.reason


def test_a_layout_that_fits_only_at_an_absurd_dp_is_no_candidate() -> None:
    """Free memory a hair above the activations: dp would be astronomically large (once an
    OverflowError from ceil(inf)); the layout is simply not a candidate."""
    eff = Efficiency()
    job = job_7b(4096, 1e6)
    act = tr.activation_bytes(job, eff, 1, 1, "bf16")
    for usable in (act * (1 + 1e-15), act + 1e-300, act + 1.0):
        for zero in (1, 3):
            assert tr._fit(job, eff, usable, 1, 1, 1, zero, False, "bf16", 0) is None
    # and with room to spare the smallest dp that fits is chosen: ZeRO-3, 16 B/param, 40 GB free
    act2 = tr.activation_bytes(job, eff, 1, 2, "bf16")
    fit = tr._fit(job, eff, act2 + 40e9, 1, 2, 1, 3, False, "bf16", 0)
    assert fit is not None and fit.dp == math.ceil(16 * N7 / (40e9 * 2))


def test_new_efficiency_fields_keep_a_specs_digest_at_their_defaults() -> None:
    """``sequence_packing``, ``zero3_overlap_comm``, ``colocated_refit_gb_per_s``,
    ``generation_batching`` and ``rollout_tp`` (issue #39) are left out of the spec digest at
    their defaults, so plans made before them still match their specs; set otherwise they
    change it (a plan then no longer matches a spec that packs)."""
    from ptplan.planfile.digest import spec_digest

    later = {"sequence_packing": False, "zero3_overlap_comm": False,
             "colocated_refit_gb_per_s": 40.0, "generation_batching": "static",
             "rollout_tp": 2}
    dump = make("grpo-7b.yaml").model_dump(mode="json")
    before = {**dump, "efficiency": {k: v for k, v in dump["efficiency"].items()
                                     if k not in later}}
    assert spec_digest(dump) == spec_digest(before)
    for field, other in later.items():
        changed = {**dump, "efficiency": {**dump["efficiency"], field: other}}
        assert spec_digest(changed) != spec_digest(dump)


def test_train_job_carries_the_parameter_flops_the_moe_straggler_slows() -> None:
    """The update's job records 6·N_active FLOPs per token of parameter GEMMs (4·N_active with
    LoRA): the share ``moe_load_imbalance`` stretches (attention-score FLOPs are not routed)."""
    d = example_dict("grpo-7b.yaml")
    d["model"] = {"params_b": 30, "active_params_b": 3, "layers": 48, "hidden_size": 2048,
                  "heads": 32, "kv_heads": 4, "head_dim": 128, "experts_per_token": 8}
    spec = parse_spec(d)
    job = train_job(part(build_demand(spec), "update", "actor"), spec)
    assert job.param_flops_per_token == pytest.approx(6 * 3e9, rel=1e-12)
    lora = parse_spec({**d, "model": {**d["model"], "finetune": "lora"}})
    assert train_job(part(build_demand(lora), "update", "actor"), lora) \
        .param_flops_per_token == pytest.approx(4 * 3e9, rel=1e-12)


def test_the_decode_engine_sizes_windowed_kv_at_the_mean_context_in_flight() -> None:
    """A sliding-window model's KV bytes per token are taken at the rollout's mean context in
    flight, prompt + the mean age of a response (§3.5), not at the prompt or the full cap."""
    d = example_dict("grpo-7b.yaml")
    d["model"] = {"preset": "google/gemma-3-1b-it"}
    spec = parse_spec(d)
    decode = part(build_demand(spec), "rollout", "decode")
    e = decode_engine(decode, H100, "bf16", spec, 1, Conditions(8))
    assert not isinstance(e, str)
    context = decode.prompt_tokens + decode.lengths.mean_age
    assert context > 512 + 1000  # beyond the 512-token window: the share matters
    assert e.kv_bytes_per_token == pytest.approx(
        inf.kv_bytes_per_token(spec.model, 2.0, context), rel=1e-12)
    assert e.kv_bytes_per_token < inf.kv_bytes_per_token(spec.model, 2.0, 512)
