"""``ptplan reserve``: quarterly reserved-capacity purchasing for a portfolio of projects.

The command is thin: load the portfolio, catalog and policy, call
:func:`ptplan.reservations.purchase.reserve`, and print its JSON report as JSON, or as the tables,
Markdown, HTML page and ``--chart FILE`` of :mod:`ptplan.report.tables_reserve` (weekly demand
against committed capacity per scenario, from the report's ``coverage`` rows).
"""

from __future__ import annotations

from pathlib import Path

import typer

from ptplan.cli.common import ProgressBar, ReportFormat, _emit_as, _run, app, dumps, info
from ptplan.core.errors import InputError
from ptplan.core.kinds import Solver


@app.command()
def reserve(
    portfolio: Path = typer.Argument(..., metavar="PORTFOLIO.yaml", help="Portfolio file."),
    catalog: str = typer.Option("embedded", "--catalog", help="embedded or a catalog YAML path."),
    fmt: ReportFormat = typer.Option(ReportFormat.table, "--format",
                                     help="html: a self-contained report (docs/report.md)."),
    output: Path = typer.Option(None, "-o", "--output", help="Write to FILE instead of stdout."),
    risk: str = typer.Option(None, "--risk", help="cvar:ALPHA[:WEIGHT], e.g. cvar:0.9: minimise "
                             "(1-WEIGHT) x expected cost + WEIGHT x CVaR_ALPHA (WEIGHT 0.5)."),
    solver: Solver = typer.Option(Solver.highs, "--solver", help="MILP solver."),
    chart: Path = typer.Option(None, "--chart", help="Write a chart of weekly demand vs "
                               "committed capacity (.png or .svg)."),
    policy: Path = typer.Option(None, "--policy", help="Policy YAML for planning the projects "
                                "(default: policies/default.yaml)."),
    timings: bool = typer.Option(True, "--timings/--no-timings",
                                 help="--no-timings zeroes seconds for byte-identical output."),
    ladder: str = typer.Option(None, "--ladder", help="quarterly: decide a purchase for every "
                               "quarter of the horizon (this quarter's is the answer)."),
) -> None:
    """How many 1- and 3-year commitments (reservations, Savings Plans, flexible CUDs) to buy
    now, or each quarter with --ladder quarterly, for a portfolio of projects."""

    def go() -> None:
        from ptplan.policies.model import load_policy
        from ptplan.providers.registry import load_catalog
        from ptplan.report.tables_reserve import (
            reserve_chart,
            reserve_markdown,
            reserve_sections,
            reserve_table,
        )
        from ptplan.reservations.portfolio import load_portfolio, portfolio_dir
        from ptplan.reservations.purchase import Risk
        from ptplan.reservations.purchase import reserve as run

        rk = Risk.parse(risk)
        if ladder is not None and ladder != "quarterly":
            raise InputError(f"--ladder: {ladder!r} is not a ladder; use quarterly")
        if chart is not None and chart.suffix.lower() not in (".png", ".svg"):
            raise InputError(f"--chart: {str(chart)!r} must end in .png or .svg")
        pf = load_portfolio(str(portfolio))
        pol = load_policy(str(policy) if policy else None)
        cat = load_catalog(catalog)
        info(f"reserve {pf.name}: {len(pf.projects)} projects, {len(pf.demand)} demand "
             f"rows, {len(pf.scenarios)} scenarios on catalog {cat.name}...")
        with ProgressBar("reserve: planning projects", len(pf.projects)) as bar:
            result = run(pf, cat, portfolio_dir(str(portfolio)), pol, solver.value, rk, timings,
                         progress=bar, ladder=ladder)
        rep = result.report
        def html() -> str:  # as `ptplan report` builds it (ptplan.cli.report)
            from ptplan.report.html import render_page
            from ptplan.report.html_analysis import reserve_doc

            title, tables, footer = reserve_sections(rep)
            return render_page([reserve_doc(rep, title, tables, footer)])

        _emit_as(fmt, output, lambda: dumps(rep), lambda: reserve_markdown(rep),
                 lambda: reserve_table(rep), html)
        if chart is not None:
            reserve_chart(rep, chart)
            info(f"wrote {chart}")

    _run(go)
