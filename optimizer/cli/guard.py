"""``ptplan guard PLAN.json``: the budget circuit breaker (:mod:`ptplan.spend.guard`):
spend to date, burn, progress and target → ok / warn / stop (exit 0 / 10 / 11), and with
``--act`` the stop itself (:mod:`ptplan.spend.act`; exit 12 when some of it failed or was
refused: the report says what was done, how to undo it, and what failed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from ptplan.cli.common import TableOrJson, _emit, _run, app, dumps, info
from ptplan.cli.spend import By


def read_metrics(source: str) -> list[Any]:
    """``jsonl:PATH``, ``tensorboard:PATH``, ``mlflow:RUN_ID@TRACKING_URI`` or a bare path
    (``*.jsonl``: JSONL, else TensorBoard event files), read by the run ledger's readers."""
    from ptplan.core.errors import InputError
    from ptplan.ledger import metrics as mx

    kind, _, rest = source.partition(":")
    if kind == "mlflow":
        run_id, at, uri = rest.partition("@")
        if not run_id or not at or not uri:
            raise InputError(f"--metrics: {source!r}: give mlflow:RUN_ID@TRACKING_URI")
        return mx.read_mlflow(uri, run_id)
    if kind == "jsonl":
        return mx.read_jsonl(Path(rest))
    if kind == "tensorboard":
        return mx.read_tensorboard(Path(rest))
    path = Path(source)
    if not path.exists():
        raise InputError(f"--metrics: {source!r} does not exist; give a JSONL file, a "
                         "TensorBoard event file or directory, or mlflow:RUN_ID@URI")
    return mx.read_jsonl(path) if path.suffix == ".jsonl" else mx.read_tensorboard(path)


def spend_series(report: dict[str, Any], where: str) -> tuple[list[tuple[float, float]], float]:
    from ptplan.core.errors import InputError

    try:
        series = [(float(p["hours"]), float(p["actual_cumulative_usd"]))
                  for p in report["periods"]]
        hours = float(report["hours"])
    except (KeyError, TypeError, ValueError):
        raise InputError(f"--spend-from {where}: not the JSON of `ptplan spend --format json` "
                         "(periods[].hours, periods[].actual_cumulative_usd, hours)") from None
    return series, hours


@app.command()
def guard(
    plan_file: Path = typer.Argument(..., metavar="PLAN.json", help="The plan that runs."),
    spend_from: str = typer.Option(..., "--spend-from", help="aws or gcp (pull the bill as "
                                   "`ptplan spend` does), or FILE (`ptplan spend --format "
                                   "json` output)."),
    metrics: str = typer.Option(None, "--metrics", help="Progress: jsonl:PATH, "
                                "tensorboard:PATH, mlflow:RUN_ID@URI, or a path."),
    target: str = typer.Option(None, "--target", help="\"NAME>=VALUE\" (or <=): the metric "
                               "the run is for."),
    window: float = typer.Option(24.0, "--window", help="Burn rate over the last HOURS."),
    against: str = typer.Option("expected", "--against", help="expected (the plan's budget, "
                                "else its total cost) or upper (the upper end of the plan's "
                                "80 % interval, never above the budget): what warn_at and "
                                "stop_at are shares of."),
    since: str = typer.Option(None, "--since", help="As `ptplan spend`."),
    until: str = typer.Option(None, "--until", help="As `ptplan spend`."),
    by: By = typer.Option(By.hour, "--by", help="Billing periods of the pull: hour or day."),
    bq_table: str = typer.Option(None, "--bq-table", help="gcp: the billing export table."),
    run_start: str = typer.Option(None, "--run-start", help="When the run started (UTC)."),
    endpoint: str = typer.Option(None, "--endpoint", help="Billing API endpoint override."),
    cache: Path = typer.Option(None, "--cache", help="Spend cache file."),
    cached: bool = typer.Option(False, "--cached", help="Use the cached pull."),
    act: bool = typer.Option(False, "--act", help="On stop: suspend the RayJob and scale the "
                             "plan's nodes to zero, each object only if it carries the plan's "
                             "ptplan-plan label; exit 12 when some of it failed."),
    dry_run: bool = typer.Option(False, "--dry-run", help="With --act: print the calls, make "
                                 "none."),
    namespace: str = typer.Option("default", "--namespace", help="The RayJob's namespace."),
    cluster: str = typer.Option("ptplan", "--cluster", help="Cluster name given to render."),
    kubeconfig: str = typer.Option(None, "--kubeconfig", help="Kubeconfig file (default: "
                                   "in-cluster, else ~/.kube/config)."),
    gcp_project: str = typer.Option(None, "--gcp-project", help="GKE: the cluster's project."),
    act_endpoint: str = typer.Option(None, "--act-endpoint", help="Auto Scaling / GKE API "
                                     "endpoint override (tests, mirrors)."),
    fmt: TableOrJson = typer.Option(TableOrJson.table, "--format", help="table (one line per "
                                    "reason) or json."),
    output: Path = typer.Option(None, "-o", "--output", help="Write to FILE instead of stdout."),
) -> None:
    """Forecast the cost at completion and decide ok / warn / stop by the plan's budget
    thresholds; exit 0 / 10 / 11. --act carries out a stop (exit 12 if part of it failed)."""
    kwargs = dict(locals())
    code = _run(lambda: _guard(**kwargs))
    if code:
        raise typer.Exit(code)


