"""``ptplan estimate --cluster NxGPU``: the job on a cluster the team already has (the options'
checks, completion and output; the ``estimate`` command itself is in :mod:`ptplan.cli.plan`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ptplan.cli.common import Format, _emit_as, dumps


def complete_cluster(incomplete: str) -> list[str]:
    """``--cluster``: ``N x`` each GPU type (``64x`` completes to ``64xH100``, ...)."""
    from ptplan.core.hardware import gpus

    count, x, name = incomplete.lower().partition("x")
    if not (x and count.isdigit()):
        count, name = (incomplete, "") if incomplete.isdigit() else ("8", incomplete)
    return [f"{count}x{g}" for g in sorted(gpus()) if g.lower().startswith(name.lower())]


def complete_pools(incomplete: str) -> list[str]:
    """``--pools``: the pool names still missing after the last comma."""
    done, _, last = incomplete.rpartition(",")
    head = f"{done}," if done else ""
    given = {p.partition("=")[0] for p in done.split(",") if p}
    return [f"{head}{p}=" for p in ("rollout", "update", "scoring")
            if p not in given and p.startswith(last)]


def check_cluster_options(cluster: str | None, gpu: list[str] | None, precision: str | None,
                          gpus_per_node: int | None, pipeline: Any, pools: str | None) -> None:
    """``--cluster`` names the GPU and picks each phase's precision: not with ``--gpu`` or
    ``--precision``; ``--gpus-per-node``, ``--pipeline`` and ``--pools`` describe the cluster:
    only with it."""
    from ptplan.core.errors import InputError

    if cluster is not None:
        if gpu or precision is not None:
            given = "--gpu" if gpu else "--precision"
            raise InputError(f"--cluster {cluster} with {given}: the cluster names the GPU, and "
                             f"each phase runs at its fastest precision there; drop {given}, "
                             "or --cluster for the per-GPU estimate")
        return
    for option, value in (("--gpus-per-node", gpus_per_node), ("--pipeline", pipeline),
                          ("--pools", pools)):
        if value is not None:
            raise InputError(f"{option} {value}: only with --cluster NxGPU (e.g. --cluster "
                             "64xH100)")


def estimate_on_cluster(s: Any, cluster: str, gpus_per_node: int | None, pipeline: Any,
                        pools: str | None, fmt: Format, output: Path | None) -> None:
    """``estimate --cluster``: the usual estimate on the cluster's GPU, and ``cluster_run``."""
    from ptplan.core.cluster_option import cluster_request, named
    from ptplan.core.errors import InputError
    from ptplan.demand.cluster import run_on_cluster
    from ptplan.demand.estimate import estimate as run
    from ptplan.report.tables_cluster import cluster_markdown, cluster_table

    req = cluster_request(cluster, gpus_per_node, None if pipeline is None else str(pipeline),
                          pools, s.method, s.pipeline)
    report = run(s, [req.gpu], None)
    try:
        report["cluster_run"] = run_on_cluster(s, req.gpu, req.gpus, req.gpus_per_node,
                                               req.pipeline, req.pools).to_json()
    except InputError as exc:
        raise named(exc, cluster) from None
    _emit_as(fmt, output, lambda: dumps(report), lambda: cluster_markdown(report),
             lambda: cluster_table(report))
