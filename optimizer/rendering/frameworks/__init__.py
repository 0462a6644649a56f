"""Framework targets of the launch commands: one module per framework and version line.

``render --framework NAME==LINE`` picks one (:func:`parse_framework`); the default is the
current release line of veRL. Each module turns the plan (pools, phases, layouts, precisions,
lifecycle) and the run settings of the spec (batch, samples, lengths, eval, checkpoint
contents: the plan does not record them) into :class:`Setting` rows, field → framework key →
value, and the rows into the command line. :data:`FIELDS` is the mapping as data; the same
table is in ``docs/render.md`` and ``tests/test_launch_mapping.py`` checks both, and walks the
rows of every example against the rendered command and the framework's own parser.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Any

from ptplan.core.errors import InputError
from ptplan.spec import frameworks as releases


@dataclass(frozen=True)
class Framework:
    name: str
    line: str
    """Release line (``0.9``): the flags and entry points of this module hold for all of it."""
    pin: str
    """The release installed by the launch (``pip install NAME==PIN``) and checked in CI."""

    @property
    def spec(self) -> str:
        return f"{self.name}=={self.pin}"

    @property
    def key(self) -> str:
        """``name==line``, the spec's ``framework:`` value (:mod:`ptplan.spec.frameworks`)."""
        return f"{self.name}=={self.line}"

    @property
    def install(self) -> list[str]:
        """The install step (SkyPilot ``setup``, launch scripts) as words: this release and
        the Python dependencies it declares, on an image with CUDA, torch, vLLM and Ray
        (:data:`ptplan.rendering.context.DEFAULT_IMAGE`, or ``--image``)."""
        return ["python3", "-m", "pip", "install", self.spec]


VERL_0_9, OPENRLHF_0_11 = (Framework(r.package, r.key.partition("==")[2], r.pin)
                           for r in (releases.VERL_0_9, releases.OPENRLHF_0_11))
"""The launch targets of the capability table's releases (one place holds each pin)."""
SUPPORTED: dict[str, Framework] = {f.key: f for f in (VERL_0_9, OPENRLHF_0_11)}
DEFAULT = VERL_0_9
"""Current release lines on PyPI: veRL 0.9.x, OpenRLHF 0.11.x."""


def parse_framework(text: str | None) -> Framework:
    """``verl``, ``verl==0.9`` or ``verl==0.9.1``, read as the spec's ``framework:`` is."""
    if not text:
        return DEFAULT
    key: str | None = None
    with contextlib.suppress(InputError):  # an unknown name: the message below
        key = releases.normalise(text)
    if key not in SUPPORTED:  # unknown, or ``any`` (no release to launch)
        raise InputError(f"--framework: {text!r} is not supported; use one of "
                         f"{', '.join(SUPPORTED)} (default {DEFAULT.key})")
    return SUPPORTED[key]


def framework_for(plan: Any, text: str | None) -> Framework:
    """The release a plan's launch targets: the one the plan was made for (schema 9); for a plan
    made for ``any`` (or before schema 9), ``--framework`` or the default. A ``--framework``
    other than the plan's is refused: the plan bought pools, GPUs and precisions for its own."""
    made_for = getattr(plan, "framework_key", "any")
    if text is None:
        return SUPPORTED.get(made_for, DEFAULT)
    fw = parse_framework(text)
    if made_for != "any" and fw.key != made_for:
        raise InputError(f"--framework {text}: the plan was made for {made_for}; its pools, GPUs "
                         f"and precisions are what {made_for} runs. Re-plan for {fw.key} "
                         f"(`ptplan plan SPEC --framework {fw.key}`) or drop --framework")
    return fw


@dataclass(frozen=True)
class Setting:
    """One planned value as a framework argument: ``field`` (the planned quantity), ``key``
    (the framework's config key or flag), ``value`` (what the composed config must hold)."""

    field: str
    key: str
    value: Any
    source: str
    new: bool = False
    """veRL: a key absent from the framework's YAML (Hydra ``+key=value``)."""


