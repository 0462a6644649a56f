"""The ``Plan``: what the planner returns, prints and writes (versioned JSON schema).

Every figure is traceable: a pool's cost is Σ nodes × usd_per_hour × held_hours over its
allocations; a phase's busy hours are its tokens / (Σ nodes × effective fraction ×
tokens_per_node_hour × usable node fraction); idle = held − busy, billed. Money is a decimal
string in USD (cents), rounded once at output; every float is written with 12 significant
digits, the same bytes on any CPU (:data:`~ptplan.planfile.fields.PRECISION_STATEMENT`).

Schema history (each version in full: docs/plan-json.md): 1 first release; 2 closed
vocabularies (:mod:`ptplan.core.kinds`) and a required ``lifecycle``; 3 phases' parallel
layout, engine and ``calibration``; 4 boot disks priced (total = compute + disks + storage +
network; older plans read as disks unpriced); 5 ``method: generate`` and
``calibration[].runs``; 6 capacity booked for the run (``block``, ``flex_start``,
``billed_hours``, ``bookings``; a plan without them is written as schema 5); 7 CPU pools
(``cpu_cost_usd``, ``cpu_pools[]``); 8 ``uncertainty`` and ``calibration[].run_rates``; 9
``framework`` (the release the plan was made for: ``render`` follows it, ``check`` holds every
pool, role and precision to it) and, with ``--explain``, ``framework_price``. Every plan the
planner writes is schema 9; older ones read as before (as made for ``any``).

Schema-1 plans written before ``lifecycle`` need their spec (``render --spec``) where the
lifecycle matters. The JSON Schema is published by ``ptplan schema plan``.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import (
    ConfigDict,
    Field,
    field_validator,
    model_serializer,
    model_validator,
)

from ptplan.core.kinds import CapacityType, Flow, NetworkPath, Status
from ptplan.core.numbers import SIGNIFICANT_DIGITS, round_floats
from ptplan.core.yamlio import StrictModel
from ptplan.planfile.digest import LATER_SPEC_FIELDS, spec_digest
from ptplan.planfile.fields import (
    CHECK_KINDS,
    INFO,
    PRECISION_STATEMENT,
    SPEC,
    Count,
    Fraction,
    Hours,
    Money,
    NonNegative,
    Positive,
    check_as,
    check_kind,
    hours,
    usd,
)
from ptplan.planfile.schema_items import (
    CpuPoolItem,
    Explain,
    FrameworkPrice,
    LayoutResult,
    Lifecycle,
    NetworkItem,
    OtherCostItem,
    Place,
    SolverInfo,
    StorageItem,
    Uncertainty,
)

SCHEMA_VERSION = 9
"""The schema every plan is written with (its history above); plans of schema 1 to it are
read. Up to 7 a plan took the lowest schema holding its parts (5 without other costs,
bookings or CPU pools); 8 adds ``uncertainty``, which every plan has; 9 ``framework``."""
PLAIN_SCHEMA_VERSION = 5
"""Before schema 8: the schema of a plan with no other costs, bookings or CPU pools."""
REGENERATE = "regenerate it with `ptplan plan SPEC --format json`"

__all__ = ["CHECK_KINDS", "LATER_SPEC_FIELDS", "PLAIN_SCHEMA_VERSION", "REGENERATE",
           "SCHEMA_VERSION", "Allocation", "Booking", "CalibrationRecord", "CapacityType",
           "CpuPoolItem",
           "Explain", "Flow", "LayoutResult", "Lifecycle", "NetworkItem", "NetworkPath",
           "OtherCostItem", "ParallelLayout", "PhasePlan", "Place", "Plan", "PoolPlan",
           "SolverInfo", "SpotModel", "Status", "StorageItem", "Uncertainty", "check_kind", "hours",
           "spec_digest", "usd"]


class SpotModel(StrictModel):
    lost_work_minutes: float = Field(ge=0)
    restart_minutes: float = Field(ge=0)
    checkpoint_minutes: float = Field(ge=0)


class Allocation(StrictModel):
    provider: str
    region: str
    zone: str
    instance_type: str
    gpu: str
    gpus_per_node: Positive
    capacity_type: CapacityType
    nodes: Positive
    hours: Hours
    usd_per_hour: NonNegative
    cost_usd: Money
    max_nodes: Positive | None = Field(json_schema_extra=check_as(
        "informational", description="the offer's cap in the catalog the plan was made on: "
        "check holds nodes to it but cannot know the catalog's figure"))
    interruptions_per_hour: NonNegative | None
    effective_fraction: Annotated[float, Field(gt=0, le=1)]
    """Share of a node's time doing useful work after spot overhead (1 off spot)."""
    note: str = Field(json_schema_extra=INFO)
    billed_hours: Hours | None = None
    """Schema 6, ``block`` allocations of a pool: the whole block units covering the held
    hours (cost = nodes × usd_per_hour × billed_hours); absent elsewhere (billed = hours)."""

    @model_serializer(mode="wrap")
    def _omit_unset(self, handler: Any) -> dict[str, Any]:
        out = handler(self)
        if out.get("billed_hours") is None:
            out.pop("billed_hours", None)
        return out


