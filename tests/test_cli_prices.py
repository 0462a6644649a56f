"""``ptplan prices refresh|show|diff`` and ``plan --catalog cache`` through Typer's CliRunner,
against the local AWS and GCP fakes of test_aws.py / test_gcp.py (real SDK clients, no network).
"""

from __future__ import annotations

import copy
import hashlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import EXAMPLES, assert_one_line
from test_aws import PRICE_LIST, SECRET, FakeAWS, aws_env
from test_gcp import FakeBilling
from typer.testing import CliRunner

from ptplan.cli.app import app

runner = CliRunner()
AWS_ARGS = ["--regions", "us-east-1,us-west-2", "--instance-type", "p5.48xlarge",
            "--instance-type", "p4d.24xlarge", "--instance-type", "g6e.xlarge"]


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path
          ) -> Iterator[tuple[FakeAWS, FakeBilling]]:
    aws_env(monkeypatch, tmp_path)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "absent.json"))
    monkeypatch.delenv("PTPLAN_CACHE", raising=False)
    aws, gcp = FakeAWS(), FakeBilling()
    yield aws, gcp
    aws.close()
    gcp.close()


def _refresh(provider: str, url: str, db: Path, *extra: str) -> Any:
    return runner.invoke(app, ["prices", "refresh", "--provider", provider, "--endpoint", url,
                               "--cache", str(db), *extra])


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def filled(fakes: tuple[FakeAWS, FakeBilling], tmp_path: Path) -> Path:
    aws, gcp = fakes
    db = tmp_path / "prices.sqlite"
    r = _refresh("aws", aws.url, db, *AWS_ARGS)
    assert r.exit_code == 0, r.output + r.stderr
    assert "aws: 24 offers (6 on-demand, 18 spot) and 72 reserved rates in 2 regions" in r.stdout
    r = _refresh("gcp", gcp.url, db)
    assert r.exit_code == 0, r.output + r.stderr
    assert "gcp: " in r.stdout and "reserved rates" in r.stdout
    return db


def test_refresh_writes_both_providers_and_no_secret(filled: Path) -> None:
    r = runner.invoke(app, ["prices", "show", "--catalog", str(filled), "--format", "json"])
    assert r.exit_code == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["catalog"]["name"] == "cache:prices.sqlite"
    assert {row["provider"] for row in data["rows"]} == {"aws", "gcp"}
    assert SECRET.encode() not in filled.read_bytes()
    assert b"AKIAFAKEFORTESTS" not in filled.read_bytes()


def test_show_filters_and_formats(filled: Path) -> None:
    r = runner.invoke(app, ["prices", "show", "--catalog", str(filled), "--gpu", "h100-80gb",
                            "--provider", "aws", "--region", "us-*", "--format", "json"])
    assert r.exit_code == 0, r.stderr
    rows = json.loads(r.stdout)["rows"]
    assert [(x["instance_type"], x["region"]) for x in rows] == [
        ("p5.48xlarge", "us-east-1"), ("p5.48xlarge", "us-west-2")]
    east = rows[0]
    assert east["on_demand_usd_per_hour"] == 55.04
    assert (east["spot_usd_per_hour"], east["spot_zone"]) == (17.6289, "use1-az6")
    assert len(east["reserved"]) == 12
    cheapest_1y = east["reserved"][0]
    assert (cheapest_1y["term_years"], cheapest_1y["offering_class"],
            cheapest_1y["purchase_option"]) == (1, "standard", "All Upfront")
    assert cheapest_1y["effective_usd_per_hour"] == pytest.approx(35.776)
    table = runner.invoke(app, ["prices", "show", "--catalog", str(filled), "--gpu", "H100"])
    assert table.exit_code == 0
    assert "p5.48xlarge" in table.stdout and "a3-highgpu-8g" in table.stdout
    assert "35.78 (standard, All Upfront)" in table.stdout
    assert "17.63 (use1-az6)" in table.stdout
    again = runner.invoke(app, ["prices", "show", "--catalog", str(filled), "--gpu", "H100"])
    assert again.stdout == table.stdout  # deterministic


def test_show_errors(filled: Path, tmp_path: Path) -> None:
    r = runner.invoke(app, ["prices", "show", "--catalog", str(filled), "--gpu", "H1000"])
    assert r.exit_code == 2
    assert_one_line(r.stderr)
    r = runner.invoke(app, ["prices", "show", "--catalog", str(filled), "--gpu", "L4"])
    assert r.exit_code == 2 and "no prices match" in r.stderr
    r = runner.invoke(app, ["prices", "show", "--catalog", str(tmp_path / "none.sqlite")])
    assert r.exit_code == 2 and "ptplan prices refresh" in r.stderr


