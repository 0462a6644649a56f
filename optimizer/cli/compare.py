"""``ptplan compare SPEC... [--risk FILE] [--ledger URL]``: candidate methods for one goal by
their whole cost (:mod:`ptplan.compare`; docs/compare.md). The table, Markdown and chart are
drawn here, and the run ledger's priors (:mod:`ptplan.ledger.priors`) handed to the
comparison (the two packages are siblings that never import each other)."""

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
        from ptplan.compare.runner import compare as run
        from ptplan.core.errors import InputError
        from ptplan.planner.api import plan as make_plan
        from ptplan.policies.model import load_policy
        from ptplan.providers.registry import load_catalog
        from ptplan.report.charts import chart_suffix

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
            compare_chart(report, chart)
            info(f"wrote {chart}")
        def html() -> str:  # as `ptplan report` builds it (ptplan.cli.report)
            from ptplan.report.html import render_page
            from ptplan.report.html_methods import compare_doc

            return render_page([compare_doc(report, compare_rows(report),
                                            compare_footer(report))])

        _emit_as(fmt, output, lambda: dumps(report), lambda: compare_markdown(report),
                 lambda: compare_table(report), html)

    _run(go)


def _usd(v: float | None) -> str:
    return "-" if v is None else f"{v:,.2f}"


def _p(prior: dict[str, Any] | None) -> str:
    """P(forget) as the table shows it; a ledger prior with its counts (forgot/n)."""
    if prior is None:
        return "no prior"
    if prior["origin"] == "ledger":
        return f"{prior['p_forgetting']:.3f} ({prior['counts']['forgot']}/{prior['counts']['n']})"
    return f"{prior['p_forgetting']:.3f}"


def prior_line(p: dict[str, Any]) -> str:
    """Where a candidate's prior comes from and what its rework is, in words."""
    w = p["rework"]
    if w is None:
        how = "none observed (no run forgot; P(forget) 0 leaves the expectation at the plan)"
    elif w["kind"] == "spec":
        how = f"recovery spec {w['spec']} planned = ${w['cost_usd']:,.2f}"
    elif w["kind"] == "ledger_ratio":
        how = f"{w['fraction']:.4g} x the run (the ledger's rework ratio) = ${w['cost_usd']:,.2f}"
    else:
        how = f"{w['fraction']:g} x the run = ${w['cost_usd']:,.2f}"
    return (f"P(forget) {p['p_forgetting']:.4g} from {p['from']} (source: {p['source']}); "
            f"rework {how}")


def compare_rows(r: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    head = ["candidate", "method", "run $", "data gen $", "planned $", "hours", "eval share",
            "P(forget)", "rework $", "expected $", "P90 $", "cheapest while"]
    other = any("other_cost_usd" in c for c in r["candidates"])
    if other:  # the spec's other_costs (issue #25): a column only when a candidate has them
        head.insert(4, "other $")
    rows = []
    for c in r["candidates"]:
        prior = c["prior"]
        gen = c["data_generation"]
        rows.append([c["name"], c["method"], _usd(c["run_cost_usd"]),
                     _usd(gen["cost_usd"]) if gen else "-",
                     *([_usd(c["other_cost_usd"])] if other else []),
                     _usd(c["planned_cost_usd"]),
                     f"{c['hours']:.2f}", f"{100 * c['eval_share']:.1f}%",
                     _p(prior), _usd(prior["rework"]["cost_usd"]) if prior and prior["rework"]
                     else "-",
                     _usd(c["expected_cost_usd"]), _usd(c["p90_cost_usd"]), c["break_even"]])
    return head, rows


def compare_footer(r: dict[str, Any]) -> list[str]:
    out = [r["statement"]] if r["statement"] else [f"priors: {r['priors']}"]
    for c in r["candidates"]:
        if c["prior"]:
            out.append(f"{c['name']}: " + prior_line(c["prior"]))
        if c["data_generation"]:
            g = c["data_generation"]
            out.append(f"{c['name']}: data generated by {g['spec']} (${g['cost_usd']:,.2f}, "
                       f"{g['makespan_hours']:.2f} h before the run)")
        if c.get("other_costs"):
            out.append(f"{c['name']}: other costs " + ", ".join(
                f"{o['name']}" + (" (data generation)" if o["job"] != "run" else "")
                + f" ${o['cost_usd']:,.2f}" for o in c["other_costs"])
                + " (in planned $; one more run pays human review and ops again, not data "
                "collection, annotation or the A/B test)")
    out.append("cheapest while: the candidate's forgetting probability below which it is the "
               "cheapest in expectation, the others at "
               + ("their priors" if r["priors"] else "p = 0")
               + "; break-even rework: the prior's, else one more run")
    by = "expected cost" if r["ranked_by"] == "expected_cost_usd" else "planned cost"
    out.append(f"ranking by {by}: " + " < ".join(r["ranking"]))
    out += [f"note: {n}" for n in r["notes"]]
    return out


def compare_table(r: dict[str, Any]) -> str:
    from ptplan.report.tables import _table

    return _table("ptplan compare", *compare_rows(r), compare_footer(r))


def compare_markdown(r: dict[str, Any]) -> str:
    from ptplan.report.tables import md_table

    return ("# ptplan compare\n\n" + md_table(*compare_rows(r)) + "\n"
            + "\n".join(f"- {line}" for line in compare_footer(r)) + "\n")


def compare_chart(r: dict[str, Any], path: Path) -> None:
    """Expected cost vs forgetting probability, one line per candidate; the prior (if any) as a
    dot on its line."""
    from ptplan.compare.runner import curve
    from ptplan.report.charts import pyplot, save

    with pyplot("ptplan-compare") as plt:
        fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
        for s in curve(r):
            (line,) = ax.plot(s["p"], s["expected_cost_usd"], label=f"{s['name']} ({s['method']})")
            if s["prior_p"] is not None:
                i = round(s["prior_p"] * (len(s["p"]) - 1))
                ax.plot([s["p"][i]], [s["expected_cost_usd"][i]], "o", color=line.get_color())
        ax.set_xlabel("forgetting probability p")
        ax.set_ylabel("expected cost (USD)")
        ax.set_title("expected cost = planned + p x rework"
                     + ("" if r["priors"] else " (no priors: rework = one more run)"))
        ax.legend(loc="best")
        fig.tight_layout()
        save(plt, fig, path)


def ledger_lookup(url: str, family: str | None, min_runs: int,
                  forgetting_points: float) -> tuple[Any, str]:
    """The candidates' priors from the run ledger at ``url`` (read once) and its label.

    A candidate's model family is ``--family`` when given; else the one family of the ledger's
    runs whose recorded spec trains a model of the candidate's shape (params_b, layers,
    hidden_size); with none or several, the method-level prior (and a note saying why)."""
    from ptplan.compare.priors import LedgerPrior
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
