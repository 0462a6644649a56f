"""The booking rules of ``providers/blocks.py`` by hand (mutation-testing gaps,
docs/testing.md): whole units billed, the counts one booking may hold, which runs fit a block
or flex-start, and the reservation name GKE consumes."""

from __future__ import annotations

from pathlib import Path

import pytest

from ptplan.providers.base import Offer
from ptplan.providers.blocks import (
    FLEX_START_MAX_HOURS,
    TOLERANCE,
    allowed_counts,
    billed_hours,
    calendar_reservation_name,
    fits,
    units,
)
from ptplan.providers.custom import load_custom_catalog


def _offer(kind: str, **kw) -> Offer:
    return Offer(provider="aws", region="us-east-1", zone="", instance_type="p5.48xlarge",
                 gpu="H100", gpus_per_node=8, capacity_type=kind, usd_per_hour=31.464, **kw)


@pytest.mark.parametrize(("held", "unit", "billed"), [
    (48.0, 24.0, 48.0),    # exactly two days: two units, not three
    (48.5, 24.0, 72.0),
    (0.5, 24.0, 24.0),     # at least one unit
    (169.0, 168.0, 336.0),
])
def test_whole_units_are_billed(held, unit, billed):
    assert billed_hours(held, unit) == billed
    assert units(held, unit) == round(billed / unit)


def test_the_reservation_name_is_the_machine_and_the_start_day():
    assert calendar_reservation_name("a3-highgpu-8g", "2026-12-10") == \
        "ptplan-a3-highgpu-8g-20261210"


def test_counts_one_booking_may_hold():
    assert allowed_counts(_offer("block", max_nodes=3)) == (1, 2, 3)
    assert allowed_counts(_offer("block")) == tuple(range(1, 65))  # AWS: 1 to 64 instances
    assert allowed_counts(_offer("block", max_nodes=200)) == tuple(range(1, 65))
    steps = (1, 2, 4, 8, 16, 32, 64)
    assert allowed_counts(_offer("block", max_nodes=8, block_counts=steps)) == (1, 2, 4, 8)


def test_a_block_fits_when_its_rounded_length_is_within_its_longest_booking():
    block = _offer("block", block_unit_hours=24.0, block_max_hours=48.0)
    assert fits(block, 48.0, None)          # two whole days: exactly the longest booking
    assert fits(block, 30.0, 10.0)          # a block's deadline is the run's, not checked here
    assert not fits(block, 48.5, None)      # rounds to three days
    shorter = _offer("block", block_unit_hours=24.0, block_max_hours=40.0)
    assert not fits(shorter, 30.0, None)    # 30 h is under 40 h, but it bills 48
    assert fits(_offer("block", block_unit_hours=24.0), 5000.0, None)  # no longest booking


def test_flex_start_fits_within_seven_days_and_its_wait_within_the_deadline():
    flex = _offer("flex_start", wait_hours=6.0)  # no longest booking given: 7 days
    assert fits(flex, FLEX_START_MAX_HOURS, None)
    assert fits(flex, FLEX_START_MAX_HOURS + TOLERANCE, None)
    assert not fits(flex, FLEX_START_MAX_HOURS + 0.01, None)
    assert fits(flex, 100.0, 106.0) and not fits(flex, 100.0, 105.9)
    assert fits(_offer("flex_start", block_max_hours=72.0), 72.0, None)
    assert not fits(_offer("flex_start", block_max_hours=72.0), 72.5, None)


def test_a_custom_block_may_be_as_long_as_one_unit(tmp_path: Path):
    path = tmp_path / "c.yaml"
    path.write_text("as_of: 2026-11-01\noffers:\n  - {provider: lab, region: r, instance_type: x,"
                    " gpu: H100, gpus_per_node: 8, block_usd_per_hour: 9.0, "
                    "block_unit_hours: 168, block_max_hours: 168}\n")
    (block,) = load_custom_catalog(str(path)).block_offers
    assert (block.block_unit_hours, block.block_max_hours) == (168.0, 168.0)


def _published(kind: str, region: str, itype: str) -> Offer:
    from ptplan.providers.embedded import embedded_catalog

    (got,) = [o for o in embedded_catalog().block_offers
              if (o.capacity_type, o.region, o.instance_type) == (kind, region, itype)]
    return got


def _row(name: str, kind: str, region: str, itype: str) -> dict[str, str]:
    import csv

    path = Path(__file__).resolve().parents[1] / "providers" / "data" / name
    with path.open(encoding="utf-8") as f:
        (row,) = [r for r in csv.DictReader(f)
                  if (r["capacity_type"], r["region"], r["instance_type"])
                  == (kind, region, itype)]
    return row


