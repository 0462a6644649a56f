"""``ptplan whatif``: price scenarios, sweeps and break-even prices, printed as JSON or as the
tables, Markdown, HTML and chart of :mod:`ptplan.report.tables_whatif` (from the rows of
:mod:`ptplan.scenarios.rows`). One function per mode (:mod:`ptplan.scenarios.scenarios`,
:mod:`ptplan.scenarios.sweep`, :mod:`ptplan.scenarios.breakeven`); the rule language in
:mod:`ptplan.scenarios.pricerules`. This module parses options, calls them and hands the results
to the report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from ptplan.cli.common import (
    START_AFTER_HELP,
    Objective,
    ProgressBar,
    ReportFormat,
    _emit_as,
    _run,
    app,
    dumps,
    info,
    with_start_after,
)
from ptplan.core.errors import InputError
from ptplan.core.kinds import Solver
from ptplan.scenarios.rows import (
    break_even_footer,
    break_even_rows,
    change_rows,
    sweep_footer,
    sweep_rows,
    whatif_footer,
    whatif_rows,
)


def _changes(report: dict[str, Any]) -> list[tuple[str, Any, list[str]]]:
    """The scenarios' changes against the baseline, as :mod:`ptplan.report.tables_whatif`
    prints them."""
    return [(s["name"], change_rows(s["changes"]), s["changes"]["statements"])
            for s in report["scenarios"] if s["changes"] is not None]


def _html(kind: str, report: dict[str, Any]) -> str:
    from ptplan.cli.report import html_page

    return html_page(kind, report)


# --------------------------------------------------------------------------- modes


def _mode_of(price: list[str] | None, scenario: list[str] | None, sweep_rule: str | None,
             break_even_sel: str | None, start: float | None, stop: float | None,
             chart: Path | None) -> list[str]:
    """The mode the options ask for (``[]``: price scenarios), or a one-line error."""
    modes = [m for m, on in (("--sweep", sweep_rule), ("--break-even", break_even_sel))
             if on is not None]
    if len(modes) > 1:
        raise InputError("--sweep and --break-even: give one of them per call")
    if modes and scenario:
        raise InputError(f"--scenario cannot be combined with {modes[0]}; use --price for "
                         "rules applied before the sweep or search")
    if not modes and not price and not scenario:
        raise InputError("whatif: nothing to compare; give --price RULE, --scenario "
                         "'RULE; RULE', --sweep 'SELECTOR OP' or --break-even SELECTOR")
    if not modes and (start is not None or stop is not None):
        raise InputError("--from/--to: only with --sweep or --break-even")
    if chart is not None and modes != ["--sweep"]:
        raise InputError("--chart: only with --sweep (cost against the swept value)")
    return modes


def _scenarios_mode(setup: Any, runner: Any, base_rules: tuple, texts: list[str], fmt: ReportFormat,
                    output: Path | None) -> None:
    """Price scenarios: ``--price`` rules (one scenario) and each ``--scenario``."""
    from ptplan.report.tables_whatif import whatif_markdown, whatif_table
    from ptplan.scenarios.scenarios import run_scenarios, scenarios_from

    report = run_scenarios(setup, scenarios_from(base_rules, texts), runner)
    _emit_as(fmt, output, lambda: dumps(report),
             lambda: whatif_markdown(report, whatif_rows(report), whatif_footer(report),
                                     _changes(report)),
             lambda: whatif_table(report, whatif_rows(report), whatif_footer(report),
                                  _changes(report)),
             lambda: _html("whatif", report))


def _sweep_mode(setup: Any, runner: Any, sweep_rule: str, start: float | None,
                stop: float | None, steps: int, every_point: bool, base_rules: tuple,
                fmt: ReportFormat, output: Path | None, chart: Path | None) -> None:
    """``--sweep 'SELECTOR OP' --from A --to B --steps N``."""
    from ptplan.report.tables_whatif import sweep_chart, sweep_markdown, sweep_table
    from ptplan.scenarios.pricerules import parse_partial
    from ptplan.scenarios.sweep import linspace, run_sweep

    if start is None or stop is None:
        raise InputError("--sweep needs --from A --to B (and --steps N, default 11)")
    sel, op = parse_partial(sweep_rule)
    report = run_sweep(setup, sel, op, linspace(start, stop, steps), runner, base_rules,
                       every_point)
    if chart is not None:
        sweep_chart(report, chart)
        info(f"wrote {chart}")
    _emit_as(fmt, output, lambda: dumps(report),
             lambda: sweep_markdown(report, sweep_rows(report), sweep_footer(report)),
             lambda: sweep_table(report, sweep_rows(report), sweep_footer(report)),
             lambda: _html("sweep", report))


def _break_even_mode(setup: Any, runner: Any, selector: str, start: float | None,
                     stop: float | None, tolerance: float, base_rules: tuple, fmt: ReportFormat,
                     output: Path | None) -> None:
    """``--break-even SELECTOR`` between multipliers ``--from`` (0) and ``--to`` (10)."""
    from ptplan.report.tables_whatif import break_even_markdown, break_even_table
    from ptplan.scenarios.breakeven import break_even
    from ptplan.scenarios.pricerules import parse_selector

    report = break_even(setup, parse_selector(selector), runner,
                        0.0 if start is None else start, 10.0 if stop is None else stop,
                        tolerance, base_rules)
    _emit_as(fmt, output, lambda: dumps(report),
             lambda: break_even_markdown(report, break_even_rows(report),
                                         break_even_footer(report)),
             lambda: break_even_table(report, break_even_rows(report),
                                      break_even_footer(report)),
             lambda: _html("break_even", report))


# --------------------------------------------------------------------------- command


@app.command()
def whatif(
    spec: Path = typer.Argument(..., help="Project spec YAML."),
    price: list[str] = typer.Option(None, "--price", help="Price rule 'SELECTOR OP VALUE' "
                                    "(repeatable; together one scenario, applied in order; "
                                    "with --sweep/--break-even: applied first)."),
    scenario: list[str] = typer.Option(None, "--scenario", help="'[NAME:] RULE; RULE' "
                                       "(repeatable): one more scenario."),
    sweep_rule: str = typer.Option(None, "--sweep", help="'SELECTOR OP': sweep VALUE from "
                                   "--from to --to in --steps points."),
    start: float = typer.Option(None, "--from", help="Sweep start; break-even: lowest "
                                "multiplier searched (default 0)."),
    stop: float = typer.Option(None, "--to", help="Sweep end; break-even: highest multiplier "
                               "searched (default 10)."),
    steps: int = typer.Option(11, "--steps", help="Sweep points, ends included."),
    every_point: bool = typer.Option(False, "--every-point", help="Sweep: re-solve every "
                                     "point (default: solve until each gap's two ends have "
                                     "the same optimal plan, which is then optimal inside)."),
    break_even_sel: str = typer.Option(None, "--break-even", help="'SELECTOR': the price "
                                       "multipliers where the plan's use of the matched "
                                       "offers (or storage tiers) changes."),
    tolerance: float = typer.Option(1e-3, "--tolerance", help="Break-even: bracket width on "
                                    "the multiplier."),
    catalog: str = typer.Option("embedded", "--catalog", help="embedded or a catalog YAML path."),
    policy: Path = typer.Option(None, "--policy", help="Policy YAML (default: "
                                "policies/default.yaml)."),
    objective: Objective = typer.Option(Objective.cost, "--objective"),
    solver: Solver = typer.Option(Solver.highs, "--solver", help="MILP solver."),
    workers: int = typer.Option(None, "--workers", help="Local worker processes (default "
                                "min(2, CPUs); 1 solves in this process)."),
    ray_address: str = typer.Option(None, "--ray", help="Run on a Ray cluster at ADDRESS "
                                    "(auto, ray://host:10001, or local); needs the ray extra."),
    fmt: ReportFormat = typer.Option(ReportFormat.table, "--format",
                                     help="html: a self-contained report (docs/report.md)."),
    output: Path = typer.Option(None, "-o", "--output", help="Write to FILE instead of stdout."),
    chart: Path = typer.Option(None, "--chart", help="With --sweep: cost vs value chart "
                               "(.png or .svg)."),
    timings: bool = typer.Option(True, "--timings/--no-timings",
                                 help="--no-timings zeroes solver.seconds for byte-identical "
                                 "output."),
    start_after: str = typer.Option(None, "--start-after", help=START_AFTER_HELP),
) -> None:
    """What-if prices: baseline vs scenarios, sweeps of one price, break-even prices (with a
    start date, each scenario books capacity blocks and flex-start as `plan` does; the rules
    change the catalog's offers, not the block and flex-start rates).

    RULE is 'SELECTOR OP VALUE': SELECTOR is * or comma-separated KEY=GLOB, KEY one of
    provider, region, zone, instance_type, gpu, capacity_type (offers; $/node-hour),
    storage.provider, storage.region, storage.tier, storage.access ($/GB-month) or
    egress.provider, egress.path ($/GB); OP is *= (scale), += (add) or = (set).
    Example: --price "capacity_type=spot *= 1.4" --price "provider=gcp,gpu=H100 = 9.5".
    """

    def go() -> None:
        from ptplan.policies.model import load_policy
        from ptplan.providers.registry import load_catalog
        from ptplan.scenarios.pricerules import parse_rule
        from ptplan.scenarios.runner import Runner, Setup
        from ptplan.spec.project import load_spec

        modes = _mode_of(price, scenario, sweep_rule, break_even_sel, start, stop, chart)
        base_rules = tuple(parse_rule(r) for r in price or [])
        s = with_start_after(load_spec(str(spec)), start_after)
        pol = load_policy(str(policy) if policy else None)
        cat = load_catalog(catalog)
        setup = Setup(s, cat, pol, objective.value, solver.value, timings)

        with ProgressBar("what-if: solving scenarios") as bar, \
                Runner(setup, workers, ray_address, bar) as runner:
            info(f"what-if on {s.name}: catalog {cat.name} ({len(cat.offers)} offers), "
                 f"policy {pol.name}, {runner.backend} backend, {runner.workers} worker(s)...")
            if modes == ["--sweep"]:
                _sweep_mode(setup, runner, sweep_rule, start, stop, steps, every_point,
                            base_rules, fmt, output, chart)
            elif modes == ["--break-even"]:
                _break_even_mode(setup, runner, break_even_sel, start, stop, tolerance,
                                 base_rules, fmt, output)
            else:
                _scenarios_mode(setup, runner, base_rules, scenario or [], fmt, output)

    _run(go)
