"""What each pinned framework release can run: the capability table the planner, the verifier
and ``render`` share (``framework:`` in the spec, docs/frameworks.md).

One :class:`Release` per release line ``render`` targets (veRL 0.9, OpenRLHF 0.11). Every
capability cites the pinned wheel's source (:class:`Cite`: file under the wheel's root, line,
and a substring that line must hold); ``tests/test_framework_capabilities.py`` opens each cited
line in the installed wheel (``.frameworks``, README's test command) and fails when a release
changes under the table. ``framework: any`` is the abstract plan: no release's limits.

Layer: ``ptplan.spec`` (imports ``core`` only), so the demand model, the planner, the
verifier and the renders read one table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ptplan.core.errors import InputError
from ptplan.core.hardware import PRECISIONS

ANY = "any"
DEFAULT = "verl==0.9"
"""The framework ``render`` targets by default: a spec without ``framework:`` is planned for it,
so README's plans run as printed."""


@dataclass(frozen=True)
class Cite:
    """Evidence in the pinned wheel: ``file`` (relative to the wheel's install root, e.g.
    ``verl/trainer/main_ppo.py``), 1-based ``line``, and ``text`` that line contains."""

    file: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class Release:
    key: str
    """``name==line`` as the spec writes it (``verl==0.9``)."""
    label: str
    package: str
    pin: str
    """The release installed by the launch and checked in CI."""
    methods: dict[str, str]
    """Methods the release runs → how (one line); absent methods are refused."""
    refused: dict[str, str]
    """Methods it does not run (as ptplan renders it) → what would work."""
    accelerators: frozenset[str]
    """GPU vendors (``core.hardware.GPU.vendor``) the release's default build runs on."""
    own_pool_roles: frozenset[str]
    """Scoring roles that may run on a pool of their own (reference, reward, teacher); the
    others run on the trainer's pool."""
    separate_rollout_pipelines: frozenset[str]
    """Pipeline modes in which the rollout engines may have a pool apart from the trainer."""
    teacher_needs_own_pool: bool
    rollout_precisions: frozenset[str]
    scoring_precisions: dict[str, frozenset[str] | None]
    """Per scoring role: its precisions, or None for the trainer's dtype (the update's)."""
    update_precisions: frozenset[str]
    engine_spans_nodes: bool
    train_backends: dict[str, frozenset[str]]
    """Per method: the training backends (``efficiency.train_backend``) the release offers."""
    lora: bool
    multi_turn: bool
    eval_cap: str
    """``training``: validation generates up to the training response cap (``eval`` = the
    spec's ``eval.response_tokens`` is the cap)."""
    checkpoints: str
    """How the release keeps checkpoints (one line)."""
    sources: dict[str, Cite] = field(default_factory=dict)
    """Capability → the line of the pinned release that shows it."""

    def cite(self, what: str) -> str:
        c = self.sources.get(what)
        return f"{self.package} {self.pin} {c}" if c is not None else f"{self.label}"

    def scoring_allowed(self, role: str, update: tuple[str, ...]) -> frozenset[str]:
        own = self.scoring_precisions.get(role)
        return frozenset(update) if own is None else own


