"""The blocks of a spec other than its method, demand and efficiency sections: the models
(``model``, ``teacher``, ``reward_model``...), ``data``, ``eval``, ``checkpoints``, ``sla``,
``budget``, ``placement`` and ``calibration`` (:class:`ptplan.spec.project.ProjectSpec`
assembles them and checks the rules that span several blocks)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    PrivateAttr,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from ptplan.core.hardware import canonical_gpu_name, unknown_gpu_message
from ptplan.spec import presets
from ptplan.spec.lengths import ResponseLength
from ptplan.spec.types import (
    Amount,
    Billions,
    Count,
    PhaseName,
    Precision,
    _Strict,
)


class ModelBlock(_Strict):
    """A transformer's shape. ``params_b``/``active_params_b`` in billions of parameters.
    ``preset: ORG/NAME`` or ``hf_config: path`` fills the shape from a model's
    ``config.json`` (:mod:`ptplan.spec.presets`); fields typed beside it override it."""

    preset: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    """A Hugging Face repository id in the embedded table (``ptplan models``), any case."""
    hf_config: Annotated[str, Field(min_length=1, max_length=1000)] | None = None
    """A local Hugging Face ``config.json`` (relative to the spec file); no network."""
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
    kv_latent_dim: Count | None = None
    """MLA (DeepSeek-V2/V3): elements each token caches per layer (kv_lora_rank +
    qk_rope_head_dim), in place of 2 · kv_heads · head_dim."""
    sliding_window: Count | None = None
    """Tokens a sliding-window layer attends to (and keeps in its KV cache)."""
    sliding_window_layers: Count | None = None
    """How many of the layers use the sliding window (the rest attend to the whole context)."""
    _origin: presets.Origin | None = PrivateAttr(default=None)
    _config_dir: Path | None = PrivateAttr(default=None)

    @model_validator(mode="wrap")
    @classmethod
    def _from_preset(cls, data: Any, handler: Any) -> Any:
        if not isinstance(data, dict) or (data.get("preset") is None
                                          and data.get("hf_config") is None):
            return handler(data)
        filled, origin = presets.fill(data)
        obj = handler(filled)
        # the fields the spec gave (an exclude_unset dump re-reads the source for the rest)
        obj.__pydantic_fields_set__ = set(data) & set(cls.model_fields)
        obj._origin = origin
        if data.get("hf_config") is not None:
            obj._config_dir = presets.current_dir()
        return obj

    @property
    def config_dir(self) -> Path | None:
        """The folder ``hf_config`` was resolved against (the spec file's), if any."""
        return self._config_dir

    @model_validator(mode="after")
    def _window(self) -> ModelBlock:
        if (self.sliding_window is None) != (self.sliding_window_layers is None):
            raise ValueError("sliding_window and sliding_window_layers go together; give both "
                             "or neither")
        if self.sliding_window_layers is not None and self.sliding_window_layers > self.layers:
            raise ValueError(f"sliding_window_layers {self.sliding_window_layers} exceeds "
                             f"layers {self.layers}")
        return self

    def origin_lines(self, role: str) -> list[str]:
        """Where the shape came from, for ``defaults_applied``."""
        return presets.origin_lines(role, self, self._origin)

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

    def splits_tp(self, tp: int, replicate_kv: bool = True) -> bool:
        """Whether tensor parallel over ``tp`` GPUs can shard this model: the query heads split
        evenly (vLLM ``ModelConfig.verify_with_parallel_config``), and the KV heads split evenly
        or, when fewer than ``tp`` and ``replicate_kv`` (vLLM's ``LlamaAttention``: ``tp %
        kv_heads == 0``), are replicated evenly; Megatron replicates no KV group
        (``num_query_groups % tensor_model_parallel_size``: ``replicate_kv=False``). An MLA model
        caches a latent per token, not per head, so only its query heads count."""
        if self.query_heads % tp:
            return False
        if self.kv_latent_dim is not None or self.kv_heads % tp == 0:
            return True
        return replicate_kv and self.kv_heads < tp and tp % self.kv_heads == 0


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
    (booked for the run, :mod:`ptplan.providers.blocks`) are considered only when it is given; AWS
    sells blocks starting at most 8 weeks ahead. ``ptplan plan --start-after`` sets it."""
    deadline: dt.datetime | dt.date | None = None
    """The run's end as a date (the end of that day, UTC) or an ISO datetime (UTC when naive);
    with ``start_after`` only: it sets ``deadline_hours`` to the hours from ``start_after``
    (its first instant, 00:00 UTC) to it."""

    @model_validator(mode="before")
    @classmethod
    def _deadline_date(cls, data: object) -> object:
        if not isinstance(data, dict) or data.get("deadline") is None:
            return data
        raw = data["deadline"]
        try:  # a bare ISO date is a day (its end), anything longer an instant
            deadline = dt.date.fromisoformat(raw) if isinstance(raw, str) and len(raw) == 10 \
                else raw if isinstance(raw, dt.date) \
                else TypeAdapter(dt.datetime).validate_python(raw)
            start = TypeAdapter(dt.date | None).validate_python(data.get("start_after"))
        except (ValidationError, ValueError):
            return data  # the fields' own validation names the bad value
        shown = deadline.isoformat()
        if start is None:
            raise ValueError(f"deadline {shown} is a date but start_after is not given; give "
                             "sla.start_after (the run's first day) or sla.deadline_hours")
        hours = deadline_hours_from(deadline, start)
        if hours <= 0:
            raise ValueError(f"deadline {shown} is not after start_after {start.isoformat()}; "
                             "give a later deadline")
        given = data.get("deadline_hours")
        if given is not None and abs(float(given) - hours) > 1e-6:
            raise ValueError(f"deadline {shown} ({hours:g} h after start_after) and "
                             f"deadline_hours {given} disagree; give one of them")
        return {**data, "deadline": deadline, "deadline_hours": hours}


def deadline_hours_from(deadline: dt.datetime | dt.date, start: dt.date) -> float:
    """Hours from ``start`` (00:00 UTC) to ``deadline``: a date is the end of that day (UTC),
    a naive datetime is UTC."""
    if isinstance(deadline, dt.datetime):
        end = deadline if deadline.tzinfo else deadline.replace(tzinfo=dt.UTC)
    else:
        end = dt.datetime.combine(deadline + dt.timedelta(days=1), dt.time(), dt.UTC)
    begin = dt.datetime.combine(start, dt.time(), dt.UTC)
    return (end - begin).total_seconds() / 3600.0


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
    run_rates: list[Annotated[float, Field(gt=0, allow_inf_nan=False)]] | None = None
    """Each run's tokens/s per GPU, in the order of ``runs`` (``runs calibrate``): with three
    or more, their spread narrows the plan's 80 % interval (docs/plan-json.md)."""

    @model_validator(mode="after")
    def _rates_per_run(self) -> Calibration:
        if self.run_rates is not None and len(self.run_rates) != len(self.runs):
            raise ValueError(f"run_rates has {len(self.run_rates)} rates for {len(self.runs)} "
                             "runs; give one rate per run, in the order of runs")
        return self

    @field_validator("gpu")
    @classmethod
    def _gpu(cls, value: str) -> str:
        canon = canonical_gpu_name(value)
        if canon is None:
            raise ValueError(unknown_gpu_message(value))
        return canon
