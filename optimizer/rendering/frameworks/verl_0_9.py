"""veRL 0.9.x: the planned run as Hydra overrides of ``verl.trainer.main_ppo`` (RL, OPD) and
``verl.trainer.sft_trainer`` (SFT, torchrun), checked in CI against the 0.9.1 wheel's own YAML.

RL: the v1 trainer (``trainer.use_v1``, default in 0.9). A rollout pool apart from the update
pool runs ``trainer.v1.trainer_mode=separate_async`` with ``actor_rollout_ref.hybrid_engine=False``
and the rollout pool's ``rollout.nnodes`` / ``n_gpus_per_node`` (the only trainer that takes a
standalone rollout pool; weights move over NCCL, ``train_batch_size = parameter_sync_step ×
ppo_mini_batch_size``: ``verl/trainer/ppo/v1/trainer_separate_async.py``); one pool runs
``sync`` (or ``colocate_async``) on the hybrid engine. OPD: the same trainer with
``distillation.enabled`` (``verl/trainer/config/distillation/distillation.yaml``): the teacher
pool is ``distillation.nnodes × n_gpus_per_node`` with ``num_replicas`` servers, the loss the
per-token reverse KL (``k1``) used as a policy-gradient reward, no task reward. SFT:
``verl.trainer.sft_trainer`` (config ``sft_trainer_engine``; ``fsdp_sft_trainer`` is gone).
"""

from __future__ import annotations

from typing import Any

from ptplan.planfile.names import gpu_resource
from ptplan.rendering.frameworks import (
    VERL_0_9,
    Geometry,
    Run,
    Setting,
    ceil_int,
    geometry,
    max_turns,
    phase,
    scoring_models,
)
from ptplan.rendering.frameworks.notes import unpacked_note
from ptplan.rendering.paths import launch_path
from ptplan.rendering.pinning import launcher_words, roles

FRAMEWORK = VERL_0_9
ESTIMATOR = {"ppo": "gae", "grpo": "grpo", "dapo": "grpo"}
"""``algorithm.adv_estimator`` (DAPO = GRPO advantages + dynamic sampling)."""
DTYPE = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
ENV = {"model": "${oc.env:MODEL_PATH}", "train": "${oc.env:TRAIN_FILES}",
       "val": "${oc.env:VAL_FILES}", "reward": "${oc.env:REWARD_FN}",
       "reward_model": "${oc.env:REWARD_MODEL_PATH}", "teacher": "${oc.env:TEACHER_PATH}"}


def value_word(value: Any) -> str:
    if isinstance(value, bool):
        return "True" if value else "False"
    if value is None:
        return "null"
    if isinstance(value, list | tuple):
        return "[" + ",".join(value_word(v) for v in value) + "]"
    return str(value)


def word(s: Setting) -> str:
    return f"{'+' if s.new else ''}{s.key}={value_word(s.value)}"


class _Rows:
    def __init__(self, sft: bool) -> None:
        self.rows: list[Setting] = []
        self.col = "verl-sft" if sft else "verl"
        self.config_name = "sft_trainer_engine" if sft else "ppo_trainer"

    def add(self, field: str, value: Any, source: str, new: bool = False) -> None:
        from ptplan.rendering.frameworks import FIELDS

        key = FIELDS[field][self.col]
        assert key, f"{field} has no veRL key"
        self.rows.append(Setting(field, key, value, source, new))


def _layout(rows: _Rows, update: Any, notes: list[str]) -> None:
    """The update's parallel layout: FSDP (Ulysses cp, optimizer offload) or, for tensor or
    pipeline parallel, veRL's Megatron engine (``--config-name=ppo_megatron_trainer``)."""
    lay = update.parallel_layout if update is not None else None
    if lay is None:
        return
    if lay.tp == 1 and lay.pp == 1:
        if lay.zero_stage not in (3, None):
            notes.append(f"the update was priced with ZeRO-{lay.zero_stage}; veRL's FSDP "
                         "shards parameters, gradients and optimizer state (ZeRO-3): less "
                         "memory, more communication than planned")
        if lay.cp > 1:
            rows.add("update_cp", lay.cp, "plan update parallel_layout.cp")
        if lay.optimizer_offload:
            rows.add("update_optimizer_offload", True, "plan update parallel_layout")
        return
    if rows.col == "verl-sft":
        notes.append(f"the update was priced with Megatron parallelism (tp {lay.tp}, pp "
                     f"{lay.pp}); veRL's SFT trainer is rendered on FSDP here: not as planned "
                     "(set efficiency.train_backend: fsdp and re-plan)")
        return
    rows.config_name = "ppo_megatron_trainer"
    src = f"plan update parallel_layout (tp {lay.tp}, pp {lay.pp}, cp {lay.cp}, dp {lay.dp})"
    rows.add("megatron_tp", lay.tp, src)
    rows.add("megatron_pp", lay.pp, src)
    rows.add("megatron_cp", lay.cp, src)
    if lay.optimizer_offload:
        rows.add("megatron_optimizer_offload", True, src)


