"""Live AWS EC2 Capacity Blocks for ML offerings through boto3 (extra ``aws``).

Source: ``ec2.describe_capacity_block_offerings`` in one region (``InstanceType``,
``InstanceCount``, ``CapacityDurationHours``, ``StartDateRange`` when a start is given;
paginated by ``NextToken``). Each offering has its zone, start and end (fixed hours), duration,
instance count and ``UpfrontFee`` (USD, a decimal string: blocks are paid in full when booked
and cannot be cancelled).

What AWS sells (the EC2 Capacity Blocks user guide, read 2026-12): 1 to 14 days in 1-day steps,
then 7-day steps up to 182 days; 1 to 64 instances; a start up to 8 weeks ahead. Requests
outside these are input errors here (exit 2), not provider errors.

Faults (throttling after the SDK's standard retries, rejected or missing credentials, an
unreachable endpoint, a malformed offering) raise :class:`~ptplan.core.errors.ProviderError`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from pydantic import Field, ValidationError

from ptplan.core.errors import InputError, ProviderError
from ptplan.providers.aws import (
    _guarded,
    max_attempts,
    sdk,
    validate_instance_types,
    validate_regions,
)
from ptplan.providers.base import Catalog, Offer, PriceListModel, validation_detail
from ptplan.providers.cache import utc_now
from ptplan.providers.cache_blocks import BlockPull

SOURCE = "AWS EC2 DescribeCapacityBlockOfferings"
MAX_DAYS_AHEAD = 56
MAX_HOURS = 182 * 24
MAX_INSTANCES = 64


def check_duration(hours: int) -> None:
    """1–14 days in 1-day steps, then 7-day steps up to 182 days."""
    ok = (24 <= hours <= 14 * 24 and hours % 24 == 0) or \
        (14 * 24 < hours <= MAX_HOURS and hours % 168 == 0)
    if not ok:
        raise InputError(f"--duration-hours: {hours} is not a capacity block length; AWS sells "
                         "24 to 336 h in 24-h steps, then 168-h steps up to 4,368 h (182 days)")


class _Offering(PriceListModel):
    CapacityBlockOfferingId: str
    InstanceType: str
    AvailabilityZone: str
    InstanceCount: int
    StartDate: dt.datetime
    EndDate: dt.datetime
    CapacityBlockDurationHours: int
    UpfrontFee: float = Field(strict=False)
    CurrencyCode: str


def parse_offering(item: dict[str, Any]) -> dict[str, Any]:
    """One offering as a row: fee, start, end, zone and the fee per instance-hour."""
    try:
        o = _Offering.model_validate(item)
    except ValidationError as exc:
        raise ProviderError(f"AWS returned a malformed capacity block offering "
                            f"({validation_detail(exc)})") from None
    if o.CurrencyCode != "USD" or not o.UpfrontFee > 0 or o.InstanceCount < 1 or \
            o.CapacityBlockDurationHours < 1:
        raise ProviderError(f"AWS returned capacity block offering {o.CapacityBlockOfferingId} "
                            f"with fee {o.UpfrontFee} {o.CurrencyCode} for {o.InstanceCount} "
                            f"instances x {o.CapacityBlockDurationHours} h")
    per = o.UpfrontFee / (o.InstanceCount * o.CapacityBlockDurationHours)
    return {"offering_id": o.CapacityBlockOfferingId, "instance_type": o.InstanceType,
            "zone": o.AvailabilityZone, "count": o.InstanceCount,
            "start": o.StartDate.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "end": o.EndDate.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "duration_hours": o.CapacityBlockDurationHours,
            "upfront_fee_usd": f"{o.UpfrontFee:.2f}",
            "usd_per_instance_hour": round(per, 6)}


def fetch_block_offerings(region: str, instance_type: str, count: int, duration_hours: int,
                          start_after: dt.date | None = None, endpoint: str | None = None,
                          today: dt.date | None = None) -> dict[str, Any]:
    """The capacity block offerings AWS quotes now, cheapest fee first, then earliest start."""
    (region,) = validate_regions([region])
    validate_instance_types([instance_type])
    if not 1 <= count <= MAX_INSTANCES:
        raise InputError(f"--count: {count} instances; a capacity block holds 1 to "
                         f"{MAX_INSTANCES}")
    check_duration(duration_hours)
    now = today or dt.datetime.now(dt.UTC).date()
    if start_after is not None and (start_after - now).days > MAX_DAYS_AHEAD:
        raise InputError(f"--start-after: {start_after} is more than 8 weeks after today "
                         f"({now}); capacity blocks start at most {MAX_DAYS_AHEAD} days ahead")
    attempts = max_attempts()
    session, config = sdk("live capacity block offerings need", attempts)
    ec2 = session.client("ec2", region_name=region, endpoint_url=endpoint, config=config)
    kwargs: dict[str, Any] = {"InstanceType": instance_type, "InstanceCount": count,
                              "CapacityDurationHours": duration_hours}
    if start_after is not None:
        kwargs["StartDateRange"] = dt.datetime.combine(start_after, dt.time(), dt.UTC)
    rows = [parse_offering(item)
            for page in _guarded(_pages(ec2, kwargs), "capacity block offerings", attempts,
                                 permissions="ec2:DescribeCapacityBlockOfferings")
            for item in page.get("CapacityBlockOfferings", [])]
    rows.sort(key=lambda r: (float(r["upfront_fee_usd"]), r["start"], r["zone"],
                             r["offering_id"]))
    return {"source": SOURCE, "as_of": utc_now(), "region": region,
            "request": {"instance_type": instance_type, "count": count,
                        "duration_hours": duration_hours,
                        "start_after": None if start_after is None else str(start_after)},
            "offerings": rows}


def _pages(ec2: Any, kwargs: dict[str, Any]) -> Iterator[dict[str, Any]]:
    token: str | None = None
    while True:
        page = ec2.describe_capacity_block_offerings(**kwargs, **(
            {"NextToken": token} if token else {}))
        yield page
        token = page.get("NextToken")
        if not token:
            return


def block_pull(data: dict[str, Any], embedded: Catalog) -> BlockPull | None:
    """The quote of :func:`fetch_block_offerings` as the instance type's capacity block rate in
    the price cache: the cheapest offering's fee per instance-hour, on the booking terms of the
    embedded published row for that type and region (counts, start window), in 24-h units for a
    request of up to 14 days, else 168-h units up to 182 days. None when AWS quoted nothing, or
    the type is not in the embedded catalog (its GPU shape is not known here)."""
    if not data["offerings"]:
        return None
    region, itype = data["region"], data["request"]["instance_type"]
    best = data["offerings"][0]  # cheapest fee: the same count and hours for every offering
    terms = next((o for o in embedded.block_offers if (o.provider, o.region, o.instance_type,
                  o.capacity_type) == ("aws", region, itype, "block")), None)
    shape = terms or next((o for o in embedded.offers if (o.provider, o.region,
                           o.instance_type, o.capacity_type) == ("aws", region, itype,
                                                                 "on_demand")), None)
    if shape is None:
        return None
    hours = int(best["duration_hours"])
    unit, longest = (24.0, 14 * 24.0) if hours <= 14 * 24 else (168.0, float(MAX_HOURS))
    note = (f"capacity block: live offering {best['offering_id']} ({best['count']} x {hours} h "
            f"from {best['start']} in {best['zone']}, ${best['upfront_fee_usd']} upfront), "
            f"quoted {data['as_of']}; booked in {unit:g}-h units, paid upfront; a later quote "
            "may differ (`ptplan prices blocks`)")
    offer = Offer(
        provider="aws", region=region, zone="", instance_type=itype, gpu=shape.gpu,
        gpus_per_node=shape.gpus_per_node, capacity_type="block",
        usd_per_hour=float(best["usd_per_instance_hour"]), vcpus=shape.vcpus,
        memory_gib=shape.memory_gib, max_nodes=MAX_INSTANCES, as_of=data["as_of"][:10],
        source=SOURCE, note=note, block_unit_hours=unit, block_max_hours=longest,
        block_counts=terms.block_counts if terms is not None else (),
        max_start_days=MAX_DAYS_AHEAD)
    if terms is not None:
        offer = replace(offer, max_nodes=terms.max_nodes)
    return BlockPull("aws", data["as_of"], SOURCE, (region,), (offer,),
                     instance_types=(itype,))
