"""``ptplan runs ...``: the run ledger (record, import-metrics, list, show, review, calibrate,
export). Thin: open the ledger (``--ledger PATH|URL``, ``PTPLAN_LEDGER``, else the SQLite file
in the platform data dir), call :mod:`ptplan.ledger`, format. Every write is one
transaction: bad input is one ``error:`` line, exit 2, and leaves the ledger as it was."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Any

import typer

from ptplan.cli.common import (
    ReportFormat,
    TableOrJson,
    _emit,
    _emit_as,
    _run,
    app,
    dumps,
    info,
)
from ptplan.core.errors import InputError

runs_app = typer.Typer(no_args_is_help=True, help="The run ledger: what each run was planned "
                       "to cost, what it cost and what it gained.")
app.add_typer(runs_app, name="runs")

LEDGER_HELP = "Ledger file or URL (sqlite:///PATH, postgresql://USER@HOST/DB); default: " \
              "PTPLAN_LEDGER, else ledger.sqlite in the platform data dir."


class Outcome(StrEnum):
    kept = "kept"
    rolled_back = "rolled_back"
    abandoned = "abandoned"


class MethodName(StrEnum):
    sft = "sft"
    rl = "rl"
    opd = "opd"


class ExportFormat(StrEnum):
    json = "json"
    csv = "csv"


class GroupBy(StrEnum):
    method = "method"
    family = "family"
    project = "project"


def _ledger(ledger: str | None, write: bool = False) -> Any:
    """The ledger; ``write`` only for commands that record (a read creates nothing)."""
    from ptplan.ledger.db import open_ledger

    return open_ledger(ledger, write=write)


@runs_app.command("record")
def record(
    run_id: str = typer.Argument(..., help="A new run id ([A-Za-z0-9._-], at most 64)."),
    model_family: str = typer.Option(..., "--model-family", help="e.g. llama-3.1-8b."),
    plan: Path = typer.Option(None, "--plan", help="The verified plan JSON the run followed."),
    spec: Path = typer.Option(None, "--spec", help="The spec the plan was made from."),
    project: str = typer.Option(None, "--project", help="Default: the plan's spec name."),
    method: MethodName = typer.Option(None, "--method", help="Default: the plan's."),
    algorithm: str = typer.Option(None, "--algorithm", help="Default: the plan's."),
    bill: list[Path] = typer.Option([], "--bill", help="CSV/JSON bill export whose rows carry "
                                    "render's ptplan-* cost tags (repeatable)."),
    cost: list[str] = typer.Option([], "--cost", help="PHASE=USD or PHASE/CAPACITY=USD cost line "
                                   "(repeatable), e.g. update/spot=1234.50."),
    target: list[str] = typer.Option([], "--target", help="NAME=BEFORE:AFTER of a target "
                                     "metric (repeatable)."),
    general: list[str] = typer.Option([], "--general", help="NAME=BEFORE:AFTER of a general-"
                                      "capability metric (repeatable): the forgetting signal."),
    outcome: Outcome = typer.Option(Outcome.kept, "--outcome"),
    repairs: str = typer.Option(None, "--repairs", help="RUN this run repairs: its cost is "
                                "that run's rework."),
    wall_hours: float = typer.Option(None, "--wall-hours", min=0),
    node_hours: float = typer.Option(None, "--node-hours", min=0),
    date: str = typer.Option(None, "--date", help="YYYY-MM-DD (default: today, PTPLAN_TODAY)."),
    note: str = typer.Option("", "--note"),
    ledger: str = typer.Option(None, "--ledger", help=LEDGER_HELP),
) -> None:
    """Record a run: its plan, actual costs per phase and capacity type, results, outcome."""

    def go() -> None:
        from ptplan.ledger.recorder import build_run
        from ptplan.ledger.records import record as insert
        from ptplan.ledger.records import usd

        run = build_run(run_id, plan=plan, spec=spec, project=project,
                        method=method.value if method else None, algorithm=algorithm,
                        model_family=model_family, outcome=outcome.value, repairs=repairs,
                        bills=bill, costs=cost, targets=target, generals=general,
                        wall_hours=wall_hours, node_hours=node_hours, date=date, note=note)
        led = _ledger(ledger, write=True)
        with led.write() as conn:
            insert(conn, run)
        info(f"recorded run {run.id} ({run.project}, {run.method}, actual "
             f"${usd(run.actual_cents)}) in {led.display}")

    _run(go)


@runs_app.command("import-metrics")
def import_metrics(
    run_id: str = typer.Argument(..., help="A recorded run."),
    jsonl: Path = typer.Option(None, "--jsonl", help="veRL/OpenRLHF metric dicts, one a line."),
    tensorboard: Path = typer.Option(None, "--tensorboard", help="Event file or log dir."),
    mlflow: str = typer.Option(None, "--mlflow", help="Tracking URI (file:, sqlite:, http:)."),
    mlflow_run: str = typer.Option(None, "--mlflow-run", help="With --mlflow: the run id."),
    replace: bool = typer.Option(False, "--replace", help="Replace metrics of the same "
                                 "names already imported for the run."),
    ledger: str = typer.Option(None, "--ledger", help=LEDGER_HELP),
) -> None:
    """Import per-step timings, throughput, response lengths and evals for a run."""

    def go() -> None:
        from ptplan.ledger import metrics as mx
        from ptplan.ledger.records import load_runs, store_metrics

        given = [x for x in (jsonl, tensorboard, mlflow) if x is not None]
        if len(given) != 1:
            raise InputError("runs import-metrics: give exactly one of --jsonl, --tensorboard "
                             "or --mlflow")
        if (mlflow is None) != (mlflow_run is None):
            raise InputError("--mlflow and --mlflow-run go together: the tracking URI and the "
                             "MLflow run id")
        led = _ledger(ledger, write=True)
        with led.read() as conn:
            load_runs(conn, [run_id])  # an unknown run: one line, before reading anything
        if jsonl is not None:
            ms = mx.read_jsonl(jsonl)
        elif tensorboard is not None:
            ms = mx.read_tensorboard(tensorboard)
        else:
            ms = mx.read_mlflow(mlflow, mlflow_run)
        with led.write() as conn:
            store_metrics(conn, run_id, ms, replace)
        phases = sorted({m.phase for m in ms if m.phase})
        info(f"imported {len(ms)} values of {len({m.name for m in ms})} metrics for run "
             f"{run_id} (phases: {', '.join(phases) or 'none'})")

    _run(go)


@runs_app.command("list")
def list_runs(
    fmt: TableOrJson = typer.Option(TableOrJson.table, "--format"),
    method: MethodName = typer.Option(None, "--method"),
    project: str = typer.Option(None, "--project"),
    ledger: str = typer.Option(None, "--ledger", help=LEDGER_HELP),
) -> None:
    """The recorded runs, oldest first."""

    def go() -> None:
        from ptplan.ledger.records import load_runs, usd

        with _ledger(ledger).read() as conn:
            runs = [r for r in load_runs(conn) if (method is None or r.method == method.value)
                    and (project is None or r.project == project)]
        rows = [{"id": r.id, "recorded_on": r.recorded_on, "project": r.project,
                 "method": r.method, "model_family": r.model_family, "outcome": r.outcome,
                 "repairs": r.repairs, "planned_usd": r.planned_cost_usd,
                 "actual_usd": usd(r.actual_cents)} for r in runs]
        if fmt == TableOrJson.json:
            _emit(dumps(rows), None)
            return
        from ptplan.report.tables_runs import runs_table

        _emit(runs_table(rows), None)

    _run(go)


@runs_app.command("show")
def show(
    run_id: str = typer.Argument(...),
    fmt: TableOrJson = typer.Option(TableOrJson.table, "--format"),
    ledger: str = typer.Option(None, "--ledger", help=LEDGER_HELP),
) -> None:
    """One run: plan vs actual, costs, results, metrics per phase."""

    def go() -> None:
        from ptplan.ledger.metrics import phase_seconds_per_step
        from ptplan.ledger.records import export_json, load_metrics, load_runs

        with _ledger(ledger).read() as conn:
            run = load_runs(conn, [run_id])[0]
            ms = load_metrics(conn, run_id)
        if fmt == TableOrJson.json:
            _emit(export_json([run], {run.id: ms}), None)
            return
        from ptplan.ledger.records import usd
        from ptplan.report.tables_runs import show_text

        _emit(show_text(run, phase_seconds_per_step(ms), len(ms), usd), None)

    _run(go)


@runs_app.command("review")
def review(
    fmt: ReportFormat = typer.Option(ReportFormat.table, "--format",
                                     help="html: a self-contained report (docs/report.md)."),
    output: Path = typer.Option(None, "-o", "--output", help="Write to FILE instead of stdout."),
    by: list[GroupBy] = typer.Option([GroupBy.method, GroupBy.family], "--by",
                                     help="Group tables (repeatable)."),
    forgetting: float = typer.Option(2.0, "--forgetting-points", min=0,
                                     help="Flag runs losing more general-ability points."),
    variance: float = typer.Option(0.25, "--variance", min=0,
                                   help="Flag runs whose cost or hours miss the plan by more."),
    alternative: list[Path] = typer.Option([], "--alternative", help="Spec to plan now "
                                           "(repeatable): a recommendation for its method "
                                           "states the plan's cost."),
    catalog: str = typer.Option("embedded", "--catalog", help="With --alternative: "
                                "embedded|cache|PATH."),
    ledger: str = typer.Option(None, "--ledger", help=LEDGER_HELP),
) -> None:
    """The method–cost–benefit table: per run and per group, with flags and recommendations."""

    def go() -> None:
        from ptplan.ledger.records import load_runs
        from ptplan.ledger.review import Thresholds
        from ptplan.ledger.review import review as make_review
        from ptplan.report.tables_runs import review_markdown, review_table

        with _ledger(ledger).read() as conn:
            runs = load_runs(conn)
        if not runs:
            raise InputError("runs review: the ledger has no runs; record some with "
                             "`ptplan runs record`")
        rv = make_review(runs, tuple(dict.fromkeys(b.value for b in by)),
                         Thresholds(forgetting, variance))
        if alternative:
            from ptplan.ledger.review import attach_plans

            attach_plans(rv, _plan_now(alternative, catalog))
        def html() -> str:
            from ptplan.cli.report import html_page

            return html_page("review", rv)

        _emit_as(fmt, output, lambda: dumps(rv), lambda: review_markdown(rv),
                 lambda: review_table(rv), html)

    _run(go)


def _plan_now(specs: list[Path], catalog: str) -> list[dict[str, Any]]:
    from ptplan.planner.api import plan as make_plan
    from ptplan.policies.model import load_policy
    from ptplan.providers.registry import load_catalog
    from ptplan.spec.project import load_spec

    cat, pol = load_catalog(catalog), load_policy(None)
    out = []
    for path in specs:
        s = load_spec(str(path))
        info(f"planning {s.name} on catalog {cat.name} for the review...")
        p = make_plan(s, cat, "cost", "highs", explain=False, timings=False, policy=pol)
        out.append({"spec": s.name, "method": s.method, "total_cost_usd": p.total_cost_usd,
                    "makespan_hours": p.makespan_hours, "catalog": cat.name})
    return out


@runs_app.command("calibrate")
def calibrate(
    output: Path = typer.Option(None, "-o", "--output", help="Write to FILE instead of stdout."),
    run: list[str] = typer.Option([], "--run", help="Only these runs (repeatable)."),
    ledger: str = typer.Option(None, "--ledger", help=LEDGER_HELP),
) -> None:
    """Calibration entries (tokens/s per GPU per phase, GPU, precision) from recorded timings,
    for `ptplan plan --calibration FILE` or the spec's calibration:."""

    def go() -> None:
        from ptplan.ledger.calibrate import calibration_yaml, entries
        from ptplan.ledger.records import load_metrics, load_runs

        with _ledger(ledger).read() as conn:
            runs = load_runs(conn, run or None)
            ms = {r.id: load_metrics(conn, r.id) for r in runs}
        _emit(calibration_yaml(entries(runs, ms)), output)

    _run(go)


@runs_app.command("export")
def export(
    fmt: ExportFormat = typer.Option(ExportFormat.json, "--format"),
    output: Path = typer.Option(None, "-o", "--output", help="Write to FILE instead of stdout."),
    metrics: bool = typer.Option(False, "--metrics", help="JSON: include imported metrics."),
    ledger: str = typer.Option(None, "--ledger", help=LEDGER_HELP),
) -> None:
    """Every run as JSON (the full record) or CSV (one row per run)."""

    def go() -> None:
        from ptplan.ledger.records import export_csv, export_json, load_metrics, load_runs

        with _ledger(ledger).read() as conn:
            runs = load_runs(conn)
            ms = {r.id: load_metrics(conn, r.id) for r in runs} if metrics else None
        _emit(export_csv(runs) if fmt == ExportFormat.csv else export_json(runs, ms), output)

    _run(go)
