"""Which ``data`` fields each method takes, and what a sampling-only job (``method: generate``)
rejects. Used by :class:`ptplan.spec.project.ProjectSpec`'s validator (docs/spec.md §2, §5)."""

from __future__ import annotations

from typing import Any

SFT_FIELDS = ("examples", "tokens_per_example", "epochs", "batch_size", "generated_by")
RL_FIELDS = (
    "steps",
    "prompts_per_step",
    "samples_per_prompt",
    "prompt_tokens",
    "response_tokens",
    "max_response_tokens",
    "response_length",
    "oversample_factor",
    "update_epochs",
    "mini_batches_per_step",
)
GEN_FIELDS = ("prompts", "samples_per_prompt", "prompt_tokens", "response_tokens",
              "max_response_tokens", "response_length")
GEN_REQUIRED = ("prompts", "samples_per_prompt", "prompt_tokens", "response_tokens")
SFT_REQUIRED = ("examples", "tokens_per_example")
RL_REQUIRED = ("steps", "prompts_per_step", "samples_per_prompt", "prompt_tokens",
               "response_tokens")


def _generate_rules(spec: Any) -> None:
    """What a sampling-only job (``method: generate``) rejects: nothing is trained or scored."""
    for key in ("reward_model", "reference_model", "critic", "eval"):
        if getattr(spec, key) is not None:
            raise ValueError(f"{key} applies to trained methods; remove it for method generate "
                             "(a sampling-only job)")
    if spec.pipeline not in ("auto", "colocated"):
        raise ValueError(f"pipeline {spec.pipeline} applies to rl/opd; a generate job runs on "
                         "one pool (use auto or colocated)")
    if spec.model.finetune != "full":
        raise ValueError("model.finetune applies to trained methods; a generate job samples "
                         "from the model as it is (remove finetune and lora_rank)")
    if spec.checkpoints.model_fields_set:
        raise ValueError("checkpoints apply to trained methods; a generate job writes no "
                         "checkpoint (remove the checkpoints block)")


GEN_EFFICIENCY = ("decode_step_overhead_ms", "cuda_graphs", "eager_launch_us_per_layer",
                  "tp_allreduce_us_intra_node", "tp_allreduce_us_inter_node", "decode_mbu",
                  "decode_compute_efficiency", "max_batch_per_replica", "generation_batching",
                  "rollout_tp",
                  "prefix_caching",
                  "restart_minutes", "lost_work_minutes", "attention_flops", "prefill_efficiency",
                  "gpu_memory_utilization", "internode_gb_per_s_per_gpu")
"""The efficiency fields a generate job reads (decode, prefill and spot restarts)."""
