"""The embedded, offline price catalog (the default ``--catalog embedded``).

Package data in ``providers/data/`` (see ``SOURCE.md`` there; derived from the SkyPilot catalog):
``aws_gpu_vms.csv``, ``gcp_gpu_vms.csv``, ``gcp_accelerators.csv``. Normalisation:

* AWS: one on-demand offer per (instance type, region) from ``Price`` (identical across AZs) and
  one spot offer per (instance type, AZ ID) from ``SpotPrice``.
* GCP: machine price = VM row (vCPU + RAM part) + 1-GPU row × GPU count (or, for H100-MEGA, H200
  and B200, published only per 8 GPUs, the 8-GPU row), for the same zone, both for on-demand
  (``Price``) and spot (``SpotPrice``). On-demand offers are per region (the cheapest zone's
  total when zones differ, with the zone named), spot offers per zone.
* Empty or zero prices mean "not offered": the row is excluded with a recorded reason (the
  exclusions reach ``Plan.warnings`` when they touch a GPU the plan considers). Spot prices above
  on-demand are kept as published (the optimiser will not pick them) and noted.
* GPUs without a spec row (e.g. B300, V100, P100, P4) are excluded with a reason.
* Spot interruption rates: AWS Spot Instance Advisor bands per instance family where a value is
  known (``SPOT_BANDS``), otherwise :data:`DEFAULT_SPOT_BAND`; GCP publishes no rates, the default
  band applies. A band's monthly reclaim fraction p gives the per-node hazard
  λ = −ln(1 − p) / 730 h⁻¹.
* Spot capacity is not published: each spot offer is capped at :data:`SPOT_NODES_PER_ZONE` nodes
  (a planning assumption; a custom catalog states real caps).
* Reserved/committed rates are not in the snapshot: 1y/3y rates are derived from on-demand with the
  planner-default discounts of REFERENCE_FACTS.md (status U, assumption) and kept as
  :class:`~ptplan.providers.base.ReservedRate` for purchasing analysis. They never become plan
  offers,
  because nobody holds them (see DESIGN: reserved capacity in a project plan).
* Storage tiers and egress rates come from REFERENCE_FACTS.md (us-east-1 / us-central1 list prices,
  applied to every region of the provider).
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from functools import cache
from importlib import resources
from typing import Any

from ptplan.core.hardware import canonical_gpu_name
from ptplan.providers.base import Catalog, EgressRate, Offer, ReservedRate, StorageTier
from ptplan.providers.blocks import embedded_block_offers
from ptplan.providers.cpu import embedded_cpu_offers
from ptplan.providers.embedded_pack import load_packed, write_pack
from ptplan.providers.gcp_machines import machine as gcp_machine

AS_OF = "2025-12-01"
"""Approximate snapshot date: the source commit date is not recorded; SOURCE.md says the snapshot
already has AWS's 2025 P4/P5 price cut ("late 2025 or newer"). Plans warn that it is stale."""

SOURCE = "embedded snapshot derived from SkyPilot catalog (skypilot-org/skypilot-catalog v8)"

SPOT_NODES_PER_ZONE = 8
"""Assumed spot capacity per offer (nodes per zone): the snapshot has no capacity data."""

# AWS Spot Instance Advisor band -> monthly reclaim fraction used (band midpoint; >20 % -> 25 %).
BAND_FRACTION: dict[str, float] = {
    "<5%": 0.025,
    "5-10%": 0.075,
    "10-15%": 0.125,
    "15-20%": 0.175,
    ">20%": 0.25,
}
# Source: AWS Spot Instance Advisor, us-east-1 Linux, third-party snapshot dated 2026-09-20
# (providers/data/SOURCE.md, 'Spot interruption bands'). Families without a value use
# DEFAULT_SPOT_BAND.
SPOT_BANDS: dict[str, str] = {
    "p5": "<5%",
    "g5": "15-20%",
    "g6": "10-15%",
    "g6e": "5-10%",
}
DEFAULT_SPOT_BAND = "10-15%"

RESERVED_DISCOUNT: dict[tuple[str, int], float] = {
    ("aws", 1): 0.35,  # REFERENCE_FACTS.md: planner default 1y ≈ 30–40 % (U)
    ("aws", 3): 0.55,  # 3y ≈ 50–60 % (U)
    ("gcp", 1): 0.37,  # GCP GPU CUD 1y ≈ 37 % (U)
    ("gcp", 3): 0.55,  # 3y ≈ 55 % (U)
}


