"""The plan's 80 % interval (issue #39, schema 8): its arithmetic from the stored fit, the
``uncertainty`` rule of ``check`` (a tampered plan fails, the real one passes), the outputs that
show it (plan table and --explain, pareto, compare, HTML), and its narrowing by a team's own
ledger runs (``runs calibrate`` records each run's rate). Expectations are computed from
:func:`ptplan.core.fit.model_interval`, never hard-coded: the stored fit moves."""

from __future__ import annotations

import copy
import json
import statistics
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

import ptplan
from ptplan.cli.app import app
from ptplan.core.fit import LEVEL, model_interval
from ptplan.planfile.fields import usd
from ptplan.planfile.rules_uncertainty import check_uncertainty
from ptplan.planfile.schema import SCHEMA_VERSION, Plan
from ptplan.planfile.verify import verify_plan

pytestmark = pytest.mark.fitted  # the model as shipped (module-scoped plans: one fit throughout)
ROOT = Path(__file__).resolve().parents[1]
EX = ROOT / "examples"
runner = CliRunner()
RUNS = ["t1", "t2", "t3", "t4", "t5"]
RATES = [2900.0, 3000.0, 3050.0, 3100.0, 3200.0]


def invoke(*args: str) -> Any:
    return runner.invoke(app, list(args))


@pytest.fixture(scope="module")
def sft() -> Plan:
    return ptplan.plan(ptplan.load_spec(str(EX / "sft-8b.yaml")), ptplan.load_catalog("embedded"),
                       timings=False)


def _spec_h100(d: Path, calibration: list[dict[str, Any]] | None = None) -> Path:
    spec = yaml.safe_load((EX / "sft-8b.yaml").read_text(encoding="utf-8"))
    spec.setdefault("placement", {})["gpus"] = ["H100"]
    if calibration is not None:
        spec["calibration"] = calibration
    path = d / "sft-h100.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Plan, Plan]:
    """The SFT example on H100, without and with a measured update of five runs."""
    d = tmp_path_factory.mktemp("unc")
    cat = ptplan.load_catalog("embedded")
    base = ptplan.plan(ptplan.load_spec(str(_spec_h100(d))), cat, timings=False)
    upd = next(p for p in base.phases if p.name == "update")
    entry = {"phase": "update", "gpu": "H100", "precision": upd.precision,
             "tokens_per_second_per_gpu": statistics.median(RATES), "runs": RUNS,
             "run_rates": RATES}
    cal = ptplan.plan(ptplan.load_spec(str(_spec_h100(d, [entry]))), cat, timings=False)
    return base, cal


def _fixed_and_timed(p: Plan) -> tuple[Decimal, Decimal]:
    timed = Decimal(p.compute_cost_usd) + Decimal(p.disk_cost_usd) \
        + Decimal(p.cpu_cost_usd or "0") \
        + sum((Decimal(i.cost_usd) for i in p.other_costs or [] if i.basis == "per_hour"),
              Decimal(0))
    return Decimal(p.total_cost_usd) - timed, timed


def test_plan_carries_the_fit_interval(sft: Plan) -> None:
    iv = model_interval(sft.method)
    u = sft.uncertainty
    assert sft.schema_version == SCHEMA_VERSION == 9 and u is not None
    assert u.level == LEVEL == 0.8
    assert u.model_factor == pytest.approx([iv.low, iv.high])
    assert u.factor == pytest.approx([iv.low, iv.high])  # nothing calibrated
    assert (u.family, u.cases, u.calibrated_share, u.calibration_runs) == (iv.family, iv.cases,
                                                                           0.0, 0)
    assert u.makespan_hours == pytest.approx([sft.makespan_hours * iv.low,
                                              sft.makespan_hours * iv.high])
    fixed, timed = _fixed_and_timed(sft)
    assert Decimal(u.time_cost_usd) == timed and fixed >= 0
    want = [usd(float(fixed) + float(timed) * f) for f in (iv.low, iv.high)]
    assert u.total_cost_usd == want
    assert f"{iv.cases} cases" in u.basis and "unchanged" in u.basis and "80 %" in u.basis
    assert verify_plan(sft) == [] and check_uncertainty(sft) == []


def test_same_inputs_same_bytes(sft: Plan) -> None:
    again = ptplan.plan(ptplan.load_spec(str(EX / "sft-8b.yaml")),
                        ptplan.load_catalog("embedded"), timings=False)
    assert again.to_json() == sft.to_json()


@pytest.mark.parametrize("edit", ["total_high", "total_low", "makespan", "factor", "model",
                                  "share", "timed", "level", "missing", "old_schema"])
