"""How the embedded snapshot's GCP rows become offers (``providers/embedded.py::_gcp``), on
rows written in the test in the snapshot's own CSV columns (``providers/data/gcp_*.csv``),
priced by hand: a machine's price is its VM row + its GPU row × GPUs (a 1-GPU row) in the
same zone; the on-demand offer is the region's cheapest zone (named only when zones differ);
spot above on-demand is kept as published and noted."""

from __future__ import annotations

import pytest

import ptplan.providers.embedded as embedded

HEADER = ("InstanceType", "vCPUs", "MemoryGiB", "AcceleratorName", "AcceleratorCount",
          "GpuInfo", "Region", "AvailabilityZone", "Price", "SpotPrice")


def _vm(itype: str, zone: str, price: str, spot: str) -> dict[str, str]:
    cpus, mem = {"a2-highgpu-1g": ("12.0", "85.0"), "a2-highgpu-2g": ("24.0", "170.0")}[itype]
    return dict(zip(HEADER, (itype, cpus, mem, "", "", "", zone[:-2], zone, price, spot),
                    strict=True))


def _gpu(zone: str, price: str, spot: str) -> dict[str, str]:
    return dict(zip(HEADER, ("", "", "", "A100", "1", "", zone[:-2], zone, price, spot),
                    strict=True))


VMS = [
    # us-central1: three zones priced apart (b is the cheapest on demand)
    _vm("a2-highgpu-1g", "us-central1-a", "1.0", "0.5"),    # 1 + 2 = 3; spot 0.5 + 1 = 1.5
    _vm("a2-highgpu-1g", "us-central1-b", "1.0", "1.5"),    # 1 + 1.9 = 2.9; spot 1.5 + 1.4 = 2.9
    _vm("a2-highgpu-1g", "us-central1-c", "1.0", "1.5"),    # 3; spot 1.5 + 1.6 = 3.1 > 3
    # us-east1: two zones at one total with different VM parts; c's VM row has no price
    # (d listed first: the zone, not the row order, decides which VM part is recorded)
    _vm("a2-highgpu-1g", "us-east1-d", "1.0", "0.5"),       # 1 + 2 = 3
    _vm("a2-highgpu-1g", "us-east1-b", "1.2", "0.6"),       # 1.2 + 1.8 = 3
    _vm("a2-highgpu-1g", "us-east1-c", "", "0.5"),          # no on demand; spot 0.5 + 1 = 1.5
    # a 2-GPU machine: the 1-GPU row × 2
    _vm("a2-highgpu-2g", "us-central1-a", "2.0", "1.0"),    # 2 + 2·2 = 6; spot 1 + 2.6·2 = 6.2
    _vm("a2-highgpu-2g", "us-central1-f", "2.0", "1.0"),    # GPU row without on demand
]
GPUS = [
    _gpu("us-central1-a", "2.0", "1.0"), _gpu("us-central1-b", "1.9", "1.4"),
    _gpu("us-central1-c", "2.0", "1.6"), _gpu("us-east1-b", "1.8", "0.9"),
    _gpu("us-east1-d", "2.0", "1.0"), _gpu("us-east1-c", "2.0", "1.0"),
    _gpu("us-central1-f", "", "1.0"),
]


@pytest.fixture
def parsed(monkeypatch):
    files = {"gcp_gpu_vms.csv": VMS, "gcp_accelerators.csv": GPUS, "aws_gpu_vms.csv": []}
    monkeypatch.setattr(embedded, "_rows", lambda name: files[name])
    return embedded.parse_sources()  # offers, exclusions, reserved rates, GCP VM shares


def _offer(offers, itype, region, kind, zone=None):
    got = [o for o in offers if o.instance_type == itype and o.region == region
           and o.capacity_type == kind and (zone is None or o.zone == zone)]
    assert len(got) == 1, got
    return got[0]


