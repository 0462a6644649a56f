"""GCP DWS prices (issue #15, item 2, GCP side): ``ptplan prices blocks --provider gcp`` through
the real ``CloudCatalogClient`` against the local Billing Catalog REST server of test_gcp.py
(paged ``ListSkus``, the library's own message JSON), into the price cache; and the embedded
DWS rates of ``providers/data/gcp_dws.csv`` recomputed from their SKUs.

Fixtures: ``tests/data/gcp/skus.json`` + ``dws_skus.json`` (SOURCE.md there)."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_gcp import FakeBilling
from typer.testing import CliRunner

from ptplan.cli.app import app
from ptplan.core.errors import ProviderError
from ptplan.providers.gcp_machines import MACHINES

DATA = Path(__file__).parent / "data" / "gcp"
DWS: list[dict[str, Any]] = json.loads((DATA / "dws_skus.json").read_text())
ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()

A3 = (4.200761, 0.010934, 0.000952)
"""flex-start H100 GPU, A3 vCPU and RAM SKUs ($/h, $/vCPU-h, $/GiB-h)."""
A2 = (1.61365, 0.01739, 0.00233)
MEGA_OD_VM = 208 * 0.026924 + 1872 * 0.002344
"""a3-megagpu-8g's vCPU and RAM at the on-demand A3Plus SKUs (no DWS ones in the fixture)."""


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeBilling]:
    from google.cloud import billing_v1

    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "absent.json"))
    monkeypatch.delenv("PTPLAN_CACHE", raising=False)
    f = FakeBilling()
    f.skus += [billing_v1.Sku.from_json(json.dumps(s)) for s in DWS]
    yield f
    f.close()


def _blocks(fake: FakeBilling, db: Path, *extra: str) -> Any:
    return runner.invoke(app, ["prices", "blocks", "--provider", "gcp", "--endpoint", fake.url,
                               "--cache", str(db), *extra])


def _machine(itype: str, sku: tuple[float, float, float]) -> float:
    m = MACHINES[itype]
    return m.gpus * sku[0] + m.vcpus * sku[1] + m.memory_gib * sku[2]


def test_pull_over_pages_prices_every_dws_machine_and_caches_it(fake: FakeBilling,
                                                                tmp_path: Path) -> None:
    db = tmp_path / "prices.sqlite"
    r = _blocks(fake, db, "--format", "json")
    assert r.exit_code == 0, r.output + r.stderr
    assert fake.pages >= 12 and len(fake.requests) == fake.pages  # every page, once
    assert all("currencyCode=USD" in q and q.startswith("/v1/services/6F81-5844-456A/skus")
               for q in fake.requests)
    data = json.loads(r.stdout)
    got = {(p["instance_type"], p["capacity_type"]): p for p in data["prices"]}
    for itype in ("a3-highgpu-1g", "a3-highgpu-2g", "a3-highgpu-4g", "a3-highgpu-8g"):
        assert got[(itype, "flex_start")]["usd_per_hour"] == pytest.approx(_machine(itype, A3))
    for itype in ("a2-highgpu-1g", "a2-highgpu-8g", "a2-megagpu-16g"):
        assert got[(itype, "flex_start")]["usd_per_hour"] == pytest.approx(_machine(itype, A2))
    assert got[("a2-highgpu-1g", "flex_start")]["usd_per_hour"] == pytest.approx(2.02038)
    mega = got[("a3-megagpu-8g", "block")]
    assert mega["usd_per_hour"] == pytest.approx(8 * 4.841121 + MEGA_OD_VM)
    assert (mega["unit_hours"], mega["max_hours"]) == (24.0, 2160.0)
    assert "on-demand vCPU and RAM (an upper bound)" in mega["note"]
    assert got[("a3-megagpu-8g", "flex_start")]["usd_per_hour"] == pytest.approx(
        8 * 4.423936 + MEGA_OD_VM)
    assert got[("a4-highgpu-8g", "block")]["usd_per_hour"] == pytest.approx(8 * 11.277)
    assert got[("a4-highgpu-8g", "flex_start")]["max_hours"] == 168.0
    # on-demand, spot and commitment SKUs never become DWS prices; G2 without vCPU/RAM is excluded
    assert {p["capacity_type"] for p in data["prices"]} == {"block", "flex_start"}
    assert "gcp g2-standard-8 europe-west3 flex_start: no vCPU/RAM SKU for series G2" in \
        data["exclusions"]
    # the cache: --catalog cache plans with the pulled prices over the embedded ones
    refresh = runner.invoke(app, ["prices", "refresh", "--provider", "gcp", "--endpoint",
                                  fake.url, "--cache", str(db)])
    assert refresh.exit_code == 0, refresh.output
    from ptplan.providers.registry import load_catalog

    cat = load_catalog(str(db))
    booked = {(o.instance_type, o.capacity_type): o for o in cat.block_offers
              if o.provider == "gcp"}
    assert booked[("a3-megagpu-8g", "block")].usd_per_hour == pytest.approx(
        8 * 4.841121 + MEGA_OD_VM, abs=1e-6)
    assert booked[("a3-megagpu-8g", "block")].max_start_days == 60
    assert any("booked-capacity prices pulled" in n for n in cat.notes)


