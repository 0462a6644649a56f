"""Text renderings (table via rich, markdown) of reports and plans. JSON is the source of truth;
these functions only format it, so every figure shown is one the JSON holds."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console
from rich.table import Table


def _console_text(*renderables: Any) -> str:
    buf = io.StringIO()
    console = Console(file=buf, width=160, color_system=None, force_terminal=False,
                      soft_wrap=False)
    for r in renderables:
        console.print(r)
    return buf.getvalue()


def _fmt_hours(value: float | None) -> str:
    if value is None:
        return "does not fit"
    return f"{value:,.1f}" if value >= 10 else f"{value:,.2f}"


def estimate_rows(report: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    gpus = list(report["totals"]["gpu_hours"])
    header = ["phase", "tokens", "PFLOPs", *[f"{g} GPU-h" for g in gpus]]
    rows: list[list[str]] = []
    for ph in report["phases"]:
        row = [ph["name"], f"{ph['tokens']:.3g}", f"{ph['flops'] / 1e15:,.1f}"]
        for g in gpus:
            cell = ph["by_gpu"][g]
            if cell["fits"]:
                row.append(f"{_fmt_hours(cell['gpu_hours'])} ({cell['precision']}, "
                           f"{cell['replica_gpus']}/replica)")
            else:
                row.append("n/a: " + cell["reason"][:40])
        rows.append(row)
    ck = report["checkpoint"]
    rows.append(["checkpoint", f"{ck['count']} x {ck['gb_each']:.0f} GB", "0",
                 *[_fmt_hours(ck["gpu_hours"][g]) for g in gpus]])
    rows.append(["total", "", f"{report['totals']['flops'] / 1e15:,.1f}",
                 *[_fmt_hours(report["totals"]["gpu_hours"][g]) for g in gpus]])
    return header, rows


def _footer(report: dict[str, Any]) -> list[str]:
    lines = [f"step unit: {report['step_unit']}; steps: {report['steps']}",
             f"precision: {report['precision']}; pipeline assumed: {report['pipeline_assumed']}"]
    lines += [f"note: {n}" for n in report["notes"]]
    lines.append("defaults applied: " + "; ".join(report["defaults_applied"]))
    return lines


def estimate_table(report: dict[str, Any]) -> str:
    header, rows = estimate_rows(report)
    table = Table(title=f"ptplan estimate: {report['spec_name']} ({report['method']})")
    for h in header:
        table.add_column(h, overflow="fold")
    for r in rows:
        table.add_row(*r)
    return _console_text(table) + "\n".join(_footer(report)) + "\n"


def md_table(header: list[str], rows: list[list[str]]) -> str:
    def esc(s: str) -> str:
        return s.replace("|", "\\|").replace("\n", " ")

    out = ["| " + " | ".join(esc(h) for h in header) + " |",
           "|" + "---|" * len(header)]
    out += ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows]
    return "\n".join(out) + "\n"


def estimate_markdown(report: dict[str, Any]) -> str:
    header, rows = estimate_rows(report)
    return (f"# ptplan estimate: {report['spec_name']}\n\n" + md_table(header, rows) + "\n"
            + "\n".join(f"- {line}" for line in _footer(report)) + "\n")
