"""What every ``ptplan`` command shares: the Typer app, option choices, writing, exit codes.

Data goes to stdout (or ``-o FILE``); messages to stderr. Exit codes: 0 ok, 1 no feasible plan,
2 bad input, 3 provider error. Options with a closed set of values are Typer enums (their
choices show in ``--help``); an unknown value is one ``error:`` line naming the option, the
value, close matches and the choices, exit 2, like every other input error.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Any, TypeVar

import typer
from typer.core import TyperGroup

from optimizer.core.errors import InputError, PlannerError, suggest

_CHOICE = re.compile(r"'(?P<value>.*)' is not one of (?P<choices>'.*')\.?$")


class _OneLineErrors(TyperGroup):
    """Reports a bad option value (an unknown ``--target``, ``--solver``, ``--format`` ...) as
    one line on stderr, exit 2, instead of Click's usage box."""

    def invoke(self, ctx: Any) -> Any:  # click's Context (vendored by Typer >= 0.24)
        try:
            return super().invoke(ctx)
        except typer.BadParameter as exc:
            if exc.param is None or type(exc).__name__ == "MissingParameter":
                raise
            option = max(exc.param.opts, key=len)
            typer.echo(f"error: {bad_value_message(option, exc.message)}", err=True)
            raise typer.Exit(2) from None


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
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Plan the cheapest GPU cluster for LLM post-training (SFT, RL, on-policy distillation).",
)
schema_app = typer.Typer(no_args_is_help=True, help="Print JSON Schemas of ptplan's files.")
app.add_typer(schema_app, name="schema")

T = TypeVar("T")


class Format(StrEnum):
    table = "table"
    json = "json"
    markdown = "markdown"


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
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(exc.exit_code) from None
    except (OverflowError, ArithmeticError) as exc:
        typer.echo(f"error: numbers out of range ({exc}); check the magnitudes in the spec "
                   "and catalog", err=True)
        raise typer.Exit(2) from None


def _emit(text: str, output: Path | None) -> None:
    if output is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
    except OSError as exc:
        raise InputError(f"-o: cannot write {str(output)!r} ({exc.strerror}); "
                         "choose a writable path") from None
    typer.echo(f"wrote {output}", err=True)


def _emit_as(fmt: Format, output: Path | None, json_text: Callable[[], str],
             markdown: Callable[[], str], table: Callable[[], str]) -> None:
    """Write one report in the asked format (each rendering is only computed if asked)."""
    render = {Format.json: json_text, Format.markdown: markdown, Format.table: table}[fmt]
    _emit(render(), output)


def dumps(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
