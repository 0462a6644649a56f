"""``ptplan report FILE.json... -o report.html`` and the ``--format html`` of ``plan`` (a campaign
too), ``pareto``, ``whatif``, ``reserve``, ``compare`` and ``runs review``: self-contained HTML
reports (:mod:`ptplan.report.html`; docs/report.md).

This module joins the page builders of :mod:`ptplan.report` with the terminal's table rows
(the report's own ``tables_*`` for reserve, compare, review and campaign; the what-if rows of
the sibling package :mod:`ptplan.scenarios`, which only the CLI layer may import together with
the report). ``report`` detects each file's kind
from its JSON; a file of no known kind, or one that lacks what its kind needs, is one
``error:`` line, exit 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from ptplan.cli.common import _emit, _run, app
from ptplan.core.errors import InputError

KINDS = ("plan", "pareto", "whatif", "sweep", "break_even", "reserve", "compare", "review",
         "campaign")


def detect_kind(data: dict[str, Any]) -> str | None:
    """The report kind of a ptplan JSON output, or None."""
    kind = data.get("kind")
    if kind in ("whatif", "sweep", "break_even", "campaign"):
        return str(kind)
    if "portfolio" in data and "purchases" in data and "coverage" in data:
        return "reserve"
    if "compare_schema_version" in data and "candidates" in data:
        return "compare"
    if all(k in data for k in ("thresholds", "runs", "groups", "totals", "recommendations")):
        return "review"
    if "points" in data and "fastest_hours" in data and "cheapest_usd" in data:
        return "pareto"
    if "pools" in data and "phases" in data and "spec_digest" in data:
        return "plan"
    return None


def build_doc(kind: str, data: dict[str, Any], chosen: dict[str, Any] | None = None) -> Any:
    """The :class:`~ptplan.report.html.Doc` of one report of ``kind`` (a campaign: a list,
    its own page then each stage's plan page). The data's floats are rounded to 12 significant
    digits first (:mod:`ptplan.core.numbers`), as the JSON outputs are: a page made from a file
    written before, or from a report in memory, has the same figures on any CPU."""
    from ptplan.core.numbers import round_floats

    data, chosen = round_floats(data), round_floats(chosen)
    if kind == "plan":
        from ptplan.report.html_plan import plan_doc

        return plan_doc(data)
    if kind == "pareto":
        from ptplan.report.html_plan import pareto_doc

        return pareto_doc(data, chosen)
    if kind == "reserve":
        from ptplan.report.html_analysis import reserve_doc
        from ptplan.report.tables_reserve import reserve_sections

        title, tables, footer = reserve_sections(data)
        return reserve_doc(data, title, tables, footer)
    if kind == "campaign":
        from ptplan.report.html_campaign import campaign_docs
        from ptplan.report.tables_campaign import campaign_footer, campaign_rows

        return campaign_docs(data, campaign_rows(data), campaign_footer(data))
    if kind == "compare":
        from ptplan.report.html_methods import compare_doc
        from ptplan.report.tables_compare import compare_footer, compare_rows

        return compare_doc(data, compare_rows(data), compare_footer(data))
    if kind == "review":
        from ptplan.report.html_methods import review_doc
        from ptplan.report.tables_runs import _sections as review_sections

        return review_doc(data, *review_sections(data))
    from ptplan.report import html_analysis as h
    from ptplan.scenarios import rows as w

    if kind == "whatif":
        changes = [(s["name"], w.change_rows(s["changes"]), s["changes"]["statements"])
                   for s in data["scenarios"] if s["changes"] is not None]
        return h.whatif_doc(data, w.whatif_rows(data), changes, w.whatif_footer(data))
    if kind == "sweep":
        return h.sweep_doc(data, w.sweep_rows(data), w.sweep_footer(data))
    if kind == "break_even":
        return h.break_even_doc(data, w.break_even_rows(data), w.break_even_footer(data))
    raise InputError(f"report: unknown kind {kind!r}; use one of {', '.join(KINDS)}")


def html_page(kind: str, data: dict[str, Any], chosen: dict[str, Any] | None = None) -> str:
    """One report as a self-contained HTML page."""
    from ptplan.report.html import render_page

    return render_page(_as_list(build_doc(kind, data, chosen)))


def _as_list(doc: Any) -> list[Any]:
    return doc if isinstance(doc, list) else [doc]


def _load(path: Path) -> tuple[str, dict[str, Any]]:
    from ptplan.core.yamlio import quoted, read_mapping, validate

    data = read_mapping(str(path), "report")
    kind = detect_kind(data)
    if kind is None:
        raise InputError(f"report: {quoted(path)} is not a ptplan plan, pareto, whatif, sweep, "
                         "break-even, reserve, compare, runs review or campaign JSON; pass the "
                         "--format json output of one of those commands")
    if kind == "plan":
        from ptplan.planfile.schema import Plan

        validate(Plan, data, f"plan {quoted(path)}")
    return kind, data


def pages(files: list[Path]) -> str:
    """The HTML page of ``files`` (in order); a pareto frontier is marked with the plan of the
    same spec among the files, if any."""
    from ptplan.core.yamlio import quoted
    from ptplan.report.html import render_page

    loaded = [(f, *_load(f)) for f in files]
    plans = {d["spec_name"]: d for _, k, d in loaded if k == "plan"}
    docs = []
    for f, kind, data in loaded:
        chosen = plans.get(data.get("spec_name", "")) if kind == "pareto" else None
        try:
            docs += _as_list(build_doc(kind, data, chosen))
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            raise InputError(f"report: {quoted(f)} looks like a {kind} report but its field "
                             f"{exc!s} is missing or malformed; regenerate it with the ptplan "
                             "command that wrote it (--format json)") from None
    return render_page(docs)


@app.command()
def report(
    files: list[Path] = typer.Argument(..., metavar="FILE.json", help="JSON outputs of "
                                       "plan (or a campaign), pareto, whatif, reserve, compare or "
                                       "runs review (--format json)."),
    output: Path = typer.Option(None, "-o", "--output", help="Write to FILE instead of stdout."),
) -> None:
    """One self-contained HTML report (offline, interactive charts) of ptplan JSON outputs.

    The kind of each file (plan, pareto, whatif, sweep, break-even, reserve, compare, runs
    review, campaign) is detected from
    its content. A frontier is marked with the plan of the same spec among the files."""
    _run(lambda: _emit(pages(files), output))
