"""The defaults a spec's loader filled in, listed as they were applied (shown in every
output: plans, estimates, reports). Split from :mod:`ptplan.spec.project`."""

from __future__ import annotations

from ptplan.spec.efficiency import EAGER_LAUNCH_US, Efficiency
from ptplan.spec.methods import GEN_EFFICIENCY
from ptplan.spec.project import Checkpoints, ProjectSpec


def applied_defaults(spec: ProjectSpec) -> list[str]:
    """Human-readable list of defaults the loader filled in (shown in every output)."""
    out: list[str] = []
    for role in ("model", "teacher", "reward_model", "critic"):
        block = getattr(spec, role)
        if block is not None:
            out += block.origin_lines(role)
    if spec.sla.deadline is not None and spec.sla.start_after is not None:
        out.append(f"sla.deadline_hours = {spec.sla.deadline_hours:g} (from sla.deadline "
                   f"{spec.sla.deadline.isoformat()}, counted from sla.start_after "
                   f"{spec.sla.start_after.isoformat()} 00:00 UTC)")
    d = spec.data
    if spec.method == "sft":
        if d.epochs is None:
            out.append("data.epochs = 1")
        if d.batch_size is None:
            out.append(f"data.batch_size = {spec.sft_batch_size} examples per optimizer step")
    elif spec.method == "generate":
        if d.max_response_tokens is None:
            out.append(f"data.max_response_tokens = {spec.max_response_tokens} (2 x mean)")
        out.append("one offline batch: all prompts submitted at once (continuous batching)")
    else:
        if d.max_response_tokens is None:
            out.append(f"data.max_response_tokens = {spec.max_response_tokens} (2 x mean)")
        if d.oversample_factor is None:
            out.append(f"data.oversample_factor = {spec.oversample_factor}"
                       + (" (DAPO dynamic sampling)" if spec.algorithm == "dapo" else ""))
        if d.update_epochs is None:
            out.append("data.update_epochs = 1")
        if spec.reference_model is None:
            out.append(f"reference_model = {str(spec.uses_reference).lower()}"
                       f" (default for {spec.algorithm or spec.method})")
        if spec.algorithm == "ppo" and spec.critic is None:
            out.append("critic = same shape as model (PPO)")
        if spec.reward_model is None:
            out.append("reward_model absent: rule-based reward on CPU (no GPU work)"
                       + ("; reward.cpu_seconds_per_sample priced as a CPU pool"
                          if spec.reward is not None else ""))
    out += _agent_defaults(spec)
    if spec.data.prep_cpu_hours is not None and spec.data.prep_hours is None:
        out.append("data.prep_hours = 1 (the preparation stage's wall time; sizes its CPU pool)")
    if spec.model.finetune == "lora" and spec.model.lora_rank is None:
        out.append("model.lora_rank = 16")
    if spec.checkpoints.every_steps is None and spec.trains:
        out.append(f"checkpoints.every_steps = {spec.checkpoint_every_steps} (10 % of steps)")
    cp_defaults = Checkpoints()
    for key in ("keep_hot", "archive_every", "retention_days"):
        if key not in spec.checkpoints.model_fields_set and spec.trains:
            out.append(f"checkpoints.{key} = {getattr(cp_defaults, key)}")
    eff_set = spec.efficiency.model_fields_set
    defaults = Efficiency()
    rl_only = {"rl_train_mfu", "recompute_old_logprobs", "weight_sync_gb_per_s",
               "colocated_refit_gb_per_s", "lost_work_minutes"}
    rl_only |= {"prefix_caching", "colocated_rollout_memory_fraction", "sequence_packing",
                "pad_responses_to_cap"}
    if spec.eval is None:  # SFT generates only for eval
        rl_only |= {"decode_step_overhead_ms", "cuda_graphs", "eager_launch_us_per_layer",
                    "tp_allreduce_us_intra_node", "tp_allreduce_us_inter_node", "decode_mbu",
                    "decode_compute_efficiency", "max_batch_per_replica", "generation_batching",
                    "rollout_tp"}
    rel = spec.release
    resolved = rel is not None and len(rel.train_backends.get(spec.method, ())) == 1
    for key in Efficiency.model_fields:
        if key in eff_set or (spec.method == "sft" and key in rl_only):
            continue
        if key == "train_backend" and resolved:
            continue  # listed with the framework's lines, as resolved
        if not spec.trains and key not in GEN_EFFICIENCY:
            continue
        if spec.method != "sft" and key == "train_mfu":
            continue
        value = getattr(defaults, key)
        shown = str(value).lower() if isinstance(value, bool) else value
        if key == "rollout_tp" and value is None:
            shown = ("per pool (the faster of the smallest engine that holds the weights and "
                     "the widest within the node, each splitting the attention heads)")
        if key == "eager_launch_us_per_layer" and value is None:
            # per engine model: the policy's, a teacher's or a reference's (they may differ)
            shown = (f"per model: {EAGER_LAUNCH_US['dense']:g} µs a dense layer, "
                     f"{EAGER_LAUNCH_US['moe']:g} µs a mixture-of-experts layer "
                     "(docs/demand-model.md §4.2)")
        if key == "internode_gb_per_s_per_gpu" and value is None:
            shown = ("per GPU type (Hopper/Blackwell and AMD Instinct 50, GB300 100, A100/A800 25, "
                     "others 12.5 GB/s: the GPU's reference system)")
        out.append(f"efficiency.{key} = {shown}")
    out += _fitted_defaults(spec)
    if spec.method not in ("sft", "generate") and "pipeline" not in spec.model_fields_set:
        out.append("pipeline = auto (colocated, sync and async are compared)")
    if spec.method not in ("sft", "generate") and spec.pipeline in ("auto", "async") \
            and "max_staleness_steps" not in spec.model_fields_set:
        out.append("max_staleness_steps = 1 (an async layout's rollout runs one step ahead of "
                   "the update)")
    for key in ("max_nodes_per_pool", "multi_node_training_min_gpus_per_node"):
        if key not in spec.placement.model_fields_set:
            out.append(f"placement.{key} = {getattr(spec.placement, key)}")
    out += _framework_defaults(spec)
    return out


