"""``providers/gcp_dws.fetch_dws`` on SKU pages written in the test, served by the local gRPC
CloudCatalog server of test_gcp_dws_fetch.py through the real client: how the SKUs of a page
become machine prices (two SKUs for one key: the higher; a mode with the series' vCPU SKU but not
its RAM SKU: the on-demand pair; a mode without either in a region: excluded, and the machine's
other modes still priced), and the retry budget with a request that takes time.

Hand values: a3-megagpu-8g is 8 GPUs, 208 vCPUs, 1,872 GiB (providers/gcp_machines.py); the
fixture's on-demand A3Plus SKUs are 0.026924 $/vCPU-h and 0.002344 $/GiB-h, its flex-start H100
Mega GPU SKU 4.423936 $/h, the calendar-mode one 4.841121 $/h (tests/data/gcp/dws_skus.json)."""

from __future__ import annotations

import json
from typing import Any

import grpc
import pytest
from test_gcp_dws_fetch import DWS, NOW, WHAT, Clock, GrpcBilling, _prices, billing, clock

from ptplan.core.errors import ProviderError
from ptplan.providers.gcp_dws import fetch_dws

__all__ = ["billing", "clock"]  # the fixtures, shared
MEGA_OD_VM = 208 * 0.026924 + 1872 * 0.002344


def sku(sku_id: str, description: str, group: str, regions: list[str], units: int,
        nanos: int, unit: str = "h") -> Any:
    """A Compute Engine SKU shaped as the fixture's (one tier, USD)."""
    from google.cloud import billing_v1

    s = json.loads(json.dumps(DWS[0]))
    s.update(skuId=sku_id, name=f"services/6F81-5844-456A/skus/{sku_id}",
             description=description, serviceRegions=regions)
    s["category"]["resourceGroup"] = group
    expr = s["pricingInfo"][0]["pricingExpression"]
    expr["usageUnit"] = unit
    expr["tieredRates"][0]["unitPrice"].update(units=str(units), nanos=nanos)
    return billing_v1.Sku.from_json(json.dumps(s))


def test_two_skus_for_one_key_the_higher_is_used(billing: GrpcBilling) -> None:
    """A second flex-start H100 Mega SKU in us-central1 at 5.0 $/h: 8 × 5.0 + the on-demand
    A3Plus vCPU and RAM (no DWS ones for the series)."""
    billing.skus.append(sku("TEST-MEGA-2", "Nvidia H100 Mega 80GB GPU attached to DWS Defined "
                            "Duration VMs running in Americas", "GPU", ["us-central1"], 5, 0))
    got = _prices(fetch_dws(client=billing.client, now=NOW))
    assert got[("a3-megagpu-8g", "us-central1", "flex_start")] == pytest.approx(
        8 * 5.0 + MEGA_OD_VM, rel=1e-9, abs=1e-6)


def test_the_on_demand_fallback_note_names_the_series_labels(billing: GrpcBilling) -> None:
    pull = fetch_dws(client=billing.client, now=NOW)
    (mega,) = [o for o in pull.offers if (o.instance_type, o.capacity_type)
               == ("a3-megagpu-8g", "block")]
    assert mega.note == (
        "calendar-mode reservation in 24-h units, 1 to 90 days: 208 vCPU × 0.026924 + 1872 GiB "
        "× 0.002344 + 8 × H100-MEGA 4.84112; no block vCPU/RAM SKU for series A3Plus/A3 Mega: "
        "on-demand vCPU and RAM (an upper bound)")


def test_a_mode_with_the_vcpu_sku_but_not_the_ram_sku_uses_the_on_demand_pair(
        billing: GrpcBilling) -> None:
    """A flex-start A3Plus Core SKU (0.5 $/vCPU-h) without its RAM SKU: the flex-start Mega
    machine is priced on the on-demand vCPU and RAM, not on half of each."""
    billing.skus.append(sku("TEST-MEGA-CORE", "DWS Defined Duration A3Plus Core running in "
                            "Americas", "CPU", ["us-central1"], 0, 500_000_000))
    got = _prices(fetch_dws(client=billing.client, now=NOW))
    assert got[("a3-megagpu-8g", "us-central1", "flex_start")] == pytest.approx(
        8 * 4.423936 + MEGA_OD_VM, rel=1e-9, abs=1e-6)


def test_an_excluded_region_does_not_stop_the_machines_other_modes(
        billing: GrpcBilling) -> None:
    """A calendar-mode Mega GPU SKU in us-east4, where the A3Plus series has an on-demand vCPU
    SKU but no RAM SKU (and no DWS ones): that (machine, mode, region) is excluded by name, and
    a3-megagpu-8g is still priced in us-central1 in both modes, after it in the order (block
    us-east4 < flex_start us-central1)."""
    billing.skus.append(sku("TEST-MEGA-EAST4", "Reserved Nvidia H100 80GB Mega GPU in Americas "
                            "in Calendar Mode", "GPU", ["us-east4"], 4, 900_000_000))
    billing.skus.append(sku("TEST-A3PLUS-CORE-EAST4", "A3Plus Instance Core running in "
                            "Virginia", "CPU", ["us-east4"], 0, 30_000_000))
    pull = fetch_dws(client=billing.client, now=NOW)
    assert "gcp a3-megagpu-8g us-east4 block: no vCPU/RAM SKU for series A3Plus/A3 Mega" in \
        pull.exclusions
    got = _prices(pull)
    assert ("a3-megagpu-8g", "us-east4", "block") not in got
    assert got[("a3-megagpu-8g", "us-central1", "block")] == pytest.approx(
        8 * 4.841121 + MEGA_OD_VM, rel=1e-9, abs=1e-6)
    assert got[("a3-megagpu-8g", "us-central1", "flex_start")] == pytest.approx(
        8 * 4.423936 + MEGA_OD_VM, rel=1e-9, abs=1e-6)


def test_the_default_budget_counts_the_time_requests_take(billing: GrpcBilling,
                                                          clock: Clock) -> None:
    """Each failing request takes 0.95 s (on the virtual clock): after the 10th failure 95 s
    of sleeps + 9.5 s of requests + the next 16-s sleep = 120.5 s > 120 s, so the pull stops
    after 9 sleeps (with a budget of 121 s it would sleep a 10th time)."""
    def slow(code: grpc.StatusCode) -> Any:
        def abort(context: Any) -> None:
            clock.now[0] += 0.95
            context.abort(code, "injected fault")
        return abort

    billing.hooks[1] = [slow(grpc.StatusCode.UNAVAILABLE)] * 50
    with pytest.raises(ProviderError) as err:
        fetch_dws(client=billing.client, now=NOW)
    assert clock == [1.0, 2.0, 4.0, 8.0] + [16.0] * 5
    assert str(err.value).startswith(f"GCP {WHAT} kept failing (ServiceUnavailable)")
