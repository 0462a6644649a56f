"""Plan a campaign: each stage's cost–time frontier (verified plans at a grid of deadlines, as
``ptplan pareto`` makes them), the hand-overs priced for every pair of points, one MILP
(:mod:`ptplan.campaign.milp`) choosing a point per stage, and each chosen point planned again
as a verified plan. The report (JSON) holds every stage's plan and the campaign's totals."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ptplan.campaign.handover import Pricer, output
from ptplan.campaign.milp import Point, choose, longest_path
from ptplan.campaign.model import order, parse_campaign, stage_path
from ptplan.core.errors import InfeasibleError, PlannerError
from ptplan.core.yamlio import read_mapping
from ptplan.planfile.schema import Plan
from ptplan.providers.base import Catalog
from ptplan.spec.project import ProjectSpec, load_spec

CAMPAIGN_SCHEMA_VERSION = 1
Frontier = Callable[[ProjectSpec, int], list[dict[str, Any]]]
PlanAt = Callable[[ProjectSpec, float], Plan]


def money(v: float) -> float:
    return round(v + 0.0, 2)


def plan_campaign(path: str | Path, catalog: Catalog, frontier: Frontier, plan_at: PlanAt,
                  solver: str = "highs",
                  progress: Callable[[int, int, str], None] | None = None) -> dict[str, Any]:
    c = parse_campaign(read_mapping(path, "campaign"), path)
    names = order(c)
    by = {s.name: s for s in c.stages}
    after = {s.name: list(s.after) for s in c.stages}
    consumers = {n: [s.name for s in c.stages if n in s.after] for n in names}
    specs = {n: load_spec(str(stage_path(path, by[n]))) for n in names}
    _data_sources(path, c, names, specs)
    fronts: dict[str, list[dict[str, Any]]] = {}
    for k, n in enumerate(names):
        if progress is not None:
            progress(k, len(names) + 1, f"campaign: frontier of {n}")
        try:
            fronts[n] = frontier(specs[n], c.points)
        except PlannerError as exc:
            raise type(exc)(f"campaign stage {n!r}: {exc}") from None
    points = {n: [Point(float(r["total_cost_usd"]), float(r["makespan_hours"]))
                  for r in fronts[n]] for n in names}
    outs = {n: output(specs[n]) for n in names}
    pricer = Pricer(catalog, c.deadline_hours)

    def place(n: str, i: int) -> tuple[str, str]:
        return fronts[n][i]["provider"], fronts[n][i]["region"]

    def own(n: str, i: int) -> float:
        return pricer.storage(*place(n, i), outs[n][1]).cost if consumers[n] else 0.0

    def pair(u: str, i: int, v: str, j: int) -> float:
        return pricer.egress(place(u, i), place(v, j), outs[u][1]).cost

    fastest = {n: min(p.hours for p in points[n]) for n in names}
    need, path_, _ = longest_path(names, after, fastest)
    if need > c.deadline_hours:
        parts = " + ".join(f"{n} {fastest[n]:.2f} h" for n in path_)
        raise InfeasibleError(
            f"campaign {c.name}: deadline {c.deadline_hours:g} h cannot be met: the stage path "
            f"{' -> '.join(path_)} needs {need:.2f} h at its fastest points ({parts}); raise "
            f"deadline_hours to at least {need:.2f} or speed up those stages")
    if progress is not None:
        progress(len(names), len(names) + 1, "campaign: choosing points")
    ch = choose(names, after, points, own, pair, c.deadline_hours, c.budget_usd, solver)
    if ch.status == "infeasible":
        cheapest = choose(names, after, points, own, pair, c.deadline_hours, None, solver)
        raise InfeasibleError(
            f"campaign {c.name}: budget ${c.budget_usd:,.2f} cannot be met: the cheapest "
            f"campaign within the {c.deadline_hours:g} h deadline costs ${cheapest.cost:,.2f}; "
            "raise budget_usd or relax the deadline")
    if ch.status not in ("optimal", "time_limit"):
        raise PlannerError(f"campaign {c.name}: the solver failed ({ch.status})")
    plans = {}
    for n in names:
        p = plan_at(specs[n], points[n][ch.pick[n]].hours)
        plans[n] = p
    hours = {n: plans[n].makespan_hours for n in names}
    span, crit, start = longest_path(names, after, hours)
    if progress is not None:
        progress(len(names) + 1, len(names) + 1, "campaign: done")
    return report(c, names, specs, path, fronts, ch.pick, plans, start, span, crit, outs,
                  consumers, pricer, ch.status, solver)


def _ancestors(after: dict[str, list[str]], n: str) -> set[str]:
    out: set[str] = set()
    todo = list(after.get(n, []))
    while todo:
        u = todo.pop()
        if u not in out:
            out.add(u)
            todo += after.get(u, [])
    return out


def _data_sources(path: str | Path, c: Any, names: list[str],
                  specs: dict[str, ProjectSpec]) -> None:
    """A stage whose spec names the job that generated its data (``data.generated_by``) must
    run after that job's stage, so that its cost is in the campaign's totals."""
    import os

    from ptplan.core.errors import InputError

    by_path = {os.path.realpath(stage_path(path, s)): s.name for s in c.stages}
    after = {s.name: list(s.after) for s in c.stages}
    for s in c.stages:
        ref = specs[s.name].data.generated_by
        if ref is None:
            continue
        src = os.path.realpath(stage_path(path, s).parent / ref)
        gen = by_path.get(src)
        if gen is None:
            raise InputError(f"campaign {c.name}: stage {s.name!r} reads data generated by "
                             f"{ref!r}, which is no stage of the campaign; add it as a stage "
                             f"(and {s.name} after it) so that its cost counts")
        if gen not in _ancestors(after, s.name):
            raise InputError(f"campaign {c.name}: stage {s.name!r} reads data generated by "
                             f"stage {gen!r} but does not run after it; add after: [{gen}]")


def report(c: Any, names: list[str], specs: dict[str, ProjectSpec], path: str | Path,
           fronts: dict[str, list[dict[str, Any]]], pick: dict[str, int],
           plans: dict[str, Plan], start: dict[str, float], span: float, crit: list[str],
           outs: dict[str, tuple[str, float]], consumers: dict[str, list[str]],
           pricer: Pricer, status: str, solver: str) -> dict[str, Any]:
    by = {s.name: s for s in c.stages}
    stages: list[dict[str, Any]] = []
    stored: list[dict[str, Any]] = []
    moves: list[dict[str, Any]] = []
    for n in names:
        p = plans[n]
        stages.append({
            "name": n, "spec": str(stage_path(path, by[n])), "method": specs[n].method,
            "after": list(by[n].after), "start_hours": start[n],
            "end_hours": start[n] + p.makespan_hours, "point": pick[n],
            "frontier": [{"total_cost_usd": r["total_cost_usd"],
                          "makespan_hours": r["makespan_hours"], "provider": r["provider"],
                          "region": r["region"]} for r in fronts[n]],
            "output": {"what": outs[n][0], "gb": outs[n][1]},
            "plan": json.loads(p.to_json())})
        if consumers[n]:
            st = pricer.storage(p.provider, p.region, outs[n][1])
            stored.append({"stage": n, "what": outs[n][0], "gb": outs[n][1],
                           "provider": p.provider, "region": p.region, "tier": st.tier,
                           "usd_per_gb_month": st.usd_per_gb_month, "min_days": st.min_days,
                           "hold_hours": pricer.hold_hours, "cost_usd": money(st.cost)})
        for v in consumers[n]:
            q = plans[v]
            eg = pricer.egress((p.provider, p.region), (q.provider, q.region), outs[n][1])
            moves.append({"from": n, "to": v, "what": outs[n][0], "gb": outs[n][1],
                          "src": {"provider": p.provider, "region": p.region},
                          "dst": {"provider": q.provider, "region": q.region},
                          "path": eg.path, "usd_per_gb": eg.usd_per_gb,
                          "cost_usd": money(eg.cost), "note": eg.note})
    stage_cost = sum(float(plans[n].total_cost_usd) for n in names)
    hand = sum(float(x["cost_usd"]) for x in stored) + sum(float(x["cost_usd"]) for x in moves)
    return {
        "campaign_schema_version": CAMPAIGN_SCHEMA_VERSION, "kind": "campaign",
        "name": c.name, "deadline_hours": c.deadline_hours, "budget_usd": c.budget_usd,
        "solver": {"name": solver, "status": status},
        "stages": stages, "stored": stored, "handovers": moves,
        "critical_path": crit, "makespan_hours": span,
        "stages_cost_usd": money(stage_cost), "handover_cost_usd": money(hand),
        "total_cost_usd": money(stage_cost + hand),
        "note": "each stage's plan is the verified plan of its chosen frontier point; "
                "hand-overs: outputs stored at the producer's region until the deadline and "
                "copied to each consumer's region (egress)",
    }