VERL_0_9 = Release(
    key="verl==0.9", label="veRL 0.9", package="verl", pin="0.9.1",
    methods={"rl": "verl.trainer.main_ppo (v1 trainer)",
             "opd": "verl.trainer.main_ppo with distillation.enabled",
             "sft": "verl.trainer.sft_trainer on its FSDP engine",
             "generate": "vLLM engines (veRL's main_generation_server; ptplan renders no "
                         "launch for it)"},
    refused={},
    accelerators=frozenset({"NVIDIA"}),
    own_pool_roles=frozenset({"reward", "teacher"}),
    separate_rollout_pipelines=frozenset({"async"}),
    teacher_needs_own_pool=True,
    rollout_precisions=frozenset({"bf16", "fp8"}),
    scoring_precisions={"reference": None, "critic": None, "reward": None,
                        "teacher": frozenset({"bf16"})},
    update_precisions=frozenset({"bf16"}),
    engine_spans_nodes=True,
    train_backends={"rl": frozenset({"fsdp", "megatron"}), "opd": frozenset({"fsdp", "megatron"}),
                    "sft": frozenset({"fsdp"}), "generate": frozenset({"fsdp", "megatron"})},
    lora=True, multi_turn=True, eval_cap="training",
    checkpoints="all, unless trainer.max_actor_ckpt_to_keep (ptplan renders keep_hot) prunes "
                "the older ones; archived checkpoints are copied by the rendered launch",
    sources={
        "accelerators": Cite("verl/plugin/platform/platform_cuda.py", 28, 'return "cuda"'),
        "pipelines": Cite("verl/trainer/config/ppo_trainer.yaml", 237,
                          '"sync", "colocate_async", "separate_async"'),
        "separate_rollout": Cite("verl/trainer/ppo/v1/trainer_separate_async.py", 64,
                                 "assert config.actor_rollout_ref.rollout.nnodes > 0"),
        "trainer_roles": Cite("verl/trainer/ppo/v1/trainer_base.py", 809,
                              'self.mapping[Role.RefPolicy] = "global_pool"'),
        "critic_pool": Cite("verl/trainer/ppo/v1/trainer_base.py", 814,
                            'self.mapping[Role.Critic] = "global_pool"'),
        "reward_pool": Cite("verl/trainer/ppo/v1/trainer_base.py", 831,
                            'self.mapping[Role.RewardModel] = "reward_pool"'),
        "teacher_pool": Cite("verl/trainer/ppo/v1/trainer_base.py", 842,
                             "config.distillation.nnodes must be greater than 0"),
        "rollout_precision": Cite("verl/workers/rollout/vllm_rollout/vllm_async_server.py", 1240,
                                  '_SUPPORTED_QUANTIZATION = ["fp8", "torchao", "ascend"]'),
        "scoring_precision": Cite("verl/trainer/config/ref/dp_ref.yaml", 8,
                                  "../engine@fsdp_config: fsdp"),
        "reference_precision": Cite("verl/trainer/config/ref/dp_ref.yaml", 8,
                                    "../engine@fsdp_config: fsdp"),
        "teacher_precision": Cite("verl/trainer/ppo/v1/trainer_base.py", 842,
                                  "config.distillation.nnodes must be greater than 0"),
        "update_precision": Cite("verl/trainer/config/engine/fsdp.yaml", 82,
                                 'dtype: bfloat16 # ["bfloat16", "float16"]'),
        "engine_spans": Cite("verl/workers/rollout/replica.py", 117,
                             "self.nnodes = self.world_size // self.gpus_per_replica_node"),
        "no_rollout_pp": Cite("verl/workers/config/rollout.py", 319,
                              "if self.pipeline_model_parallel_size > 1:"),
        "train_backend": Cite("verl/trainer/config/sft_trainer_engine.yaml", 11,
                              "- engine@engine: fsdp"),
        "lora": Cite("verl/trainer/config/model/hf_model.yaml", 43, "lora_rank: 0"),
        "multi_turn": Cite("verl/trainer/config/rollout/rollout.yaml", 183, "enable: False"),
        "checkpoints": Cite("verl/trainer/config/ppo_trainer.yaml", 220,
                            "max_actor_ckpt_to_keep: null"),
        "eval_cap": Cite("verl/workers/rollout/vllm_rollout/vllm_async_server.py", 612,
                         "self.config.response_length, self.config.prompt_length"),
        "generate": Cite("verl/trainer/main_generation_server.py", 123, "def main(config):"),
    },
)
"""veRL 0.9.1. Left out on purpose (the launch ``render`` writes would not run them as
planned): fp16/fp32 rollouts (engines run ``rollout.dtype``, bf16) and updates (the FSDP engine
reads ``mixed_precision.param_dtype``, bf16); Megatron for SFT (``engine=megatron`` exists,
ptplan renders the FSDP engine); AMD ROCm and Ascend NPU platforms (another image)."""

