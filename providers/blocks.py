"""Capacity booked for one run: capacity blocks and flex-start offers, and how they bill.

* ``block``: AWS EC2 Capacity Blocks for ML and GCP calendar-mode future reservations. Booked
  ahead for a fixed start, paid for whole units (AWS: all upfront, 1-day steps up to 14 days,
  then 7-day steps up to 182 days; 1 to 64 instances; a start up to 8 weeks ahead; not
  cancellable): a pool held for ``h`` hours on a block of unit ``u`` pays
  ``nodes × price × u·⌈h/u⌉`` and loses ``u·⌈h/u⌉ − h`` hours to rounding.
* ``flex_start``: GCP Dynamic Workload Scheduler flex-start VMs: queued until capacity is
  free (an expected wait, not billed), then not preempted, for at most 7 days
  (https://cloud.google.com/compute/docs/instances/about-flex-start-vms); billed per second
  like on-demand at their own (discounted) SKU price.

Embedded prices: ``providers/data/capacity_blocks.csv`` (published AWS effective
instance-hour rates, with their date and URL) and ``providers/data/gcp_dws.csv`` (GCP DWS
flex-start and calendar-mode prices in us-central1 from Billing Catalog SKUs, each row with its
SKUs, date, source and how the machine price is formed from them). Live GCP DWS prices:
``ptplan prices blocks --provider gcp`` (:mod:`ptplan.providers.gcp_dws`) into the price cache.
"""

from __future__ import annotations

import csv
import datetime as dt
import math
from importlib import resources

from ptplan.core.errors import InputError
from ptplan.providers.base import Offer

AWS_COUNTS = (1, 2, 4, 8, 16, 32, 64)
"""Instance counts of one AWS capacity block (EC2 user guide, Capacity Blocks for ML)."""
MAX_BLOCK_NODES = 64
FLEX_START_MAX_HOURS = 168.0
"""GCP flex-start VMs run for at most seven days."""
TOLERANCE = 1e-9


def billed_hours(held: float, unit: float) -> float:
    """Whole block units covering ``held`` hours (at least one unit)."""
    units = max(1, math.ceil(held / unit - TOLERANCE))
    return units * unit


def units(held: float, unit: float) -> int:
    return round(billed_hours(held, unit) / unit)


def calendar_reservation_name(instance_type: str, start: str) -> str:
    """The name a GCP calendar-mode booking gives the reservation it delivers (``gcloud
    compute future-reservations create --reservation-name``), which the plan's GKE node pool
    consumes as a specific reservation: ``ptplan-<machine type>-<start YYYYMMDD>``."""
    return f"ptplan-{instance_type}-{dt.date.fromisoformat(start):%Y%m%d}"


def allowed_counts(offer: Offer) -> tuple[int, ...]:
    """Instance counts one booking of ``offer`` may hold (its steps, up to its cap)."""
    cap = min(offer.max_nodes or MAX_BLOCK_NODES, MAX_BLOCK_NODES)
    counts = offer.block_counts or tuple(range(1, cap + 1))
    return tuple(n for n in counts if n <= cap)


def fits(offer: Offer, held: float, deadline: float | None) -> bool:
    """Whether a run of ``held`` hours may use ``offer``: a block's rounded length within its
    longest booking; flex-start within 7 days and its wait within the deadline."""
    if offer.capacity_type == "block":
        assert offer.block_unit_hours
        return billed_hours(held, offer.block_unit_hours) <= (
            offer.block_max_hours or math.inf) + TOLERANCE
    longest = offer.block_max_hours or FLEX_START_MAX_HOURS
    if held > longest + TOLERANCE:
        return False
    return deadline is None or held + offer.wait_hours <= deadline * (1 + TOLERANCE)


def check_start(offers: list[Offer], start: dt.date, today: dt.date) -> list[Offer]:
    """The offers bookable for a run starting on ``start``; a start in the past is an input
    error. Blocks whose booking window (``max_start_days``) ends before ``start`` are dropped."""
    if start < today:
        raise InputError(f"sla.start_after: {start.isoformat()} is in the past (today is "
                         f"{today.isoformat()}); give today or a later date")
    ahead = (start - today).days
    return [o for o in offers if o.max_start_days is None or ahead <= o.max_start_days]


EMBEDDED_FILES = ("capacity_blocks.csv", "gcp_dws.csv")
"""The published booked-capacity rates (AWS capacity blocks; GCP DWS flex-start and calendar
mode), one row per (provider, region, instance type, capacity type)."""


def _number(row: dict[str, str], key: str) -> float | None:
    text = (row.get(key) or "").strip()
    return float(text) if text else None


def _embedded_offer(row: dict[str, str], base: Offer) -> Offer:
    kind = row.get("capacity_type") or "block"
    unit, cap = _number(row, "unit_hours"), _number(row, "max_nodes")
    start = _number(row, "max_start_days")
    if kind == "block" and base.provider == "aws":
        note = (f"capacity block: published rate of {row['as_of']}; booked in "
                f"{row['unit_hours']}-h units, paid upfront; `ptplan prices blocks` gives "
                "today's offerings")
    elif kind == "block":
        note = (f"calendar-mode reservation: published rate of {row['as_of']}; booked in "
                f"{row['unit_hours']}-h units, paid for whole units; `ptplan prices blocks "
                "--provider gcp` gives today's prices")
    else:
        note = (f"flex-start: published rate of {row['as_of']}; billed as used, at most "
                f"{float(row['max_hours']):g} h; expected wait {float(row['wait_hours']):g} h "
                "(none published)")
    if row.get("derivation"):
        note += f"; {row['derivation']}"
    return Offer(
        provider=base.provider, region=base.region, zone="",
        instance_type=base.instance_type, gpu=base.gpu, gpus_per_node=base.gpus_per_node,
        capacity_type=kind, usd_per_hour=float(row["usd_per_instance_hour"]),
        vcpus=base.vcpus, memory_gib=base.memory_gib,
        max_nodes=int(cap) if cap is not None else (MAX_BLOCK_NODES if kind == "block" else None),
        as_of=row["as_of"], source=row["source"], note=note,
        block_unit_hours=unit, block_max_hours=float(row["max_hours"]),
        block_counts=tuple(int(n) for n in (row.get("counts") or "").split()),
        wait_hours=_number(row, "wait_hours") or 0.0,
        max_start_days=int(start) if start is not None else None,
    )


def embedded_block_offers(on_demand: tuple[Offer, ...]) -> tuple[Offer, ...]:
    """The published booked-capacity rates of :data:`EMBEDDED_FILES` as offers, shaped like
    the catalog's on-demand offer of the same instance type and region (GPU, GPUs per node,
    vCPUs, memory); rows without one are skipped."""
    shapes = {(o.provider, o.region, o.instance_type): o for o in on_demand}
    out: list[Offer] = []
    for name in EMBEDDED_FILES:
        text = resources.files("ptplan.providers").joinpath(f"data/{name}").read_text()
        for row in csv.DictReader(text.splitlines()):
            base = shapes.get((row["provider"], row["region"], row["instance_type"]))
            if base is not None:
                out.append(_embedded_offer(row, base))
    return tuple(sorted(out, key=lambda o: o.order))
