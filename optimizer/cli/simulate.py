"""``ptplan simulate PLAN.json``: the distribution of makespan and cost of a plan under spot
interruptions (:mod:`ptplan.risk`), printed by :mod:`ptplan.report.tables_simulate`."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

import typer

from ptplan.cli.common import ProgressBar, _emit, _run, app, dumps, info


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
        from ptplan.planfile.load import load_plan
        from ptplan.report.charts import chart_suffix
        from ptplan.report.tables_simulate import simulate_chart, simulate_table
        from ptplan.risk.model import build_model
        from ptplan.risk.runner import check_counts, run_trials
        from ptplan.risk.summary import QUANTILES, simulate_csv, summarise

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
            simulate_chart(report, res.makespan_hours, QUANTILES, chart)
            info(f"wrote {chart}")
        text = {SimFormat.json: lambda: dumps(report), SimFormat.csv: lambda: simulate_csv(res),
                SimFormat.table: lambda: simulate_table(report)}[fmt]()
        _emit(text, output)

    _run(go)


def _need_ray() -> None:
    from ptplan.core.errors import InputError

    try:
        import ray  # noqa: F401
    except ImportError:
        raise InputError("--ray: the ray package is not installed; install the extra: "
                         "pip install 'ptplan[ray]'") from None