def test_published_rates_as_offers_each_kind_its_own_terms():
    """The shipped rate files (providers/data/capacity_blocks.csv, gcp_dws.csv), row by row."""
    aws = _published("block", "us-east-1", "p5.48xlarge")
    assert (aws.usd_per_hour, aws.block_unit_hours, aws.block_max_hours, aws.max_start_days,
            aws.max_nodes, aws.zone) == (39.33, 24.0, 336.0, 56, 64, "")
    assert aws.block_counts == (1, 2, 4, 8, 16, 32, 64)
    assert aws.note.startswith("capacity block: published rate of 2024-12-01; booked in 24-h "
                               "units, paid upfront; `ptplan prices blocks` gives today's")
    gcp = _published("block", "us-central1", "a3-megagpu-8g")
    row = _row("gcp_dws.csv", "block", "us-central1", "a3-megagpu-8g")
    assert (gcp.usd_per_hour, gcp.block_unit_hours, gcp.block_max_hours, gcp.max_nodes,
            gcp.max_start_days, gcp.block_counts) == (48.189028, 24.0, 2160.0, 80, 60, ())
    assert gcp.note == ("calendar-mode reservation: published rate of 2026-12-04; booked in "
                        "24-h units, paid for whole units; `ptplan prices blocks --provider "
                        f"gcp` gives today's prices; {row['derivation']}")
    flex = _published("flex_start", "us-central1", "a2-highgpu-1g")
    row = _row("gcp_dws.csv", "flex_start", "us-central1", "a2-highgpu-1g")
    assert (flex.usd_per_hour, flex.block_max_hours, flex.max_nodes, flex.wait_hours,
            flex.block_unit_hours) == (2.02038, 168.0, None, 0.0, None)
    assert flex.note == ("flex-start: published rate of 2026-08-02; billed as used, at most "
                         "168 h; expected wait 0 h (none published)"
                         + (f"; {row['derivation']}" if row["derivation"] else ""))


def test_a_published_wait_and_a_missing_cap_are_read_as_given():
    """A rate row (the columns of providers/data/gcp_dws.csv) with a queueing time published:
    the offer waits that long; without a max_nodes a block holds up to 64, flex-start is
    uncapped."""
    from ptplan.providers.blocks import _embedded_offer

    base = _published("block", "us-central1", "a3-megagpu-8g")
    row = {"provider": "gcp", "region": "us-central1", "instance_type": "a3-megagpu-8g",
           "capacity_type": "flex_start", "usd_per_instance_hour": "50.0", "unit_hours": "",
           "max_hours": "168", "max_nodes": "", "counts": "", "max_start_days": "",
           "wait_hours": "5.5", "as_of": "2026-12-04", "source": "test row", "derivation": ""}
    flex = _embedded_offer(row, base)
    assert (flex.wait_hours, flex.max_nodes, flex.max_start_days, flex.block_unit_hours) == \
        (5.5, None, None, None)
    assert flex.note == ("flex-start: published rate of 2026-12-04; billed as used, at most 168 "
                         "h; expected wait 5.5 h (none published)")
    block = _embedded_offer({**row, "capacity_type": "block", "unit_hours": "24",
                             "wait_hours": ""}, base)
    assert (block.wait_hours, block.max_nodes, block.block_unit_hours) == (0.0, 64, 24.0)


def test_published_offers_take_the_on_demand_offers_shape():
    from ptplan.providers.embedded import embedded_catalog

    (od,) = [o for o in embedded_catalog().offers if o.capacity_type == "on_demand"
             and (o.region, o.instance_type) == ("us-central1", "a3-megagpu-8g")]
    for kind in ("block", "flex_start"):
        got = _published(kind, "us-central1", "a3-megagpu-8g")
        assert (got.provider, got.gpu, got.gpus_per_node, got.vcpus, got.memory_gib) == \
            ("gcp", od.gpu, od.gpus_per_node, od.vcpus, od.memory_gib)
        assert od.vcpus and od.memory_gib


def test_a_start_exactly_at_the_booking_window_is_bookable():
    import datetime as dt

    from ptplan.providers.blocks import check_start

    aws = _published("block", "us-east-1", "p5.48xlarge")  # bookable up to 56 days ahead
    today = dt.date(2026, 12, 5)
    assert check_start([aws], today + dt.timedelta(days=56), today) == [aws]
    assert check_start([aws], today + dt.timedelta(days=57), today) == []