def _guard(plan_file: Path, spend_from: str, metrics: str | None, target: str | None,
           window: float, against: str, since: str | None, until: str | None, by: By,
           bq_table: str | None, run_start: str | None, endpoint: str | None,
           cache: Path | None, cached: bool, act: bool, dry_run: bool, namespace: str,
           cluster: str, kubeconfig: str | None, gcp_project: str | None,
           act_endpoint: str | None, fmt: TableOrJson, output: Path | None) -> int:
    from ptplan.core.errors import InputError
    from ptplan.core.yamlio import read_mapping
    from ptplan.planfile.load import load_plan
    from ptplan.planfile.tags import group_tag_value
    from ptplan.spend.bill import iso, parse_instant
    from ptplan.spend.curve import spend_report
    from ptplan.spend.guard import AGAINST, decide, parse_target

    if dry_run and not act:
        raise InputError("--dry-run: only with --act (it prints the calls --act would make)")
    goal = parse_target(target) if target else None
    if against not in AGAINST:
        raise InputError(f"--against: unknown value {against!r}; use one of "
                         f"{', '.join(AGAINST)}")
    plan = load_plan(plan_file)
    if spend_from in ("aws", "gcp"):
        from ptplan.cli.spend import pull_spend

        pull = pull_spend(plan, spend_from, by.value, "phase", since, until, bq_table,
                          endpoint, cache, cached)
        start = iso(parse_instant(run_start, "--run-start", "hour")) if run_start else None
        report = spend_report(plan, pull, lambda p, a: group_tag_value(
            p, a.capacity_type, "phase", spend_from), start)
    else:
        report = read_mapping(spend_from, "--spend-from")
    series, hours = spend_series(report, repr(spend_from))
    steps_done = points = None
    if metrics:
        ms = read_metrics(metrics)
        steps_done = max(m.step for m in ms)
        if goal is not None:
            points = [(m.step, m.value) for m in ms if m.name == goal.name]
            if not points:
                names = sorted({m.name for m in ms if m.kind == "eval"})
                raise InputError(f"--target: no metric {goal.name!r} in {metrics!r}; its eval "
                                 f"metrics are {', '.join(names[:8]) or 'none'}")
    result = decide(plan, series, hours, steps_done, goal, points, window, against)
    incomplete = None
    if act and result["decision"] == "stop":
        from ptplan.spend.act import INCOMPLETE_EXIT, calls, carry_out, targets_for

        targets = targets_for(plan, namespace, cluster, gcp_project)

        if dry_run:
            result["actions"] = {"dry_run": True, "plan_label": targets.prefix,
                                 "calls": calls(targets)}
        else:
            done = carry_out(targets, kubeconfig, act_endpoint, act_endpoint)
            result["actions"] = {"dry_run": False, "plan_label": targets.prefix,
                                 "calls": calls(targets), **done.as_dict()}
            if not done.complete:
                result["exit_code"] = INCOMPLETE_EXIT
                incomplete = (f"guard --act: {len(done.failed)} of the stop's actions failed or "
                              f"were refused, {len(done.done)} done (each with its undo); see "
                              f"the report; exit {INCOMPLETE_EXIT}")
    elif act:
        result["actions"] = {"dry_run": dry_run, "calls": [], "done": [],
                             "note": f"decision {result['decision']}: nothing to stop"}
    if fmt == TableOrJson.json:
        _emit(dumps(result), output)
    else:
        from ptplan.report.tables_spend import guard_text

        _emit(guard_text(result, plan.spec_name), output)
    if incomplete:
        typer.echo(f"error: {incomplete}", err=True)
    info(f"guard: {result['decision']} (exit {result['exit_code']}); thresholds "
         f"{result['thresholds_from']}")
    return int(result["exit_code"])
