"""HTML report pages of what-if scenarios, sweeps, break-even searches and reserve purchases
(:mod:`ptplan.report.html`).

The charts are drawn from the report JSON; the tables beside them are the terminal's, handed
in by the caller as (caption, header, rows): the what-if rows are built in the sibling package
(``ptplan.scenarios.rows``), which this package never imports, the reserve sections by
:func:`ptplan.report.tables_reserve.reserve_sections`.
"""

from __future__ import annotations

from typing import Any

from ptplan.report.html import Chart, Doc, Section, Table
from ptplan.report.html_plan import colours, tip, usd, vl

Rows = tuple[list[str], list[list[str]]]

_PARTS = (("compute", "compute_cost_usd"), ("disks", "disk_cost_usd"),
          ("storage", "storage_cost_usd"), ("network", "network_cost_usd"))


def _numeric(header: list[str]) -> tuple[int, ...]:
    """Columns whose header names a figure (``$``, ``h``, ``%``, counts) are right-aligned."""
    keys = ("$", " h", "%", "count", "probability", "demand", "committed", "used", "spot",
            "util", "value", "GB")
    return tuple(i for i, h in enumerate(header) if any(k in h for k in keys) or h == "h")


def table(caption: str, rows: Rows) -> Table:
    header, body = rows
    return Table(caption, header, body, numeric=_numeric(header))


def money(x: str | None) -> str:
    """Dollars as the reserve table prints them (``$284,293.66``)."""
    return "-" if x is None else f"${float(x):,.2f}"


def _footer(lines: list[str]) -> Section:
    return Section("Notes", lines=lines)


# --------------------------------------------------------------------------- scenarios


def whatif_doc(report: dict[str, Any], rows: Rows, changes: list[tuple[str, Rows, list[str]]],
               footer: list[str]) -> Doc:
    """Baseline vs scenarios: each plan's total split into compute, disks, storage, network.
    ``changes``: per scenario, its name, change rows and statements."""
    plans = [("baseline", report["baseline"])] + [(s["name"], s["plan"])
                                                  for s in report["scenarios"]]
    values = [{"plan": name, "part": part, "usd": float(p[key])}
              for name, p in plans if p is not None for part, key in _PARTS]
    spec = vl(f"Baseline vs scenarios: {report['spec_name']}", values, {
        "mark": {"type": "bar", "tooltip": True},
        "encoding": {"y": {"field": "plan", "type": "nominal", "sort": None, "title": None},
                     "x": {"field": "usd", "type": "quantitative", "title": "total cost (USD)",
                           "axis": {"format": ",.0f"}},
                     "color": {"field": "part", "type": "nominal", "title": "part",
                               "scale": colours([p for p, _ in _PARTS])},
                     "order": {"field": "part", "sort": "ascending"},
                     "tooltip": [tip("plan", "plan"), tip("part", "part"),
                                 tip("usd", "USD", "quantitative", ",.2f")]}})
    parts = Table("cost by part", ["plan", *(p for p, _ in _PARTS), "total $"],
                  [[name, *(p[key] for _, key in _PARTS), p["total_cost_usd"]]
                   for name, p in plans if p is not None]
                  + [[name, "infeasible", "", "", "", ""] for name, p in plans if p is None],
                  numeric=(1, 2, 3, 4, 5))
    sections = [Section("Baseline vs scenarios",
                        charts=[Chart("baseline vs scenarios", spec, parts)],
                        tables=[table("scenarios (as the terminal table)", rows)])]
    for name, ch_rows, statements in changes:
        sections.append(Section(f"{name} vs baseline", tables=[table("changes", ch_rows)],
                                lines=statements))
    sections.append(_footer(footer))
    base = report["baseline"]
    head = [("baseline", usd(base["total_cost_usd"]) if base else "infeasible",
             "total_cost_usd")]
    head += [(s["name"], (f"${s['plan']['total_cost_usd']} ({_signed(s['delta_usd'])})"
                          if s["plan"] else "infeasible"), f"scenario-{k}")
             for k, s in enumerate(report["scenarios"], start=1)]
    head.append(("catalog", f"{report['catalog']} as of {report['catalog_as_of']}", "catalog"))
    return Doc("whatif", f"ptplan whatif: {report['spec_name']}", head, sections,
               subtitle=f"policy {report['policy']}; objective {report['objective']}")