OPENRLHF_0_11 = Release(
    key="openrlhf==0.11", label="OpenRLHF 0.11", package="openrlhf", pin="0.11.2",
    methods={"rl": "openrlhf.cli.train_ppo_ray"},
    refused={"opd": "OpenRLHF 0.11 has no on-policy distillation (no teacher model in "
                    "openrlhf/); use framework: verl==0.9 or any",
             "sft": "ptplan renders OpenRLHF 0.11 for RL under Ray only (its SFT entry "
                    "openrlhf.cli.train_sft is a DeepSpeed launcher ptplan does not render); "
                    "use framework: verl==0.9 or any",
             "generate": "OpenRLHF 0.11 has no generation-only entry point; use framework: "
                         "verl==0.9 or any"},
    accelerators=frozenset({"NVIDIA"}),
    own_pool_roles=frozenset({"reference", "reward"}),
    separate_rollout_pipelines=frozenset({"sync", "async"}),
    teacher_needs_own_pool=False,
    rollout_precisions=frozenset({"bf16"}),
    scoring_precisions={"reference": None, "critic": None, "reward": None,
                        "teacher": frozenset()},
    update_precisions=frozenset({"bf16", "fp16"}),
    engine_spans_nodes=True,
    train_backends={"rl": frozenset({"fsdp"})},
    lora=True, multi_turn=True, eval_cap="training",
    checkpoints="the last --ckpt.max_num (default 3; ptplan renders keep_hot); archived "
                "checkpoints are copied by the rendered launch",
    sources={
        "accelerators": Cite("openrlhf/utils/deepspeed/deepspeed.py", 97,
                             "torch.cuda.set_device(local_rank)"),
        "pipelines": Cite("openrlhf/cli/train_ppo_ray.py", 293,
                          '"--train.async_enable", action="store_true"'),
        "colocate": Cite("openrlhf/cli/train_ppo_ray.py", 224, '"--train.colocate_all"'),
        "separate_rollout": Cite("openrlhf/cli/train_ppo_ray.py", 232,
                                 '"--vllm.num_engines", type=int, default=None'),
        "reference_pool": Cite("openrlhf/cli/train_ppo_ray.py", 200,
                               '"--ref.num_nodes", type=int, default=1'),
        "reward_pool": Cite("openrlhf/cli/train_ppo_ray.py", 202,
                            '"--reward.num_nodes", type=int, default=1'),
        "critic_pool": Cite("openrlhf/cli/train_ppo_ray.py", 215,
                            '"--critic.num_nodes", type=int, default=1'),
        "rollout_precision": Cite("openrlhf/trainer/ray/vllm_engine.py", 273,
                                  '"dtype": "bfloat16",'),
        "scoring_precision": Cite("openrlhf/trainer/ray/launcher.py", 112,
                                  "param_dtype=strategy.args.ds.param_dtype,"),
        "reference_precision": Cite("openrlhf/trainer/ray/launcher.py", 112,
                                    "param_dtype=strategy.args.ds.param_dtype,"),
        "update_precision": Cite("openrlhf/cli/train_ppo_ray.py", 334,
                                 'choices=["bf16", "fp16"],'),
        "engine_spans": Cite("openrlhf/trainer/ray/utils.py", 16,
                             "sorted_bundle_indices = sum(node_id_to_bundles.values(), [])"),
        "train_backend": Cite("openrlhf/cli/train_ppo_ray.py", 372,
                              '"--ds.tensor_parallel_size", type=int, default=1'),
        "lora": Cite("openrlhf/cli/train_ppo_ray.py", 384, '"--ds.lora.rank", type=int, default=0'),
        "multi_turn": Cite("openrlhf/cli/train_ppo_ray.py", 563,
                           '"--train.agent_func_path", type=str, default=None'),
        "checkpoints": Cite("openrlhf/cli/train_ppo_ray.py", 311,
                            '"--ckpt.max_num", type=int, default=3'),
        "eval_cap": Cite("openrlhf/trainer/ppo_trainer.py", 564,
                         "eval_generate_kwargs = self.generate_kwargs.copy()"),
        "sft": Cite("openrlhf/cli/train_sft.py", 12, "def train(args):"),
    },
)
"""OpenRLHF 0.11.2. Left out on purpose: DeepSpeed AutoTP (``--ds.tensor_parallel_size``;
ptplan plans its DeepSpeed training as ZeRO data parallel, the ``fsdp`` backend), and its
SFT, DPO and reward-model trainers (ptplan renders ``train_ppo_ray`` only)."""