def _framework_defaults(spec: ProjectSpec) -> list[str]:
    """What the framework release made of the spec (docs/frameworks.md): the default release,
    the precisions it cannot use (dropped from the spec's lists), the training backend ``auto``
    resolves to, and the eval cap it validates with."""
    from ptplan.spec.frameworks import (
        framework_precisions,
        precision_source,
        training_cap_eval,
    )

    out: list[str] = []
    if "framework" not in spec.model_fields_set:
        out.append(f"framework = {spec.framework_key} (the release `ptplan render` targets by "
                   "default; docs/frameworks.md)")
    rel = spec.release
    if rel is None:
        return out
    given: dict[str, list[str]] = {str(k): list(v) for k, v in (spec.precisions or {}).items()}
    phases = {"rl": ("rollout", "scoring", "update", "eval"), "opd": ("rollout", "scoring",
              "update", "eval"), "sft": ("update", "eval"), "generate": ("rollout",)}
    for phase in phases[spec.method]:
        if phase == "scoring" and not spec.scoring_roles:
            continue
        ok = framework_precisions(spec, phase) or frozenset()
        listed = given.get(phase)
        if phase == "eval" and not listed:
            continue  # eval follows the rollout's line
        source = rel.cite(precision_source(phase))
        if listed:
            dropped = [q for q in listed if q not in ok]
            if dropped:
                out.append(f"precisions.{phase}: {', '.join(dropped)} not used ({rel.key} runs "
                           f"{phase} in {', '.join(sorted(ok & set(listed)))}, per {source})")
        elif phase != "update":
            out.append(f"precisions.{phase} = {', '.join(sorted(ok))} ({rel.key} runs {phase} "
                       "in these)")
    if spec.efficiency.train_backend == "auto":
        allowed = rel.train_backends.get(spec.method, frozenset())
        if len(allowed) == 1:
            out.append(f"efficiency.train_backend = {next(iter(allowed))} ({rel.key} trains "
                       f"{spec.method} with it: no tensor or pipeline parallel, per "
                       f"{rel.cite('train_backend')})")
    if spec.eval is not None and training_cap_eval(spec) is not None:
        out.append(f"eval priced to {rel.label}'s validation cap, the training response cap "
                   f"{spec.max_response_tokens}: responses of mean eval.response_tokens "
                   f"{spec.eval.response_tokens} stop at EOS or the cap (per "
                   f"{rel.cite('eval_cap')})")
    return out


def _agent_defaults(spec: ProjectSpec) -> list[str]:
    """What an ``agent:`` section left to its defaults (docs/spec.md §16)."""
    a = spec.agent
    if a is None:
        return []
    out = [f"data.response_tokens = agent.turns x agent.tokens_per_turn = {a.response_tokens}"
           " (generated tokens per episode)"]
    given = a.model_fields_set
    if "observation_tokens_per_turn" not in given:
        out.append("agent.observation_tokens_per_turn = 0")
    if "tool_latency_s" not in given:
        out.append("agent.tool_latency_s = {mean: 0, p90: 0}")
    if "sandbox" not in given:
        out.append("agent.sandbox absent: no sandbox start-up in the step's floor")
    if "tool_workers" not in given:
        out.append("agent.tool_workers = one per episode in flight (tool capacity never binds)")
    if "trajectory_days" not in given:
        out.append("agent.trajectory_days = checkpoints.retention_days (trajectories kept as "
                   "long as retained checkpoints)")
    if "replay_state_mb" not in given:
        out.append("agent.replay_state_mb = 0 (episodes replay from their trajectory)")
    return out


def _fitted_defaults(spec: ProjectSpec) -> list[str]:
    """The suite-fitted efficiency factors this job's phases take (docs/demand-model.md §7)."""
    from ptplan.core.fit import applies, family, fit_method, load_fit

    fit = load_fit()
    eff = spec.efficiency
    phases = ["update"] if spec.method == "sft" else ["rollout", "scoring", "update"]
    if spec.method == "generate":
        phases = ["rollout"]
    if spec.eval is not None and "eval" not in phases:
        phases.append("eval")
    method = fit_method(spec.method, eff.train_backend)
    shown: list[str] = []
    for phase in phases:
        if phase == "scoring" and not spec.scoring_roles:
            continue  # no reference, reward model or teacher: the job has no scoring phase
        if not applies(phase, method, eff.model_fields_set, eff.param_offload):
            continue
        fam = family(phase, method, eff.param_offload)
        item = f"{fam} x{fit.factors.get(fam, 1.0):g}"
        if phase == "scoring" and "teacher" not in spec.scoring_roles:
            # the reference/reward forwards of the training engine: the update's factor on the
            # trainer's GPUs (core.fit.family), this one on a pool of their own
            item += " on a scoring pool of its own (on the trainer's GPUs the update's)"
        if item not in shown:
            shown.append(item)
    if not shown:
        return []
    text = ", ".join(shown)
    if spec.method in ("rl", "opd"):
        text += f", framework overhead {fit.step_overhead_seconds:g} s per step"
    return [f"efficiency fitted on {fit.cases} published runs (achieved ÷ modelled "
            f"throughput): {text} (docs/demand-model.md §7)"]
