"""``ptplan runs ...`` end to end on SQLite and PostgreSQL: record from a plan and a tagged
bill, import metrics, list/show/export/review, calibrate and re-plan toward the recorded
timings; bad input is one line, exit 2, and leaves the ledger as it was."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import ledger_support
import pytest
import yaml
from typer.testing import CliRunner

from ptplan.cli.app import app

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()
ledger_url = ledger_support.ledger_url
pg_server = ledger_support.pg_server


def invoke(*args: str) -> Any:
    return runner.invoke(app, list(args))


def one_error(result: Any, code: int = 2) -> str:
    assert result.exit_code == code, (result.exit_code, result.output)
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.fixture(scope="module")
def grpo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The GRPO example on H100 only (so that a calibrated plan stays on the same GPU)."""
    d = tmp_path_factory.mktemp("runs")
    spec = yaml.safe_load((ROOT / "examples/grpo-7b.yaml").read_text(encoding="utf-8"))
    spec["placement"]["gpus"] = ["H100"]
    spec_path = d / "grpo-h100.yaml"
    spec_path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    plan = d / "plan.json"
    r = invoke("-q", "plan", str(spec_path), "--format", "json", "--no-timings", "-o", str(plan))
    assert r.exit_code == 0, r.output
    return spec_path, plan


def bill(path: Path, project: str = "grpo-7b-math") -> Path:
    path.write_text(
        "service,usd,ptplan-project,ptplan-method,ptplan-phase,ptplan-capacity-type\n"
        f"ec2,700.25,{project},rl,rollout-eval-weight_sync,spot\n"
        f"ec2,300,{project},rl,rollout-eval-weight_sync,spot\n"
        f"ec2,410.10,{project},rl,update-checkpoint,on-demand\n"
        f"s3,12.5,{project},rl,all,mixed\n"
        "ec2,999,other-project,rl,update,spot\n", encoding="utf-8")
    return path


def export(url: str) -> str:
    r = invoke("runs", "export", "--ledger", url, "--metrics")
    assert r.exit_code == 0, r.output
    return r.stdout


def test_record_import_show_review_export(ledger_url: str, grpo: tuple[Path, Path],
                                          tmp_path: Path) -> None:
    spec, plan = grpo
    b = bill(tmp_path / "bill.csv")
    r = invoke("runs", "record", "g1", "--plan", str(plan), "--spec", str(spec), "--bill",
               str(b), "--model-family", "qwen2.5-7b", "--target", "math500=52.0:61.5",
               "--general", "mmlu=71:70.5", "--wall-hours", "20.5", "--date", "2026-11-30",
               "--ledger", ledger_url)
    assert r.exit_code == 0, r.output
    assert "recorded run g1 (grpo-7b-math, rl, actual $1422.85)" in r.stderr
    verl = tmp_path / "verl.jsonl"
    verl.write_text("".join(json.dumps({"step": s, "data": {
        "timing_s/gen": 150.0, "timing_s/update_actor": 200.0, "perf/throughput": 900.0}})
        + "\n" for s in range(1, 4)), encoding="utf-8")
    r = invoke("runs", "import-metrics", "g1", "--jsonl", str(verl), "--ledger", ledger_url)
    assert r.exit_code == 0, r.output
    assert "imported 9 values of 3 metrics for run g1 (phases: rollout, update)" in r.stderr
    r = invoke("runs", "show", "g1", "--format", "json", "--ledger", ledger_url)
    run = json.loads(r.stdout)["runs"][0]
    assert run["costs"] == [
        {"phase": "all", "capacity_type": "mixed", "usd": "12.50"},
        {"phase": "rollout-eval-weight_sync", "capacity_type": "spot", "usd": "1000.25"},
        {"phase": "update-checkpoint", "capacity_type": "on_demand", "usd": "410.10"}]
    assert run["tags"] == {"ptplan-method": "rl", "ptplan-project": "grpo-7b-math"}
    assert run["plan"]["spec_name"] == "grpo-7b-math" and len(run["metrics"]) == 9
    r = invoke("runs", "show", "g1", "--ledger", ledger_url)
    assert "rollout" in r.stdout and "150.00" in r.stdout
    r = invoke("runs", "list", "--format", "json", "--ledger", ledger_url)
    assert [x["actual_usd"] for x in json.loads(r.stdout)] == ["1422.85"]
    r1 = invoke("runs", "review", "--format", "markdown", "--ledger", ledger_url)
    r2 = invoke("runs", "review", "--format", "markdown", "--ledger", ledger_url)
    assert r1.exit_code == 0 and r1.stdout == r2.stdout  # deterministic
    assert "| g1 | rl/grpo | qwen2.5-7b | kept |" in r1.stdout
    rv = json.loads(invoke("runs", "review", "--format", "json", "--ledger",
                           ledger_url).stdout)
    assert rv["runs"][0]["target_gain"] == 9.5
    assert rv["runs"][0]["cost_per_point_usd"] == "149.77"  # 1422.85 / 9.5
    csv_text = invoke("runs", "export", "--format", "csv", "--ledger", ledger_url).stdout
    assert csv_text.splitlines()[1].startswith("g1,2026-11-30,grpo-7b-math,rl,grpo,qwen2.5-7b,")