class Booking(StrictModel):
    """Schema 6: capacity to book for one pool's allocation of type ``block`` (a capacity
    block, calendar reservation: ``units`` × ``unit_hours`` = ``duration_hours`` covering the
    held hours, paid upfront; ``rounding_hours`` = duration − held, paid, unused) or
    ``flex_start`` (billed as used: no units; ``wait_hours`` before it starts, unbilled).
    ``cost_usd`` = nodes × usd_per_hour (per instance-hour) × duration; ``zone`` empty: the
    provider picks it at booking; ``earliest_start``: the spec's ``sla.start_after``."""

    pool: str
    capacity_type: CapacityType
    provider: str
    region: str
    zone: str = ""
    instance_type: str
    nodes: Positive
    usd_per_hour: NonNegative
    unit_hours: NonNegative
    units: Count
    duration_hours: Hours
    held_hours: Hours
    rounding_hours: Hours
    cost_usd: Money
    upfront: bool
    wait_hours: Hours = 0.0
    earliest_start: str = Field(json_schema_extra=SPEC)
    on_demand_usd_per_hour: NonNegative | None = Field(default=None, json_schema_extra=INFO)
    on_demand_cost_usd: Money | None = Field(default=None, json_schema_extra=INFO)
    """The same nodes on demand for the held hours (what the booking is compared with)."""
    how_to_book: str = Field(default="", json_schema_extra=INFO)


class ParallelLayout(StrictModel):
    """How a phase runs on its pool: training (tp, cp, pp, dp, ZeRO stage, optimizer offload)
    or generation (engine tensor parallel and replicas)."""

    model_config = ConfigDict(json_schema_extra=SPEC)

    tp: Positive
    cp: Positive = 1
    pp: Positive = 1
    dp: Positive = 1
    zero_stage: Annotated[int, Field(ge=0, le=3)] | None = None
    optimizer_offload: bool = False


class CalibrationRecord(StrictModel):
    """A measured cell that rescaled the demand model (``calibration`` in the spec)."""

    model_config = ConfigDict(json_schema_extra=SPEC)

    phase: str
    gpu: str
    measured_precision: str
    measured_tokens_per_second_per_gpu: float
    modelled_tokens_per_second_per_gpu: float
    factor: float
    """measured ÷ modelled; every precision of this phase on this GPU is rescaled by it."""
    applied_to: list[str]
    """Precisions of the plan's phases on this GPU that used it."""
    runs: list[str] = Field(default=[], json_schema_extra=INFO)
    """Ledger runs the measurement was derived from (``ptplan runs calibrate``); empty for a
    measurement entered by hand. Optional, so plans of schemas 3 and 4 read unchanged."""
    run_rates: list[Annotated[float, Field(gt=0)]] = Field(default=[], json_schema_extra=SPEC)
    """Schema 8: each run's tokens/s per GPU, in the order of ``runs`` (the spread that
    narrows the plan's interval); absent when the entry has none."""

    @model_serializer(mode="wrap")
    def _omit_no_rates(self, handler: Any) -> dict[str, Any]:
        out = handler(self)
        if not out.get("run_rates"):
            out.pop("run_rates", None)
        return out


class PhasePlan(StrictModel):
    name: str
    pool: str
    precision: str | None
    tokens: NonNegative
    tokens_per_node_hour: Annotated[float, Field(gt=0)] | None
    """Throughput per effective node at the planned pool size (drain and floors included):
    tokens ÷ (busy hours × effective nodes × usable fraction)."""
    usable_node_fraction: Fraction
    """Whole replicas only: ⌊N / nodes_per_replica⌋ × nodes_per_replica / N."""
    replica_gpus: Count = Field(json_schema_extra=SPEC)
    nodes_per_replica: Count
    busy_hours: Hours
    latency_floor_hours: Hours = Field(json_schema_extra=SPEC)
    """Least busy time at any node count (each step's sequential work); busy ≥ floor."""
    gpu_hours: Hours
    cost_usd: Money
    calibrated: bool
    models: list[str] = Field(default=[], json_schema_extra=INFO)
    """Model roles whose work the phase runs (policy, reference, reward, teacher, critic)."""
    fallback: dict[str, Fraction] = {}
    """Share of a role's work run at bf16 or better (policy high_precision_fallback)."""
    parallel_layout: ParallelLayout | None = None
    """Schema 3: training layout or generation engine the phase was priced with."""
    allocations: list[Allocation]


