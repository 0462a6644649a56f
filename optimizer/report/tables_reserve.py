"""What ``ptplan reserve`` prints: the purchase report as tables (text and Markdown, one per
section) and the chart of weekly demand against committed capacity per scenario (matplotlib,
Agg backend; SVG byte-deterministic: fixed ``svg.hashsalt``, no date metadata). Every figure
shown is one the report's JSON holds; the HTML page uses the same sections
(:func:`ptplan.report.html_analysis.reserve_doc`)."""

from __future__ import annotations

from itertools import groupby
from pathlib import Path
from typing import Any

from ptplan.report.tables import md_table, text_table


def _money(x: str | None) -> str:
    return "-" if x is None else f"{float(x):,.2f}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f} %"


def reserve_sections(r: dict[str, Any]) -> tuple[str, list[tuple[str, list[str], list[list[str]]]],
                                          list[str]]:
    """Title, (caption, header, rows) tables and footer lines of a reserve report."""
    title = (f"ptplan reserve: {r['portfolio']} ({r['horizon_weeks']} weeks, "
             f"{len(r['scenarios'])} scenarios; minimising {r['objective']})")
    buy = [[p["product"], f"{p['provider']}/{p['region']}/{p['instance_type']}",
            f"{p['term_years']}y", str(p["count"]), _money(p["upfront_usd"]),
            f"{p['usd_per_hour']:,.4g}", f"{p['effective_usd_per_hour']:,.4g}",
            "-" if p["on_demand_usd_per_hour"] is None else f"{p['on_demand_usd_per_hour']:,.4g}",
            _pct(p["break_even_utilization"]), _pct(p["expected_utilization"]),
            _pct(p["next_unit_utilization"])] for p in r["purchases"]]
    buy_h = ["product", "instance", "term", "count", "upfront $/node", "$/h", "effective $/h",
             "on-demand $/h", "break-even util", "expected util", "next unit util"]
    com_h = ["commitment", "kind", "scope", "term", "$/h", "discount", "expected util",
             "horizon $"]
    com = [_commit_row(c) for c in r.get("commitments", [])]
    later_h = ["week", "product / commitment", "term", "count or $/h", "horizon $"]
    later = [[str(p["buy_week"]), p.get("product") or p["commitment"], f"{p['term_years']}y",
              str(p["count"]) if "count" in p else f"{p['usd_per_hour']:,.3f} $/h",
              _money(p["horizon_cost_usd"])] for p in r.get("later_purchases", [])
             if (p["count"] if "count" in p else p["usd_per_hour"]) > 0]
    costs = [["expected total (this purchase)", _money(r["expected_total_cost_usd"]), ""],
             ["today's commitments only", _money(r["existing_only_cost_usd"]),
              _money(r["expected_savings_vs_existing_only_usd"])],
             ["all on-demand (no commitments, no spot)", _money(r["on_demand_only_cost_usd"]),
              _money(r["expected_savings_vs_on_demand_only_usd"])],
             ["upfront due now", _money(r["upfront_due_now_usd"]), ""]]
    if r["risk"]:
        costs.append([f"CVaR {r['risk']['alpha']:g} of total cost", _money(r["risk"]["cvar_usd"]),
                      ""])
    sc_h = ["scenario", "probability", "total $", "new commitments $", "held $", "on-demand $",
            "spot $", "today's only $", "all on-demand $"]
    sc = [[s["name"], f"{s['probability']:.3g}", _money(s["total_cost_usd"]),
           _money(s["new_commitment_cost_usd"]), _money(s["existing_commitment_cost_usd"]),
           _money(s["on_demand_cost_usd"]), _money(s["spot_cost_usd"]),
           _money(s["existing_only_cost_usd"]), _money(s["on_demand_only_cost_usd"])]
          for s in r["scenarios"]]
    cov_h = ["scenario", "instance", "weeks", "demand", "spot-ok", "committed", "used",
             "spend-covered", "on-demand", "spot"]
    cov: list[list[str]] = []
    fields = ("demand_nodes", "spot_ok_nodes", "committed_nodes", "committed_used_nodes",
              "spend_covered_nodes", "on_demand_nodes", "spot_nodes")

    def group(row: dict[str, Any]) -> tuple[Any, ...]:
        return (row["scenario"], row["provider"], row["region"], row["instance_type"],
                *(round(row[f], 2) for f in fields))

    runs: list[list[dict[str, Any]]] = []
    for _, rows in groupby(r["coverage"], key=group):
        for row in rows:  # consecutive weeks only
            if runs and group(runs[-1][-1]) == group(row) and runs[-1][-1]["week"] + 1 == \
                    row["week"]:
                runs[-1].append(row)
            else:
                runs.append([row])
    for run in runs:
        a, b = run[0], run[-1]
        weeks = str(a["week"]) if a is b else f"{a['week']}-{b['week']}"
        cov.append([a["scenario"], f"{a['provider']}/{a['region']}/{a['instance_type']}", weeks,
                    *(f"{a[f]:.2f}" for f in fields)])
    sv = r["solver"]
    footer = [f"solver: {sv['name']} {sv['status']} (gap {sv['gap']:.2g}, {sv['seconds']} s; "
              f"{sv['variables']} variables, {sv['integer_variables']} integer, "
              f"{sv['constraints']} rows); project planning {sv['planning_seconds']} s for "
              f"{len(r['projects'])} projects ({sv['distinct_plans']} distinct plans)",
              f"verification: {r['verification']}",
              "utilisation: committed node-hours used / paid; break-even = effective $/h / "
              "on-demand $/h; next unit = utilisation one more node would get",
              f"catalog: {r['catalog']['name']} (as_of {r['catalog']['as_of']})"]
    for p in r["purchases"]:
        if p["count"] == 0 and p["spot_usd_per_hour"] is not None and \
                p["spot_usd_per_hour"] < p["effective_usd_per_hour"]:
            footer.append(f"note: {p['product']}: spot-ok demand runs on spot at "
                          f"{p['spot_usd_per_hour']:.4g} $/h, below the commitment's "
                          f"{p['effective_usd_per_hour']:.4g} $/h")
    footer += [f"warning: {w}" for w in r["warnings"]]
    if r["defaults_applied"]:
        footer.append("defaults applied: " + "; ".join(r["defaults_applied"]))
    tables = [("purchase", buy_h, buy)]
    if com:
        tables.append(("spend commitments (applied after instance reservations, in this order)",
                       com_h, com))
    if "later_purchases" in r and any(row["buy_week"] for row in r["later_purchases"]):
        tables.append(("later quarters (the plan; this quarter's buy is above)", later_h,
                       later or [["-", "nothing", "", "", ""]]))
    tables += [("expected cost over the horizon",
                                         ["comparison", "USD", "saved by this purchase"], costs),
              ("scenarios", sc_h, sc), ("weekly coverage (average concurrent nodes)", cov_h, cov)]
    return title, tables, footer