FIELDS: dict[str, dict[str, str]] = {
    # field: {source, verl (RL/OPD), verl-sft, openrlhf}; "" = not expressed (a note says so)
    "trainer_nodes": {"source": "plan: nodes of the pool running update",
                      "verl": "trainer.nnodes", "verl-sft": "trainer.nnodes",
                      "openrlhf": "--actor.num_nodes"},
    "trainer_gpus_per_node": {"source": "plan: GPUs per node of that pool",
                              "verl": "trainer.n_gpus_per_node",
                              "verl-sft": "trainer.n_gpus_per_node",
                              "openrlhf": "--actor.num_gpus_per_node"},
    "rollout_nodes": {"source": "plan: rollout pool nodes (separate pool)",
                      "verl": "actor_rollout_ref.rollout.nnodes", "verl-sft": "",
                      "openrlhf": ""},
    "rollout_gpus_per_node": {"source": "plan: rollout pool GPUs per node (separate pool)",
                              "verl": "actor_rollout_ref.rollout.n_gpus_per_node",
                              "verl-sft": "", "openrlhf": ""},
    "rollout_engines": {"source": "plan: rollout pool GPUs / engine GPUs", "verl": "",
                        "verl-sft": "", "openrlhf": "--vllm.num_engines"},
    "rollout_tp": {"source": "plan: rollout engine GPUs (replica_gpus; tensor parallel across "
                              "nodes when the engine spans them)",
                   "verl": "actor_rollout_ref.rollout.tensor_model_parallel_size",
                   "verl-sft": "", "openrlhf": "--vllm.tensor_parallel_size"},
    "gpu_memory_utilization": {
        "source": "spec efficiency.gpu_memory_utilization (own pool) or "
                  "colocated_rollout_memory_fraction (colocated)",
        "verl": "actor_rollout_ref.rollout.gpu_memory_utilization", "verl-sft": "",
        "openrlhf": "--vllm.gpu_memory_utilization"},
    "rollout_precision": {"source": "plan: rollout phase precision (fp8 → fp8 quantization)",
                          "verl": "actor_rollout_ref.rollout.quantization", "verl-sft": "",
                          "openrlhf": ""},
    "kv_cache_precision": {"source": "plan policy kv_cache_fp8 with fp8/int8 weights, else "
                                     "16 bit (auto)",
                           "verl": "actor_rollout_ref.rollout.engine_kwargs.vllm.kv_cache_dtype",
                           "verl-sft": "", "openrlhf": ""},
    "update_precision": {"source": "plan: update phase precision",
                         "verl": "actor_rollout_ref.actor.fsdp_config.dtype",
                         "verl-sft": "engine.dtype", "openrlhf": "--ds.param_dtype"},
    "update_cp": {"source": "plan: update parallel_layout.cp",
                  "verl": "actor_rollout_ref.actor.ulysses_sequence_parallel_size",
                  "verl-sft": "engine.ulysses_sequence_parallel_size",
                  "openrlhf": "--ds.ring_attn_size"},
    "update_optimizer_offload": {"source": "plan: update parallel_layout.optimizer_offload",
                                 "verl": "actor_rollout_ref.actor.fsdp_config.optimizer_offload",
                                 "verl-sft": "engine.optimizer_offload",
                                 "openrlhf": "--ds.adam_offload"},
    "megatron_tp": {"source": "plan: update parallel_layout.tp (Megatron layout)",
                    "verl": "actor_rollout_ref.actor.megatron.tensor_model_parallel_size",
                    "verl-sft": "", "openrlhf": ""},
    "megatron_pp": {"source": "plan: update parallel_layout.pp (Megatron layout)",
                    "verl": "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size",
                    "verl-sft": "", "openrlhf": ""},
    "megatron_cp": {"source": "plan: update parallel_layout.cp (Megatron layout)",
                    "verl": "actor_rollout_ref.actor.megatron.context_parallel_size",
                    "verl-sft": "", "openrlhf": ""},
    "megatron_optimizer_offload": {"source": "plan: update optimizer_offload (Megatron layout)",
                                   "verl": "actor_rollout_ref.actor.megatron.optimizer_offload",
                                   "verl-sft": "", "openrlhf": ""},
    "megatron_precision": {"source": "plan: update phase precision (Megatron layout)",
                           "verl": "actor_rollout_ref.actor.megatron.dtype", "verl-sft": "",
                           "openrlhf": ""},
    "lora_rank": {"source": "spec model.finetune lora, model.lora_rank (default 16)",
                  "verl": "actor_rollout_ref.model.lora_rank", "verl-sft": "model.lora_rank",
                  "openrlhf": "--ds.lora.rank"},
    "update_zero_stage": {"source": "plan: update parallel_layout.zero_stage", "verl": "",
                          "verl-sft": "", "openrlhf": "--ds.zero_stage"},
    "separate_pools": {"source": "plan: rollout pool is not the update pool",
                       "verl": "actor_rollout_ref.hybrid_engine", "verl-sft": "",
                       "openrlhf": ""},
    "trainer_mode": {"source": "plan: pipeline_mode + pools (separate → separate_async)",
                     "verl": "trainer.v1.trainer_mode", "verl-sft": "",
                     "openrlhf": "--train.async_enable"},
    "colocated": {"source": "plan: one pool runs rollout and update", "verl": "",
                  "verl-sft": "", "openrlhf": "--train.colocate_all"},
    "weight_sync": {"source": "separate pools sync weights over NCCL",
                    "verl": "actor_rollout_ref.rollout.checkpoint_engine.backend",
                    "verl-sft": "", "openrlhf": "--vllm.sync_backend"},
    "advantage_estimator": {"source": "plan algorithm (ppo → gae; grpo, dapo → group)",
                            "verl": "algorithm.adv_estimator", "verl-sft": "",
                            "openrlhf": "--algo.advantage.estimator"},
    "dynamic_sampling": {"source": "plan algorithm dapo (groups of equal reward dropped, "
                                   "refilled)",
                         "verl": "algorithm.filter_groups.enable", "verl-sft": "",
                         "openrlhf": "--algo.dynamic_filtering_enable"},
    "prompts_per_step": {"source": "spec data.prompts_per_step (SFT: data.batch_size)",
                         "verl": "data.train_batch_size", "verl-sft": "data.train_batch_size",
                         "openrlhf": "--rollout.batch_size"},
    "samples_per_prompt": {"source": "spec data.samples_per_prompt",
                           "verl": "actor_rollout_ref.rollout.n", "verl-sft": "",
                           "openrlhf": "--rollout.n_samples_per_prompt"},
    "mini_batch": {"source": "spec prompts_per_step / mini_batches_per_step",
                   "verl": "actor_rollout_ref.actor.ppo_mini_batch_size", "verl-sft": "",
                   "openrlhf": "--train.batch_size"},
    "mini_batches_per_step": {"source": "spec data.mini_batches_per_step (separate pools)",
                              "verl": "trainer.v1.separate_async.parameter_sync_step",
                              "verl-sft": "", "openrlhf": ""},
    "update_epochs": {"source": "spec data.update_epochs",
                      "verl": "actor_rollout_ref.actor.ppo_epochs", "verl-sft": "",
                      "openrlhf": "--train.max_epochs"},
    "prompt_tokens": {"source": "spec data.prompt_tokens", "verl": "data.max_prompt_length",
                      "verl-sft": "", "openrlhf": ""},
    "max_response_tokens": {"source": "spec data.max_response_tokens",
                            "verl": "data.max_response_length", "verl-sft": "",
                            "openrlhf": "--rollout.max_new_tokens"},
    "sequence_tokens": {"source": "spec prompt + max response tokens (SFT: tokens_per_example)",
                        "verl": "", "verl-sft": "data.max_length", "openrlhf": "--data.max_len"},
    "dynamic_batch": {"source": "token budgets instead of micro-batch counts",
                      "verl": "actor_rollout_ref.actor.use_dynamic_bsz",
                      "verl-sft": "data.use_dynamic_bsz",
                      "openrlhf": "--train.dynamic_batch_enable"},
    "tokens_per_gpu": {"source": "one longest sequence × update cp per micro-batch",
                       "verl": "actor_rollout_ref.actor.ppo_max_token_len_per_gpu",
                       "verl-sft": "data.max_token_len_per_gpu",
                       "openrlhf": "--train.max_tokens_per_gpu"},
    "steps": {"source": "plan steps", "verl": "trainer.total_training_steps",
              "verl-sft": "trainer.total_training_steps", "openrlhf": "--data.max_samples"},
    "epochs": {"source": "spec data.epochs (SFT; rounded up, steps cap the run)", "verl": "",
               "verl-sft": "trainer.total_epochs", "openrlhf": ""},
    "eval_every_steps": {"source": "spec eval.every_steps", "verl": "trainer.test_freq",
                         "verl-sft": "trainer.test_freq", "openrlhf": "--eval.steps"},
    "eval_prompts": {"source": "spec eval.prompts", "verl": "data.val_max_samples",
                     "verl-sft": "data.val_max_samples", "openrlhf": ""},
    "eval_samples_per_prompt": {"source": "spec eval.samples_per_prompt",
                                "verl": "actor_rollout_ref.rollout.val_kwargs.n",
                                "verl-sft": "", "openrlhf": "--eval.n_samples_per_prompt"},
    "checkpoint_every_steps": {"source": "plan lifecycle.every_steps", "verl": "trainer.save_freq",
                               "verl-sft": "trainer.save_freq", "openrlhf": "--ckpt.save_steps"},
    "checkpoint_keep": {"source": "plan lifecycle.keep_hot",
                        "verl": "trainer.max_actor_ckpt_to_keep",
                        "verl-sft": "trainer.max_ckpt_to_keep", "openrlhf": "--ckpt.max_num"},
    "checkpoint_contents": {"source": "spec checkpoints.with_optimizer",
                            "verl": "actor_rollout_ref.actor.checkpoint.save_contents",
                            "verl-sft": "checkpoint.save_contents", "openrlhf": ""},
    "checkpoint_dir": {"source": "paths.PREFIX hot_checkpoints under the project",
                       "verl": "trainer.default_local_dir", "verl-sft": "trainer.default_local_dir",
                       "openrlhf": "--ckpt.path"},
    "resume": {"source": "spot restarts resume from the bucket", "verl": "trainer.resume_mode",
               "verl-sft": "trainer.resume_mode", "openrlhf": "--ckpt.load_enable"},
    "rollout_log_dir": {"source": "paths.PREFIX rollout_logs", "verl": "trainer.rollout_data_dir",
                        "verl-sft": "", "openrlhf": ""},
    "eval_output_dir": {"source": "paths.PREFIX eval_outputs (OpenRLHF: its metrics)",
                        "verl": "trainer.validation_data_dir", "verl-sft": "",
                        "openrlhf": "--logger.tensorboard_dir"},
    "logger": {"source": "console (no wandb key needed)", "verl": "trainer.logger",
               "verl-sft": "trainer.logger", "openrlhf": ""},
    "reward_function": {"source": "rule-based reward (no reward model in the plan): "
                                  "REWARD_FN file",
                        "verl": "reward.custom_reward_function.path", "verl-sft": "",
                        "openrlhf": "--reward.remote_url"},
    "reward_model_pool": {"source": "plan: reward model on its own pool",
                          "verl": "reward.reward_model.enable_resource_pool", "verl-sft": "",
                          "openrlhf": ""},
    "reference": {"source": "plan: scoring runs the reference model (KL loss)",
                  "verl": "actor_rollout_ref.actor.use_kl_loss", "verl-sft": "",
                  "openrlhf": "--algo.kl.use_loss"},
    "distillation": {"source": "plan method opd", "verl": "distillation.enabled",
                     "verl-sft": "", "openrlhf": ""},
    "teacher_nodes": {"source": "plan: teacher scoring pool nodes", "verl": "distillation.nnodes",
                      "verl-sft": "", "openrlhf": ""},
    "teacher_gpus_per_node": {"source": "plan: teacher pool GPUs per node",
                              "verl": "distillation.n_gpus_per_node", "verl-sft": "",
                              "openrlhf": ""},
    "teacher_replicas": {"source": "plan: teacher pool GPUs / scoring replica GPUs",
                         "verl": "distillation.teacher_models.teacher_model.num_replicas",
                         "verl-sft": "", "openrlhf": ""},
    "teacher_tp": {"source": "plan: scoring replica_gpus",
                   "verl": "distillation.teacher_models.teacher_model.inference."
                           "tensor_model_parallel_size", "verl-sft": "", "openrlhf": ""},
    "teacher_weights": {"source": "TEACHER_PATH (the plan names no weights)",
                        "verl": "distillation.teacher_models.teacher_model.model_path",
                        "verl-sft": "", "openrlhf": ""},
    "distillation_loss": {"source": "reverse KL per token as a policy-gradient reward",
                          "verl": "distillation.distillation_loss.loss_mode", "verl-sft": "",
                          "openrlhf": ""},
    # agentic plans (spec agent:, issue #25; verl/experimental/agent_loop/tool_agent_loop.py,
    # openrlhf/utils/agent.py of the pinned releases)
    "agent_multi_turn": {"source": "spec agent: multi-turn tool rollouts",
                         "verl": "actor_rollout_ref.rollout.multi_turn.enable", "verl-sft": "",
                         "openrlhf": ""},
    "agent_loop": {"source": "spec agent: veRL's tool-calling agent loop",
                   "verl": "actor_rollout_ref.rollout.agent.default_agent_loop",
                   "verl-sft": "", "openrlhf": ""},
    "agent_code": {"source": "AGENT_PATH: veRL's tool config YAML, OpenRLHF's agent .py",
                   "verl": "actor_rollout_ref.rollout.multi_turn.tool_config_path",
                   "verl-sft": "", "openrlhf": "--train.agent_func_path"},
    "agent_max_turns": {"source": "spec agent.turns (model turns per episode)",
                        "verl": "actor_rollout_ref.rollout.multi_turn.max_assistant_turns",
                        "verl-sft": "", "openrlhf": ""},
    "agent_max_tool_calls": {"source": "spec agent.turns - 1 (tool calls per episode)",
                             "verl": "actor_rollout_ref.rollout.multi_turn.max_user_turns",
                             "verl-sft": "", "openrlhf": ""},
    "agent_concurrency": {"source": "spec agent.concurrency_per_replica (episodes in flight "
                                    "per engine)",
                          "verl": "actor_rollout_ref.rollout.max_num_seqs", "verl-sft": "",
                          "openrlhf": ""},
}
"""The mapping field → framework key (``docs/render.md`` has the same table)."""


