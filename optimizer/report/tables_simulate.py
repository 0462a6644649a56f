"""What ``ptplan simulate`` prints (the distributions as a table with their summary lines, the
makespan histogram) and the lines ``plan --risk`` adds under the plan table; every figure is
one the simulation's JSON holds (:mod:`ptplan.risk.summary`)."""

from __future__ import annotations

from typing import Any

from ptplan.report.tables import _table


def fmt_row(d: dict[str, float], unit: str) -> list[str]:
    f = (lambda v: f"{v:,.3f}") if unit == "h" else (lambda v: f"${v:,.2f}")
    return [f(d["mean"]), f"{f(d['ci95_low'])}–{f(d['ci95_high'])}", f(d["p50"]), f(d["p90"]),
            f(d["p99"]), f(d["max"])]


def summary_lines(r: dict[str, Any]) -> list[str]:
    o = r["overhead"]
    mode = r["pipeline_mode"] + (f" (buffer {r['async_buffer']})"
                                 if r["pipeline_mode"] == "async" else "")
    lines = [f"{r['trials']:,} trials, seed {r['seed']}; {mode} pipeline; correlated share "
             f"{r['correlated']:g}; checkpoints {r['checkpoints']}; mean "
             f"{r['interruptions_mean']:.4f} interruptions per run",
             f"interruption overhead: plan expects {o['plan_expected_hours']:.6f} h "
             f"(${o['plan_expected_usd']:,.2f}); simulated mean {o['simulated_mean_hours']:.6f}"
             f" h (95% CI {o['simulated_ci95_hours'][0]:.6f}–{o['simulated_ci95_hours'][1]:.6f}"
             f"; ${o['simulated_mean_usd']:,.2f}); plan "
             + ("within" if o["plan_within_ci"] else "outside") + " the CI"]
    if r["deadline_hours"] is not None:
        lines.append(f"P(makespan ≤ deadline {r['deadline_hours']:g} h) = "
                     f"{r['p_deadline_met']:.4f}")
    if r["budget_usd"] is not None:
        lines.append(f"P(cost > budget ${r['budget_usd']:,.2f}) = {r['p_budget_exceeded']:.4f}")
    if r["fallback_usd_mean"]:
        lines.append(f"on-demand fallback: mean ${r['fallback_usd_mean']:,.2f} per run")
    return lines + [f"note: {n}" for n in r["notes"]]


def simulate_table(r: dict[str, Any]) -> str:
    head = ["figure", "mean", "95% CI of mean", "P50", "P90", "P99", "max"]
    rows = [["makespan h", *fmt_row(r["makespan_hours"], "h")],
            ["cost", *fmt_row(r["cost_usd"], "$")]]
    return _table(f"ptplan simulate: {r['spec_name']}", head, rows, summary_lines(r))


def simulate_chart(r: dict[str, Any], makespan_hours: Any, quantiles: tuple[int, ...],
                   path: Any) -> None:
    """Histogram of the trials' makespans with the report's quantiles (``quantiles``: P50, P90,
    P99 by :data:`ptplan.risk.summary.QUANTILES`), the plan's makespan and the deadline."""
    from ptplan.report.charts import chart_suffix, pyplot, save

    chart_suffix(path)
    x = makespan_hours
    with pyplot("ptplan-simulate") as plt:
        fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
        ax.hist(x, bins=60, color="#1f77b4", alpha=0.8, label="simulated runs")
        marks = [(r["overhead"]["plan_makespan_hours"], "plan (expected)", "black", "-")]
        marks += [(r["makespan_hours"][f"p{q}"], f"P{q}", "#ff7f0e", ":") for q in quantiles]
        if r["deadline_hours"] is not None:
            marks.append((r["deadline_hours"], "deadline", "#d62728", "--"))
        for v, label, colour, style in marks:
            ax.axvline(v, color=colour, linestyle=style, linewidth=1.2, label=label)
        ax.set_xlabel("makespan (hours)")
        ax.set_ylabel("trials")
        ax.set_yscale("log")
        ax.set_title(f"{r['spec_name']}: {r['trials']:,} simulated runs (seed {r['seed']})")
        ax.legend(loc="best")
        fig.tight_layout()
        save(plt, fig, path)


def risk_lines(report: dict[str, Any]) -> list[str]:
    """The footer ``plan --risk`` prints under the plan table."""
    out = [report["statement"]]
    q = report["quantile"].upper()
    for c in report["candidates"]:
        d, b = c["effective_deadline_hours"], c["effective_budget_usd"]
        against = ", ".join(([f"deadline {d:.3f} h"] if d is not None else [])
                            + ([f"budget ${b:,.2f}"] if b is not None else []))
        out.append(f"  candidate planned against {against}: ${c['total_cost_usd']}, makespan "
                   f"{c['makespan_hours']:.3f} h; {q} makespan {c['q_makespan_hours']:.3f} h, "
                   f"{q} cost ${c['q_cost_usd']:,.2f}")
    return out
