"""``providers/aws_blocks.fetch_block_offerings`` against a local server that speaks the EC2
query protocol (``Action=DescribeCapacityBlockOfferings``, XML, ``nextToken`` pages; botocore's
EC2 service model 2016-11-15) through the real boto3 client: the request as sent (form fields,
the region in the SigV4 credential scope), every page once, the order of the offerings (fee, then
start, zone and id), the report's ``request`` block, the SDK's retries and the one-line faults
(what failed, the permission it needs, the attempts made), and the refusals before any call.

Offerings are written in each test; fees by hand (a p5.48xlarge block at 31.464 $ per
instance-hour, tests/data/aws/SOURCE.md: 2 × 48 h = 3,020.54 $)."""

from __future__ import annotations

import datetime as dt
import re
import sys
import time
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest
from local_server import Answer, LocalServer
from test_aws import aws_env

from ptplan.core.errors import InputError, ProviderError
from ptplan.providers.aws_blocks import SOURCE, fetch_block_offerings

NS = "http://ec2.amazonaws.com/doc/2016-11-15/"
TODAY = dt.date(2026, 12, 5)


def offering(oid: str, fee: str, start: str, zone: str = "us-west-2a", count: int = 2,
             hours: int = 48) -> str:
    begin = dt.datetime.fromisoformat(start)
    end = begin + dt.timedelta(hours=hours)
    return (f"<item><capacityBlockOfferingId>{oid}</capacityBlockOfferingId>"
            f"<instanceType>p5.48xlarge</instanceType><availabilityZone>{zone}"
            f"</availabilityZone><instanceCount>{count}</instanceCount>"
            f"<startDate>{begin:%Y-%m-%dT%H:%M:%S}.000Z</startDate>"
            f"<endDate>{end:%Y-%m-%dT%H:%M:%S}.000Z</endDate>"
            f"<capacityBlockDurationHours>{hours}</capacityBlockDurationHours>"
            f"<upfrontFee>{fee}</upfrontFee><currencyCode>USD</currencyCode></item>")