def test_tampered_interval_fails_check(edit: str, sft: Plan, tmp_path: Path) -> None:
    good = json.loads(sft.to_json())
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(good), encoding="utf-8")
    r = invoke("check", str(path))
    assert r.exit_code == 0 and r.output.startswith("ok:"), r.output
    bad = copy.deepcopy(good)
    u = bad["uncertainty"]
    if edit == "total_high":
        u["total_cost_usd"][1] = str(Decimal(u["total_cost_usd"][1]) + 5)
    elif edit == "total_low":
        u["total_cost_usd"][0] = "0.00"
    elif edit == "makespan":
        u["makespan_hours"][1] *= 0.9
    elif edit == "factor":
        u["factor"] = [1.0, 1.0]
    elif edit == "model":  # a narrower interval than the stored fit gives
        u["model_factor"] = [1.0, 1.1]
    elif edit == "share":
        u["calibrated_share"] = 0.5
    elif edit == "timed":
        u["time_cost_usd"] = "1.00"
    elif edit == "level":
        u["level"] = 0.5
    elif edit == "missing":
        del bad["uncertainty"]
    else:
        bad["schema_version"] = 7
    path.write_text(json.dumps(bad), encoding="utf-8")
    r = invoke("check", str(path))
    assert r.exit_code == 1, r.output
    assert "violation: uncertainty: " in r.output and "Traceback" not in r.output


@pytest.mark.parametrize("name", ["grpo-7b-gcp-catalog-edges.json", "grpo-7b-schema3.json"])
def test_older_plans_check_as_before(name: str) -> None:
    """The frozen fixtures written before schema 8 (tests/data/plans/README.md)."""
    raw = json.loads((ROOT / "tests/data/plans" / name).read_text(encoding="utf-8"))
    plan = Plan.model_validate(raw)
    assert plan.schema_version < 8 and plan.uncertainty is None
    assert check_uncertainty(plan) == []
    assert "uncertainty" not in plan.to_json()


def test_plan_table_and_explain_show_the_interval(sft: Plan) -> None:
    from ptplan.report.tables import plan_markdown, plan_table

    u = sft.uncertainty
    assert u is not None
    lo, hi = (f"${Decimal(x):,.0f}" for x in u.total_cost_usd)
    text = plan_table(sft)
    assert f"total ${sft.total_cost_usd} (80 %: {lo}–{hi})" in text
    assert "uncertainty:" not in text
    explained = plan_table(sft, explain=True)
    assert "uncertainty:" in explained and u.basis[:60] in explained
    assert f"(80 %: {lo}–{hi})" in plan_markdown(sft)


def test_html_report_shows_the_interval(sft: Plan) -> None:
    from ptplan.report.html import render_page
    from ptplan.report.html_plan import plan_doc

    u = sft.uncertainty
    assert u is not None
    page = render_page([plan_doc(json.loads(sft.to_json()))])
    lo, hi = (f"${Decimal(x):,.0f}" for x in u.total_cost_usd)
    assert f"80 %: {lo}–{hi}" in page


def test_pareto_points_carry_their_plans_interval(tmp_path: Path) -> None:
    r = invoke("-q", "pareto", str(EX / "sft-8b.yaml"), "--points", "2", "--format", "json")
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    assert report["schema_version"] == 3
    iv = model_interval("sft")
    for pt in report["points"]:
        u = pt["uncertainty"]
        assert u["level"] == LEVEL
        assert u["makespan_hours"] == pytest.approx([pt["makespan_hours"] * iv.low,
                                                     pt["makespan_hours"] * iv.high])
        assert float(u["total_cost_usd"][0]) <= float(pt["total_cost_usd"]) * max(1, iv.low) \
            + 0.01
    r = invoke("-q", "pareto", str(EX / "sft-8b.yaml"), "--points", "2")
    assert r.exit_code == 0 and "(80 %: $" in r.stdout and "80 % interval" in r.stdout


def test_calibration_narrows_the_interval(calibrated: tuple[Plan, Plan]) -> None:
    base, cal = calibrated
    iv = model_interval("sft")
    ub, uc = base.uncertainty, cal.uncertainty
    assert ub is not None and uc is not None and ub.calibration_runs == 0
    rec = cal.calibration[0]
    assert rec.run_rates == RATES and rec.runs == RUNS
    ratios = sorted(rec.measured_tokens_per_second_per_gpu / r for r in RATES)
    q = statistics.quantiles(ratios, n=10, method="inclusive")
    upd = next(p for p in cal.phases if p.name == "update")
    assert upd.calibrated
    share = upd.gpu_hours / sum(p.gpu_hours for p in cal.phases)
    assert uc.calibrated_share == pytest.approx(share) and uc.calibration_runs == 5
    want = [(1 - share) * iv.low + share * q[0], (1 - share) * iv.high + share * q[-1]]
    assert uc.factor == pytest.approx(want)
    assert uc.factor[1] - uc.factor[0] < ub.factor[1] - ub.factor[0]
    assert "calibration from 5 ledger runs" in uc.basis and "narrows the 80 % interval from" \
        in uc.basis
    # the calibration follows the model's own interval in the basis, with the share it covers
    assert uc.basis.startswith(f"80 % interval of the demand model for sft: ×{iv.low:.3f}"
                               .rstrip("0").rstrip("."))
    assert f"; {100 * share:.0f} % of the GPU-hours)" in uc.basis
    assert verify_plan(cal) == []
    from ptplan.report.tables import plan_table

    assert "calibrated from 5 ledger runs" in plan_table(cal)
    assert "calibration from 5 ledger runs narrows" in plan_table(cal, explain=True)


