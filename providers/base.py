"""The normalised price model every source returns, and the source registry.

An :class:`Offer` is one way to rent one node: (provider, region, zone, instance type, capacity
type) at ``usd_per_hour`` per node. ``capacity_type`` is ``on_demand``, ``spot`` or ``reserved``.
A reserved offer exists only where the organisation already holds reservations
(``max_nodes`` = nodes held): catalog 1y/3y rates without holdings are kept in
:attr:`Offer.reserved_rates` for purchasing analysis and never become plan offers.

Spot offers carry ``interruptions_per_hour`` (per-node hazard λ, 1/h). ``max_nodes`` None means
"no published cap" (the planner applies its own pool cap and says so).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from ptplan.core import clock
from ptplan.core.errors import InputError

CAPACITY_TYPES: tuple[str, ...] = ("on_demand", "spot", "reserved")
BOOKED_TYPES: tuple[str, ...] = ("block", "flex_start")
"""Capacity booked for one run (:attr:`Catalog.block_offers`): they enter a plan only when the
run has a start date (``sla.start_after`` / ``--start-after``); see
:mod:`ptplan.providers.blocks`."""
STALE_AFTER_DAYS = 90
"""A catalog older than this (against today's date) is warned about in every plan."""


def offer_key(provider: str, region: str, zone: str, instance_type: str,
              capacity_type: str) -> str:
    """:attr:`Offer.key`: ``provider:region[/zone]:instance_type:capacity_type``."""
    where = f"{region}/{zone}" if zone else region
    return f"{provider}:{where}:{instance_type}:{capacity_type}"


CACHE_SUFFIXES: tuple[str, ...] = (".sqlite", ".sqlite3", ".db")
"""File names read as a price cache (``ptplan.providers.cache``; the registry routes them there)."""


@dataclass(frozen=True, slots=True)
class Offer:
    provider: str
    region: str
    zone: str
    instance_type: str
    gpu: str
    gpus_per_node: int
    capacity_type: str
    usd_per_hour: float
    vcpus: float | None = None
    memory_gib: float | None = None
    interruptions_per_hour: float | None = None
    max_nodes: int | None = None
    as_of: str = ""
    source: str = ""
    note: str = ""
    """How the price was formed or which assumption it rests on (shown in plans)."""
    reserved_sunk: bool = False
    """Reserved holdings declared sunk: zero marginal cost in a project plan."""
    block_unit_hours: float | None = None
    """``block``: the booking step (24 h; 168 h for week steps): billed for whole units."""
    block_max_hours: float | None = None
    """``block``: the longest booking of one unit size (AWS: 14 days in 1-day steps);
    ``flex_start``: the longest run (GCP: 7 days)."""
    block_counts: tuple[int, ...] = ()
    """``block``: the instance counts one booking may hold (empty: 1 to ``max_nodes``)."""
    wait_hours: float = 0.0
    """``flex_start``: the expected wait for the capacity (added to the run's time, unbilled)."""
    max_start_days: int | None = None
    """``block``: how far ahead a booking may start (AWS: 56 days); None: no limit known."""

    @property
    def key(self) -> str:
        return offer_key(self.provider, self.region, self.zone, self.instance_type,
                         self.capacity_type)

    @property
    def order(self) -> tuple[str, str, str, str, str]:
        """Sort key of offers in a catalog or a pull (provider, region, zone, type, capacity)."""
        return (self.provider, self.region, self.zone, self.instance_type, self.capacity_type)


@dataclass(frozen=True, slots=True)
class ReservedRate:
    """A purchasable commitment rate (not capacity the organisation holds)."""

    provider: str
    region: str
    instance_type: str
    term_years: int
    usd_per_hour: float
    """Effective hourly rate: recurring hourly + upfront fee / term hours."""
    source: str
    assumption: bool
    offering_class: str = ""
    """AWS ``standard``/``convertible``; GCP ``resource-cud``; empty when unknown."""
    purchase_option: str = ""
    """AWS ``No Upfront``/``Partial Upfront``/``All Upfront``; GCP CUDs ``No Upfront``."""
    upfront_usd: float = 0.0
    """One-time fee per node for the whole term (amortised into ``usd_per_hour``)."""
    recurring_usd_per_hour: float | None = None
    """The billed hourly part, before amortising the upfront fee (None: not published)."""
    as_of: str = ""

    @property
    def order(self) -> tuple[str, str, str, int, str, str]:
        """Identity and sort key of a purchasable option: one rate per key in a catalog."""
        return (self.provider, self.region, self.instance_type, self.term_years,
                self.offering_class, self.purchase_option)

    @property
    def key(self) -> str:
        return (f"{self.provider}:{self.region}:{self.instance_type}:{self.term_years}y:"
                f"{self.offering_class or '-'}:{self.purchase_option or '-'}")


@dataclass(frozen=True, slots=True)
class StorageTier:
    provider: str
    region: str
    tier: str
    usd_per_gb_month: float
    min_days: float
    retrieval_usd_per_gb: float
    access: str
    """``ms`` (online), ``minutes`` or ``hours`` to first byte."""
    source: str
    status: str
    """V (official page), S (secondary), U (assumption) as in REFERENCE_FACTS.md."""


@dataclass(frozen=True, slots=True)
class EgressRate:
    provider: str
    path: str
    """``same_zone``, ``cross_zone``, ``inter_region``, ``inter_continent`` or ``internet``."""
    usd_per_gb: float
    source: str
    status: str


@dataclass(frozen=True)
class Catalog:
    name: str
    as_of: str
    offers: tuple[Offer, ...]
    storage_tiers: tuple[StorageTier, ...] = ()
    egress: tuple[EgressRate, ...] = ()
    reserved_rates: tuple[ReservedRate, ...] = ()
    exclusions: tuple[str, ...] = ()
    """Rows that could not become offers, with the reason (they reach ``Plan.warnings``)."""
    notes: tuple[str, ...] = field(default=())
    cpu_offers: tuple[Offer, ...] = ()
    """CPU instance types (``gpus_per_node`` 0): only the plan's CPU pools use them."""
    block_offers: tuple[Offer, ...] = ()
    """Capacity blocks and flex-start (:data:`BOOKED_TYPES`): kept apart from :attr:`offers`
    because they enter a plan only when the run has a start date."""

    def age_days(self, today: dt.date | None = None) -> int | None:
        try:
            as_of = dt.date.fromisoformat(self.as_of[:10])
        except ValueError:
            return None
        return ((today or clock.today()) - as_of).days

    def staleness_warning(self, today: dt.date | None = None) -> str | None:
        age = self.age_days(today)
        if age is None:
            return f"catalog {self.name}: as_of {self.as_of!r} is not a date; its age is unknown"
        if age > STALE_AFTER_DAYS:
            return (
                f"catalog {self.name} is {age} days old (as_of {self.as_of}); prices may have "
                "moved: refresh it or pass a newer --catalog"
            )
        return None

    def gpus(self) -> list[str]:
        return sorted({o.gpu for o in self.offers})


def checked_regions(regions: Iterable[str], pattern: re.Pattern[str], what: str,
                    example: str) -> tuple[str, ...]:
    """``--regions`` values, sorted and deduplicated; one that does not look like ``what``
    is a one-line input error with an ``example``."""
    out = tuple(sorted(set(regions)))
    for r in out:
        if not pattern.match(r):
            raise InputError(f"--regions: {r!r} is not {what}; use names like {example}")
    return out


class PriceListModel(BaseModel):
    """Base of the models of one cloud price-list item (an AWS ``PriceList`` entry, a GCP SKU).

    Types are validated strictly (a string stays a string; a field that must be a decimal string
    says so with ``Field(strict=False)``); keys a cloud adds later are ignored, not errors;
    NaN and infinity are rejected."""

    model_config = ConfigDict(extra="ignore", frozen=True, strict=True, allow_inf_nan=False)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def validation_detail(exc: ValidationError, keys: Mapping[str, str] | None = None) -> str:
    """The first problem of a price-list item's validation as one phrase: where and what
    (``missing product.attributes.regionCode``, ``terms.OnDemand.<term>.priceDimensions.<rate>.
    pricePerUnit.USD = 'n/a' is not a number``, ``no pricing_info``).

    ``keys``: a field holding a mapping -> the placeholder shown for its (long, generated) key."""
    err = exc.errors(include_url=False)[0]
    loc = err["loc"]
    keys = keys or {}
    where = ".".join(keys.get(str(loc[i - 1]), str(part)) if i else str(part)
                     for i, part in enumerate(loc)) or "item"
    kind, value = err["type"], err.get("input")
    if kind == "missing":
        return f"missing {where}"
    if kind == "too_short" and loc:
        return f"no {loc[-1]}"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return f"{where} is not an object"
    if kind in ("float_parsing", "float_type", "int_parsing", "int_type"):
        return f"{where} = {_shown(value)} is not a number"
    return f"{where} = {_shown(value)} ({err['msg']})"
