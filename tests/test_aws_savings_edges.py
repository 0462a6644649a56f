"""``providers/aws_savings.py`` at its edges (mutation-testing gaps, docs/testing.md): which
search results are rates-file rows, the one-line faults word for word, and what the client
sends (its retry config and user agent, the page size), through boto3 against the local
Savings Plans server of ``tests/test_aws_savings.py``."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from test_aws_savings import YEAR, FakeSavingsPlans, _result, fake_sp  # noqa: F401

from ptplan.core.errors import InputError, ProviderError
from ptplan.providers.aws_savings import SOURCE, fetch_savings_plan_rates, parse_rate

UNCHANGED = "nothing is written"  # no price cache is involved


def test_a_row_is_the_result_as_read():
    row = parse_rate(_result("EC2Instance", 3, "g6e.xlarge", region="us-west-2"))
    # 1.861 $/h on demand × (1 − 0.55) = 0.83745, sent as the 4-decimal string "0.8374"
    assert row == {"plan_type": "EC2Instance", "term_years": 3, "payment_option": "No Upfront",
                   "region": "us-west-2", "instance_type": "g6e.xlarge",
                   "usd_per_hour": 0.8374}


@pytest.mark.parametrize(("field", "value"), [
    ("planType", "SageMaker"),       # a 1-year plan of another type: not an EC2 rate
    ("durationSeconds", 2 * YEAR),   # whole years, but no 2-year plan exists
    ("durationSeconds", 3 * YEAR + 1),
])
def test_results_that_are_not_a_one_or_three_year_ec2_rate_are_skipped(field, value):
    item = _result("Compute", 1, "p5.48xlarge")
    item["savingsPlanOffering"][field] = value
    assert parse_rate(item) is None


@pytest.mark.parametrize("missing", ["region", "instanceType"])
def test_a_rate_without_region_or_instance_type_is_a_fault(missing):
    item = _result("Compute", 1, "p5.48xlarge")
    item["properties"] = [p for p in item["properties"] if p["name"] != missing]
    with pytest.raises(ProviderError) as err:
        parse_rate(item)
    assert str(err.value) == ("AWS Savings Plans returned a rate without region or "
                              "instanceType properties; nothing was written")


@pytest.mark.parametrize("rate", ["0", "0.0000", "-1.5"])
def test_a_rate_that_is_not_positive_is_a_fault(rate):
    item = _result("Compute", 1, "p5.48xlarge")
    item["rate"] = rate
    with pytest.raises(ProviderError) as err:
        parse_rate(item)
    assert str(err.value) == (f"AWS Savings Plans returned rate {float(rate)} for p5.48xlarge; "
                              "nothing was written")


def test_the_file_names_its_source_and_time_and_the_request_its_page_size(
        fake_sp: FakeSavingsPlans):  # noqa: F811
    data = fetch_savings_plan_rates([], ["g6e.xlarge"], endpoint=fake_sp.url)
    assert data["source"] == SOURCE and isinstance(data["as_of"], str)
    assert sorted(data) == ["as_of", "rates", "source"]
    body = fake_sp.calls[0]["body"]
    assert body["maxResults"] == 1000 and "nextToken" not in body
    assert body["savingsPlanPaymentOptions"] == ["No Upfront"]
    # the client is built with ptplan's config: its user agent is on every request
    agents = [c["headers"].get("user-agent", "") for c in fake_sp.local.calls]
    assert agents and all("ptplan" in a for a in agents)


def test_a_page_without_results_is_an_empty_page(fake_sp: FakeSavingsPlans):  # noqa: F811
    real = fake_sp.answer

    def answer(path: str, req: dict[str, Any]):
        status, headers, out = real(path, req)
        if not req.get("nextToken"):
            out = {"nextToken": out.get("nextToken", "")} if out.get("nextToken") else {}
        return status, headers, out

    fake_sp.results = [_result("Compute", 1, "p5.48xlarge")] * 4  # page 1 dropped, page 2 kept
    fake_sp.answer = answer  # type: ignore[method-assign]
    data = fetch_savings_plan_rates([], ["p5.48xlarge"], endpoint=fake_sp.url)
    assert [r["instance_type"] for r in data["rates"]] == ["p5.48xlarge"]


def test_no_rate_names_the_types_and_regions(fake_sp: FakeSavingsPlans):  # noqa: F811
    fake_sp.results = []
    with pytest.raises(ProviderError) as err:
        fetch_savings_plan_rates(["us-east-1", "us-west-2"], ["p5.48xlarge", "g6e.xlarge"],
                                 endpoint=fake_sp.url)
    # the types as validated (sorted), the regions as given
    assert str(err.value) == ("AWS Savings Plans returned no rate for g6e.xlarge, p5.48xlarge "
                              "in us-east-1, us-west-2; nothing was written")
    with pytest.raises(ProviderError) as err:
        fetch_savings_plan_rates([], ["p5.48xlarge"], endpoint=fake_sp.url)
    assert str(err.value) == "AWS Savings Plans returned no rate for p5.48xlarge; nothing " \
                             "was written"


def test_no_instance_type_is_an_input_error():
    with pytest.raises(InputError) as err:
        fetch_savings_plan_rates([], [])
    assert str(err.value) == ("--instance-type: give at least one instance type, e.g. "
                              "p5.48xlarge")


def test_throttling_names_the_call_and_the_attempts(fake_sp: FakeSavingsPlans):  # noqa: F811
    fake_sp.throttle = 5
    with pytest.raises(ProviderError) as err:
        fetch_savings_plan_rates([], ["p5.48xlarge"], endpoint=fake_sp.url)
    assert str(err.value) == ("AWS throttled Savings Plans rates (ThrottlingException) after 2 "
                              "attempts with backoff; retry later or narrow "
                              f"--regions/--instance-type; {UNCHANGED}")
    assert len(fake_sp.calls) == 2  # AWS_MAX_ATTEMPTS = 2 (tests/test_aws.py::aws_env)


def test_rejected_credentials_name_the_permission(fake_sp: FakeSavingsPlans):  # noqa: F811
    def denied(path: str, req: dict[str, Any]):
        return 400, {"x-amzn-ErrorType": "AccessDeniedException"}, {
            "message": "User is not authorized. More text."}

    fake_sp.answer = denied  # type: ignore[method-assign]
    with pytest.raises(ProviderError) as err:
        fetch_savings_plan_rates([], ["p5.48xlarge"], endpoint=fake_sp.url)
    assert "(savingsplans:DescribeSavingsPlansOfferingRates)" in str(err.value)
    assert str(err.value).startswith("AWS rejected the credentials for Savings Plans rates "
                                     "(AccessDeniedException: ")


def test_without_the_sdk_the_fault_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "boto3", None)  # import boto3 raises ImportError
    with pytest.raises(ProviderError) as err:
        fetch_savings_plan_rates([], ["p5.48xlarge"])
    assert str(err.value) == ("live Savings Plans rates need the AWS SDK: pip install "
                              "'ptplan[aws]'")
