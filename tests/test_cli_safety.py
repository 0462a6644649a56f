"""What every command shares (ptplan.cli.common): every --help renders; a number option that
is not finite is refused; -o (and --chart) writes atomically, never through a link or over an
input unless --force; no message prints a password."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from ptplan.cli.app import app

ROOT = Path(__file__).resolve().parent.parent
GRPO = str(ROOT / "examples" / "grpo-7b.yaml")
runner = CliRunner()


def _paths(cmd: object, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = [prefix]
    for name, sub in sorted(getattr(cmd, "commands", {}).items()):
        out += _paths(sub, (*prefix, name))
    return out


COMMANDS = _paths(typer.main.get_command(app))


def test_every_command_is_listed() -> None:
    assert len(COMMANDS) >= 24 and ("runs", "record") in COMMANDS


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "ptplan")
def test_every_help_renders(path: tuple[str, ...]) -> None:
    """Rich reads help text as markup: `PHASE[/CAPACITY]` once made `runs record --help`
    trace back. Rendered here through the console entry, coloured and with NO_COLOR."""
    for env in ({"COLUMNS": "100"}, {"COLUMNS": "100", "NO_COLOR": "1"}):
        proc = subprocess.run([sys.executable, "-m", "ptplan", *path, "--help"],
                              capture_output=True, text=True, env={**_env(), **env}, timeout=60)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "Traceback" not in proc.stderr and "Usage" in proc.stdout


def _env() -> dict[str, str]:
    import os
    return dict(os.environ)


def test_writers_get_force_in_help() -> None:
    r = runner.invoke(app, ["plan", "--help"])
    assert "--force" in r.output
    r = runner.invoke(app, ["check", "--help"])  # writes nothing: no --force
    assert "--force" not in r.output


@pytest.mark.parametrize(("args", "option"), [
    (["whatif", GRPO, "--sweep", "capacity_type=spot *=", "--from", "nan", "--to", "2"],
     "--from"),
    (["plan", GRPO, "--trials", "10", "--correlated", "inf"], "--correlated"),
    (["simulate", "p.json", "--shortage-hours", "-inf"], "--shortage-hours"),
])
def test_non_finite_numbers_refused(args: list[str], option: str, tmp_path: Path) -> None:
    r = runner.invoke(app, args)
    assert r.exit_code == 2, r.output
    assert f"{option}:" in r.output and "not a finite number" in r.output
    assert "Traceback" not in r.output


def test_guard_window_nan_is_refused(tmp_path: Path) -> None:
    """The reported repro: --window nan turned a stop (11) into ok (0)."""
    plan = tmp_path / "p.json"
    assert runner.invoke(app, ["plan", GRPO, "--format", "json", "-o", str(plan)]).exit_code == 0
    spend = tmp_path / "s.json"
    spend.write_text('{"hours": 10, "periods": [{"hours": 10, "actual_cumulative_usd": 30000}]}')
    stop = runner.invoke(app, ["guard", str(plan), "--spend-from", str(spend)])
    assert stop.exit_code == 11, stop.output
    for window in ("nan", "inf", "-inf", "0"):
        r = runner.invoke(app, ["guard", str(plan), "--spend-from", str(spend),
                                "--window", window])
        assert r.exit_code == 2, (window, r.output)
    spend.write_text('{"hours": 11, "periods": [{"hours": 10, "actual_cumulative_usd": 30000},'
                     ' {"hours": 11, "actual_cumulative_usd": "nan"}]}')
    r = runner.invoke(app, ["guard", str(plan), "--spend-from", str(spend)])
    assert r.exit_code == 2 and "not a finite number" in r.output, r.output


def test_output_never_follows_a_link_or_destroys_an_input(tmp_path: Path) -> None:
    plan = tmp_path / "p.json"
    runner.invoke(app, ["plan", GRPO, "--format", "json", "-o", str(plan)])
    before = plan.read_bytes()
    r = runner.invoke(app, ["report", str(plan), "-o", str(plan)])
    assert r.exit_code == 2 and "also an input" in r.output
    assert plan.read_bytes() == before
    precious = tmp_path / "precious.txt"
    precious.write_text("keep")
    link = tmp_path / "out.html"
    link.symlink_to(precious)
    r = runner.invoke(app, ["report", str(plan), "-o", str(link)])
    assert r.exit_code == 2 and "symbolic link" in r.output
    assert precious.read_text() == "keep"
    r = runner.invoke(app, ["report", str(plan), "-o", str(link), "--force"])
    assert r.exit_code == 0 and precious.read_text() == "keep" and not link.is_symlink()


def test_failed_write_keeps_the_old_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                           ) -> None:
    plan = tmp_path / "p.json"
    runner.invoke(app, ["plan", GRPO, "--format", "json", "-o", str(plan)])
    out = tmp_path / "report.html"
    out.write_text("the old report")
    import ptplan.core.atomic as atomic

    def disk_full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic.os, "fsync", disk_full)
    r = runner.invoke(app, ["report", str(plan), "-o", str(out)])
    assert r.exit_code == 2 and "No space left" in r.output
    assert out.read_text() == "the old report"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.json", "report.html"]


@pytest.mark.parametrize("args", [
    ["runs", "list", "--ledger", "postgres://u:S3cretPw@h:5x/db"],
    ["runs", "list", "--ledger", "mysql://u:S3cretPw@h/db"],
    ["runs", "import-metrics", "r1", "--mlflow", "sqlite:///nowhere/x.db?password=S3cretPw",
     "--mlflow-run", "abc"],
    ["plan", "postgresql://u:S3cretPw@h/db"],
    ["guard", "p.json", "--spend-from", "https://u:S3cretPw@h/x.json"],
])
def test_planted_password_never_printed(args: list[str]) -> None:
    r = runner.invoke(app, args)
    assert r.exit_code != 0
    assert "S3cretPw" not in r.output, r.output
    assert "Traceback" not in r.output
