"""The key figures of every example, pinned: ``tests/golden/figures/<example>.json``.

For each file in ``examples/`` (a project spec is planned with ``ptplan plan``; the portfolio is
run through ``ptplan reserve``) the figures a user acts on are compared exactly: money to the
cent, hours to 6 decimals, the chosen instance, capacity type, precision and nodes. A change shows
up in review as a diff of these small files, with the reason in the commit message.

Regenerate deliberately, after checking the change is intended (one command for every golden of
the suite; see docs/testing.md)::

    PTPLAN_UPDATE_GOLDEN=1 python -m pytest tests/test_example_figures.py \
        tests/test_golden_cli.py tests/test_render.py tests/test_report_html.py
"""

from __future__ import annotations

import difflib
import json
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ptplan.cli.app import app

pytestmark = pytest.mark.shipped_framework
"""The examples as a user plans them: specs without ``framework:`` take verl==0.9."""

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
GOLDEN = ROOT / "tests" / "golden" / "figures"
UPDATE = os.environ.get("PTPLAN_UPDATE_GOLDEN") == "1"
TODAY = "2026-12-03"
PORTFOLIOS = {"portfolio.yaml", "portfolio-commitments.yaml"}
"""Examples that are ``ptplan reserve`` portfolios; ``campaign-*`` are campaigns (``ptplan plan``
detects them); every other example is a project spec."""


def is_campaign(name: str) -> bool:
    return name.startswith("campaign-")


def _h(x: float | None) -> str | None:
    return None if x is None else f"{x:.6f}"


def plan_figures(p: dict[str, Any]) -> dict[str, Any]:
    """Total, compute, storage, network, idle; makespan; per pool its allocations (instance,
    capacity type, zone, nodes); per phase its pool, precision, GPU-hours, busy hours, cost."""
    return {
        "total_cost_usd": p["total_cost_usd"], "compute_cost_usd": p["compute_cost_usd"],
        "storage_cost_usd": p["storage_cost_usd"], "network_cost_usd": p["network_cost_usd"],
        "idle_cost_usd": p["idle_cost_usd"], "makespan_hours": _h(p["makespan_hours"]),
        "pipeline_mode": p["pipeline_mode"], "layout": p["layout"],
        "provider": p["provider"], "region": p["region"], "zone": p["zone"],
        "pools": [{
            "name": pool["name"], "gpu": pool["gpu"], "nodes": pool["nodes"],
            "usd_per_hour": f"{pool['usd_per_hour']:.6f}", "cost_usd": pool["cost_usd"],
            "busy_hours": _h(pool["busy_hours"]),
            "allocations": [f"{a['nodes']} x {a['instance_type']} {a['capacity_type']}"
                            f"{' @' + a['zone'] if a['zone'] else ''}"
                            for a in pool["allocations"]],
        } for pool in p["pools"]],
        "phases": [{
            "name": ph["name"], "pool": ph["pool"], "precision": ph["precision"],
            "gpu_hours": _h(ph["gpu_hours"]), "busy_hours": _h(ph["busy_hours"]),
            "cost_usd": ph["cost_usd"],
        } for ph in p["phases"]],
        "storage": {i["data_class"]: f"{i['tier']} {i['cost_usd']}" for i in p["storage"]},
        "network": [f"{i['flow']} {i['path']} {i['gb']:.6f} GB {i['cost_usd']}"
                    for i in p["network"]],
        **({"cpu_pools": [f"{c['name']}: {c['nodes']} x {c['instance_type']} "
                          f"{c['capacity_type']} {c['node_hours']:.6f} node-h {c['cost_usd']}"
                          for c in p["cpu_pools"]]} if p.get("cpu_pools") else {}),
    }


def reserve_figures(r: dict[str, Any]) -> dict[str, Any]:
    """Expected cost and its alternatives, upfront due, what is bought, per-scenario totals."""
    return {
        "expected_total_cost_usd": r["expected_total_cost_usd"],
        "existing_only_cost_usd": r["existing_only_cost_usd"],
        "on_demand_only_cost_usd": r["on_demand_only_cost_usd"],
        "upfront_due_now_usd": r["upfront_due_now_usd"],
        "purchases": {row["product"]: f"{row['count']} {row['horizon_cost_usd']}"
                      for row in r["purchases"]},
        "scenarios": {s["name"]: s["total_cost_usd"] for s in r["scenarios"]},
        **({"commitments": {c["commitment"]: f"{c['usd_per_hour']} {c['horizon_cost_usd']}"
                            for c in r["commitments"]}} if r.get("commitments") else {}),
    }


def campaign_figures(r: dict[str, Any]) -> dict[str, Any]:
    """Total, hand-overs, makespan, critical path; per stage its chosen point, schedule, place
    and plan total."""
    return {
        "total_cost_usd": f"{r['total_cost_usd']:.2f}",
        "handover_cost_usd": f"{r['handover_cost_usd']:.2f}",
        "makespan_hours": _h(r["makespan_hours"]), "critical_path": r["critical_path"],
        "stages": [f"{s['name']}: point {s['point']} of {len(s['frontier'])}, "
                   f"{s['start_hours']:.6f}-{s['end_hours']:.6f} h, {s['plan']['provider']}:"
                   f"{s['plan']['region']}, ${s['plan']['total_cost_usd']}" for s in r["stages"]],
        "handovers": [f"{h['from']} -> {h['to']} {h['path']} {h['gb']:.6f} GB {h['cost_usd']}"
                      for h in r["handovers"]],
    }


def _figures(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.setenv("PTPLAN_TODAY", TODAY)
    out = tmp_path / "out.json"
    cmd = ["reserve", str(EXAMPLES / name), "--no-timings"] if name in PORTFOLIOS else \
        ["plan", str(EXAMPLES / name), "--no-timings"]
    result = CliRunner().invoke(app, [*cmd, "--format", "json", "-o", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text(encoding="utf-8"))
    if is_campaign(name):
        return campaign_figures(data)
    return reserve_figures(data) if name in PORTFOLIOS else plan_figures(data)


EXAMPLE_FILES = sorted(p.name for p in EXAMPLES.glob("*.yaml"))


def test_every_example_has_a_golden() -> None:
    assert EXAMPLE_FILES, "no examples found"
    if UPDATE:
        return
    have = {p.name for p in GOLDEN.glob("*.json")}
    want = {f"{Path(n).stem}.json" for n in EXAMPLE_FILES}
    assert want == have, f"missing: {want - have}, stale: {have - want}"


@pytest.mark.parametrize("name", EXAMPLE_FILES)
def test_example_figures(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = json.dumps(_figures(name, tmp_path, monkeypatch), indent=1) + "\n"
    golden = GOLDEN / f"{Path(name).stem}.json"
    if UPDATE:
        GOLDEN.mkdir(parents=True, exist_ok=True)
        golden.write_text(text, encoding="utf-8", newline="\n")
    expected = golden.read_text(encoding="utf-8")
    if text != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(True), text.splitlines(True),
                                            f"golden/figures/{golden.name}", "now", n=1))
        pytest.fail(f"{name}: key figures moved (PTPLAN_UPDATE_GOLDEN=1 regenerates once the "
                    f"change is intended; give the reason in the commit):\n{diff[:6000]}")
