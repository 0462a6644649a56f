"""``ptplan estimate | plan | check | pareto | schema``: the planning commands."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import typer

from ptplan.cli.common import (
    FRAMEWORK_HELP,
    START_AFTER_HELP,
    Format,
    Objective,
    ProgressBar,
    ReportFormat,
    _emit_as,
    _run,
    app,
    complete_framework,
    dumps,
    info,
    schema_app,
    with_framework,
    with_start_after,
)
from ptplan.cli.estimate_cluster import (
    check_cluster_options,
    complete_cluster,
    complete_pools,
    estimate_on_cluster,
)
from ptplan.core.cluster_option import PipelineMode
from ptplan.core.kinds import Solver


@app.command()
def estimate(
    spec: Path = typer.Argument(..., help="Project spec YAML."),
    gpu: list[str] = typer.Option(None, "--gpu", help="GPU type (repeatable); default: all "
                                  "GPU types of the catalog."),
    precision: str = typer.Option(None, "--precision", help="fp32|bf16|fp16|fp8|int8; default: "
                                  "bf16 (fp16/fp32 where the GPU lacks bf16)."),
    catalog: str = typer.Option("embedded", "--catalog", help="embedded|cache|PATH."),
    fmt: Format = typer.Option(Format.table, "--format"),
    output: Path = typer.Option(None, "-o", "--output", help="Write to FILE instead of stdout."),
    cluster: str = typer.Option(None, "--cluster", metavar="NxGPU",
                                autocompletion=complete_cluster,
                                help="The job on a cluster you have, e.g. 64xH100: per step "
                                "each phase's seconds, the step, wall time, GPU-hours and "
                                "utilisation, with their 80 % intervals (not with --gpu or "
                                "--precision)."),
    gpus_per_node: int = typer.Option(None, "--gpus-per-node", metavar="G",
                                      help="With --cluster: GPUs per node; default: the GPU's "
                                           "scale-up domain (8; 72 for GB200 and GB300 NVL72)."),
    pipeline: PipelineMode = typer.Option(None, "--pipeline",
                                          help="With --cluster; default: the spec's pipeline "
                                          "(colocated for auto and for SFT)."),
    pools: str = typer.Option(None, "--pools", metavar="POOL=N,...",
                              autocompletion=complete_pools,
                              help="With --cluster and --pipeline sync|async: GPUs per pool "
                              "(scoring defaults to the update pool); default: the split with "
                              "the shortest step."),
) -> None:
    """Per phase: FLOPs, tokens, memory fit and GPU-hours per GPU type, each at its most
    efficient pool; with --cluster NxGPU: the job on that cluster (step, wall time, GPU-hours,
    utilisation)."""

    def go() -> None:
        from ptplan.demand.estimate import estimate as run
        from ptplan.providers.registry import load_catalog
        from ptplan.report.tables import estimate_markdown, estimate_table
        from ptplan.spec.project import load_spec

        check_cluster_options(cluster, gpu, precision, gpus_per_node, pipeline, pools)
        s = load_spec(str(spec))
        if cluster is not None:
            estimate_on_cluster(s, cluster, gpus_per_node, pipeline, pools, fmt, output)
            return
        names = list(gpu) if gpu else load_catalog(catalog).gpus()
        report = run(s, names, precision)
        _emit_as(fmt, output, lambda: dumps(report), lambda: estimate_markdown(report),
                 lambda: estimate_table(report))

    _run(go)


@app.command()
def plan(
    spec: Path = typer.Argument(..., help="Project spec YAML."),
    catalog: str = typer.Option("embedded", "--catalog", help="embedded|cache|PATH."),
    fmt: ReportFormat = typer.Option(ReportFormat.table, "--format",
                                      help="html: a self-contained report (docs/report.md)."),
    output: Path = typer.Option(None, "-o", "--output", help="Write to FILE instead of stdout."),
    objective: Objective = typer.Option(Objective.cost, "--objective",
                                        help="cost: cheapest within deadline and budget; "
                                        "time: fastest within budget."),
    solver: Solver = typer.Option(Solver.highs, "--solver", help="MILP solver."),
    explain: bool = typer.Option(False, "--explain", help="Show why: binding constraints, "
                                 "marginal costs, alternatives (always in JSON)."),
    timings: bool = typer.Option(True, "--timings/--no-timings",
                                 help="--no-timings zeroes solver.seconds for byte-identical "
                                 "output."),
    policy: Path = typer.Option(None, "--policy", help="Policy YAML (default: "
                                "policies/default.yaml)."),
    risk: str = typer.Option(None, "--risk", help="pNN: the cheapest plan whose simulated "
                             "NN-th percentile of makespan meets the deadline (and of cost, "
                             "the budget)."),
    trials: int = typer.Option(10_000, "--trials", help="With --risk: simulated runs per "
                               "candidate."),
    seed: int = typer.Option(0, "--seed", help="With --risk: the simulation's seed."),
    correlated: float = typer.Option(0.0, "--correlated", help="With --risk: share of each "
                                     "spot node's hazard from zone-wide reclaims (0 to 1)."),
    calibration: Path = typer.Option(None, "--calibration", help="Calibration entries (YAML "
                                     "calibration: list, e.g. from `ptplan runs calibrate`) "
                                     "added to the spec's."),
    start_after: str = typer.Option(None, "--start-after", help=START_AFTER_HELP),
    framework: str = typer.Option(None, "--framework", help=FRAMEWORK_HELP,
                                  autocompletion=complete_framework),
) -> None:
    """The cheapest cluster plan that meets the deadline and the budget (with --risk pNN: at
    the NN-th percentile of simulated runs)."""

    def go() -> None:
        from ptplan.cli.campaign import is_campaign_file, plan_campaign_cmd
        from ptplan.cli.report import html_page
        from ptplan.planner.api import plan as make_plan
        from ptplan.policies.model import load_policy
        from ptplan.providers.registry import load_catalog
        from ptplan.report.tables import plan_markdown, plan_table
        from ptplan.spec.project import load_spec

        if is_campaign_file(spec):
            if risk is not None or objective.value != "cost":
                from ptplan.core.errors import InputError

                raise InputError("a campaign is planned for the least cost within its deadline "
                                 "and budget: --risk and --objective time apply to one spec")
            plan_campaign_cmd(spec, catalog, policy, solver.value, fmt, output)
            return
        if calibration is not None:
            from ptplan.spec.calibration import load_spec_calibrated

            s = load_spec_calibrated(str(spec), str(calibration))
        else:
            s = load_spec(str(spec))
        s = with_start_after(s, start_after)  # re-validated: a date deadline counts from it
        s = with_framework(s, framework)
        if s.data.generated_by is not None:
            info(f"note: data.generated_by {s.data.generated_by}: the data-generation job's "
                 "cost is not in this plan; `ptplan compare` and campaigns count it")
        pol = load_policy(str(policy) if policy else None)
        cat = load_catalog(catalog)
        info(f"planning {s.name} on catalog {cat.name} ({len(cat.offers)} offers), "
             f"policy {pol.name}...")
        if risk is not None:
            _risk_plan(s, cat, pol, objective.value, solver.value, timings, risk, trials, seed,
                       correlated, fmt, output, explain)
            return
        p = make_plan(s, cat, objective.value, solver.value, explain=True, timings=timings,
                      policy=pol)
        if explain:  # what the release costs: a second, abstract plan (so only on request)
            from ptplan.planner.api import framework_price

            p = p.model_copy(update={"framework_price": framework_price(
                s, p, cat, objective.value, solver.value, pol)})
        _emit_as(fmt, output, p.to_json, lambda: plan_markdown(p, explain),
                 lambda: plan_table(p, explain),
                 lambda: html_page("plan", json.loads(p.to_json())))

    _run(go)


def _risk_plan(s: Any, cat: Any, pol: Any, objective: str, solver: str, timings: bool,
               risk: str, trials: int, seed: int, correlated: float, fmt: ReportFormat,
               output: Path | None, explain: bool) -> None:
    """``plan --risk pNN`` (:mod:`ptplan.risk.tighten`)."""
    from ptplan.core.errors import InputError
    from ptplan.planner.api import plan as make_plan
    from ptplan.report.tables import plan_markdown, plan_table
    from ptplan.report.tables_simulate import risk_lines
    from ptplan.risk.runner import check_counts
    from ptplan.risk.summary import parse_quantile
    from ptplan.risk.tighten import RiskOptions, risk_plan

    q = parse_quantile(risk)
    if objective != "cost":
        raise InputError("--risk: only with --objective cost (the cheapest plan meeting the "
                         "deadline at the quantile)")
    check_counts(trials, None, seed)
    if not 0.0 <= correlated <= 1.0:
        raise InputError(f"--correlated: {correlated} is not a share; use a number in [0, 1]")
    opt = RiskOptions(q, risk.strip().lower(), trials, seed, correlated)
    with ProgressBar(f"plan --risk {opt.label}: candidates") as bar:
        p, report = risk_plan(s, lambda spec: make_plan(
            spec, cat, objective, solver, explain=True, timings=timings, policy=pol), opt, bar)
    if str(fmt) in ("json", "html"):
        info(report["statement"])
    lines = "".join(line + "\n" for line in risk_lines(report))

    def html() -> str:
        from ptplan.cli.report import html_page

        return html_page("plan", json.loads(p.to_json()))

    _emit_as(fmt, output, p.to_json, lambda: plan_markdown(p, explain) + "\n" + lines,
             lambda: plan_table(p, explain) + lines, html)


@app.command()
def check(
    plan_file: Path = typer.Argument(..., metavar="PLAN.json", help="A plan written by "
                                     "`ptplan plan --format json`."),
    spec: Path = typer.Option(None, "--spec", help="Also recompute demand from this spec."),
    policy: Path = typer.Option(None, "--policy", help="Also check against this policy; "
                                "violations are named by rule."),
    framework: str = typer.Option(None, "--framework", help="With --spec: the framework the "
                                  "plan was made for with `plan --framework` (default: the "
                                  "spec's).", autocompletion=complete_framework),
) -> None:
    """Re-check a plan from the plan alone: coverage, makespan, cost, caps, deadline, budget,
    and the policy it was made under (or --policy); its prices against the embedded catalog
    when it was made on it."""

    def go() -> None:
        from ptplan.cli.campaign import check_campaign_cmd, is_campaign_file
        from ptplan.core.errors import InputError
        from ptplan.core.yamlio import quoted
        from ptplan.planfile.load import load_plan
        from ptplan.planfile.rules_catalog import check_against_catalog, packaged_catalog
        from ptplan.planfile.verify import verify_against_spec, verify_plan
        from ptplan.spec.project import load_spec

        if is_campaign_file(plan_file):
            check_campaign_cmd(plan_file)
            return
        p = load_plan(plan_file)
        problems = verify_plan(p)
        made_on = packaged_catalog(p)
        if made_on is not None:
            problems += check_against_catalog(p, made_on)
        if spec is not None:
            problems += verify_against_spec(p, with_framework(load_spec(str(spec)), framework))
        elif framework is not None:
            raise InputError("--framework applies with --spec (the spec the plan is checked "
                             "against); give --spec SPEC or drop --framework")
        if policy is not None:
            from ptplan.policies.check import check_plan
            from ptplan.policies.model import load_policy

            pol = load_policy(str(policy))
            problems += [f"policy {pol.name}: {line}" for line in check_plan(p, pol)]
        if problems:
            for line in problems:
                typer.echo(f"violation: {line}")
            typer.echo(f"{len(problems)} violation(s) in {quoted(plan_file)}", err=True)
            raise typer.Exit(1)
        typer.echo(f"ok: {quoted(plan_file)} is consistent ({len(p.pools)} pools, {len(p.phases)} "
                   f"phases, total ${p.total_cost_usd})")

    _run(go)


@app.command()
def pareto(
    spec: Path = typer.Argument(..., help="Project spec YAML."),
    catalog: str = typer.Option("embedded", "--catalog", help="embedded|cache|PATH."),
    points: int = typer.Option(10, "--points", help="Deadlines to solve (geometric grid)."),
    fmt: ReportFormat = typer.Option(ReportFormat.table, "--format",
                                      help="html: a self-contained report (docs/report.md)."),
    output: Path = typer.Option(None, "-o", "--output", help="Write to FILE instead of stdout."),
    solver: Solver = typer.Option(Solver.highs, "--solver", help="MILP solver."),
    policy: Path = typer.Option(None, "--policy", help="Policy YAML (default: "
                                "policies/default.yaml)."),
    start_after: str = typer.Option(None, "--start-after", help=START_AFTER_HELP),
    framework: str = typer.Option(None, "--framework", help=FRAMEWORK_HELP,
                                  autocompletion=complete_framework),
) -> None:
    """The cost-vs-deadline frontier: what each hour of deadline costs (with a start date,
    each point books capacity blocks and flex-start as `plan` does)."""

    def go() -> None:
        from ptplan.planner.api import pareto as run
        from ptplan.policies.model import load_policy
        from ptplan.providers.registry import load_catalog
        from ptplan.report.tables import pareto_markdown, pareto_table
        from ptplan.spec.project import load_spec

        s = with_framework(with_start_after(load_spec(str(spec)), start_after), framework)
        cat = load_catalog(catalog)
        pol = load_policy(str(policy) if policy else None)
        with ProgressBar("pareto: solving deadlines", points) as bar:
            report = run(s, cat, points, solver.value, pol, progress=bar)

        def html() -> str:
            from ptplan.cli.report import html_page
            from ptplan.core.errors import InfeasibleError
            from ptplan.planner.api import plan as make_plan

            try:  # the plan `ptplan plan` makes of this spec, marked on the curve
                chosen = json.loads(make_plan(s, cat, "cost", solver.value, explain=False,
                                              timings=False, policy=pol).to_json())
            except InfeasibleError:
                chosen = None
            return html_page("pareto", report, chosen)

        _emit_as(fmt, output, lambda: dumps(report), lambda: pareto_markdown(report),
                 lambda: pareto_table(report), html)

    _run(go)


@schema_app.command("spec")
def schema_spec() -> None:
    """JSON Schema of the project spec (for editor completion)."""
    from ptplan.spec.project import ProjectSpec

    sys.stdout.write(dumps(ProjectSpec.model_json_schema()))


@schema_app.command("plan")
def schema_plan() -> None:
    """JSON Schema of the plan (``ptplan plan --format json``; the current schema_version)."""
    from ptplan.planfile.schema import Plan

    sys.stdout.write(dumps(Plan.model_json_schema()))
