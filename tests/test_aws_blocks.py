"""Live capacity block offerings (``providers/aws_blocks.py``, ``ptplan prices blocks``) against
a local HTTP server that speaks the EC2 query protocol (``Action=DescribeCapacityBlockOfferings``,
XML, ``nextToken`` pages), through the real boto3 client.

Fixture numbers: the fee is 31.464 $ per instance-hour × instances × hours, the rate of the
``marketoption: CapacityBlock`` p5.48xlarge item of tests/data/aws/price_list.json (see
tests/data/aws/SOURCE.md); one offering in another zone costs 10 % more. Shapes: botocore's
EC2 service model (2016-11-15).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs

import pytest
from local_server import Answer, LocalServer
from test_aws import aws_env
from typer.testing import CliRunner

from ptplan.cli.app import app
from ptplan.core.errors import InputError, ProviderError
from ptplan.providers.aws_blocks import check_duration, fetch_block_offerings

runner = CliRunner()
RATE = 31.464
NS = "http://ec2.amazonaws.com/doc/2016-11-15/"


class FakeEC2Blocks:
    """Offerings for the requested type, count and duration: two zones, three start days (the
    first on or after ``StartDateRange``), in pages of 2; ``throttle`` N calls first."""

    def __init__(self) -> None:
        self.calls: list[dict[str, str]] = []
        self.throttle = 0
        self.bad_fee = False
        self.local = LocalServer(self._serve)
        self.url = self.local.url

    def _serve(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Answer:
        form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
        self.calls.append(form)
        status, out = self.answer(form)
        return status, {"Content-Type": "text/xml"}, out

    def close(self) -> None:
        self.local.close()

    def answer(self, form: dict[str, str]) -> tuple[int, str]:
        if self.throttle > 0:
            self.throttle -= 1
            return 503, ("<Response><Errors><Error><Code>RequestLimitExceeded</Code><Message>"
                         "Request limit exceeded.</Message></Error></Errors></Response>")
        if form.get("Action") != "DescribeCapacityBlockOfferings":
            return 400, "<Response><Errors><Error><Code>InvalidAction</Code></Error></Errors>"
        itype, count = form["InstanceType"], int(form["InstanceCount"])
        hours = int(form["CapacityDurationHours"])
        first = dt.datetime.fromisoformat(form.get("StartDateRange", "2026-12-05T00:00:00Z")
                                          .replace("Z", "+00:00")) + dt.timedelta(hours=11.5)
        offers = []
        for day in range(3):
            for zone, markup in (("us-east-1a", 1.0), ("us-east-1b", 1.1)):
                start = first + dt.timedelta(days=day)
                fee = RATE * markup * count * hours
                offers.append(
                    f"<item><capacityBlockOfferingId>cbr-{day}{zone[-1]}0000000000000"
                    f"</capacityBlockOfferingId><instanceType>{itype}</instanceType>"
                    f"<availabilityZone>{zone}</availabilityZone>"
                    f"<instanceCount>{count}</instanceCount>"
                    f"<startDate>{start:%Y-%m-%dT%H:%M:%S.000Z}</startDate>"
                    f"<endDate>{start + dt.timedelta(hours=hours):%Y-%m-%dT%H:%M:%S.000Z}"
                    f"</endDate><capacityBlockDurationHours>{hours}</capacityBlockDurationHours>"
                    f"<upfrontFee>{'free' if self.bad_fee else f'{fee:.2f}'}</upfrontFee>"
                    "<currencyCode>USD</currencyCode><tenancy>default</tenancy></item>")
        start = int(form.get("NextToken") or 0)
        page, more = offers[start:start + 2], start + 2 < len(offers)
        token = f"<nextToken>{start + 2}</nextToken>" if more else ""
        return 200, (f'<DescribeCapacityBlockOfferingsResponse xmlns="{NS}"><requestId>r'
                     f"</requestId><capacityBlockOfferingSet>{''.join(page)}"
                     f"</capacityBlockOfferingSet>{token}"
                     "</DescribeCapacityBlockOfferingsResponse>")


@pytest.fixture
def fake_blocks(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeEC2Blocks]:
    aws_env(monkeypatch, tmp_path)
    monkeypatch.setenv("PTPLAN_CACHE", str(tmp_path / "prices.sqlite"))
    fake = FakeEC2Blocks()
    yield fake
    fake.close()


def test_offerings_fetched_paginated_and_sorted(fake_blocks: FakeEC2Blocks) -> None:
    data = fetch_block_offerings("us-east-1", "p5.48xlarge", 2, 240, dt.date(2026, 12, 10),
                                 endpoint=fake_blocks.url, today=dt.date(2026, 12, 3))
    offers = data["offerings"]
    assert len(offers) == 6 and len(fake_blocks.calls) == 3
    assert fake_blocks.calls[0]["StartDateRange"].startswith("2026-12-10T00:00:00")
    assert fake_blocks.calls[0]["CapacityDurationHours"] == "240"
    first = offers[0]
    assert first["zone"] == "us-east-1a" and first["start"] == "2026-12-10T11:30:00Z"
    assert first["end"] == "2026-12-20T11:30:00Z"
    assert first["upfront_fee_usd"] == f"{RATE * 2 * 240:.2f}"  # 15102.72
    assert first["usd_per_instance_hour"] == pytest.approx(RATE)
    fees = [float(o["upfront_fee_usd"]) for o in offers]
    assert fees == sorted(fees) and offers[-1]["zone"] == "us-east-1b"


@pytest.mark.parametrize("hours", [24, 240, 336, 504, 4368])
def test_lengths_aws_sells(hours: int) -> None:
    check_duration(hours)


@pytest.mark.parametrize("hours", [0, 23, 36, 360, 400, 4536])
def test_lengths_aws_does_not_sell(hours: int) -> None:
    with pytest.raises(InputError, match="is not a capacity block length"):
        check_duration(hours)


def test_throttling_retried_then_provider_error(fake_blocks: FakeEC2Blocks) -> None:
    fake_blocks.throttle = 1
    assert fetch_block_offerings("us-east-1", "p5.48xlarge", 1, 24,
                                 endpoint=fake_blocks.url)["offerings"]
    fake_blocks.throttle = 5
    with pytest.raises(ProviderError, match="throttled"):
        fetch_block_offerings("us-east-1", "p5.48xlarge", 1, 24, endpoint=fake_blocks.url)


def test_malformed_fee_is_a_provider_error(fake_blocks: FakeEC2Blocks) -> None:
    fake_blocks.bad_fee = True
    with pytest.raises(ProviderError, match=r"UpfrontFee = 'free' is not a number"):
        fetch_block_offerings("us-east-1", "p5.48xlarge", 1, 24, endpoint=fake_blocks.url)


def test_cli_json_and_table(fake_blocks: FakeEC2Blocks) -> None:
    args = ["prices", "blocks", "--region", "us-east-1", "--instance-type", "p5.48xlarge",
            "--count", "1", "--duration-hours", "168", "--endpoint", fake_blocks.url]
    res = runner.invoke(app, [*args, "--format", "json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["offerings"][0]["upfront_fee_usd"] == f"{RATE * 168:.2f}"
    res = runner.invoke(app, args)
    assert res.exit_code == 0 and "5,285.95" in res.stdout and "us-east-1a" in res.stdout


@pytest.mark.parametrize(("extra", "needle"), [
    (["--count", "65"], "--count: 65 instances"),
    (["--duration-hours", "100"], "--duration-hours: 100"),
    (["--start-after", "2099-01-01"], "more than 8 weeks after today"),
    (["--start-after", "soon"], "--start-after: 'soon' is not a date"),
    (["--provider", "azure"], "--provider: 'azure'"),  # gcp: tests/test_gcp_dws.py
])
def test_cli_bad_requests_exit_2(fake_blocks: FakeEC2Blocks, extra: list[str],
                                 needle: str) -> None:
    base = {"--region": "us-east-1", "--instance-type": "p5.48xlarge", "--count": "1",
            "--duration-hours": "24", "--endpoint": fake_blocks.url}
    for k, v in zip(extra[::2], extra[1::2], strict=True):
        base[k] = v
    res = runner.invoke(app, ["prices", "blocks", *[x for kv in base.items() for x in kv]])
    assert res.exit_code == 2, res.output
    assert needle in res.output and "Traceback" not in res.output
    assert len([ln for ln in res.stderr.splitlines() if ln.startswith("error: ")]) == 1
    assert fake_blocks.calls == []


def _block_rows(path: Path) -> list[tuple]:
    import sqlite3

    with sqlite3.connect(path) as con:
        return con.execute("SELECT provider, region, instance_type, usd_per_hour, "
                           "block_unit_hours, block_max_hours, block_counts, max_nodes "
                           "FROM block_offers ORDER BY instance_type").fetchall()


def test_cli_caches_the_cheapest_rate_per_type_and_a_fault_leaves_the_cache(
        fake_blocks: FakeEC2Blocks, tmp_path: Path) -> None:
    """The quote's cheapest fee per instance-hour becomes the type's block rate in the price
    cache, on the embedded row's terms (counts 1-64 in powers of two); a quote for another type
    keeps it, a new quote for the same type replaces it, and a malformed quote exits 3 with
    the file byte-identical."""
    cache = tmp_path / "prices.sqlite"
    args = ["prices", "blocks", "--region", "us-east-1", "--count", "2",
            "--endpoint", fake_blocks.url, "--format", "json"]
    res = runner.invoke(app, [*args, "--instance-type", "p5.48xlarge", "--duration-hours", "48"])
    assert res.exit_code == 0, res.output
    rate = round(float(f"{RATE * 2 * 48:.2f}") / 96, 6)  # the fee is quoted in cents
    assert json.loads(res.stdout)["cached"]["usd_per_hour"] == rate == 31.463958
    assert _block_rows(cache) == [("aws", "us-east-1", "p5.48xlarge", rate, 24.0, 336.0,
                                   "1 2 4 8 16 32 64", 64)]
    # a 3-week request: 168-h units up to 182 days, the embedded counts kept
    res = runner.invoke(app, [*args, "--instance-type", "p5.48xlarge",
                              "--duration-hours", "504"])
    assert res.exit_code == 0, res.output
    (row,) = _block_rows(cache)
    assert row[4:7] == (168.0, 4368.0, "1 2 4 8 16 32 64")
    before = cache.read_bytes()
    fake_blocks.bad_fee = True
    res = runner.invoke(app, [*args, "--instance-type", "p5.48xlarge", "--duration-hours", "48"])
    assert res.exit_code == 3 and cache.read_bytes() == before


def test_cached_rate_is_what_the_cache_catalog_plans_with(fake_blocks: FakeEC2Blocks,
                                                          tmp_path: Path) -> None:
    """Read back through the cache's loader: the live rate is the catalog's p5.48xlarge block
    offer in us-east-1 (over the embedded published rate), with its counts."""
    import sqlite3

    from ptplan.providers.cache_blocks import merge, offer_of, read_rows

    res = runner.invoke(app, ["prices", "blocks", "--region", "us-east-1", "--instance-type",
                              "p5.48xlarge", "--count", "1", "--duration-hours", "24",
                              "--endpoint", fake_blocks.url, "--format", "json"])
    assert res.exit_code == 0, res.output
    con = sqlite3.connect(tmp_path / "prices.sqlite")
    con.row_factory = sqlite3.Row
    cached = [offer_of(dict(r)) for r in read_rows(con)]
    con.close()
    from ptplan.providers.embedded import embedded_catalog
    merged = merge(cached, embedded_catalog().block_offers)
    (p5,) = [o for o in merged if (o.region, o.instance_type) == ("us-east-1", "p5.48xlarge")]
    assert p5.usd_per_hour == round(float(f"{RATE * 24:.2f}") / 24, 6) == 31.464167
    assert p5.block_counts == (1, 2, 4, 8, 16, 32, 64)
    assert "live offering cbr-0a" in p5.note
