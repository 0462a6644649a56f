"""A what-if report's tables as rows of strings (header, rows) and footer lines, which the CLI
hands to the report's table, Markdown and HTML renderings (:mod:`ptplan.report.tables_whatif`,
:mod:`ptplan.report.html_analysis`); every figure is one the report's JSON holds. (Imports
stay light: the CLI imports this module at start-up.)"""

from __future__ import annotations

from typing import Any

Rows = tuple[list[str], list[list[str]]]


def _h(x: float | None) -> str:
    return "-" if x is None else f"{x:,.2f}"


def _signed(x: str | None) -> str:
    if x is None:
        return "-"
    return x if x.startswith("-") else "+" + x


def _where(plan: dict[str, Any] | None) -> str:
    return "-" if plan is None else f"{plan['provider']} {plan['region']}"


def _pools(summary_or_plan: dict[str, Any] | None) -> str:
    if summary_or_plan is None:
        return "-"
    if "pools" in summary_or_plan and summary_or_plan["pools"] and \
            isinstance(summary_or_plan["pools"][0], str):
        return "; ".join(summary_or_plan["pools"])
    from ptplan.planfile.schema import Plan
    from ptplan.scenarios.analysis import pool_label

    p = Plan.model_validate(summary_or_plan)
    return "; ".join(pool_label(pool) for pool in p.pools)


def whatif_rows(report: dict[str, Any]) -> Rows:
    header = ["scenario", "rules", "total $", "delta $", "delta %", "makespan h", "delta h",
              "layout", "where", "pools"]
    base = report["baseline"]
    rows = [["baseline", "(catalog prices)", base["total_cost_usd"] if base else "infeasible",
             "", "", _h(base["makespan_hours"]) if base else "-", "",
             base["layout"] if base else "-", _where(base), _pools(base)]]
    for s in report["scenarios"]:
        p, ch = s["plan"], s["changes"]
        rows.append([
            s["name"], "; ".join(s["rules"]), p["total_cost_usd"] if p else "infeasible",
            _signed(s["delta_usd"]),
            "-" if not ch or ch["total"]["delta_percent"] is None
            else f"{ch['total']['delta_percent']:+.2f}",
            _h(p["makespan_hours"]) if p else "-",
            f"{ch['makespan_hours']['delta']:+,.2f}" if ch else "-",
            p["layout"] if p else "-", _where(p), _pools(p)])
    return header, rows


def change_rows(changes: dict[str, Any]) -> Rows:
    header = ["item", "baseline", "scenario", "baseline $", "scenario $", "delta $"]
    rows: list[list[str]] = []
    for r in changes["pools"]:
        rows.append([f"pool {r['pool']}", r["baseline"] or "-", r["scenario"] or "-",
                     r["baseline_cost_usd"] or "-", r["scenario_cost_usd"] or "-",
                     _signed(r["delta_usd"])])
    for r in changes["phases"]:
        def ph(pool: str | None, prec: str | None, busy: float | None) -> str:
            return "-" if pool is None else f"{pool}, {prec or '-'}, {_h(busy)} h busy"

        rows.append([f"phase {r['phase']}",
                     ph(r["baseline_pool"], r["baseline_precision"], r["baseline_busy_hours"]),
                     ph(r["scenario_pool"], r["scenario_precision"], r["scenario_busy_hours"]),
                     r["baseline_cost_usd"] or "-", r["scenario_cost_usd"] or "-",
                     _signed(r["delta_usd"])])
    disks = changes.get("disks")
    if disks and disks["delta_usd"] != "0.00":
        rows.append(["boot disks", disks["baseline"], disks["scenario"], disks["baseline_usd"],
                     disks["scenario_usd"], _signed(disks["delta_usd"])])
    for r in changes["storage"]:
        if r["baseline_tier"] != r["scenario_tier"] or r["delta_usd"] != "0.00":
            rows.append([f"storage {r['data_class']}", r["baseline_tier"] or "-",
                         r["scenario_tier"] or "-", "", "", _signed(r["delta_usd"])])
    return header, rows


def whatif_footer(report: dict[str, Any]) -> list[str]:
    lines = []
    if report["baseline_error"]:
        lines.append(f"baseline: no feasible plan: {report['baseline_error']}")
    for s in report["scenarios"]:
        for e in s["effects"]:
            lines.append(f"{s['name']}: {e['rule']}: {e['matched']} {e['kind']} price(s) "
                         f"{_range(e['price_before'])} -> {_range(e['price_after'])} {e['unit']}")
        if s["error"]:
            lines.append(f"{s['name']}: no feasible plan: {s['error']}")
        lines += [f"{s['name']}: note: {n}" for n in s["notes"]]
    lines.append(f"catalog {report['catalog']} as of {report['catalog_as_of']}; policy "
                 f"{report['policy']}; objective {report['objective']}; {report['method']}")
    return lines