def test_bad_input_is_one_line_and_leaves_the_ledger(ledger_url: str, grpo: tuple[Path, Path],
                                                     tmp_path: Path) -> None:
    _, plan = grpo
    ok = invoke("runs", "record", "g1", "--plan", str(plan), "--model-family", "q",
                "--cost", "update/spot=10", "--ledger", ledger_url)
    assert ok.exit_code == 0, ok.output
    before = export(ledger_url)
    unmapped = tmp_path / "other.jsonl"
    unmapped.write_text('{"step": 1, "data": {"loss": 1.0}}\n', encoding="utf-8")
    cases = {
        "unknown run 'g2'": ("runs", "show", "g2"),
        "unknown run 'nope'": ("runs", "import-metrics", "nope", "--jsonl", str(unmapped)),
        "no metric maps to a phase": ("runs", "import-metrics", "g1", "--jsonl",
                                      str(unmapped)),
        "no row's tags match the run (ptplan-project=grpo-7b-math": (
            "runs", "record", "g3", "--plan", str(plan), "--model-family", "q", "--bill",
            str(bill(tmp_path / "b.csv", "someone-else"))),
        "already in the ledger": ("runs", "record", "g1", "--plan", str(plan),
                                  "--model-family", "q"),
        "--repairs: unknown run 'g9'": ("runs", "record", "g4", "--plan", str(plan),
                                        "--model-family", "q", "--repairs", "g9"),
        "--cost 'update=ten': cost 'ten' is not a number": (
            "runs", "record", "g5", "--plan", str(plan), "--model-family", "q", "--cost",
            "update=ten"),
        "--target: 'math500=1'": ("runs", "record", "g6", "--plan", str(plan),
                                  "--model-family", "q", "--target", "math500=1"),
        "is project 'sft-8b-chat'": ("runs", "record", "g7", "--plan", str(plan), "--spec",
                                     str(ROOT / "examples/sft-8b.yaml"), "--model-family",
                                     "q"),
        "no run has both a plan and per-step phase timings": ("runs", "calibrate"),
        "--outcome: unknown value 'lost'": ("runs", "record", "g8", "--plan", str(plan),
                                            "--model-family", "q", "--outcome", "lost"),
    }
    for needle, args in cases.items():
        line = one_error(invoke(*args, "--ledger", ledger_url))
        assert needle in line, (needle, line)
    assert export(ledger_url) == before


