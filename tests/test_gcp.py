"""GCP adapter against a local REST server serving ``ListSkus`` pages with the library's own
message types (``billing_v1.ListSkusResponse.to_json``), through the real
``CloudCatalogClient`` (REST transport, anonymous credentials on 127.0.0.1).

Fixtures: ``tests/data/gcp/`` (see SOURCE.md there for every number)."""

from __future__ import annotations

import csv
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from ptplan.core.errors import InputError, ProviderError
from ptplan.providers.gcp import fetch_gcp
from ptplan.providers.gcp_machines import MACHINES
from ptplan.providers.gcp_skus import classify, read_price

DATA = Path(__file__).parent / "data" / "gcp"
SKUS: list[dict[str, Any]] = json.loads((DATA / "skus.json").read_text())


class FakeBilling:
    """``GET /v1/services/{id}/skus`` in pages of ``page_size``; fault injection: ``status``
    maps a page number to an HTTP status answered ``times[page]`` times (default: always)."""

    page_size = 4

    def __init__(self) -> None:
        from google.cloud import billing_v1

        self.requests: list[str] = []
        self.status: dict[int, int] = {}
        self.times: dict[int, int] = {}
        self.skus = [billing_v1.Sku.from_json(json.dumps(s)) for s in SKUS]
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                fake.requests.append(self.path)
                query = dict(p.split("=", 1) for p in self.path.split("?", 1)[1].split("&"))
                start = int(query.get("pageToken", "0"))
                page = start // fake.page_size + 1
                if page in fake.status and fake.times.get(page, 1) > 0:
                    if page in fake.times:
                        fake.times[page] -= 1
                    code = fake.status[page]
                    body = json.dumps({"error": {"code": code, "message": "injected fault",
                                                 "status": "UNAVAILABLE"}}).encode()
                    self.send_response(code)
                else:
                    chunk = fake.skus[start:start + fake.page_size]
                    more = start + fake.page_size < len(fake.skus)
                    resp = billing_v1.ListSkusResponse(
                        skus=chunk, next_page_token=str(start + fake.page_size) if more else "")
                    body = billing_v1.ListSkusResponse.to_json(resp).encode()
                    self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    @property
    def pages(self) -> int:
        return -(-len(self.skus) // self.page_size)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake_gcp(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeBilling]:
    # no ADC on this machine may be consulted: the local endpoint must use anonymous credentials
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "absent.json"))
    fake = FakeBilling()
    yield fake
    fake.close()


def _offer(pull: Any, itype: str, region: str, capacity: str) -> Any:
    (o,) = [o for o in pull.offers if (o.instance_type, o.region, o.capacity_type)
            == (itype, region, capacity)]
    return o


def test_pull_builds_machine_prices_over_pages(fake_gcp: FakeBilling) -> None:
    pages: list[int] = []
    pull = fetch_gcp(endpoint=fake_gcp.url, progress=lambda label, done, total: pages.append(done))
    assert pages == list(range(1, fake_gcp.pages + 1)) and fake_gcp.pages >= 7
    assert all("currencyCode=USD" in r and r.startswith("/v1/services/6F81-5844-456A/skus")
               for r in fake_gcp.requests)
    a3 = _offer(pull, "a3-highgpu-8g", "us-central1", "on_demand")
    assert a3.usd_per_hour == pytest.approx(208 * 0.03222 + 1872 * 0.002817 + 8 * 11.06, abs=1e-6)
    assert (a3.gpu, a3.gpus_per_node, a3.zone) == ("H100", 8, "")
    east = _offer(pull, "a3-highgpu-8g", "us-east4", "on_demand")
    assert east.usd_per_hour == pytest.approx(208 * 0.03222 + 1872 * 0.002817 + 8 * 9.79655,
                                              abs=1e-6)
    spot = _offer(pull, "a3-highgpu-1g", "us-central1", "spot")
    assert spot.usd_per_hour == pytest.approx(0.3 * (26 * 0.03222 + 234 * 0.002817 + 11.06),
                                              abs=1e-6)
    assert spot.interruptions_per_hour and spot.max_nodes == 8 and "assumed" in spot.note
    a2 = _offer(pull, "a2-highgpu-1g", "us-central1", "on_demand")
    assert a2.usd_per_hour == pytest.approx(0.73948 + 2.93391, abs=1e-4)  # = the embedded rows
    assert a2.gpu == "A100-40GB"
    b200 = _offer(pull, "a4-highgpu-8g", "us-central1", "on_demand")
    assert b200.usd_per_hour == pytest.approx(8 * 16.11) and "slice" in b200.note
    # commitments: A3 only (A2 has no commit SKUs), 1y and 3y, both regions
    assert {(r.instance_type, r.region, r.term_years) for r in pull.reserved_rates
            if r.instance_type == "a3-highgpu-8g"} == {
        ("a3-highgpu-8g", reg, y) for reg in ("us-central1", "us-east4") for y in (1, 3)}
    assert not any(r.instance_type.startswith("a2") for r in pull.reserved_rates)
    cud = next(r for r in pull.reserved_rates if r.instance_type == "a3-highgpu-8g"
               and r.region == "us-central1" and r.term_years == 3)
    assert cud.usd_per_hour == pytest.approx(0.45 * a3.usd_per_hour, abs=1e-5)
    assert (cud.offering_class, cud.purchase_option, cud.upfront_usd) == (
        "resource-cud", "No Upfront", 0.0)
    # A3 Mega: GPU SKU present, VM SKUs absent -> excluded with the reason, never priced partly
    assert not any(o.instance_type == "a3-megagpu-8g" for o in pull.offers)
    assert any("a3-megagpu-8g us-central1: no OnDemand vCPU and RAM SKU" in e
               for e in pull.exclusions)
    # noise ignored: no T4, no G2 machines, no custom N2 cores. (Changed deliberately for
    # issue #25: the N2 core SKU used to be noise here; CPU pools now need N2/C3 machine types,
    # so it prices them: test_pull_prices_cpu_machine_types.)
    assert {o.gpu for o in pull.offers if o.gpus_per_node} == {"H100", "A100-40GB", "B200"}
    assert {o.instance_type[:2] for o in pull.offers if not o.gpus_per_node} == {"n2", "c3"}


