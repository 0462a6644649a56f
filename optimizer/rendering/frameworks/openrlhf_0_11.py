"""OpenRLHF 0.11.x: the planned RL run as flags of ``openrlhf.cli.train_ppo_ray`` (the dotted
names of 0.10.2 and later: ``--actor.num_nodes``, ``--rollout.n_samples_per_prompt``,
``--algo.advantage.estimator``), checked in CI by the 0.11.2 wheel's own parser and start-up
assertions.

The rule-based reward is a local Python file (``--reward.remote_url`` = ``$REWARD_FN``; a
``.py`` path runs in-process, ``openrlhf/utils/agent.py``), so no reward-model group is
created; the reference group exists only with a KL coefficient > 0. OpenRLHF 0.11 has no
on-policy distillation and no SFT entry point under Ray: OPD and SFT plans are refused.
"""

from __future__ import annotations

import shlex
from typing import Any

from ptplan.core.errors import InputError
from ptplan.rendering.frameworks import (
    FIELDS,
    OPENRLHF_0_11,
    Run,
    Setting,
    geometry,
    max_turns,
    phase,
    scoring_models,
)
from ptplan.rendering.frameworks.notes import unpacked_note
from ptplan.rendering.paths import launch_path
from ptplan.rendering.pinning import launcher_words, roles
from ptplan.templates import shell_join

FRAMEWORK = OPENRLHF_0_11
ESTIMATOR = {"ppo": "gae", "grpo": "group_norm", "dapo": "group_norm"}
PARAM_DTYPE = {"bf16": "bf16", "fp16": "fp16"}
ENV_FLAGS = (("--actor.model_name_or_path", "MODEL_PATH"),
             ("--data.prompt_dataset", "TRAIN_FILES"), ("--eval.dataset", "VAL_FILES"),
             ("--reward.remote_url", "REWARD_FN"))
"""Flags whose values come from the environment (expanded by ``sh -c``)."""
KL_COEF = 0.001
"""KL loss coefficient with a reference model (veRL's default ``kl_loss_coef``)."""


def flag(s: Setting) -> list[str]:
    if isinstance(s.value, bool):
        return [s.key] if s.value else []
    return [f"{s.key}={s.value}"]