def _precisions(rows: _Rows, plan: Any, notes: list[str]) -> None:
    rollout, update, scoring = (phase(plan, n) for n in ("rollout", "update", "scoring"))
    if rollout is not None:
        q = rollout.precision
        if q == "fp8":
            rows.add("rollout_precision", "fp8", "plan rollout precision fp8")
        elif q in ("bf16", "fp16", "fp32", None):
            rows.add("rollout_precision", None, f"plan rollout precision {q}")
        else:
            notes.append(f"rollout precision {q}: veRL's rollout quantization takes fp8 (and "
                         "torchao configs) only; not rendered as planned — re-plan without "
                         f"{q} for rollout")
        kv = "fp8" if plan.policy.get("kv_cache_fp8") and q in ("fp8", "int8") else "auto"
        rows.add("kv_cache_precision", kv, "plan policy kv_cache_fp8 and rollout precision",
                 new=True)
    megatron = update is not None and update.parallel_layout is not None and (
        update.parallel_layout.tp > 1 or update.parallel_layout.pp > 1)
    if update is not None and update.precision in DTYPE:
        rows.add("megatron_precision" if megatron else "update_precision",
                 DTYPE[update.precision], "plan update precision")
    elif update is not None:
        notes.append(f"update precision {update.precision}: veRL's FSDP engine trains in "
                     "bf16/fp16/fp32; not rendered as planned")
    if scoring is not None and scoring.precision in ("fp8", "int8") \
            and "teacher" not in scoring.models:
        notes.append(f"scoring ({', '.join(scoring.models)}) was priced at {scoring.precision}; "
                     "veRL computes reference/critic log-probs in the trainer's dtype "
                     "(bfloat16): that phase runs slower than planned")