def test_a_second_pull_replaces_the_rows_and_the_table_shows_the_cost(fake: FakeBilling,
                                                                      tmp_path: Path) -> None:
    db = tmp_path / "prices.sqlite"
    assert _blocks(fake, db).exit_code == 0
    r = _blocks(fake, db, "--instance-type", "a3-megagpu-8g", "--count", "2",
                "--duration-hours", "30")
    assert r.exit_code == 0, r.output
    calendar = 2 * (8 * 4.841121 + MEGA_OD_VM) * 48  # 30 h billed as two whole days
    flex = 2 * (8 * 4.423936 + MEGA_OD_VM) * 30
    assert f"{round(calendar, 2):,.2f}" in r.stdout and f"{round(flex, 2):,.2f}" in r.stdout
    assert "a3-highgpu-8g" not in r.stdout
    import sqlite3

    with sqlite3.connect(db) as con:
        (n,) = con.execute("SELECT COUNT(*) FROM block_offers").fetchone()
    assert n == 14  # replaced, not appended


def test_an_error_mid_pull_leaves_the_cache_byte_identical(fake: FakeBilling,
                                                           tmp_path: Path) -> None:
    db = tmp_path / "prices.sqlite"
    assert _blocks(fake, db).exit_code == 0
    before = db.read_bytes()
    fake.status = {3: 403}
    r = _blocks(fake, db)
    assert r.exit_code == 3
    assert "rejected the credentials" in r.stderr and "cache is unchanged" in r.stderr
    assert "Traceback" not in r.output + r.stderr
    assert db.read_bytes() == before


def test_missing_credentials_exit_3_like_the_refresh(monkeypatch: pytest.MonkeyPatch,
                                                      tmp_path: Path) -> None:
    import google.auth

    def no_adc(*args: Any, **kwargs: Any) -> Any:
        from google.auth.exceptions import DefaultCredentialsError

        raise DefaultCredentialsError("Your default credentials were not found.")

    monkeypatch.setattr(google.auth, "default", no_adc)
    db = tmp_path / "prices.sqlite"
    r = runner.invoke(app, ["prices", "blocks", "--provider", "gcp", "--cache", str(db)])
    assert r.exit_code == 3
    assert "no GCP credentials found by Application Default Credentials" in r.stderr
    assert not db.exists()
    from ptplan.providers.gcp_dws import fetch_dws

    with pytest.raises(ProviderError, match="gcloud auth application-default login"):
        fetch_dws()


@pytest.mark.parametrize(("args", "message"), [
    (["--provider", "gcp", "--count", "2"], "--count and --duration-hours"),
    (["--provider", "gcp", "--start-after", "2027-01-01"], "--start-after: applies to aws"),
    (["--provider", "aws", "--region", "us-east-1"], "--instance-type: required"),
    (["--provider", "azure"], "--provider: 'azure' is not supported"),
])
def test_bad_requests_exit_2(args: list[str], message: str) -> None:
    r = runner.invoke(app, ["prices", "blocks", *args])
    assert r.exit_code == 2 and message in r.stderr, r.output + r.stderr


def test_embedded_dws_rates_are_their_skus_times_the_machine() -> None:
    """Every row of providers/data/gcp_dws.csv recomputed from the SKU prices its derivation
    names and the machine's shape (providers/gcp_machines.py), and read into the catalog with
    its terms: flex-start at most 7 days, calendar mode in 24-h units up to 90 days."""
    from ptplan.providers.embedded import embedded_catalog

    rows = list(csv.DictReader((ROOT / "providers/data/gcp_dws.csv").read_text().splitlines()))
    for row in rows:
        itype, usd = row["instance_type"], float(row["usd_per_instance_hour"])
        if itype.startswith("a3-highgpu"):
            expected = _machine(itype, A3)
        elif itype.startswith("a2-"):
            expected = _machine(itype, A2)
        else:  # A3 Mega: GPU SKU x 8 + the embedded on-demand VM part of us-central1-a
            gpu = 4.841121 if row["capacity_type"] == "block" else 4.423936
            expected = 8 * gpu + 9.46006
            assert "derived" in row["derivation"] and "upper bound" in row["derivation"]
        assert usd == pytest.approx(expected, abs=1e-6), itype
        assert row["as_of"] and "cloud.google.com" in row["source"]
    booked = {(o.instance_type, o.capacity_type): o for o in embedded_catalog().block_offers
              if o.provider == "gcp"}
    assert len(booked) == len(rows)
    cal = booked[("a3-megagpu-8g", "block")]
    assert (cal.block_unit_hours, cal.block_max_hours, cal.max_start_days) == (24.0, 2160.0, 60)
    flex = booked[("a3-highgpu-8g", "flex_start")]
    assert (flex.block_max_hours, flex.wait_hours, flex.block_unit_hours) == (168.0, 0.0, None)