def _range(pair: list[float]) -> str:
    lo, hi = pair
    return f"{lo:.6g}" if lo == hi else f"{lo:.6g}..{hi:.6g}"


def sweep_rows(report: dict[str, Any]) -> Rows:
    header = ["value", "switch", "solved", "total $", "delta $", "makespan h", "layout", "where",
              "pools", f"matched {report['matched_quantity_unit']}"]
    rows = []
    for p in report["points"]:
        s = p["summary"]
        rows.append([f"{p['value']:.6g}", "*" if p["switch"] else "",
                     "yes" if p["solved"] else "",
                     p["total_cost_usd"] or "infeasible", _signed(p["delta_usd"]),
                     _h(p["makespan_hours"]), s["layout"] if s else "-",
                     f"{s['provider']} {s['region']}" if s else "-", _pools(s),
                     "-" if p["matched_quantity"] is None else f"{p['matched_quantity']:,.2f}"])
    return header, rows


def sweep_footer(report: dict[str, Any]) -> list[str]:
    b = report["baseline"]
    lines = [f"swept: {report['swept']} VALUE ({report['value_unit']}); {report['matched']} "
             "items matched" + (f"; applied first: {'; '.join(report['base_rules'])}"
                                if report["base_rules"] else ""),
             ("baseline: " + (f"${b['total_cost_usd']} over {_h(b['makespan_hours'])} h, "
                              f"{b['summary']['layout']} in {b['summary']['provider']} "
                              f"{b['summary']['region']}" if b["total_cost_usd"]
                              else f"no feasible plan: {b['error']}"))]
    for sw in report["switches"]:
        lo, hi = sw["between"]
        lines.append(f"switch between {lo:.6g} and {hi:.6g}: " + "; ".join(sw["changes"]))
    for p in report["points"]:
        if p["error"]:
            lines.append(f"value {p['value']:.6g}: no feasible plan: {p['error']}")
    lines += [f"note: {n}" for n in report["notes"]]
    return lines


def _prices(d: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.6g}" for k, v in sorted(d.items())) or "none used"


def break_even_rows(report: dict[str, Any]) -> Rows:
    header = ["direction", "multiplier bracket", "crossing", "matched prices (same plan)",
              "matched prices (changed plan)", "changed plan"]
    rows = []
    for s in report["sides"]:
        if not s["found"]:
            rows.append([s["direction"], "-", "-", "-", "-", s["note"]])
            continue
        pc = s["plan_changed"]
        changed = (f"${pc['total_cost_usd']}, {pc['layout']} in {pc['provider']} "
                   f"{pc['region']}: {_pools(pc)}" if pc else
                   f"no feasible plan: {s['error_changed']}")
        cross = s["crossing_multiplier"]
        rows.append([s["direction"],
                     f"[{s['bracket'][0]:.6g}, {s['bracket'][1]:.6g}]",
                     "-" if cross is None else f"{cross:.6g}",
                     _prices(s["prices_same"]), _prices(s["prices_changed"]), changed])
    return header, rows


def break_even_footer(report: dict[str, Any]) -> list[str]:
    b = report["baseline"]
    use = b["use"]
    lines = [f"selector {report['selector']} matches {report['matched']} items; prices in "
             f"{report['price_unit']}; tolerance {report['tolerance']:g} on the multiplier; "
             f"{report['solves']} exact re-solves",
             f"baseline: ${b['total_cost_usd']}, {b['summary']['layout']} in "
             f"{b['summary']['provider']} {b['summary']['region']}; matched items used: "
             + (", ".join(f"{x[0]} {x[1]}" + (f" x{x[2]}" if x[2] else "") for x in use["items"])
                or "none")]
    if report["base_rules"]:
        lines.append("applied first: " + "; ".join(report["base_rules"]))
    for s in report["sides"]:
        if s["found"] and s["changes"]:
            lines.append(f"{s['direction']}: from the plan at {s['multiplier_same']:.6g} to the "
                         f"plan at {s['multiplier_changed']:.6g}: "
                         + "; ".join(s["changes"]["statements"]))
    lines.append("method: " + report["method"])
    return lines
