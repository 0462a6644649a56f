"""``ptplan render``: deployment configs (SkyPilot, KubeRay, Karpenter, Kueue, Terraform, bucket
lifecycle) from a plan JSON. The plan is validated and re-verified first; a plan that fails
verification is not rendered (exit 1). Files go under ``-o DIR``; their list goes to stderr."""

from __future__ import annotations

from pathlib import Path

import typer

from optimizer.cli.common import _run, app
from optimizer.render.kinds import Target


@app.command()
def render(
    plan_file: Path = typer.Argument(..., metavar="PLAN.json", help="A plan written by "
                                     "`ptplan plan --format json`."),
    target: Target = typer.Option(..., "--target", "-t", help="What to write; all: every "
                                  "target that applies to the plan."),
    output: Path = typer.Option(..., "-o", "--output", help="Directory to write into "
                                "(created; existing files of the same names are replaced)."),
    spec: Path = typer.Option(None, "--spec", help="The spec the plan was made from; needed "
                              "only for plans of schema 1 that do not record their lifecycle "
                              "(checkpoint cadence and retention)."),
    image: str = typer.Option(None, "--image", help="Container image for Ray pods and "
                              "SkyPilot tasks (default: veRL's published image)."),
    cluster: str = typer.Option("ptplan", "--cluster", help="Kubernetes cluster name "
                                "(Karpenter discovery tag and node role; GKE cluster)."),
    framework: str = typer.Option(None, "--framework", help="Launch commands for this "
                                  "framework and release line: verl==0.9 (default) or "
                                  "openrlhf==0.11; the launch installs the pinned release."),
) -> None:
    """Write deployment configs for a plan (see docs/render.md)."""

    def go() -> None:
        from optimizer.plan.verify import verify_plan
        from optimizer.render.frameworks import parse_framework
        from optimizer.render.targets import DEFAULT_IMAGE, load_plan, render_plan, write_files
        from optimizer.spec.project import load_spec

        parse_framework(framework)  # an unsupported version is one line, before anything else
        p = load_plan(plan_file)
        problems = verify_plan(p)
        if problems:
            for line in problems:
                typer.echo(f"violation: {line}", err=True)
            typer.echo(f"error: plan {plan_file} fails verification ({len(problems)} "
                       "violation(s)); not rendered: re-plan or fix the plan", err=True)
            raise typer.Exit(1)
        s = load_spec(str(spec)) if spec is not None else None
        files, notes = render_plan(p, target.value, s, image or DEFAULT_IMAGE, cluster,
                                   framework)
        for note in notes:
            typer.echo(f"note: {note}", err=True)
        for path in write_files(files, output):
            typer.echo(f"wrote {path}", err=True)

    _run(go)
