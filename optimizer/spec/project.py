"""``ProjectSpec``: the job description, loaded strictly from YAML.

Every block is a pydantic model with ``extra="forbid"``: an unknown key is an error with a
close-match suggestion. Counts must be positive. Fields that do not apply to the chosen
``method`` are rejected rather than ignored, so nothing a user writes is silently dropped.
Defaults that the loader applies are listed by :func:`applied_defaults` and shown in every
output. Field reference: ``docs/spec.md``.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from optimizer.core.hardware import PRECISIONS, canonical_gpu_name, unknown_gpu_message
from optimizer.core.yamlio import quoted, read_mapping, validate
from optimizer.spec.agent import Agent
from optimizer.spec.cpu import Reward
from optimizer.spec.efficiency import Efficiency
from optimizer.spec.lengths import ResponseLength, _check_lengths, quantile_knots
from optimizer.spec.methods import (
    GEN_FIELDS,
    GEN_REQUIRED,
    RL_FIELDS,
    RL_REQUIRED,
    SFT_FIELDS,
    SFT_REQUIRED,
    _generate_rules,
)
from optimizer.spec.other_costs import OtherCosts
from optimizer.spec.types import (
    Algorithm,
    Amount,
    Billions,
    Count,
    Method,
    PhaseName,
    Pipeline,
    Precision,
    _Strict,
)

__all__ = ["Efficiency", "ModelBlock", "ProjectSpec", "ResponseLength", "TrainedModel",
           "load_spec", "parse_spec", "quantile_knots"]

class ModelBlock(_Strict):
    """A transformer's shape. ``params_b``/``active_params_b`` in billions of parameters."""

    params_b: Billions
    active_params_b: Billions | None = None
    layers: Count
    hidden_size: Count
    kv_heads: Count
    head_dim: Count
    heads: Count | None = None
    """Query heads; defaults to hidden_size / head_dim (used by the attention FLOPs term)."""
    experts_per_token: Count | None = None
    """MoE: experts each token is routed to (top-k; default 8 when active < total params).
    Each routed token crosses the expert-parallel all-to-all (docs/demand-model.md)."""

    @property
    def is_moe(self) -> bool:
        return self.active_params_b is not None and self.active_params_b < self.params_b

    @property
    def routed_experts(self) -> int:
        return (self.experts_per_token or 8) if self.is_moe else 0

    @model_validator(mode="after")
    def _active_le_total(self) -> ModelBlock:
        if self.active_params_b is not None and self.active_params_b > self.params_b:
            raise ValueError(
                f"active_params_b {self.active_params_b} exceeds params_b {self.params_b}; "
                "active parameters are a subset (MoE) or equal (dense)"
            )
        return self

    @property
    def active_b(self) -> float:
        return self.active_params_b if self.active_params_b is not None else self.params_b

    @property
    def query_heads(self) -> int:
        return self.heads if self.heads is not None else max(1, self.hidden_size // self.head_dim)


class TrainedModel(ModelBlock):
    finetune: Literal["full", "lora"] = "full"
    lora_rank: Count | None = None

    @model_validator(mode="after")
    def _lora(self) -> TrainedModel:
        if self.lora_rank is not None and self.finetune != "lora":
            raise ValueError("lora_rank is set but finetune is 'full'; set finetune: lora")
        return self


PlaceRef = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]+:[A-Za-z0-9_.-]+$", max_length=120)]
"""``provider:region``, e.g. ``aws:us-east-1``."""


