"""Launch arguments (veRL, OpenRLHF), all from the plan (docs/render.md has the table).

``trainer.nnodes`` / ``n_gpus_per_node`` = the update pool's nodes and GPUs per node; the
rollout's tensor-parallel size = min(replica GPUs of the rollout phase, GPUs per node) and its
pipeline-parallel size = replica GPUs / TP (a replica spanning nodes); vLLM engines = rollout
pool GPUs // replica GPUs; a rollout pool distinct from the update pool switches veRL off its
hybrid engine (``rollout.nnodes`` / ``rollout.n_gpus_per_node``); fp8/int8 rollout precision →
vLLM quantization. ``trainer.save_freq`` = the plan's ``lifecycle.every_steps``.
"""

from __future__ import annotations

from typing import Any

from optimizer.plan.schema import REGENERATE, Plan
from optimizer.render.facts import Facts

VERL_ESTIMATOR = {"ppo": "gae", "grpo": "grpo", "dapo": "grpo"}
"""veRL ``algorithm.adv_estimator`` (DAPO = GRPO advantages + dynamic sampling in its recipe)."""
OPENRLHF_ESTIMATOR = {"ppo": "gae", "grpo": "group_norm", "dapo": "group_norm"}


def _phase(plan: Plan, name: str) -> Any:
    return next((p for p in plan.phases if p.name == name), None)


def _pool(plan: Plan, name: str | None) -> Any:
    return next((p for p in plan.pools if p.name == name), None)


