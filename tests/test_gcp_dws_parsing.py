"""``providers/gcp_dws.py`` without a server: DWS SKU descriptions keyed by hand (the published
SKU groups' spellings, e.g. https://cloud.google.com/skus/sku-groups/flex-start-mode-a3-vms)
and the offer of one machine in each mode with the terms of the module docstring (flex-start at
most 7 days; calendar mode in 24-h units, 1 to 90 days, up to 80 VMs, 60 days ahead)."""

from __future__ import annotations

from providers.base import Offer
from providers.gcp_dws import SOURCE, _offer, dws_kind
from providers.gcp_machines import MACHINES
from providers.gcp_skus import Category, SkuHead


def _head(desc: str, group: str = "GPU", usage: str = "OnDemand") -> SkuHead:
    return SkuHead(sku_id="S-1", description=desc, category=Category(
        resource_family="Compute", resource_group=group, usage_type=usage),
        service_regions=["us-central1"])


FLEX_GPU = "Nvidia H100 80GB GPU attached to DWS Defined Duration VMs running in Americas"


def test_dws_skus_keyed_by_mode_kind_and_key() -> None:
    assert dws_kind(_head(FLEX_GPU)) == ("flex_start", "gpu", "H100")
    assert dws_kind(_head("DWS Defined Duration A3 Core running in Americas", "CPU")) == (
        "flex_start", "cpu", "A3")
    assert dws_kind(_head("DWS Defined Duration A3 Ram running in Americas", "RAM")) == (
        "flex_start", "ram", "A3")
    assert dws_kind(_head("Reserved Nvidia H100 80GB Mega GPU in Americas in Calendar Mode")) \
        == ("block", "gpu", "H100-MEGA")


def test_other_skus_are_not_dws() -> None:
    # a commitment in DWS words, an on-demand GPU, a DWS-worded GPU no pattern names
    for usage in ("Commit1Yr", "Commit3Yr"):
        assert dws_kind(_head(FLEX_GPU, usage=usage)) is None
    assert dws_kind(_head("Nvidia H100 80GB GPU running in Americas")) is None
    assert dws_kind(_head("Nvidia Imaginary 9000 GPU attached to DWS Defined Duration VMs "
                          "running in Americas")) is None


def test_one_machine_offered_in_each_mode() -> None:
    m = MACHINES["a3-highgpu-8g"]
    common = dict(provider="gcp", region="us-central1", zone="", instance_type="a3-highgpu-8g",
                  gpu="H100", gpus_per_node=8, vcpus=208.0, memory_gib=1872.0, usd_per_hour=40.5,
                  as_of="2026-12-05T00:00:00Z", source=SOURCE)
    assert _offer("a3-highgpu-8g", m, "H100", "us-central1", "block", 40.5, "P",
                  "2026-12-05T00:00:00Z") == Offer(
        **common, capacity_type="block", max_nodes=80, block_unit_hours=24.0,  # type: ignore
        block_max_hours=2160.0, max_start_days=60,
        note="calendar-mode reservation in 24-h units, 1 to 90 days: P")
    assert _offer("a3-highgpu-8g", m, "H100", "us-central1", "flex_start", 40.5, "P",
                  "2026-12-05T00:00:00Z") == Offer(
        **common, capacity_type="flex_start", block_max_hours=168.0,  # type: ignore
        note="flex-start: billed as used, at most 7 days, expected wait not published (0 h): P")
