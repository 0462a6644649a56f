"""What every ``ptplan`` command shares: the Typer app, option choices, writing, exit codes.

Data goes to stdout (or ``-o FILE``); messages to stderr. Exit codes: 0 ok, 1 no feasible plan,
2 bad input, 3 provider error. Options with a closed set of values are Typer enums (their
choices show in ``--help``); an unknown value is one ``error:`` line naming the option, the
value, close matches and the choices, exit 2, like every other input error.

What every command gets without declaring it (:func:`_harden`, applied as Click resolves a
command): a number option that is not finite (``nan``, ``inf``) is refused in one line; a
command that writes ``-o FILE`` gets ``--force``, and its writes (``-o``, ``--chart``) are
atomic and refuse to follow a link or overwrite one of the command's inputs unless forced
(:mod:`ptplan.core.atomic`). Every message goes out through :func:`ptplan.core.redact.redact`:
a password in a URL or DSN is never printed.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Any, TypeVar

import typer
from typer._click import exceptions as click_errors  # Typer >= 0.24 vendors Click
from typer.core import Abort, TyperGroup

from ptplan.core import atomic
from ptplan.core.errors import PlannerError, suggest
from ptplan.core.redact import redact

_CHOICE = re.compile(r"'(?P<value>.*)' is not one of (?P<choices>'.*')\.?$")


class _OneLineErrors(TyperGroup):
    """Reports a bad option value (an unknown ``--target``, ``--solver``, ``--format`` ...) and
    every other usage error (a missing argument, an unknown option or command) as one line on
    stderr, exit 2, instead of Click's framed usage box."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("standalone_mode", True) is False:
            return super().main(*args, **kwargs)
        kwargs["standalone_mode"] = False
        try:
            rv = super().main(*args, **kwargs)
        except click_errors.NoArgsIsHelpError as exc:  # bare `ptplan` / `ptplan schema`: help
            typer.echo(exc.ctx.get_help() if exc.ctx is not None else "", err=True)
            sys.exit(2)
        except click_errors.UsageError as exc:
            command = exc.ctx.command_path if exc.ctx is not None else "ptplan"
            message = redact(" ".join(exc.format_message().split()).rstrip("."))
            typer.echo(f"error: {command}: {message}; see `{command} --help`", err=True)
            sys.exit(2)
        except click_errors.ClickException as exc:
            typer.echo(f"error: {redact(' '.join(exc.format_message().split()))}", err=True)
            sys.exit(exc.exit_code)
        except Abort:
            typer.echo("error: aborted", err=True)
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)

    def invoke(self, ctx: Any) -> Any:  # click's Context (vendored by Typer >= 0.24)
        try:
            return super().invoke(ctx)
        except typer.BadParameter as exc:
            if exc.param is None or type(exc).__name__ == "MissingParameter":
                raise
            option = max(exc.param.opts, key=len)
            typer.echo(f"error: {redact(bad_value_message(option, exc.message))}", err=True)
            raise typer.Exit(2) from None

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        name, cmd, rest = super().resolve_command(ctx, args)
        if cmd is not None:
            _harden(cmd)
        return name, cmd, rest


FORCE_HELP = ("Write -o (and --chart) even through a symbolic link or over one of this "
              "command's input files (refused otherwise).")


def _harden(cmd: Any) -> Any:
    """Give a resolved command what every command shares (module doc); idempotent. A group
    hardens its subcommands as it resolves them."""
    if getattr(cmd, "_ptplan_hardened", False):
        return cmd
    cmd._ptplan_hardened = True
    if hasattr(cmd, "resolve_command"):  # a group of commands (prices, runs, schema)
        resolve = cmd.resolve_command

        def resolve_sub(ctx: Any, args: list[str]) -> Any:
            name, sub, rest = resolve(ctx, args)
            if sub is not None:
                _harden(sub)
            return name, sub, rest

        cmd.resolve_command = resolve_sub
        return cmd
    writes = any("-o" in getattr(p, "opts", ()) for p in cmd.params)
    added = writes and not any("--force" in getattr(p, "opts", ()) for p in cmd.params)
    if added:
        cmd.params.append(_force_option())
    invoke = cmd.invoke

    def guarded(ctx: Any) -> Any:
        _refuse_non_finite(cmd, ctx.params)
        force = bool(ctx.params.pop("force", False) if added else ctx.params.get("force"))
        with atomic.command_scope(force, _input_paths(cmd, ctx.params)):
            return invoke(ctx)

    cmd.invoke = guarded
    return cmd


