"""``ptplan check CAMPAIGN.json``: re-check a campaign from the file alone: every stage's plan
by the plan verifier, the schedule (each stage starts after the stages it reads, ends at start
+ its plan's makespan, by the deadline; the makespan is the last end), the hand-overs'
arithmetic (storage GB × $/GB-month × held hours / 730 with the tier's minimum; egress GB ×
$/GB on the path between the plans' regions) and the totals and budget."""

from __future__ import annotations

from typing import Any

from ptplan.costs.network import path_between
from ptplan.costs.storage import HOURS_PER_MONTH
from ptplan.planfile.schema import Plan
from ptplan.planfile.verify import verify_plan

TOL = 1e-6


def _close(a: float, b: float, cents: bool = False) -> bool:
    return abs(a - b) <= (0.011 if cents else TOL * max(1.0, abs(a), abs(b)))


def stage_spec_problems(stage: dict[str, Any]) -> list[str]:
    """The stage's plan against its spec (when the spec file is there), the spec's deadline
    being the one the campaign gave the stage (its frontier point's)."""
    from pathlib import Path

    from ptplan.planfile.verify import verify_against_spec
    from ptplan.spec.project import load_spec

    if not Path(stage["spec"]).is_file():
        return []
    p = Plan.model_validate(stage["plan"])
    spec = load_spec(stage["spec"])
    spec = spec.model_copy(update={"sla": spec.sla.model_copy(
        update={"deadline_hours": p.deadline_hours})})
    return [f"stage {stage['name']}: {x}" for x in verify_against_spec(p, spec)]


def check_campaign(r: dict[str, Any], with_specs: bool = True) -> list[str]:
    v: list[str] = []
    plans: dict[str, Plan] = {}
    ends: dict[str, float] = {}
    for s in r["stages"]:
        p = Plan.model_validate(s["plan"])
        plans[s["name"]] = p
        v += [f"stage {s['name']}: {x}" for x in verify_plan(p)]
        if with_specs:
            v += stage_spec_problems(s)
        end = s["start_hours"] + p.makespan_hours
        if not _close(end, s["end_hours"]):
            v.append(f"schedule: stage {s['name']} ends at {s['end_hours']} h, not start "
                     f"{s['start_hours']} + makespan {p.makespan_hours}")
        ends[s["name"]] = s["end_hours"]
        if s["end_hours"] > r["deadline_hours"] * (1 + TOL):
            v.append(f"deadline: stage {s['name']} ends at {s['end_hours']:.3f} h, after the "
                     f"campaign deadline {r['deadline_hours']} h")
    for s in r["stages"]:
        for u in s["after"]:
            if u not in ends:
                v.append(f"schedule: stage {s['name']} runs after unknown stage {u!r}")
            elif s["start_hours"] < ends[u] * (1 - TOL) - TOL:
                v.append(f"schedule: stage {s['name']} starts at {s['start_hours']:.3f} h, "
                         f"before {u} ends ({ends[u]:.3f} h)")
    if ends and not _close(max(ends.values()), r["makespan_hours"]):
        v.append(f"schedule: makespan {r['makespan_hours']} h is not the last end "
                 f"{max(ends.values())} h")
    hand = 0.0
    for st in r["stored"]:
        want = st["gb"] * st["usd_per_gb_month"] * max(st["hold_hours"], st["min_days"] * 24) \
            / HOURS_PER_MONTH
        if not _close(want, st["cost_usd"], cents=True):
            v.append(f"handover: storage of {st['stage']}'s {st['what']} costs "
                     f"${st['cost_usd']}, not ${want:.2f}")
        made = plans.get(st["stage"])
        if made is not None and (made.provider, made.region) != (st["provider"], st["region"]):
            v.append(f"handover: {st['stage']}'s output is stored in {st['provider']}:"
                     f"{st['region']}, not where its plan runs ({made.provider}:{made.region})")
        hand += st["cost_usd"]
    for h in r["handovers"]:
        src, dst = plans.get(h["from"]), plans.get(h["to"])
        if src is None or dst is None:
            v.append(f"handover: {h['from']} -> {h['to']} names an unknown stage")
            continue
        path = path_between((src.provider, src.region, ""), (dst.provider, dst.region, ""))
        if path != h["path"]:
            v.append(f"handover: {h['from']} -> {h['to']} goes {path}, not {h['path']}")
        if not _close(h["gb"] * h["usd_per_gb"], h["cost_usd"], cents=True):
            v.append(f"handover: {h['from']} -> {h['to']} egress costs ${h['cost_usd']}, not "
                     f"{h['gb']} GB x ${h['usd_per_gb']}/GB")
        hand += h["cost_usd"]
    stages = sum(float(p.total_cost_usd) for p in plans.values())
    if not _close(stages, r["stages_cost_usd"], cents=True):
        v.append(f"totals: stages cost ${r['stages_cost_usd']}, not the plans' ${stages:.2f}")
    if not _close(hand, r["handover_cost_usd"], cents=True):
        v.append(f"totals: hand-overs cost ${r['handover_cost_usd']}, not ${hand:.2f}")
    if not _close(r["stages_cost_usd"] + r["handover_cost_usd"], r["total_cost_usd"], True):
        v.append(f"totals: total ${r['total_cost_usd']} is not stages + hand-overs")
    if r["budget_usd"] is not None and r["total_cost_usd"] > r["budget_usd"] + 0.005:
        v.append(f"budget: total ${r['total_cost_usd']} exceeds the campaign budget "
                 f"${r['budget_usd']}")
    return v