def _signed(x: str | None) -> str:
    if x is None:
        return "-"
    return x if x.startswith("-") else "+" + x


# --------------------------------------------------------------------------- sweep


def sweep_doc(report: dict[str, Any], rows: Rows, footer: list[str]) -> Doc:
    """Cost along the swept value; solved points filled, inferred ones hollow; plan switches
    as dashed rules between the two values they lie between; the baseline as a dotted rule."""
    pts = [{"value": p["value"], "usd": float(p["total_cost_usd"]),
            "solved": "solved" if p["solved"] else "inferred (same plan both sides)",
            "layout": p["summary"]["layout"] if p["summary"] else "-"}
           for p in report["points"] if p["total_cost_usd"] is not None]
    sw = [{"mid": (a + b) / 2, "switch": n, "between": f"{a:.6g} .. {b:.6g}"}
          for n, (a, b) in enumerate((s["between"] for s in report["switches"]), start=1)]
    x_title = f"{report['swept']} VALUE ({report['value_unit']})"
    layers: list[dict[str, Any]] = [
        {"data": {"values": pts}, "mark": {"type": "line", "color": "#4c78a8"},
         "encoding": {"x": {"field": "value", "type": "quantitative", "title": x_title},
                      "y": {"field": "usd", "type": "quantitative",
                            "title": "total cost (USD)", "axis": {"format": ",.0f"},
                            "scale": {"zero": False}}}},
        {"data": {"values": pts}, "mark": {"type": "point", "size": 60, "tooltip": True},
         "encoding": {"x": {"field": "value", "type": "quantitative"},
                      "y": {"field": "usd", "type": "quantitative"},
                      "shape": {"field": "solved", "type": "nominal", "title": "point"},
                      "tooltip": [tip("value", "value", "quantitative", ".6g"),
                                  tip("usd", "USD", "quantitative", ",.2f"),
                                  tip("solved", "point"), tip("layout", "layout")]}}]
    if sw:
        layers.append({"data": {"values": sw},
                       "mark": {"type": "rule", "color": "#e45756", "strokeDash": [6, 3],
                                "tooltip": True},
                       "encoding": {"x": {"field": "mid", "type": "quantitative"},
                                    "tooltip": [tip("switch", "plan switch"),
                                                tip("between", "between")]}})
    base = report["baseline"]["total_cost_usd"]
    if base is not None:
        layers.append({"data": {"values": [{"usd": float(base), "what": "baseline"}]},
                       "mark": {"type": "rule", "color": "grey", "strokeDash": [2, 2],
                                "tooltip": True},
                       "encoding": {"y": {"field": "usd", "type": "quantitative"},
                                    "tooltip": [tip("what", "what"),
                                                tip("usd", "USD", "quantitative", ",.2f")]}})
    spec = vl(f"Cost vs {report['swept']} ({len(sw)} plan switches)", [], {"layer": layers},
              height=320)
    spec.pop("data")
    chart = Chart("sweep", spec, table("sweep (as the terminal table)", rows))
    head = [("baseline", usd(base), "total_cost_usd"),
            ("swept", x_title, "swept"),
            ("points", f"{len(report['points'])} ({report['points_solved']} solved)", "points"),
            ("plan switches", str(len(report["switches"])), "switches"),
            ("catalog", f"{report['catalog']} as of {report['catalog_as_of']}", "catalog")]
    return Doc("sweep", f"ptplan whatif sweep: {report['spec_name']}", head,
               [Section("Cost along the sweep", charts=[chart]), _footer(footer)],
               subtitle=f"policy {report['policy']}; objective {report['objective']}")


# --------------------------------------------------------------------------- break-even