def command(plan: Any, facts: Any, slug: str, notes: list[str]) -> dict[str, Any]:
    if plan.method != "rl":
        what = "on-policy distillation" if plan.method == "opd" else "SFT under Ray"
        raise InputError(f"--framework openrlhf=={FRAMEWORK.line}: OpenRLHF {FRAMEWORK.pin} "
                         f"has no {what}; render this {plan.method} plan with --framework "
                         "verl==0.9")
    run: Run = facts.run
    geo = geometry(plan)
    rows: list[Setting] = []

    def add(field: str, value: Any, source: str) -> None:
        rows.append(Setting(field, FIELDS[field]["openrlhf"], value, source))

    fixed: list[str] = ["--train.num_episodes=1"]
    add("trainer_nodes", geo.upool.nodes, "plan update pool")
    add("trainer_gpus_per_node", geo.upool.gpus_per_node, "plan update pool")
    add("rollout_engines", geo.engines, "plan rollout pool / engine GPUs")
    add("rollout_tp", geo.tp, "plan rollout engine")
    add("colocated", not geo.separate, "plan one pool")
    add("trainer_mode", geo.separate and plan.pipeline_mode == "async", "plan pipeline")
    if geo.separate and plan.pipeline_mode == "async":
        add("staleness_steps", run.staleness, "spec max_staleness_steps (rollout batches "
            "queued ahead of the trainer)")
    add("gpu_memory_utilization", run.gpu_memory_utilization if geo.separate
        else run.colocated_fraction, "spec efficiency")
    if not geo.separate:
        fixed += ["--vllm.enable_sleep", "--ds.enable_sleep"]
    elif plan.pipeline_mode == "sync":
        notes.append("sync pipeline on separate pools: OpenRLHF runs generation and training "
                     "one after the other on their own groups, as planned")
    add("weight_sync", "nccl", "weights to vLLM over NCCL")
    rollout, update, scoring = (phase(plan, n) for n in ("rollout", "update", "scoring"))
    if rollout is not None and rollout.precision in ("fp8", "int8"):
        notes.append(f"rollout precision {rollout.precision}: OpenRLHF {FRAMEWORK.line} has no "
                     "vLLM quantization flag; engines run in bf16, slower and with less KV "
                     "cache than planned")
    if update is not None and update.precision in PARAM_DTYPE:
        add("update_precision", PARAM_DTYPE[update.precision], "plan update precision")
    if scoring is not None and scoring.precision in ("fp8", "int8"):
        notes.append(f"scoring was priced at {scoring.precision}; OpenRLHF scores in bf16")
    _layout(add, update, notes)
    if run.lora_rank:
        add("lora_rank", run.lora_rank, "spec model.finetune lora")
    add("advantage_estimator", ESTIMATOR.get(plan.algorithm or "", "group_norm"),
        f"plan algorithm {plan.algorithm}")
    if plan.algorithm == "dapo":
        add("dynamic_sampling", True, "plan algorithm dapo")
        notes.append(f"DAPO: OpenRLHF filters groups by reward range; the plan priced "
                     f"{run.oversample:g} generated samples per trained one (over-sampling "
                     "needs --rollout.vllm_generate_batch_size with --train.async_enable)")
    mini = max(1, run.mini_batches)
    add("prompts_per_step", run.batch, "spec data.prompts_per_step")
    add("samples_per_prompt", run.samples, "spec data.samples_per_prompt")
    add("mini_batch", run.batch * run.samples // mini, "samples per optimizer step")
    add("update_epochs", run.update_epochs, "spec data.update_epochs")
    add("sequence_tokens", run.sequence_tokens, "prompt + max response tokens")
    add("max_response_tokens", run.max_response_tokens, "spec data.max_response_tokens")
    add("dynamic_batch", True, "token budgets")
    notes.extend(unpacked_note(run))
    add("tokens_per_gpu", run.sequence_tokens, "one longest sequence per micro-batch")
    add("steps", plan.steps * run.batch, "plan steps × prompts per step (one episode)")
    notes.append(f"OpenRLHF runs one episode over the first {plan.steps * run.batch} prompts "
                 f"(= {plan.steps} steps); a smaller prompt set gives fewer steps")
    if run.eval_every:
        add("eval_every_steps", run.eval_every, "spec eval.every_steps")
        add("eval_samples_per_prompt", run.eval_samples, "spec eval.samples_per_prompt")
        notes.append(f"eval prompts: OpenRLHF evaluates the whole VAL_FILES set; give it the "
                     f"{run.eval_prompts} prompts the plan priced")
    if facts.every_steps:
        add("checkpoint_every_steps", facts.every_steps, "plan lifecycle.every_steps")
    if facts.keep_hot:
        add("checkpoint_keep", facts.keep_hot, "plan lifecycle.keep_hot")
    if not run.with_optimizer:
        notes.append("checkpoints.with_optimizer false: OpenRLHF's DeepSpeed checkpoints hold "
                     "the optimizer state; they are larger than planned")
    add("checkpoint_dir", launch_path("hot_checkpoints", "ds"), "paths hot_checkpoints")
    fixed.append("--ckpt.output_dir=" + launch_path("hot_checkpoints", "final"))
    add("resume", True, "resume after restarts")
    if any(item.data_class == "eval_outputs" for item in plan.storage):
        add("eval_output_dir", launch_path("eval_outputs", "tensorboard"), "paths eval_outputs")
    else:  # nothing the plan priced (or a lifecycle rule expires) would hold them
        notes.append("no eval outputs in the plan: OpenRLHF's TensorBoard metrics are not "
                     "written to the bucket (console only)")
    notes.append("rollout logs: OpenRLHF 0.11 has no rollout dump; the rollout_logs storage "
                 "the plan priced stays empty")
    models = scoring_models(plan)
    if "reward" in models:
        notes.append("the plan has a reward model: OpenRLHF serves it as its own group "
                     "(--reward.model_name_or_path); set REWARD_FN to its URL instead")
    env_flags = ENV_FLAGS
    if run.agent is not None:  # agent mode: the agent's .py runs the episode and scores it
        env_flags = (*ENV_FLAGS[:-1], ("--train.agent_func_path", "AGENT_PATH"))
        add("agent_code", "$AGENT_PATH", "AGENT_PATH: the AgentExecutor .py (agent mode)")
        a = run.agent
        notes.append(f"agent: OpenRLHF {FRAMEWORK.line}'s agent mode ends an episode when the "
                     f"agent's step() says done: stop it after {max_turns(a)} turns, as "
                     "planned; each turn may generate up to the rest of --data.max_len (no "
                     f"per-turn cap; {a.tokens_per_turn} tokens per turn were planned)")
        notes.append(f"agent: {a.concurrency_per_replica} episodes in flight per engine were "
                     f"planned; OpenRLHF {FRAMEWORK.line} has no flag for vLLM's max_num_seqs "
                     "(its engines run what --rollout.vllm_generate_batch_size sends)")
    else:
        add("reward_function", "$REWARD_FN", "rule-based reward: REWARD_FN (.py)")
    ref = "reference" in models
    add("reference", ref, "plan scoring models")
    if ref:
        rpool = geo.spool if geo.spool is not None else geo.upool
        fixed += ["--algo.kl.estimator=k3", f"--algo.kl.init_coef={KL_COEF}",
                  f"--ref.num_nodes={rpool.nodes}",
                  f"--ref.num_gpus_per_node={rpool.gpus_per_node}"]
        if rpool.name == geo.upool.name and geo.separate:
            fixed.append("--train.colocate_actor_ref")
    else:
        fixed.append("--algo.kl.init_coef=0")
    if plan.algorithm == "ppo":
        fixed += [f"--critic.num_nodes={geo.upool.nodes}",
                  f"--critic.num_gpus_per_node={geo.upool.gpus_per_node}"]
        notes.append("PPO: OpenRLHF's critic is its own group, sized like the actor here")
    module = "openrlhf.cli.train_ppo_ray"  # through the pool-pinning launcher (pinning.py)
    pools = roles(plan, "openrlhf")
    boot = shell_join(launcher_words(module, pools))
    script = f"exec {boot} " + " ".join(
        f'{k} "${v}"' for k, v in env_flags) + ' "$@"'
    flags = [w for s in rows if s.key not in dict(env_flags) for w in flag(s)] + fixed
    return {"module": module, "torchrun": False, "settings": rows,
            "words": ["sh", "-c", script, "openrlhf", *flags], "config_name": None,
            "ray_roles": pools}


def _layout(add: Any, update: Any, notes: list[str]) -> None:
    lay = update.parallel_layout if update is not None else None
    if lay is None:
        return
    add("update_zero_stage", lay.zero_stage if lay.zero_stage in (1, 2, 3) else 3,
        "plan update parallel_layout.zero_stage")
    add("update_optimizer_offload", lay.optimizer_offload, "plan update layout")
    if lay.cp > 1:
        add("update_cp", lay.cp, "plan update parallel_layout.cp")
    if lay.tp > 1 or lay.pp > 1:
        notes.append(f"OpenRLHF (DeepSpeed) has no tensor/pipeline parallel: the plan's update "
                     f"layout (tp {lay.tp}, pp {lay.pp}) is for veRL's Megatron backend; "
                     "with OpenRLHF set efficiency.train_backend: fsdp and re-plan")


def argv(words: list[str], env: dict[str, str]) -> list[str]:
    """The argument vector ``train_ppo_ray`` receives from :func:`command`'s words, with
    ``env`` for the variables ``sh -c`` expands."""
    inner = shlex.split(words[2])[7:-1]  # after `exec python3 -c BOOT SRC ROLES MODULE`
    return [env[w[1:]] if w.startswith("$") else w for w in inner] + words[4:]
