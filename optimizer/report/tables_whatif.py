"""What ``ptplan whatif`` prints: price scenarios, sweeps and break-even searches as tables and
Markdown, and the sweep's chart. The rows and footers are the what-if package's
(:mod:`ptplan.scenarios.rows`, handed in by the CLI: this package never imports its siblings);
every figure shown is one the report's JSON holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ptplan.report.tables import _table, md_table, text_table

Rows = tuple[list[str], list[list[str]]]
Changes = list[tuple[str, Rows, list[str]]]
"""Per scenario with changes: its name, its change rows and its statements."""


def whatif_table(report: dict[str, Any], rows: Rows, footer: list[str],
                 changes: Changes) -> str:
    out = _table(f"ptplan whatif: {report['spec_name']}", *rows, footer)
    for name, change, statements in changes:
        out += "\n" + text_table(*change, f"changes: {name} vs baseline")
        out += "".join(f"  {line}\n" for line in statements)
    return out


def whatif_markdown(report: dict[str, Any], rows: Rows, footer: list[str],
                    changes: Changes) -> str:
    out = f"# ptplan whatif: {report['spec_name']}\n\n" + md_table(*rows)
    out += "\n" + "".join(f"- {line}\n" for line in footer)
    for name, change, statements in changes:
        out += f"\n## {name} vs baseline\n\n" + md_table(*change)
        out += "\n" + "".join(f"- {line}\n" for line in statements)
    return out


def _markdown(title: str, rows: Rows, footer: list[str]) -> str:
    return f"# {title}\n\n" + md_table(*rows) + "\n" + "".join(f"- {line}\n" for line in footer)


def sweep_table(report: dict[str, Any], rows: Rows, footer: list[str]) -> str:
    return _table(f"ptplan whatif sweep: {report['spec_name']} ({report['swept']} VALUE)",
                  *rows, footer)


def sweep_markdown(report: dict[str, Any], rows: Rows, footer: list[str]) -> str:
    return _markdown(f"ptplan whatif sweep: {report['spec_name']}", rows, footer)


def break_even_table(report: dict[str, Any], rows: Rows, footer: list[str]) -> str:
    return _table(f"ptplan whatif break-even: {report['spec_name']} ({report['selector']})",
                  *rows, footer)


def break_even_markdown(report: dict[str, Any], rows: Rows, footer: list[str]) -> str:
    return _markdown(f"ptplan whatif break-even: {report['spec_name']}", rows, footer)


def sweep_chart(report: dict[str, Any], path: Path) -> None:
    """Cost against the swept value, plan switches marked (PNG or SVG by suffix;
    deterministic SVG: fixed hash salt, no date)."""
    from ptplan.report.charts import chart_suffix, pyplot, save

    chart_suffix(path)
    xs = [p["value"] for p in report["points"] if p["total_cost_usd"] is not None]
    ys = [float(p["total_cost_usd"]) for p in report["points"] if p["total_cost_usd"] is not None]
    with pyplot("ptplan-whatif") as plt:
        fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
        ax.plot(xs, ys, marker="o", markersize=3, linewidth=1.5, color="#1f77b4",
                label="total cost")
        for n, sw in enumerate(report["switches"], start=1):
            x = sum(sw["between"]) / 2
            ax.axvline(x, color="#d62728", linestyle="--", linewidth=1,
                       label="plan switch" if n == 1 else None)
            ax.annotate(str(n), (x, 1.0), xycoords=("data", "axes fraction"),
                        textcoords="offset points", xytext=(2, -12), color="#d62728")
        b = report["baseline"]["total_cost_usd"]
        if b is not None:
            ax.axhline(float(b), color="grey", linestyle=":", linewidth=1, label="baseline")
        ax.set_xlabel(f"{report['swept']} VALUE ({report['value_unit']})")
        ax.set_ylabel("total cost (USD)")
        ax.set_title(f"{report['spec_name']}: cost vs {report['swept']}")
        ax.grid(True, alpha=0.3)
        ax.legend(loc="best")
        fig.tight_layout()
        save(plt, fig, path)
