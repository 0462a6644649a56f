"""ptplan's public Python API: what ``import ptplan`` exports (``ptplan.plan``,
``ptplan.render``, ...), one function per ``ptplan`` command.

Each function does what its command does and returns the data the command prints with
``--format json`` (a :class:`~ptplan.planfile.schema.Plan` for ``plan``; floats rounded to 12
significant digits as printed, :mod:`ptplan.core.numbers`), without printing. Inputs
are objects (a spec, catalog, policy or plan) or the paths they are loaded from; options are
keyword arguments with the command's defaults. Errors are the classes of
:mod:`ptplan.core.errors`: :class:`~ptplan.core.errors.InputError` (bad input: the command's
exit code 2), :class:`~ptplan.core.errors.InfeasibleError` (no plan meets the constraints: 1),
:class:`~ptplan.core.errors.ProviderError` (a price source failed: 3), all of them
:class:`~ptplan.core.errors.PlannerError`.

This module sits at the top beside :mod:`ptplan.cli` and never imports it; the heavy parts
(the planner, the renderers, the simulator) are imported by the function that needs them.
The loaders live in :mod:`ptplan.api.inputs`, the analysis commands (``whatif``, ``reserve``,
``simulate``, ``compare``) in :mod:`ptplan.api.ops`.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from ptplan.api.inputs import (
    as_catalog,
    as_plan,
    as_policy,
    as_spec,
    load_catalog,
    load_plan,
    load_policy,
    load_spec,
    with_start_after,
)
from ptplan.api.models import init_spec, model_preset, models
from ptplan.api.ops import compare, reserve, simulate, whatif
from ptplan.core.errors import InputError, PlannerError
from ptplan.core.numbers import round_floats
from ptplan.planfile.schema import Plan
from ptplan.policies.model import Policy
from ptplan.providers.base import Catalog
from ptplan.spec.project import ProjectSpec, with_framework

__all__ = ["compare", "estimate", "init_spec", "load_catalog", "load_plan", "load_policy",
           "load_spec", "model_preset", "models", "pareto", "plan", "render", "reserve",
           "simulate", "verify", "whatif"]

_log = logging.getLogger("ptplan")
"""Where :func:`render` reports its notes (the lines ``ptplan render`` prints as ``note:``)."""


def estimate(spec: ProjectSpec | str | os.PathLike[str], gpus: Sequence[str] | None = None,
             precision: str | None = None, catalog: Catalog | str | os.PathLike[str] | None = None,
             *, cluster: str | None = None, gpus_per_node: int | None = None,
             pipeline: Literal["colocated", "sync", "async"] | None = None,
             pools: str | Mapping[str, int] | None = None) -> dict[str, Any]:
    """Per phase: FLOPs, tokens, memory fit and GPU-hours per GPU type, each at its most
    efficient pool, as ``ptplan estimate``; with ``cluster``, also the job on that cluster, as
    ``ptplan estimate --cluster``.

    Args:
        spec: The project spec, or the path of its YAML.
        gpus: GPU type names (``["H100", "L40S"]``); ``None`` or empty: every GPU type of
            ``catalog``, as ``ptplan estimate`` without ``--gpu``. Not with ``cluster``.
        precision: ``fp32``, ``bf16``, ``fp16``, ``fp8`` or ``int8``; ``None``: bf16 (fp16 or
            fp32 where the GPU lacks bf16). Not with ``cluster``.
        catalog: Where the default GPU types come from (only used when ``gpus`` and
            ``cluster`` are not given): a catalog, a reference for ``ptplan.load_catalog``, or
            ``None``: embedded.
        cluster: ``"NxGPU"`` (``"64xH100"``, ``"8xA100-80GB"``): the job on that cluster
            (``--cluster``). The report is the estimate on that GPU type plus ``cluster_run``:
            per step each phase's seconds, the step, wall hours, GPU-hours (wall x GPUs) and
            utilisation, with their 80 % interval.
        gpus_per_node: With ``cluster``: GPUs per node; ``None``: the GPU's scale-up domain
            (8; 72 for GB200 and GB300 NVL72, one rack's NVLink domain).
        pipeline: With ``cluster``: ``colocated``, ``sync`` or ``async``; ``None``: the
            spec's ``pipeline`` (colocated for ``auto`` and for SFT).
        pools: With ``cluster`` and a sync or async pipeline: GPUs per pool,
            ``"rollout=24,update=40"`` or ``{"rollout": 24, "update": 40}`` (``scoring``
            optional: it defaults to the update pool); ``None``: the split with the shortest
            step.

    Returns:
        The report ``ptplan estimate --format json`` prints (with ``cluster``, that of
        ``--cluster``, its ``cluster_run`` block included).

    Raises:
        InputError: An unknown GPU type or precision, a bad spec file, or a bad or
            conflicting cluster option (``cluster`` with ``gpus`` or ``precision``, a cluster
            option without ``cluster``, pools with a colocated pipeline, ...).
    """
    from ptplan.demand.estimate import estimate as run

    s = as_spec(spec)
    names = [gpus] if isinstance(gpus, str) else list(gpus or [])
    if cluster is None:
        for name, value in (("gpus_per_node", gpus_per_node), ("pipeline", pipeline),
                            ("pools", pools)):
            if value is not None:
                raise InputError(f"{name} {value}: only with cluster, e.g. cluster='64xH100'")
        return round_floats(run(s, names or as_catalog(catalog).gpus(), precision))
    if names or precision is not None:
        given = "gpus" if names else "precision"
        raise InputError(f"cluster {cluster} with {given}: the cluster names the GPU, and each "
                         f"phase runs at its fastest precision there; drop {given}, or cluster "
                         "for the per-GPU estimate")
    from ptplan.core.cluster_option import PYTHON, cluster_request, named
    from ptplan.demand.cluster import run_on_cluster

    req = cluster_request(cluster, gpus_per_node, pipeline, pools, s.method, s.pipeline, PYTHON)
    report = run(s, [req.gpu], None)
    try:
        report["cluster_run"] = run_on_cluster(s, req.gpu, req.gpus, req.gpus_per_node,
                                               req.pipeline, req.pools).to_json()
    except InputError as exc:
        raise named(exc, cluster, PYTHON) from None
    return round_floats(report)


def plan(spec: ProjectSpec | str | os.PathLike[str],
         catalog: Catalog | str | os.PathLike[str] | None = None, *,
         objective: Literal["cost", "time"] = "cost",
         policy: Policy | str | os.PathLike[str] | None = None,
         solver: Literal["highs", "cbc"] = "highs", explain: bool = True, timings: bool = True,
         risk: str | None = None, trials: int = 10_000, seed: int = 0, correlated: float = 0.0,
         start_after: dt.date | str | None = None, framework: str | None = None) -> Plan:
    """The cheapest cluster plan that meets the deadline and the budget, verified, as
    ``ptplan plan``: ``plan(spec).to_json()`` is the bytes ``ptplan plan SPEC --format json``
    writes (with ``timings=False``, those of ``--no-timings``).

    A spec with a calibration file (``ptplan plan --calibration FILE``) is loaded with
    ``load_spec(path, calibration=FILE)``.

    Args:
        spec: The project spec, or the path of its YAML.
        catalog: A catalog, a reference for ``ptplan.load_catalog`` (``"embedded"``,
            ``"cache"``, a file), or ``None``: the embedded catalog.
        objective: ``cost``: the cheapest plan within deadline and budget; ``time``: the
            fastest within budget.
        policy: A policy, the path of a policy YAML, or ``None``: the default policy.
        solver: The MILP solver: ``highs`` or ``cbc``.
        explain: Include the explanation (binding constraints, marginal costs, alternatives),
            as the command always does; ``False`` leaves ``explain`` empty and is faster.
        timings: ``False`` zeroes ``solver.seconds`` for byte-identical output
            (``--no-timings``).
        risk: ``"pNN"`` (e.g. ``"p90"``): the cheapest plan whose simulated NN-th percentile
            of makespan meets the deadline (and of cost, the budget), as ``--risk``; only with
            objective ``cost``. The risk statement is the last line of ``explain.summary``.
        trials: With ``risk``: simulated runs per candidate.
        seed: With ``risk``: the simulation's seed.
        correlated: With ``risk``: share of each spot node's hazard from zone-wide reclaims
            (0 to 1).
        start_after: The run starts on or after this date (``--start-after``): sets
            ``sla.start_after``, so capacity blocks and flex-start may be booked.
        framework: ``"verl==0.9"``, ``"openrlhf==0.11"`` or ``"any"`` (``--framework``): the
            release to plan for, instead of the spec's ``framework:`` (docs/frameworks.md).

    Returns:
        The plan: an immutable pydantic model, already re-checked by the independent verifier.

    Raises:
        InfeasibleError: No plan meets the constraints; the message names the binding one and
            what would help.
        InputError: A bad option, spec, catalog or policy.
    """
    from ptplan.planner.api import plan as make_plan

    s = with_framework(with_start_after(as_spec(spec), start_after), framework, "framework")
    pol = as_policy(policy)
    cat = as_catalog(catalog)
    if risk is None:
        return make_plan(s, cat, objective, solver, explain=explain, timings=timings,
                         policy=pol)
    from ptplan.risk.runner import check_counts
    from ptplan.risk.summary import parse_quantile
    from ptplan.risk.tighten import RiskOptions, risk_plan

    q = parse_quantile(risk)
    if objective != "cost":
        raise InputError("risk: only with objective cost (the cheapest plan meeting the "
                         "deadline at the quantile)")
    check_counts(trials, None, seed)
    if not 0.0 <= correlated <= 1.0:
        raise InputError(f"correlated: {correlated} is not a share; use a number in [0, 1]")
    opt = RiskOptions(q, risk.strip().lower(), trials, seed, correlated)
    chosen, _report = risk_plan(s, lambda sp: make_plan(
        sp, cat, objective, solver, explain=explain, timings=timings, policy=pol), opt)
    return chosen


def pareto(spec: ProjectSpec | str | os.PathLike[str],
           catalog: Catalog | str | os.PathLike[str] | None = None, *, points: int = 10,
           policy: Policy | str | os.PathLike[str] | None = None,
           solver: Literal["highs", "cbc"] = "highs", start_after: dt.date | str | None = None
           ) -> dict[str, Any]:
    """The cost-vs-deadline frontier, as ``ptplan pareto``: verified plans at deadlines from
    the fastest achievable run to the cheapest plan's run, and what each hour saved costs.

    Args:
        spec: The project spec, or the path of its YAML.
        catalog: A catalog, a reference for ``ptplan.load_catalog``, or ``None``: embedded.
        points: Deadlines to solve (a geometric grid; at least 2). Points whose plans coincide
            are listed once.
        policy: A policy, the path of a policy YAML, or ``None``: the default policy.
        solver: The MILP solver: ``highs`` or ``cbc``.
        start_after: The run starts on or after this date: each point books capacity blocks and
            flex-start as ``ptplan.plan`` does.

    Returns:
        The report ``ptplan pareto --format json`` prints: its ``points`` hold each plan's
        deadline, cost, makespan and pools.

    Raises:
        InfeasibleError: Not even the fastest plan fits the budget.
        InputError: Fewer than 2 points, or a bad spec, catalog or policy.
    """
    from ptplan.planner.api import pareto as run

    s = with_start_after(as_spec(spec), start_after)
    cat = as_catalog(catalog)
    return round_floats(run(s, cat, points, solver, as_policy(policy)))


def verify(plan: Plan | str | os.PathLike[str],
           spec: ProjectSpec | str | os.PathLike[str] | None = None, *,
           policy: Policy | str | os.PathLike[str] | None = None) -> list[str]:
    """Re-check a plan independently of the planner, as ``ptplan check``: coverage,
    makespan, cost, caps, deadline, budget and the policy it was made under, from the plan
    alone; its prices against the embedded catalog when it was made on it; with ``spec``, its
    demand recomputed from the spec; with ``policy``, that policy's rules too.

    Args:
        plan: The plan, or the path of a plan JSON.
        spec: The spec the plan was made from (or its path): also recompute demand from it.
        policy: Also check against this policy (a policy or its path); its violations are
            prefixed ``policy NAME:``. ``None``: no extra policy.

    Returns:
        The violations, one line each; empty when the plan is consistent.

    Raises:
        InputError: A plan, spec or policy file cannot be read.
    """
    from ptplan.planfile.rules_catalog import check_against_catalog, packaged_catalog
    from ptplan.planfile.verify import verify_against_spec, verify_plan

    p = as_plan(plan)
    problems = verify_plan(p)
    made_on = packaged_catalog(p)
    if made_on is not None:
        problems += check_against_catalog(p, made_on)
    if spec is not None:
        problems += verify_against_spec(p, as_spec(spec))
    if policy is not None:
        from ptplan.policies.check import check_plan

        pol = as_policy(policy)
        problems += [f"policy {pol.name}: {line}" for line in check_plan(p, pol)]
    return problems


def render(plan: Plan | str | os.PathLike[str], target: str, out_dir: str | os.PathLike[str], *,
           spec: ProjectSpec | str | os.PathLike[str] | None = None, framework: str | None = None,
           image: str | None = None, cluster: str = "ptplan", check: bool = False) -> list[Path]:
    """Write deployment configs for a plan, as ``ptplan render``. The plan is re-verified
    first; one that fails verification is not rendered. The notes the command prints
    (``note: ...``) go to the ``ptplan`` logger at INFO level.

    Args:
        plan: The plan, or the path of a plan JSON.
        target: ``skypilot``, ``kuberay``, ``karpenter``, ``kueue``, ``terraform-aws``,
            ``terraform-gcp``, ``lifecycle``, ``guard``, ``budgets``, or ``all`` (every
            target that applies to the plan; ``guard`` and ``budgets`` only by name).
        out_dir: The directory to write into (created; files of the same names are replaced).
        spec: The spec the plan was made from (or its path): the launch commands take its run
            settings; without it a launch refuses to start.
        framework: Launch commands for this framework and release line: ``verl==0.9``
            (``None``: the default) or ``openrlhf==0.11``.
        image: Container image for Ray pods and SkyPilot tasks; ``None``: veRL's published
            image. For ``guard``, the guard's image (ptplan installed in it, pinned by digest),
            required.
        cluster: Kubernetes cluster name (Karpenter discovery tag and node role; GKE cluster).
        check: Also check, across the rendered objects, that the cluster would run and bill
            them as planned (``--check``); the files are written either way.

    Returns:
        The paths written, in sorted order.

    Raises:
        InputError: The plan fails verification, the target does not apply to it, an unknown
            target or framework, or ``out_dir`` is not writable.
        PlannerError: With ``check``: the rendered files fail a deployment check (the message
            lists the violations).
    """
    from ptplan.planfile.verify import verify_plan
    from ptplan.rendering.frameworks import parse_framework
    from ptplan.rendering.targets import render_plan, write_files

    parse_framework(framework)  # an unsupported version fails before anything else
    p = as_plan(plan)
    problems = verify_plan(p)
    if problems:
        raise InputError(f"plan fails verification ({len(problems)} violation(s): "
                         + "; ".join(problems[:3]) + "); not rendered: re-plan or fix the plan")
    s = as_spec(spec) if spec is not None else None
    files, notes = render_plan(p, target, s, image, cluster, framework)
    for note in notes:
        _log.info("note: %s", note)
    written = write_files(files, Path(os.fspath(out_dir)))
    if check:
        from ptplan.rendering.checks.cluster import check_render

        found = check_render(p, files)
        if found:
            raise PlannerError(f"the rendered files fail {len(found)} deployment check(s): "
                               + "; ".join(found) + " (docs/render.md, 'Deployment check')")
    return written