RELEASES: dict[str, Release] = {r.key: r for r in (VERL_0_9, OPENRLHF_0_11)}
CHOICES = (*RELEASES, ANY)


def normalise(text: str, field_name: str = "framework") -> str:
    """``verl``, ``verl==0.9`` or ``verl==0.9.1`` → ``verl==0.9``; ``any`` stays."""
    t = str(text).strip().lower()
    if t == ANY:
        return ANY
    name, _, version = t.partition("==")
    for r in RELEASES.values():
        line = r.key.partition("==")[2]
        if name == r.package and (not version or version == line
                                  or version.startswith(line + ".")):
            return r.key
    raise InputError(f"{field_name}: {text!r} is not a framework ptplan plans for; use one of "
                     f"{', '.join(CHOICES)} (default {DEFAULT})")


def release(key: str | None) -> Release | None:
    """The release of a normalised key; None for ``any``."""
    if key is None or key == ANY:
        return None
    return RELEASES[key]


def method_error(rel: Release, method: str) -> str | None:
    """Why ``rel`` cannot run ``method`` (one line), or None."""
    if method in rel.methods:
        return None
    return f"framework {rel.key}: {rel.refused.get(method, f'{rel.label} cannot run {method}')}"


def update_precisions(spec: Any) -> tuple[str, ...]:
    """The update's precisions as the spec allows them (bf16 by default: what veRL, OpenRLHF
    and Megatron train in)."""
    return tuple((spec.precisions or {}).get("update") or ("bf16",))


def framework_precisions(spec: Any, phase: str) -> frozenset[str] | None:
    """What the spec's framework release runs ``phase`` in (None: no limit, ``framework:
    any``). Scoring takes every scoring role's limit; a role in the trainer's dtype (veRL's
    reference and critic) takes the update's precisions. The planner, the spec's rules and the
    defaults it lists all read this."""
    rel = spec.release
    if rel is None:
        return None
    if phase in ("rollout", "eval"):
        return rel.rollout_precisions
    if phase == "update":
        return rel.update_precisions
    upd = tuple(q for q in update_precisions(spec) if q in rel.update_precisions)
    out = frozenset(PRECISIONS)
    for role in spec.scoring_roles:
        out &= rel.scoring_allowed(role, upd)
    return out


def training_cap_eval(spec: Any) -> Release | None:
    """The release when it validates this spec's eval with the training response cap (an eval
    of generated responses: rl, opd); None otherwise (``any``, no eval, SFT)."""
    rel = spec.release
    if rel is None or rel.eval_cap != "training" or spec.eval is None or spec.method == "sft":
        return None
    return rel


def precision_source(phase: str) -> str:
    """The capability whose citation backs ``phase``'s precisions."""
    return "rollout_precision" if phase == "eval" else f"{phase}_precision"


def spec_rules(spec: Any, rel: Release) -> None:
    """What ``rel`` cannot run in this spec, as a ``ValueError`` naming the field, the value
    and the fix (the loader turns it into a one-line error, exit 2)."""
    why = method_error(rel, spec.method)
    if why is not None:
        raise ValueError(why)
    backend = spec.efficiency.train_backend
    allowed = rel.train_backends.get(spec.method, frozenset())
    if backend != "auto" and backend not in allowed:
        raise ValueError(
            f"efficiency.train_backend {backend}: framework {rel.key} trains {spec.method} "
            f"with {' or '.join(sorted(allowed))} only ({rel.cite('train_backend')}); set "
            f"efficiency.train_backend: {min(allowed)} or framework: any")
    pipeline_rules(spec, rel)
    given = spec.precisions or {}
    for phase in ("update", "rollout", "eval", "scoring"):
        if phase not in given or (phase == "eval" and spec.method == "sft") \
                or (phase == "scoring" and not spec.scoring_roles):
            continue
        ok = framework_precisions(spec, phase) or frozenset()
        if not set(given[phase]) & ok:
            have = ", ".join(given[phase])
            can = ", ".join(sorted(ok)) or "none"
            raise ValueError(
                f"precisions.{phase} [{have}]: framework {rel.key} runs {phase} in {can} "
                f"({rel.cite(precision_source(phase))}); add one of them or set framework: "
                "any")