def _force_option() -> Any:
    """A ``--force`` flag as Typer builds it (taken from a one-option command, so that the
    help renders like every other option's, whatever Typer's internals)."""
    probe = typer.Typer()

    @probe.command()
    def _probe(force: bool = typer.Option(False, "--force", help=FORCE_HELP)) -> None:
        """Never run."""

    return next(p for p in typer.main.get_command(probe).params if p.name == "force")


def _refuse_non_finite(cmd: Any, params: dict[str, Any]) -> None:
    for p in cmd.params:
        value = params.get(p.name)
        values = value if isinstance(value, list | tuple) else [value]
        for v in values:
            if isinstance(v, float) and not math.isfinite(v):
                option = max(getattr(p, "opts", None) or [p.name], key=len)
                typer.echo(f"error: {option}: {v} is not a finite number; give a number",
                           err=True)
                raise typer.Exit(2)


def _input_paths(cmd: Any, params: dict[str, Any]) -> list[Path]:
    """The files a command reads: its path arguments and options other than where it writes."""
    out: list[Path] = []
    for p in cmd.params:
        if p.name in ("output", "chart", "out", "out_dir") or "-o" in getattr(p, "opts", ()):
            continue
        value = params.get(p.name)
        for v in value if isinstance(value, list | tuple) else [value]:
            if isinstance(v, Path):
                out.append(v)
    return out


def bad_value_message(option: str, message: str) -> str:
    """``--target: unknown value 'kuberey' (did you mean: kuberay?); use one of ...``."""
    message = message.removeprefix("Value error, ").strip()
    m = _CHOICE.match(message)
    if m is None:
        return f"{option}: {message}"
    choices = re.findall(r"'([^']*)'", m["choices"])
    return (f"{option}: unknown value {m['value']!r}{suggest(m['value'], choices)}; use one of "
            f"{', '.join(choices)}")


app = typer.Typer(
    cls=_OneLineErrors,
    add_completion=True,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Plan the cheapest GPU cluster for LLM post-training (SFT, RL, on-policy distillation).",
)
schema_app = typer.Typer(no_args_is_help=True, help="Print JSON Schemas of ptplan's files.")


class _State:
    quiet = False


state = _State()
"""Options of the ``ptplan`` group that every command obeys (``-q``)."""


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            v = version("ptplan")
        except PackageNotFoundError:  # pragma: no cover - running from a source tree
            v = "unknown (not installed)"
        typer.echo(f"ptplan {v}")
        raise typer.Exit()


@app.callback()
def _options(
    _version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                  help="Print the version and exit."),
    quiet: bool = typer.Option(False, "-q", "--quiet",
                               help="Only data, warnings inside the data, and errors: no status "
                                    "lines or progress bars on stderr."),
) -> None:
    """Plan the cheapest GPU cluster for LLM post-training (SFT, RL, on-policy distillation).

    Colours follow NO_COLOR (https://no-color.org); progress bars appear only on a terminal."""
    state.quiet = quiet


def info(message: str) -> None:
    """A status line on stderr (``wrote FILE``, ``planning ...``); ``-q`` silences it. Errors,
    violations and data are never silenced."""
    if not state.quiet:
        typer.echo(redact(message), err=True)


class ProgressBar:
    """A transient rich progress bar on stderr when stderr is a terminal and ``-q`` is off;
    otherwise nothing at all (no bar and no progress lines in a pipe or a log).
    Call it with (done, total[, label])."""

    def __init__(self, label: str, total: int | None = None) -> None:
        self.label = label
        self.progress: Any = None
        if state.quiet or not sys.stderr.isatty():
            return
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        # redrawn at each step, not by rich's refresh thread: the process stays
        # single-threaded, so that plans made under the bar may still fork a worker for their
        # pool frontiers (ptplan.core.forked)
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(),
                                 MofNCompleteColumn(), console=Console(stderr=True),
                                 transient=True, auto_refresh=False)
        self.task = self.progress.add_task(label, total=total)

    def __call__(self, done: int, total: int | None, label: str | None = None) -> None:
        if self.progress is not None:
            self.progress.update(self.task, description=label or self.label, completed=done,
                                 total=total)
            self.progress.refresh()

    def __enter__(self) -> ProgressBar:
        if self.progress is not None:
            self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()
