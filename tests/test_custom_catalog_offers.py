"""A custom catalog (``providers/custom.py``) read into offers, rates, tiers and exclusions, every
field checked against what the YAML written in the test says (mutation-testing gaps,
docs/testing.md): on-demand, spot with and without an interruption rate, reserved capacity held
(amortised or sunk, and without its rate), rows with nothing offered, CPU types, capacity
blocks and flex-start, storage and egress."""

from __future__ import annotations

from pathlib import Path

import pytest

from ptplan.core.errors import InputError
from ptplan.providers.base import EgressRate, Offer, ReservedRate, StorageTier
from ptplan.providers.custom import load_custom_catalog
from ptplan.providers.embedded import DEFAULT_SPOT_BAND, band_hazard

YAML = """\
as_of: 2026-11-01
offers:
  - {provider: lab, region: west, zone: west-a, instance_type: h100x8, gpu: H100,
     gpus_per_node: 8, vcpus: 192, memory_gib: 2048, on_demand_usd_per_hour: 20.0,
     spot_usd_per_hour: 8.0, spot_interruptions_per_hour: 0.05, max_nodes: 16,
     spot_max_nodes: 4, reserved_1y_usd_per_hour: 14.0, reserved_3y_usd_per_hour: 10.0,
     reserved_nodes_held: 2, reserved_term_years: 3}
  - {provider: lab, region: west, instance_type: a100x8, gpu: A100-80GB, gpus_per_node: 8,
     spot_usd_per_hour: 6.5, max_nodes: 3, reserved_nodes_held: 5, reserved_sunk: true}
  - {provider: lab, region: east, instance_type: l4x1, gpu: L4, gpus_per_node: 1,
     reserved_nodes_held: 1}
  - {provider: lab, region: east, instance_type: t4x1, gpu: T4, gpus_per_node: 1}
  - {provider: lab, region: east, instance_type: c64, gpu: none, gpus_per_node: 0, vcpus: 64,
     memory_gib: 256, on_demand_usd_per_hour: 2.5}
  - {provider: lab, region: east, instance_type: b200x8, gpu: B200, gpus_per_node: 8,
     block_usd_per_hour: 60.0, block_unit_hours: 168, block_max_nodes: 8,
     flex_start_usd_per_hour: 70.0, flex_start_wait_hours: 6, max_nodes: 2}
storage_tiers:
  - {provider: lab, tier: nfs, usd_per_gb_month: 0.05}
  - {provider: lab, region: east, tier: tape, usd_per_gb_month: 0.001, min_days: 180,
     retrieval_usd_per_gb: 0.02, access: hours}
egress:
  - {provider: lab, path: inter_region, usd_per_gb: 0.01}
"""
SRC = "custom catalog lab.yaml"


@pytest.fixture
def cat(tmp_path: Path):
    path = tmp_path / "lab.yaml"
    path.write_text(YAML)
    return load_custom_catalog(str(path))


def _common(**kw) -> dict:
    base = dict(provider="lab", zone="", vcpus=None, memory_gib=None, as_of="2026-11-01",
                source=SRC)
    return {**base, **kw}


def test_the_catalog_is_named_by_its_file_and_dated(cat):
    assert (cat.name, cat.as_of) == ("lab", "2026-11-01")


def test_gpu_offers_field_by_field(cat):
    h100 = _common(region="west", zone="west-a", instance_type="h100x8", gpu="H100",
                   gpus_per_node=8, vcpus=192.0, memory_gib=2048.0)
    a100 = _common(region="west", instance_type="a100x8", gpu="A100-80GB", gpus_per_node=8)
    assert sorted(cat.offers, key=lambda o: o.order) == sorted([
        Offer(capacity_type="on_demand", usd_per_hour=20.0, max_nodes=16, **h100),
        Offer(capacity_type="spot", usd_per_hour=8.0, interruptions_per_hour=0.05, max_nodes=4,
              note="interruption rate from the catalog", **h100),
        # held for 3 years at the 3-year rate (the 1-year one is not the held term's)
        Offer(capacity_type="reserved", usd_per_hour=10.0, max_nodes=2,
              note="2 nodes held (3y); amortised rate billed for the hours used", **h100),
        # no rate given: the default band's hazard, named; spot capped by max_nodes
        Offer(capacity_type="spot", usd_per_hour=6.5,
              interruptions_per_hour=band_hazard(DEFAULT_SPOT_BAND), max_nodes=3,
              note=f"no interruption rate given: default band {DEFAULT_SPOT_BAND} assumed",
              **a100),
        Offer(capacity_type="reserved", usd_per_hour=0.0, max_nodes=5, reserved_sunk=True,
              note="5 nodes held (1y); sunk: zero marginal cost", **a100),
    ], key=lambda o: o.order)


