"""The run ledger records a plan's costs beyond its GPU pools (issue #25): the spec's
``other_costs`` lines and the CPU pools (sandbox, reward, prep) are the run's own planned cost
lines, actual bill lines of phase ``other`` and of the CPU pools' phases (as ``render`` tags
them) are accepted, and ``runs review`` shows both, summed by hand here, in its runs, groups
and totals. A ledger without them keeps its review as it was (no new keys)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ptplan.cli.app import app

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def invoke(*args: str) -> Any:
    return runner.invoke(app, list(args))


def cents(x: str) -> int:
    return round(float(x) * 100)


@pytest.fixture(scope="module")
def plans(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("beyond")
    out = {}
    for name in ("agentic-swe-rl", "grpo-7b"):
        p = d / f"{name}.json"
        r = invoke("-q", "plan", str(ROOT / "examples" / f"{name}.yaml"), "--format", "json",
                   "--no-timings", "-o", str(p))
        assert r.exit_code == 0, r.output
        out[name] = p
    return out


def _review(url: str) -> dict[str, Any]:
    r = invoke("runs", "review", "--format", "json", "--ledger", url)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_plan_lines_beyond_gpus_in_the_review(plans: dict[str, Path], tmp_path: Path) -> None:
    url = str(tmp_path / "ledger.db")
    plan = json.loads(plans["agentic-swe-rl"].read_text(encoding="utf-8"))
    other = {o["name"]: cents(o["cost_usd"]) for o in plan["other_costs"]}
    cpu = {c["name"]: cents(c["cost_usd"]) for c in plan["cpu_pools"]}
    assert set(other) == {"data_collection", "human_review", "ops"}
    assert other["data_collection"] == 500000  # cents
    assert other["human_review"] == 100000  # 500 samples x $2
    assert set(cpu) >= {"sandbox", "reward"}
    r = invoke("runs", "record", "swe1", "--plan", str(plans["agentic-swe-rl"]),
               "--model-family", "qwen3-32b", "--cost", "rollout-update/on-demand=20000",
               "--cost", "other=6000", "--cost", "sandbox/spot=300.50",
               "--cost", "reward=49.50", "--ledger", url)
    assert r.exit_code == 0, r.output
    # a ledger without such lines keeps its review unchanged
    url2 = str(tmp_path / "plain.db")
    r = invoke("runs", "record", "g1", "--plan", str(plans["grpo-7b"]), "--model-family",
               "qwen2.5-7b", "--cost", "update=100", "--ledger", url2)
    assert r.exit_code == 0, r.output
    plain = _review(url2)
    assert "planned_other_usd" not in plain["totals"]
    assert "planned_lines" not in plain["runs"][0]
    # both runs in one ledger
    r = invoke("runs", "record", "g1", "--plan", str(plans["grpo-7b"]), "--model-family",
               "qwen2.5-7b", "--cost", "update=100", "--ledger", url)
    assert r.exit_code == 0, r.output
    rv = _review(url)
    t = rv["totals"]
    assert cents(t["planned_other_usd"]) == sum(other.values())
    assert cents(t["planned_cpu_usd"]) == sum(cpu.values())
    assert t["actual_other_usd"] == "6000.00" and t["actual_cpu_usd"] == "350.00"
    assert t["actual_usd"] == "26450.00"  # 20000 + 6000 + 300.50 + 49.50 + 100
    grpo_total = json.loads(plans["grpo-7b"].read_text(encoding="utf-8"))["total_cost_usd"]
    assert cents(t["planned_usd"]) == cents(plan["total_cost_usd"]) + cents(grpo_total)
    runs = {r["id"]: r for r in rv["runs"]}
    assert runs["g1"]["planned_other_usd"] == "0.00" and runs["g1"]["planned_lines"] == []
    assert {(x["kind"], x["name"]): cents(x["usd"]) for x in runs["swe1"]["planned_lines"]} \
        == {**{("other", k): v for k, v in other.items()},
            **{("cpu", k): v for k, v in cpu.items()}}
    rl = {g["group"]: g for g in rv["groups"]["method"]}["rl"]
    assert rl["planned_cpu_usd"] == t["planned_cpu_usd"] and rl["actual_cpu_usd"] == "350.00"
    table = invoke("runs", "review", "--ledger", url)
    assert table.exit_code == 0, table.output
    assert f"of which other costs: planned ${t['planned_other_usd']}, actual $6000.00; CPU " \
        f"pools: planned ${t['planned_cpu_usd']}, actual $350.00" in table.stdout
    show = invoke("runs", "show", "swe1", "--ledger", url)
    assert "planned costs beyond the GPU pools" in show.stdout and "data_collection" in \
        show.stdout
    bad = invoke("runs", "record", "x", "--project", "p", "--method", "rl", "--model-family",
                 "f", "--cost", "gpu=5", "--ledger", url)
    assert bad.exit_code == 2 and "a CPU pool (sandbox, reward, prep), other" in bad.stderr
