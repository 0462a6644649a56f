"""``ptplan simulate`` and ``ptplan plan --risk``: output, determinism, bad input (one line,
exit 2), progress only on a terminal."""

from __future__ import annotations

import builtins
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from planner_fixtures import small_spec
from test_cli_conventions import _cli
from typer.testing import CliRunner

from ptplan.cli.app import app

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def invoke(*args: str) -> Any:
    return runner.invoke(app, list(args))


def one_error(result: Any, code: int = 2) -> str:
    assert result.exit_code == code, (result.exit_code, result.output)
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.fixture(scope="module")
def grpo_plan(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("sim") / "grpo.json"
    r = invoke("-q", "plan", str(ROOT / "examples/grpo-7b.yaml"), "--format", "json",
               "--no-timings", "-o", str(out))
    assert r.exit_code == 0, r.output
    return str(out)


def test_simulate_reports_the_distributions(grpo_plan: str) -> None:
    r = invoke("simulate", grpo_plan, "--trials", "4000", "--format", "json")
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    for key in ("mean", "ci95_low", "ci95_high", "p50", "p90", "p99"):
        assert key in rep["makespan_hours"] and key in rep["cost_usd"]
    plan = json.loads(Path(grpo_plan).read_text())
    assert rep["makespan_hours"]["p50"] >= rep["overhead"]["base_makespan_hours"] - 1e-6
    assert rep["overhead"]["plan_makespan_hours"] == round(plan["makespan_hours"], 6)
    assert rep["p_deadline_met"] == 1.0 and rep["p_budget_exceeded"] == 0.0
    assert [p["name"] for p in rep["pools"]] == ["rollout", "scoring", "update"]
    table = invoke("simulate", grpo_plan, "--trials", "4000")
    assert table.exit_code == 0
    assert "P90" in table.stdout and "plan expects" in table.stdout
    assert "P(makespan ≤ deadline 72 h) = 1.0000" in table.stdout


@pytest.mark.parametrize("fmt", ["json", "table", "csv"])
def test_same_seed_same_bytes_whatever_the_workers(grpo_plan: str, fmt: str) -> None:
    args = ["simulate", grpo_plan, "--trials", "5000", "--seed", "17", "--correlated", "0.3",
            "--format", fmt]
    a, b = invoke(*args), invoke(*args, "--workers", "2")
    assert a.exit_code == 0 and b.exit_code == 0, (a.output, b.output)
    assert a.stdout == b.stdout
    c = invoke(*args[:5], "18", *args[6:])
    assert c.stdout != a.stdout
    if fmt == "csv":
        assert a.stdout.splitlines()[0] == \
            "trial,makespan_hours,cost_usd,interruptions,fallback_usd"
        assert len(a.stdout.splitlines()) == 5001


def test_correlated_reclaims_widen_the_tail(grpo_plan: str) -> None:
    def p99(*extra: str) -> float:
        r = invoke("simulate", grpo_plan, "--trials", "20000", "--format", "json", *extra)
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout)["makespan_hours"]["max"]

    assert p99("--correlated", "1") >= p99()


