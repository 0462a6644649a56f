"""AWS adapter against a local HTTP server speaking the AWS JSON (Pricing) and EC2 query
protocols, through the real boto3 clients (serialisation, signing, pagination, retries).

Fixtures: ``tests/data/aws/`` (see SOURCE.md there for every number)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs
from xml.sax.saxutils import escape

import pytest
from local_server import Answer, LocalServer

from ptplan.core.errors import InputError, ProviderError
from ptplan.providers.aws import fetch_aws
from ptplan.providers.aws_prices import HOURS_PER_YEAR, parse_price_item

DATA = Path(__file__).parent / "data" / "aws"
PRICE_LIST: list[dict[str, Any]] = json.loads((DATA / "price_list.json").read_text())
EC2: dict[str, Any] = json.loads((DATA / "ec2.json").read_text())
SECRET = "fake-secret-key-for-tests-ZZZ"
TYPES = ["g6e.xlarge", "p4d.24xlarge", "p5.48xlarge"]


class FakeAWS:
    """Pricing GetProducts (JSON 1.1, 1 item per page, NextToken) and EC2
    DescribeSpotPriceHistory / DescribeAvailabilityZones (query protocol, XML).

    Fault injection: ``throttle`` (next N Pricing calls answer ThrottlingException),
    ``fail_token`` (a Pricing call with this NextToken fails: InvalidNextTokenException),
    ``malformed`` (PriceList strings that are not JSON)."""

    page_size = 1

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.throttle = 0
        self.fail_token: str | None = None
        self.malformed = False
        self.items: list[dict[str, Any]] = PRICE_LIST
        self.local = LocalServer(self._serve)
        self.url = self.local.url

    def _serve(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Answer:
        target = headers.get("x-amz-target", "")
        auth = headers.get("authorization", "")
        region = re.search(r"Credential=[^/]+/\d+/([^/]+)/", auth)
        self.calls.append({"target": target, "auth": auth,
                           "region": region.group(1) if region else None})
        if target == "AWSPriceListService.GetProducts":
            status, ctype, out = self.get_products(json.loads(body))
        else:
            form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
            self.calls[-1]["form"] = form
            status, ctype, out = self.ec2(form, region.group(1) if region else "")
        return status, {"Content-Type": ctype,
                        "x-amzn-RequestId": "00000000-0000-0000-0000-000000000000"}, out

    def close(self) -> None:
        self.local.close()

    def get_products(self, req: dict[str, Any]) -> tuple[int, str, str]:
        ctype = "application/x-amz-json-1.1"
        self.calls[-1]["request"] = req
        if self.throttle > 0:
            self.throttle -= 1
            return 400, ctype, json.dumps({"__type": "ThrottlingException",
                                           "message": "Rate exceeded"})
        token = req.get("NextToken")
        if token is not None and token == self.fail_token:
            return 400, ctype, json.dumps({"__type": "InvalidNextTokenException",
                                           "message": "The NextToken is invalid."})
        filters = {f["Field"]: f["Value"] for f in req.get("Filters", [])}
        items = [i for i in self.items
                 if all(i["product"]["attributes"].get(k) == v for k, v in filters.items())]
        start = int(token or 0)
        page = items[start:start + self.page_size]
        out: dict[str, Any] = {"FormatVersion": "aws_v1",
                               "PriceList": ["{not json" if self.malformed else json.dumps(i)
                                             for i in page]}
        if start + self.page_size < len(items):
            out["NextToken"] = str(start + self.page_size)
        return 200, ctype, json.dumps(out)

    def ec2(self, form: dict[str, str], region: str) -> tuple[int, str, str]:
        ns = "http://ec2.amazonaws.com/doc/2016-11-15/"
        action = form.get("Action")
        if action == "DescribeAvailabilityZones":
            items = "".join(
                f"<item><zoneName>{z['ZoneName']}</zoneName><zoneId>{z['ZoneId']}</zoneId>"
                f"<regionName>{z['RegionName']}</regionName><zoneState>available</zoneState>"
                "</item>" for z in EC2["availability_zones"].get(region, []))
            return 200, "text/xml", (f'<DescribeAvailabilityZonesResponse xmlns="{ns}">'
                                     f"<requestId>r</requestId><availabilityZoneInfo>{items}"
                                     "</availabilityZoneInfo></DescribeAvailabilityZonesResponse>")
        if action == "DescribeSpotPriceHistory":
            types = {v for k, v in form.items() if k.startswith("InstanceType.")}
            rows = [r for r in EC2["spot_price_history"].get(region, [])
                    if r["InstanceType"] in types]
            start = int(form.get("NextToken") or 0)
            page, more = rows[start:start + 4], start + 4 < len(rows)
            items = "".join(
                "<item>" + f"<availabilityZone>{r['AvailabilityZone']}</availabilityZone>"
                + (f"<availabilityZoneId>{r['AvailabilityZoneId']}</availabilityZoneId>"
                   if "AvailabilityZoneId" in r else "")
                + f"<instanceType>{r['InstanceType']}</instanceType>"
                f"<productDescription>{escape(r['ProductDescription'])}</productDescription>"
                f"<spotPrice>{r['SpotPrice']}</spotPrice><timestamp>{r['Timestamp']}</timestamp>"
                "</item>" for r in page)
            token = f"<nextToken>{start + 4}</nextToken>" if more else "<nextToken/>"
            return 200, "text/xml", (f'<DescribeSpotPriceHistoryResponse xmlns="{ns}">'
                                     f"<requestId>r</requestId><spotPriceHistorySet>{items}"
                                     f"</spotPriceHistorySet>{token}"
                                     "</DescribeSpotPriceHistoryResponse>")
        return 400, "text/xml", (f"<Response><Errors><Error><Code>InvalidAction</Code><Message>"
                                 f"{action}</Message></Error></Errors></Response>")


def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, credentials: bool = True) -> None:
    """Isolate botocore from the machine: no profiles, no IMDS; fake keys when asked."""
    for var in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_ROLE_ARN",
                "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_ACCESS_KEY_ID",
                "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "2")
    if credentials:
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAFAKEFORTESTS0000")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)


@pytest.fixture
def fake_aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeAWS]:
    aws_env(monkeypatch, tmp_path)
    fake = FakeAWS()
    yield fake
    fake.close()


def _od(pull: Any, itype: str, region: str) -> float:
    (o,) = [o for o in pull.offers if o.instance_type == itype and o.region == region
            and o.capacity_type == "on_demand"]
    return float(o.usd_per_hour)


def test_pull_parses_on_demand_reserved_and_spot(fake_aws: FakeAWS) -> None:
    seen: list[tuple[str, int, int | None]] = []
    pull = fetch_aws(["us-east-1", "us-west-2"], TYPES, endpoint=fake_aws.url,
                     progress=lambda label, done, total: seen.append((label, done, total)))
    assert pull.provider == "aws" and pull.regions == ("us-east-1", "us-west-2")
    assert _od(pull, "p5.48xlarge", "us-east-1") == 55.04  # capacity block (31.464) skipped
    assert _od(pull, "p4d.24xlarge", "us-west-2") == 21.95764
    p5 = [o for o in pull.offers if o.instance_type == "p5.48xlarge"]
    assert {(o.gpu, o.gpus_per_node, o.vcpus, o.memory_gib) for o in p5} == {
        ("H100", 8, 192.0, 2048.0)}
    p4d = next(o for o in pull.offers if o.instance_type == "p4d.24xlarge")
    assert p4d.gpu == "A100-40GB"  # family table + gpuMemory 320 GB / 8 = 40 GB checked
    # spot: latest record per zone, keyed by zone ID (mapped from names in us-east-1)
    spot = {(o.region, o.zone, o.instance_type): o.usd_per_hour for o in pull.offers
            if o.capacity_type == "spot"}
    assert spot[("us-east-1", "use1-az6", "p5.48xlarge")] == 17.6289  # not the older 21.4402
    assert spot[("us-west-2", "usw2-az3", "g6e.xlarge")] == 0.6538
    assert len(spot) == 10 + 8  # zones per region in ec2.json
    # 12 reserved options per (type, region): 2 terms x 2 classes x 3 purchase options
    assert len(pull.reserved_rates) == 3 * 2 * 12
    rate = next(r for r in pull.reserved_rates if r.region == "us-east-1"
                and r.instance_type == "p5.48xlarge" and r.term_years == 1
                and r.offering_class == "standard" and r.purchase_option == "All Upfront")
    assert rate.recurring_usd_per_hour == 0.0
    assert rate.upfront_usd == pytest.approx(55.04 * 0.65 * 8760, abs=0.01)
    assert rate.usd_per_hour == pytest.approx(35.776, abs=1e-6)
    for r in pull.reserved_rates:  # effective = hourly + upfront / term hours, for every option
        assert r.recurring_usd_per_hour is not None and not r.assumption
        assert r.usd_per_hour == pytest.approx(
            r.recurring_usd_per_hour + r.upfront_usd / (r.term_years * HOURS_PER_YEAR), abs=1e-6)
    partial = next(r for r in pull.reserved_rates if r.region == "us-west-2"
                   and r.instance_type == "g6e.xlarge" and r.term_years == 3
                   and r.offering_class == "convertible" and r.purchase_option == "Partial Upfront")
    assert partial.upfront_usd > 0 and partial.recurring_usd_per_hour > 0
    # the requests: TERM_MATCH filters as documented, pages followed, spot per region
    pricing = [c for c in fake_aws.calls if c["target"].endswith("GetProducts")]
    first = {f["Field"]: f["Value"] for f in pricing[0]["request"]["Filters"]}
    assert first == {"instanceType": "g6e.xlarge", "regionCode": "us-east-1",
                     "operatingSystem": "Linux", "tenancy": "Shared", "preInstalledSw": "NA",
                     "capacitystatus": "Used"}
    assert any(c["request"].get("NextToken") for c in pricing)  # p5 us-east-1 has 2 pages
    assert all(c["region"] == "us-east-1" for c in pricing)
    spot_calls = [c for c in fake_aws.calls if c.get("form", {}).get("Action")
                  == "DescribeSpotPriceHistory"]
    assert {c["region"] for c in spot_calls} == {"us-east-1", "us-west-2"}
    assert spot_calls[0]["form"]["ProductDescription.1"] == "Linux/UNIX"
    assert seen[-1][1:] == (8, 8)  # 6 price queries + 2 spot regions
    assert SECRET not in json.dumps(fake_aws.calls)  # signed, never sent


def test_pull_without_regions_uses_every_region_returned(fake_aws: FakeAWS) -> None:
    pull = fetch_aws([], ["p5.48xlarge"], endpoint=fake_aws.url)
    assert pull.regions == ()
    assert {o.region for o in pull.offers} == {"us-east-1", "us-west-2"}
    pricing = [c for c in fake_aws.calls if c["target"].endswith("GetProducts")]
    assert all("regionCode" not in {f["Field"] for f in c["request"]["Filters"]}
               for c in pricing)


def test_throttling_is_retried_with_backoff(fake_aws: FakeAWS) -> None:
    fake_aws.throttle = 1
    pull = fetch_aws(["us-east-1"], ["g6e.xlarge"], endpoint=fake_aws.url)
    assert _od(pull, "g6e.xlarge", "us-east-1") == 1.861
    pricing = [c for c in fake_aws.calls if c["target"].endswith("GetProducts")]
    assert len(pricing) == 2  # the throttled call, then its retry


def test_throttling_after_retries_is_a_provider_error(fake_aws: FakeAWS) -> None:
    fake_aws.throttle = 99
    with pytest.raises(ProviderError, match=r"throttled .*after 2 attempts") as err:
        fetch_aws(["us-east-1"], ["g6e.xlarge"], endpoint=fake_aws.url)
    assert "cache is unchanged" in str(err.value)
    assert len([c for c in fake_aws.calls if c["target"].endswith("GetProducts")]) == 2


def test_page_failing_mid_pull(fake_aws: FakeAWS) -> None:
    fake_aws.fail_token = "1"  # page 2 of p5.48xlarge us-east-1
    with pytest.raises(ProviderError, match="InvalidNextTokenException"):
        fetch_aws(["us-east-1"], ["p5.48xlarge"], endpoint=fake_aws.url)


def test_malformed_price_item(fake_aws: FakeAWS) -> None:
    fake_aws.malformed = True
    with pytest.raises(ProviderError, match="malformed AWS price item: not a JSON string"):
        fetch_aws(["us-east-1"], ["g6e.xlarge"], endpoint=fake_aws.url)


def test_missing_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    aws_env(monkeypatch, tmp_path, credentials=False)
    fake = FakeAWS()
    try:
        with pytest.raises(ProviderError, match="no AWS credentials found"):
            fetch_aws(["us-east-1"], ["g6e.xlarge"], endpoint=fake.url)
        assert fake.calls == []
    finally:
        fake.close()


def test_bad_region_and_type_are_input_errors() -> None:
    with pytest.raises(InputError, match="--regions: 'us_east_1'"):
        fetch_aws(["us_east_1"])
    with pytest.raises(InputError, match=r"--instance-type: 'm5\.large'"):
        fetch_aws(["us-east-1"], ["m5.large"])


def _item(**changes: Any) -> dict[str, Any]:
    item = json.loads(json.dumps(next(i for i in PRICE_LIST
                                      if i["product"]["attributes"]["instanceType"]
                                      == "g6e.xlarge")))
    item["product"]["attributes"].update(changes)
    return item


def test_parse_item_checks_fields() -> None:
    exclusions: list[str] = []
    offer, rates, info = parse_price_item(json.dumps(_item()), "2026-12-01T00:00:00Z", exclusions)
    assert offer is not None and offer.gpu == "L40S" and offer.gpus_per_node == 1
    assert len(rates) == 12 and info is not None and not exclusions
    # gpuMemory that contradicts the family's GPU: excluded with the reason
    offer, rates, _ = parse_price_item(json.dumps(_item(gpuMemory="24 GB")), "x", exclusions)
    assert offer is None and rates == [] and "does not match L40S" in exclusions[-1]
    broken = _item()
    del broken["product"]["attributes"]["regionCode"]
    with pytest.raises(ProviderError, match=r"missing product\.attributes\.regionCode"):
        parse_price_item(json.dumps(broken), "x", [])
    bad_price = _item()
    term = next(iter(bad_price["terms"]["OnDemand"].values()))
    next(iter(term["priceDimensions"].values()))["pricePerUnit"]["USD"] = "n/a"
    with pytest.raises(ProviderError, match=r"terms\.OnDemand\.<term>\.priceDimensions\.<rate>"
                       r"\.pricePerUnit\.USD = 'n/a' is not a number"):
        parse_price_item(json.dumps(bad_price), "x", [])
    negative = _item()
    term = next(iter(negative["terms"]["Reserved"].values()))
    next(iter(term["priceDimensions"].values()))["pricePerUnit"]["USD"] = "-1"
    with pytest.raises(ProviderError, match=r"pricePerUnit\.USD = '-1' \(.*greater than or equal"):
        parse_price_item(json.dumps(negative), "x", [])
    lease = _item()
    next(iter(lease["terms"]["Reserved"].values()))["termAttributes"]["LeaseContractLength"] = "5yr"
    with pytest.raises(ProviderError, match=r"LeaseContractLength '5yr' \(expected 1yr or 3yr\)"):
        parse_price_item(json.dumps(lease), "x", [])
    with pytest.raises(ProviderError, match=r"product\.attributes\.vcpu = 'many' is not a number"):
        parse_price_item(json.dumps(_item(vcpu="many")), "x", [])
    # fields AWS adds are ignored; an item outside the filters is skipped before its terms
    offer, _, _ = parse_price_item(json.dumps({**_item(newField="x"), "newTop": 1}), "x", [])
    assert offer is not None
    assert parse_price_item(json.dumps({"product": _item(tenancy="Dedicated")["product"]}), "x",
                            []) == (None, [], None)


def test_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def no_boto(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "boto3" or name.startswith("botocore"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_boto)
    with pytest.raises(ProviderError, match=r"pip install 'ptplan\[aws\]'"):
        fetch_aws(["us-east-1"], ["g6e.xlarge"], endpoint="http://127.0.0.1:9")


def test_no_credentials_in_environment_leak(fake_aws: FakeAWS) -> None:
    assert os.environ["AWS_SECRET_ACCESS_KEY"] == SECRET
    pull = fetch_aws(["us-west-2"], ["g6e.xlarge"], endpoint=fake_aws.url)
    assert SECRET not in repr(pull)