def test_diff_shows_changed_added_removed(fakes: tuple[FakeAWS, FakeBilling], filled: Path,
                                          tmp_path: Path) -> None:
    aws, _ = fakes
    old = tmp_path / "old.sqlite"
    shutil.copy(filled, old)
    items = copy.deepcopy([i for i in PRICE_LIST
                           if i["product"]["attributes"]["instanceType"] != "g6e.xlarge"])
    p5 = next(i for i in items if i["product"]["attributes"]["instanceType"] == "p5.48xlarge"
              and i["product"]["attributes"]["regionCode"] == "us-east-1"
              and i["product"]["attributes"]["marketoption"] == "OnDemand")
    dim = next(iter(next(iter(p5["terms"]["OnDemand"].values()))["priceDimensions"].values()))
    dim["pricePerUnit"]["USD"] = "44.0320000000"
    aws.items = items
    r = _refresh("aws", aws.url, filled, "--regions", "us-east-1,us-west-2",
                 "--instance-type", "p5.48xlarge", "--instance-type", "p4d.24xlarge",
                 "--instance-type", "g6e.xlarge")
    assert r.exit_code == 0, r.stderr
    r = runner.invoke(app, ["prices", "diff", str(old), str(filled), "--provider", "aws",
                            "--format", "json"])
    assert r.exit_code == 0, r.stderr
    d = json.loads(r.stdout)
    changed = {c["key"]: c for c in d["offers"]["changed"]}
    assert set(changed) == {"aws:us-east-1:p5.48xlarge:on_demand"}
    assert changed["aws:us-east-1:p5.48xlarge:on_demand"]["change_pct"] == -20.0
    removed = {c["key"] for c in d["offers"]["removed"]}
    assert "aws:us-east-1:g6e.xlarge:on_demand" in removed and len(removed) == 2 + 7
    assert d["offers"]["added"] == []
    assert len(d["reserved_rates"]["removed"]) == 24  # g6e's 12 options x 2 regions
    table = runner.invoke(app, ["prices", "diff", str(old), str(filled), "--provider", "aws"])
    assert "-20.00 %" in table.stdout and "offers: 1 changed, 0 added, 9 removed" in table.stdout


def test_fault_mid_pull_leaves_cache_whole(fakes: tuple[FakeAWS, FakeBilling], filled: Path
                                           ) -> None:
    aws, gcp = fakes
    before = _sha(filled)
    aws.fail_token = "1"
    r = _refresh("aws", aws.url, filled, *AWS_ARGS)
    assert r.exit_code == 3
    assert_one_line(r.stderr.strip().splitlines()[-1])
    assert "InvalidNextTokenException" in r.stderr and "cache is unchanged" in r.stderr
    assert SECRET not in r.stderr and SECRET not in r.stdout
    gcp.status = {4: 403}
    r = _refresh("gcp", gcp.url, filled)
    assert r.exit_code == 3 and "rejected the credentials" in r.stderr
    assert _sha(filled) == before


def test_missing_credentials_exit_3(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    aws_env(monkeypatch, tmp_path, credentials=False)
    db = tmp_path / "c.sqlite"
    r = runner.invoke(app, ["prices", "refresh", "--provider", "aws", "--regions", "us-east-1",
                            "--endpoint", "http://127.0.0.1:9", "--cache", str(db)])
    assert r.exit_code == 3 and "no AWS credentials found" in r.stderr
    assert not db.exists()


def test_refresh_input_errors(tmp_path: Path) -> None:
    db = str(tmp_path / "c.sqlite")
    for args, needle in (
        (["--provider", "azure"], "--provider: 'azure'"),
        (["--provider", "aws", "--endpoint", "127.0.0.1:80"], "--endpoint"),
        (["--provider", "aws", "--regions", "useast1"], "--regions: 'useast1'"),
        (["--provider", "gcp", "--instance-type", "a3"], "--instance-type applies to aws"),
    ):
        r = runner.invoke(app, ["prices", "refresh", *args, "--cache", db])
        assert r.exit_code == 2, (args, r.stderr)
        assert needle in r.stderr
        assert_one_line(r.stderr.strip().splitlines()[-1])


def test_plan_on_the_cache(filled: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PTPLAN_CACHE", str(filled))
    r = runner.invoke(app, ["plan", str(EXAMPLES / "sft-8b.yaml"), "--catalog", "cache",
                            "--format", "json", "--no-timings"])
    assert r.exit_code == 0, r.stderr
    plan = json.loads(r.stdout)
    assert plan["catalog"]["name"] == "cache"
    assert plan["catalog_as_of"] == plan["catalog"]["as_of"]
    assert plan["catalog"]["age_days"] == 0
    assert any("aws prices pulled" in n for n in plan["catalog"]["notes"])
    assert plan["provider"] in ("aws", "gcp")
    offers = {(a["provider"], a["region"], a["instance_type"], a["capacity_type"])
              for p in plan["pools"] for a in p["allocations"]}
    cached = runner.invoke(app, ["prices", "show", "--format", "json"])  # default --catalog cache
    rows = {(x["provider"], x["region"], x["instance_type"]) for x in json.loads(cached.stdout)
            ["rows"]}
    assert {o[:3] for o in offers} <= rows
    assert not any(o[3] == "reserved" for o in offers)  # reserved rates never become offers
    check = runner.invoke(app, ["plan", str(EXAMPLES / "sft-8b.yaml"), "--catalog", str(filled),
                                "--format", "json", "--no-timings"])
    assert json.loads(check.stdout)["catalog"]["name"] == "cache:prices.sqlite"
