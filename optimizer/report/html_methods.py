"""HTML report pages for choosing a method: ``ptplan compare`` (expected cost against the
forgetting probability, with break-even markers) and ``ptplan runs review`` (the ledger's
method–cost–benefit review) (:mod:`ptplan.report.html`).

The charts are drawn from the report JSON; the side-by-side tables are the terminal's
(:mod:`ptplan.report.tables_compare`, :mod:`ptplan.report.tables_runs`), handed in by the
caller as (header, rows) and footers.
Dollar figures are formatted as those tables format them (``1,234.56``; review dollars as the
JSON's two-decimal strings).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from ptplan.report.html import Chart, Doc, Section, Table
from ptplan.report.html_analysis import Rows, table
from ptplan.report.html_plan import tip, vl

P_STEPS = 20
"""The expected-cost lines are drawn through p = 0, 0.05, …, 1 (they are straight: E = C + p·R)."""


def d2(x: float | None) -> str:
    """Dollars as the compare table prints them (``1,234.56``; ``-`` for none)."""
    return "-" if x is None else f"{x:,.2f}"


def _p_star(c: dict[str, Any]) -> float | None:
    p = c["break_even_p"]
    return p if p is not None and 0 <= p <= 1 else None


# --------------------------------------------------------------------------- compare


def compare_doc(r: dict[str, Any], rows: Rows, footer: list[str]) -> Doc:
    """Expected cost E(p) = C + p·R of each candidate over p in [0, 1] (R: its prior's rework,
    else one more run), its prior as a dot, its break-even p* (where it stops being the
    cheapest in expectation) as a diamond and a dashed rule; the cost parts as stacked bars."""
    cands = r["candidates"]
    line = [{"candidate": c["name"], "p": k / P_STEPS,
             "usd": c["planned_cost_usd"] + k / P_STEPS * c["break_even_rework_usd"]}
            for c in cands for k in range(P_STEPS + 1)]
    priors = [{"candidate": c["name"], "p": c["prior"]["p_forgetting"],
               "usd": c["expected_cost_usd"], "source": c["prior"]["source"]}
              for c in cands if c["prior"] is not None]
    marks = [{"candidate": c["name"], "p": p, "what": f"break-even of {c['name']}",
              "usd": c["planned_cost_usd"] + p * c["break_even_rework_usd"]}
             for c in cands if (p := _p_star(c)) is not None]
    x = {"field": "p", "type": "quantitative", "title": "forgetting probability p",
         "scale": {"domain": [0, 1]}}
    y = {"field": "usd", "type": "quantitative", "title": "expected cost (USD)",
         "axis": {"format": ",.0f"}, "scale": {"zero": False}}
    colour = {"field": "candidate", "type": "nominal", "title": "candidate", "sort": None}
    layers: list[dict[str, Any]] = [
        {"data": {"values": line}, "mark": {"type": "line", "tooltip": True},
         "encoding": {"x": x, "y": y, "color": colour,
                      "tooltip": [tip("candidate", "candidate"),
                                  tip("p", "p", "quantitative", ".2f"),
                                  tip("usd", "expected USD", "quantitative", ",.2f")]}}]
    if priors:
        layers.append({"data": {"values": priors},
                       "mark": {"type": "point", "filled": True, "size": 90, "tooltip": True},
                       "encoding": {"x": {"field": "p", "type": "quantitative"},
                                    "y": {"field": "usd", "type": "quantitative"},
                                    "color": colour,
                                    "tooltip": [tip("candidate", "prior of"),
                                                tip("p", "P(forget)", "quantitative", ".3f"),
                                                tip("usd", "expected USD", "quantitative",
                                                    ",.2f"),
                                                tip("source", "source")]}})
    if marks:
        layers += [
            {"data": {"values": marks},
             "mark": {"type": "rule", "color": "#e45756", "strokeDash": [6, 3]},
             "encoding": {"x": {"field": "p", "type": "quantitative"}}},
            {"data": {"values": marks},
             "mark": {"type": "point", "shape": "diamond", "size": 140, "filled": True,
                      "color": "#e45756", "tooltip": True},
             "encoding": {"x": {"field": "p", "type": "quantitative"},
                          "y": {"field": "usd", "type": "quantitative"},
                          "tooltip": [tip("what", "marker"),
                                      tip("p", "p*", "quantitative", ".3f"),
                                      tip("usd", "expected USD", "quantitative", ",.2f")]}}]
    title = "Expected cost vs forgetting probability (red diamonds: break-even p*)"
    spec = vl(title, [], {"layer": layers}, height=320)
    spec.pop("data")
    curve_table = Table("expected cost E(p) = planned + p x rework",
                        ["candidate", "planned $", "rework $", "rework basis", "P(forget)",
                         "E at prior $", "break-even p*"],
                        [[c["name"], d2(c["planned_cost_usd"]), d2(c["break_even_rework_usd"]),
                          c["break_even_rework_basis"],
                          "no prior" if c["prior"] is None else
                          f"{c['prior']['p_forgetting']:.3f}",
                          d2(c["expected_cost_usd"]), c["break_even"]] for c in cands],
                        numeric=(1, 2, 4, 5))
    parts = []
    other = any("other_cost_usd" in c for c in cands)  # other_costs (issue #25): only then
    for c in cands:
        gen = c["data_generation"]
        parts += [{"candidate": c["name"], "part": "run", "usd": c["run_cost_usd"]},
                  {"candidate": c["name"], "part": "data generation",
                   "usd": gen["cost_usd"] if gen else 0.0}]
        if other:
            parts.append({"candidate": c["name"], "part": "other costs",
                          "usd": c["other_cost_usd"]})
        if c["expected_cost_usd"] is not None:
            parts.append({"candidate": c["name"], "part": "expected rework (p x R)",
                          "usd": c["expected_cost_usd"] - c["planned_cost_usd"]})
    order = ["run", "data generation", *(["other costs"] if other else []),
             "expected rework (p x R)"]
    colors = ["#4c78a8", "#f58518", *(["#72b7b2"] if other else []), "#e45756"]
    bars = vl("Whole cost by part", parts, {
        "mark": {"type": "bar", "tooltip": True},
        "encoding": {"y": {"field": "candidate", "type": "nominal", "sort": None, "title": None},
                     "x": {"field": "usd", "type": "quantitative", "title": "USD",
                           "axis": {"format": ",.0f"}},
                     "color": {"field": "part", "type": "nominal", "title": "part",
                               "scale": {"domain": order, "range": colors}},
                     "order": {"field": "part", "sort": "descending"},
                     "tooltip": [tip("candidate", "candidate"), tip("part", "part"),
                                 tip("usd", "USD", "quantitative", ",.2f")]}})
    parts_table = Table("whole cost by part",
                        ["candidate", "run $", "data gen $", *(["other $"] if other else []),
                         "p x rework $", "total $"],
                        [[c["name"], d2(c["run_cost_usd"]),
                          d2(c["data_generation"]["cost_usd"]) if c["data_generation"] else "-",
                          *([d2(c["other_cost_usd"])] if other else []),
                          "-" if c["expected_cost_usd"] is None else
                          d2(c["expected_cost_usd"] - c["planned_cost_usd"]),
                          d2(c["expected_cost_usd"] if c["expected_cost_usd"] is not None
                             else c["planned_cost_usd"])] for c in cands],
                        numeric=(1, 2, 3, 4, 5) if other else (1, 2, 3, 4))
    sections = [
        Section("Expected cost vs forgetting probability",
                charts=[Chart("expected cost vs forgetting probability", spec, curve_table)],
                lines=[r["statement"] or f"priors: {r['priors']}"]),
        Section("Side by side", charts=[Chart("whole cost by part", bars, parts_table)],
                tables=[table("candidates (as the terminal table)", rows)]),
        Section("Notes", lines=footer)]
    by = "expected cost" if r["ranked_by"] == "expected_cost_usd" else "planned cost"
    head = [("cheapest by " + by, r["ranking"][0], "cheapest")]
    for k, c in enumerate(cands, start=1):
        e = c["expected_cost_usd"]
        head.append((f"{c['name']}: " + ("expected" if e is not None else "planned"),
                     f"${d2(e if e is not None else c['planned_cost_usd'])}",
                     f"candidate-{k}"))
    head.append(("priors", r["priors"] or "none", "priors"))
    return Doc("compare", "ptplan compare: " + " vs ".join(c["name"] for c in cands), head,
               sections, subtitle=f"ranking by {by}: " + " < ".join(r["ranking"]))


# --------------------------------------------------------------------------- runs review


def _dollars(x: str | None) -> float:
    return float(Decimal(x)) if x is not None else 0.0


def review_doc(rv: dict[str, Any], tables: list[tuple[str, list[str], list[list[str]]]],
               footer: list[str]) -> Doc:
    """Per grouping: TCO split into the groups' own runs and the rework they caused, and TCO
    per target point; per run: target points gained against actual cost, forgetting runs
    marked. ``tables``: the terminal's (caption, header, rows)."""
    by = {caption: (header, rows) for caption, header, rows in tables}
    sections = []
    titles = {"method": "per method", "family": "per model family and method",
              "project": "per project"}
    for grouping, groups in rv["groups"].items():
        name = titles[grouping]
        tco = [{"group": g["group"], "part": part, "usd": value}
               for g in groups for part, value in (
                   ("own runs", _dollars(g["tco_usd"]) - _dollars(g["rework_caused_usd"])),
                   ("rework caused", _dollars(g["rework_caused_usd"])))]
        tco_spec = vl(f"TCO {name}: own runs + the rework they caused", tco, {
            "mark": {"type": "bar", "tooltip": True},
            "encoding": {"y": {"field": "group", "type": "nominal", "sort": None, "title": None},
                         "x": {"field": "usd", "type": "quantitative", "title": "USD",
                               "axis": {"format": ",.0f"}},
                         "color": {"field": "part", "type": "nominal", "title": "part",
                                   "scale": {"domain": ["own runs", "rework caused"],
                                             "range": ["#4c78a8", "#e45756"]}},
                         "order": {"field": "part", "sort": "descending"},
                         "tooltip": [tip("group", "group"), tip("part", "part"),
                                     tip("usd", "USD", "quantitative", ",.2f")]}})
        per_point = [{"group": g["group"], "what": what, "usd": _dollars(g[key])}
                     for g in groups for what, key in (("cost per point", "cost_per_point_usd"),
                                                       ("TCO per point", "tco_per_point_usd"))
                     if g[key] is not None]
        pp_spec = vl(f"Dollars per target point {name}", per_point, {
            "mark": {"type": "bar", "tooltip": True},
            "encoding": {"y": {"field": "group", "type": "nominal", "sort": None, "title": None},
                         "yOffset": {"field": "what", "type": "nominal"},
                         "x": {"field": "usd", "type": "quantitative", "title": "USD per point",
                               "axis": {"format": ",.0f"}},
                         "color": {"field": "what", "type": "nominal", "title": "measure"},
                         "tooltip": [tip("group", "group"), tip("what", "measure"),
                                     tip("usd", "USD", "quantitative", ",.2f")]}})
        cost_h, cost_rows = by[f"{name}: cost"]
        ben_h, ben_rows = by[f"{name}: benefit"]
        charts = [Chart(f"TCO {name}", tco_spec, table(f"{name}: cost", (cost_h, cost_rows)))]
        if per_point:
            charts.append(Chart(f"dollars per point {name}", pp_spec,
                                table(f"{name}: benefit", (ben_h, ben_rows))))
        sections.append(Section(name.capitalize(), charts=charts,
                                tables=[] if per_point else
                                [table(f"{name}: benefit", (ben_h, ben_rows))]))
    pts = [{"run": r["id"], "method": r["method"], "usd": _dollars(r["actual_usd"]),
            "gain": r["target_gain"],
            "forgot": "forgot" if "forgetting" in r["flags"] else "kept general ability",
            "general": r["general_change"] if r["general_change"] is not None else "-"}
           for r in rv["runs"] if r["target_gain"] is not None]
    run_h, run_rows = by["runs: benefit"]
    runs_tables = [table("runs: cost", by["runs: cost"])]
    if pts:
        scatter = vl("Runs: target points gained vs actual cost", pts, {
            "mark": {"type": "point", "filled": True, "size": 80, "tooltip": True},
            "encoding": {"x": {"field": "usd", "type": "quantitative", "title": "actual USD",
                               "axis": {"format": ",.0f"}},
                         "y": {"field": "gain", "type": "quantitative",
                               "title": "target points gained"},
                         "color": {"field": "method", "type": "nominal", "title": "method"},
                         "shape": {"field": "forgot", "type": "nominal", "title": "general"},
                         "tooltip": [tip("run", "run"), tip("method", "method"),
                                     tip("usd", "actual USD", "quantitative", ",.2f"),
                                     tip("gain", "gain", "quantitative", "+.2f"),
                                     tip("general", "general change")]}}, height=300)
        runs_section = Section("Runs", charts=[Chart("runs", scatter,
                                                     table("runs: benefit", (run_h, run_rows)))],
                               tables=runs_tables)
    else:
        runs_section = Section("Runs", tables=[*runs_tables,
                                               table("runs: benefit", (run_h, run_rows))])
    recs = [f"{x['text']} (evidence: {', '.join(x['evidence_runs'])})"
            for x in rv["recommendations"]] or ["none: no method on a model family is outdone "
                                                "on recorded TCO per point by one that did "
                                                "not forget"]
    sections = [Section("Recommendations", lines=recs), *sections, runs_section,
                Section("Notes", lines=footer)]
    t = rv["totals"]
    head = [("runs", str(t["runs"]), "runs"), ("actual", f"${t['actual_usd']}", "actual_usd"),
            ("planned", f"${t['planned_usd']}", "planned_usd"),
            ("rework", f"${t['rework_usd']}", "rework_usd"), ("TCO", f"${t['tco_usd']}",
                                                               "tco_usd"),
            ("recommendations", str(len(rv["recommendations"])), "recommendations")]
    th = rv["thresholds"]
    return Doc("review", "ptplan runs review: method-cost-benefit", head, sections,
               subtitle=f"forgetting: general change below -{th['forgetting_points']:g} points;"
                        f" plan variance above {100 * th['variance']:g}%")