def test_pull_prices_cpu_machine_types(fake_gcp: FakeBilling) -> None:
    """N2 and C3 machine types from their core and RAM SKUs: on-demand prices equal the
    embedded list prices of providers/data/cpu_vms.csv (same rates); spot from the Preemptible
    SKUs; a region with the core SKU but no RAM SKU (N2 in us-east4) is excluded, and a series
    without spot SKUs (C3) gets no spot offer."""
    pull = fetch_gcp(endpoint=fake_gcp.url)
    n2 = _offer(pull, "n2-standard-8", "us-central1", "on_demand")
    assert n2.usd_per_hour == pytest.approx(8 * 0.031611 + 32 * 0.004237, abs=1e-6)  # 0.388472
    assert (n2.gpu, n2.gpus_per_node, n2.vcpus, n2.memory_gib) == ("none", 0, 8.0, 32.0)
    spot = _offer(pull, "n2-highcpu-32", "us-central1", "spot")
    assert spot.usd_per_hour == pytest.approx(32 * 0.0094833 + 32 * 0.0012711, abs=1e-6)
    assert spot.interruptions_per_hour and spot.max_nodes is None
    c3 = _offer(pull, "c3-standard-44", "us-central1", "on_demand")
    assert c3.usd_per_hour == pytest.approx(44 * 0.03398 + 176 * 0.00456, abs=1e-6)  # 2.29768
    assert not any(o.instance_type.startswith("c3") and o.capacity_type == "spot"
                   for o in pull.offers)
    assert not any(o.instance_type.startswith("n2") and o.region == "us-east4"
                   for o in pull.offers)
    assert "gcp n2-standard-8 us-east4: no OnDemand RAM SKU for series N2" in pull.exclusions
    rows = list(csv.DictReader((Path(__file__).parents[1] / "providers" / "data" /
                                "cpu_vms.csv").read_text().splitlines()))
    embedded = [r for r in rows if r["provider"] == "gcp" and r["region"] == "us-central1"]
    assert len(embedded) == 5
    for r in embedded:
        o = _offer(pull, r["instance_type"], "us-central1", "on_demand")
        assert o.usd_per_hour == pytest.approx(float(r["usd_per_hour"]), abs=1e-6), r


def test_regions_filter(fake_gcp: FakeBilling) -> None:
    pull = fetch_gcp(["us-east4"], endpoint=fake_gcp.url)
    assert pull.regions == ("us-east4",)
    assert {o.region for o in pull.offers} == {"us-east4"}
    with pytest.raises(InputError, match="--regions: 'US-EAST4'"):
        fetch_gcp(["US-EAST4"], endpoint=fake_gcp.url)


def test_transient_429_is_retried(fake_gcp: FakeBilling) -> None:
    fake_gcp.status, fake_gcp.times = {3: 429}, {3: 1}
    pull = fetch_gcp(endpoint=fake_gcp.url)
    assert pull.offers
    assert len(fake_gcp.requests) == fake_gcp.pages + 1


