"""Independent oracles for the boot-disk model (``optimizer/costs/disks.py``): a region whose own
block tier differs from the provider's ``*`` row, a region with storage rows but no block tier,
a region with no rows at all, two block tiers of one region (the cheaper wins; equal prices: the
name), a provider without block storage, the per-region memo.

The catalog is written here. Its block tiers are EBS volume types at their list prices
(https://aws.amazon.com/ebs/pricing/, 2026-11: gp3 $0.08/GB-month in us-east-1 and $0.0952 in
eu-central-1, io2 $0.125 in us-east-1, st1 $0.045 in us-east-1) and GCP pd-balanced at $0.10
(providers/data/REFERENCE_FACTS.md §2); ``gp3-b``, the GCP ``*`` pd-standard at $0.04 and the
object tiers are there to be *not* chosen. Expected rates are worked out by hand from the
module's formula: boot_disk_gb × $/GB-month ÷ 730 h. Written for the 16 surviving mutants of the
first mutation run of the module (docs/testing.md).
"""

from __future__ import annotations

from typing import Any

import pytest

from ptplan.costs.disks import DiskModel, block_tier, disk_usd_per_hour
from ptplan.providers.base import Catalog, StorageTier


def exact(x: Any) -> Any:
    """Equal to 12 significant digits, with no absolute slack (docs/testing.md)."""
    return pytest.approx(x, rel=1e-12, abs=0)


def _tier(
    provider: str, region: str, name: str, price: float, access: str = "block"
) -> StorageTier:
    return StorageTier(provider, region, name, price, 0.0, 0.0, access, "test", "U")


TIERS = (
    # the provider-wide rows (embedded catalog style): S3 Standard is cheaper than gp3 but is
    # object storage, so a `*` lookup that forgot `access` would pick it
    _tier("aws", "*", "s3_standard", 0.023, access="ms"),
    _tier("aws", "*", "gp3", 0.08),
    # GCP's `*` rows: pd-standard is cheaper than any AWS block tier, so a lookup that forgot the
    # provider would pick it
    _tier("gcp", "*", "pd_standard", 0.04),
    _tier("gcp", "*", "pd_balanced", 0.10),
    # eu-central-1 has its own rows: gp3 dearer than the `*` one, io2 dearer still (listed first)
    _tier("aws", "eu-central-1", "io2", 0.125),
    _tier("aws", "eu-central-1", "gp3", 0.0952),
    _tier("aws", "eu-central-1", "s3_standard", 0.0245, access="ms"),
    # us-east-2: st1 (throughput HDD) is block storage cheaper than any `*` block row; it is
    # listed between two dearer ones so neither "first" nor "last" is the cheapest
    _tier("aws", "us-east-2", "io2", 0.125),
    _tier("aws", "us-east-2", "st1", 0.045),
    _tier("aws", "us-east-2", "gp3", 0.08),
    # ap-south-1 has storage rows but no block tier: its disks fall back to the `*` gp3
    _tier("aws", "ap-south-1", "s3_standard", 0.025, access="ms"),
    # us-west-1: two block tiers at the same price, the dearer-named one listed first
    _tier("aws", "us-west-1", "gp3-b", 0.096),
    _tier("aws", "us-west-1", "gp3-a", 0.096),
    # a provider with object storage only: no block tier anywhere
    _tier("lab", "*", "standard", 0.02, access="ms"),
    _tier("lab", "r1", "standard", 0.021, access="ms"),
)
CATALOG = Catalog(name="disks-test", as_of="2026-11-01", offers=(), storage_tiers=TIERS)


@pytest.mark.parametrize(
    ("provider", "region", "tier", "price"),
    [
        ("aws", "eu-central-1", "gp3", 0.0952),  # its own rows: min(io2 0.125, gp3 0.0952)
        ("aws", "us-east-2", "st1", 0.045),  # min(0.125, 0.045, 0.08), the middle row
        ("aws", "ap-south-1", "gp3", 0.08),  # rows, none block: the `*` block row
        ("aws", "sa-east-1", "gp3", 0.08),  # no rows at all: the `*` rows, block only
        ("gcp", "europe-west4", "pd_standard", 0.04),  # `*` rows: min(0.04, 0.10)
        ("aws", "us-west-1", "gp3-a", 0.096),  # a tie on price: the name decides
    ],
)
def test_block_tier_is_the_cheapest_block_row_of_the_region_else_of_star(
    provider: str, region: str, tier: str, price: float
) -> None:
    t = block_tier(CATALOG, provider, region)
    assert t is not None
    assert (t.provider, t.tier, t.access) == (provider, tier, "block")
    assert t.usd_per_gb_month == price
    # the region's own row when it has block rows, else the provider's `*` row
    own = any(x.region == region and x.access == "block" for x in TIERS if x.provider == provider)
    assert t.region == (region if own else "*")


