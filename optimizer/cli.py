"""The ``ptplan`` command line (Typer). Thin: parse, call the library, format.

Data goes to stdout (or ``-o FILE``); messages to stderr. Exit codes: 0 ok, 1 no feasible plan,
2 bad input, 3 provider error.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from enum import StrEnum
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


class Format(StrEnum):
    table = "table"
    json = "json"
    markdown = "markdown"


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


@app.command()
def estimate(
    spec: Path = typer.Argument(..., help="Project spec YAML."),
    gpu: list[str] = typer.Option(None, "--gpu", help="GPU type (repeatable); default: all "
                                  "GPU types of the catalog."),
    precision: str = typer.Option(None, "--precision", help="fp32|bf16|fp16|fp8|int8; default: "
                                  "bf16 (fp16/fp32 where the GPU lacks bf16)."),
    catalog: str = typer.Option("embedded", "--catalog", help="embedded|cache|PATH."),
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
        _emit_as(fmt, output, lambda: dumps(report), lambda: estimate_markdown(report),
                 lambda: estimate_table(report))

    _run(go)


@app.command()
def plan(
    spec: Path = typer.Argument(..., help="Project spec YAML."),
    catalog: str = typer.Option("embedded", "--catalog", help="embedded|cache|PATH."),
    fmt: Format = typer.Option(Format.table, "--format"),
    output: Path = typer.Option(None, "-o", "--output", help="Write to FILE instead of stdout."),
    objective: Objective = typer.Option(Objective.cost, "--objective",
                                        help="cost: cheapest within deadline and budget; "
                                        "time: fastest within budget."),
    solver: str = typer.Option("highs", "--solver", help="highs (default) or cbc."),
    explain: bool = typer.Option(False, "--explain", help="Show why: binding constraints, "
                                 "marginal costs, alternatives (always in JSON)."),
    timings: bool = typer.Option(True, "--timings/--no-timings",
                                 help="--no-timings zeroes solver.seconds for byte-identical "
                                 "output."),
    policy: Path = typer.Option(None, "--policy", help="Policy YAML (default: "
                                "policies/default.yaml)."),
) -> None:
    """The cheapest cluster plan that meets the deadline and the budget."""

    def go() -> None:
        from optimizer.report import plan_markdown, plan_table
        from optimizer.solve import plan as make_plan
        from optimizer.spec import load_spec
        from policies.model import load_policy
        from providers.base import load_catalog

        s = load_spec(str(spec))
        pol = load_policy(str(policy) if policy else None)
        cat = load_catalog(catalog)
        typer.echo(f"planning {s.name} on catalog {cat.name} ({len(cat.offers)} offers), "
                   f"policy {pol.name}...", err=True)
        p = make_plan(s, cat, objective.value, solver, explain=True, timings=timings,
                      policy=pol)
        _emit_as(fmt, output, p.to_json, lambda: plan_markdown(p, explain),
                 lambda: plan_table(p, explain))

    _run(go)


@app.command()
def check(
    plan_file: Path = typer.Argument(..., metavar="PLAN.json", help="A plan written by "
                                     "`ptplan plan --format json`."),
    spec: Path = typer.Option(None, "--spec", help="Also recompute demand from this spec."),
    policy: Path = typer.Option(None, "--policy", help="Also check against this policy; "
                                "violations are named by rule."),
) -> None:
    """Re-check a plan from the plan alone: coverage, makespan, cost, caps, deadline, budget,
    and the policy it was made under (or --policy)."""

    def go() -> None:
        from optimizer.plan import Plan
        from optimizer.spec import load_spec
        from optimizer.verify import verify_against_spec, verify_plan
        from optimizer.yamlio import read_mapping, validate

        p = validate(Plan, read_mapping(str(plan_file), "plan"), f"plan {plan_file}")
        problems = verify_plan(p)
        if spec is not None:
            problems += verify_against_spec(p, load_spec(str(spec)))
        if policy is not None:
            from policies.check import check_plan
            from policies.model import load_policy

            pol = load_policy(str(policy))
            problems += [f"policy {pol.name}: {line}" for line in check_plan(p, pol)]
        if problems:
            for line in problems:
                typer.echo(f"violation: {line}")
            typer.echo(f"{len(problems)} violation(s) in {plan_file}", err=True)
            raise typer.Exit(1)
        typer.echo(f"ok: {plan_file} is consistent ({len(p.pools)} pools, {len(p.phases)} "
                   f"phases, total ${p.total_cost_usd})")

    _run(go)


@app.command()
def pareto(
    spec: Path = typer.Argument(..., help="Project spec YAML."),
    catalog: str = typer.Option("embedded", "--catalog", help="embedded|cache|PATH."),
    points: int = typer.Option(10, "--points", help="Deadlines to solve (geometric grid)."),
    fmt: Format = typer.Option(Format.table, "--format"),
    output: Path = typer.Option(None, "-o", "--output", help="Write to FILE instead of stdout."),
    solver: str = typer.Option("highs", "--solver", help="highs (default) or cbc."),
    policy: Path = typer.Option(None, "--policy", help="Policy YAML (default: "
                                "policies/default.yaml)."),
) -> None:
    """The cost-vs-deadline frontier: what each hour of deadline costs."""

    def go() -> None:
        from optimizer.report import pareto_markdown, pareto_table
        from optimizer.solve import pareto as run
        from optimizer.spec import load_spec
        from policies.model import load_policy
        from providers.base import load_catalog

        report = run(load_spec(str(spec)), load_catalog(catalog), points, solver,
                     load_policy(str(policy) if policy else None))
        _emit_as(fmt, output, lambda: dumps(report), lambda: pareto_markdown(report),
                 lambda: pareto_table(report))

    _run(go)


@schema_app.command("spec")
def schema_spec() -> None:
    """JSON Schema of the project spec (for editor completion)."""
    from optimizer.spec import ProjectSpec

    sys.stdout.write(dumps(ProjectSpec.model_json_schema()))


# --- command modules: each imports ``app`` from here and adds its commands (one line each) ---
# (keep these imports below every command defined in this file)
from optimizer import cli_prices, cli_render, cli_reserve, cli_whatif  # noqa: E402, F401


def main() -> None:  # pragma: no cover - console entry
    app()


if __name__ == "__main__":  # pragma: no cover
    app()
