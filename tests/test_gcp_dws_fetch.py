"""``providers/gcp_dws.fetch_dws`` against local servers that speak the Cloud Billing Catalog
protocols to the real ``google-cloud-billing`` client: gRPC (``google.cloud.billing.v1.CloudCatalog
/ListSkus``, the transport the client uses without ``--endpoint``; served here with the library's
own message types on an insecure local channel) and REST (the ``FakeBilling`` server of
test_gcp.py, the transport of a local ``--endpoint``).

Checked: the request as sent on every page (parent, currency, page size, page token, the 60-s
deadline), each page read once and reported to the progress callback, the retry policy (the
back-off 1, 2, 4, 8, 16, 16 s with the jitter pinned to its upper bound, the 120-s default and a
given ``retry_timeout_s``, which codes are retried), the faults as one line with nothing
returned, and the region filter. Fixtures: ``tests/data/gcp/skus.json`` + ``dws_skus.json``."""

from __future__ import annotations

import datetime as dt
import json
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from test_gcp import SKUS, FakeBilling

from ptplan.core.errors import ProviderError
from ptplan.providers.gcp import NO_SDK
from ptplan.providers.gcp_dws import SOURCE, fetch_dws

DATA = Path(__file__).parent / "data" / "gcp"
DWS: list[dict[str, Any]] = json.loads((DATA / "dws_skus.json").read_text())
WHAT = "list_skus (services/6F81-5844-456A)"
NOW = dt.datetime(2026, 12, 5, 8, 30, 15, tzinfo=dt.UTC)