class PoolPlan(StrictModel):
    name: str
    phases: list[str]
    provider: str
    region: str
    gpu: str
    gpus_per_node: Positive
    nodes: Count
    spot_ok: bool
    held_hours: Hours
    busy_hours: Hours
    idle_hours: Hours
    usd_per_hour: NonNegative
    """The instances' $/h (Σ allocations); the boot disks are apart (``disk_usd_per_hour``)."""
    cost_usd: Money
    idle_cost_usd: Money
    gang_overhead_fraction: Annotated[float, Field(ge=0, lt=1)]
    allocations: list[Allocation]
    boot_disk_gb: Annotated[int, Field(ge=0)] = 0
    """Schema 4: the boot disk of each node (the policy's ``boot_disk_gb``; 0 in older plans)."""
    disk_tier: str = ""
    """The catalog's block-storage tier the disks are priced at (empty: no block tier, $0)."""
    disk_usd_per_gb_month: NonNegative = 0.0
    disk_usd_per_hour: NonNegative = 0.0
    """nodes × boot_disk_gb × disk_usd_per_gb_month ÷ 730."""
    disk_cost_usd: Money = "0.00"
    """disk_usd_per_hour × held_hours: the disks are billed while the nodes are held."""


class Plan(StrictModel):
    model_config = ConfigDict(json_schema_extra={
        "description": PRECISION_STATEMENT,
        "x-significant-digits": SIGNIFICANT_DIGITS,
        "if": {"properties": {"schema_version": {"minimum": 2}}},
        "then": {"required": ["lifecycle"]},
    })

    schema_version: int = Field(default=SCHEMA_VERSION, json_schema_extra={
        "enum": list(range(1, SCHEMA_VERSION + 1)), **INFO})
    spec_name: str = Field(json_schema_extra=SPEC)
    spec_digest: str = Field(json_schema_extra=SPEC)
    method: Literal["sft", "rl", "opd", "generate"] = Field(json_schema_extra=SPEC)
    algorithm: str | None = Field(json_schema_extra=SPEC)
    status: Status
    objective: str = Field(pattern="^(cost|time)$", json_schema_extra=check_as(
        "informational", enum=["cost", "time"], description="what the user asked to "
        "optimise; the plan's figures do not depend on it"))
    total_cost_usd: Money
    compute_cost_usd: Money
    storage_cost_usd: Money = "0.00"
    network_cost_usd: Money = "0.00"
    disk_cost_usd: Money = "0.00"
    """Schema 4: the nodes' boot disks (Σ pools' ``disk_cost_usd``)."""
    idle_cost_usd: Money
    makespan_hours: Hours
    deadline_hours: Annotated[float, Field(gt=0)] | None = Field(json_schema_extra=SPEC)
    budget_usd: Money | None = Field(json_schema_extra=SPEC)
    pipeline_mode: Literal["colocated", "sync", "async"]
    layout: str
    provider: str
    region: str
    zone: str = ""
    """The trainer's zone: pools that hold state or talk to the trainer every micro-step are
    placed here; rollout nodes elsewhere pay egress (``network``). Empty when no pool holds a
    zoned (spot) node: region-level nodes can then sit in any one zone."""
    split_regions: bool = False
    steps: Positive = Field(json_schema_extra=SPEC)
    fill_fraction: Fraction
    max_nodes_per_pool: Positive = Field(json_schema_extra=SPEC)
    multi_node_training_min_gpus_per_node: Positive = Field(json_schema_extra=SPEC)
    spot_model: SpotModel = Field(json_schema_extra=SPEC)
    pools: list[PoolPlan]
    phases: list[PhasePlan]
    storage: list[StorageItem] = []
    lifecycle: Lifecycle | None = None
    """Required from schema 2 on; absent only in plans of schema 1 written before it."""
    network: list[NetworkItem] = []
    weight_sync_gb_per_node_step: NonNegative = Field(default=0.0, json_schema_extra=SPEC)
    solver: SolverInfo
    policy: dict[str, Any] = Field(json_schema_extra=check_as(
        "informational", description="the rules the plan was made under, as recorded: check "
        "holds the plan to them (and --policy to the team's file) but cannot know whether "
        "the record was edited"))
    """The policy the plan was made under (``ptplan check`` re-checks it)."""
    budget_warn_usd: Money | None = None
    budget_stop_usd: Money | None = None
    warnings: list[str] = Field(json_schema_extra=INFO)
    defaults_applied: list[str] = Field(json_schema_extra=INFO)
    catalog: dict[str, Any] = Field(json_schema_extra=INFO)
    catalog_as_of: str = Field(json_schema_extra=INFO)
    calibration: list[CalibrationRecord] = []
    """Schema 3: measured cells that bound the model, and the precisions they rescaled."""
    other_cost_usd: Money | None = None
    """Schema 6: Σ ``other_costs[]`` (in the total); absent when the spec has none."""
    other_costs: list[OtherCostItem] | None = None
    """Schema 6: the spec's costs beyond compute, line by line; absent when it has none."""
    cpu_cost_usd: Money | None = None
    cpu_pools: list[CpuPoolItem] | None = None
    """Schema 7: Σ ``cpu_pools[]`` (in the total) and the pools; absent without CPU work."""
    explain: Explain
    bookings: list[Booking] = []
    """Schema 6: capacity to book for the run (absent when there is none)."""
    uncertainty: Uncertainty | None = None
    """Schema 8: the 80 % interval of the total and the makespan (absent in older plans)."""
    framework: str | None = Field(default=None, json_schema_extra=SPEC)
    """Schema 9: the framework release the plan was made for (``verl==0.9``,
    ``openrlhf==0.11``, ``any``); absent in older plans, which read as ``any``."""
    framework_price: FrameworkPrice | None = None
    """Schema 9, with ``--explain``: the cheapest plan any framework could run, against this
    one (informational)."""

    @property
    def framework_key(self) -> str:
        """The release the plan was made for (``any`` for plans before schema 9)."""
        return self.framework or "any"

    @field_validator("schema_version")
    @classmethod
    def _known_version(cls, value: int) -> int:
        if value > SCHEMA_VERSION:
            raise ValueError(f"schema {value} is newer than this ptplan reads (1 to "
                             f"{SCHEMA_VERSION}); upgrade ptplan, or {REGENERATE}")
        if value < 1:
            raise ValueError(f"schema {value} is not a ptplan plan schema; {REGENERATE}")
        return value

    @model_validator(mode="after")
    def _lifecycle_recorded(self) -> Plan:
        if self.schema_version >= 2 and self.lifecycle is None:
            raise ValueError(f"lifecycle is missing (required from schema 2 on: the "
                             f"checkpoint cadence and lifecycle the storage was priced with); "
                             f"{REGENERATE}")
        return self

    @model_validator(mode="after")
    def _other_costs_schema(self) -> Plan:
        if (self.other_cost_usd is None) != (self.other_costs is None):
            raise ValueError("other_cost_usd and other_costs come together (schema 6); "
                             f"{REGENERATE}")
        if (self.other_costs is not None and self.schema_version < 6) \
                or (self.cpu_pools is not None and self.schema_version < 7):
            raise ValueError(f"other_costs needs schema 6 and cpu_pools 7, the plan says "
                             f"{self.schema_version}; {REGENERATE}")
        if (self.cpu_cost_usd is None) != (self.cpu_pools is None):
            raise ValueError(f"cpu_cost_usd and cpu_pools come together; {REGENERATE}")
        return self

    @model_serializer(mode="wrap")
    def _drop_absent_later_fields(self, handler: Any) -> Any:
        """Fields added with schema 6 are left out when absent (bookings: when empty), so that
        a plan without them is the same JSON as before (schema 5)."""
        out = handler(self)
        if isinstance(out, dict):
            for key in LATER_PLAN_FIELDS:
                if key in out and out[key] is None:
                    del out[key]
            if not out.get("bookings"):
                out.pop("bookings", None)
        return out

    def to_json(self) -> str:
        """The plan JSON, every float to 12 significant digits (the same bytes on any CPU)."""
        return json.dumps(round_floats(self.model_dump(mode="json")), indent=2,
                          ensure_ascii=False) + "\n"

    def rounded(self) -> Plan:
        """The plan as :meth:`to_json` writes it and ``load_plan`` reads it back (floats to 12
        significant digits): the planner verifies and returns it, the plan as printed."""
        return type(self).model_validate(round_floats(self.model_dump(mode="json")))


LATER_PLAN_FIELDS = ("other_cost_usd", "other_costs", "cpu_cost_usd", "cpu_pools", "uncertainty",
                     "framework", "framework_price")