def break_even_doc(report: dict[str, Any], rows: Rows, footer: list[str]) -> Doc:
    """Total cost at the multipliers of the matched prices that bracket each change of plan
    (and today's, 1), with the break-even multiplier of each side as a rule."""
    base = report["baseline"]
    pts = [{"m": 1.0, "usd": float(base["total_cost_usd"]), "what": "today"}]
    marks = []
    for s in report["sides"]:
        if not s["found"]:
            continue
        for key, m in (("plan_same", "multiplier_same"), ("plan_changed", "multiplier_changed")):
            if s.get(key):
                pts.append({"m": s[m], "usd": float(s[key]["total_cost_usd"]),
                            "what": f"{s['direction']}: {key.removeprefix('plan_')} plan"})
        cross = s["crossing_multiplier"]
        marks.append({"m": cross if cross is not None else sum(s["bracket"]) / 2,
                      "what": f"break-even {s['direction']}",
                      "bracket": f"[{s['bracket'][0]:.6g}, {s['bracket'][1]:.6g}]"})
    layers: list[dict[str, Any]] = [
        {"data": {"values": pts}, "mark": {"type": "point", "filled": True, "size": 90,
                                            "tooltip": True},
         "encoding": {"x": {"field": "m", "type": "quantitative",
                            "title": f"multiplier on {report['selector']} prices"},
                      "y": {"field": "usd", "type": "quantitative", "title": "total cost (USD)",
                            "scale": {"zero": False}, "axis": {"format": ",.0f"}},
                      "color": {"field": "what", "type": "nominal", "title": "plan"},
                      "tooltip": [tip("what", "plan"), tip("m", "multiplier", "quantitative",
                                                           ".6g"),
                                  tip("usd", "USD", "quantitative", ",.2f")]}}]
    if marks:
        layers.append({"data": {"values": marks},
                       "mark": {"type": "rule", "color": "#e45756", "strokeDash": [6, 3],
                                "tooltip": True},
                       "encoding": {"x": {"field": "m", "type": "quantitative"},
                                    "tooltip": [tip("what", "marker"),
                                                tip("m", "multiplier", "quantitative", ".6g"),
                                                tip("bracket", "bracket")]}})
    spec = vl(f"Break-even multipliers: {report['selector']}", [], {"layer": layers},
              height=300)
    spec.pop("data")
    chart = Chart("break-even", spec, table("break-even (as the terminal table)", rows))
    head = [("today", usd(base["total_cost_usd"]), "total_cost_usd"),
            ("selector", f"{report['selector']} ({report['matched']} items)", "selector")]
    head += [(f"break-even {s['direction']}",
              (f"x{s['crossing_multiplier']:.6g}" if s["found"] and
               s["crossing_multiplier"] is not None else
               f"in [{s['bracket'][0]:.6g}, {s['bracket'][1]:.6g}]" if s["found"] else "none"),
              f"break-even-{s['direction']}") for s in report["sides"]]
    return Doc("break_even", f"ptplan whatif break-even: {report['spec_name']}", head,
               [Section("Break-even prices", charts=[chart]), _footer(footer)],
               subtitle=f"policy {report['policy']}; objective {report['objective']}")


# --------------------------------------------------------------------------- reserve


