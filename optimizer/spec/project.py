"""``ProjectSpec``: the job description, loaded strictly from YAML.

Every block is a pydantic model with ``extra="forbid"``: an unknown key is an error with a
close-match suggestion. Counts must be positive. Fields that do not apply to the chosen
``method`` are rejected rather than ignored, so nothing a user writes is silently dropped.
Defaults that the loader applies are listed by :func:`applied_defaults` and shown in every
output. Field reference: ``docs/spec.md``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from ptplan.core.errors import InputError
from ptplan.core.hardware import PRECISIONS
from ptplan.core.yamlio import quoted, read_mapping, validate
from ptplan.spec import frameworks, presets
from ptplan.spec.agent import Agent
from ptplan.spec.cpu import Reward
from ptplan.spec.efficiency import Efficiency
from ptplan.spec.frameworks import Release, normalise, release, spec_rules
from ptplan.spec.lengths import ResponseLength, _check_lengths, quantile_knots
from ptplan.spec.methods import (
    GEN_FIELDS,
    GEN_REQUIRED,
    RL_FIELDS,
    RL_REQUIRED,
    SFT_FIELDS,
    SFT_REQUIRED,
    _generate_rules,
)
from ptplan.spec.other_costs import OtherCosts
from ptplan.spec.sections import (
    SLA,
    Budget,
    Calibration,
    Checkpoints,
    Data,
    Eval,
    ModelBlock,
    Placement,
    TrainedModel,
)
from ptplan.spec.types import (
    Algorithm,
    Method,
    PhaseName,
    Pipeline,
    Precision,
    _Strict,
)

__all__ = ["SLA", "Budget", "Calibration", "Checkpoints", "Data", "Efficiency", "Eval",
           "ModelBlock", "Placement", "ProjectSpec", "ResponseLength", "TrainedModel",
           "load_spec", "parse_spec", "quantile_knots"]

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
    max_staleness_steps: Annotated[int, Field(ge=1, le=64, strict=True)] = 1
    """Asynchronous layouts: how many steps the rollout may run ahead of the update (a
    trajectory may come from a policy up to this many versions old). 1 is one step off policy;
    more keeps every engine's queue full across steps (NeMo RL ``max_trajectory_age_steps``,
    AReaL ``max_head_offpolicyness``, veRL ``num_warmup_batches``, OpenRLHF
    ``--train.async_queue_size``; docs/demand-model.md §4.5)."""
    precisions: dict[PhaseName, list[Precision]] | None = None
    efficiency: Efficiency = Efficiency()
    calibration: list[Calibration] = []
    agent: Agent | None = None
    """Multi-turn tool-calling rollouts (rl/opd; docs/spec.md, docs/demand-model.md §4.8)."""
    other_costs: OtherCosts | None = None
    """Costs beyond compute: data, annotation, review, A/B tests, operations (docs/spec.md)."""
    reward: Reward | None = None
    """CPU work of a rule-based reward (rl/opd without ``reward_model``): a CPU pool."""
    framework: str = Field(default_factory=lambda: frameworks.DEFAULT)
    """The framework release the plan is made for (``verl==0.9``, ``openrlhf==0.11``) or
    ``any`` (no release's limits); default ``verl==0.9`` (:mod:`ptplan.spec.frameworks`),
    resolved when the spec is read (``framework`` is then not in ``model_fields_set``)."""

    @field_validator("framework")
    @classmethod
    def _framework(cls, value: str) -> str:
        try:
            return normalise(value)
        except InputError as e:
            raise ValueError(str(e).removeprefix("framework: ")) from None

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
        mean = turns.get("mean") if isinstance(turns, dict) else None  # a distribution
        if isinstance(mean, int | float) and not isinstance(mean, bool) and type(per) is int \
                and mean > 0 and per > 0:
            return {**data, "data": {**data["data"], "response_tokens": round(mean * per)}}
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
        if self.efficiency.pad_responses_to_cap and m in ("sft", "generate"):
            raise ValueError(f"efficiency.pad_responses_to_cap applies to the scored and trained "
                             f"responses of rl/opd, not method {m}; remove it")
        if self.max_staleness_steps > 1 and (m in ("sft", "generate")
                                             or self.pipeline in ("colocated", "sync")):
            where = f"method {m}" if m in ("sft", "generate") else f"pipeline {self.pipeline}"
            raise ValueError(f"max_staleness_steps {self.max_staleness_steps} applies to the "
                             f"async pipeline of rl/opd, not {where}; use pipeline: async or "
                             "auto, or remove max_staleness_steps")
        tp, mb = self.efficiency.rollout_tp, self.model
        if tp is not None and not mb.splits_tp(tp):
            ok = ", ".join(str(d) for d in range(1, 65) if mb.splits_tp(d))
            raise ValueError(f"efficiency.rollout_tp {tp}: vLLM shards the model's "
                             f"{mb.query_heads} attention heads ({mb.kv_heads} KV heads) over "
                             f"the engine's GPUs, and {tp} does not split them evenly; use one "
                             f"of {ok}")
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
        rel = release(self.framework_key)
        if rel is not None:
            spec_rules(self, rel)
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
    def framework_key(self) -> str:
        """The framework this spec is planned for (``framework:``, else the default)."""
        return self.framework

    @property
    def release(self) -> Release | None:
        """The release's capability table; None for ``framework: any``."""
        return release(self.framework_key)

    @property
    def scoring_roles(self) -> tuple[str, ...]:
        """The models the scoring phase runs (reference, reward, teacher)."""
        out = []
        if self.uses_reference:
            out.append("reference")
        if self.reward_model is not None:
            out.append("reward")
        if self.teacher is not None:
            out.append("teacher")
        return tuple(out)

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
            include=set(presets.SHAPE_FIELDS)))

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


def parse_spec(data: dict[str, Any], origin: str = "spec",
               base_dir: Path | None = None) -> ProjectSpec:
    """Validate a spec mapping; ``hf_config`` paths resolve against ``base_dir`` (the spec
    file's folder), else the working directory."""
    with presets.spec_dir(base_dir):
        return validate(ProjectSpec, data, origin)


def with_framework(spec: ProjectSpec, framework: str | None,
                   field_name: str = "--framework") -> ProjectSpec:
    """``spec`` planned for ``framework`` (``plan --framework``, ``ptplan.plan(framework=)``),
    re-validated against that release's table (a method or setting it cannot run is a one-line
    error); ``spec`` unchanged for ``None``."""
    if framework is None:
        return spec
    key = normalise(framework, field_name)
    raw = spec.model_dump(mode="python", exclude_unset=True)
    blocks = (spec.model, spec.teacher, spec.reward_model, spec.critic)
    base = next((b.config_dir for b in blocks if b is not None and b.config_dir), None)
    return parse_spec({**raw, "framework": key},
                      f"spec {spec.name!r} with {field_name} {key}", base)


def load_spec(path: str) -> ProjectSpec:
    """Load and validate a spec file; raises :class:`~ptplan.core.errors.InputError` (exit 2).
    With a calibration file: :func:`ptplan.spec.calibration.load_spec_calibrated`."""
    return parse_spec(read_mapping(path, "spec"), f"spec {quoted(path)}", Path(path).parent)