class FakeEC2:
    """``items`` in pages of ``page_size``; ``faults``: (status, code, message) answered first,
    one per call; ``page_faults``: the same for the page of a ``NextToken``, every time."""

    def __init__(self, items: list[str], page_size: int = 2) -> None:
        self.items, self.page_size = items, page_size
        self.faults: list[tuple[int, str, str]] = []
        self.page_faults: dict[str, tuple[int, str, str]] = {}
        self.forms: list[dict[str, str]] = []
        self.headers: list[dict[str, str]] = []
        self.local = LocalServer(self._serve)
        self.url = self.local.url

    def _serve(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Answer:
        form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
        self.forms.append(form)
        self.headers.append(headers)
        fault = self.faults.pop(0) if self.faults else \
            self.page_faults.get(form.get("NextToken", ""))
        if fault is not None:
            status, code, message = fault
            return status, {"Content-Type": "text/xml"}, (
                f"<Response><Errors><Error><Code>{code}</Code><Message>{message}</Message>"
                "</Error></Errors><RequestID>r</RequestID></Response>")
        start = int(form.get("NextToken", "0"))
        end = start + self.page_size
        token = f"<nextToken>{end}</nextToken>" if end < len(self.items) else ""
        items = "".join(self.items[start:end])  # none: EC2 may leave the set element out
        offers = f"<capacityBlockOfferingSet>{items}</capacityBlockOfferingSet>" if items else ""
        return 200, {"Content-Type": "text/xml"}, (
            f'<DescribeCapacityBlockOfferingsResponse xmlns="{NS}"><requestId>r</requestId>'
            f"{offers}{token}</DescribeCapacityBlockOfferingsResponse>")


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[float]:
    """No machine credentials or config; the SDK's back-off sleeps recorded, not slept."""
    aws_env(monkeypatch, tmp_path)
    slept: list[float] = []
    fake_time = types.SimpleNamespace(**{k: getattr(time, k) for k in dir(time)
                                         if not k.startswith("_")})
    fake_time.sleep = slept.append
    monkeypatch.setattr("botocore.endpoint.time", fake_time)
    return slept


@pytest.fixture
def five(env: list[float]) -> Iterator[FakeEC2]:
    """Five offerings over three pages; equal fees are ordered by start, then zone, then id."""
    fake = FakeEC2([
        offering("cbr-e", "3020.54", "2026-12-22T11:30:00", "us-west-2b"),
        offering("cbr-d", "3020.54", "2026-12-21T11:30:00", "us-west-2b"),
        offering("cbr-c", "999.50", "2026-12-23T11:30:00"),
        offering("cbr-b", "3020.54", "2026-12-21T11:30:00", "us-west-2a"),
        offering("cbr-a", "3020.54", "2026-12-21T11:30:00", "us-west-2a")])
    yield fake
    fake.local.close()


def test_request_pages_order_and_report(five: FakeEC2) -> None:
    data = fetch_block_offerings("us-west-2", "p5.48xlarge", 2, 48, dt.date(2026, 12, 20),
                                 endpoint=five.url, today=TODAY)
    assert [f.get("NextToken") for f in five.forms] == [None, "2", "4"]
    for form in five.forms:
        assert {k: form[k] for k in ("Action", "InstanceType", "InstanceCount",
                                     "CapacityDurationHours")} == {
            "Action": "DescribeCapacityBlockOfferings", "InstanceType": "p5.48xlarge",
            "InstanceCount": "2", "CapacityDurationHours": "48"}
        assert re.match(r"2026-12-20T00:00:00(\.000)?Z$", form["StartDateRange"])
    assert all("/us-west-2/ec2/aws4_request" in h["authorization"] for h in five.headers)
    # the client is built with ptplan's config (its user agent, retries and timeouts)
    assert all("ptplan" in h["user-agent"] for h in five.headers)
    # 999.50 (a float, not a string: "999.50" > "3020.54") first; then 21 Dec before 22 Dec,
    # zone a before b, cbr-a before cbr-b
    assert [o["offering_id"] for o in data["offerings"]] == [
        "cbr-c", "cbr-a", "cbr-b", "cbr-d", "cbr-e"]
    assert data["offerings"][1] == {
        "offering_id": "cbr-a", "instance_type": "p5.48xlarge", "zone": "us-west-2a",
        "count": 2, "start": "2026-12-21T11:30:00Z", "end": "2026-12-23T11:30:00Z",
        "duration_hours": 48, "upfront_fee_usd": "3020.54",
        "usd_per_instance_hour": round(3020.54 / 96, 6)}
    assert (data["source"], data["region"]) == (SOURCE, "us-west-2")
    assert data["request"] == {"instance_type": "p5.48xlarge", "count": 2,
                               "duration_hours": 48, "start_after": "2026-12-20"}
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", data["as_of"])
    assert set(data) == {"source", "as_of", "region", "request", "offerings"}


def test_without_a_start_no_start_range_is_sent(five: FakeEC2) -> None:
    data = fetch_block_offerings("us-west-2", "p5.48xlarge", 2, 48, endpoint=five.url)
    assert all("StartDateRange" not in f for f in five.forms) and len(five.forms) == 3
    assert data["request"]["start_after"] is None and len(data["offerings"]) == 5


def test_an_empty_quote_is_one_call_and_no_offering(env: list[float]) -> None:
    """A page without ``capacityBlockOfferingSet`` (boto3 then has no such key): no offering."""
    fake = FakeEC2([])
    try:
        data = fetch_block_offerings("us-east-1", "p5.48xlarge", 1, 24, endpoint=fake.url)
    finally:
        fake.local.close()
    assert data["offerings"] == [] and len(fake.forms) == 1


def test_throttling_is_retried_by_the_sdk_up_to_its_attempts(
        five: FakeEC2, env: list[float], monkeypatch: pytest.MonkeyPatch) -> None:
    """AWS_MAX_ATTEMPTS = 3: throttled twice, the third attempt answers (one back-off sleep
    each); throttled three times: 3 calls, then one line naming the attempts."""
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "3")
    throttle = (503, "RequestLimitExceeded", "Request limit exceeded.")
    five.faults = [throttle, throttle]
    assert len(fetch_block_offerings("us-west-2", "p5.48xlarge", 2, 48,
                                     endpoint=five.url)["offerings"]) == 5
    assert len(five.forms) == 2 + 3 and len(env) == 2
    five.forms.clear()
    five.faults = [throttle] * 3
    with pytest.raises(ProviderError) as err:
        fetch_block_offerings("us-west-2", "p5.48xlarge", 2, 48, endpoint=five.url)
    assert len(five.forms) == 3
    assert str(err.value) == (
        "AWS throttled capacity block offerings (RequestLimitExceeded) after 3 attempts with "
        "backoff; retry later or narrow --regions/--instance-type; the cache is unchanged")


def test_rejected_credentials_name_the_permission(five: FakeEC2) -> None:
    five.faults = [(403, "UnauthorizedOperation",
                    "You are not authorized to perform this operation. Encoded message: x")]
    with pytest.raises(ProviderError) as err:
        fetch_block_offerings("us-west-2", "p5.48xlarge", 2, 48, endpoint=five.url)
    assert str(err.value) == (
        "AWS rejected the credentials for capacity block offerings (UnauthorizedOperation: You "
        "are not authorized to perform this operation); check the profile and its permissions "
        "(ec2:DescribeCapacityBlockOfferings); the cache is unchanged")
    assert len(five.forms) == 1


