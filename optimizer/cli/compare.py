"""``ptplan compare SPEC... [--risk FILE] [--ledger URL]``: candidate methods for one goal by
their whole cost (:mod:`ptplan.comparison`; docs/compare.md). The table, Markdown and chart are
:mod:`ptplan.report.tables_compare`'s; the run ledger's priors (:mod:`ptplan.ledger.priors`)
are handed to the comparison here (the two packages are siblings that never import each
other)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from ptplan.cli.common import ProgressBar, ReportFormat, _emit_as, _run, app, dumps, info
from ptplan.core.kinds import Solver


@app.command()
def compare(
    specs: list[Path] = typer.Argument(..., metavar="SPEC...", help="Candidate specs (two or "
                                       "more) for the same goal."),
    risk: Path = typer.Option(None, "--risk", help="Risk file: forgetting priors per method or "
                              "spec, with their rework and source (docs/compare.md). Without "
                              "it only break-even probabilities are shown."),
    ledger: str = typer.Option(None, "--ledger", help="Run ledger (file path, sqlite:///PATH or "
                               "postgresql://...): forgetting priors observed per method and "
                               "model family (docs/compare.md)."),
    family: str = typer.Option(None, "--family", help="Model family of the candidates in the "
                               "ledger (as recorded by runs record --model-family); default: "
                               "the family of the ledger's runs of the same model shape."),
    min_runs: int = typer.Option(3, "--min-runs", min=1, help="Runs a family needs for a "
                                 "family-level ledger prior (else method-level)."),
    forgetting_points: float = typer.Option(2.0, "--forgetting-points", min=0.0,
                                            help="A ledger run forgot when its general "
                                            "metrics fell by more than this (as runs review)."),
    catalog: str = typer.Option("embedded", "--catalog", help="embedded|cache|PATH."),
    policy: Path = typer.Option(None, "--policy", help="Policy YAML (default: "
                                "policies/default.yaml)."),
    solver: Solver = typer.Option(Solver.highs, "--solver", help="MILP solver."),
    fmt: ReportFormat = typer.Option(ReportFormat.table, "--format",
                                     help="html: a self-contained report (docs/report.md)."),
    output: Path = typer.Option(None, "-o", "--output", help="Write to FILE instead of stdout."),
    chart: Path = typer.Option(None, "--chart", help="Expected cost vs forgetting probability "
                               "per candidate (.png/.svg)."),
) -> None:
    """Candidate methods side by side: planned cost and time, data generation, eval share,
    forgetting prior and rework, expected cost, P90, and the break-even forgetting
    probability at which the ranking flips."""

    def go() -> None:
        from ptplan.comparison.runner import compare as run
        from ptplan.comparison.runner import curve
        from ptplan.core.errors import InputError
        from ptplan.planner.api import plan as make_plan
        from ptplan.policies.model import load_policy
        from ptplan.providers.registry import load_catalog
        from ptplan.report.charts import chart_suffix
        from ptplan.report.tables_compare import (
            compare_chart,
            compare_footer,
            compare_markdown,
            compare_rows,
            compare_table,
        )

        lookup = None
        label = ""
        if ledger is not None:
            lookup, label = ledger_lookup(ledger, family, min_runs, forgetting_points)
        elif family is not None:
            raise InputError("--family: names the model family of ledger runs; give --ledger "
                             "URL too")
        if chart is not None:
            chart_suffix(chart)
        pol = load_policy(str(policy) if policy else None)
        cat = load_catalog(catalog)
        info(f"comparing {len(specs)} specs on catalog {cat.name}, policy {pol.name}...")
        with ProgressBar("compare") as bar:
            report = run([str(s) for s in specs],
                         lambda s: make_plan(s, cat, "cost", solver.value, explain=False,
                                             timings=False, policy=pol),
                         str(risk) if risk is not None else None,
                         lambda d, t, what: bar(d, t, what), lookup, label)
        if chart is not None:
            compare_chart(report, curve(report), chart)
            info(f"wrote {chart}")
        def html() -> str:  # as `ptplan report` builds it (ptplan.cli.report)
            from ptplan.report.html import render_page
            from ptplan.report.html_methods import compare_doc

            return render_page([compare_doc(report, compare_rows(report),
                                            compare_footer(report))])

        _emit_as(fmt, output, lambda: dumps(report), lambda: compare_markdown(report),
                 lambda: compare_table(report), html)

    _run(go)


def ledger_lookup(url: str, family: str | None, min_runs: int,
                  forgetting_points: float) -> tuple[Any, str]:
    """The candidates' priors from the run ledger at ``url`` (read once) and its label.

    A candidate's model family is ``--family`` when given; else the one family of the ledger's
    runs whose recorded spec trains a model of the candidate's shape (params_b, layers,
    hidden_size); with none or several, the method-level prior (and a note saying why)."""
    from ptplan.comparison.priors import LedgerPrior
    from ptplan.core.errors import InputError
    from ptplan.ledger.db import open_ledger
    from ptplan.ledger.priors import Observed, Priors
    from ptplan.ledger.records import load_runs
    from ptplan.ledger.review import Thresholds
    from ptplan.spec.project import ProjectSpec

    led = open_ledger(url, write=False)
    try:
        with led.read() as conn:
            runs = load_runs(conn)
    finally:
        led.close()
    label = led.display.strip("'")
    if not runs:
        raise InputError(f"--ledger: the ledger {label!r} has no runs, so it gives no prior; "
                         "record runs with `ptplan runs record`, or check the path or URL")
    priors = Priors(runs, Thresholds(forgetting_points=forgetting_points), min_runs)

    def to_prior(o: Observed, how: str) -> LedgerPrior:
        where = f"{o.method} run(s) on {o.family}" if o.family else \
            f"{o.method} run(s) of every family"
        src = (f"ledger {label}: {o.forgot} of {o.n} {where} forgot (general change < "
               f"-{forgetting_points:g} points)")
        if o.rework_fraction is not None:
            src += (f"; their rework ${o.rework_cents / 100:,.2f} on their own "
                    f"${o.forgot_cents / 100:,.2f}")
        found = f"ledger family {o.family}" if o.level == "family" else \
            f"ledger method {o.method} (every family)"
        return LedgerPrior(o.p_forgetting, o.rework_fraction, found, src,
                           {**o.as_json(), "family_from": how})

    def lookup(spec: ProjectSpec) -> tuple[LedgerPrior | None, list[str]]:
        notes: list[str] = []
        fam, how = family, "--family"
        if fam is None:
            m = spec.model
            shape = (float(m.params_b), int(m.layers), int(m.hidden_size))
            fams = priors.families_of_shape(shape)
            if len(fams) == 1:
                fam, how = fams[0], "the ledger's runs of the same model shape"
            else:
                how = "none"
                notes.append(
                    ("the ledger's runs of this model shape are of several families ("
                     + ", ".join(fams) + ")" if fams else
                     "no ledger run's recorded spec trains this model shape")
                    + ": method-level prior; pass --family to choose one")
        o = priors.observed(spec.method, fam)
        if o is None:
            return None, notes
        if o.fallback:
            notes.append(o.fallback)
        return to_prior(o, how), notes

    return lookup, label
