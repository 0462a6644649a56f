"""HTML report of a campaign plan (``ptplan plan CAMPAIGN.yaml --format html``, ``ptplan report
CAMPAIGN.json``; :mod:`ptplan.report.html`): the stages on a timeline against the deadline
(critical path marked), each stage's cost–time frontier with the chosen point, where the money
goes (stages, storage, hand-overs), then each stage's own plan page
(:func:`ptplan.report.html_plan.plan_doc`).

Figures are the campaign JSON's, formatted as the terminal's campaign table formats them; the
terminal table itself is handed in by the caller (its rows:
:mod:`ptplan.report.tables_campaign`).
"""

from __future__ import annotations

from typing import Any

from ptplan.report.html import Chart, Doc, Section, Table
from ptplan.report.html_analysis import Rows, table
from ptplan.report.html_plan import plan_doc, tip, vl


def _d(x: float) -> str:
    return f"{x:,.2f}"


def campaign_docs(r: dict[str, Any], rows: Rows, footer: list[str]) -> list[Doc]:
    """The campaign page followed by each stage's plan page."""
    stages = r["stages"]
    critical = set(r["critical_path"])
    bars = [{"stage": s["name"], "start": s["start_hours"], "end": s["end_hours"],
             "path": "critical path" if s["name"] in critical else "off the critical path",
             "usd": float(s["plan"]["total_cost_usd"]), "k": k}
            for k, s in enumerate(stages)]
    layers: list[dict[str, Any]] = [
        {"data": {"values": bars}, "mark": {"type": "bar", "tooltip": True},
         "encoding": {"y": {"field": "stage", "type": "nominal", "title": None,
                            "sort": {"field": "k", "op": "min"}},
                      "x": {"field": "start", "type": "quantitative", "title": "hours"},
                      "x2": {"field": "end"},
                      "color": {"field": "path", "type": "nominal", "title": None,
                                "scale": {"domain": ["critical path", "off the critical path"],
                                          "range": ["#e45756", "#4c78a8"]}},
                      "tooltip": [tip("stage", "stage"),
                                  tip("start", "start h", "quantitative", ".2f"),
                                  tip("end", "end h", "quantitative", ".2f"),
                                  tip("usd", "USD", "quantitative", ",.2f")]}}]
    if r["deadline_hours"] is not None:
        layers.append({"data": {"values": [{"hours": r["deadline_hours"], "what": "deadline"}]},
                       "mark": {"type": "rule", "color": "grey", "strokeDash": [4, 3],
                                "tooltip": True},
                       "encoding": {"x": {"field": "hours", "type": "quantitative"},
                                    "tooltip": [tip("what", "what"),
                                                tip("hours", "h", "quantitative", ".2f")]}})
    timeline = vl(f"Stages against the deadline ({r['deadline_hours']:g} h)"
                  if r["deadline_hours"] is not None else "Stages", [], {"layer": layers},
                  height=max(60, 34 * len(stages)))
    timeline.pop("data")
    stage_table = Table("stages", ["stage", "method", "after", "start h", "end h", "cost $",
                                   "critical"],
                        [[s["name"], s["method"], ", ".join(s["after"]) or "-",
                          f"{s['start_hours']:.2f}", f"{s['end_hours']:.2f}",
                          s["plan"]["total_cost_usd"], "yes" if s["name"] in critical else "-"]
                         for s in stages], numeric=(3, 4, 5))
    pts = [{"stage": s["name"], "k": k, "point": i + 1, "hours": p["makespan_hours"],
            "usd": float(p["total_cost_usd"]), "where": f"{p['provider']}:{p['region']}",
            "chosen": "chosen" if i == s["point"] else "frontier"}
           for k, s in enumerate(stages) for i, p in enumerate(s["frontier"])]
    x = {"field": "hours", "type": "quantitative", "title": "stage hours",
         "scale": {"type": "log"}}
    y = {"field": "usd", "type": "quantitative", "title": "stage cost (USD, log scale)",
         "axis": {"format": ",.0f"}, "scale": {"type": "log"}}
    colour = {"field": "stage", "type": "nominal", "title": "stage",
              "sort": {"field": "k", "op": "min"}}
    tips = [tip("stage", "stage"), tip("point", "point"), tip("hours", "h", "quantitative", ".2f"),
            tip("usd", "USD", "quantitative", ",.2f"), tip("where", "where"),
            tip("chosen", "chosen")]
    frontier = vl("Each stage's cost-time frontier (diamond: the point chosen)", [], {"layer": [
        {"data": {"values": pts},
         "mark": {"type": "line", "point": {"filled": True, "size": 50}, "tooltip": True},
         "encoding": {"x": x, "y": y, "color": colour, "tooltip": tips}},
        {"data": {"values": [p for p in pts if p["chosen"] == "chosen"]},
         "mark": {"type": "point", "shape": "diamond", "size": 260, "filled": True,
                  "stroke": "black", "strokeWidth": 1, "tooltip": True},
         "encoding": {"x": {"field": "hours", "type": "quantitative"},
                      "y": {"field": "usd", "type": "quantitative"}, "color": colour,
                      "tooltip": tips}}]}, height=300)
    frontier.pop("data")
    front_table = Table("frontier points", ["stage", "point", "h", "cost $", "where", "chosen"],
                        [[p["stage"], str(p["point"]), f"{p['hours']:.2f}",
                          f"{p['usd']:.2f}", p["where"],
                          "yes" if p["chosen"] == "chosen" else "-"] for p in pts],
                        numeric=(1, 2, 3))
    parts = [{"item": f"stage {s['name']}", "usd": float(s["plan"]["total_cost_usd"])}
             for s in stages]
    parts += [{"item": f"store {st['stage']}", "usd": st["cost_usd"]} for st in r["stored"]]
    parts += [{"item": f"{h['from']} -> {h['to']}", "usd": h["cost_usd"]}
              for h in r["handovers"]]
    money = vl(f"Where the money goes (total ${_d(r['total_cost_usd'])})", parts, {
        "mark": {"type": "bar", "tooltip": True, "color": "#4c78a8"},
        "encoding": {"y": {"field": "item", "type": "nominal", "sort": None, "title": None},
                     "x": {"field": "usd", "type": "quantitative", "title": "USD",
                           "axis": {"format": ",.2f"}},
                     "tooltip": [tip("item", "item"),
                                 tip("usd", "USD", "quantitative", ",.2f")]}})
    sections = [
        Section("Timeline", charts=[Chart("stages timeline", timeline, stage_table)]),
        Section("Frontiers", charts=[Chart("stage frontiers", frontier, front_table)]),
        Section("Costs", charts=[Chart("where the money goes", money,
                                       table("campaign (as the terminal table)", rows))]),
        Section("Notes", lines=footer)]
    budget = f"${r['budget_usd']:,.2f}" if r["budget_usd"] is not None else "-"
    deadline = f"{r['deadline_hours']:g} h" if r["deadline_hours"] is not None else "none"
    head = [("total", f"${_d(r['total_cost_usd'])}", "total_cost_usd"),
            ("stages", f"${_d(r['stages_cost_usd'])}", "stages_cost_usd"),
            ("hand-overs", f"${_d(r['handover_cost_usd'])}", "handover_cost_usd"),
            ("makespan vs deadline", f"{r['makespan_hours']:.2f} h of {deadline}",
             "makespan_hours"),
            ("budget", budget, "budget_usd"),
            ("critical path", " -> ".join(r["critical_path"]), "critical_path"),
            ("solver", f"{r['solver']['name']}: {r['solver']['status']}", "solver")]
    doc = Doc("campaign", f"ptplan plan: campaign {r['name']}", head, sections,
              subtitle=f"{len(stages)} stages; each stage's verified plan follows")
    out = [doc]
    for s in stages:
        d = plan_doc(s["plan"])
        d.title = f"stage {s['name']}: {d.title}"
        out.append(d)
    return out