SPEND_DISCOUNT: dict[tuple[str, int], float] = {
    # EC2 Instance Savings Plans: AWS gives them the same "up to 72 %" as Standard RIs
    # (aws.amazon.com/savingsplans/faqs, V): the standard-RI planner default above (U).
    ("ec2_instance_savings_plan", 1): 0.35,
    ("ec2_instance_savings_plan", 3): 0.55,
    # Compute Savings Plans: "up to 66 %" (same page, V), below Instance SPs; 30 % / 50 % is the
    # convertible-RI assumption of tests/data/aws/SOURCE.md (U).
    ("compute_savings_plan", 1): 0.30,
    ("compute_savings_plan", 3): 0.50,
    # GCP Compute flexible (spend-based) CUDs: ≈28 % / ≈46 % (REFERENCE_FACTS.md, U), on the
    # vCPU and memory part of a machine only (GPUs take resource-based CUDs).
    ("flexible_cud", 1): 0.28,
    ("flexible_cud", 3): 0.46,
}
"""Planner-default discounts of spend commitments off on-demand (status U: assumptions, as of
REFERENCE_FACTS.md); ``ptplan reserve`` warns whenever it uses them."""

_GCP_VM_SHARE: dict[tuple[str, str], float] = {}


def gcp_vm_share(region: str, machine: str) -> float | None:
    """The vCPU + memory share of a GCP machine's embedded on-demand price (the part a
    flexible CUD covers), or None when the embedded catalog does not have the machine."""
    embedded_catalog()
    return _GCP_VM_SHARE.get((region, machine))


def hazard_per_hour(monthly_fraction: float) -> float:
    """Per-node interruption hazard λ (1/h) from a monthly reclaim fraction p: −ln(1−p)/730."""
    return -math.log(1.0 - monthly_fraction) / 730.0


def band_hazard(band: str) -> float:
    """Per-node interruption hazard λ (1/h) of a spot band (its :data:`BAND_FRACTION`)."""
    return hazard_per_hour(BAND_FRACTION[band])


def aws_family(instance_type: str) -> str:
    """An AWS instance type's family: ``p5`` for ``p5.48xlarge``."""
    return instance_type.split(".")[0]


def _price(cell: str) -> float | None:
    cell = (cell or "").strip()
    if not cell:
        return None
    value = float(cell)
    return value if value > 0 else None


def _rows(name: str) -> list[dict[str, str]]:
    text = resources.files("ptplan.providers").joinpath(f"data/{name}").read_text(encoding="utf-8")
    return list(csv.DictReader(text.splitlines()))


def _aws(offers: list[Offer], exclusions: list[str], rates: list[ReservedRate]) -> None:
    on_demand: dict[tuple[str, str], dict[str, str]] = {}
    for row in _rows("aws_gpu_vms.csv"):
        itype, region, zone = row["InstanceType"], row["Region"], row["AvailabilityZone"]
        gpu = canonical_gpu_name(row["AcceleratorName"])
        if gpu is None:
            exclusions.append(
                f"aws {itype} {region}/{zone}: no GPU spec for {row['AcceleratorName']!r}"
            )
            continue
        count = round(float(row["AcceleratorCount"]))
        family = aws_family(itype)
        band = SPOT_BANDS.get(family, DEFAULT_SPOT_BAND)
        common: dict[str, Any] = dict(
            provider="aws",
            region=region,
            instance_type=itype,
            gpu=gpu,
            gpus_per_node=count,
            vcpus=float(row["vCPUs"]),
            memory_gib=float(row["MemoryGiB"]),
            as_of=AS_OF,
            source=SOURCE,
        )
        if (itype, region) not in on_demand:
            on_demand[(itype, region)] = row
            od = _price(row["Price"])
            if od is None:
                exclusions.append(f"aws {itype} {region}: no on-demand price in the snapshot")
            else:
                offers.append(Offer(zone="", capacity_type="on_demand", usd_per_hour=od, **common))
                for years in (1, 3):
                    rates.append(
                        ReservedRate(
                            provider="aws",
                            region=region,
                            instance_type=itype,
                            term_years=years,
                            usd_per_hour=round(od * (1 - RESERVED_DISCOUNT[("aws", years)]), 6),
                            source="REFERENCE_FACTS.md planner default (U: assumption)",
                            assumption=True,
                        )
                    )
        spot = _price(row["SpotPrice"])
        if spot is None:
            exclusions.append(f"aws {itype} {region}/{zone}: no spot price in the snapshot")
            continue
        od_here = _price(row["Price"])
        above = ("; spot above on-demand in the source (kept as published)"
                 if od_here is not None and spot > od_here else "")
        offers.append(
            Offer(
                zone=zone,
                capacity_type="spot",
                usd_per_hour=spot,
                interruptions_per_hour=band_hazard(band),
                max_nodes=SPOT_NODES_PER_ZONE,
                note=f"spot band {band} ({'advisor' if family in SPOT_BANDS else 'default'})"
                f"{above}",
                **common,
            )
        )