def test_chart_is_written(grpo_plan: str, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "h.svg"
    r = invoke("simulate", grpo_plan, "--trials", "2000", "--chart", str(out))
    assert r.exit_code == 0, r.output
    assert out.read_text().startswith("<?xml")
    again = tmp_path / "h2.svg"
    invoke("simulate", grpo_plan, "--trials", "2000", "--chart", str(again))
    assert again.read_bytes() == out.read_bytes()


@pytest.mark.parametrize("args,needle", [
    (["missing.json"], "not found"),
    (["examples/grpo-7b.yaml"], "unknown key"),
    (["@PLAN", "--trials", "0"], "--trials: 0"),
    (["@PLAN", "--trials", "-3"], "--trials: -3"),
    (["@PLAN", "--correlated", "1.5"], "--correlated: 1.5"),
    (["@PLAN", "--correlated", "-0.1"], "--correlated: -0.1"),
    (["@PLAN", "--shortage-hours", "-1"], "--shortage-hours"),
    (["@PLAN", "--workers", "0"], "--workers: 0"),
    (["@PLAN", "--seed", "-1"], "--seed: -1"),
    (["@PLAN", "--trials", "3000000"], "--trials: 3000000"),
    (["@PLAN", "--format", "xml"], "--format"),
    (["@PLAN", "--chart", "h.gif"], "--chart"),
])
def test_bad_input_is_one_line_exit_2(grpo_plan: str, args: list[str], needle: str,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    args = [grpo_plan if a == "@PLAN" else a for a in args]
    assert needle in one_error(invoke("simulate", *args))


def test_ray_without_ray_is_one_line(grpo_plan: str, monkeypatch: pytest.MonkeyPatch) -> None:
    real = builtins.__import__

    def no_ray(name: str, *a: Any, **k: Any) -> Any:
        if name == "ray" or name.startswith("ray."):
            raise ImportError("no ray")
        return real(name, *a, **k)

    monkeypatch.delitem(sys.modules, "ray", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_ray)
    line = one_error(invoke("simulate", grpo_plan, "--ray", "auto"))
    assert "ray package is not installed" in line


def test_not_a_plan_json(tmp_path: Path) -> None:
    bad = tmp_path / "x.json"
    bad.write_text("[1, 2]")
    assert "plan" in one_error(invoke("simulate", str(bad)))
    bad.write_text('{"spec_name": "x"')
    one_error(invoke("simulate", str(bad)))


def test_progress_bar_only_on_a_terminal(grpo_plan: str) -> None:
    args = ("simulate", grpo_plan, "--trials", "400000", "--format", "json")
    out, err = _cli(*args, tty="stderr")
    assert "simulate: trials" in err and out.startswith("{")
    out, err = _cli(*args)
    assert "simulate: trials" not in err and "\r" not in err and out.startswith("{")
    _, err = _cli("-q", *args, tty="stderr")
    assert "simulate: trials" not in err and "simulating" not in err


# ----------------------------------------------------------------------------- plan --risk


def _risky(tmp_path: Path, deadline: float, budget: float | None = None) -> tuple[str, str]:
    """The small GRPO spec on a catalog whose spot nodes are interrupted 0.15 times an hour."""
    from planner_fixtures import small_catalog

    offers = []
    for o in small_catalog().offers:
        row = {"provider": o.provider, "region": o.region, "zone": o.zone,
               "instance_type": o.instance_type, "gpu": o.gpu, "gpus_per_node": o.gpus_per_node,
               "max_nodes": o.max_nodes}
        if o.capacity_type == "spot":
            row.update(spot_usd_per_hour=o.usd_per_hour, spot_interruptions_per_hour=0.15)
        else:
            row["on_demand_usd_per_hour"] = o.usd_per_hour
        offers.append(row)
    cat = tmp_path / "cat.yaml"
    cat.write_text(yaml.safe_dump({"as_of": "2026-11-01", "name": "risky", "offers": offers}))
    spec = tmp_path / "spec.yaml"
    extra = {"budget": {"max_usd": budget}} if budget is not None else {}
    spec.write_text(yaml.safe_dump(small_spec(sla={"deadline_hours": deadline}, **extra)
                                   .model_dump(mode="json", exclude_none=True)))
    return str(spec), str(cat)


@pytest.fixture
def spot_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """``plan --risk`` with spot interruptions alone (the model's interval left out), for the
    tests of the spot tail's tightening."""
    monkeypatch.setattr("ptplan.risk.tighten.with_model_uncertainty", lambda model, plan: model)


def test_plan_risk_pays_for_certainty(tmp_path: Path, spot_only: None) -> None:
    spec, cat = _risky(tmp_path, 1.5)
    base = invoke("-q", "plan", spec, "--catalog", cat, "--format", "json", "--no-timings")
    assert base.exit_code == 0, base.output
    r = invoke("plan", spec, "--catalog", cat, "--risk", "p90", "--trials", "4000",
               "--format", "json", "--no-timings")
    assert r.exit_code == 0, r.output
    chosen, ev = json.loads(r.stdout), json.loads(base.stdout)
    assert float(chosen["total_cost_usd"]) > float(ev["total_cost_usd"])
    assert chosen["deadline_hours"] == 1.5
    statement = chosen["explain"]["summary"][-1]
    assert statement.startswith("risk P90:") and "price of certainty" in statement
    out = tmp_path / "chosen.json"
    out.write_text(r.stdout)
    sim = invoke("simulate", str(out), "--trials", "4000", "--format", "json")
    assert json.loads(sim.stdout)["makespan_hours"]["p90"] <= 1.5
    ok = invoke("check", str(out))
    assert ok.exit_code == 0, ok.output
    table = invoke("plan", spec, "--catalog", cat, "--risk", "p90", "--trials", "4000")
    assert "the price of certainty" in table.stdout and "candidate planned against" in table.stdout


def test_plan_risk_names_the_binding_constraint(tmp_path: Path, spot_only: None) -> None:
    spec, cat = _risky(tmp_path, 1.0)
    line = one_error(invoke("plan", spec, "--catalog", cat, "--risk", "p99.9", "--trials",
                            "2000"), 1)
    assert "deadline binds" in line


def test_plan_risk_budget_binds(tmp_path: Path, spot_only: None) -> None:
    """The expected-value plan is already the cheapest: when its P90 cost is over the budget,
    a tighter budget cannot help."""
    spec, cat = _risky(tmp_path, 6.0, 70.0)
    base = invoke("-q", "plan", spec, "--catalog", cat, "--format", "json")
    assert base.exit_code == 0 and float(json.loads(base.stdout)["total_cost_usd"]) < 70.0
    line = one_error(invoke("plan", spec, "--catalog", cat, "--risk", "p90", "--trials",
                            "2000"), 1)
    assert "budget binds" in line and "deadline binds" not in line


def test_plan_risk_already_met_costs_nothing() -> None:
    r = invoke("plan", str(ROOT / "examples/grpo-7b.yaml"), "--risk", "p99", "--trials",
               "2000", "--format", "json", "--no-timings")
    assert r.exit_code == 0, r.output
    assert "price of certainty is $0.00" in json.loads(r.stdout)["explain"]["summary"][-1]


def test_plan_risk_covers_the_models_uncertainty_and_says_which_dominates() -> None:
    """The quantile holds the model's interval as well as spot interruptions (the examples'
    spot nodes are rarely interrupted, so the model dominates), and says what each adds."""
    from ptplan.core.fit import model_interval

    args = ("plan", str(ROOT / "examples/grpo-7b.yaml"), "--risk", "p90", "--trials", "4000",
            "--format", "json", "--no-timings")
    r = invoke(*args)
    assert r.exit_code == 0, r.output
    p = json.loads(r.stdout)
    line = p["explain"]["summary"][-1]
    assert "at P90 the model's uncertainty adds $" in line and "spot interruptions $" in line
    assert "the model dominates" in line
    unc = p.get("uncertainty") or {}
    low, high = unc.get("factor") or (model_interval("rl").low, model_interval("rl").high)
    assert f"job time ×{low:.3g}–×{high:.3g} at 80 %" in line
    # the P90 makespan holds the model's P90: about high × the plan's interruption-free run
    p90 = float(line.split("has P90 makespan ")[1].split(" h")[0])
    assert p90 >= 0.95 * high * float(p["makespan_hours"]) * 0.97
    assert invoke(*args).stdout == r.stdout  # seeded


@pytest.mark.parametrize("risk", ["p0", "p100", "90", "x90", "p"])
def test_plan_risk_bad_quantile(risk: str) -> None:
    line = one_error(invoke("plan", str(ROOT / "examples/sft-8b.yaml"), "--risk", risk))
    assert "--risk" in line


def test_plan_risk_bad_options() -> None:
    spec = str(ROOT / "examples/sft-8b.yaml")
    assert "--correlated" in one_error(invoke("plan", spec, "--risk", "p90", "--correlated",
                                              "2"))
    assert "--trials" in one_error(invoke("plan", spec, "--risk", "p90", "--trials", "0"))
    assert "--seed" in one_error(invoke("plan", spec, "--risk", "p90", "--seed", "-2"))
    assert "--objective" in one_error(invoke("plan", spec, "--risk", "p90", "--objective",
                                             "time"))
