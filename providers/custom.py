"""Custom catalogs from YAML: other clouds, neoclouds and on-prem (``--catalog PATH``).

Shape (every price optional; an absent price means that capacity type is not offered)::

    as_of: 2026-11-01
    name: lab                      # optional, defaults to the file name
    offers:
      - {provider: lab, region: local, instance_type: h100x8, gpu: H100, gpus_per_node: 8,
         on_demand_usd_per_hour: 20.0, spot_usd_per_hour: 8.0, reserved_1y_usd_per_hour: 14.0,
         spot_interruptions_per_hour: 0.05, max_nodes: 16,
         reserved_nodes_held: 4, reserved_term_years: 1, reserved_sunk: false}
    storage_tiers:                 # optional
      - {provider: lab, region: local, tier: nfs, usd_per_gb_month: 0.05}
    egress:                        # optional
      - {provider: lab, path: inter_region, usd_per_gb: 0.0}

Capacity booked for the run (:mod:`ptplan.providers.blocks`; used only when the run has a start
date, ``sla.start_after``): ``block_usd_per_hour`` (a capacity block or calendar reservation,
per instance-hour) with ``block_unit_hours`` (24, the default, or 168 for week steps),
``block_max_hours`` (the longest booking; default 14 days of 24-h units, 182 days of 168-h
units) and ``block_max_nodes`` (instances per booking, 1-64; default 64);
``flex_start_usd_per_hour`` (GCP DWS flex-start, at most 7 days) with
``flex_start_wait_hours`` (the expected queueing time, added to the run's time; default 0).

``max_nodes`` caps on-demand and (unless ``spot_max_nodes`` is given) spot nodes of the offer.
Reserved capacity becomes a plan offer only with ``reserved_nodes_held`` > 0: at the amortised
``reserved_{term}y_usd_per_hour`` rate, or at zero marginal cost when ``reserved_sunk: true``.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    PositiveFloat,
    ValidationInfo,
    field_validator,
    model_validator,
)

from ptplan.core.errors import InputError
from ptplan.core.hardware import canonical_gpu_name, unknown_gpu_message
from ptplan.core.yamlio import StrictModel, quoted, read_mapping, validate
from ptplan.providers.base import Catalog, EgressRate, Offer, ReservedRate, StorageTier
from ptplan.providers.cpu import CPU_GPU, is_cpu

_Strict = StrictModel
"""The blocks' base: :class:`ptplan.core.yamlio.StrictModel` (unknown keys rejected, frozen,
no NaN/inf)."""


class CustomOffer(_Strict):
    provider: str = Field(min_length=1)
    region: str = Field(min_length=1)
    zone: str = ""
    instance_type: str = Field(min_length=1)
    gpu: str
    gpus_per_node: Annotated[int, Field(ge=0, le=1024, strict=True)]
    """0 for a CPU instance type (``gpu: none``, with ``vcpus`` and ``memory_gib``)."""
    vcpus: PositiveFloat | None = None
    memory_gib: PositiveFloat | None = None
    on_demand_usd_per_hour: float | None = Field(default=None, ge=0, le=1e9, strict=True)
    spot_usd_per_hour: float | None = Field(default=None, ge=0, le=1e9, strict=True)
    reserved_1y_usd_per_hour: float | None = Field(default=None, ge=0, le=1e9, strict=True)
    reserved_3y_usd_per_hour: float | None = Field(default=None, ge=0, le=1e9, strict=True)
    spot_interruptions_per_hour: float | None = Field(default=None, ge=0, le=10, strict=True)
    max_nodes: Annotated[int, Field(gt=0, le=1_000_000, strict=True)] | None = None
    spot_max_nodes: Annotated[int, Field(gt=0, le=1_000_000, strict=True)] | None = None
    reserved_nodes_held: int = Field(default=0, ge=0, le=1e9, strict=True)
    reserved_term_years: Literal[1, 3] = 1
    reserved_sunk: bool = False
    block_usd_per_hour: float | None = Field(default=None, ge=0, le=1e9, strict=True)
    block_unit_hours: Literal[24, 168] = 24
    block_max_hours: float | None = Field(default=None, gt=0, le=182 * 24, strict=True)
    block_max_nodes: Annotated[int, Field(ge=1, le=64, strict=True)] = 64
    flex_start_usd_per_hour: float | None = Field(default=None, ge=0, le=1e9, strict=True)
    flex_start_wait_hours: float = Field(default=0.0, ge=0, le=168, strict=True)

    @field_validator("gpu")
    @classmethod
    def _known_gpu(cls, value: str) -> str:
        if value == CPU_GPU:
            return value
        canon = canonical_gpu_name(value)
        if canon is None:
            raise ValueError(unknown_gpu_message(value))
        return canon

    @field_validator("gpus_per_node")
    @classmethod
    def _cpu_or_gpu(cls, value: int, info: ValidationInfo) -> int:
        gpu = info.data.get("gpu")
        if gpu is not None and (value == 0) != (gpu == CPU_GPU):
            raise ValueError(f"{value} with gpu {gpu}: a CPU instance type has gpu: {CPU_GPU} "
                             "and gpus_per_node: 0 (both or neither)")
        return value

    @model_validator(mode="after")
    def _cpu_shape(self) -> CustomOffer:
        if self.gpus_per_node == 0 and (self.vcpus is None or self.memory_gib is None):
            raise ValueError(f"{self.instance_type}: a CPU instance type needs vcpus and "
                             "memory_gib (the CPU pools are sized by them)")
        return self


class CustomStorage(_Strict):
    provider: str
    region: str = "*"
    tier: str
    usd_per_gb_month: float = Field(ge=0, le=1e9, strict=True)
    min_days: float = Field(default=0, ge=0, le=1e9, strict=True)
    retrieval_usd_per_gb: float = Field(default=0, ge=0, le=1e9, strict=True)
    access: Literal["ms", "minutes", "hours", "block"] = "ms"


class CustomEgress(_Strict):
    provider: str
    path: Literal["same_zone", "cross_zone", "inter_region", "inter_continent", "internet"]
    usd_per_gb: float = Field(ge=0, le=1e9, strict=True)


class CustomCatalog(_Strict):
    as_of: dt.date
    name: str | None = None
    offers: list[CustomOffer] = Field(min_length=1)
    storage_tiers: list[CustomStorage] = []
    egress: list[CustomEgress] = []

    @model_validator(mode="after")
    def _unique_offers(self) -> CustomCatalog:
        seen: dict[tuple[str, str, str, str], int] = {}
        for i, o in enumerate(self.offers):
            key = (o.provider, o.region, o.zone, o.instance_type)
            if key in seen:
                raise ValueError(
                    f"offers[{i}] repeats offers[{seen[key]}] ({o.provider} {o.region} "
                    f"{o.zone or '-'} {o.instance_type}); give each offer one row with all its "
                    "prices, or a different zone")
            seen[key] = i
        return self


def load_custom_catalog(path: str) -> Catalog:
    data = read_mapping(path, "catalog")
    spec = validate(CustomCatalog, data, f"catalog {quoted(path)}")
    name = spec.name or Path(path).stem
    as_of = spec.as_of.isoformat()
    source = f"custom catalog {Path(path).name}"
    offers: list[Offer] = []
    rates: list[ReservedRate] = []
    exclusions: list[str] = []
    blocks: list[Offer] = []
    for row in spec.offers:
        if row.on_demand_usd_per_hour is None and row.spot_usd_per_hour is None \
                and not row.reserved_nodes_held and row.block_usd_per_hour is None \
                and row.flex_start_usd_per_hour is None:
            exclusions.append(f"{row.provider} {row.instance_type} {row.region}: no on-demand, "
                              "spot or held reserved capacity: not offered")
        common: dict[str, Any] = dict(
            provider=row.provider,
            region=row.region,
            zone=row.zone,
            instance_type=row.instance_type,
            gpu=row.gpu,
            gpus_per_node=row.gpus_per_node,
            vcpus=row.vcpus,
            memory_gib=row.memory_gib,
            as_of=as_of,
            source=source,
        )
        if row.on_demand_usd_per_hour is not None:
            offers.append(
                Offer(
                    capacity_type="on_demand",
                    usd_per_hour=row.on_demand_usd_per_hour,
                    max_nodes=row.max_nodes,
                    **common,
                )
            )
        if row.spot_usd_per_hour is not None:
            hazard = row.spot_interruptions_per_hour
            note = "interruption rate from the catalog"
            if hazard is None:
                from ptplan.providers.embedded import DEFAULT_SPOT_BAND, band_hazard

                hazard = band_hazard(DEFAULT_SPOT_BAND)
                note = f"no interruption rate given: default band {DEFAULT_SPOT_BAND} assumed"
            offers.append(
                Offer(
                    capacity_type="spot",
                    usd_per_hour=row.spot_usd_per_hour,
                    interruptions_per_hour=hazard,
                    max_nodes=row.spot_max_nodes or row.max_nodes,
                    note=note,
                    **common,
                )
            )
        for years, rate in ((1, row.reserved_1y_usd_per_hour), (3, row.reserved_3y_usd_per_hour)):
            if rate is not None:
                rates.append(
                    ReservedRate(row.provider, row.region, row.instance_type, years, rate, source,
                                 assumption=False)
                )
        _booked(row, common, blocks)
        if row.reserved_nodes_held:
            term = row.reserved_term_years
            rate = row.reserved_1y_usd_per_hour if term == 1 else row.reserved_3y_usd_per_hour
            if rate is None and not row.reserved_sunk:
                exclusions.append(
                    f"{row.provider} {row.instance_type} {row.region}: reserved_nodes_held "
                    f"without reserved_{term}y_usd_per_hour and not reserved_sunk: not offered"
                )
            else:
                offers.append(
                    Offer(
                        capacity_type="reserved",
                        usd_per_hour=0.0 if row.reserved_sunk else float(rate or 0.0),
                        max_nodes=row.reserved_nodes_held,
                        reserved_sunk=row.reserved_sunk,
                        note=(
                            f"{row.reserved_nodes_held} "
                            f"node{'' if row.reserved_nodes_held == 1 else 's'} held ({term}y); "
                            + ("sunk: zero marginal cost" if row.reserved_sunk
                               else "amortised rate billed for the hours used")
                        ),
                        **common,
                    )
                )
    return Catalog(
        name=name,
        as_of=as_of,
        offers=tuple(o for o in offers if not is_cpu(o)),
        cpu_offers=tuple(o for o in offers if is_cpu(o)),
        storage_tiers=tuple(
            StorageTier(s.provider, s.region, s.tier, s.usd_per_gb_month, s.min_days,
                        s.retrieval_usd_per_gb, s.access, source, "custom")
            for s in spec.storage_tiers
        ),
        egress=tuple(EgressRate(e.provider, e.path, e.usd_per_gb, source, "custom")
                     for e in spec.egress),
        reserved_rates=tuple(rates),
        exclusions=tuple(exclusions),
        block_offers=tuple(sorted(blocks, key=lambda o: o.order)),
    )


def _booked(row: CustomOffer, common: dict[str, Any], out: list[Offer]) -> None:
    """The row's capacity block and flex-start offers (:mod:`ptplan.providers.blocks`)."""
    if row.block_usd_per_hour is not None:
        unit = float(row.block_unit_hours)
        longest = row.block_max_hours or (14 * 24.0 if unit == 24 else 182 * 24.0)
        if longest < unit:
            raise InputError(f"block_max_hours: {longest:g} is shorter than one unit "
                             f"({unit:g} h) of {row.instance_type}; raise it to {unit:g} or more")
        out.append(Offer(capacity_type="block", usd_per_hour=row.block_usd_per_hour,
                         max_nodes=row.block_max_nodes, block_unit_hours=unit,
                         block_max_hours=longest,
                         note=f"capacity block in {unit:g}-h units, paid for whole units",
                         **common))
    if row.flex_start_usd_per_hour is not None:
        out.append(Offer(capacity_type="flex_start", usd_per_hour=row.flex_start_usd_per_hour,
                         max_nodes=row.max_nodes, block_max_hours=168.0,
                         wait_hours=row.flex_start_wait_hours,
                         note=f"flex-start: queued (expected wait {row.flex_start_wait_hours:g}"
                              " h), at most 7 days", **common))