def test_calibrated_plan_moves_toward_recorded_timings(ledger_url: str,
                                                       grpo: tuple[Path, Path],
                                                       tmp_path: Path) -> None:
    spec, plan_path = grpo
    plan = json.loads(plan_path.read_text(encoding="utf-8"))
    update = next(p for p in plan["phases"] if p["name"] == "update")
    planned_step = update["busy_hours"] * 3600 / plan["steps"]
    # the runs took twice (1.9x and 2.1x) the planned update time per step
    for run_id, slow in (("g1", 1.9), ("g2", 2.1)):
        r = invoke("runs", "record", run_id, "--plan", str(plan_path), "--model-family", "q",
                   "--cost", "update/spot=100", "--ledger", ledger_url)
        assert r.exit_code == 0, r.output
        f = tmp_path / f"{run_id}.jsonl"
        f.write_text("".join(json.dumps({"step": s, "data": {
            "timing_s/update_actor": planned_step * slow}}) + "\n" for s in range(1, 6)),
            encoding="utf-8")
        assert invoke("runs", "import-metrics", run_id, "--jsonl", str(f), "--ledger",
                      ledger_url).exit_code == 0
    cal = tmp_path / "cal.yaml"
    r = invoke("runs", "calibrate", "-o", str(cal), "--ledger", ledger_url)
    assert r.exit_code == 0, r.output
    entries = yaml.safe_load(cal.read_text(encoding="utf-8"))["calibration"]
    assert [(e["phase"], e["gpu"], e["precision"], e["runs"], e["steps"]) for e in entries] \
        == [("update", "H100", "bf16", ["g1", "g2"], 10)]
    pool = next(p for p in plan["pools"] if p["name"] == update["pool"])
    gpus = pool["nodes"] * pool["gpus_per_node"]
    tokens_step = update["tokens"] / plan["steps"]
    measured = sorted(tokens_step / (planned_step * s * gpus) for s in (1.9, 2.1))
    assert entries[0]["tokens_per_second_per_gpu"] == pytest.approx(sum(measured) / 2,
                                                                    rel=1e-6)
    assert entries[0]["spread"] == pytest.approx((measured[1] - measured[0]) /
                                                 (sum(measured) / 2), abs=1e-4)
    out = tmp_path / "calibrated.json"
    r = invoke("-q", "plan", str(spec), "--calibration", str(cal), "--format", "json",
               "--no-timings", "-o", str(out))
    assert r.exit_code == 0, r.output
    new = json.loads(out.read_text(encoding="utf-8"))
    rec = new["calibration"]
    assert [(c["phase"], c["gpu"], c["runs"]) for c in rec] == [("update", "H100", ["g1", "g2"])]
    new_update = next(p for p in new["phases"] if p["name"] == "update")
    assert new_update["calibrated"] is True
    recorded_gpu_hours = update["gpu_hours"] * 2.0  # what the runs really took on this pool
    before = abs(update["gpu_hours"] - recorded_gpu_hours)
    after = abs(new_update["gpu_hours"] - recorded_gpu_hours)
    assert after < 0.25 * before, (update["gpu_hours"], new_update["gpu_hours"])
    assert float(new["total_cost_usd"]) > float(plan["total_cost_usd"])
    check = invoke("check", str(out))
    assert check.exit_code == 0, check.output


def test_calibration_file_errors(grpo: tuple[Path, Path], tmp_path: Path) -> None:
    spec, _ = grpo
    bad = tmp_path / "bad.yaml"
    bad.write_text("calibration: {phase: update}\n", encoding="utf-8")
    line = one_error(invoke("plan", str(spec), "--calibration", str(bad)))
    assert "expected a calibration: list" in line
    bad.write_text("calibration:\n- {phase: update, gpu: H999, precision: bf16, "
                   "tokens_per_second_per_gpu: 10}\n", encoding="utf-8")
    assert "H999" in one_error(invoke("plan", str(spec), "--calibration", str(bad)))