def pipeline_rules(spec: Any, rel: Release) -> None:
    """Pipelines the release cannot run (part of :func:`spec_rules`)."""
    if spec.method not in ("rl", "opd"):
        return
    p = spec.pipeline
    if p in ("sync", "async") and p not in rel.separate_rollout_pipelines:
        ok = " or ".join(sorted(rel.separate_rollout_pipelines))
        raise ValueError(
            f"pipeline {p}: framework {rel.key} runs rollout engines on a pool of their own only "
            f"{ok} ({rel.cite('separate_rollout')}); use pipeline: {ok}, colocated or auto, or "
            "framework: any")
    if p == "colocated" and spec.teacher is not None and rel.teacher_needs_own_pool:
        raise ValueError(
            f"pipeline colocated: framework {rel.key} runs the OPD teacher on a pool of its own "
            f"({rel.cite('teacher_pool')}); use pipeline: auto or async, or framework: any")


def _names(values: frozenset[str] | set[str] | list[str]) -> str:
    return ", ".join(sorted(values)) or "none"


def capability_rows(rel: Release) -> list[tuple[str, str, str]]:
    """The table as (capability, what the release does, source) rows: docs/frameworks.md holds
    the same rows (a test compares them)."""

    def src(*keys: str) -> str:
        found = [f"`{rel.sources[k]}`" for k in keys if k in rel.sources]
        return ", ".join(found) or "—"

    trainer_roles = sorted({"reference", "critic", "reward", "teacher"} - rel.own_pool_roles
                           - ({"teacher"} if "opd" not in rel.methods else set()))
    scoring = []
    for role in ("reference", "critic", "reward", "teacher"):
        if role == "teacher" and "opd" not in rel.methods:
            continue
        q = rel.scoring_precisions.get(role)
        scoring.append(f"{role}: {'the trainer dtype' if q is None else _names(q)}")
    return [
        ("methods", _names(list(rel.methods)) + (f" (refused: {_names(list(rel.refused))})"
                                                 if rel.refused else ""),
         src("generate", "sft")),
        ("accelerators", f"{_names(rel.accelerators)} GPUs (CUDA)", src("accelerators")),
        ("rollout pool apart from the trainer",
         f"pipeline {' or '.join(sorted(rel.separate_rollout_pipelines))}",
         src("separate_rollout")),
        ("roles with a pool of their own", _names(rel.own_pool_roles),
         src("reward_pool", "reference_pool", "teacher_pool")),
        ("roles on the trainer's pool", _names(trainer_roles) if trainer_roles else "none",
         src("trainer_roles", "critic_pool")),
        ("OPD teacher", "a pool of its own (required)" if rel.teacher_needs_own_pool
         else ("on any pool" if "opd" in rel.methods else "no OPD"), src("teacher_pool")),
        ("pipelines", "colocated, " + _names(rel.separate_rollout_pipelines)
         + " on separate pools", src("pipelines", "colocate")),
        ("rollout and eval precisions", _names(rel.rollout_precisions), src("rollout_precision")),
        ("scoring precisions", "; ".join(scoring),
         src("reference_precision", "teacher_precision")),
        ("update precisions", _names(rel.update_precisions), src("update_precision")),
        ("engines across nodes", "tensor parallel across nodes" if rel.engine_spans_nodes
         else "within a node", src("engine_spans", "no_rollout_pp")),
        ("training backends", "; ".join(f"{m}: {_names(b)}" for m, b in
                                       sorted(rel.train_backends.items())),
         src("train_backend")),
        ("LoRA", "yes" if rel.lora else "no", src("lora")),
        ("multi-turn / agent loops", "yes" if rel.multi_turn else "no", src("multi_turn")),
        ("checkpoints kept", rel.checkpoints, src("checkpoints")),
        ("validation response cap", "the training response cap" if rel.eval_cap == "training"
         else "eval.response_tokens", src("eval_cap")),
    ]
