"""The rows of the local price cache as pydantic models, checked on write and on read.

A cache file is valid SQLite written by :mod:`ptplan.providers.cache`, but it lives on the user's
disk:
another tool, an older ptplan or a hand edit can leave a price stored as text, notes that are
not JSON or a capacity type ptplan does not know. Every row goes through its model when it is
written (a bad pull never reaches the cache) and when it is read (a bad row is one line naming
the table, the row's key and the fix, ``ptplan prices refresh --provider …``; never a
traceback). Prices are finite and ≥ 0, and 0 only where the row says it is free (a sunk
reservation); capacity types are ``on_demand``, ``spot`` or ``reserved``
(:class:`~ptplan.core.kinds.CapacityType`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, ValidationError, field_validator, model_validator

from ptplan.core.yamlio import StrictModel

Name = Annotated[str, Field(min_length=1, max_length=200)]
Price = Annotated[float, Field(ge=0)]
FREE_WORDS = ("free", "sunk")
"""A zero price is valid only in a row whose note says why (a sunk reservation is free)."""


class _Row(StrictModel):
    """ptplan's strict file model, with strict types on top: a cache written by another tool
    must not have a price stored as text coerced back to a number."""

    model_config = ConfigDict(strict=True)

    @field_validator("*", mode="before")
    @classmethod
    def _no_control_characters(cls, value: Any) -> Any:
        if isinstance(value, str) and any(not c.isprintable() for c in value):
            raise ValueError("contains control characters")
        return value


def _real(value: Any) -> Any:
    """A REAL column's value as a float: SQLite returns one holding a whole number as an int."""
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


class OfferRow(_Row):
    """A row of ``offers`` (:class:`ptplan.providers.base.Offer`)."""

    provider: Name
    region: Name
    zone: Annotated[str, Field(max_length=200)]
    instance_type: Name
    gpu: Name
    gpus_per_node: Annotated[int, Field(ge=0, le=1024)]
    """0 for a CPU instance type (``gpu`` ``none``, with vcpus and memory_gib)."""
    capacity_type: Literal["on_demand", "spot", "reserved"]
    usd_per_hour: Price
    vcpus: Annotated[float, Field(gt=0)] | None
    memory_gib: Annotated[float, Field(gt=0)] | None
    interruptions_per_hour: Annotated[float, Field(ge=0)] | None
    max_nodes: Annotated[int, Field(ge=1)] | None
    as_of: Name
    source: str
    note: str

    @field_validator("vcpus", "memory_gib", "interruptions_per_hour", mode="before")
    @classmethod
    def _int_is_a_number(cls, value: Any) -> Any:
        return _real(value)

    @model_validator(mode="after")
    def _cpu_shape(self) -> OfferRow:
        if (self.gpus_per_node == 0) != (self.gpu == "none"):
            raise ValueError("gpus_per_node is 0 exactly when gpu is none (a CPU instance type)")
        if self.gpus_per_node == 0 and (self.vcpus is None or self.memory_gib is None):
            raise ValueError("a CPU instance type (gpus_per_node 0) needs vcpus and memory_gib")
        return self

    @model_validator(mode="after")
    def _free_only_when_said(self) -> OfferRow:
        if self.usd_per_hour == 0 and not any(w in self.note.lower() for w in FREE_WORDS):
            raise ValueError("usd_per_hour is 0 but the note does not say the capacity is free")
        return self


class BlockRow(_Row):
    """A row of ``block_offers`` (:mod:`ptplan.providers.cache_blocks`): a booked-capacity price."""

    provider: Name
    region: Name
    zone: Annotated[str, Field(max_length=200)]
    instance_type: Name
    gpu: Name
    gpus_per_node: Annotated[int, Field(ge=1, le=1024)]
    capacity_type: Literal["block", "flex_start"]
    usd_per_hour: Annotated[float, Field(gt=0)]
    vcpus: Annotated[float, Field(gt=0)] | None
    memory_gib: Annotated[float, Field(gt=0)] | None
    max_nodes: Annotated[int, Field(ge=1)] | None
    as_of: Name
    source: str
    note: str
    block_unit_hours: Annotated[float, Field(gt=0)] | None
    block_max_hours: Annotated[float, Field(gt=0)]
    wait_hours: Annotated[float, Field(ge=0, le=168)]
    max_start_days: Annotated[int, Field(ge=0)] | None
    block_counts: Annotated[str, Field(max_length=400, pattern=r"^[0-9]{1,5}( [0-9]{1,5})*$|^$")]

    @field_validator("usd_per_hour", "vcpus", "memory_gib", "block_unit_hours",
                     "block_max_hours", "wait_hours", mode="before")
    @classmethod
    def _int_is_a_number(cls, value: Any) -> Any:
        return _real(value)

    @model_validator(mode="after")
    def _terms(self) -> BlockRow:
        if (self.capacity_type == "block") != (self.block_unit_hours is not None):
            raise ValueError("block_unit_hours is set exactly for a block (calendar mode)")
        return self