# ---- what the plan and the spec say -------------------------------------------------------

def phase(plan: Any, name: str) -> Any:
    return next((p for p in plan.phases if p.name == name), None)


def pool(plan: Any, name: str | None) -> Any:
    return next((p for p in plan.pools if p.name == name), None)


@dataclass(frozen=True)
class Geometry:
    """Pools and engines the plan sized."""

    upool: Any
    rpool: Any
    spool: Any
    engine_gpus: int
    engines: int

    @property
    def separate(self) -> bool:
        return self.rpool.name != self.upool.name

    @property
    def tp(self) -> int:
        """An engine's tensor-parallel degree: all its GPUs, across nodes when it spans them (no
        pipeline-parallel rollout: verl/workers/config/rollout.py rejects it for vLLM)."""
        return self.engine_gpus


def geometry(plan: Any) -> Geometry:
    update = phase(plan, "update")
    upool = pool(plan, update.pool if update else None) or plan.pools[0]
    rollout = phase(plan, "rollout")
    rpool = pool(plan, rollout.pool) if rollout else upool
    g = max(1, rollout.replica_gpus if rollout else 1)
    if rollout is not None and rollout.parallel_layout is not None:
        g = max(g, rollout.parallel_layout.tp)  # the engine size priced at this pool
    scoring = phase(plan, "scoring")
    spool = pool(plan, scoring.pool) if scoring else None
    return Geometry(upool, rpool, spool, g, max(1, rpool.nodes * rpool.gpus_per_node // g))


def scoring_models(plan: Any) -> list[str]:
    s = phase(plan, "scoring")
    return list(s.models) if s is not None else []


@dataclass(frozen=True)
class Run:
    """Run settings of the spec that the plan does not record (the plan was priced with them)."""

    batch: int
    samples: int
    prompt_tokens: int
    max_response_tokens: int
    sequence_tokens: int
    epochs: float
    update_epochs: int
    mini_batches: int
    oversample: float
    eval_every: int | None
    eval_prompts: int | None
    eval_samples: int
    eval_response_tokens: int | None
    with_optimizer: bool
    gpu_memory_utilization: float
    colocated_fraction: float
    agent: Any = None
    """The spec's ``agent:`` section (issue #25), None for single-turn rollouts."""
    lora_rank: int | None = None
    """LoRA adapters of this rank (``model.finetune: lora``); None for a full fine-tune."""
    packed: bool = True  # efficiency.sequence_packing: the plan priced token budgets


def run_of(spec: Any) -> Run:
    d, e = spec.data, spec.eval
    sft = spec.method == "sft"
    return Run(
        batch=spec.sft_batch_size if sft else int(d.prompts_per_step or 0),
        samples=1 if sft else int(d.samples_per_prompt or 1),
        prompt_tokens=int(d.prompt_tokens or 0),
        max_response_tokens=0 if sft else int(spec.max_response_tokens),
        sequence_tokens=int(d.tokens_per_example or 0) if sft else
        int((d.prompt_tokens or 0) + spec.max_response_tokens),
        epochs=float(spec.epochs), update_epochs=int(spec.update_epochs),
        mini_batches=int(d.mini_batches_per_step or 1),
        oversample=1.0 if sft else float(spec.oversample_factor),
        eval_every=e.every_steps if e else None, eval_prompts=e.prompts if e else None,
        eval_samples=e.samples_per_prompt if e else 1,
        eval_response_tokens=e.response_tokens if e else None,
        with_optimizer=bool(spec.checkpoints.with_optimizer),
        gpu_memory_utilization=float(spec.efficiency.gpu_memory_utilization),
        colocated_fraction=float(spec.efficiency.colocated_rollout_memory_fraction),
        agent=getattr(spec, "agent", None), packed=bool(spec.efficiency.sequence_packing),
        lora_rank=spec.lora_rank if spec.model.finetune == "lora" else None)


def max_turns(agent: Any) -> int:
    """The longest episode's model turns (the cap the frameworks take): ``agent.turns``, or
    its ``max`` when it is a distribution."""
    return int(agent.max_turns)


def ceil_int(x: float) -> int:
    return math.ceil(x - 1e-9)