def launch_args(plan: Plan, facts: Facts) -> dict[str, Any]:
    """veRL and OpenRLHF arguments matching the plan's pools (see the module docstring)."""
    update = _phase(plan, "update")
    upool = _pool(plan, update.pool if update else None) or plan.pools[0]
    verl: list[str] = [f"trainer.nnodes={upool.nodes}",
                       f"trainer.n_gpus_per_node={upool.gpus_per_node}"]
    notes: list[str] = []
    out: dict[str, Any] = {"update_pool": upool.name, "notes": notes}
    save = [f"trainer.save_freq={facts.every_steps}"] if facts.every_steps else []
    if facts.every_steps is None:
        notes.append("the checkpoint cadence is not recorded in this plan (schema 1): "
                     "trainer.save_freq / --save_steps left out; pass --spec SPEC, or "
                     f"{REGENERATE}")
    ckpt = ["trainer.resume_mode=auto", "trainer.default_local_dir=/checkpoints/checkpoints"]
    if plan.method == "sft":
        out.update(module="verl.trainer.fsdp_sft_trainer", torchrun=True,
                   verl=[*verl, f"trainer.total_training_steps={plan.steps}", *save, *ckpt],
                   openrlhf=None)
        return out
    rollout = _phase(plan, "rollout")
    rpool = _pool(plan, rollout.pool) if rollout else upool
    rgpus = max(1, rollout.replica_gpus if rollout else 1)
    if rollout is not None and rollout.parallel_layout is not None:
        rgpus = max(rgpus, rollout.parallel_layout.tp)  # the engine size priced at this pool
    tp = min(rgpus, rpool.gpus_per_node)
    pp = max(1, rgpus // tp)
    engines = max(1, rpool.nodes * rpool.gpus_per_node // rgpus)
    separate = rpool.name != upool.name
    verl += ["actor_rollout_ref.rollout.name=vllm",
             f"actor_rollout_ref.rollout.tensor_model_parallel_size={tp}"]
    if pp > 1:
        verl.append(f"+actor_rollout_ref.rollout.pipeline_model_parallel_size={pp}")
    if rollout is not None and rollout.precision in ("fp8", "int8"):
        quant = "fp8" if rollout.precision == "fp8" else "bitsandbytes"
        verl.append(f"+actor_rollout_ref.rollout.engine_kwargs.vllm.quantization={quant}")
    if separate:
        verl += ["actor_rollout_ref.hybrid_engine=False", f"rollout.nnodes={rpool.nodes}",
                 f"rollout.n_gpus_per_node={rpool.gpus_per_node}"]
    scoring = _phase(plan, "scoring")
    spool = _pool(plan, scoring.pool) if scoring else None
    if spool is not None and spool.name not in (upool.name, rpool.name):
        if "teacher" in scoring.models:
            tgpus = max(1, scoring.replica_gpus)
            verl.append("actor_rollout_ref.teacher.n_server_workers="
                        f"{spool.nodes * spool.gpus_per_node // tgpus}")
            notes.append(f"teacher: a vLLM server group on pool {spool.name} "
                         f"({spool.nodes} x {spool.gpus_per_node} {spool.gpu}, {tgpus} GPUs "
                         "per server); set actor_rollout_ref.teacher.server_ip/port to it")
        elif "reward" in scoring.models:
            verl += ["reward_model.enable_resource_pool=True",
                     f"reward_model.nnodes={spool.nodes}",
                     f"reward_model.n_gpus_per_node={spool.gpus_per_node}"]
        else:
            notes.append(f"scoring ({', '.join(scoring.models)}) has its own pool {spool.name}; "
                         "veRL places reference/critic models on the trainer pool")
    verl += _verl_layout(update, notes)
    verl += [f"trainer.total_training_steps={plan.steps}", *save, *ckpt]
    module = "verl.experimental.one_step_off_policy.main_ppo" if separate else \
        "verl.trainer.main_ppo"
    if plan.method == "rl":
        estimator = VERL_ESTIMATOR.get(plan.algorithm or "", "grpo")
        verl.insert(0, f"algorithm.adv_estimator={estimator}")
    if separate and plan.pipeline_mode == "sync":
        notes.append("sync pipeline on separate pools: veRL runs its one-step-off-policy "
                     "trainer; the plan priced the slower synchronous schedule")
    openrlhf = None
    if plan.method == "rl":
        estimator = OPENRLHF_ESTIMATOR.get(plan.algorithm or "", "group_norm")
        openrlhf = [f"--advantage_estimator={estimator}",
                    f"--actor_num_nodes={upool.nodes}",
                    f"--actor_num_gpus_per_node={upool.gpus_per_node}",
                    f"--vllm_num_engines={engines}", f"--vllm_tensor_parallel_size={tp}",
                    "--ckpt_path=/checkpoints/checkpoints", "--load_checkpoint"]
        if facts.every_steps:
            openrlhf.append(f"--save_steps={facts.every_steps}")
        openrlhf += _openrlhf_layout(update, notes)
        if scoring is not None and "reference" in scoring.models:
            ref = spool or upool
            openrlhf += [f"--ref_num_nodes={ref.nodes}",
                         f"--ref_num_gpus_per_node={ref.gpus_per_node}"]
            if ref.name == upool.name and separate:
                openrlhf.append("--colocate_actor_ref")
        if not separate:
            openrlhf.append("--colocate_all_models")
        elif plan.pipeline_mode == "async":
            openrlhf.append("--async_train")
    out.update(module=module, torchrun=False, verl=verl, openrlhf=openrlhf, tp=tp, pp=pp,
               engines=engines, rollout_pool=rpool.name)
    return out


def _verl_layout(update: Any, notes: list[str]) -> list[str]:
    """The update's parallel layout as veRL arguments: FSDP (ZeRO-3) with Ulysses sequence
    parallel and optimizer offload, or Megatron's tensor / pipeline / context parallel."""
    lay = update.parallel_layout if update is not None else None
    if lay is None:
        return []
    if lay.tp == 1 and lay.pp == 1 and lay.zero_stage == 3:
        out = []
        if lay.cp > 1:
            out.append(f"actor_rollout_ref.actor.ulysses_sequence_parallel_size={lay.cp}")
        if lay.optimizer_offload:
            out.append("actor_rollout_ref.actor.fsdp_config.optimizer_offload=True")
        return out
    notes.append(f"the update was priced with Megatron parallelism (tp {lay.tp}, pp {lay.pp}, "
                 f"cp {lay.cp}, dp {lay.dp}): run veRL with --config-name=ppo_megatron_trainer")
    out = [f"actor_rollout_ref.actor.megatron.tensor_model_parallel_size={lay.tp}",
           f"actor_rollout_ref.actor.megatron.pipeline_model_parallel_size={lay.pp}",
           f"actor_rollout_ref.actor.megatron.context_parallel_size={lay.cp}"]
    if lay.optimizer_offload:
        out.append("actor_rollout_ref.actor.megatron.optimizer_offload=True")
    return out


def _openrlhf_layout(update: Any, notes: list[str]) -> list[str]:
    """The update's layout as OpenRLHF (DeepSpeed) arguments: ZeRO stage, Adam offload, ring
    attention for context parallel; DeepSpeed has no tensor or pipeline parallel."""
    lay = update.parallel_layout if update is not None else None
    if lay is None:
        return []
    out = [f"--zero_stage={lay.zero_stage if lay.zero_stage in (1, 2, 3) else 3}"]
    if lay.optimizer_offload:
        out.append("--adam_offload")
    if lay.cp > 1:
        out.append(f"--ring_attn_size={lay.cp}")
    if lay.tp > 1 or lay.pp > 1:
        notes.append(f"OpenRLHF (DeepSpeed) has no tensor/pipeline parallel: the plan's update "
                     f"layout (tp {lay.tp}, pp {lay.pp}) is for veRL's Megatron backend; "
                     "with OpenRLHF set efficiency.train_backend: fsdp and re-plan")
    return out


def verl_words(launch: dict[str, Any], slug: str, nproc: int) -> list[str]:
    """The veRL command line as words; data and model come from the environment (OmegaConf
    ``${oc.env:...}``, resolved by veRL, not by the shell)."""
    model = "model.partial_pretrain" if launch["torchrun"] else "actor_rollout_ref.model.path"
    head = (["torchrun", "--standalone", "--nnodes=1", f"--nproc_per_node={nproc}", "-m"]
            if launch["torchrun"] else ["python3", "-m"])
    return [*head, launch["module"], "data.train_files=${oc.env:TRAIN_FILES}",
            "data.val_files=${oc.env:VAL_FILES}", model + "=${oc.env:MODEL_PATH}",
            f"trainer.project_name={slug}", f"trainer.experiment_name={slug}", *launch["verl"]]
