"""Plan a project: the public entry points :func:`plan`, :func:`pareto` and
:func:`framework_price` (what the spec's framework release costs over ``framework: any``, for
``plan --explain`` and the HTML report: a second whole plan, made only on request).

``plan`` runs the engine (:mod:`ptplan.planner.search.engine`: layouts → candidate pools →
exact bound → MILP), builds the plan from the best layout (:mod:`ptplan.planner.assembly.build`),
adds the explanation (:mod:`ptplan.planner.assembly.explain`) and has the independent verifier
(:func:`ptplan.planfile.verify.verify_plan`) re-check it from the plan alone: a plan that fails
verification is never returned. Infeasible inputs raise
:class:`~ptplan.core.errors.InfeasibleError` naming the binding constraint and what would make
the plan feasible.

``defaults_applied`` lists what was filled in for the user, as it was applied: the spec's
defaults (:func:`ptplan.spec.defaults.applied_defaults`), except that a checkpoint lifecycle
value the spec leaves out (``keep_hot``, ``archive_every``, ``retention_days``) is the policy's
(:func:`ptplan.costs.storage.lifecycle`), so the plan lists the policy's value and names it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from decimal import Decimal
from itertools import pairwise

from ptplan.core.errors import InfeasibleError, InputError, PlannerError
from ptplan.core.lp import check_solver
from ptplan.planfile.rules_framework import FRAMEWORK_SCHEMA, check_framework
from ptplan.planfile.schema import Lifecycle, Plan, hours, usd
from ptplan.planfile.schema_items import FrameworkPrice
from ptplan.planfile.verify import verify_plan
from ptplan.planner.assembly.build import build_plan
from ptplan.planner.assembly.explain import explain_plan
from ptplan.planner.assembly.interval import with_interval
from ptplan.planner.booking.plans import booked_offers, plan_with_bookings
from ptplan.planner.search.engine import Context, best_over_layouts, diagnose, prepare, solve_runs
from ptplan.policies.model import Policy
from ptplan.providers.base import Catalog
from ptplan.spec.frameworks import ANY, training_cap_eval
from ptplan.spec.project import ProjectSpec


def plan(spec: ProjectSpec, catalog: Catalog, objective: str = "cost", solver: str = "highs",
         explain: bool = True, timings: bool = True, ctx: Context | None = None,
         policy: Policy | None = None) -> Plan:
    """The cheapest (or, with objective ``time``, fastest within budget) verified plan under
    ``policy`` (default: ``policies/default.yaml``)."""
    if objective not in ("cost", "time"):
        raise InputError(f"--objective: unknown objective {objective!r}; use cost or time")
    check_solver(solver)
    start = time.perf_counter()
    booked = plan_with_bookings(spec, catalog, objective, solver, explain, timings, policy) \
        if ctx is None else None  # capacity blocks / flex-start (with sla.start_after)
    if booked is not None:
        p = booked
    else:
        ctx = replace(ctx, spec=spec) if ctx is not None else prepare(spec, catalog, policy)
        runs, solved = solve_runs(ctx, objective, solver, every_layout=explain)
        p = build_plan(ctx, runs, solved, objective, solver, start, timings)
        if explain:
            p = p.model_copy(update={"explain": explain_plan(ctx, runs, p, objective)})
    p = with_interval(p.model_copy(update={"defaults_applied": defaults_applied(
        spec, p.defaults_applied, p.lifecycle, str(p.policy.get("name"))),
        "framework": spec.framework_key,
        "schema_version": max(p.schema_version, FRAMEWORK_SCHEMA)}), spec).rounded()
    # rounded as printed (12 significant digits, ptplan.core.numbers): the plan verified and
    # returned is the one the JSON holds, on any CPU
    problems = verify_plan(p)
    if problems:
        raise PlannerError("internal error: the plan failed verification ("
                           + "; ".join(problems[:3]) + "); please report this bug")
    return p


def _at_deadline(spec: ProjectSpec, d: float) -> ProjectSpec:
    return spec.model_copy(update={"sla": spec.sla.model_copy(update={"deadline_hours": d})})


def _with_wait(p: Plan) -> float:
    """The plan's run plus its flex-start wait (what a deadline must hold)."""
    return p.makespan_hours + max((b.wait_hours for b in p.bookings), default=0.0)


PARETO_SCHEMA_VERSION = 3
"""Pareto report schema: 1 = first release; 2 = ``warnings`` and ``defaults_applied`` added;
3 = each point's ``uncertainty`` (its plan's 80 % interval: level, total, makespan)."""
LIFECYCLE_KEYS = ("keep_hot", "archive_every", "retention_days")
"""Checkpoint lifecycle values a spec may set; where it does not, the policy's apply."""


