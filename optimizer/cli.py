"""The ``ptplan`` command line (Typer). Thin: parse, call the library, format.

Data goes to stdout (or ``-o FILE``); messages to stderr. Exit codes: 0 ok, 1 no feasible plan,
2 bad input, 3 provider error.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar

import typer

from optimizer.errors import InputError, PlannerError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Plan the cheapest GPU cluster for LLM post-training (SFT, RL, on-policy distillation).",
)
schema_app = typer.Typer(no_args_is_help=True, help="Print JSON Schemas of ptplan's files.")
app.add_typer(schema_app, name="schema")

T = TypeVar("T")


class Format(str, Enum):
    table = "table"
    json = "json"
    markdown = "markdown"


class Objective(str, Enum):
    cost = "cost"
    time = "time"


def _run(fn: Callable[[], T]) -> T:
    try:
        return fn()
    except PlannerError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(exc.exit_code) from None


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


def dumps(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


@app.command()
def estimate(
    spec: Path = typer.Argument(..., help="Project spec YAML."),
    gpu: list[str] = typer.Option(None, "--gpu", help="GPU type (repeatable); default: all "
                                  "GPU types of the catalog."),
    precision: str = typer.Option(None, "--precision", help="fp32|bf16|fp16|fp8|int8; default: "
                                  "bf16 (fp16/fp32 where the GPU lacks bf16)."),
    catalog: str = typer.Option("embedded", "--catalog", help="embedded or a catalog YAML path."),
    fmt: Format = typer.Option(Format.table, "--format"),
    output: Path = typer.Option(None, "-o", "--output", help="Write to FILE instead of stdout."),
) -> None:
    """Per phase: FLOPs, tokens, memory fit and GPU-hours per GPU type."""

    def go() -> None:
        from optimizer.estimate import estimate as run
        from optimizer.report import estimate_markdown, estimate_table
        from optimizer.spec import load_spec
        from providers.base import load_catalog

        s = load_spec(str(spec))
        names = list(gpu) if gpu else load_catalog(catalog).gpus()
        report = run(s, names, precision)
        if fmt is Format.json:
            _emit(dumps(report), output)
        elif fmt is Format.markdown:
            _emit(estimate_markdown(report), output)
        else:
            _emit(estimate_table(report), output)

    _run(go)


@schema_app.command("spec")
def schema_spec() -> None:
    """JSON Schema of the project spec (for editor completion)."""
    from optimizer.spec import ProjectSpec

    sys.stdout.write(dumps(ProjectSpec.model_json_schema()))


def main() -> None:  # pragma: no cover - console entry
    app()


if __name__ == "__main__":  # pragma: no cover
    app()