class GrpcBilling:
    """``ListSkus`` over gRPC in pages of 4; ``faults[page]``: status codes answered first, one
    per call of that page (``hooks[page]``: callables given the call's context, first); every
    request and its remaining deadline recorded."""

    def __init__(self) -> None:
        from concurrent import futures

        from google.cloud import billing_v1

        self.skus = [billing_v1.Sku.from_json(json.dumps(s)) for s in [*SKUS, *DWS]]
        self.requests: list[Any] = []
        self.deadlines: list[float | None] = []
        self.faults: dict[int, list[grpc.StatusCode]] = {}
        self.hooks: dict[int, list[Callable[[Any], None]]] = {}

        def list_skus(request: Any, context: Any) -> Any:
            self.requests.append(request)
            self.deadlines.append(context.time_remaining())
            start = int(request.page_token or 0)
            hooks = self.hooks.get(start // 4 + 1)
            if hooks:
                hooks.pop(0)(context)
            codes = self.faults.get(start // 4 + 1)
            if codes:
                context.abort(codes.pop(0), "injected fault")
            more = start + 4 < len(self.skus)
            return billing_v1.ListSkusResponse(
                skus=self.skus[start:start + 4], next_page_token=str(start + 4) if more else "")

        handler = grpc.method_handlers_generic_handler(
            "google.cloud.billing.v1.CloudCatalog",
            {"ListSkus": grpc.unary_unary_rpc_method_handler(
                list_skus, request_deserializer=billing_v1.ListSkusRequest.deserialize,
                response_serializer=billing_v1.ListSkusResponse.serialize)})
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        self.server.add_generic_rpc_handlers((handler,))
        port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()
        from google.cloud.billing_v1.services.cloud_catalog.transports import (
            CloudCatalogGrpcTransport,
        )

        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        self.client = billing_v1.CloudCatalogClient(
            transport=CloudCatalogGrpcTransport(channel=self.channel))

    @property
    def pages(self) -> int:
        return -(-len(self.skus) // 4)

    def close(self) -> None:
        self.channel.close()
        self.server.stop(None)


class Clock(list[float]):
    """The sleeps made; ``now[0]``: the virtual time (a test may advance it)."""

    now = [0.0]


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """The retry's clock and sleeps made virtual (a sleep advances the clock), its jitter pinned
    to the upper bound: the sleeps are then the policy's delays themselves."""
    from google.api_core.retry import retry_base, retry_unary

    slept = Clock()
    slept.now = [1000.0]

    def sleep(s: float) -> None:
        slept.append(s)
        slept.now[0] += s

    fake = types.SimpleNamespace(monotonic=lambda: slept.now[0], sleep=sleep)
    monkeypatch.setattr(retry_unary, "time", fake)
    monkeypatch.setattr(retry_base, "time", fake)
    monkeypatch.setattr(retry_base, "random", types.SimpleNamespace(uniform=lambda lo, hi: hi))
    return slept


@pytest.fixture
def billing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[GrpcBilling]:
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "absent.json"))
    fake = GrpcBilling()
    yield fake
    fake.close()


def _prices(pull: Any) -> dict[tuple[str, str, str], float]:
    return {(o.instance_type, o.region, o.capacity_type): o.usd_per_hour for o in pull.offers}


def test_grpc_pull_requests_every_page_once_and_reports_progress(billing: GrpcBilling,
                                                                 clock: list[float]) -> None:
    seen: list[tuple[str, int, Any]] = []
    pull = fetch_dws(client=billing.client, now=NOW,
                     progress=lambda label, done, total: seen.append((label, done, total)))
    n = billing.pages
    assert n >= 10 and len(billing.requests) == n and clock == []
    assert seen == [(f"gcp SKU page {i}", i, None) for i in range(1, n + 1)]
    assert [r.page_token for r in billing.requests] == ["", *(str(4 * i) for i in range(1, n))]
    for r in billing.requests:
        assert (r.parent, r.currency_code, r.page_size) == (
            "services/6F81-5844-456A", "USD", 5000)
    assert all(d is not None and 55.0 < d < 60.5 for d in billing.deadlines)
    assert (pull.provider, pull.as_of, pull.source, pull.regions) == (
        "gcp", "2026-12-05T08:30:15Z", SOURCE, ())
    # a3-highgpu-8g flex-start: 8 × 4.200761 + 208 × 0.010934 + 1,872 × 0.000952 (the A3 SKUs)
    assert _prices(pull)[("a3-highgpu-8g", "us-central1", "flex_start")] == pytest.approx(
        8 * 4.200761 + 208 * 0.010934 + 1872 * 0.000952, rel=1e-9, abs=1e-6)


def test_backoff_doubles_from_one_second_to_sixteen(billing: GrpcBilling,
                                                    clock: list[float]) -> None:
    """Page 2 unavailable six times: sleeps 1, 2, 4, 8, 16, 16 s (31 + 16 = 47 s < 120 s),
    then it answers and the pull is complete."""
    billing.faults[2] = [grpc.StatusCode.UNAVAILABLE] * 6
    pull = fetch_dws(client=billing.client, now=NOW)
    assert clock == [1.0, 2.0, 4.0, 8.0, 16.0, 16.0]
    assert len(billing.requests) == billing.pages + 6
    assert _prices(pull) == _prices(fetch_dws(client=billing.client, now=NOW))


def test_the_default_retry_budget_is_120_seconds(billing: GrpcBilling,
                                                 clock: list[float]) -> None:
    """Always unavailable: 1 + 2 + 4 + 8 + 16 × 6 = 111 s of sleeps fit in 120 s, the next 16 s
    would end at 127 s: the pull stops after 10 sleeps, one line, no pull."""
    billing.faults[1] = [grpc.StatusCode.UNAVAILABLE] * 50
    with pytest.raises(ProviderError) as err:
        fetch_dws(client=billing.client, now=NOW)
    assert clock == [1.0, 2.0, 4.0, 8.0] + [16.0] * 6
    assert str(err.value) == (f"GCP {WHAT} kept failing (ServiceUnavailable) after retries with "
                              "backoff; retry later; the cache is unchanged")


def test_a_shorter_retry_budget(billing: GrpcBilling, clock: list[float]) -> None:
    """retry_timeout_s = 10: sleeps 1, 2, 4 (7 s); the next, 8 s, would end at 15 s."""
    billing.faults[3] = [grpc.StatusCode.UNAVAILABLE] * 6
    with pytest.raises(ProviderError, match="kept failing"):
        fetch_dws(client=billing.client, now=NOW, retry_timeout_s=10.0)
    assert clock == [1.0, 2.0, 4.0]


@pytest.mark.parametrize("code", [grpc.StatusCode.RESOURCE_EXHAUSTED,
                                  grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.INTERNAL,
                                  grpc.StatusCode.DEADLINE_EXCEEDED])
def test_retryable_codes_are_retried(billing: GrpcBilling, clock: list[float],
                                     code: grpc.StatusCode) -> None:
    billing.faults[2] = [code]
    assert fetch_dws(client=billing.client, now=NOW).offers
    assert clock == [1.0] and len(billing.requests) == billing.pages + 1


@pytest.mark.parametrize(("code", "text"), [
    (grpc.StatusCode.INVALID_ARGUMENT, "failed (400 InvalidArgument: injected fault)"),
    (grpc.StatusCode.NOT_FOUND, "failed (404 NotFound: injected fault)"),
    (grpc.StatusCode.PERMISSION_DENIED, "rejected the credentials"),
])
def test_other_codes_fail_at_once_in_one_line(billing: GrpcBilling, clock: list[float],
                                              code: grpc.StatusCode, text: str) -> None:
    billing.faults[2] = [code]
    with pytest.raises(ProviderError) as err:
        fetch_dws(client=billing.client, now=NOW)
    assert clock == [] and len(billing.requests) == 2
    assert str(err.value).startswith(f"GCP {text}" if "rejected" in text else f"GCP {WHAT} {text}")
    assert str(err.value).endswith("the cache is unchanged") and "\n" not in str(err.value)


def test_rest_429_is_retried(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                             clock: list[float]) -> None:
    """Over REST (a local --endpoint) a 429 is ``TooManyRequests``, not ``ResourceExhausted``:
    retried all the same; a 502 (``BadGateway``) is not."""
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "absent.json"))
    fake = FakeBilling()
    from google.cloud import billing_v1

    fake.skus += [billing_v1.Sku.from_json(json.dumps(s)) for s in DWS]
    try:
        fake.status, fake.times = {2: 429}, {2: 1}
        assert fetch_dws(endpoint=fake.url, now=NOW).offers and clock == [1.0]
        assert all("pageSize=5000" in q and "currencyCode=USD" in q for q in fake.requests)
        fake.status, fake.times = {2: 502}, {2: 1}
        with pytest.raises(ProviderError, match=r"failed \(502 BadGateway"):
            fetch_dws(endpoint=fake.url, now=NOW)
        assert clock == [1.0]
    finally:
        fake.close()


