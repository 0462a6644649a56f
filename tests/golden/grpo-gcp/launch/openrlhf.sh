#!/usr/bin/env bash
# OpenRLHF launch for plan grpo-7b-math (grpo, async pipeline).
# Flag names of OpenRLHF <= 0.10.1 (renamed to --actor.num_nodes etc. in 0.10.2).
# Set MODEL_PATH and TRAIN_FILES; run on the Ray head (ray job submit).
set -euo pipefail
: "${MODEL_PATH:?set MODEL_PATH}" "${TRAIN_FILES:?set TRAIN_FILES}"
exec ray job submit --address=http://127.0.0.1:8265 -- python3 -m openrlhf.cli.train_ppo_ray --pretrain "$MODEL_PATH" --prompt_data "$TRAIN_FILES" --advantage_estimator=group_norm --actor_num_nodes=1 --actor_num_gpus_per_node=8 --vllm_num_engines=2 --vllm_tensor_parallel_size=1 --ckpt_path=/checkpoints/checkpoints --load_checkpoint --save_steps=25 --zero_stage=3 --ref_num_nodes=11 --ref_num_gpus_per_node=1 --async_train