class RateRow(_Row):
    """A row of ``reserved_rates`` (:class:`ptplan.providers.base.ReservedRate`)."""

    provider: Name
    region: Name
    instance_type: Name
    term_years: Annotated[int, Field(ge=1, le=3)]
    offering_class: str
    purchase_option: str
    usd_per_hour: Price
    upfront_usd: Price
    recurring_usd_per_hour: Price | None
    assumption: bool
    as_of: str
    source: str

    @field_validator("usd_per_hour", "upfront_usd", "recurring_usd_per_hour", mode="before")
    @classmethod
    def _int_is_a_number(cls, value: Any) -> Any:
        return _real(value)

    @field_validator("assumption", mode="before")
    @classmethod
    def _sqlite_bool(cls, value: Any) -> Any:
        return bool(value) if value in (0, 1) and not isinstance(value, float) else value


class PullRow(_Row):
    """A row of ``pulls``: ``notes`` is a JSON list of strings."""

    provider: Name
    region: Name
    as_of: Name
    source: str
    notes: tuple[str, ...]

    @field_validator("notes", mode="before")
    @classmethod
    def _json_list(cls, value: Any) -> Any:
        if not isinstance(value, str):
            raise ValueError("is not JSON text")
        try:
            parsed = json.loads(value)
        except (ValueError, RecursionError):
            raise ValueError("is not valid JSON") from None
        if not isinstance(parsed, list) or not all(isinstance(n, str) for n in parsed):
            raise ValueError("is not a JSON list of strings")
        return tuple(parsed)


def row_key(table: str, row: Mapping[str, Any]) -> str:
    """The row's primary key as shown in messages (``aws:us-east-1/use1-az1:p5.48xlarge:spot``)."""
    def part(name: str) -> str:
        value = row.get(name, "")
        text = value if isinstance(value, str) else repr(value)
        return text if text.isprintable() and len(text) <= 60 else repr(text)[:60]

    if table in ("offers", "block_offers"):
        where = part("region") + (f"/{part('zone')}" if row.get("zone") else "")
        return f"{part('provider')}:{where}:{part('instance_type')}:{part('capacity_type')}"
    if table == "reserved_rates":
        return (f"{part('provider')}:{part('region')}:{part('instance_type')}:"
                f"{part('term_years')}y:{part('offering_class')}:{part('purchase_option')}")
    return f"{part('provider')}:{part('region')}"


def row_problem(exc: ValidationError) -> str:
    """The first problem of a row as ``column = value: what is wrong``."""
    err = exc.errors(include_url=False)[0]
    column = ".".join(str(p) for p in err["loc"]) or "row"
    value = err.get("input")
    shown = repr(value)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    message = " ".join(str(err["msg"]).removeprefix("Value error, ").split())
    if err["type"] in ("float_type", "int_type", "bool_type", "string_type"):
        message = f"stored as {type(value).__name__}, {message[0].lower()}{message[1:]}"
    return f"{column} = {shown}: {message}" if err["loc"] else message


def check_row(model: type[_Row], table: str, row: Mapping[str, Any]) -> str | None:
    """None when the row is valid, otherwise ``table offers, row KEY: column = value: …``."""
    try:
        model.model_validate(dict(row))
    except ValidationError as exc:
        return f"table {table}, row {row_key(table, row)}: {row_problem(exc)}"
    return None


OWN_TABLES = frozenset({"meta", "pulls", "offers", "reserved_rates", "exclusions",
                        "block_offers"})
"""Every table a price cache may hold; any other means the file is another program's."""
