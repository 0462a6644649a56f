"""``ptplan simulate PLAN.json``: the distribution of makespan and cost of a plan under spot
interruptions (:mod:`ptplan.risk`), and ``plan --risk``'s rendering."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from ptplan.cli.common import ProgressBar, _emit, _run, app, dumps, info

if TYPE_CHECKING:
    from ptplan.risk.montecarlo import ChunkResult


class SimFormat(StrEnum):
    table = "table"
    json = "json"
    csv = "csv"


class Checkpoints(StrEnum):
    lifecycle = "lifecycle"
    young = "young"


class AsyncBuffer(StrEnum):
    one_step = "one-step"
    unbounded = "unbounded"


@app.command()
def simulate(
    plan_file: Path = typer.Argument(..., metavar="PLAN.json", help="A plan written by "
                                     "`ptplan plan --format json`."),
    trials: int = typer.Option(10_000, "--trials", help="Simulated runs."),
    seed: int = typer.Option(0, "--seed", help="Seed: the same seed gives the same bytes."),
    workers: int = typer.Option(None, "--workers", help="Local worker processes (default 1); "
                                "the result does not depend on it."),
    ray_address: str = typer.Option(None, "--ray", help="Run the chunks on a Ray cluster at "
                                    "ADDRESS (auto, ray://host:10001, or local)."),
    correlated: float = typer.Option(0.0, "--correlated", help="Share of each spot node's "
                                     "hazard from zone-wide reclaims (0 to 1)."),
    shortage: float = typer.Option(0.0, "--shortage-hours", help="After a zone-wide reclaim, "
                                   "spot capacity returns after this many hours (on-demand "
                                   "fallback where the policy allows it)."),
    checkpoints: Checkpoints = typer.Option(Checkpoints.lifecycle, "--checkpoints",
                                            help="Gang checkpoints: lifecycle (every_steps) or "
                                            "young (Young's interval, the planner's model)."),
    async_buffer: AsyncBuffer = typer.Option(AsyncBuffer.one_step, "--async-buffer",
                                             help="Async pools: one-step off-policy, or "
                                             "unbounded (the planner's formula)."),
    fmt: SimFormat = typer.Option(SimFormat.table, "--format", help="table, json, or csv "
                                  "(one row per trial)."),
    output: Path = typer.Option(None, "-o", "--output", help="Write to FILE instead of stdout."),
    chart: Path = typer.Option(None, "--chart", help="Histogram of the makespan (.png/.svg)."),
) -> None:
    """Monte Carlo of a plan under spot interruptions: makespan and cost distributions,
    P(deadline met), P(budget exceeded), and the plan's expected overhead beside the
    simulated mean."""

    def go() -> None:
        from ptplan.plan.load import load_plan
        from ptplan.report.charts import chart_suffix
        from ptplan.risk.model import build_model
        from ptplan.risk.runner import check_counts, run_trials
        from ptplan.risk.summary import simulate_csv, summarise

        check_counts(trials, workers, seed)
        if chart is not None:
            chart_suffix(chart)
        if ray_address is not None:
            _need_ray()
        p = load_plan(plan_file)
        model = build_model(p, correlated, shortage, checkpoints.value, async_buffer.value)
        info(f"simulating {p.spec_name}: {trials:,} trials, seed {seed}...")
        with ProgressBar("simulate: trials", trials) as bar:
            res = run_trials(model, trials, seed, workers, ray_address, bar)
        report = summarise(model, res, trials, seed)
        if chart is not None:
            simulate_chart(report, res, chart)
            info(f"wrote {chart}")
        text = {SimFormat.json: lambda: dumps(report), SimFormat.csv: lambda: simulate_csv(res),
                SimFormat.table: lambda: simulate_table(report)}[fmt]()
        _emit(text, output)

    _run(go)


def simulate_table(r: dict[str, Any]) -> str:
    from ptplan.report.tables import _table
    from ptplan.risk.summary import fmt_row, summary_lines

    head = ["figure", "mean", "95% CI of mean", "P50", "P90", "P99", "max"]
    rows = [["makespan h", *fmt_row(r["makespan_hours"], "h")],
            ["cost", *fmt_row(r["cost_usd"], "$")]]
    return _table(f"ptplan simulate: {r['spec_name']}", head, rows, summary_lines(r))


def simulate_chart(r: dict[str, Any], res: ChunkResult, path: Any) -> None:
    """Histogram of the makespan with P50/P90/P99, the plan's makespan and the deadline."""
    from ptplan.report.charts import chart_suffix, pyplot, save
    from ptplan.risk.summary import QUANTILES

    chart_suffix(path)
    x = res.makespan_hours
    with pyplot("ptplan-simulate") as plt:
        fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
        ax.hist(x, bins=60, color="#1f77b4", alpha=0.8, label="simulated runs")
        marks = [(r["overhead"]["plan_makespan_hours"], "plan (expected)", "black", "-")]
        marks += [(r["makespan_hours"][f"p{q}"], f"P{q}", "#ff7f0e", ":") for q in QUANTILES]
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


def _need_ray() -> None:
    from ptplan.core.errors import InputError

    try:
        import ray  # noqa: F401
    except ImportError:
        raise InputError("--ray: the ray package is not installed; install the extra: "
                         "pip install 'ptplan[ray]'") from None


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