def defaults_applied(spec: ProjectSpec, spec_defaults: list[str], life: Lifecycle | None,
                     policy_name: str) -> list[str]:
    """``spec_defaults`` (the spec's :func:`~ptplan.spec.defaults.applied_defaults`) with each
    checkpoint lifecycle value the spec omits replaced by the value the storage was priced with,
    the policy's: ``checkpoints.retention_days = 90 (policy long-retention)``."""
    if life is None:
        return list(spec_defaults)
    given = spec.checkpoints.model_fields_set
    policy_lines = {f"checkpoints.{k} = ": f"checkpoints.{k} = {getattr(life, k)} (policy "
                    f"{policy_name})" for k in LIFECYCLE_KEYS if k not in given}
    return [next((new for prefix, new in policy_lines.items() if line.startswith(prefix)), line)
            for line in spec_defaults]


def pareto(spec: ProjectSpec, catalog: Catalog, points: int = 10, solver: str = "highs",
           policy: Policy | None = None,
           progress: Callable[[int, int], None] | None = None) -> dict:
    """The cost-vs-deadline frontier: verified plans at deadlines from the fastest achievable
    run to the cheapest plan's run (geometric grid), with the cost of each hour saved. With
    capacity blocks or flex-start bookable (``sla.start_after``) each point books exactly as
    :func:`plan` does (the ends are the fastest and the cheapest such plans; a point lists
    its ``bookings``).

    Like a plan, the report carries ``defaults_applied`` (the same for every point) and
    ``warnings``: each distinct warning of the points' plans, in order of first appearance."""
    if points < 2:
        raise InputError(f"--points: {points} is too few; ask for at least 2")
    check_solver(solver)
    budget = spec.budget.max_usd
    if booked_offers(spec, catalog, policy):
        # capacity blocks / flex-start bookable (sla.start_after): every point is planned as
        # `plan` plans it, booking exactly; the ends are the fastest and the cheapest plans
        # (their time with the flex-start wait: the deadline holds run + wait)
        fast_p = plan(spec, catalog, "time", solver, explain=False, timings=False, policy=policy)
        cheap_p = plan(spec, catalog, "cost", solver, explain=False, timings=False, policy=policy)
        t_min, t_max = _with_wait(fast_p), _with_wait(cheap_p)
        cheapest_usd = float(cheap_p.total_cost_usd)

        def solve_at(d: float) -> Plan:
            return plan(_at_deadline(spec, d), catalog, "cost", solver, explain=False,
                        timings=False, policy=policy)
    else:
        ctx = prepare(spec, catalog, policy)
        fastest = best_over_layouts(ctx, None, budget, "time")
        cheapest = best_over_layouts(ctx, None, budget, "cost")
        if fastest is None or cheapest is None:
            raise InfeasibleError(diagnose(ctx, None, budget, "cost"))
        t_min, t_max = fastest[1].run_hours, cheapest[1].run_hours
        cheapest_usd = cheapest[1].usd

        def solve_at(d: float) -> Plan:
            return plan(_at_deadline(spec, d), catalog, "cost", solver, explain=False,
                        timings=False, ctx=ctx)
    grid = [t_min * (t_max / t_min) ** (i / (points - 1)) for i in range(points)] \
        if t_max > t_min * (1 + 1e-9) else [t_min]
    rows: list[dict] = []
    seen: set[tuple[str, float]] = set()
    warnings: dict[str, None] = {}
    defaults: list[str] = []
    for n, d in enumerate(grid):
        if progress is not None:
            progress(n, len(grid))
        d = d * (1 + 1e-9)
        p = solve_at(d)
        key = (p.total_cost_usd, p.makespan_hours)
        if key in seen:
            continue
        seen.add(key)
        warnings.update(dict.fromkeys(p.warnings))
        defaults = defaults or p.defaults_applied
        rows.append({
            "deadline_hours": hours(d), "total_cost_usd": p.total_cost_usd,
            "makespan_hours": p.makespan_hours, "pipeline_mode": p.pipeline_mode,
            "layout": p.layout, "provider": p.provider, "region": p.region, "zone": p.zone,
            "network_cost_usd": p.network_cost_usd, "disk_cost_usd": p.disk_cost_usd,
            "pools": [f"{pool.name}: {pool.nodes} x {pool.gpu} x {pool.gpus_per_node} "
                      f"({'+'.join(sorted({a.capacity_type for a in pool.allocations}))})"
                      for pool in p.pools],
            "verified": True,
            **({"uncertainty": {"level": p.uncertainty.level,
                                "total_cost_usd": p.uncertainty.total_cost_usd,
                                "makespan_hours": p.uncertainty.makespan_hours}}
               if p.uncertainty is not None else {}),
            **({"bookings": [f"{b.pool}: {b.nodes} x {b.instance_type} {b.capacity_type} "
                             f"${b.cost_usd}" + (f" ({b.units} x {b.unit_hours:g} h)"
                                                 if b.capacity_type == "block" else
                                                 f" (wait {b.wait_hours:g} h)")
                             for b in p.bookings]} if p.bookings else {}),
        })
    if progress is not None:
        progress(len(grid), len(grid))
    rows.sort(key=lambda r: r["makespan_hours"])
    frontier: list[dict] = []
    for r in rows:  # keep only points not dominated (faster must cost more)
        if frontier and float(r["total_cost_usd"]) >= float(frontier[-1]["total_cost_usd"]):
            continue
        frontier.append(r)
    for a, b in pairwise(frontier):
        dh = b["makespan_hours"] - a["makespan_hours"]
        a["usd_per_hour_saved"] = usd((float(a["total_cost_usd"]) - float(b["total_cost_usd"]))
                                      / dh) if dh > 0 else None
    if frontier:
        frontier[-1]["usd_per_hour_saved"] = None
    return {
        "schema_version": PARETO_SCHEMA_VERSION, "spec_name": spec.name,
        "budget_usd": usd(budget) if budget is not None else None,
        "fastest_hours": hours(t_min), "cheapest_usd": usd(cheapest_usd),
        "catalog": catalog.name, "catalog_as_of": catalog.as_of,
        "points": frontier,
        "note": "each point is a verified plan at that deadline; usd_per_hour_saved is what "
                "finishing at this point instead of the next slower one costs per hour",
        "warnings": list(warnings), "defaults_applied": defaults,
    }