def test_a_fault_on_a_later_page_fails_the_whole_quote(five: FakeEC2,
                                                       env: list[float]) -> None:
    """Page 1 answers, page 2 is refused (a client error: not retried): one line, no partial
    list."""
    five.page_faults["2"] = (400, "InvalidParameterValue", "The token is not valid. Retry.")
    with pytest.raises(ProviderError) as err:
        fetch_block_offerings("us-west-2", "p5.48xlarge", 2, 48, endpoint=five.url)
    assert str(err.value) == ("AWS capacity block offerings failed (InvalidParameterValue: The "
                              "token is not valid); the cache is unchanged")
    assert [f.get("NextToken") for f in five.forms] == [None, "2"] and env == []


@pytest.mark.parametrize("count", [1, 64])
def test_the_smallest_and_largest_counts_are_asked(five: FakeEC2, count: int) -> None:
    fetch_block_offerings("us-west-2", "p5.48xlarge", count, 48, endpoint=five.url)
    assert five.forms[0]["InstanceCount"] == str(count)


@pytest.mark.parametrize("count", [0, 65])
def test_a_count_outside_1_to_64_is_refused_before_any_call(five: FakeEC2, count: int) -> None:
    with pytest.raises(InputError) as err:
        fetch_block_offerings("us-west-2", "p5.48xlarge", count, 48, endpoint=five.url)
    assert str(err.value) == f"--count: {count} instances; a capacity block holds 1 to 64"
    assert five.forms == []


def test_a_start_at_most_56_days_ahead(five: FakeEC2) -> None:
    """5 Dec + 56 days = 30 Jan: asked; 31 Jan (57 days): refused before any call."""
    fetch_block_offerings("us-west-2", "p5.48xlarge", 2, 48, dt.date(2027, 1, 30),
                          endpoint=five.url, today=TODAY)
    assert five.forms[0]["StartDateRange"].startswith("2027-01-30T00:00:00")
    five.forms.clear()
    with pytest.raises(InputError) as err:
        fetch_block_offerings("us-west-2", "p5.48xlarge", 2, 48, dt.date(2027, 1, 31),
                              endpoint=five.url, today=TODAY)
    assert str(err.value) == ("--start-after: 2027-01-31 is more than 8 weeks after today "
                              "(2026-12-05); capacity blocks start at most 56 days ahead")
    assert five.forms == []


def test_today_defaults_to_the_utc_date(five: FakeEC2) -> None:
    today = dt.datetime.now(dt.UTC).date()
    fetch_block_offerings("us-west-2", "p5.48xlarge", 2, 48, today + dt.timedelta(days=56),
                          endpoint=five.url)
    with pytest.raises(InputError, match="more than 8 weeks after today"):
        fetch_block_offerings("us-west-2", "p5.48xlarge", 2, 48,
                              today + dt.timedelta(days=57), endpoint=five.url)


def test_bad_region_type_or_length_is_refused_before_any_call(five: FakeEC2) -> None:
    for args in (("moon", "p5.48xlarge", 2, 48), ("us-west-2", "p5 48xlarge", 2, 48),
                 ("us-west-2", "p5.48xlarge", 2, 47)):
        with pytest.raises(InputError):
            fetch_block_offerings(*args, endpoint=five.url)  # type: ignore[arg-type]
    assert five.forms == []


@pytest.fixture
def zone(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], None]]:
    """Set the process's local time zone (POSIX TZ) for a test, restored after it."""
    def set_tz(tz: str) -> None:
        monkeypatch.setenv("TZ", tz)
        time.tzset()

    yield set_tz
    monkeypatch.undo()
    time.tzset()


@pytest.mark.parametrize("tz", ["EAST-14", "WEST+12"])
def test_today_is_the_utc_date_in_any_local_zone(five: FakeEC2, zone: Any, tz: str) -> None:
    """At UTC+14 the local date is a day ahead of UTC from 10:00 UTC, at UTC-12 a day behind
    until 12:00 UTC: in one of the two it differs now. 56 days after the UTC date is asked
    and 57 refused in both; the offerings' dates are reported in UTC, not local time."""
    zone(tz)
    today = dt.datetime.now(dt.UTC).date()
    data = fetch_block_offerings("us-west-2", "p5.48xlarge", 2, 48,
                                 today + dt.timedelta(days=56), endpoint=five.url)
    first = data["offerings"][0]
    assert (first["start"], first["end"]) == ("2026-12-23T11:30:00Z", "2026-12-25T11:30:00Z")
    with pytest.raises(InputError, match="more than 8 weeks after today"):
        fetch_block_offerings("us-west-2", "p5.48xlarge", 2, 48,
                              today + dt.timedelta(days=57), endpoint=five.url)


def test_without_boto3_one_line(monkeypatch: pytest.MonkeyPatch, five: FakeEC2) -> None:
    monkeypatch.setitem(sys.modules, "boto3", None)
    with pytest.raises(ProviderError) as err:
        fetch_block_offerings("us-west-2", "p5.48xlarge", 2, 48, endpoint=five.url)
    assert str(err.value) == ("live capacity block offerings need the AWS SDK: pip install "
                              "'ptplan[aws]'")
    assert five.forms == []