def rl_settings(plan: Any, facts: Any, slug: str,
                notes: list[str]) -> tuple[list[Setting], list[str], str]:
    """Settings and fixed words (``rollout.name`` etc.) of an RL or OPD plan."""
    run: Run = facts.run
    geo: Geometry = geometry(plan)
    rows = _Rows(sft=False)
    fixed = ["actor_rollout_ref.rollout.name=vllm", "trainer.val_before_train=False",
             f"trainer.total_epochs={plan.steps}"]  # the step count, not epochs, ends the run
    up = (f"plan pool {geo.upool.name} ({geo.upool.nodes} x {geo.upool.gpus_per_node} "
          f"{geo.upool.gpu})")
    rows.add("trainer_nodes", geo.upool.nodes, up)
    rows.add("trainer_gpus_per_node", geo.upool.gpus_per_node, up)
    for p in {q.name: q for q in (geo.upool, geo.rpool, geo.spool) if q is not None}.values():
        if gpu_resource(p.gpu) != "nvidia.com/gpu":
            notes.append(f"pool {p.name} runs on {p.gpu}: veRL {FRAMEWORK.line} with vLLM "
                         "targets CUDA GPUs; this pool needs a Neuron/ROCm build of veRL and "
                         "vLLM (not the default image)")
    rows.add("rollout_tp", geo.tp, f"plan rollout engine of {geo.engine_gpus} GPU(s), "
             f"{geo.rpool.gpus_per_node} per node")
    mini = max(1, run.mini_batches)
    if run.batch % mini:
        notes.append(f"prompts_per_step {run.batch} is not a multiple of mini_batches_per_step "
                     f"{mini}: mini-batches of {run.batch // mini} prompts")
    if geo.separate:
        rows.add("separate_pools", False, f"plan: rollout on {geo.rpool.name}, update on "
                 f"{geo.upool.name}")
        rows.add("trainer_mode", "separate_async", f"plan {plan.pipeline_mode} pipeline on "
                 "separate pools")
        rp = (f"plan pool {geo.rpool.name} ({geo.rpool.nodes} x {geo.rpool.gpus_per_node} "
              f"{geo.rpool.gpu})")
        rows.add("rollout_nodes", geo.rpool.nodes, rp)
        rows.add("rollout_gpus_per_node", geo.rpool.gpus_per_node, rp)
        rows.add("weight_sync", "nccl", "separate pools")
        rows.add("staleness_steps", run.staleness, "spec max_staleness_steps (the batches "
                 "generated ahead of the update)")
        if run.staleness > 8:
            notes.append(f"max_staleness_steps {run.staleness}: veRL {FRAMEWORK.line} drops "
                         "trajectories that span more than trainer.v1.sampler."
                         "max_off_policy_threshold (8) model versions; raise it to at least "
                         f"{run.staleness}")
        rows.add("mini_batches_per_step", mini, "spec data.mini_batches_per_step (default 1)")
        rows.add("gpu_memory_utilization", run.gpu_memory_utilization,
                 "spec efficiency.gpu_memory_utilization (the planner's KV budget)")
        if plan.pipeline_mode == "sync":
            notes.append("sync pipeline on separate pools: veRL 0.9 takes a standalone rollout "
                         "pool only in its separate_async trainer; the run overlaps rollout and "
                         "update (one step off policy), the plan priced the slower sync schedule")
    else:
        rows.add("trainer_mode", "colocate_async" if plan.pipeline_mode == "async" else "sync",
                 "plan one pool")
        rows.add("gpu_memory_utilization", run.colocated_fraction,
                 "spec efficiency.colocated_rollout_memory_fraction")
    _precisions(rows, plan, notes)
    models = scoring_models(plan)
    if plan.method == "opd":
        rows.add("advantage_estimator", "grpo", "OPD: no critic, group baseline")
    else:
        rows.add("advantage_estimator", ESTIMATOR.get(plan.algorithm or "", "grpo"),
                 f"plan algorithm {plan.algorithm}")
    if plan.algorithm == "dapo":
        rows.add("dynamic_sampling", True, "plan algorithm dapo")
        notes.append(f"DAPO: veRL drops groups of equal reward and refills them until the batch "
                     f"is full; the plan priced {run.oversample:g} generated samples per trained "
                     "one: the run generates what the data needs")
    rows.add("prompts_per_step", run.batch, "spec data.prompts_per_step")
    rows.add("samples_per_prompt", run.samples, "spec data.samples_per_prompt")
    rows.add("mini_batch", run.batch // mini, "spec prompts / mini_batches_per_step")
    rows.add("update_epochs", run.update_epochs, "spec data.update_epochs (default 1)")
    rows.add("prompt_tokens", run.prompt_tokens, "spec data.prompt_tokens")
    rows.add("max_response_tokens", run.max_response_tokens, "spec data.max_response_tokens")
    rows.add("dynamic_batch", True, "token budgets")
    notes.extend(unpacked_note(run))
    rows.add("tokens_per_gpu", run.sequence_tokens, f"prompt {run.prompt_tokens} + max "
             f"response {run.max_response_tokens} tokens: one longest sequence per GPU")
    _layout(rows, phase(plan, "update"), notes)
    if run.lora_rank:
        rows.add("lora_rank", run.lora_rank, "spec model.finetune lora")
    rows.add("steps", plan.steps, "plan steps")
    _eval(rows, run, notes, getattr(plan, "framework_key", "any") == FRAMEWORK.key)
    if run.eval_every and run.eval_samples > 1:
        fixed.append("actor_rollout_ref.rollout.val_kwargs.do_sample=True")
    _checkpoints(rows, facts, slug, notes, "actor_rollout_ref.actor")
    rows.add("rollout_log_dir", launch_path("rollout_logs"), "paths rollout_logs")
    if any(item.data_class == "eval_outputs" for item in plan.storage):
        rows.add("eval_output_dir", launch_path("eval_outputs"), "paths eval_outputs")
    else:  # nothing the plan priced (or a lifecycle rule expires) would hold them
        notes.append("no eval outputs in the plan: validation generations are not dumped to "
                     "the bucket")
    rows.add("logger", ["console"], "console only")
    spool = geo.spool
    own_scoring = spool is not None and spool.name not in (geo.upool.name, geo.rpool.name)
    if "reward" in models:
        fixed += ["reward.reward_model.enable=True",
                  f"reward.reward_model.model_path={ENV['reward_model']}"]
        if own_scoring:
            rows.add("reward_model_pool", True, "plan reward model pool")
            fixed += [f"reward.reward_model.nnodes={spool.nodes}",
                      f"reward.reward_model.n_gpus_per_node={spool.gpus_per_node}"]
    elif plan.method == "rl":
        rows.add("reward_function", ENV["reward"], "rule-based reward: REWARD_FN")
    if plan.method == "rl":
        rows.add("reference", "reference" in models, "plan scoring phase models "
                 f"{models or 'none'}")
    if plan.method == "rl" and run.agent is not None:
        _agent(rows, run, notes)
    if plan.method == "opd":
        _distillation(rows, plan, geo, notes)
    elif own_scoring and "reward" not in models:
        notes.append(f"scoring ({', '.join(models)}) was planned on its own pool {spool.name} "
                     f"({spool.nodes} x {spool.gpus_per_node} {spool.gpu}); veRL runs reference "
                     "and critic models on the trainer pool: that pool gets no work from veRL "
                     "(its cost is spent idle) and the update pool carries the scoring")
    return rows.rows, fixed, rows.config_name


def _agent(rows: _Rows, run: Run, notes: list[str]) -> None:
    """The spec's ``agent:`` as veRL 0.9.1's multi-turn agent loop (``rollout.multi_turn``,
    ``rollout.agent``; ``verl/experimental/agent_loop/tool_agent_loop.py``): the episode ends
    after ``max_assistant_turns`` model turns or ``max_user_turns`` tool responses; each vLLM
    engine keeps ``max_num_seqs`` sequences in flight."""
    a = run.agent
    turns = max_turns(a)
    rows.add("agent_multi_turn", True, "spec agent:")
    rows.add("agent_loop", "tool_agent", "spec agent: tool-calling episodes")
    rows.add("agent_code", "${oc.env:AGENT_PATH}", "AGENT_PATH: the tool config (BaseTool)")
    rows.add("agent_max_turns", turns, "spec agent.turns")
    rows.add("agent_max_tool_calls", max(1, turns - 1), "spec agent.turns - 1")
    rows.add("agent_concurrency", a.concurrency_per_replica,
             "spec agent.concurrency_per_replica")
    notes.append(f"agent: {a.tokens_per_turn} tokens per turn: veRL {FRAMEWORK.line}'s tool "
                 "agent loop has no per-turn generation cap; the episode's model and tool "
                 "tokens share data.max_response_length")
    if a.observation_tokens_per_turn:
        notes.append(f"agent: {a.observation_tokens_per_turn} observation tokens per turn were "
                     "planned; veRL caps tool responses in characters "
                     "(multi_turn.max_tool_response_length, default 256): set it in the tool "
                     "config's terms")
    episode = turns * a.tokens_per_turn + (turns - 1) * a.observation_tokens_per_turn
    if episode > run.max_response_tokens:
        notes.append(f"agent: an episode of {turns} turns holds {episode} response and "
                     f"observation tokens, above data.max_response_length "
                     f"{run.max_response_tokens}: veRL truncates it there")


def _eval(rows: _Rows, run: Run, notes: list[str], priced_for_verl: bool = False) -> None:
    """``priced_for_verl``: the plan was made for veRL, so its eval was priced at veRL's
    validation cap (the training response cap, docs/frameworks.md) and needs no note."""
    if run.eval_every:
        rows.add("eval_every_steps", run.eval_every, "spec eval.every_steps")
        rows.add("eval_prompts", run.eval_prompts, "spec eval.prompts")
        if rows.col == "verl":
            rows.add("eval_samples_per_prompt", run.eval_samples, "spec eval.samples_per_prompt")
            if run.eval_response_tokens and run.eval_response_tokens != run.max_response_tokens \
                    and not priced_for_verl:
                notes.append(f"eval response tokens {run.eval_response_tokens}: veRL validates "
                             "with the training response cap "
                             f"({run.max_response_tokens}); responses stop at EOS")
    else:
        rows.add("eval_every_steps", -1, "no eval in the spec")


def _checkpoints(rows: _Rows, facts: Any, slug: str, notes: list[str], actor: str) -> None:
    if facts.every_steps:
        rows.add("checkpoint_every_steps", facts.every_steps, "plan lifecycle.every_steps")
    if facts.keep_hot:
        rows.add("checkpoint_keep", facts.keep_hot, "plan lifecycle.keep_hot")
    contents = ["model", "optimizer", "extra"] if facts.run.with_optimizer else ["model", "extra"]
    rows.add("checkpoint_contents", contents, "spec checkpoints.with_optimizer")
    rows.add("checkpoint_dir", launch_path("hot_checkpoints"), "paths hot_checkpoints")
    rows.add("resume", "auto", "resume after restarts")


def _distillation(rows: _Rows, plan: Any, geo: Geometry, notes: list[str]) -> None:
    scoring = phase(plan, "scoring")
    spool = geo.spool
    if spool is None or spool.name == geo.upool.name:
        notes.append("OPD: the plan scores the teacher on the trainer pool; veRL 0.9 runs the "
                     "teacher on its own pool only (distillation.nnodes > 0): not rendered as "
                     "planned")
        return
    tgpus = max(1, scoring.replica_gpus)
    rows.add("distillation", True, "plan method opd")
    rows.add("teacher_nodes", spool.nodes, f"plan pool {spool.name}")
    rows.add("teacher_gpus_per_node", spool.gpus_per_node, f"plan pool {spool.name}")
    rows.add("teacher_replicas", spool.nodes * spool.gpus_per_node // tgpus,
             "teacher pool GPUs / replica GPUs")
    rows.add("teacher_tp", tgpus, "plan scoring replica_gpus")
    rows.add("teacher_weights", ENV["teacher"], "TEACHER_PATH")
    rows.add("distillation_loss", "k1", "reverse KL per token")
    notes.append("OPD: veRL still scores task rewards it then ignores (use_task_rewards=False): "
                 "the data's data_source needs a scorer veRL knows, or set "
                 "reward.custom_reward_function.path")
    if spool.name == geo.rpool.name:
        notes.append("OPD: teacher and rollout share a pool in the plan; veRL gives the teacher "
                     "its own pool (distillation.nnodes)")


def rl_extra(plan: Any) -> list[str]:
    """Fixed words that hold no planned value but keep veRL from its defaults."""
    out = []
    if plan.method == "opd":
        out += ["distillation.distillation_loss.use_policy_gradient=True",
                "distillation.distillation_loss.use_task_rewards=False"]
    return out


def sft_settings(plan: Any, facts: Any, slug: str,
                 notes: list[str]) -> tuple[list[Setting], list[str], str]:
    run: Run = facts.run
    geo = geometry(plan)
    rows = _Rows(sft=True)
    rows.add("trainer_nodes", geo.upool.nodes, "plan pool")
    rows.add("trainer_gpus_per_node", geo.upool.gpus_per_node, "plan pool")
    rows.add("prompts_per_step", run.batch, "spec data.batch_size")
    rows.add("sequence_tokens", run.sequence_tokens, "spec data.tokens_per_example")
    rows.add("dynamic_batch", True, "token budgets")
    rows.add("tokens_per_gpu", run.sequence_tokens, "one example per micro-batch at least")
    update = phase(plan, "update")
    if update is not None and update.precision in DTYPE:
        rows.add("update_precision", DTYPE[update.precision], "plan update precision")
    _layout(rows, update, notes)
    if run.lora_rank:
        rows.add("lora_rank", run.lora_rank, "spec model.finetune lora")
    rows.add("steps", plan.steps, "plan steps")
    rows.add("epochs", ceil_int(run.epochs), "spec data.epochs")
    _eval(rows, run, notes)
    _checkpoints(rows, facts, slug, notes, "")
    rows.add("logger", ["console"], "console only")
    notes.append(f"SFT: data.max_length = tokens_per_example ({run.sequence_tokens}), the "
                 "length the plan priced; longer examples are cut on the right "
                 "(data.truncation=right)")
    return rows.rows, ["data.truncation=right"], rows.config_name


def command(plan: Any, facts: Any, slug: str, notes: list[str]) -> dict[str, Any]:
    """Launch dict: ``settings``, ``words`` (the whole command), ``module``, ``torchrun``."""
    pools: dict[str, str] = {}
    if plan.method == "sft":
        settings, fixed, config = sft_settings(plan, facts, slug, notes)
        nproc = geometry(plan).upool.gpus_per_node
        head = ["torchrun", "--standalone", "--nnodes=1", f"--nproc_per_node={nproc}", "-m"]
        module = "verl.trainer.sft_trainer"
        data = [f"data.train_files={ENV['train']}", f"data.val_files={ENV['val']}",
                f"model.path={ENV['model']}"]
    else:
        settings, fixed, config = rl_settings(plan, facts, slug, notes)
        fixed += rl_extra(plan)
        module = "verl.trainer.main_ppo"
        # through the pool-pinning launcher (optimizer/rendering/pinning.py)
        pools = roles(plan, "verl")
        head = launcher_words(module, pools)[:-1]
        data = [f"data.train_files={ENV['train']}", f"data.val_files={ENV['val']}",
                f"actor_rollout_ref.model.path={ENV['model']}"]
    flags = [] if config in ("ppo_trainer", "sft_trainer_engine") else [f"--config-name={config}"]
    words = [*head, module, *flags, *data, f"trainer.project_name={slug}",
             f"trainer.experiment_name={slug}", *[word(s) for s in settings], *fixed]
    return {"module": module, "torchrun": plan.method == "sft", "settings": settings,
            "words": words, "config_name": config, "ray_roles": pools}
