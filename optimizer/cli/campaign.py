"""Campaigns through ``plan``, ``check`` and ``render`` (:mod:`ptplan.campaign`;
docs/campaigns.md): the commands detect a campaign file and come here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from ptplan.cli.common import Format, ProgressBar, ReportFormat, _emit_as, dumps, info


def read_any(path: Path, what: str) -> dict[str, Any]:
    from ptplan.core.yamlio import read_mapping

    return read_mapping(str(path), what)


def is_campaign_file(path: Path) -> bool:
    """A YAML campaign (top-level ``stages``) or a campaign JSON (``kind: campaign``)."""
    from ptplan.core.errors import InputError

    try:
        data = read_any(path, "plan")
    except InputError:
        return False  # the command's own reader reports it
    return "stages" in data or data.get("kind") == "campaign"


def plan_campaign_cmd(path: Path, catalog: str, policy: Path | None, solver: str,
                      fmt: Format | ReportFormat, output: Path | None) -> None:
    from ptplan.campaign.runner import plan_campaign
    from ptplan.planner.api import pareto, plan
    from ptplan.policies.model import load_policy
    from ptplan.providers.registry import load_catalog
    from ptplan.report.tables_campaign import (
        campaign_footer,
        campaign_markdown,
        campaign_rows,
        campaign_table,
    )

    pol = load_policy(str(policy) if policy else None)
    cat = load_catalog(catalog)
    info(f"planning campaign {path} on catalog {cat.name}, policy {pol.name}...")

    def frontier(spec: Any, points: int) -> list[dict[str, Any]]:
        return list(pareto(spec, cat, points, solver, pol)["points"])

    def plan_at(spec: Any, hours: float) -> Any:
        s = spec.model_copy(update={"sla": spec.sla.model_copy(
            update={"deadline_hours": hours * (1 + 1e-9)})})
        return plan(s, cat, "cost", solver, explain=False, timings=False, policy=pol)

    with ProgressBar("campaign") as bar:
        r = plan_campaign(path, cat, frontier, plan_at, solver,
                          lambda d, t, label: bar(d, t, label))
    def html() -> str:  # as `ptplan report` builds it (ptplan.cli.report)
        from ptplan.report.html import render_page
        from ptplan.report.html_campaign import campaign_docs

        return render_page(campaign_docs(r, campaign_rows(r), campaign_footer(r)))

    _emit_as(fmt, output, lambda: dumps(r), lambda: campaign_markdown(r),
             lambda: campaign_table(r), html)


def load_campaign_json(path: Path) -> dict[str, Any]:
    from ptplan.core.errors import InputError
    from ptplan.core.yamlio import quoted

    r = read_any(path, "campaign")
    need = ("stages", "stored", "handovers", "deadline_hours", "budget_usd", "makespan_hours",
            "stages_cost_usd", "handover_cost_usd", "total_cost_usd")
    missing = [k for k in need if k not in r]
    if missing or not isinstance(r.get("stages"), list):
        raise InputError(f"campaign {quoted(path)}: not a campaign plan (missing "
                         f"{', '.join(missing) or 'stages'}); regenerate it with `ptplan plan "
                         "CAMPAIGN.yaml --format json`")
    _stage_names(path, r["stages"])
    return r


def _stage_names(path: Path, stages: list[Any]) -> None:
    """Each stage's name is the directory ``render`` writes it into: refuse, before anything
    is read or written, a name that is not one (``/abs``, ``../x``, ``a/b``) or a repeat."""
    import re

    from ptplan.campaign.model import STAGE_NAME
    from ptplan.core.errors import InputError
    from ptplan.core.yamlio import quoted

    seen: set[str] = set()
    for i, s in enumerate(stages):
        name = s.get("name") if isinstance(s, dict) else None
        if not isinstance(name, str) or not re.fullmatch(STAGE_NAME, name):
            raise InputError(f"campaign {quoted(path)}: stages[{i}].name {name!r} is not a stage "
                             "name (letters, digits, '.', '-' and '_', up to 63, a letter or "
                             "digit first; it names the stage's directory under -o); "
                             "regenerate it with `ptplan plan CAMPAIGN.yaml --format json`")
        if name in seen:
            raise InputError(f"campaign {quoted(path)}: stages[{i}].name {name!r} names two "
                             "stages; regenerate it with `ptplan plan CAMPAIGN.yaml --format "
                             "json`")
        seen.add(name)


def check_campaign_cmd(path: Path) -> None:
    from ptplan.campaign.check import check_campaign
    from ptplan.core.errors import InputError
    from ptplan.core.yamlio import quoted

    r = load_campaign_json(path)
    try:
        problems = check_campaign(r)
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"campaign {quoted(path)}: malformed ({type(exc).__name__}: {exc}); "
                         "regenerate it with `ptplan plan CAMPAIGN.yaml --format json`") from None
    if problems:
        for line in problems:
            typer.echo(f"violation: {line}")
        typer.echo(f"{len(problems)} violation(s) in {quoted(path)}", err=True)
        raise typer.Exit(1)
    typer.echo(f"ok: {quoted(path)} is a consistent campaign ({len(r['stages'])} stages, "
               f"makespan {r['makespan_hours']:.2f} h, total ${r['total_cost_usd']:.2f})")


def render_campaign_cmd(path: Path, target: str, output: Path, image: str | None,
                        cluster: Any, framework: Any, check: bool, force: bool = False) -> None:
    """Each stage's plan rendered into OUTPUT/<stage>/ (its launch with the stage's spec); the
    files of all stages are written together, all of them or none."""
    from ptplan.campaign.check import check_campaign
    from ptplan.planfile.schema import Plan
    from ptplan.rendering.targets import render_plan, write_files
    from ptplan.spec.project import load_spec

    r = load_campaign_json(path)
    problems = check_campaign(r)
    if problems:
        for line in problems:
            typer.echo(f"violation: {line}", err=True)
        typer.echo(f"error: campaign {path} fails its check ({len(problems)} violation(s)); "
                   "not rendered", err=True)
        raise typer.Exit(1)
    rendered: list[tuple[str, Any, dict[str, str]]] = []
    inputs = [path]
    for s in r["stages"]:
        p = Plan.model_validate(s["plan"])
        spec = load_spec(s["spec"]) if Path(s["spec"]).is_file() else None
        if spec is not None:
            inputs.append(Path(s["spec"]))
        files, notes = render_plan(p, target, spec, image, cluster, framework)
        for note in notes:
            typer.echo(f"note: {s['name']}: {note}", err=True)
        rendered.append((s["name"], p, files))
    every = {f"{name}/{rel}": text for name, _, files in rendered for rel, text in files.items()}
    for written in write_files(every, output, force=force, inputs=inputs):
        info(f"wrote {written}")
    if check:
        from ptplan.rendering.checks.cluster import check_render

        for name, p, files in rendered:
            found = check_render(p, files)
            for line in found:
                typer.echo(f"violation: {name}: {line}", err=True)
            if found:
                typer.echo("error: the rendered files fail the deployment check", err=True)
                raise typer.Exit(1)