def _east4_h100() -> Any:
    """A flex-start H100 GPU SKU in us-east4 at 4.5 $/h (written here; the A3 vCPU and RAM DWS
    SKUs of the fixture cover us-central1 and us-east4)."""
    from google.cloud import billing_v1

    sku = json.loads(json.dumps(DWS[0]))
    sku.update(skuId="TEST-EAST4-H100", serviceRegions=["us-east4"],
               description="Nvidia H100 80GB GPU attached to DWS Defined Duration VMs running "
                           "in Virginia")
    sku["pricingInfo"][0]["pricingExpression"]["tieredRates"][0]["unitPrice"].update(
        units="4", nanos=500_000_000)
    return billing_v1.Sku.from_json(json.dumps(sku))


def test_region_filter_keeps_only_the_regions_asked(billing: GrpcBilling) -> None:
    """With an H100 SKU in us-east4 the A3 machines are priced in both regions; asking for one
    region keeps that region's SKUs only: us-east4's a3-highgpu-8g is 8 × 4.5 + 208 × 0.010934
    + 1,872 × 0.000952 $/h, and no machine of us-central1 appears."""
    billing.skus.append(_east4_h100())
    everywhere = _prices(fetch_dws(client=billing.client, now=NOW))
    assert {k[1] for k in everywhere} == {"us-central1", "us-east4"}
    east = fetch_dws(["us-east4"], client=billing.client, now=NOW)
    assert east.regions == ("us-east4",)
    assert _prices(east) == {k: v for k, v in everywhere.items() if k[1] == "us-east4"}
    assert _prices(east)[("a3-highgpu-8g", "us-east4", "flex_start")] == pytest.approx(
        8 * 4.5 + 208 * 0.010934 + 1872 * 0.000952, rel=1e-9, abs=1e-6)
    central = fetch_dws(["us-central1"], client=billing.client, now=NOW)
    assert _prices(central) == {k: v for k, v in everywhere.items() if k[1] == "us-central1"}
    with pytest.raises(ProviderError, match="for asia-south1; check --region"):
        fetch_dws(["asia-south1"], client=billing.client, now=NOW)


def test_without_the_sdk_one_line(billing: GrpcBilling, monkeypatch: pytest.MonkeyPatch) -> None:
    import google.cloud

    monkeypatch.setitem(sys.modules, "google.cloud.billing_v1", None)
    monkeypatch.delattr(google.cloud, "billing_v1")
    with pytest.raises(ProviderError) as err:
        fetch_dws(client=billing.client, now=NOW)
    assert str(err.value) == NO_SDK and billing.requests == []