def test_throttling_after_retries(fake_gcp: FakeBilling) -> None:
    fake_gcp.status = {2: 429}
    with pytest.raises(ProviderError, match=r"kept failing \(TooManyRequests\) after retries"):
        fetch_gcp(endpoint=fake_gcp.url, retry_timeout_s=1.5)


def test_page_failing_mid_pull(fake_gcp: FakeBilling) -> None:
    fake_gcp.status = {3: 403}
    with pytest.raises(ProviderError, match="rejected the credentials") as err:
        fetch_gcp(endpoint=fake_gcp.url)
    assert "cache is unchanged" in str(err.value)


def test_missing_credentials_without_local_endpoint(monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    import google.auth

    def no_adc(*args: Any, **kwargs: Any) -> Any:
        from google.auth.exceptions import DefaultCredentialsError

        raise DefaultCredentialsError("Your default credentials were not found.")

    monkeypatch.setattr(google.auth, "default", no_adc)
    with pytest.raises(ProviderError, match="no GCP credentials found by Application Default"):
        fetch_gcp()


def test_malformed_sku(fake_gcp: FakeBilling) -> None:
    from google.cloud import billing_v1

    bad = billing_v1.Sku.from_json(json.dumps(SKUS[0]))
    del bad.pricing_info[:]
    fake_gcp.skus.insert(5, bad)
    with pytest.raises(ProviderError, match=r"malformed GCP SKU .*no pricing_info"):
        fetch_gcp(endpoint=fake_gcp.url)



def test_sku_models_check_types_and_ignore_new_fields() -> None:
    from google.cloud import billing_v1

    sku = billing_v1.Sku.from_json(json.dumps(SKUS[0]))
    as_dict = {**billing_v1.Sku.to_dict(sku), "someNewField": {"x": 1}}
    assert read_price(sku) == read_price(as_dict) == (pytest.approx(0.03222), "h")
    assert classify(as_dict) == ("cpu", "A3", "OnDemand")
    sku.pricing_info[0].pricing_expression.tiered_rates[0].unit_price.currency_code = "EUR"
    with pytest.raises(ProviderError, match=r"currency 'EUR', expected USD"):
        read_price(sku)
    as_dict["pricing_info"][0]["pricing_expression"]["tiered_rates"] = []
    with pytest.raises(ProviderError, match=r"BEEF-17E9-9E37 .*: no tiered_rates"):
        read_price(as_dict)
    with pytest.raises(ProviderError, match=r"category is not an object"):
        classify({"sku_id": "X", "category": "Compute"})


def test_classify_descriptions() -> None:
    from google.cloud import billing_v1

    def sku(desc: str, group: str, usage: str = "OnDemand") -> Any:
        return billing_v1.Sku(description=desc, category=billing_v1.Category(
            resource_family="Compute", resource_group=group, usage_type=usage))

    assert classify(sku("Spot Preemptible A3Plus Instance Ram running in Tokyo", "RAM",
                        "Preemptible")) == ("ram", "A3Plus", "Preemptible")
    assert classify(sku("Commitment v1: A2 Cpu in APAC for 1 Year", "CPU", "Commit1Yr")) == (
        "cpu", "A2", "Commit1Yr")
    assert classify(sku("Nvidia H100 80GB Mega GPU attached to Spot Preemptible VMs running in "
                        "Tokyo", "GPU", "Preemptible")) == ("gpu", "H100-MEGA", "Preemptible")
    assert classify(sku("H200 141GB GPU running in Netherlands", "GPU")) == ("gpu", "H200",
                                                                              "OnDemand")
    assert classify(sku("Nvidia Tesla A100 80GB GPU running in Americas", "GPU")) == (
        "gpu", "A100-80GB", "OnDemand")
    assert classify(sku("Nvidia L4 GPU attached to Sole Tenancy VMs running in Americas",
                        "GPU")) is None
    assert classify(sku("G2 Custom Instance Core running in Americas", "CPU")) is None


def test_machine_shapes_match_embedded_snapshot() -> None:
    rows = csv.DictReader((Path(__file__).parent.parent / "providers" / "data"
                           / "gcp_gpu_vms.csv").read_text().splitlines())
    shapes = {r["InstanceType"]: (float(r["vCPUs"]), float(r["MemoryGiB"])) for r in rows}
    for itype, m in MACHINES.items():
        assert shapes[itype] == (m.vcpus, m.memory_gib), itype
