"""``Portfolio``: the input of ``ptplan reserve`` (quarterly reserved-capacity purchasing).

A portfolio file (YAML or JSON) is validated like a project spec: every block is a strict
pydantic model (``extra="forbid"``, no booleans as numbers, finite values), an unknown key is
an error with a close-match suggestion, and every error is one line naming the field
(:class:`~ptplan.core.errors.InputError`, exit 2). Field reference: ``docs/reserve.md``.

Blocks:

* ``horizon_weeks`` (default 52): the weeks the purchase decision is evaluated over; week 0
  starts now.
* ``scenarios``: named demand scenarios with a probability ``weight`` (normalised to sum 1,
  and the normalisation is reported), a ``demand_multiplier`` applied to all of the scenario's
  demand, and optionally their own ``demand`` rows, which replace the top-level rows in that
  scenario. Default: one scenario ``expected`` with weight 1.
* ``projects``: project specs (a path relative to the portfolio file, or an inline spec), each
  planned with the planner; ``start_week``, ``repeat_every_weeks`` and per-scenario
  ``scenario_weights`` (a multiplier of that project's demand in the scenario; 0 = the project
  does not run in it; unlisted scenarios use 1).
* ``demand``: explicit forecasts, average concurrent ``nodes`` (constant from ``start_week``
  to ``end_week``) or ``weekly_nodes`` (one value per week from ``start_week``).
* ``existing``: commitments held today, usable and paid until ``expires_week`` (exclusive).
* ``products``: purchasable commitments; ``usd_per_hour`` defaults to the catalog's reserved
  rate; without a ``products`` block every instance type with demand gets the catalog's 1- and
  3-year rates as candidates.
* ``commitments``: purchasable spend commitments ($/h): AWS EC2 Instance and Compute Savings
  Plans, GCP flexible CUDs (:class:`Commitment`; billed as :mod:`ptplan.reservations.spend`
  describes).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from ptplan.core.errors import suggest
from ptplan.core.yamlio import StrictModel, quoted, read_mapping, validate

Name = Annotated[str, Field(min_length=1, max_length=120, pattern=r"^[A-Za-z0-9_.:/+-]+$")]
Week = Annotated[int, Field(ge=0, le=5200, strict=True)]
Nodes = Annotated[float, Field(ge=0, le=1e6, strict=True)]
Price = Annotated[float, Field(gt=0, le=1e6, strict=True)]
Money = Annotated[float, Field(ge=0, le=1e12, strict=True)]
Multiplier = Annotated[float, Field(ge=0, le=1000, strict=True)]
Text = Annotated[str, Field(min_length=1, max_length=200)]


_Strict = StrictModel
"""The blocks' base: :class:`ptplan.core.yamlio.StrictModel` (unknown keys rejected, frozen,
no NaN/inf)."""


class DemandRow(_Strict):
    """Explicit demand for one (provider, region, instance type), in average concurrent nodes."""

    provider: Text
    region: Text
    instance_type: Text
    nodes: Nodes | None = None
    """Constant average concurrent nodes from ``start_week`` to ``end_week``."""
    weekly_nodes: Annotated[list[Nodes], Field(min_length=1, max_length=5200)] | None = None
    """Average concurrent nodes per week, the first value in ``start_week``."""
    start_week: Week = 0
    end_week: Week | None = None
    """Exclusive; default: the end of the horizon (``nodes`` only)."""
    spot_ok: bool = False
    on_demand_usd_per_hour: Price | None = None
    spot_usd_per_hour: Price | None = None
    label: Text | None = None

    @model_validator(mode="after")
    def _shape(self) -> DemandRow:
        if (self.nodes is None) == (self.weekly_nodes is None):
            raise ValueError("give exactly one of nodes (constant) or weekly_nodes (a list)")
        if self.weekly_nodes is not None and self.end_week is not None:
            raise ValueError("end_week applies to nodes only; weekly_nodes ends with its list")
        if self.end_week is not None and self.end_week <= self.start_week:
            raise ValueError(f"end_week {self.end_week} must be after start_week "
                             f"{self.start_week}")
        if self.spot_usd_per_hour is not None and not self.spot_ok:
            raise ValueError("spot_usd_per_hour is set but spot_ok is false; set spot_ok: true "
                             "or remove the spot price")
        return self


class Scenario(_Strict):
    name: Name
    weight: Annotated[float, Field(gt=0, le=1e6, strict=True)]
    """Probability weight (all weights are normalised to sum 1)."""
    demand_multiplier: Multiplier = 1.0
    demand: list[DemandRow] | None = None
    """Replaces the top-level ``demand`` rows in this scenario (projects still apply)."""


class Project(_Strict):
    name: Name | None = None
    """Default: the spec's name, made unique with ``#n``."""
    spec: str | dict[str, Any]
    """A spec file path (relative to the portfolio file) or an inline spec."""
    start_week: Week = 0
    repeat_every_weeks: Annotated[int, Field(ge=1, le=5200, strict=True)] | None = None
    scenario_weights: dict[str, Multiplier] = {}


class Existing(_Strict):
    """A commitment held today: ``count`` nodes, paid and usable until ``expires_week``."""

    provider: Text
    region: Text
    instance_type: Text
    count: Annotated[int, Field(gt=0, le=1_000_000, strict=True)]
    usd_per_hour: Annotated[float, Field(ge=0, le=1e6, strict=True)]
    expires_week: Annotated[int, Field(ge=1, le=5200, strict=True)]
    """Usable in weeks 0 .. expires_week − 1."""
    label: Text | None = None