def test_calibration_tampered_rates_fail_check(calibrated: tuple[Plan, Plan]) -> None:
    _, cal = calibrated
    raw = json.loads(cal.to_json())
    raw["calibration"][0]["run_rates"] = [r * 1.5 if i == 0 else r
                                          for i, r in enumerate(RATES)]
    got = check_uncertainty(Plan.model_validate(raw))
    assert any(x.startswith("uncertainty: factor") for x in got), got


def test_fewer_than_three_runs_keep_the_suite_interval(tmp_path: Path) -> None:
    iv = model_interval("sft")
    entry = {"phase": "update", "gpu": "H100", "precision": "bf16",
             "tokens_per_second_per_gpu": 3000.0, "runs": ["a", "b"],
             "run_rates": [2900.0, 3100.0]}
    p = ptplan.plan(ptplan.load_spec(str(_spec_h100(tmp_path, [entry]))),
                    ptplan.load_catalog("embedded"), timings=False)
    assert p.uncertainty is not None and p.uncertainty.calibration_runs == 0
    assert p.uncertainty.factor == pytest.approx([iv.low, iv.high])


def test_run_rates_per_run_or_a_one_line_error(tmp_path: Path) -> None:
    entry = {"phase": "update", "gpu": "H100", "precision": "bf16",
             "tokens_per_second_per_gpu": 3000.0, "runs": ["a", "b"], "run_rates": [1.0]}
    r = invoke("plan", str(_spec_h100(tmp_path, [entry])))
    assert r.exit_code == 2 and "Traceback" not in r.output
    errors = [x for x in r.stderr.splitlines() if x.startswith("error: ")]
    assert len(errors) == 1 and "run_rates has 1 rates for 2 runs" in errors[0], r.stderr


def test_spec_digest_unchanged_without_run_rates() -> None:
    from ptplan.planfile.digest import spec_digest

    spec = ptplan.load_spec(str(EX / "sft-8b.yaml"))
    dump = spec.model_dump(mode="json")
    entry = {"phase": "update", "gpu": "H100", "precision": "bf16",
             "tokens_per_second_per_gpu": 3000.0, "runs": [], "spread": None, "steps": None}
    with_none = {**dump, "calibration": [{**entry, "run_rates": None}]}
    assert spec_digest(with_none) == spec_digest({**dump, "calibration": [entry]})


def test_runs_calibrate_records_each_runs_rate(tmp_path: Path) -> None:
    """Three ledger runs timed at 1.9, 2.0 and 2.1 x the planned update: the entry lists each
    run's rate in the order of its runs, and the plan made with it narrows its interval."""
    spec = _spec_h100(tmp_path)
    plan = tmp_path / "plan.json"
    r = invoke("-q", "plan", str(spec), "--format", "json", "--no-timings", "-o", str(plan))
    assert r.exit_code == 0, r.output
    p = json.loads(plan.read_text(encoding="utf-8"))
    update = next(x for x in p["phases"] if x["name"] == "update")
    step = update["busy_hours"] * 3600 / p["steps"]
    ledger = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    for run_id, slow in (("s1", 1.9), ("s2", 2.0), ("s3", 2.1)):
        r = invoke("runs", "record", run_id, "--plan", str(plan), "--model-family", "q",
                   "--cost", "update/on-demand=100", "--ledger", ledger)
        assert r.exit_code == 0, r.output
        f = tmp_path / f"{run_id}.jsonl"
        f.write_text("".join(json.dumps({"step": s, "data": {
            "timing_s/update_actor": step * slow}}) + "\n" for s in range(1, 4)),
            encoding="utf-8")
        assert invoke("runs", "import-metrics", run_id, "--jsonl", str(f), "--ledger",
                      ledger).exit_code == 0
    cal = tmp_path / "cal.yaml"
    r = invoke("runs", "calibrate", "-o", str(cal), "--ledger", ledger)
    assert r.exit_code == 0, r.output
    (entry,) = yaml.safe_load(cal.read_text(encoding="utf-8"))["calibration"]
    assert entry["runs"] == ["s1", "s2", "s3"] and len(entry["run_rates"]) == 3
    assert entry["run_rates"][0] > entry["run_rates"][1] > entry["run_rates"][2]
    assert entry["tokens_per_second_per_gpu"] == pytest.approx(entry["run_rates"][1], rel=1e-5)
    out = tmp_path / "calibrated.json"
    r = invoke("-q", "plan", str(spec), "--calibration", str(cal), "--format", "json",
               "--no-timings", "-o", str(out))
    assert r.exit_code == 0, r.output
    new = json.loads(out.read_text(encoding="utf-8"))
    assert new["calibration"][0]["run_rates"] == entry["run_rates"]
    assert "calibration from 3 ledger runs narrows" in new["uncertainty"]["basis"]
    assert invoke("check", str(out)).exit_code == 0
