"""AWS Price List items and spot price rows, read with pydantic models (no boto3 here).

A ``PriceList`` entry of ``pricing.get_products`` (``FormatVersion=aws_v1``) is a JSON *string*
``{product: {sku, attributes: {instanceType, regionCode, vcpu, memory, gpu, gpuMemory, ...}},
terms: {OnDemand: {<offer term>: {priceDimensions: {<rate>: {unit, pricePerUnit: {USD}}}}},
Reserved: {<offer term>: {termAttributes: {LeaseContractLength, OfferingClass,
PurchaseOption}, priceDimensions: ...}}}}``; the models below are that shape. Keys AWS adds are
ignored; a missing key or a value of the wrong type is a malformed item: one-line
:class:`~ptplan.core.errors.ProviderError` naming the SKU and the field.

The product part is read first: an item outside the query's filters, an EC2 Capacity Block
(``marketoption`` other than ``OnDemand``) or a type without a GPU spec is skipped before its
terms are read.

Reserved terms: an hourly price dimension (unit ``Hrs``) and, unless No Upfront, an upfront fee
(unit ``Quantity``); the effective hourly rate is ``hourly + upfront / (years × 8760 h)`` (AWS
defines a 1-year term as 31,536,000 s = 8,760 h, 3 years as 94,608,000 s).

GPU mapping: the Pricing API names no GPU model, so the instance family maps to a GPU
(:data:`FAMILY_GPU`, SkyPilot's names, resolved through :mod:`ptplan.core.hardware`); the count
is the product's ``gpu`` attribute (Trainium chips, absent there, from :data:`ACCELERATOR_COUNT`),
and ``gpuMemory`` / count must match the GPU's memory within 10 % or the row is excluded.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, ValidationError

from ptplan.core.errors import ProviderError
from ptplan.core.hardware import canonical_gpu_name, gpus
from ptplan.providers.base import Offer, PriceListModel, ReservedRate, validation_detail
from ptplan.providers.cache import UNCHANGED
from ptplan.providers.cpu import CPU_GPU
from ptplan.providers.embedded import aws_family as family

HOURS_PER_YEAR = 8760
SOURCE_PRICING = "AWS Price List API (pricing.get_products AmazonEC2)"
BASE_FILTERS: tuple[tuple[str, str], ...] = (
    ("operatingSystem", "Linux"),
    ("tenancy", "Shared"),
    ("preInstalledSw", "NA"),
    ("capacitystatus", "Used"),
)
"""``TERM_MATCH`` filters of every query (besides instance type and region); an item that
states another value is skipped."""

FAMILY_GPU: dict[str, str] = {
    # instance family -> accelerator (SkyPilot catalog names; AWS instance type pages)
    "g4dn": "T4",
    "g5": "A10G",
    "g6": "L4",
    "g6e": "L40S",
    "p4d": "A100",
    "p4de": "A100-80GB",
    "p5": "H100",
    "p5e": "H200",
    "p5en": "H200",
    "p6-b200": "B200",
    "p6-b300": "B300",
    "trn1": "Trainium",
    "trn1n": "Trainium",
    "trn2": "Trainium2",
}

CPU_FAMILIES: tuple[str, ...] = ("c6i", "c7a", "c7i", "m6i", "m7a", "m7i", "r7i")
"""CPU instance families (issue #25 CPU pools): pulled only when ``--instance-type`` names them;
their offers have ``gpu`` none and ``gpus_per_node`` 0 and need the item's vcpu and memory."""

ACCELERATOR_COUNT: dict[str, int] = {
    # GPUs / Trainium chips per instance: AWS instance type pages, as tabulated in the embedded
    # snapshot (providers/data/aws_gpu_vms.csv, AcceleratorCount). Used when the price item's
    # ``gpu`` attribute is absent (Trainium) and to define the default instance types.
    "g4dn.xlarge": 1, "g4dn.2xlarge": 1, "g4dn.4xlarge": 1, "g4dn.8xlarge": 1,
    "g4dn.16xlarge": 1, "g4dn.12xlarge": 4, "g4dn.metal": 8,
    "g5.xlarge": 1, "g5.2xlarge": 1, "g5.4xlarge": 1, "g5.8xlarge": 1, "g5.16xlarge": 1,
    "g5.12xlarge": 4, "g5.24xlarge": 4, "g5.48xlarge": 8,
    "g6.xlarge": 1, "g6.2xlarge": 1, "g6.4xlarge": 1, "g6.8xlarge": 1, "g6.16xlarge": 1,
    "g6.12xlarge": 4, "g6.24xlarge": 4, "g6.48xlarge": 8,
    "g6e.xlarge": 1, "g6e.2xlarge": 1, "g6e.4xlarge": 1, "g6e.8xlarge": 1, "g6e.16xlarge": 1,
    "g6e.12xlarge": 4, "g6e.24xlarge": 4, "g6e.48xlarge": 8,
    "p4d.24xlarge": 8, "p4de.24xlarge": 8,
    "p5.4xlarge": 1, "p5.48xlarge": 8, "p5e.48xlarge": 8, "p5en.48xlarge": 8,
    "p6-b200.48xlarge": 8, "p6-b300.48xlarge": 8,
    "trn1.2xlarge": 1, "trn1.32xlarge": 16, "trn1n.32xlarge": 16,
    "trn2.3xlarge": 1, "trn2.48xlarge": 16,
}
DEFAULT_INSTANCE_TYPES: tuple[str, ...] = tuple(sorted(ACCELERATOR_COUNT))
"""GPU and Trainium instance types pulled by default (the embedded snapshot's types)."""


def _blank_is_none(value: Any) -> Any:
    return None if isinstance(value, str) and not value.strip() else value


Amount = Annotated[float, Field(ge=0, strict=False)]
"""A non-negative finite number; AWS writes it as a decimal string (``"55.0400000000"``)."""


class Attributes(PriceListModel):
    """``product.attributes`` (all strings in the Price List)."""

    instance_type: str = Field(alias="instanceType")
    region: str = Field(alias="regionCode")
    operating_system: str | None = Field(None, alias="operatingSystem")
    tenancy: str | None = None
    pre_installed_sw: str | None = Field(None, alias="preInstalledSw")
    capacity_status: str | None = Field(None, alias="capacitystatus")
    market_option: str = Field("OnDemand", alias="marketoption")
    vcpu: Annotated[Amount | None, BeforeValidator(_blank_is_none)] = None
    memory: str = ""
    """``"2048 GiB"``."""
    gpu: str = ""
    """GPU count, ``"8"``; absent for Trainium."""
    gpu_memory: str = Field("", alias="gpuMemory")
    """Total GPU memory, ``"640 GB"``."""

    def outside_filters(self) -> bool:
        """True when the item states a value other than a :data:`BASE_FILTERS` one."""
        stated = {"operatingSystem": self.operating_system, "tenancy": self.tenancy,
                  "preInstalledSw": self.pre_installed_sw,
                  "capacitystatus": self.capacity_status}
        return any(stated[f] is not None and stated[f] != v for f, v in BASE_FILTERS)

    @property
    def memory_gib(self) -> float | None:
        m = re.match(r"^\s*([\d,.]+)\s*GiB", self.memory)
        return float(m.group(1).replace(",", "")) if m else None

    @property
    def gpu_memory_gb(self) -> float | None:
        m = re.match(r"^\s*([\d.]+)\s*GB", self.gpu_memory)
        return float(m.group(1)) if m else None


class Product(PriceListModel):
    sku: str = "?"
    attributes: Attributes


class ProductPart(PriceListModel):
    """What an item says about the product (read before its terms)."""

    product: Product


class Money(PriceListModel):
    usd: Amount = Field(alias="USD")


class PriceDimension(PriceListModel):
    unit: str
    """``Hrs`` (hourly) or ``Quantity`` (an upfront fee)."""
    price_per_unit: Money = Field(alias="pricePerUnit")


class OnDemandTerm(PriceListModel):
    price_dimensions: dict[str, PriceDimension] = Field(alias="priceDimensions")


class TermAttributes(PriceListModel):
    lease_contract_length: str = Field(alias="LeaseContractLength")
    offering_class: str = Field(alias="OfferingClass")
    purchase_option: str = Field(alias="PurchaseOption")


class ReservedTerm(OnDemandTerm):
    term_attributes: TermAttributes = Field(alias="termAttributes")


class Terms(PriceListModel):
    on_demand: dict[str, OnDemandTerm] | None = Field(None, alias="OnDemand")
    reserved: dict[str, ReservedTerm] | None = Field(None, alias="Reserved")


class TermsPart(PriceListModel):
    terms: Terms


class SpotRow(PriceListModel):
    """One ``SpotPriceHistory`` row of ``describe_spot_price_history`` (as boto3 parses it)."""

    instance_type: str = Field("", alias="InstanceType")
    zone: str = Field("", alias="AvailabilityZone")
    zone_id: str = Field("", alias="AvailabilityZoneId")
    description: str = Field("", alias="ProductDescription")
    price: Amount = Field(alias="SpotPrice")
    timestamp: dt.datetime | None = Field(None, alias="Timestamp")


_KEYS = {"OnDemand": "<term>", "Reserved": "<term>", "priceDimensions": "<rate>"}
"""Generated offer-term and rate codes, shown as placeholders in error messages."""


def malformed(sku: str, detail: str) -> ProviderError:
    return ProviderError(f"malformed AWS price item (sku {sku}): {detail}; {UNCHANGED}")


def read_spot_row(row: Any) -> SpotRow:
    """A spot price row, or ProviderError naming it."""
    try:
        return SpotRow.model_validate(row)
    except ValidationError as exc:
        get = row.get if isinstance(row, dict) else (lambda _: "?")
        raise malformed(f"spot {get('InstanceType')} {get('AvailabilityZone')}",
                        validation_detail(exc)) from None


def _years(text: str, sku: str) -> int:
    m = re.match(r"^\s*([13])\s*yr", text)
    if not m:
        raise malformed(sku, f"LeaseContractLength {text!r} (expected 1yr or 3yr)")
    return int(m.group(1))


@dataclass(frozen=True, slots=True)
class TypeInfo:
    """What a price item says about an instance type (needed to build its spot offers)."""

    instance_type: str
    gpu: str
    gpus_per_node: int
    vcpus: float | None
    memory_gib: float | None


def _type_info(attrs: Attributes, exclusions: list[str]) -> TypeInfo | None:
    """The GPU, count and shape of the item's type (a CPU type: gpu none, 0), or None (recorded
    in ``exclusions``)."""
    itype, region = attrs.instance_type, attrs.region
    if family(itype) in CPU_FAMILIES:
        if attrs.vcpu is None or attrs.memory_gib is None:
            exclusions.append(f"aws {itype} {region}: a CPU type without vcpu and memory "
                              "attributes cannot size a CPU pool")
            return None
        return TypeInfo(itype, CPU_GPU, 0, attrs.vcpu, attrs.memory_gib)
    accel = FAMILY_GPU.get(family(itype))
    gpu = canonical_gpu_name(accel) if accel else None
    if gpu is None:
        exclusions.append(f"aws {itype} {region}: no GPU spec for "
                          f"{accel or 'family ' + family(itype)!r}")
        return None
    raw_count = attrs.gpu.strip()
    if raw_count.isdigit() and int(raw_count) > 0:
        count = int(raw_count)
    elif itype in ACCELERATOR_COUNT:
        count = ACCELERATOR_COUNT[itype]
    else:
        exclusions.append(f"aws {itype} {region}: accelerator count unknown (gpu attribute "
                          f"{raw_count or 'absent'!r})")
        return None
    total = attrs.gpu_memory_gb
    if total is not None and count:
        per_gpu, spec = total / count, gpus()[gpu].memory_gb
        if abs(per_gpu - spec) > 0.1 * spec:
            exclusions.append(f"aws {itype} {region}: gpuMemory {attrs.gpu_memory} for {count} "
                              f"GPUs does not match {gpu} ({spec:g} GB each)")
            return None
    return TypeInfo(itype, gpu, count, attrs.vcpu, attrs.memory_gib)


def parse_price_item(text: str, as_of: str, exclusions: list[str]
                     ) -> tuple[Offer | None, list[ReservedRate], TypeInfo | None]:
    """One ``PriceList`` JSON string -> (on-demand offer, reserved rates, GPU info).

    Returns ``(None, [], None)`` for an item outside the filters (recorded in ``exclusions`` when
    it is a price we could not use). Raises ProviderError when the item is malformed."""
    try:
        raw = json.loads(text)
    except (TypeError, json.JSONDecodeError) as exc:
        raise ProviderError(f"malformed AWS price item: not a JSON string ({exc}); "
                            f"{UNCHANGED}") from None
    product = raw.get("product") if isinstance(raw, dict) else None
    sku = str(product.get("sku", "?")) if isinstance(product, dict) else "?"
    try:
        attrs = ProductPart.model_validate(raw).product.attributes
        if attrs.outside_filters() or attrs.market_option != "OnDemand":
            return None, [], None
        info = _type_info(attrs, exclusions)
        if info is None:
            return None, [], None
        terms = TermsPart.model_validate(raw).terms
    except ValidationError as exc:
        raise malformed(sku, validation_detail(exc, _KEYS)) from None
    itype, region = info.instance_type, attrs.region
    offer: Offer | None = None
    for term in (terms.on_demand or {}).values():
        for dim in term.price_dimensions.values():
            if dim.unit != "Hrs":
                continue
            price = dim.price_per_unit.usd
            if price <= 0:
                exclusions.append(f"aws {itype} {region}: on-demand price {price} (not offered)")
            elif offer is None or price < offer.usd_per_hour:
                offer = Offer(provider="aws", region=region, zone="", instance_type=itype,
                              gpu=info.gpu, gpus_per_node=info.gpus_per_node,
                              capacity_type="on_demand", usd_per_hour=price, vcpus=info.vcpus,
                              memory_gib=info.memory_gib, as_of=as_of, source=SOURCE_PRICING)
    rates: list[ReservedRate] = []
    for rterm in (terms.reserved or {}).values():
        ta = rterm.term_attributes
        years = _years(ta.lease_contract_length, sku)
        klass, option = ta.offering_class, ta.purchase_option
        dims = rterm.price_dimensions.values()
        hourly = sum((d.price_per_unit.usd for d in dims if d.unit == "Hrs"), 0.0)
        upfront = sum((d.price_per_unit.usd for d in dims if d.unit == "Quantity"), 0.0)
        effective = hourly + upfront / (years * HOURS_PER_YEAR)
        if effective <= 0:
            exclusions.append(f"aws {itype} {region}: reserved {years}y {klass} {option} priced 0")
            continue
        rates.append(ReservedRate(
            provider="aws", region=region, instance_type=itype, term_years=years,
            usd_per_hour=round(effective, 6), source=SOURCE_PRICING + " terms.Reserved",
            assumption=False, offering_class=klass, purchase_option=option,
            upfront_usd=round(upfront, 2), recurring_usd_per_hour=round(hourly, 6), as_of=as_of))
    return offer, rates, info