class Product(_Strict):
    """A purchasable commitment of one node of ``instance_type`` for ``term_years``."""

    name: Name
    provider: Text
    region: Text
    instance_type: Text
    term_years: Literal[1, 3]
    usd_per_hour: Annotated[float, Field(ge=0, le=1e6, strict=True)] | None = None
    """Recurring price per node-hour; default: the catalog's reserved rate."""
    upfront_usd: Money = 0.0
    """Paid at purchase per node; the horizon is charged the share of the term inside it."""


SpendKind = Literal["ec2_instance_savings_plan", "compute_savings_plan", "flexible_cud"]
Share = Annotated[float, Field(gt=0, le=1, strict=True)]


class Commitment(_Strict):
    """A spend commitment that may be bought: ``$/h`` paid every hour of the term, used or not.

    AWS EC2 Instance Savings Plans (one instance ``family`` in one ``region``) and Compute
    Savings Plans (any AWS instance in any region); GCP flexible (spend-based) CUDs (any GCP
    region). Rates: ``rates_file`` (written by ``ptplan prices savings-plans``), else
    ``discount`` off on-demand, else the catalog default (an assumption; see docs/reserve.md)."""

    name: Name
    kind: SpendKind
    term_years: Literal[1, 3]
    region: Text | None = None
    """EC2 Instance Savings Plans: the region they apply in."""
    family: Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]*$", max_length=20)] | None = None
    """EC2 Instance Savings Plans: the instance family, e.g. ``p5``."""
    discount: Annotated[float, Field(ge=0, lt=1, strict=True)] | None = None
    """Share off the on-demand price (of the eligible part, for flexible CUDs)."""
    rates_file: str | None = None
    """AWS: a rates file of ``ptplan prices savings-plans`` (relative to the portfolio)."""
    eligible_share: Share | None = None
    """Flexible CUDs: the share of a machine's on-demand price they may cover (default: its
    vCPU and memory part in the embedded catalog; GPUs are not covered)."""
    step_usd_per_hour: Annotated[float, Field(gt=0, le=1e4, strict=True)] = 0.001
    """Granularity of the hourly commitment (AWS sells Savings Plans in $0.001/h steps)."""

    @model_validator(mode="after")
    def _scope(self) -> Commitment:
        instance = self.kind == "ec2_instance_savings_plan"
        if instance and (self.region is None or self.family is None):
            raise ValueError("an ec2_instance_savings_plan needs region and family (e.g. "
                             "region: us-east-1, family: p5)")
        if not instance and (self.region is not None or self.family is not None):
            raise ValueError(f"region and family apply to ec2_instance_savings_plan only; a "
                             f"{self.kind} covers every region")
        if self.kind == "flexible_cud" and self.rates_file is not None:
            raise ValueError("rates_file holds AWS Savings Plans rates; give a flexible_cud a "
                             "discount")
        if self.kind != "flexible_cud" and self.eligible_share is not None:
            raise ValueError("eligible_share applies to flexible_cud only (Savings Plans cover "
                             "the whole instance price)")
        if self.rates_file is not None and self.discount is not None:
            raise ValueError("give rates_file or discount, not both")
        return self


class Portfolio(_Strict):
    name: Text = "portfolio"
    horizon_weeks: Annotated[int, Field(ge=1, le=520, strict=True)] = 52
    scenarios: Annotated[list[Scenario], Field(min_length=1, max_length=100)] = [
        Scenario(name="expected", weight=1.0)]
    projects: Annotated[list[Project], Field(max_length=10_000)] = []
    demand: Annotated[list[DemandRow], Field(max_length=100_000)] = []
    existing: list[Existing] = []
    products: list[Product] | None = None
    commitments: Annotated[list[Commitment], Field(max_length=100)] = []

    @model_validator(mode="after")
    def _names(self) -> Portfolio:
        names = [s.name for s in self.scenarios]
        for i, name in enumerate(names):
            if name in names[:i]:
                raise ValueError(f"scenarios[{i}].name {name!r} repeats an earlier scenario; "
                                 "give each scenario its own name")
        for i, p in enumerate(self.projects):
            for key in p.scenario_weights:
                if key not in names:
                    raise ValueError(
                        f"projects[{i}].scenario_weights: unknown scenario {key!r}"
                        f"{suggest(key, names)}; scenarios: {', '.join(names)}")
        seen: dict[str, str] = {}
        named = [(f"products[{i}]", p.name) for i, p in enumerate(self.products or [])]
        named += [(f"commitments[{i}]", c.name) for i, c in enumerate(self.commitments)]
        for where, name in named:
            if name in seen:
                raise ValueError(f"{where}.name {name!r} repeats {seen[name]}; give each "
                                 "product and commitment its own name")
            seen[name] = where
        return self


def load_portfolio(path: str) -> Portfolio:
    """Load and validate a portfolio file; raises :class:`~ptplan.core.errors.InputError`."""
    return validate(Portfolio, read_mapping(path, "portfolio"), f"portfolio {quoted(path)}")


def portfolio_dir(path: str) -> Path:
    """The folder project spec paths are relative to."""
    return Path(path).resolve().parent


def applied_defaults(p: Portfolio) -> list[str]:
    """Defaults the loader filled in (shown in every output)."""
    out: list[str] = []
    fields = p.model_fields_set
    if "horizon_weeks" not in fields:
        out.append("horizon_weeks = 52")
    if "scenarios" not in fields:
        out.append("scenarios = [expected: weight 1, demand_multiplier 1]")
    if p.products is None:
        out.append("products = the catalog's 1- and 3-year reserved rates for every instance "
                   "type with demand (no upfront)")
    else:
        for prod in p.products:
            if prod.usd_per_hour is None:
                out.append(f"products {prod.name}: usd_per_hour = the catalog's "
                           f"{prod.term_years}-year reserved rate")
    return out
