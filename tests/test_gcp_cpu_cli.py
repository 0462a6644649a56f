"""``ptplan prices refresh --provider gcp`` pulls CPU machine types (N2/C3, issue #25) into the
price cache, and an agentic plan on that cache places its CPU pools on them at the pulled
prices (the local Billing Catalog fake of test_gcp.py, the real client; no network)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from test_gcp import FakeBilling
from typer.testing import CliRunner

from ptplan.cli.app import app

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeBilling]:
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "absent.json"))
    monkeypatch.delenv("PTPLAN_CACHE", raising=False)
    f = FakeBilling()
    yield f
    f.close()


def test_agentic_plan_uses_pulled_cpu_types(fake: FakeBilling, tmp_path: Path) -> None:
    db = tmp_path / "prices.sqlite"
    r = runner.invoke(app, ["prices", "refresh", "--provider", "gcp", "--endpoint", fake.url,
                            "--cache", str(db)])
    assert r.exit_code == 0, r.output + r.stderr
    assert "gcp: 52 offers (30 on-demand, 22 spot)" in r.stdout  # 31 GPU + 21 CPU offers
    from ptplan.providers.registry import load_catalog

    rows = {(o.instance_type, o.region, o.capacity_type): o.usd_per_hour
            for o in load_catalog(str(db)).cpu_offers}
    assert len(rows) == 21  # 7 N2 and 7 C3 types on-demand, 7 N2 spot, all in us-central1
    assert rows[("n2-standard-8", "us-central1", "on_demand")] == pytest.approx(0.388472)
    spec = yaml.safe_load((ROOT / "examples" / "agentic-swe-rl.yaml").read_text())
    spec["placement"] = {"providers": ["gcp"], "gpus": ["H100"]}
    path = tmp_path / "agentic-gcp.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    r = runner.invoke(app, ["plan", str(path), "--catalog", str(db), "--format", "json",
                            "--no-timings"])
    assert r.exit_code == 0, r.stderr
    plan = json.loads(r.stdout)
    assert plan["provider"] == "gcp" and plan["cpu_pools"]
    for c in plan["cpu_pools"]:
        assert c["provider"] == "gcp" and c["region"] == plan["region"]
        assert c["usd_per_hour"] == pytest.approx(
            rows[(c["instance_type"], c["region"], c["capacity_type"])])
