"""What ``ptplan spend`` and ``ptplan guard`` print: the spend report as a table, Markdown
and chart, and the guard's decision as lines (every figure is one their JSON holds)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ptplan.report.tables import _table, md_table


def spend_rows(r: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    head = ["period start", "h", "actual $", "actual cum $", "planned cum $", "variance $",
            "variance %"]
    rows = [[p["start"], f"{p['hours']:g}", f"{p['actual_usd']:.2f}",
             f"{p['actual_cumulative_usd']:.2f}", f"{p['planned_cumulative_usd']:.2f}",
             f"{p['variance_usd']:+.2f}",
             "-" if p["variance_pct"] is None else f"{p['variance_pct']:+.1f}"]
            for p in r["periods"]]
    return head, rows


def spend_footer(r: dict[str, Any]) -> list[str]:
    pct = "" if r["variance_pct"] is None else f" ({r['variance_pct']:+.1f}%)"
    tags = ", ".join(f"{k}={v}" for k, v in r["tags"].items())
    lines = [f"actual ${r['actual_usd']:.2f} vs planned ${r['planned_usd']:.2f} at "
             f"{r['hours']:g} h since the run started ({r['run_start'] or 'no cost yet'}): "
             f"variance ${r['variance_usd']:+.2f}{pct}; plan total ${r['plan_total_usd']} over "
             f"{r['plan_makespan_hours']:g} h",
             f"source: {r['source']}, tags {tags}, as of {r['as_of']}"
             + (" (AWS marks some figures estimated)" if r["estimated"] else "")]
    for g in r["groups"]:
        split = ", ".join(f"{k} ${v:.2f}" for k, v in g["by_purchase_type"].items())
        lines.append(f"{r['group_by']}={g['group']}: actual ${g['actual_usd']:.2f}, planned "
                     f"${g['planned_usd']:.2f}" + (f" ({split})" if split else ""))
    return lines


def spend_table(r: dict[str, Any], spec_name: str) -> str:
    return _table(f"ptplan spend: {spec_name}", *spend_rows(r), spend_footer(r))


def spend_markdown(r: dict[str, Any]) -> str:
    return md_table(*spend_rows(r)) + "\n" + "\n".join(
        f"- {line}" for line in spend_footer(r)) + "\n"


def spend_chart(r: dict[str, Any], path: Path) -> None:
    """Actual vs planned cumulative cost over the hours since the run started."""
    from ptplan.report.charts import pyplot, save

    hours = [0.0] + [p["hours"] for p in r["periods"]]
    actual = [0.0] + [p["actual_cumulative_usd"] for p in r["periods"]]
    planned = [0.0] + [p["planned_cumulative_usd"] for p in r["periods"]]
    with pyplot("ptplan-spend") as plt:
        fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
        ax.step(hours, actual, where="post", color="#d62728", label="actual (bill)")
        ax.plot(hours, planned, color="#1f77b4", linestyle="--", label="planned")
        for key, label, colour in (("budget_warn_usd", "warn", "#ff7f0e"),
                                   ("budget_stop_usd", "stop", "black")):
            if r[key] is not None:
                ax.axhline(float(r[key]), color=colour, linestyle=":", linewidth=1,
                           label=f"{label} ${r[key]}")
        ax.set_xlabel("hours since the run started")
        ax.set_ylabel("cumulative cost (USD)")
        ax.set_title(f"{r['provider']} spend: actual vs planned cumulative")
        ax.legend(loc="best")
        fig.tight_layout()
        save(plt, fig, path)


def guard_text(result: dict[str, Any], spec_name: str) -> str:
    """The guard's decision, its reasons, the calls ``--act`` made (or would make), each change
    with the command that undoes it, what was left as it was and what failed."""
    lines = [f"{result['decision']}: {spec_name}", *result["reasons"]]
    acts = result.get("actions", {})
    lines += [("would call: " if acts.get("dry_run") else "planned call: ") + c
              for c in acts.get("calls", [])]
    for d in acts.get("done", []):
        lines += [f"done: {d['change']}", f"  undo: {d['undo']}"]
    lines += [f"unchanged: {u}" for u in acts.get("unchanged", [])]
    lines += [f"failed: {f['what']}: {f['error']}" for f in acts.get("failed", [])]
    if acts.get("complete") is False:
        lines.append(f"act: incomplete: {len(acts.get('done', []))} change(s) done (undo "
                     f"above), {len(acts.get('failed', []))} failed or refused")
    return "\n".join(lines)
