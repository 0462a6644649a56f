"""The plan's expected cumulative cost and the actual bill beside it.

Planned cumulative cost ``t`` hours after the run starts (docs/spend.md):

    P(t) = Σ_allocations nodes · usd_per_hour · min(t, hours)          (compute, every pool)
         + Σ_pools disk_usd_per_hour · min(t, held_hours)                (boot disks)
         + (storage_cost_usd + network_cost_usd) · min(t, makespan) / makespan

so ``P(makespan)`` is the plan's total (up to the cents each item was rounded to). The run
starts at the first billing period with a cost (or ``--since`` when ``--start`` says so);
``t`` of a period is the hours from that start to the period's end (or to the pull's
``as_of`` for a period not over yet). Variance = actual − planned
(positive: over plan).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from ptplan.planfile.schema import Allocation, Plan, PoolPlan
from ptplan.spend.bill import PERIOD_HOURS, BillPull, iso, parse_instant

GroupKey = Callable[[PoolPlan, Allocation], str]
OTHER = "storage+network"


def planned_cumulative(plan: Plan, hours: float) -> float:
    t = max(0.0, hours)
    compute = sum(a.nodes * a.usd_per_hour * min(t, a.hours) for p in plan.pools
                  for a in p.allocations)
    disks = sum(p.disk_usd_per_hour * min(t, p.held_hours) for p in plan.pools)
    other = float(plan.storage_cost_usd) + float(plan.network_cost_usd)
    span = plan.makespan_hours
    return compute + disks + (other * min(t, span) / span if span > 0 else other)


def planned_by_group(plan: Plan, hours: float, key: GroupKey) -> dict[str, float]:
    t = max(0.0, hours)
    out: dict[str, float] = {}
    for p in plan.pools:
        for a in p.allocations:
            k = key(p, a)
            out[k] = out.get(k, 0.0) + a.nodes * a.usd_per_hour * min(t, a.hours)
        nodes = sum(a.nodes for a in p.allocations) or 1
        for a in p.allocations:  # disks follow their nodes
            k = key(p, a)
            out[k] += p.disk_usd_per_hour * min(t, p.held_hours) * a.nodes / nodes
    other = float(plan.storage_cost_usd) + float(plan.network_cost_usd)
    if other:
        span = plan.makespan_hours
        out[OTHER] = other * min(t, span) / span if span > 0 else other
    return out


def _grid(pull: BillPull, t0: dt.datetime | None, first: str | None, as_of: dt.datetime
          ) -> list[tuple[dt.datetime, dt.datetime]]:
    """Every billing period from the one holding the run's start (or its first cost) to the
    end of the window or the time of the pull: periods without cost count as 0, so a run
    that stopped shows a flat curve and no burn."""
    if t0 is None:
        return []
    step = dt.timedelta(hours=PERIOD_HOURS[pull.by])
    starts = [t0] + ([parse_instant(first, "start", "hour")] if first else [])
    at = parse_instant(iso(min(starts)), "start", pull.by)
    end = min(parse_instant(pull.until, "until", "hour"), as_of)
    out = []
    while at < end:
        out.append((at, at + step))
        at += step
    return out


def _pct(variance: float, planned: float) -> float | None:
    return round(100.0 * variance / planned, 2) if planned > 0 else None


def spend_report(plan: Plan, pull: BillPull, key: GroupKey, start: str | None = None
                 ) -> dict[str, Any]:
    """Per period: actual, cumulative actual, planned cumulative, variance; per group and
    purchase type: the actual total beside the plan's share at the same hour."""
    by_start: dict[str, float] = {}
    for r in pull.rows:
        by_start[r.start] = by_start.get(r.start, 0.0) + r.usd
    first = next((s for s in sorted(by_start) if by_start[s] > 0), None)
    run_start = start or first
    out_periods: list[dict[str, Any]] = []
    cum = 0.0
    hours = 0.0
    t0 = parse_instant(run_start, "start", "hour") if run_start else None
    as_of = dt.datetime.fromisoformat(pull.as_of.replace("Z", "+00:00"))
    for s, e in _grid(pull, t0, first, as_of):
        cum += by_start.get(iso(s), 0.0)
        end = min(e, as_of)  # a period not over yet counts to the time of the pull
        hours = max(0.0, (end - t0).total_seconds() / 3600) if t0 else 0.0
        planned = planned_cumulative(plan, hours) if t0 else 0.0
        out_periods.append({
            "start": iso(s), "end": iso(e), "hours": round(hours, 4),
            "actual_usd": round(by_start.get(iso(s), 0.0), 2),
            "actual_cumulative_usd": round(cum, 2), "planned_cumulative_usd": round(planned, 2),
            "variance_usd": round(cum - planned, 2), "variance_pct": _pct(cum - planned,
                                                                          planned)})
    planned_total = planned_cumulative(plan, hours) if t0 else 0.0
    groups: dict[str, dict[str, float]] = {}
    for r in pull.rows:
        groups.setdefault(r.group, {})
        groups[r.group][r.purchase_type] = groups[r.group].get(r.purchase_type, 0.0) + r.usd
    plan_groups = planned_by_group(plan, hours, key) if t0 else {}
    out_groups = [{"group": g or "(untagged)",
                   "actual_usd": round(float(sum(groups.get(g, {}).values())), 2),
                   "planned_usd": round(plan_groups.get(g, 0.0), 2),
                   "by_purchase_type": {k: round(v, 2)
                                        for k, v in sorted(groups.get(g, {}).items())}}
                  for g in sorted(set(groups) | set(plan_groups))]
    return {
        "provider": pull.provider, "source": pull.source, "as_of": pull.as_of,
        "estimated": pull.estimated, "by": pull.by, "group_by": pull.group_key,
        "tags": dict(sorted(pull.tags.items())), "since": pull.since, "until": pull.until,
        "run_start": run_start, "hours": round(hours, 4),
        "actual_usd": round(cum, 2), "planned_usd": round(planned_total, 2),
        "variance_usd": round(cum - planned_total, 2),
        "variance_pct": _pct(cum - planned_total, planned_total),
        "plan_total_usd": plan.total_cost_usd, "plan_makespan_hours": round(
            plan.makespan_hours, 4), "budget_usd": plan.budget_usd,
        "budget_warn_usd": plan.budget_warn_usd, "budget_stop_usd": plan.budget_stop_usd,
        "periods": out_periods, "groups": out_groups}