def test_on_demand_is_the_cheapest_zone_named_when_zones_differ(parsed):
    offers, _, rates, share = parsed
    od = _offer(offers, "a2-highgpu-1g", "us-central1", "on_demand")
    assert (od.zone, od.usd_per_hour) == ("us-central1-b", 2.9)
    assert share[("us-central1", "a2-highgpu-1g")] == pytest.approx(1.0 / 2.9, rel=1e-12)
    assert sorted(r.usd_per_hour for r in rates if r.region == "us-central1"
                  and r.instance_type == "a2-highgpu-1g") == [
        round(2.9 * (1 - embedded.RESERVED_DISCOUNT[("gcp", y)]), 6) for y in (3, 1)]


def test_zones_at_one_total_give_a_regional_offer_and_the_first_zones_vm_share(parsed):
    offers, _, _, share = parsed
    od = _offer(offers, "a2-highgpu-1g", "us-east1", "on_demand")
    assert (od.zone, od.usd_per_hour) == ("", 3.0)
    # us-east1-b sorts before -d: its VM part 1.2 of 3
    assert share[("us-east1", "a2-highgpu-1g")] == pytest.approx(0.4, rel=1e-12)


def test_spot_above_on_demand_is_kept_and_noted_and_equal_is_not(parsed):
    offers = parsed[0]
    note = "spot above on-demand in the source (kept as published)"
    above = _offer(offers, "a2-highgpu-1g", "us-central1", "spot", "us-central1-c")
    assert above.usd_per_hour == pytest.approx(3.1, rel=1e-12)
    assert above.note.endswith(f"; {note}")
    equal = _offer(offers, "a2-highgpu-1g", "us-central1", "spot", "us-central1-b")
    assert equal.usd_per_hour == pytest.approx(2.9, rel=1e-12) and note not in equal.note
    below = _offer(offers, "a2-highgpu-1g", "us-central1", "spot", "us-central1-a")
    assert below.usd_per_hour == 1.5 and note not in below.note


def test_a_missing_on_demand_part_excludes_on_demand_and_no_comparison_is_made(parsed):
    offers, exclusions, _, _ = parsed
    spot = _offer(offers, "a2-highgpu-1g", "us-east1", "spot", "us-east1-c")
    assert spot.usd_per_hour == 1.5 and "above" not in spot.note
    assert "gcp a2-highgpu-1g us-east1-c: empty or zero on-demand price (VM or GPU row)" \
        in exclusions
    spot2 = _offer(offers, "a2-highgpu-2g", "us-central1", "spot", "us-central1-f")
    assert spot2.usd_per_hour == 3.0 and "above" not in spot2.note  # 1 + 1·2
    assert "gcp a2-highgpu-2g us-central1-f: empty or zero on-demand price (VM or GPU row)" \
        in exclusions


def test_a_two_gpu_machine_prices_the_one_gpu_row_twice(monkeypatch):
    vms = [_vm("a2-highgpu-2g", "us-central1-a", "2.0", "1.0")]
    gpus = [_gpu("us-central1-a", "2.0", "2.6")]
    files = {"gcp_gpu_vms.csv": vms, "gcp_accelerators.csv": gpus, "aws_gpu_vms.csv": []}
    monkeypatch.setattr(embedded, "_rows", lambda name: files[name])
    offers = embedded.parse_sources()[0]
    od = _offer(offers, "a2-highgpu-2g", "us-central1", "on_demand")
    assert od.usd_per_hour == 6.0 and od.zone == ""  # 2 + 2 × 2, one zone
    spot = _offer(offers, "a2-highgpu-2g", "us-central1", "spot", "us-central1-a")
    # 1 + 2.6 × 2 = 6.2 > 6: noted (a GPU part divided by the count, 1 + 1.3, would not be)
    assert spot.usd_per_hour == pytest.approx(6.2, rel=1e-12)
    assert "spot above on-demand" in spot.note and "2 x A100 2.6" in spot.note
