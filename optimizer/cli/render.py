"""``ptplan render``: deployment configs (SkyPilot, KubeRay, Karpenter, Kueue, Terraform, bucket
lifecycle) from a plan JSON. The plan is validated and re-verified first; a plan that fails
verification is not rendered (exit 1). Files go under ``-o DIR``, all of them or none, never
outside it, never through a link or over an input without ``--force``
(:func:`ptplan.rendering.targets.write_files`); their list goes to stderr."""

from __future__ import annotations

from pathlib import Path

import typer

from ptplan.cli.common import _run, app, complete_framework, info
from ptplan.rendering.kinds import Target


@app.command()
def render(
    plan_file: Path = typer.Argument(..., metavar="PLAN.json", help="A plan written by "
                                     "`ptplan plan --format json`."),
    target: Target = typer.Option(..., "--target", "-t", help="What to write; all: every "
                                  "target that applies to the plan."),
    output: Path = typer.Option(..., "-o", "--output", help="Directory to write into "
                                "(created; existing files of the same names are replaced, "
                                "all of them or, on a failure, none)."),
    spec: Path = typer.Option(None, "--spec", help="The spec the plan was made from: the launch "
                              "commands take its run settings (prompts, samples, lengths, eval, "
                              "checkpoint contents); without it a launch refuses to start. Plans "
                              "of schema 1 also take their lifecycle from it."),
    image: str = typer.Option(None, "--image", help="Container image for Ray pods and "
                              "SkyPilot tasks (default: veRL's published image); with "
                              "--target guard, the guard's image (ptplan installed in it, "
                              "pinned by digest: REPO@sha256:...), required."),
    cluster: str = typer.Option("ptplan", "--cluster", help="Kubernetes cluster name "
                                "(Karpenter discovery tag and node role; GKE cluster)."),
    check: bool = typer.Option(False, "--check", help="Also check, across the rendered "
                               "objects, that the cluster would run and bill them as planned "
                               "(pod groups ↔ node pools, Kueue admission, taints, cost tags, "
                               "lifecycle coverage); exit 1 on a violation."),
    framework: str = typer.Option(None, "--framework", help="Launch commands for this "
                                  "framework and release line: verl==0.9 or openrlhf==0.11 "
                                  "(default: the one the plan was made for; verl==0.9 for a "
                                  "plan made for any); another than the plan's is refused.",
                                  autocompletion=complete_framework),
    force: bool = typer.Option(False, "--force", help="Write even through a symbolic link (-o "
                               "itself, or a file under it) or over an input file (the plan, "
                               "the spec); refused otherwise. Names never leave -o."),
) -> None:
    """Write deployment configs for a plan (see docs/render.md)."""

    def go() -> None:
        from ptplan.planfile.load import load_plan
        from ptplan.planfile.verify import verify_plan
        from ptplan.rendering.frameworks import parse_framework
        from ptplan.rendering.targets import render_plan, write_files
        from ptplan.spec.project import load_spec

        parse_framework(framework)  # an unsupported version is one line, before anything else
        from ptplan.cli.campaign import is_campaign_file, render_campaign_cmd

        if is_campaign_file(plan_file):
            render_campaign_cmd(plan_file, target.value, output, image, cluster, framework,
                                check, force)
            return
        p = load_plan(plan_file)
        problems = verify_plan(p)
        if problems:
            for line in problems:
                typer.echo(f"violation: {line}", err=True)
            typer.echo(f"error: plan {plan_file} fails verification ({len(problems)} "
                       "violation(s)); not rendered: re-plan or fix the plan", err=True)
            raise typer.Exit(1)
        s = load_spec(str(spec)) if spec is not None else None
        files, notes = render_plan(p, target.value, s, image, cluster,
                                   framework)
        for note in notes:
            typer.echo(f"note: {note}", err=True)
        inputs = [plan_file, *([spec] if spec is not None else [])]
        for path in write_files(files, output, force=force, inputs=inputs):
            info(f"wrote {path}")
        if check:
            from ptplan.rendering.checks.cluster import check_render

            found = check_render(p, files)
            for line in found:
                typer.echo(f"violation: {line}", err=True)
            if found:
                typer.echo(f"error: the rendered files fail {len(found)} deployment check(s); "
                           "see docs/render.md, 'Deployment check'", err=True)
                raise typer.Exit(1)
            info(f"check: {len(files)} files deploy as planned")

    _run(go)
