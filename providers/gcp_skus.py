"""GCP Cloud Billing Catalog SKUs, read with pydantic models (no SDK import here).

A ``billing_v1.Sku`` (proto-plus message, or the same shape as a dict) is ``{sku_id,
description, category: {resource_family, resource_group, usage_type}, service_regions: [...],
pricing_info: [{pricing_expression: {usage_unit, tiered_rates: [{start_usage_amount,
unit_price: {currency_code, units, nanos}}]}}]}``. Fields Google adds are ignored; a kept SKU
without pricing or tiers, in another currency or with a negative price is a malformed SKU:
one-line :class:`~ptplan.core.errors.ProviderError`.

Kept SKUs (:func:`classify`): ``category.resource_family == "Compute"``, ``resource_group``
``CPU``, ``RAM`` or ``GPU``, ``usage_type`` ``OnDemand``, ``Preemptible``, ``Commit1Yr`` or
``Commit3Yr``. Custom, premium, sole-tenancy, reserved, DWS/calendar, flex and workstation SKUs
are dropped (as SkyPilot's fetcher does). vCPU/RAM SKUs are keyed by the series label in their
description (``A2 Instance Core running in Americas``, ``Spot Preemptible A3 Instance Ram ...``,
``Commitment v1: A2 Cpu in Americas for 1 Year``), GPU SKUs by the GPU name (``Nvidia H100 80GB
GPU running in ...``). A SKU's price is ``units + nanos/1e9`` of its first tier.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, ValidationError

from ptplan.core.errors import ProviderError
from ptplan.providers.base import PriceListModel, validation_detail
from ptplan.providers.cache import UNCHANGED

USAGE_TYPES = ("OnDemand", "Preemptible", "Commit1Yr", "Commit3Yr")
GPU_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p, re.IGNORECASE), name) for p, name in (
        (r"\bH100 (?:80GB (?:Mega|Plus)|Mega 80GB)\b", "H100-MEGA"),
        (r"\bH100 80GB\b", "H100"),
        (r"\bH200 141GB\b", "H200"),
        (r"\bB200\b", "B200"),
        (r"\bA100 80GB\b", "A100-80GB"),
        (r"\bA100\b", "A100"),
        (r"\bL4\b", "L4"),
    ))
_DROP = re.compile(r"custom|premium|sole tenancy|reserved|\bdws\b|calendar|flex|workstation",
                   re.IGNORECASE)
_PREFIX = re.compile(r"^(?:Spot Preemptible |Preemptible |Commitment v1: |Commitment: )+")
_VM = re.compile(r"^(?P<label>[A-Za-z0-9][A-Za-z0-9 ]*?) (?:Instance )?(?P<res>Core|Cpu|Ram)"
                 r" (?:running )?in ")


class Category(PriceListModel):
    resource_family: str = ""
    resource_group: str = ""
    usage_type: str = ""


class SkuHead(PriceListModel):
    """What a SKU is (read for every SKU, to classify it)."""

    sku_id: str = ""
    description: str = ""
    category: Category = Category()
    service_regions: list[str] = Field(default=[], strict=False)


class Money(PriceListModel):
    currency_code: str = ""
    units: int = Field(0, strict=False)
    """int64: a decimal string in the JSON form."""
    nanos: int = 0

    @property
    def value(self) -> float:
        return self.units + self.nanos / 1e9


class Tier(PriceListModel):
    start_usage_amount: float = 0.0
    unit_price: Money


class PricingExpression(PriceListModel):
    usage_unit: str = ""
    tiered_rates: list[Tier] = Field(min_length=1, strict=False)


class PricingInfo(PriceListModel):
    pricing_expression: PricingExpression


class Sku(SkuHead):
    """A kept SKU with its price."""

    pricing_info: list[PricingInfo] = Field(min_length=1, strict=False)


def _where(sku: Any) -> str:
    get = sku.get if isinstance(sku, dict) else lambda k: getattr(sku, k, None)
    return f"sku {get('sku_id') or '?'} ({get('description') or ''!r})"


def _malformed(sku: Any, detail: str) -> ProviderError:
    return ProviderError(f"malformed GCP SKU {_where(sku)}: {detail}; {UNCHANGED}")


def read_head(sku: Any) -> SkuHead:
    """A SKU's identity and category (SDK message or dict); ProviderError when malformed."""
    try:
        return SkuHead.model_validate(sku, from_attributes=True)
    except ValidationError as exc:
        raise _malformed(sku, validation_detail(exc)) from None


def read_price(sku: Any) -> tuple[float, str]:
    """(USD per unit, usage unit) of a SKU's first tier; ProviderError when malformed."""
    try:
        model = Sku.model_validate(sku, from_attributes=True)
    except ValidationError as exc:
        raise _malformed(sku, validation_detail(exc)) from None
    expr = model.pricing_info[0].pricing_expression
    money = min(expr.tiered_rates, key=lambda t: t.start_usage_amount).unit_price
    if money.currency_code not in ("", "USD"):
        raise _malformed(sku, f"currency {money.currency_code!r}, expected USD")
    if money.value < 0:
        raise _malformed(sku, f"negative price {money.value}")
    return money.value, expr.usage_unit


def kind_of(head: SkuHead) -> tuple[str, str, str] | None:
    """(kind, key, usage type) of a SKU this adapter uses, or None.

    kind ``cpu``/``ram`` with key = series label (``A2``, ``A3Plus``...); kind ``gpu`` with
    key = accelerator name (``H100``, ``A100-80GB``...)."""
    cat = head.category
    usage = cat.usage_type
    if cat.resource_family != "Compute" or usage not in USAGE_TYPES:
        return None
    desc = head.description
    if _DROP.search(desc):
        return None
    if cat.resource_group == "GPU":
        for pattern, name in GPU_PATTERNS:
            if pattern.search(desc):
                return "gpu", name, usage
        return None
    if cat.resource_group in ("CPU", "RAM"):
        m = _VM.match(_PREFIX.sub("", desc))
        if m is None:
            return None
        kind = "ram" if m.group("res") == "Ram" else "cpu"
        if (kind == "ram") != (cat.resource_group == "RAM"):
            return None
        return kind, m.group("label"), usage
    return None


def classify(sku: Any) -> tuple[str, str, str] | None:
    """:func:`kind_of` a SKU (SDK message or dict)."""
    return kind_of(read_head(sku))
