"""CPU instance types (issue #25 item 2): the nodes of a plan's CPU pools (sandboxes, rule-based
reward). They are kept apart from the GPU offers
(:attr:`ptplan.providers.base.Catalog.cpu_offers`), so
GPU pools never see them and every plan without CPU work is unchanged.

Embedded rows (``providers/data/cpu_vms.csv``): on-demand Linux list prices of a few AWS c7i /
m7i and GCP n2 / c3 shapes in US regions, transcribed from the providers' public price pages
(https://aws.amazon.com/ec2/pricing/on-demand/, https://cloud.google.com/compute/vm-instance-pricing;
GCP: n2 $0.031611 per vCPU-hour + $0.004237 per GiB-hour, c3 $0.03398 + $0.00456, us-central1
and the other tier-1 US regions at the same rate) as of the date in each row. They were not
fetched by a price API here, so their status is U (see providers/data/SOURCE.md); ``ptplan prices
refresh`` or a custom catalog replaces them.

Spot: the snapshot has no CPU spot history; spot offers are derived as on-demand × (1 −
:data:`CPU_SPOT_DISCOUNT`), an assumption (AWS advertises "up to 90 %" off, GCP Spot VMs "60-91 %"
off: https://aws.amazon.com/ec2/spot/pricing/, https://cloud.google.com/spot-vms/pricing), with the
embedded catalog's default interruption band."""

from __future__ import annotations

import csv
import math
from functools import cache
from importlib import resources
from typing import Any

from ptplan.providers.base import Offer

CPU_SPOT_DISCOUNT = 0.6
"""Assumed spot discount of CPU nodes against on-demand (status U, see the module docstring)."""
CPU_SPOT_MONTHLY_RECLAIM = 0.125
"""Monthly reclaim fraction of a CPU spot node: the embedded catalog's default band (10-15 %)."""
CPU_GPU = "none"
"""The ``gpu`` of a CPU offer (``gpus_per_node`` is 0)."""


def is_cpu(offer: Offer) -> bool:
    return offer.gpus_per_node == 0


@cache
def embedded_cpu_offers() -> tuple[Offer, ...]:
    """The embedded CPU offers: one on-demand and one derived spot offer per row."""
    hazard = -math.log(1.0 - CPU_SPOT_MONTHLY_RECLAIM) / 730.0
    out: list[Offer] = []
    text = resources.files("ptplan.providers").joinpath("data/cpu_vms.csv").read_text()
    for row in csv.DictReader(text.splitlines()):
        price = float(row["usd_per_hour"])
        common: dict[str, Any] = dict(provider=row["provider"], region=row["region"], zone="",
                      instance_type=row["instance_type"], gpu=CPU_GPU, gpus_per_node=0,
                      vcpus=float(row["vcpus"]), memory_gib=float(row["memory_gib"]),
                      as_of=row["as_of"], source=row["source"])
        out.append(Offer(capacity_type="on_demand", usd_per_hour=price,
                         note=f"CPU list price (status {row['status']})", **common))
        out.append(Offer(capacity_type="spot",
                         usd_per_hour=round(price * (1.0 - CPU_SPOT_DISCOUNT), 6),
                         interruptions_per_hour=hazard,
                         note=f"spot assumed {CPU_SPOT_DISCOUNT:.0%} below on-demand (U)",
                         **common))
    out.sort(key=lambda o: o.order)
    return tuple(out)