def reserve_doc(r: dict[str, Any], title: str,
                tables: list[tuple[str, list[str], list[list[str]]]], footer: list[str]) -> Doc:
    """Weekly demand vs committed capacity per scenario; expected cost vs today's commitments
    only and all on-demand. ``tables``: the terminal's (purchase, expected cost, scenarios,
    weekly coverage)."""
    by = {caption: (header, rows) for caption, header, rows in tables}
    cost_rows = [{"scenario": f"scenario {s['name']}", "what": what, "usd": float(s[key])}
                 for s in r["scenarios"]
                 for what, key in (("this purchase", "total_cost_usd"),
                                   ("today's commitments only", "existing_only_cost_usd"),
                                   ("all on-demand", "on_demand_only_cost_usd"))]
    cost_rows += [{"scenario": "expected over the scenarios", "what": what, "usd": float(r[key])}
                  for what, key in (("this purchase", "expected_total_cost_usd"),
                                    ("today's commitments only", "existing_only_cost_usd"),
                                    ("all on-demand", "on_demand_only_cost_usd"))]
    order = ["this purchase", "today's commitments only", "all on-demand"]
    cost_spec = vl("Expected cost vs today's commitments only and all on-demand", cost_rows, {
        "mark": {"type": "bar", "tooltip": True},
        "encoding": {"y": {"field": "scenario", "type": "nominal", "sort": None, "title": None},
                     "yOffset": {"field": "what", "type": "nominal", "sort": order},
                     "x": {"field": "usd", "type": "quantitative", "title": "USD over the "
                           "horizon", "axis": {"format": ",.0f"}},
                     "color": {"field": "what", "type": "nominal", "sort": order,
                               "title": "cost with"},
                     "tooltip": [tip("scenario", "scenario"), tip("what", "cost with"),
                                 tip("usd", "USD", "quantitative", ",.2f")]}})
    sc_h, sc = by["scenarios"]
    cost_h, costs = by["expected cost over the horizon"]
    cost_chart = Chart("expected cost", cost_spec,
                       Table("expected cost over the horizon", cost_h, costs, numeric=(1, 2)))
    rank = {s["name"]: k for k, s in enumerate(r["scenarios"])}
    cov = [{"scenario": c["scenario"], "k": rank.get(c["scenario"], len(rank)),
            "instance": f"{c['provider']}/{c['region']}/{c['instance_type']}",
            "week": c["week"], "series": series, "nodes": c[key]}
           for c in r["coverage"] for series, key in (("demand", "demand_nodes"),
                                                      ("committed", "committed_nodes"))]
    cov_spec = {
        "title": {"text": f"{r['portfolio']}: weekly demand vs committed capacity",
                  "anchor": "start", "fontSize": 13},
        "data": {"values": cov},
        # scenarios in the report's order, by a rank field: a sort list puts the names into a
        # Vega expression, which failed to parse ("Unexpected token ILLEGAL") for the hostile
        # name of tests/report_fixtures.py
        "facet": {"row": {"field": "scenario", "type": "nominal",
                          "sort": {"field": "k", "op": "min"},
                          "title": "scenario"}},
        "spec": {"width": 520, "height": 120,
                 "mark": {"type": "line", "interpolate": "step-after", "tooltip": True},
                 "encoding": {"x": {"field": "week", "type": "quantitative", "title": "week"},
                              "y": {"field": "nodes", "type": "quantitative",
                                    "title": "nodes (weekly avg)"},
                              "color": {"field": "instance", "type": "nominal",
                                        "title": "instance"},
                              "strokeDash": {"field": "series", "type": "nominal",
                                             "title": "series", "sort": ["demand", "committed"]},
                              "tooltip": [tip("scenario", "scenario"), tip("instance", "instance"),
                                          tip("week", "week", "quantitative"),
                                          tip("series", "series"),
                                          tip("nodes", "nodes", "quantitative", ".2f")]}},
        "resolve": {"scale": {"y": "independent"}},
        "config": {"view": {"stroke": None}, "legend": {"labelLimit": 320}}}
    cov_caption = "weekly coverage (average concurrent nodes)"
    cov_h, cov_t = by[cov_caption]
    cov_chart = Chart("weekly demand vs committed", cov_spec,
                      Table(cov_caption, cov_h, cov_t, numeric=tuple(range(3, 9))))
    buy_h, buy = by["purchase"]
    sections = [Section("Expected cost", charts=[cost_chart],
                        tables=[Table("scenarios", sc_h, sc, numeric=tuple(range(1, 9)))]),
                Section("Demand vs commitments", charts=[cov_chart]),
                Section("Purchase", tables=[Table("purchase", buy_h, buy,
                                                  numeric=tuple(range(3, 11)))]),
                _footer(footer)]
    head = [("expected total", money(r["expected_total_cost_usd"]), "expected_total_cost_usd"),
            ("today's commitments only", money(r["existing_only_cost_usd"]),
             "existing_only_cost_usd"),
            ("all on-demand", money(r["on_demand_only_cost_usd"]), "on_demand_only_cost_usd"),
            ("saved vs all on-demand", money(r["expected_savings_vs_on_demand_only_usd"]),
             "expected_savings_vs_on_demand_only_usd"),
            ("upfront due now", money(r["upfront_due_now_usd"]), "upfront_due_now_usd"),
            ("commitments bought", str(sum(p["count"] for p in r["purchases"])), "purchases"),
            ("catalog", f"{r['catalog']['name']} as of {r['catalog']['as_of']}", "catalog")]
    return Doc("reserve", title, head, sections,
               subtitle=f"status {r['status']}; verification: {r['verification']}")