def test_review_states_the_plan_of_the_preferred_method(tmp_path: Path) -> None:
    from ledger_seed import SEED

    from ptplan.ledger import db
    from ptplan.ledger.records import record

    url = f"sqlite:///{tmp_path / 'seed.sqlite'}"
    led = db.Ledger(url)
    with led.write() as conn:
        for run in SEED:
            record(conn, run)
    led.close()
    opd = ROOT / "examples/opd-8b-from-32b.yaml"
    planned = invoke("-q", "plan", str(opd), "--format", "json", "--no-timings")
    assert planned.exit_code == 0, planned.output
    cost = json.loads(planned.stdout)["total_cost_usd"]
    r = invoke("-q", "runs", "review", "--format", "json", "--alternative", str(opd),
               "--alternative", str(ROOT / "examples/grpo-7b.yaml"), "--ledger", url)
    assert r.exit_code == 0, r.output
    (rec,) = json.loads(r.stdout)["recommendations"]
    assert [p["spec"] for p in rec["planned_now"]] == ["opd-8b-from-32b"]  # RL not preferred
    assert rec["planned_now"][0]["total_cost_usd"] == cost
    assert rec["text"].endswith(f"; an OPD plan for opd-8b-from-32b costs ${cost} over "
                                f"{rec['planned_now'][0]['makespan_hours']:.1f} h (planned "
                                "now on catalog embedded)")
    table = invoke("runs", "review", "--ledger", url)
    assert "recommendation: 2 of 3 SFT runs on llama-8b" in table.stdout


def test_import_tensorboard_and_replace(ledger_url: str, tmp_path: Path) -> None:
    from tensorboardX import SummaryWriter

    r = invoke("runs", "record", "t1", "--project", "p", "--method", "rl", "--model-family",
               "f", "--cost", "all=5", "--ledger", ledger_url)
    assert r.exit_code == 0, r.output
    for value in (3.0, 4.0):
        w = SummaryWriter(logdir=str(tmp_path / f"tb{value:g}"))
        for s in (1, 2):
            w.add_scalar("train/timing/generation", value, s)
        w.close()
    ok = invoke("runs", "import-metrics", "t1", "--tensorboard", str(tmp_path / "tb3"),
                "--ledger", ledger_url)
    assert ok.exit_code == 0, ok.output
    before = export(ledger_url)
    again = invoke("runs", "import-metrics", "t1", "--tensorboard", str(tmp_path / "tb4"),
                   "--ledger", ledger_url)
    assert "already has metrics train/timing/generation; pass --replace" in one_error(again)
    assert export(ledger_url) == before
    assert "exactly one of" in one_error(invoke(
        "runs", "import-metrics", "t1", "--tensorboard", str(tmp_path / "tb4"), "--jsonl",
        str(tmp_path / "x.jsonl"), "--ledger", ledger_url))
    r = invoke("runs", "import-metrics", "t1", "--tensorboard", str(tmp_path / "tb4"),
               "--replace", "--ledger", ledger_url)
    assert r.exit_code == 0, r.output
    metrics = json.loads(export(ledger_url))["runs"][0]["metrics"]
    assert [(m["step"], m["value"], m["phase"], m["source"]) for m in metrics] == \
        [(1, 4.0, "rollout", "tensorboard"), (2, 4.0, "rollout", "tensorboard")]


def test_json_bill_and_bad_rows(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'l.sqlite'}"
    b = tmp_path / "bill.json"
    b.write_text(json.dumps({"rows": [
        {"usd": "10.10", "tags": {"ptplan-project": "My_Project", "ptplan-phase": "update",
                                  "ptplan-capacity-type": "spot"}},
        {"cost_usd": 5, "ptplan-project": "my-project", "ptplan-method": "sft"},
        {"usd": 99, "ptplan-project": "my-project", "ptplan-method": "rl"}]}), encoding="utf-8")
    r = invoke("runs", "record", "j1", "--project", "my project", "--method", "sft",
               "--model-family", "f", "--bill", str(b), "--ledger", url)
    assert r.exit_code == 0, r.output
    run = json.loads(export(url))["runs"][0]
    assert run["costs"] == [{"phase": "all", "capacity_type": "mixed", "usd": "5.00"},
                            {"phase": "update", "capacity_type": "spot", "usd": "10.10"}]
    before = export(url)
    b2 = tmp_path / "bad.csv"
    b2.write_text("usd,ptplan-project,ptplan-method\n\"1,234.50\",my-project,sft\n",
                  encoding="utf-8")
    line = one_error(invoke("runs", "record", "j2", "--project", "my project", "--method",
                            "sft", "--model-family", "f", "--bill", str(b2), "--ledger", url))
    assert "row 1: cost '1,234.50' is not a number of dollars" in line
    assert export(url) == before