def _commit_row(c: dict[str, Any]) -> list[str]:
    lo, hi = c["discount_min"], c["discount_max"]
    disc = _pct(lo) if lo == hi else f"{_pct(lo)}-{_pct(hi)}"
    return [c["commitment"], c["kind"], c["scope"], f"{c['term_years']}y",
            f"{c['usd_per_hour']:,.3f}", disc, _pct(c["expected_utilization"]),
            _money(c["horizon_cost_usd"])]


def reserve_table(r: dict[str, Any]) -> str:
    title, tables, footer = reserve_sections(r)
    out = [title + "\n"]
    out += [text_table(header, rows, caption) for caption, header, rows in tables]
    return "".join(out) + "".join(line + "\n" for line in footer)


def reserve_markdown(r: dict[str, Any]) -> str:
    title, tables, footer = reserve_sections(r)
    out = [f"# {title}\n"]
    for caption, header, rows in tables:
        out.append(f"\n## {caption}\n\n" + md_table(header, rows))
    return "".join(out) + "\n" + "".join(f"- {line}\n" for line in footer)


def reserve_chart(r: dict[str, Any], path: Path) -> None:
    """Weekly demand (solid) against committed capacity (dashed) per scenario and instance."""
    from ptplan.report.charts import chart_suffix, pyplot, save

    chart_suffix(path)
    scenarios = [s["name"] for s in r["scenarios"]]
    with pyplot("ptplan-reserve") as plt:
        fig, axes = plt.subplots(len(scenarios), 1, figsize=(11, 2.6 * len(scenarios)),
                                 sharex=True, squeeze=False)
        for ax, name in zip(axes[:, 0], scenarios, strict=True):
            rows = [c for c in r["coverage"] if c["scenario"] == name]
            keys = sorted({(c["provider"], c["region"], c["instance_type"]) for c in rows})
            for n, key in enumerate(keys):
                kr = [c for c in rows if (c["provider"], c["region"], c["instance_type"]) == key]
                weeks = [c["week"] for c in kr] + [kr[-1]["week"] + 1]  # the last week's end
                color = f"C{n % 10}"
                label = "/".join(key)
                demand = [c["demand_nodes"] for c in kr]
                committed = [c["committed_nodes"] for c in kr]
                ax.step(weeks, demand + demand[-1:], where="post", color=color,
                        label=f"{label} demand")
                ax.step(weeks, committed + committed[-1:], where="post", color=color,
                        linestyle="--", label=f"{label} committed")
            ax.set_title(f"scenario {name}", fontsize=9)
            ax.set_ylabel("nodes (weekly avg)")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        axes[-1, 0].set_xlabel("week")
        fig.suptitle(f"{r['portfolio']}: weekly demand vs committed capacity", fontsize=10)
        fig.tight_layout()
        save(plt, fig, path)