class Data(_Strict):
    source: PlaceRef | None = None
    """Where the dataset lives (``provider:region``); staging it to the region that reads it
    is priced as egress. Unset: it is already there (staging free)."""
    # sft
    examples: Count | None = None
    tokens_per_example: Count | None = None
    epochs: Amount | None = None
    batch_size: Count | None = None
    """SFT: examples per optimizer step (defines a step for eval/checkpoint cadence)."""
    generated_by: Annotated[str, Field(min_length=1, max_length=500)] | None = None
    """SFT: the ``method: generate`` spec (a path, relative to this spec) that produced the
    data; ``ptplan compare`` and campaigns plan it and count its cost."""
    # generate
    prompts: Count | None = None
    """generate: prompts submitted (all at once: offline batched generation)."""
    # rl / opd
    steps: Count | None = None
    prompts_per_step: Count | None = None
    samples_per_prompt: Count | None = None
    prompt_tokens: Count | None = None
    response_tokens: Count | None = None
    max_response_tokens: Count | None = None
    response_length: ResponseLength | None = None
    """Shape of the response-length distribution (docs/spec.md): quantiles, a histogram or a
    truncated share; default the maximum-entropy shape for the mean and the cap."""
    oversample_factor: Annotated[float, Field(ge=1, le=10, strict=True)] | None = None
    """Generated samples per trained sample (DAPO dynamic sampling filters groups)."""
    update_epochs: Count | None = None
    """Passes over each step's batch in the update (PPO epochs)."""
    mini_batches_per_step: Count | None = None
    """Optimizer steps inside one rollout→update step: no FLOPs change, but each is a
    sequential forward + backward in the update's per-step latency floor."""
    prep_cpu_hours: Annotated[float, Field(gt=0, le=1e9, strict=True)] | None = None
    """vCPU-hours of data preparation (cleaning, de-duplication, tokenisation) before the run:
    a CPU pool (docs/demand-model.md §4.9)."""
    prep_hours: Annotated[float, Field(gt=0, le=8760, strict=True)] | None = None
    """Wall time the preparation stage may take (default 1 h): sizes its CPU pool."""


class Eval(_Strict):
    every_steps: Count
    prompts: Count
    samples_per_prompt: Count = 1
    response_tokens: Count
    prompt_tokens: Count | None = None


class Checkpoints(_Strict):
    every_steps: Count | None = None
    keep_hot: Count = 3
    archive_every: Count = 5
    retention_days: Count = 30
    with_optimizer: bool = True
    copy_to: PlaceRef | None = None
    """Copy every archived checkpoint and the final one to this ``provider:region`` (a home
    bucket); priced as egress from the trainer's region."""


class SLA(_Strict):
    deadline_hours: Amount | None = None
    start_after: dt.date | None = None
    """The first day the run may start (ISO date). Capacity blocks and flex-start offers
    (booked for the run, :mod:`providers.blocks`) are considered only when it is given; AWS
    sells blocks starting at most 8 weeks ahead. ``ptplan plan --start-after`` sets it."""


class Budget(_Strict):
    max_usd: Amount | None = None


