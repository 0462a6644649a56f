"""``runs review``: each run's planned figures with the plan's 80 % interval and whether the
actual landed inside it (optimizer/ledger/review.py ``interval_json``), by hand; the table and
Markdown section; the CLI on a recorded plan."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ledger_seed import _run
from typer.testing import CliRunner

from ptplan.cli.app import app
from ptplan.core.fit import model_interval
from ptplan.ledger.records import RunRecord
from ptplan.ledger.review import interval_json, planned_interval, review
from ptplan.report.tables_runs import review_markdown, review_table

ROOT = Path(__file__).resolve().parents[1]


def _with_plan(run: RunRecord, plan: dict[str, Any]) -> RunRecord:
    return run.model_copy(update={"plan": plan})


UNC = {"level": 0.8, "total_cost_usd": ["900.00", "2300.00"], "makespan_hours": [9.0, 23.0],
       "basis": "the plan's own"}


@pytest.mark.parametrize("actual,wall,inside", [
    ("1100.00", 11.0, (True, True)), ("2400.00", 30.0, (False, False)),
    ("899.99", 9.0, (False, True)), ("2300.00", 23.0, (True, True))])
def test_interval_from_the_plans_uncertainty(actual: str, wall: float,
                                             inside: tuple[bool, bool]) -> None:
    run = _with_plan(_run("a", "sft", "llama-8b", {"update/spot": actual}, "1000.00",
                          hours=(10.0, wall)), {"uncertainty": UNC})
    got = interval_json(run)
    assert got["planned_interval"] == {"level": 0.8, "usd": ["900.00", "2300.00"],
                                       "hours": [9.0, 23.0], "basis": "the plan's own"}
    assert (got["within_interval"]["cost"], got["within_interval"]["hours"]) == inside


def test_interval_from_the_model_when_the_plan_carries_none() -> None:
    """By hand: hours × [low, high]; cost = fixed + time-billed (compute + disks) × [low, high]."""
    plan = {"compute_cost_usd": "800.00", "disk_cost_usd": "50.00", "storage_cost_usd": "150.00"}
    run = _with_plan(_run("b", "rl", "qwen-7b", {"update/spot": "1000.00"}, "1000.00",
                          hours=(10.0, 12.0)), plan)
    iv = model_interval("rl")
    got = planned_interval(run)
    assert got is not None and got["level"] == iv.level
    assert got["usd"] == pytest.approx([150 + 850 * iv.low, 150 + 850 * iv.high])
    assert got["hours"] == pytest.approx([10 * iv.low, 10 * iv.high])
    assert got["basis"].startswith("the model's interval for rl (the plan carries none)")
    w = interval_json(run)["within_interval"]
    assert w["cost"] == (150 + 850 * iv.low <= 1000 <= 150 + 850 * iv.high)
    assert w["hours"] == (10 * iv.low <= 12 <= 10 * iv.high)


def test_no_plan_no_interval_and_unknowns_stay_unknown() -> None:
    run = _run("c", "sft", "llama-8b", {"update/spot": "10.00"}, None, hours=None)
    assert interval_json(run) == {"planned_interval": None,
                                  "within_interval": {"cost": None, "hours": None}}
    run = _with_plan(_run("d", "sft", "llama-8b", {}, "1000.00", hours=(10.0, 10.0)),
                     {"uncertainty": UNC}).model_copy(update={"wall_hours": None})
    assert interval_json(run)["within_interval"] == {"cost": None, "hours": None}
    bad = dict(UNC, total_cost_usd=["nan", "1"])
    run = _with_plan(_run("e", "sft", "llama-8b", {"update/spot": "1.00"}, "1000.00"),
                     {"uncertainty": bad})
    got = planned_interval(run)  # a damaged interval: the model's, on the whole total
    iv = model_interval("sft")
    assert got is not None and got["usd"] == pytest.approx([1000 * iv.low, 1000 * iv.high])


def test_review_json_table_and_markdown() -> None:
    runs = [_with_plan(_run("in", "sft", "llama-8b", {"update/spot": "1100.00"}, "1000.00",
                            hours=(10.0, 11.0)), {"uncertainty": UNC}),
            _with_plan(_run("out", "sft", "llama-8b", {"update/spot": "2500.00"}, "1000.00",
                            hours=(10.0, 11.0)), {"uncertainty": UNC}),
            _run("none", "sft", "llama-8b", {"update/spot": "5.00"}, None)]
    rv = review(runs)
    by = {r["id"]: r for r in rv["runs"]}
    assert by["in"]["within_interval"] == {"cost": True, "hours": True}
    assert by["out"]["within_interval"]["cost"] is False
    assert by["none"]["planned_interval"] is None
    table = review_table(rv)
    assert "runs: planned with the 80 % interval (actual cost inside for 1 of 2)" in table
    assert "900.00–2300.00" in table and "9–23" in table
    md = review_markdown(rv)
    assert "## runs: planned with the 80 % interval" in md
    assert json.loads(json.dumps(rv)) == rv  # JSON-ready


def test_cli_review_of_a_recorded_plan(tmp_path: Path) -> None:
    runner = CliRunner()
    plan = tmp_path / "plan.json"
    r = runner.invoke(app, ["-q", "plan", str(ROOT / "examples/sft-8b.yaml"), "--format",
                            "json", "--no-timings", "-o", str(plan)])
    assert r.exit_code == 0, r.output
    p = json.loads(plan.read_text())
    ledger = str(tmp_path / "ledger.sqlite")
    r = runner.invoke(app, ["runs", "record", "sft-1", "--plan", str(plan), "--model-family",
                            "llama-8b", "--cost", f"update/spot={p['total_cost_usd']}",
                            "--wall-hours", str(p["makespan_hours"]), "--ledger", ledger])
    assert r.exit_code == 0, r.output
    out = runner.invoke(app, ["runs", "review", "--ledger", ledger, "--format", "json"])
    assert out.exit_code == 0, out.output
    (row,) = json.loads(out.stdout)["runs"]
    iv = row["planned_interval"]
    lo, hi = float(iv["usd"][0]), float(iv["usd"][1])
    assert lo <= float(p["total_cost_usd"]) <= hi or iv["usd"][0] == iv["usd"][1]
    unc = p.get("uncertainty")
    if unc is not None:
        assert iv["usd"] == unc["total_cost_usd"]
    table = runner.invoke(app, ["runs", "review", "--ledger", ledger])
    assert "runs: planned with the 80 % interval" in table.stdout