def parse_sources() -> tuple[list[Offer], list[str], list[ReservedRate],
                             dict[tuple[str, str], float]]:
    """Offers, exclusions, reserved rates and GCP VM shares normalised from the CSV files
    (what :mod:`ptplan.providers.embedded_pack` packs), offers in catalog order."""
    offers: list[Offer] = []
    exclusions: list[str] = []
    rates: list[ReservedRate] = []
    vm_share: dict[tuple[str, str], float] = {}
    _aws(offers, exclusions, rates)
    _gcp(offers, exclusions, rates, vm_share)
    offers.sort(key=lambda o: o.order)
    return offers, exclusions, rates, vm_share


def _gcp(offers: list[Offer], exclusions: list[str], rates: list[ReservedRate],
         vm_share: dict[tuple[str, str], float]) -> None:
    # Accelerator rows are keyed by count: most GPUs have a 1-GPU row (price x count), but
    # H100-MEGA, H200 and B200 are published only as 8-GPU rows (the price of all 8).
    accel: dict[tuple[str, str, int], dict[str, str]] = {}
    for row in _rows("gcp_accelerators.csv"):
        n = round(float(row["AcceleratorCount"]))
        accel[(row["AcceleratorName"], row["AvailabilityZone"], n)] = row
    per_region_od: dict[tuple[str, str], list[tuple[float, str, dict, float]]] = defaultdict(list)
    for row in _rows("gcp_gpu_vms.csv"):
        itype, region, zone = row["InstanceType"], row["Region"], row["AvailabilityZone"]
        shape = gcp_machine(itype)
        accel_name, count = shape.accelerator, shape.gpus
        gpu = canonical_gpu_name(accel_name)
        gpu_row, per_row = accel.get((accel_name, zone, 1)), count
        if gpu_row is None:
            gpu_row, per_row = accel.get((accel_name, zone, count)), 1
        if gpu is None or gpu_row is None:
            exclusions.append(f"gcp {itype} {zone}: no {accel_name} GPU price row for the zone")
            continue
        common: dict[str, Any] = dict(
            provider="gcp",
            region=region,
            instance_type=itype,
            gpu=gpu,
            gpus_per_node=count,
            vcpus=float(row["vCPUs"]),
            memory_gib=float(row["MemoryGiB"]),
            as_of=AS_OF,
            source=SOURCE,
        )
        vm_od, gpu_od = _price(row["Price"]), _price(gpu_row["Price"])
        if vm_od is None or gpu_od is None:
            exclusions.append(f"gcp {itype} {zone}: empty or zero on-demand price (VM or GPU row)")
        else:
            total = round(vm_od + gpu_od * per_row, 6)
            per_region_od[(itype, region)].append((total, zone, common, vm_od))
        vm_spot, gpu_spot = _price(row["SpotPrice"]), _price(gpu_row["SpotPrice"])
        if vm_spot is None or gpu_spot is None:
            exclusions.append(f"gcp {itype} {zone}: empty or zero spot price (VM or GPU row)")
            continue
        above = ""
        if vm_od is not None and gpu_od is not None and \
                vm_spot + gpu_spot * per_row > vm_od + gpu_od * per_row:
            above = "; spot above on-demand in the source (kept as published)"
        offers.append(
            Offer(
                zone=zone,
                capacity_type="spot",
                usd_per_hour=round(vm_spot + gpu_spot * per_row, 6),
                interruptions_per_hour=band_hazard(DEFAULT_SPOT_BAND),
                max_nodes=SPOT_NODES_PER_ZONE,
                note=f"VM part {vm_spot} + "
                + (f"{count} x {accel_name} {gpu_spot}" if per_row == count
                   else f"{accel_name} x{count} row {gpu_spot}")
                + f"; spot band {DEFAULT_SPOT_BAND} (default: GCP publishes no rates){above}",
                **common,
            )
        )
    for (itype, region), rows in sorted(per_region_od.items()):
        rows.sort(key=lambda r: (r[0], r[1]))
        total, zone, common, vm_part = rows[0]
        vm_share[(region, itype)] = vm_part / total
        prices = {r[0] for r in rows}
        offers.append(
            Offer(
                zone="" if len(prices) == 1 else zone,
                capacity_type="on_demand",
                usd_per_hour=total,
                note="VM part + GPU part (same zone)",
                **common,
            )
        )
        for years in (1, 3):
            rates.append(
                ReservedRate(
                    provider="gcp",
                    region=region,
                    instance_type=itype,
                    term_years=years,
                    usd_per_hour=round(total * (1 - RESERVED_DISCOUNT[("gcp", years)]), 6),
                    source="REFERENCE_FACTS.md typical GPU CUD (U: assumption)",
                    assumption=True,
                )
            )


