"""Live Savings Plans rates (``providers/aws_savings.py``, ``ptplan prices savings-plans``)
against a local HTTP server that speaks the Savings Plans API (rest-json, ``POST
/DescribeSavingsPlansOfferingRates``), through the real boto3 client: serialisation, SigV4
signing, pagination by ``nextToken``, retries, error shapes.

Fixture numbers: AWS publishes no verified GPU Savings Plans percentages
(providers/data/REFERENCE_FACTS.md), so the rates follow the planner defaults as formulas
(like tests/data/aws/SOURCE.md): rate = embedded on-demand × (1 − d), d = 0.35 / 0.55
(EC2 Instance, 1y / 3y), 0.30 / 0.50 (Compute); p5.48xlarge on demand 55.04 $/h, g6e.xlarge
1.861 $/h (us-east-1, providers/data/aws_gpu_vms.csv). Shapes: botocore's savingsplans
service model (2019-06-28).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from local_server import Answer, LocalServer
from test_aws import aws_env
from typer.testing import CliRunner

from ptplan.cli.app import app
from ptplan.core.errors import ProviderError
from ptplan.providers.aws_savings import fetch_savings_plan_rates, parse_rate

runner = CliRunner()
YEAR = 31_536_000
OD = {"p5.48xlarge": 55.04, "g6e.xlarge": 1.861}
D = {("EC2Instance", 1): 0.35, ("EC2Instance", 3): 0.55, ("Compute", 1): 0.30,
     ("Compute", 3): 0.50}


def _result(plan: str, years: int, itype: str, region: str = "us-east-1",
            option: str = "No Upfront", unit: str = "Hrs") -> dict[str, Any]:
    return {"savingsPlanOffering": {"offeringId": "00000000-0000-0000-0000-000000000001",
                                    "paymentOption": option, "planType": plan,
                                    "durationSeconds": years * YEAR, "currency": "USD",
                                    "planDescription": f"{years} year {option} {plan}"},
            "rate": f"{OD[itype] * (1 - D[(plan, years)]):.4f}", "unit": unit,
            "productType": "EC2", "serviceCode": "AmazonEC2",
            "usageType": f"USE1-BoxUsage:{itype}", "operation": "RunInstances",
            "properties": [{"name": "region", "value": region},
                           {"name": "instanceType", "value": itype},
                           {"name": "instanceFamily", "value": itype.split(".")[0]},
                           {"name": "productDescription", "value": "Linux/UNIX"},
                           {"name": "tenancy", "value": "shared"}]}


RESULTS = [_result(p, y, t) for p in ("Compute", "EC2Instance") for y in (1, 3)
           for t in ("p5.48xlarge", "g6e.xlarge")]


class FakeSavingsPlans:
    """The Savings Plans endpoint: filters by plan type, payment option and the
    ``instanceType`` / ``region`` filters; pages of ``page_size``; fault injection:
    ``throttle`` (next N calls answer ThrottlingException), ``malformed``."""

    page_size = 3

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.throttle = 0
        self.malformed = False
        self.results = [*RESULTS, _result("Compute", 1, "p5.48xlarge", option="All Upfront"),
                        _result("Compute", 1, "p5.48xlarge", region="us-west-2")]
        self.local = LocalServer(self._serve)
        self.url = self.local.url

    def _serve(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> Answer:
        body = json.loads(raw)
        self.calls.append({"path": path, "body": body, "auth": headers.get("authorization", "")})
        status, out_headers, out = self.answer(path, body)
        return status, {"Content-Type": "application/json", **out_headers}, json.dumps(out)

    def close(self) -> None:
        self.local.close()

    def answer(self, path: str, req: dict[str, Any]) -> tuple[int, dict[str, str], Any]:
        if path != "/DescribeSavingsPlansOfferingRates":
            return 404, {"x-amzn-ErrorType": "UnknownOperationException"}, {"message": path}
        if self.throttle > 0:
            self.throttle -= 1
            return 400, {"x-amzn-ErrorType": "ThrottlingException"}, {"message": "Rate exceeded"}
        filters = {f["name"]: set(f["values"]) for f in req.get("filters", [])}

        def keep(r: dict[str, Any]) -> bool:
            props = {p["name"]: p["value"] for p in r["properties"]}
            off = r["savingsPlanOffering"]
            return (off["planType"] in req.get("savingsPlanTypes", [off["planType"]])
                    and off["paymentOption"] in req.get("savingsPlanPaymentOptions",
                                                        [off["paymentOption"]])
                    and all(props.get(k) in v for k, v in filters.items()))

        items = [r for r in self.results if keep(r)]
        start = int(req.get("nextToken") or 0)
        page = items[start:start + self.page_size]
        if self.malformed:
            page = [{**page[0], "rate": "n/a"}]
        out: dict[str, Any] = {"searchResults": page}
        if start + self.page_size < len(items):
            out["nextToken"] = str(start + self.page_size)
        return 200, {}, out


@pytest.fixture
def fake_sp(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeSavingsPlans]:
    aws_env(monkeypatch, tmp_path)
    fake = FakeSavingsPlans()
    yield fake
    fake.close()


def test_rates_are_fetched_paginated_and_filtered(fake_sp: FakeSavingsPlans) -> None:
    data = fetch_savings_plan_rates(["us-east-1"], ["p5.48xlarge", "g6e.xlarge"],
                                    endpoint=fake_sp.url)
    got = {(r["plan_type"], r["term_years"], r["instance_type"]): r["usd_per_hour"]
           for r in data["rates"]}
    assert got == {(p, y, t): pytest.approx(round(OD[t] * (1 - D[(p, y)]), 4))
                   for p, y in D for t in OD}
    assert {r["payment_option"] for r in data["rates"]} == {"No Upfront"}
    assert {r["region"] for r in data["rates"]} == {"us-east-1"}
    assert len(fake_sp.calls) == 3  # 8 results in pages of 3
    req = fake_sp.calls[0]["body"]
    assert req["savingsPlanTypes"] == ["Compute", "EC2Instance"]
    assert req["products"] == ["EC2"] and req["serviceCodes"] == ["AmazonEC2"]
    assert {f["name"] for f in req["filters"]} == {"instanceType", "tenancy",
                                                  "productDescription", "region"}
    assert "/us-east-1/savingsplans/aws4_request" in fake_sp.calls[0]["auth"]


def test_throttling_is_retried(fake_sp: FakeSavingsPlans) -> None:
    fake_sp.throttle = 1  # AWS_MAX_ATTEMPTS = 2 in aws_env
    assert fetch_savings_plan_rates([], ["p5.48xlarge"], endpoint=fake_sp.url)["rates"]


def test_throttling_after_retries_is_a_provider_error(fake_sp: FakeSavingsPlans) -> None:
    fake_sp.throttle = 5
    with pytest.raises(ProviderError, match="throttled"):
        fetch_savings_plan_rates([], ["p5.48xlarge"], endpoint=fake_sp.url)


def test_malformed_rate_is_a_provider_error(fake_sp: FakeSavingsPlans) -> None:
    fake_sp.malformed = True
    with pytest.raises(ProviderError, match=r"malformed rate .*rate = 'n/a' is not a number"):
        fetch_savings_plan_rates([], ["p5.48xlarge"], endpoint=fake_sp.url)


def test_parse_skips_other_units_and_terms() -> None:
    assert parse_rate(_result("Compute", 1, "p5.48xlarge", unit="Request")) is None
    odd = _result("Compute", 1, "p5.48xlarge")
    odd["savingsPlanOffering"]["durationSeconds"] = YEAR // 2
    assert parse_rate(odd) is None


def test_cli_writes_a_rates_file_reserve_reads(fake_sp: FakeSavingsPlans,
                                               tmp_path: Path) -> None:
    """`prices savings-plans -o` → a portfolio's rates_file → the Compute SP's discount."""
    out = tmp_path / "sp.json"
    res = runner.invoke(app, ["prices", "savings-plans", "--instance-type", "p5.48xlarge",
                              "--regions", "us-east-1", "--endpoint", fake_sp.url, "-o",
                              str(out)])
    assert res.exit_code == 0, res.output
    pf = tmp_path / "pf.yaml"
    pf.write_text(json.dumps({
        "demand": [{"provider": "aws", "region": "us-east-1", "instance_type": "p5.48xlarge",
                    "nodes": 2}], "products": [],
        "commitments": [{"name": "csp3", "kind": "compute_savings_plan", "term_years": 3,
                         "rates_file": "sp.json"}]}))
    catalog = str(Path(__file__).parent / "data" / "portfolios" / "catalog.yaml")
    res = runner.invoke(app, ["reserve", str(pf), "--catalog", catalog, "--format", "json",
                              "--no-timings"])
    assert res.exit_code == 0, res.output
    c = json.loads(res.stdout)["commitments"][0]
    assert c["discount_min"] == pytest.approx(0.5, abs=1e-4)
    assert c["usd_per_hour"] == pytest.approx(2 * 27.52)
    assert c["rate_source"] == "rates file sp.json" and c["rate_assumed"] is False


def test_cli_bad_input_exit_2(fake_sp: FakeSavingsPlans) -> None:
    res = runner.invoke(app, ["prices", "savings-plans", "--instance-type", "m5.large",
                              "--endpoint", fake_sp.url])
    assert res.exit_code == 2 and "not in a known GPU family" in res.output
    res = runner.invoke(app, ["prices", "savings-plans", "--instance-type", "p5.48xlarge",
                              "--endpoint", "ftp://x"])
    assert res.exit_code == 2 and "--endpoint" in res.output