def framework_price(spec: ProjectSpec, made: Plan, catalog: Catalog, objective: str,
                    solver: str, policy: Policy | None) -> FrameworkPrice | None:
    """``made`` (planned for ``spec``'s release) against the plan of the same spec for
    ``any``; None for a spec planned for ``any``."""
    rel = spec.release
    if rel is None:
        return None
    abstract = spec.model_copy(update={"framework": ANY})
    try:
        other: Plan | None = plan(abstract, catalog, objective, solver, explain=False,
                                       timings=False, policy=policy)
    except (PlannerError, InputError):
        other = None
    reasons: list[str] = []
    if other is not None:
        reasons = [line.split(": ", 1)[1] for line in check_framework(
            other.model_copy(update={"framework": rel.key}))]
    if spec.eval is not None and training_cap_eval(spec) is not None \
            and spec.eval.response_tokens < spec.max_response_tokens:
        reasons.append(f"eval runs to {rel.label}'s validation cap, the training response cap "
                       f"{spec.max_response_tokens} (eval.response_tokens "
                       f"{spec.eval.response_tokens} is their mean; {rel.cite('eval_cap')})")
    mine = Decimal(made.total_cost_usd)
    gpus = sorted({p.gpu for p in other.pools}) if other is not None else []
    if other is None:
        statement = (f"{rel.label} can run this for ${mine:,.2f}; no plan any framework could "
                     "run meets the deadline and budget either")
    else:
        theirs = Decimal(other.total_cost_usd)
        if mine <= theirs:
            statement = (f"{rel.label} can run this for ${mine:,.2f}, the cheapest plan any "
                         f"framework could run (${theirs:,.2f}): the release costs nothing here")
        else:
            extra = mine - theirs
            why = "; ".join(reasons) if reasons else "the release's limits change the search"
            statement = (f"{rel.label} can run this for ${mine:,.2f}; the cheapest plan any "
                         f"framework could run is ${theirs:,.2f} ({other.layout} on "
                         f"{', '.join(gpus)}; +${extra:,.2f}, "
                         f"+{float(extra / theirs) * 100:.1f} % for {rel.label}), because: {why}")
    return FrameworkPrice(
        framework=rel.key, total_cost_usd=made.total_cost_usd,
        any_total_cost_usd=other.total_cost_usd if other is not None else None,
        any_layout=other.layout if other is not None else None,
        any_gpus=gpus,
        reasons=reasons, statement=statement)