app.add_typer(schema_app, name="schema")

T = TypeVar("T")


class Format(StrEnum):
    table = "table"
    json = "json"
    markdown = "markdown"


class ReportFormat(StrEnum):
    """``--format`` of the commands that also write a self-contained HTML report (``html``:
    docs/report.md)."""

    table = "table"
    json = "json"
    markdown = "markdown"
    html = "html"


class TableOrJson(StrEnum):
    """``--format`` of commands that have no markdown rendering."""

    table = "table"
    json = "json"


class Objective(StrEnum):
    cost = "cost"
    time = "time"


def _run(fn: Callable[[], T]) -> T:
    try:
        return fn()
    except PlannerError as exc:
        # one line whatever the message quotes (a value with a newline stays escaped), and no
        # password of a URL or DSN it quotes
        message = redact(str(exc)).replace("\r", "\\r").replace("\n", "\\n")
        typer.echo(f"error: {message}", err=True)
        raise typer.Exit(exc.exit_code) from None
    except (OverflowError, ArithmeticError) as exc:
        typer.echo(f"error: numbers out of range ({exc}); check the magnitudes in the spec "
                   "and catalog", err=True)
        raise typer.Exit(2) from None


def _emit(text: str, output: Path | None) -> None:
    if output is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return
    atomic.write_atomic(output, text if text.endswith("\n") else text + "\n")
    info(f"wrote {output}")


def _emit_as(fmt: Format | ReportFormat, output: Path | None, json_text: Callable[[], str],
             markdown: Callable[[], str], table: Callable[[], str],
             html: Callable[[], str] | None = None) -> None:
    """Write one report in the asked format (each rendering is only computed if asked)."""
    render = {"json": json_text, "markdown": markdown, "table": table}
    if html is not None:
        render["html"] = html
    _emit(render[str(fmt)](), output)


def dumps(data: Any) -> str:
    """A command's JSON output, every float rounded to 12 significant digits
    (:mod:`ptplan.core.numbers`: the same bytes on any CPU)."""
    from ptplan.core.numbers import round_floats

    return json.dumps(round_floats(data), indent=2, ensure_ascii=False) + "\n"


def parse_date(option: str, text: str) -> Any:
    """An ISO date option (a ``datetime.date``), or a one-line input error naming it."""
    import datetime as dt

    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        from ptplan.core.errors import InputError

        raise InputError(f"{option}: {text!r} is not a date; use YYYY-MM-DD, e.g. "
                         "2027-01-15") from None


START_AFTER_HELP = ("DATE (YYYY-MM-DD): the run starts on or after it; sets sla.start_after, "
                    "so capacity blocks and flex-start may be booked (docs/blocks.md).")


FRAMEWORK_HELP = ("verl==0.9|openrlhf==0.11|any: the framework release to plan for (sets the "
                  "spec's framework:; default: the spec's, else verl==0.9). docs/frameworks.md")


def complete_framework(incomplete: str) -> list[str]:
    """``--framework``: the releases ptplan plans for, and ``any``."""
    from ptplan.spec.frameworks import CHOICES

    return [c for c in CHOICES if c.startswith(incomplete.lower())]


def with_framework(spec: Any, framework: str | None) -> Any:
    """``spec`` planned for ``--framework`` (:func:`ptplan.spec.project.with_framework`)."""
    from ptplan.spec.project import with_framework as planned_for

    return planned_for(spec, framework)


def with_start_after(spec: Any, start_after: str | None) -> Any:
    """``spec`` with ``--start-after`` as its ``sla.start_after`` (re-validated: a date
    deadline counts from it); unchanged without the option."""
    if start_after is None:
        return spec
    raw = spec.sla.model_dump(exclude={"deadline_hours"} if spec.sla.deadline else set())
    return spec.model_copy(update={"sla": type(spec.sla).model_validate(
        {**raw, "start_after": parse_date("--start-after", start_after)})})
