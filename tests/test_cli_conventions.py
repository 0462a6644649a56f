"""CLI conventions: --version, shell completion, -q, NO_COLOR, progress bars only on a terminal.

The process-level checks run ``python -m ptplan.cli.app`` in a subprocess: colour and progress
bars depend on whether stdout/stderr are terminals, which only a real pseudo-terminal (``pty``)
shows.
"""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ptplan.cli.app import app

ROOT = Path(__file__).resolve().parents[1]
COLOUR = re.compile(r"\x1b\[[0-9;]*(?:3[0-9]|9[0-7])m")
"""An SGR sequence that sets a foreground colour (bold alone is not a colour)."""


def _cli(*args: str, env: dict[str, str] | None = None, tty: str = "") -> tuple[str, str]:
    """Run ptplan; ``tty`` names the streams ("stdout", "stderr", "both") given a terminal.
    Returns (stdout, stderr) as text (a terminal stream's text is read from the pty)."""
    full_env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    full_env.update({"COLUMNS": "100", **(env or {})})
    master, slave = pty.openpty()
    out = slave if tty in ("stdout", "both") else subprocess.PIPE
    err = slave if tty in ("stderr", "both") else subprocess.PIPE
    proc = subprocess.Popen([sys.executable, "-m", "ptplan.cli.app", *args], cwd=ROOT,
                            env=full_env, stdout=out, stderr=err)
    os.close(slave)
    chunks: list[bytes] = []
    if tty:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
    stdout, stderr = proc.communicate(timeout=300)
    os.close(master)
    term = b"".join(chunks).decode("utf-8", "replace")
    return (term if tty in ("stdout", "both") else (stdout or b"").decode(),
            term if tty in ("stderr", "both") else (stderr or b"").decode())


def test_version_prints_the_installed_version() -> None:
    r = CliRunner().invoke(app, ["--version"])
    assert r.exit_code == 0
    assert r.stdout.strip() == f"ptplan {version('ptplan')}"


def test_shell_completion_script_is_offered(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--show-completion`` prints the script for the user's shell. With shellingham installed,
    Typer detects that shell from the process tree, so a run detached from any shell (a
    background job, a container without one) would find none: the shell is fixed here."""
    import typer.completion

    monkeypatch.setattr(typer.completion, "_get_shell_name", lambda: "bash")
    r = CliRunner().invoke(app, ["--show-completion", "bash"], prog_name="ptplan")
    assert r.exit_code == 0
    assert "complete" in r.stdout and "_PTPLAN_COMPLETE" in r.stdout.upper()


def test_quiet_silences_status_lines_but_not_data_or_errors(tmp_path: Path) -> None:
    out = tmp_path / "p.json"
    loud = CliRunner().invoke(app, ["plan", "examples/sft-8b.yaml", "--format", "json",
                                    "-o", str(out)])
    assert loud.exit_code == 0, loud.output
    assert "planning sft-8b" in loud.stderr and f"wrote {out}" in loud.stderr
    quiet = CliRunner().invoke(app, ["-q", "plan", "examples/sft-8b.yaml", "--format", "json",
                                     "-o", str(out)])
    assert quiet.exit_code == 0
    assert quiet.stderr == ""
    assert out.read_text().startswith("{")
    bad = CliRunner().invoke(app, ["-q", "plan", "examples/no-such.yaml"])
    assert bad.exit_code == 2 and bad.stderr.startswith("error:")


def test_no_color_turns_colour_off_on_a_terminal() -> None:
    coloured, _ = _cli("--help", tty="stdout")
    assert COLOUR.search(coloured), "a terminal gets colour by default (the check must bite)"
    plain, _ = _cli("--help", env={"NO_COLOR": "1"}, tty="stdout")
    assert "Usage" in plain and not COLOUR.search(plain)


def test_progress_bar_on_a_terminal_and_nothing_in_a_pipe() -> None:
    args = ("pareto", "examples/sft-8b.yaml", "--points", "2", "--format", "json")
    out, err = _cli(*args, tty="stderr")
    assert "pareto: solving deadlines" in err
    assert out.startswith("{")
    out, err = _cli(*args)
    assert "pareto: solving deadlines" not in err and "\r" not in err
    assert out.startswith("{")
    _, err = _cli("-q", *args, tty="stderr")
    assert "pareto: solving deadlines" not in err


def test_the_progress_bar_starts_no_thread(monkeypatch) -> None:
    """The bar is redrawn at each step, not by a refresh thread: plans made under it may
    still fork their frontier worker (ptplan.core.forked needs a single thread)."""
    import io
    import threading

    from ptplan.cli import common

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(common.sys, "stderr", Terminal())
    monkeypatch.setattr(common.state, "quiet", False)
    before = threading.active_count()
    with common.ProgressBar("pareto: solving deadlines", 3) as bar:
        assert bar.progress is not None
        bar(1, 3)
        bar(2, 3, "pareto: almost")
        assert threading.active_count() == before
