"""What ``ptplan plan CAMPAIGN`` prints: the campaign's stages, stored data and hand-overs as a
table and Markdown (the HTML page, :mod:`ptplan.report.html_campaign`, uses the same rows);
every figure is one the campaign JSON holds."""

from __future__ import annotations

from typing import Any

from ptplan.report.tables import _table, md_table


def campaign_rows(r: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    head = ["stage", "method", "after", "point", "where", "start h", "end h", "cost $"]
    rows = []
    for s in r["stages"]:
        p = s["plan"]
        rows.append([s["name"], s["method"], ", ".join(s["after"]) or "-",
                     f"{s['point'] + 1} of {len(s['frontier'])}",
                     f"{p['provider']}:{p['region']}", f"{s['start_hours']:.2f}",
                     f"{s['end_hours']:.2f}", p["total_cost_usd"]])
    for st in r["stored"]:
        rows.append([f"store {st['stage']}", st["what"], f"{st['gb']:.1f} GB", "",
                     f"{st['provider']}:{st['region']} {st['tier']}", "", "",
                     f"{st['cost_usd']:.2f}"])
    for h in r["handovers"]:
        rows.append([f"{h['from']} -> {h['to']}", h["what"], f"{h['gb']:.1f} GB", "",
                     h["path"], "", "", f"{h['cost_usd']:.2f}"])
    rows.append(["total", "", "", "", "", "0.00", f"{r['makespan_hours']:.2f}",
                 f"{r['total_cost_usd']:.2f}"])
    return head, rows


def campaign_footer(r: dict[str, Any]) -> list[str]:
    budget = f"${r['budget_usd']:,.2f}" if r["budget_usd"] is not None else "none"
    return [f"campaign {r['name']}: makespan {r['makespan_hours']:.2f} h (deadline "
            f"{r['deadline_hours']:g} h), total ${r['total_cost_usd']:,.2f} = stages "
            f"${r['stages_cost_usd']:,.2f} + hand-overs ${r['handover_cost_usd']:,.2f}; budget "
            f"{budget}", "critical path: " + " -> ".join(r["critical_path"]),
            f"solver {r['solver']['name']}: {r['solver']['status']}", r["note"]]


def campaign_table(r: dict[str, Any]) -> str:
    return _table(f"ptplan plan: campaign {r['name']}", *campaign_rows(r), campaign_footer(r))


def campaign_markdown(r: dict[str, Any]) -> str:
    return (f"# ptplan plan: campaign {r['name']}\n\n" + md_table(*campaign_rows(r)) + "\n"
            + "\n".join(f"- {line}" for line in campaign_footer(r)) + "\n")