_REF = "REFERENCE_FACTS.md"
STORAGE: tuple[tuple[str, str, float, float, float, str, str], ...] = (
    # provider, tier, $/GB-month, min days, retrieval $/GB, access, status
    ("aws", "s3_standard", 0.023, 0, 0.0, "ms", "V"),
    ("aws", "s3_standard_ia", 0.0125, 30, 0.01, "ms", "V"),
    ("aws", "s3_glacier_instant", 0.004, 90, 0.03, "ms", "V"),
    ("aws", "s3_glacier_flexible", 0.0036, 90, 0.01, "hours", "V"),
    ("aws", "s3_glacier_deep_archive", 0.00099, 180, 0.02, "hours", "S"),
    ("aws", "ebs_gp3", 0.08, 0, 0.0, "block", "V"),
    ("gcp", "gcs_standard", 0.020, 0, 0.0, "ms", "S"),
    ("gcp", "gcs_nearline", 0.010, 30, 0.01, "ms", "S"),
    ("gcp", "gcs_coldline", 0.004, 90, 0.02, "ms", "S"),
    ("gcp", "gcs_archive", 0.0012, 365, 0.05, "ms", "S"),
    ("gcp", "pd_balanced", 0.10, 0, 0.0, "block", "S"),
)
"""Object tiers (access ``ms``/``hours``) price the plan's data classes; ``block`` tiers are
volumes attached to nodes (boot disks, :mod:`ptplan.costs.disks`) and never hold a data
class. EBS gp3 $0.08/GB-month (https://aws.amazon.com/ebs/pricing/, us-east-1); GCP
pd-balanced $0.10/GB-month (https://cloud.google.com/compute/disks-image-pricing,
us-central1; both bill the provisioned GiB, per second)."""
EGRESS: tuple[tuple[str, str, float, str], ...] = (
    ("aws", "same_zone", 0.0, "V"),
    ("aws", "cross_zone", 0.02, "S"),  # 0.01 each direction
    ("aws", "inter_region", 0.02, "S"),
    ("aws", "inter_continent", 0.02, "U"),
    ("aws", "internet", 0.09, "S"),
    ("gcp", "same_zone", 0.0, "V"),
    ("gcp", "cross_zone", 0.01, "S"),
    ("gcp", "inter_region", 0.02, "U"),
    ("gcp", "inter_continent", 0.05, "U"),
    ("gcp", "internet", 0.12, "S"),
)


@cache
def embedded_catalog() -> Catalog:
    """The embedded snapshot, normalised (cached: loaded once per process, from the pre-built
    pack of :mod:`ptplan.providers.embedded_pack` when it matches the CSV files, else parsed)."""
    offers, exclusions, rates, vm_share = load_packed() or parse_sources()
    _GCP_VM_SHARE.clear()
    _GCP_VM_SHARE.update(vm_share)
    blocks = embedded_block_offers(tuple(o for o in offers if o.capacity_type == "on_demand"))
    return Catalog(
        name="embedded",
        block_offers=blocks,
        as_of=AS_OF,
        offers=tuple(offers),
        storage_tiers=tuple(
            StorageTier(p, "*", t, price, days, fee, access, _REF, status)
            for p, t, price, days, fee, access, status in STORAGE
        ),
        egress=tuple(EgressRate(p, path, rate, _REF, status) for p, path, rate, status in EGRESS),
        reserved_rates=tuple(rates),
        exclusions=tuple(exclusions),
        cpu_offers=embedded_cpu_offers(),
        notes=(
            f"{SOURCE}; as_of {AS_OF} is approximate (see providers/data/SOURCE.md)",
            f"spot capacity assumed {SPOT_NODES_PER_ZONE} nodes per zone (not in the snapshot)",
        ),
    )


if __name__ == "__main__":  # pragma: no cover - the pack's test rebuilds it in memory
    print(f"wrote {write_pack(parse_sources()).name}")  # python -m ptplan.providers.embedded
