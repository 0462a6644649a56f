"""``providers/gcp_dws.py`` without a server: DWS SKU descriptions keyed by hand (the published
SKU groups' spellings, e.g. https://cloud.google.com/skus/sku-groups/flex-start-mode-a3-vms)
and the offer of one machine in each mode with the terms of the module docstring (flex-start at
most 7 days; calendar mode in 24-h units, 1 to 90 days, up to 80 VMs, 60 days ahead)."""

from __future__ import annotations

import pytest

from ptplan.core.errors import ProviderError
from ptplan.providers.base import Offer
from ptplan.providers.gcp import _Index
from ptplan.providers.gcp_dws import SOURCE, _build, _offer, dws_kind
from ptplan.providers.gcp_machines import MACHINES
from ptplan.providers.gcp_skus import Category, SkuHead


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


def _index(*rows: tuple[str, str, str, str, float]) -> _Index:
    index = _Index({}, [])
    for kind, key, usage, region, price in rows:
        index.add(kind, key, usage, region, price, "S-" + key)
    return index


def test_build_prices_each_mode_from_its_skus_or_the_on_demand_vm() -> None:
    """Calendar mode: 8 × 3 + 208 × 0.01 + 1,872 × 0.0010000003 = 27.9520005616, kept to 6
    places. Flex-start has the GPU SKU only: the on-demand A3 vCPU and RAM (an upper bound).
    A4's B200 SKU is an 8th of the machine with its vCPUs and memory: 8 × 11 = 88. L4 in
    Frankfurt has no G2 vCPU/RAM SKU at all: excluded. On-demand GPU SKUs price nothing."""
    index = _index(("gpu", "H100", "block", "us-central1", 3.0),
                   ("cpu", "A3", "block", "us-central1", 0.01),
                   ("ram", "A3", "block", "us-central1", 0.0010000003),
                   ("gpu", "H100", "flex_start", "us-central1", 2.0),
                   ("cpu", "A3", "OnDemand", "us-central1", 0.02),
                   ("ram", "A3", "OnDemand", "us-central1", 0.002),
                   ("gpu", "B200", "block", "us-central1", 11.0),
                   ("gpu", "L4", "flex_start", "europe-west3", 0.5),
                   ("gpu", "H100", "OnDemand", "us-east4", 9.0))
    pull = _build(index, (), "2026-12-05T00:00:00Z")
    assert (pull.provider, pull.as_of, pull.source, pull.regions) == (
        "gcp", "2026-12-05T00:00:00Z", SOURCE, ())
    got = {(o.instance_type, o.capacity_type): o for o in pull.offers}
    assert {o.region for o in pull.offers} == {"us-central1"}
    cal = got[("a3-highgpu-8g", "block")]
    assert cal.usd_per_hour == 27.952001
    assert cal.note == ("calendar-mode reservation in 24-h units, 1 to 90 days: 208 vCPU × 0.01 "
                        "+ 1872 GiB × 0.001 + 8 × H100 3")
    flex = got[("a3-highgpu-8g", "flex_start")]
    assert flex.usd_per_hour == 8 * 2.0 + 208 * 0.02 + 1872 * 0.002
    assert flex.note.endswith("208 vCPU × 0.02 + 1872 GiB × 0.002 + 8 × H100 2; no flex_start "
                              "vCPU/RAM SKU for series A3: on-demand vCPU and RAM (an upper "
                              "bound)")
    a4 = got[("a4-highgpu-8g", "block")]
    assert a4.usd_per_hour == 88.0
    assert a4.note.endswith(": 8 × B200 11 (slice price includes vCPU and memory)")
    assert "gcp g2-standard-8 europe-west3 flex_start: no vCPU/RAM SKU for series G2" in \
        pull.exclusions
    # the only exclusions: the L4 machines (none in us-east4, whose GPU SKU is on demand)
    assert set(pull.exclusions) == {
        f"gcp {t} europe-west3 flex_start: no vCPU/RAM SKU for series G2"
        for t, m in MACHINES.items() if m.accelerator == "L4"}
    assert list(pull.exclusions) == sorted(set(pull.exclusions))


def test_build_without_dws_gpu_prices_is_a_provider_error() -> None:
    index = _index(("gpu", "H100", "OnDemand", "us-central1", 9.0))
    for regions, where in (((), ""), (("us-central1", "us-east4"),
                                      " for us-central1, us-east4")):
        with pytest.raises(ProviderError) as err:
            _build(index, regions, "2026-12-05T00:00:00Z")
        assert str(err.value) == ("the GCP Billing Catalog returned no DWS (flex-start or "
                                  f"calendar mode) GPU machine prices{where}; check --region; "
                                  "the cache is unchanged")
