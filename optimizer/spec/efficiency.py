"""``efficiency``: every efficiency and system parameter of the demand model, with its default
(sources: docs/spec.md §11 and docs/demand-model.md)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from ptplan.spec.types import Amount, Count, Fraction, _Strict

EAGER_LAUNCH_US = {"dense": 340.0, "moe": 500.0}
"""Host and launch cost per layer per decode iteration of an engine without CUDA graphs (µs),
measured as the time per output token eager minus with graphs, over the layers: Qwen2.5-7B
(28 dense layers) 22.5 → 13 ms per token (vllm-project/vllm-omni issue #7960, 2 A800), and
Qwen3-30B-A3B (48 MoE layers, TP4) 33.9 → 10.0 ms (vllm-project/vllm issue #45709); an RL
rollout at full batch bounds it from below: veRL's Qwen2-7B PPO generation 85 → 62 s with graphs
over at most 4,096 iterations, ≥ 200 µs per layer (veRL ``docs/README_vllm0.7.md``). The 45 µs
used before came from vLLM PR #1440 (2023, Llama-2-7B at batch 1). docs/demand-model.md §4.2."""


class Efficiency(_Strict):
    """Efficiency and system parameters of the demand model; each has a documented source."""

    @model_validator(mode="before")
    @classmethod
    def _retired(cls, data: Any) -> Any:
        if isinstance(data, dict) and "tail_factor" in data:
            raise ValueError("efficiency.tail_factor was replaced by the rollout drain model; "
                             "remove it and describe the response lengths in "
                             "data.response_length (quantiles, histogram or truncated_share)")
        return data

    train_mfu: Fraction = 0.35
    rl_train_mfu: Fraction = 0.22
    prefill_efficiency: Fraction = 0.5
    decode_mbu: Fraction = 0.6
    decode_compute_efficiency: Fraction = 0.5
    decode_step_overhead_ms: Annotated[float, Field(ge=0, le=1000, strict=False)] = 2.0
    """Fixed cost of one decode iteration: scheduling, sampling, log-prob gather, host work."""
    cuda_graphs: bool = True
    """Decode runs captured CUDA graphs (veRL, NeMo RL); false: eager kernel launches
    (OpenRLHF's hybrid-engine recipes pass --vllm.enforce_eager)."""
    eager_launch_us_per_layer: Annotated[float, Field(ge=0, le=10_000, strict=False)] | None \
        = None
    """Host and launch cost of one layer per decode iteration without CUDA graphs (µs); unset:
    per model, ``EAGER_LAUNCH_US`` (a dense layer 340, a mixture-of-experts layer 500)."""
    tp_allreduce_us_intra_node: Annotated[float, Field(ge=0, le=10_000, strict=False)] = 10.0
    tp_allreduce_us_inter_node: Annotated[float, Field(ge=0, le=10_000, strict=False)] = 30.0
    prefix_caching: bool = True
    """The engine prefills a prompt once for all its samples (vLLM automatic prefix caching:
    on in veRL, off by default in OpenRLHF and NeMo RL)."""
    colocated_rollout_memory_fraction: Fraction = 0.5
    """Colocated layouts: the share of HBM the rollout engine gets (veRL
    rollout.gpu_memory_utilization default 0.5); training state resident meanwhile must fit in
    the rest."""
    gemm_time_share: Fraction = 0.55
    """Share of compute-bound time spent in GEMMs at 16 bit; only this share speeds up at fp8 or
    int8 (Amdahl)."""
    moe_load_imbalance: Annotated[float, Field(ge=1, le=8, strict=False)] = 1.5
    """MoE: tokens on the busiest expert-parallel rank ÷ the mean (the layer waits for it);
    measured 1.3–2× on real routing (arXiv:2503.05066 straggler effect; arXiv:2605.20982)."""
    internode_gb_per_s_per_gpu: Amount | None = None
    """Scale-out network per GPU; default from the GPU's reference system (DGX H100/H200/B200:
    8 x 400 Gb/s = 50 GB/s per GPU; DGX A100: 8 x 200 Gb/s = 25 GB/s; others 12.5 GB/s)."""
    pcie_gb_per_s: Amount = 32.0
    cpu_adam_b_params_per_s: Amount = 0.4
    train_backend: Literal["auto", "fsdp", "megatron"] = "auto"
    """Training layouts considered: fsdp (FSDP/DeepSpeed ZeRO-3: data parallel, Ulysses
    sequence parallel; veRL's and OpenRLHF's default), megatron (TP, PP, CP with the
    distributed optimizer), auto (the faster that fits)."""
    optimizer_offload: Literal["auto", "always", "never"] = "auto"
    """auto: offload the optimizer state to CPU only where no layout fits otherwise; always:
    as DeepSpeed ``offload_optimizer`` / OpenRLHF ``--adam_offload`` recipes do."""
    param_offload: bool = False
    """ZeRO-3 parameter offload (DeepSpeed ``offload_param``): every forward, recompute and
    backward pass fetches each GPU's parameter shard from host memory over PCIe."""
    sequence_packing: bool = True
    """RL/OPD updates: a micro-batch is a token budget of ``micro_batch_size`` longest sequences
    filled with as many sequences as fit (veRL ``use_dynamic_bsz``, OpenRLHF
    ``--train.dynamic_batch_enable``/``--packing_samples``, NeMo RL sequence packing; what
    ``ptplan render`` sets). False: each micro-batch holds ``micro_batch_size`` sequences, as
    those frameworks run without it and open-instruct does, so a step runs longest ÷ mean times
    more micro-batches, each paying its ZeRO-3 gathers."""
    zero3_overlap_comm: bool = True
    """ZeRO-3/FSDP: the parameter all-gathers and gradient reduce-scatters run on their own
    streams beside compute (FSDP prefetch; DeepSpeed ``overlap_comm``, true by default at stage
    3). False, as LLaMA-Factory's ``ds_z3_config.json`` and ``ds_z3_offload_config.json`` set
    it: DeepSpeed issues both on the compute stream, so their time adds to the compute."""
    gpu_memory_utilization: Fraction = 0.9
    max_batch_per_replica: Count = 256
    rollout_tp: Annotated[int, Field(ge=1, le=64, strict=True)] | None = None
    """GPUs of one rollout (and eval) engine, tensor parallel across them (veRL
    ``rollout.tensor_model_parallel_size``, OpenRLHF ``--vllm.tensor_parallel_size``). Unset:
    each pool runs the faster of the smallest engine that holds the weights and one spanning
    the node (docs/demand-model.md §4.6)."""
    generation_batching: Literal["continuous", "static"] = "continuous"
    """continuous: the engine refills a finished sequence's slot at once (vLLM, SGLang,
    TensorRT-LLM's in-flight batching: what veRL, OpenRLHF and NeMo RL run). static: it
    decodes sequential batches of ``max_batch_per_replica`` sequences, each call returning
    when its longest response ends (HF ``generate``, DeepSpeed-Chat's hybrid engine,
    NeMo-Aligner's TensorRT-LLM ``GptSession`` called per rollout micro-batch)."""
    pad_responses_to_cap: bool = False
    """rl/opd: the scoring and training passes see every response padded to
    ``data.max_response_tokens`` (open-instruct's PPO appends pad tokens up to its
    ``response_length``), so they run prompt + cap tokens per sequence whatever was generated.
    False: each pass sees the sequence's own length (or its micro-batch's longest,
    ``sequence_packing: false``)."""
    adam_bytes_per_param: Annotated[float, Field(ge=2, le=32, strict=True)] = 16.0
    activation_recompute: Literal["full", "selective", "none"] = "full"
    micro_batch_size: Count = 1
    attention_flops: bool = True
    recompute_old_logprobs: bool = True
    checkpoint_write_gb_per_s: Amount = 2.0
    weight_sync_gb_per_s: Amount = 10.0
    colocated_refit_gb_per_s: Amount = 17.8
    """Colocated layouts: after each update the trained weights are refitted into the engines
    on the same GPUs, ``params_b × 2`` GB (bf16) at this rate, one stream whatever the cluster's
    size (NeMo RL issue #945: the single controller serialises the refit's IPC hand-offs).
    17.8 GB/s is the marginal rate of NeMo RL PR #3294's colocated synchronous refits,
    Qwen3-30B-A3B 17.2 s and Qwen3-235B-A22B 40.2 s: (470 − 61) GB / 23.0 s; the fixed part of
    a refit is in the fitted per-step overhead (docs/demand-model.md §3.8)."""
    restart_minutes: Annotated[float, Field(ge=0, le=10_000, strict=True)] = 10.0
    lost_work_minutes: Annotated[float, Field(ge=0, le=10_000, strict=True)] = 5.0
    checkpoint_minutes: Annotated[float, Field(ge=0, le=10_000, strict=True)] = 3.0