def test_cpu_types_are_cpu_offers(cat):
    assert cat.cpu_offers == (Offer(capacity_type="on_demand", usd_per_hour=2.5, **_common(
        region="east", instance_type="c64", gpu="none", gpus_per_node=0, vcpus=64.0,
        memory_gib=256.0)),)


def test_rates_are_the_rows_own_by_term(cat):
    assert sorted(cat.reserved_rates, key=lambda r: r.term_years) == [
        ReservedRate("lab", "west", "h100x8", 1, 14.0, SRC, assumption=False),
        ReservedRate("lab", "west", "h100x8", 3, 10.0, SRC, assumption=False)]


def test_rows_offering_nothing_are_excluded_by_name(cat):
    assert cat.exclusions == (
        "lab l4x1 east: reserved_nodes_held without reserved_1y_usd_per_hour and not "
        "reserved_sunk: not offered",
        "lab t4x1 east: no on-demand, spot or held reserved capacity: not offered")


def test_blocks_and_flex_start(cat):
    b200 = _common(region="east", instance_type="b200x8", gpu="B200", gpus_per_node=8)
    assert cat.block_offers == (
        Offer(capacity_type="block", usd_per_hour=60.0, max_nodes=8, block_unit_hours=168.0,
              block_max_hours=182 * 24.0, note="capacity block in 168-h units, paid for whole "
              "units", **b200),
        Offer(capacity_type="flex_start", usd_per_hour=70.0, max_nodes=2, block_max_hours=168.0,
              wait_hours=6.0, note="flex-start: queued (expected wait 6 h), at most 7 days",
              **b200))
    assert not [o for o in cat.offers if o.instance_type == "b200x8"]


def test_storage_and_egress(cat):
    assert cat.storage_tiers == (
        StorageTier("lab", "*", "nfs", 0.05, 0, 0, "ms", SRC, "custom"),
        StorageTier("lab", "east", "tape", 0.001, 180, 0.02, "hours", SRC, "custom"))
    assert cat.egress == (EgressRate("lab", "inter_region", 0.01, SRC, "custom"),)


def test_a_block_longer_than_its_limit_is_refused(tmp_path: Path):
    path = tmp_path / "c.yaml"
    path.write_text("as_of: 2026-11-01\noffers:\n  - {provider: lab, region: r, instance_type: x,"
                    " gpu: H100, gpus_per_node: 8, block_usd_per_hour: 9.0, "
                    "block_unit_hours: 168, block_max_hours: 100}\n")
    with pytest.raises(InputError) as err:
        load_custom_catalog(str(path))
    assert str(err.value) == ("block_max_hours: 100 is shorter than one unit (168 h) of x; "
                              "raise it to 168 or more")


def test_a_daily_block_defaults_to_two_weeks(tmp_path: Path):
    path = tmp_path / "named.yaml"
    path.write_text("as_of: 2026-11-01\nname: mine\noffers:\n  - {provider: lab, region: r, "
                    "instance_type: x, gpu: H100, gpus_per_node: 8, block_usd_per_hour: 9.0}\n")
    cat = load_custom_catalog(str(path))
    assert cat.name == "mine"
    (block,) = cat.block_offers
    assert (block.block_unit_hours, block.block_max_hours, block.max_nodes) == (24.0, 336.0, 64)
    assert block.source == "custom catalog named.yaml"


def test_sunk_capacity_is_free_even_with_a_rate_and_a_zero_rate_stays_zero(tmp_path: Path):
    path = tmp_path / "held.yaml"
    path.write_text(
        "as_of: 2026-11-01\noffers:\n"
        "  - {provider: lab, region: r, instance_type: sunk, gpu: H100, gpus_per_node: 8,\n"
        "     reserved_1y_usd_per_hour: 14.0, reserved_nodes_held: 2, reserved_sunk: true}\n"
        "  - {provider: lab, region: r, instance_type: free, gpu: H100, gpus_per_node: 8,\n"
        "     reserved_1y_usd_per_hour: 0.0, reserved_nodes_held: 1}\n")
    held = {o.instance_type: o for o in load_custom_catalog(str(path)).offers}
    assert (held["sunk"].usd_per_hour, held["sunk"].reserved_sunk) == (0.0, True)
    assert (held["free"].usd_per_hour, held["free"].reserved_sunk) == (0.0, False)
    assert held["free"].note == "1 node held (1y); amortised rate billed for the hours used"