class Placement(_Strict):
    providers: list[str] | None = None
    regions: list[str] | None = None
    """Region names or globs (``us-*``)."""
    gpus: list[str] | None = None
    """Allowed GPU types (aliases accepted)."""
    max_nodes_per_pool: Count = 64
    """Cap on every pool's nodes (offers' own caps apply as well)."""
    multi_node_training_min_gpus_per_node: Count = 8
    """A training pool spanning several nodes needs nodes at least this large (the
    network-optimised sizes with EFA / GPUDirect-TCPX); smaller nodes train on one node only."""

    @field_validator("gpus")
    @classmethod
    def _gpus(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        out = []
        for name in value:
            canon = canonical_gpu_name(name)
            if canon is None:
                raise ValueError(unknown_gpu_message(name))
            out.append(canon)
        return out


class Calibration(_Strict):
    phase: PhaseName
    gpu: str
    precision: Precision
    tokens_per_second_per_gpu: Amount
    runs: list[Annotated[str, Field(min_length=1, max_length=64)]] = []
    """Ledger runs the measurement comes from (``ptplan runs calibrate``); plans record them."""
    spread: Annotated[float, Field(ge=0)] | None = None
    """(max − min) ÷ median of the runs' measurements (informational)."""
    steps: Annotated[int, Field(ge=1)] | None = None
    """Steps timed across those runs (informational)."""

    @field_validator("gpu")
    @classmethod
    def _gpu(cls, value: str) -> str:
        canon = canonical_gpu_name(value)
        if canon is None:
            raise ValueError(unknown_gpu_message(value))
        return canon


class ProjectSpec(_Strict):
    name: str = Field(min_length=1, max_length=200)
    method: Method
    algorithm: Algorithm | None = None
    model: TrainedModel
    teacher: ModelBlock | None = None
    reward_model: ModelBlock | None = None
    critic: ModelBlock | None = None
    reference_model: bool | None = None
    data: Data
    eval: Eval | None = None
    checkpoints: Checkpoints = Checkpoints()
    sla: SLA = SLA()
    budget: Budget = Budget()
    placement: Placement = Placement()
    pipeline: Pipeline = "auto"
    precisions: dict[PhaseName, list[Precision]] | None = None
    efficiency: Efficiency = Efficiency()
    calibration: list[Calibration] = []
    agent: Agent | None = None
    """Multi-turn tool-calling rollouts (rl/opd; docs/spec.md, docs/demand-model.md §4.8)."""
    other_costs: OtherCosts | None = None
    """Costs beyond compute: data, annotation, review, A/B tests, operations (docs/spec.md)."""
    reward: Reward | None = None
    """CPU work of a rule-based reward (rl/opd without ``reward_model``): a CPU pool."""

    @model_validator(mode="before")
    @classmethod
    def _agent_response(cls, data: Any) -> Any:
        """With ``agent:``, ``data.response_tokens`` defaults to turns × tokens_per_turn."""
        if not isinstance(data, dict) or not isinstance(data.get("agent"), dict) \
                or not isinstance(data.get("data"), dict) or "response_tokens" in data["data"]:
            return data
        a = data["agent"]
        turns, per = a.get("turns"), a.get("tokens_per_turn")
        if type(turns) is int and type(per) is int and turns > 0 and per > 0:
            return {**data, "data": {**data["data"], "response_tokens": turns * per}}
        return data

    @model_validator(mode="after")
    def _method_rules(self) -> ProjectSpec:
        m = self.method
        if self.agent is not None:
            _agent_rules(self, self.agent)
        if self.reward is not None and (m == "sft" or self.reward_model is not None):
            raise ValueError("reward.cpu_seconds_per_sample is the CPU cost of a rule-based reward "
                             "(rl/opd without reward_model); remove the reward section or "
                             "reward_model")
        o = self.other_costs
        if o is not None and o.human_review_usd_per_sample > 0 \
                and o.human_review_samples is None and self.eval is None:
            raise ValueError("other_costs.human_review_usd_per_sample needs the samples it is "
                             "paid for: set other_costs.human_review_samples (there is no eval "
                             "block whose samples it would default to)")
        if m == "rl" and self.algorithm is None:
            raise ValueError("method rl needs algorithm: ppo, grpo or dapo")
        if m != "rl" and self.algorithm is not None:
            raise ValueError(f"algorithm applies to method rl only; remove it for method {m}")
        if m == "opd" and self.teacher is None:
            raise ValueError("method opd needs a teacher model block (the model that scores)")
        if m != "opd" and self.teacher is not None:
            raise ValueError(f"teacher applies to method opd only; remove it for method {m}")
        if m == "sft" and (self.reward_model is not None or self.reference_model is not None):
            raise ValueError("reward_model and reference_model apply to rl/opd; remove them "
                             "for method sft")
        if m == "sft" and self.pipeline not in ("auto", "colocated"):
            raise ValueError(f"pipeline {self.pipeline} applies to rl/opd; an SFT job runs on "
                             "one pool (use auto or colocated)")
        if self.critic is not None and self.algorithm != "ppo":
            raise ValueError("critic applies to algorithm ppo only")
        given = {k for k, v in self.data.model_dump().items() if v is not None}
        own, required = {"sft": (SFT_FIELDS, SFT_REQUIRED),
                         "generate": (GEN_FIELDS, GEN_REQUIRED)}.get(m, (RL_FIELDS, RL_REQUIRED))
        if m == "generate":
            _generate_rules(self)
        for key in (*SFT_FIELDS, *GEN_FIELDS, *RL_FIELDS):
            if key in given and key not in own:
                raise ValueError(f"data.{key} is not used by method {m}; use {', '.join(own)}")
        for key in required:
            if key not in given:
                raise ValueError(f"data.{key} is required for method {m}")
        d = self.data
        if d.max_response_tokens is not None and d.response_tokens is not None \
                and d.max_response_tokens < d.response_tokens:
            raise ValueError(
                f"data.max_response_tokens {d.max_response_tokens} is below the mean "
                f"response_tokens {d.response_tokens}; the maximum must be at least the mean"
            )
        if d.response_length is not None and d.response_tokens is not None:
            _check_lengths(d.response_length, d.response_tokens, self.max_response_tokens)
        if self.precisions:
            for phase, allowed in self.precisions.items():
                if not allowed:
                    raise ValueError(f"precisions.{phase} is empty; list at least one of "
                                     f"{', '.join(PRECISIONS)}")
            bad = [q for q in self.precisions.get("update", []) if q == "int8"]
            if bad:
                raise ValueError("precisions.update lists int8, an inference format; train in "
                                 "fp32, bf16, fp16 or fp8")
            if m == "sft" and any(p in self.precisions for p in ("rollout", "scoring")):
                raise ValueError("precisions: method sft has no rollout or scoring phase; "
                                 "list update and eval only")
            if m == "generate" and any(p != "rollout" for p in self.precisions):
                raise ValueError("precisions: method generate has only a rollout phase; "
                                 "list rollout only")
        phases = self.phase_names
        seen: set[tuple[str, str, str]] = set()
        for i, c in enumerate(self.calibration):
            cell = (c.phase, c.gpu, c.precision)
            if cell in seen:
                raise ValueError(f"calibration[{i}] repeats phase {c.phase}, gpu {c.gpu}, "
                                 f"precision {c.precision}; keep one measurement per cell")
            seen.add(cell)
            if c.phase not in phases:
                raise ValueError(f"calibration[{i}].phase {c.phase!r}: this job has no such "
                                 f"phase (phases: {', '.join(sorted(phases))})")
        return self

    # ---- resolved values (defaults applied) -------------------------------------------
    @property
    def phase_names(self) -> set[str]:
        """The phases this job runs."""
        if self.method == "generate":
            return {"rollout"}
        phases = {"update"} | ({"eval"} if self.eval is not None else set())
        if self.method != "sft":
            phases |= {"rollout"}
            if self.uses_reference or self.reward_model is not None or self.teacher is not None:
                phases |= {"scoring"}
        return phases

    @property
    def trains(self) -> bool:
        """False for ``method: generate`` (sampling only: no update, no checkpoints)."""
        return self.method != "generate"

    @property
    def prompts_per_run(self) -> int:
        """Prompts per synchronous generation run: a step's (rl/opd) or all of them (generate:
        one offline batch)."""
        return (self.data.prompts if self.method == "generate" else self.data.prompts_per_step) or 0

    @property
    def uses_reference(self) -> bool:
        if self.method in ("sft", "generate"):
            return False
        if self.reference_model is not None:
            return self.reference_model
        return self.method == "rl" and self.algorithm in ("ppo", "grpo")

    @property
    def epochs(self) -> float:
        return self.data.epochs or 1.0

    @property
    def sft_batch_size(self) -> int:
        return self.data.batch_size or 128

    @property
    def max_response_tokens(self) -> int:
        d = self.data
        return d.max_response_tokens or 2 * (d.response_tokens or 0)

    @property
    def oversample_factor(self) -> float:
        if self.data.oversample_factor is not None:
            return self.data.oversample_factor
        return 2.0 if self.algorithm == "dapo" else 1.0

    @property
    def update_epochs(self) -> int:
        return self.data.update_epochs or 1

    @property
    def total_steps(self) -> int:
        """RL/OPD: rollout→update steps. SFT: optimizer steps (examples × epochs / batch)."""
        if self.method == "sft":
            import math

            return max(1, math.ceil((self.data.examples or 0) * self.epochs / self.sft_batch_size))
        if self.method == "generate":
            return 1
        return self.data.steps or 0

    @property
    def checkpoint_every_steps(self) -> int:
        if self.checkpoints.every_steps:
            return self.checkpoints.every_steps
        return max(1, self.total_steps // 10)

    @property
    def critic_model(self) -> ModelBlock | None:
        if self.algorithm != "ppo":
            return None
        return self.critic or ModelBlock(**self.model.model_dump(
            include={"params_b", "active_params_b", "layers", "hidden_size", "kv_heads",
                     "head_dim", "heads", "experts_per_token"}))

    @property
    def lora_rank(self) -> int:
        return self.model.lora_rank or 16


def _agent_rules(spec: ProjectSpec, a: Agent) -> None:
    if spec.method not in ("rl", "opd"):
        raise ValueError(f"agent applies to methods rl and opd (multi-turn rollouts); remove "
                         f"it for method {spec.method}")
    rt = spec.data.response_tokens
    if rt is not None and rt != a.response_tokens:
        raise ValueError(f"data.response_tokens {rt} differs from agent.turns × "
                         f"agent.tokens_per_turn = {a.response_tokens}; omit response_tokens "
                         "(it is derived) or make them agree")


def parse_spec(data: dict[str, Any], origin: str = "spec") -> ProjectSpec:
    return validate(ProjectSpec, data, origin)


def load_spec(path: str) -> ProjectSpec:
    """Load and validate a spec file; raises :class:`~optimizer.core.errors.InputError` (exit 2).
    With a calibration file: :func:`optimizer.spec.calibration.load_spec_calibrated`."""
    return parse_spec(read_mapping(path, "spec"), f"spec {quoted(path)}")
