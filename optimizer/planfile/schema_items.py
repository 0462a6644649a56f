"""The plan's line items beside its pools and phases: storage, CPU pools, other costs, the
lifecycle, network flows, solver statistics, the explanation and the 80 % interval
(:class:`ptplan.planfile.schema.Plan`)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field

from ptplan.core.kinds import CapacityType, Flow, NetworkPath, Status
from ptplan.core.yamlio import StrictModel
from ptplan.planfile.fields import (
    INFO,
    SPEC,
    Fraction,
    Money,
    NonNegative,
    Positive,
    check_as,
)


class StorageItem(StrictModel):
    data_class: str
    provider: str
    region: str
    tier: str
    access: str
    """Access latency the class needs: ``ms`` (restores) or ``hours`` (archives, logs)."""
    gb: NonNegative = Field(json_schema_extra=SPEC)
    gb_months: NonNegative = Field(json_schema_extra=SPEC)
    """Billed GB-months: each object's lifetime, or the tier's minimum duration if longer."""
    usd_per_gb_month: NonNegative = Field(json_schema_extra=check_as("catalog"))
    min_days: NonNegative = Field(json_schema_extra=check_as("catalog"))
    retrieval_gb: NonNegative = Field(json_schema_extra=SPEC)
    retrieval_usd_per_gb: NonNegative = Field(json_schema_extra=check_as("catalog"))
    cost_usd: Money


class CpuPoolItem(StrictModel):
    """Schema 7: a CPU pool (docs/demand-model.md §4.9): node_hours × usd_per_hour."""

    name: Literal["sandbox", "reward", "prep"] = Field(json_schema_extra=SPEC)
    basis: Literal["held", "work"] = Field(json_schema_extra=SPEC)
    vcpus_needed: NonNegative = Field(json_schema_extra=SPEC)
    memory_gib_needed: NonNegative = Field(json_schema_extra=SPEC)
    vcpu_hours: NonNegative = Field(json_schema_extra=SPEC)
    """The run's vCPU-hours of work (``work``); 0 for a pool held for the run."""
    provider: str
    region: str
    instance_type: str = Field(json_schema_extra=check_as("catalog"))
    capacity_type: CapacityType = Field(json_schema_extra=check_as("catalog"))
    vcpus_per_node: NonNegative = Field(json_schema_extra=check_as("catalog"))
    memory_gib_per_node: NonNegative = Field(json_schema_extra=check_as("catalog"))
    nodes: int = Field(ge=1, json_schema_extra=check_as("derived"))
    node_hours: NonNegative = Field(json_schema_extra=check_as("derived"))
    usd_per_hour: NonNegative = Field(json_schema_extra=check_as("catalog"))
    cost_usd: Money = Field(json_schema_extra=check_as("derived"))


class OtherCostItem(StrictModel):
    """Schema 6: one line of the spec's ``other_costs`` (cost = quantity × usd_per_unit)."""

    model_config = ConfigDict(json_schema_extra=SPEC)

    name: Literal["data_collection", "annotation", "ab_test", "human_review", "ops"]
    basis: Literal["fixed", "per_sample", "per_hour"]
    quantity: NonNegative = Field(json_schema_extra=check_as("derived"))
    """1 (fixed), reviewed samples (per_sample) or the run's hours (per_hour)."""
    usd_per_unit: NonNegative
    cost_usd: Money = Field(json_schema_extra=check_as("derived"))


class Lifecycle(StrictModel):
    """Checkpoint cadence and data lifecycle the storage was priced with (spec where set,
    otherwise the policy); deployment configs (``ptplan render``) enforce these."""

    model_config = ConfigDict(json_schema_extra=SPEC)

    every_steps: Positive
    keep_hot: Positive
    archive_every: Positive
    retention_days: Positive
    rollout_log_days: Positive
    metrics_days: Positive


class Place(StrictModel):
    provider: str
    region: str
    zone: str = ""
    """Empty: anywhere in the region (region-level capacity, buckets)."""


class NetworkItem(StrictModel):
    flow: Flow = Field(json_schema_extra=SPEC)
    src: Place
    dst: Place
    path: NetworkPath
    nodes: Positive | None = None
    """Weight sync: the rollout nodes on this path (each receives one copy per step)."""
    gb: NonNegative = Field(json_schema_extra=SPEC)
    usd_per_gb: NonNegative
    cost_usd: Money
    note: str = Field(default="", json_schema_extra=INFO)


class SolverInfo(StrictModel):
    """Solver statistics and timings: informational (``status`` must equal the plan's)."""

    model_config = ConfigDict(json_schema_extra=INFO)

    name: str
    status: Status
    gap: float
    seconds: float
    layouts: int
    options_considered: int
    options_pruned: int
    milp_options: int
    offers_considered: int
    cross_check: str


class LayoutResult(StrictModel):
    layout: str
    pipeline_mode: str
    status: Status
    total_cost_usd: str | None
    makespan_hours: float | None
    provider: str | None
    region: str | None


class Explain(StrictModel):
    """Why the plan is what it is (text, and the best plan of every other layout):
    informational."""

    model_config = ConfigDict(json_schema_extra=INFO)

    summary: list[str]
    binding: list[str]
    marginal: list[str]
    alternatives: list[LayoutResult]


class FrameworkPrice(StrictModel):
    """Schema 9 (``plan --explain``): what planning for the framework release costs over the
    abstract optimum (``framework: any``), and why (informational)."""

    model_config = ConfigDict(json_schema_extra=INFO)

    framework: str
    total_cost_usd: Money
    any_total_cost_usd: Money | None
    """The cheapest plan any framework could run under the same deadline and budget; None when
    none exists."""
    any_layout: str | None
    any_gpus: list[str]
    reasons: list[str]
    """What the release rules out that the abstract plan uses (pools, accelerators,
    precisions, engines)."""
    statement: str


Pair = Annotated[list[NonNegative], Field(min_length=2, max_length=2)]
MoneyPair = Annotated[list[Money], Field(min_length=2, max_length=2)]


class Uncertainty(StrictModel):
    """Schema 8: the plan's 80 % interval (:mod:`ptplan.planfile.uncertainty`). The demand
    model's interval (``model_factor``: multipliers on the job's time from the leave-one-out
    errors of the validation suite, :func:`ptplan.core.fit.model_interval`), narrowed where
    the team's own ledger runs measured a phase (``calibrated_share`` of the GPU-hours), is
    ``factor``; the makespan × factor, and total = fixed + ``time_cost_usd`` × factor."""

    level: Annotated[float, Field(gt=0, lt=1)]
    total_cost_usd: MoneyPair
    makespan_hours: Pair
    factor: Pair
    """[low, high]: the multipliers applied to the time and to the time-scaled cost."""
    model_factor: Pair
    """[low, high] of the stored fit for the plan's method (before calibration)."""
    family: str
    cases: Annotated[int, Field(ge=0)]
    time_cost_usd: Money
    """The cost that scales with the job's time: compute (instances), boot disks, CPU pools and
    per-hour other costs; storage, network and fixed or per-sample other costs do not."""
    calibrated_share: Fraction
    """Share of the phases' GPU-hours whose spread is the team's measured one (≥ 3 runs)."""
    calibration_runs: Annotated[int, Field(ge=0)]
    fit: str = Field(json_schema_extra=check_as(
        "informational", description="digest of the stored fit the interval was taken from: "
        "check compares model_factor, family and cases with the stored fit when it is the same"))
    basis: str = Field(json_schema_extra=INFO)