@pytest.mark.parametrize(("provider", "region"), [("lab", "r1"), ("lab", "r9"), ("azure", "x")])
def test_no_block_tier_gives_none_and_free_disks(provider: str, region: str) -> None:
    """``lab`` has object rows only (its own region's and `*`), ``azure`` no rows: no block tier,
    so its boot disks are priced at $0 (the plan warns)."""
    assert block_tier(CATALOG, provider, region) is None
    model = DiskModel(CATALOG, 200)
    assert model.tier(provider, region) is None
    assert model.per_node_hour(provider, region) == 0.0


def test_per_node_hour_by_hand_for_each_region() -> None:
    """200 GB × $/GB-month ÷ 730: eu-central-1 gp3 19.04/730, us-east-2 st1 9/730, ap-south-1
    (falls back) and us-east-1 (no rows) gp3 16/730, GCP pd-standard 8/730. Asked in this order
    so a memo keyed on less than (provider, region) returns the first region's rate."""
    model = DiskModel(CATALOG, 200)
    assert model.per_node_hour("aws", "eu-central-1") == exact(19.04 / 730)
    assert model.per_node_hour("aws", "us-east-2") == exact(9.0 / 730)
    assert model.per_node_hour("aws", "ap-south-1") == exact(16.0 / 730)
    assert model.per_node_hour("aws", "us-east-1") == exact(16.0 / 730)
    assert model.per_node_hour("gcp", "eu-central-1") == exact(8.0 / 730)
    # asked again (memoised): the same figures
    assert model.per_node_hour("aws", "eu-central-1") == exact(19.04 / 730)
    assert model.per_node_hour("aws", "us-east-2") == exact(9.0 / 730)


def test_tier_names_the_region_row_the_rate_uses() -> None:
    """``DiskModel.tier`` is what the plan prints next to the rate (``disk_tier``)."""
    model = DiskModel(CATALOG, 100)
    t = model.tier("aws", "eu-central-1")
    assert t is not None and (t.region, t.tier, t.usd_per_gb_month) == (
        "eu-central-1",
        "gp3",
        0.0952,
    )
    t = model.tier("aws", "ap-south-1")
    assert t is not None and (t.region, t.tier) == ("*", "gp3")
    # 100 GB × $0.0952 ÷ 730 = 9.52/730
    assert model.per_node_hour("aws", "eu-central-1") == exact(9.52 / 730)


def test_the_policy_size_scales_the_rate() -> None:
    """A 16,384 GB disk (the policy's maximum, EBS gp3's largest) in us-east-2 on st1:
    16384 × 0.045 / 730 = 737.28/730 $/h; a 10 GB one 0.45/730."""
    assert DiskModel(CATALOG, 16384).per_node_hour("aws", "us-east-2") == exact(737.28 / 730)
    assert DiskModel(CATALOG, 10).per_node_hour("aws", "us-east-2") == exact(0.45 / 730)


@pytest.mark.parametrize(
    ("nodes", "gb", "rate", "expected"),
    [
        (4, 200, 0.08, 64.0 / 730),  # 4 × 200 × 0.08 = 64 $/month
        (3, 500, 0.0952, 142.8 / 730),  # 3 × 500 × 0.0952 = 142.8
        (1, 10, 0.045, 0.45 / 730),
        (0, 200, 0.10, 0.0),  # a pool holding no node pays no disk
    ],
)
def test_disk_usd_per_hour_by_hand(nodes: int, gb: int, rate: float, expected: float) -> None:
    assert disk_usd_per_hour(nodes, gb, rate) == exact(expected)
