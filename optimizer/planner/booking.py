"""Capacity booked for the run in plans: capacity blocks and flex-start (schema 6).

A ``block`` (AWS Capacity Blocks for ML, GCP calendar reservations) is paid for whole units
covering the pool's held time, D: ``nodes × price × u·⌈D/u⌉``; ``flex_start`` (GCP DWS) is
billed as used but runs at most 7 days and starts after an expected wait, which the deadline
must absorb (D + wait ≤ deadline). Both are bookable only for a run with a start date
(``sla.start_after``), within the offer's booking window (:mod:`providers.blocks`).

How the plan is found:

1. **Real plans.** (a) The plan without booked offers, where in each pool the policy lets book
   an on-demand allocation is converted, in part or whole, to the booked offer of the same
   instance type when that is cheaper at the run's held time (the count that saves most among
   the offer's allowed counts). (b) The relaxation's plan (booked offers priced per held hour,
   without rounding, count steps, the 7-day limit or the wait), priced for real when its
   counts are sold and it meets the deadline (with the wait) and budget; converted as in (a).
2. **Objective cost: exact.** :func:`optimizer.planner.booking_exact.search` solves the
   subproblems (a cap on the run, a booked count per block offer) whose lower bound is below
   the best plan found; the status is ``optimal`` when its bound is reached (always, unless it
   stops after its maximum number of solves: then ``feasible`` with the gap, in a warning;
   with more subproblems than it lists, step 3's plans and bound apply).
3. **Objective time: not exact.** The relaxation re-solved with the run capped at 1–3 fewer
   whole units adds real plans; the bound is the relaxation's run time, and the plan is
   ``feasible`` with its gap when it does not reach it.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

from optimizer.core import clock
from optimizer.core.errors import InfeasibleError
from optimizer.plan.schema import Booking, Plan, Status, hours, usd
from optimizer.planner.booking_exact import search
from optimizer.planner.build import build_plan
from optimizer.planner.candidates import PoolOption, PoolSpec, filter_offers
from optimizer.planner.engine import Context, LayoutRun, prepare, run_hours, solve_runs
from optimizer.planner.explain import explain_plan
from optimizer.planner.plan_phases import rounding_cost
from optimizer.spec.project import ProjectSpec
from policies.model import Policy
from providers.base import BOOKED_TYPES, Catalog, Offer
from providers.blocks import allowed_counts, billed_hours, check_start, fits, units

BOOKING_SCHEMA = 6
"""The plan schema that added bookings (``optimizer.plan.schema``)."""


def booked_offers(spec: ProjectSpec, catalog: Catalog, policy: Policy | None) -> list[Offer]:
    """The catalog's block and flex-start offers this run may book: none without
    ``sla.start_after``; otherwise those placement, policy and buyability allow and whose
    booking window reaches the start."""
    start = spec.sla.start_after
    if start is None or not catalog.block_offers:
        return []
    placement = spec.placement
    if placement.providers:  # the spec's names were checked against the catalog's offers
        have = {o.provider for o in catalog.block_offers}
        keep = [x for x in placement.providers if x.lower() in have]
        if not keep:
            return []
        placement = placement.model_copy(update={"providers": keep})
    filt = filter_offers(placement, replace(catalog, offers=catalog.block_offers), policy)
    return check_start([o for o in filt.offers if o.capacity_type in BOOKED_TYPES], start,
                       clock.today())


@dataclass
class _Candidate:
    ctx: Context
    runs: list[LayoutRun]
    run: LayoutRun
    cost: float
    held: float
    wait: float


def _linear_cost(r: LayoutRun, chosen: dict[str, PoolOption], held: float) -> float:
    assert r.best is not None
    return held * sum(o.usd_per_hour for o in chosen.values()) + sum(
        o.egress_usd for o in chosen.values()) + float(r.cands.extra_cost(r.best.region, held))


def _convert(opt: PoolOption, pool: PoolSpec, booked: list[Offer], held: float,
             deadline: float | None, used: dict[str, int]) -> PoolOption:
    """``opt`` with the on-demand nodes whose booking saves most moved to a booked offer."""
    best: tuple[float, Offer, Offer, int] | None = None
    for o, n in opt.fill:
        if o.capacity_type != "on_demand":
            continue
        for b in booked:
            if b.capacity_type not in pool.capacity_types or \
                    (b.provider, b.region, b.instance_type) != (o.provider, o.region,
                                                               o.instance_type) or \
                    b.zone not in ("", o.zone) or not fits(b, held, deadline):
                continue
            billed = billed_hours(held, b.block_unit_hours) \
                if b.capacity_type == "block" and b.block_unit_hours else held
            room = (b.max_nodes or n) - used.get(b.key, 0)
            held_b = sum(k for x, k in opt.fill if x is b)  # one booking per offer and pool
            for total in allowed_counts(b):
                s = total - held_b
                if s <= 0 or s > min(n, room):
                    continue
                saving = s * (o.usd_per_hour * held - b.usd_per_hour * billed)
                if saving > 1e-9 and (best is None or saving > best[0] + 1e-9):
                    best = (saving, o, b, s)
    if best is None:
        return opt
    _, o, b, s = best
    used[b.key] = used.get(b.key, 0) + s
    fill = [(x, k - s if x is o else k + s if x is b else k) for x, k in opt.fill]
    fill = [(x, k) for x, k in fill if k > 0] + ([] if any(x is b for x, _ in fill)
                                                 else [(b, s)])
    return replace(opt, fill=tuple(fill),
                   usd_per_hour=opt.usd_per_hour + s * (b.usd_per_hour - o.usd_per_hour))


def _realisable(opt: PoolOption, held: float, deadline: float | None) -> bool:
    """Whether the option's booked nodes are counts their offers sell, for this run."""
    return all(n in allowed_counts(o) and fits(o, held, deadline)
               for o, n in opt.fill if o.capacity_type in BOOKED_TYPES)


def _repaired(opt: PoolOption, offers: list[Offer], used: dict[str, int]) -> PoolOption:
    """``opt`` with booked nodes in a count its offer does not sell split into the largest
    count it sells and on-demand nodes of the same instance type (same busy time: neither is
    preempted); unchanged when there is no such on-demand offer with room."""
    fill = list(opt.fill)
    for b, n in opt.fill:
        if b.capacity_type not in BOOKED_TYPES or n in allowed_counts(b):
            continue
        s = max((c for c in allowed_counts(b) if c < n), default=0)
        od = next((o for o in offers if o.capacity_type == "on_demand"
                   and (o.provider, o.region, o.instance_type) == (b.provider, b.region,
                                                                   b.instance_type)
                   and (o.max_nodes is None or o.max_nodes - used.get(o.key, 0) >= n - s)), None)
        if od is None:
            return opt
        used[od.key] = used.get(od.key, 0) + n - s
        fill = [(x, k) for x, k in fill if x is not b] + ([(b, s)] if s else []) + [(od, n - s)]
    if fill == list(opt.fill):
        return opt
    price = opt.usd_per_hour + sum(o.usd_per_hour * k for o, k in fill) - sum(
        o.usd_per_hour * k for o, k in opt.fill)
    return replace(opt, fill=tuple(fill), usd_per_hour=price)


def _candidate(ctx: Context, runs: list[LayoutRun], r: LayoutRun, booked: list[Offer],
               deadline: float | None, budget: float | None) -> _Candidate | None:
    assert r.solution is not None
    lay = r.cands.layout
    chosen = dict(r.solution.chosen)
    held = run_hours(lay.mode, chosen, lay.fill_fraction)
    used: dict[str, int] = {}  # nodes per offer, over the pools (held together)
    for o in chosen.values():
        for x, n in o.fill:
            used[x.key] = used.get(x.key, 0) + n
    chosen = {k: _repaired(o, ctx.offers, used) for k, o in chosen.items()}
    if not all(_realisable(o, held, deadline) for o in chosen.values()):
        return None
    pools = {p.name: p for p in lay.pools}
    chosen = {k: _convert(o, pools[k], booked, held, deadline, used) for k, o in chosen.items()}
    cost = _linear_cost(r, chosen, held) + sum(rounding_cost(o, held) for o in chosen.values())
    wait = max((x.wait_hours for o in chosen.values() for x, _ in o.fill
                if x.capacity_type == "flex_start"), default=0.0)
    if budget is not None and cost > budget + 0.005:
        return None
    if deadline is not None and held + wait > deadline * (1 + 1e-9):
        return None
    # the search's figure for the real plan (whole units, conversions): what the plan's own
    # pricing is cross-checked against
    run = replace(r, best=replace(r.best, usd=cost) if r.best is not None else None,
                  solution=replace(r.solution, chosen=chosen))
    return _Candidate(ctx, [run if x is r else x for x in runs], run, cost, held, wait)


def _solved(spec: ProjectSpec, catalog: Catalog, policy: Policy | None, objective: str,
            solver: str, explain: bool) -> tuple[Context, list[LayoutRun], list[LayoutRun]] | None:
    """The plan without booked offers (None when there is none)."""
    try:
        ctx = prepare(spec, catalog, policy)
        runs, solved = solve_runs(ctx, objective, solver, every_layout=explain)
    except InfeasibleError:
        return None
    return ctx, runs, solved


def plan_with_bookings(spec: ProjectSpec, catalog: Catalog, objective: str, solver: str,
                       explain: bool, timings: bool, policy: Policy | None) -> Plan | None:
    """The plan when the run may book capacity (see the module's docstring); None when it
    may not (no start date or no bookable offer): the ordinary plan applies."""
    booked = booked_offers(spec, catalog, policy)
    if not booked:
        return None
    start = time.perf_counter()
    deadline, budget = spec.sla.deadline_hours, spec.budget.max_usd
    # the relaxation: raises (naming what binds) when no plan exists even with booked
    # capacity at its hourly rate, and then none exists without it either
    ctx_r = prepare(spec, replace(catalog, offers=catalog.offers + tuple(booked)), policy)
    relaxed = (ctx_r, *solve_runs(ctx_r, objective, solver, every_layout=explain))
    plain = _solved(spec, catalog, policy, objective, solver, explain)
    found: list[_Candidate] = []

    def add(source) -> None:
        if source is not None:
            ctx, runs, solved = source
            found.extend(c for r in solved
                         if (c := _candidate(ctx, runs, r, booked, deadline, budget)) is not None)

    add(plain)
    add(relaxed)
    outcome = None
    if objective == "cost":
        outcome = search(spec, catalog, booked, policy, solver, explain,
                         min((c.cost for c in found), default=math.inf),
                         lambda ctx, runs, r: (c.cost, c) if (
                             c := _candidate(ctx, runs, r, [], deadline, budget)) else None)
    if outcome is not None:
        found += outcome.found  # type: ignore[arg-type]
    else:
        for source in _fewer_units(spec, catalog, booked, relaxed, policy, objective, solver,
                                   explain):
            add(source)
    if not found:
        raise InfeasibleError(
            "capacity blocks: the plan with booked capacity needs whole block units (or a "
            "flex-start wait) that break the deadline or budget, and no plan without them "
            "meets both; relax sla.deadline_hours or budget.max_usd, or give a start date "
            "with more booking choices")
    first = (lambda c: (round(c.cost, 9), round(c.held, 9))) if objective == "cost" else \
        (lambda c: (round(c.held + c.wait, 9), round(c.cost, 9)))
    win = min(found, key=first)
    bound = outcome.bound if outcome is not None else _bound(relaxed[1], plain, booked,
                                                              objective)
    value = win.cost if objective == "cost" else win.held + win.wait
    p = build_plan(win.ctx, win.runs, [win.run], objective, solver, start, timings)
    how = ("from the exact search's subproblems left unsolved (whole block units priced)"
           if outcome is not None else "from booked capacity priced per held hour")
    return _finish(p, win, booked, catalog, spec, objective, (bound, how), value, explain)


MAX_UNIT_SOLVES = 6
"""Extra relaxations solved with the run capped at fewer whole units (see _fewer_units)."""


def _fewer_units(spec: ProjectSpec, catalog: Catalog, booked: list[Offer], relaxed: tuple,
                 policy: Policy | None, objective: str, solver: str, explain: bool) -> list:
    """The relaxation re-solved with the run capped at 1, 2, 3 fewer whole units of each
    block offer than the relaxation's plan holds (at most :data:`MAX_UNIT_SOLVES`): a faster
    plan that fits in fewer units can be cheaper for real than the relaxation's own, which
    does not see its rounding. More real plans to choose from; the bound is unchanged."""
    if objective != "cost":
        return []
    runs = [r for r in relaxed[2] if r.solution is not None and r.solution.chosen]
    if not runs:
        return []
    held = min(run_hours(r.cands.layout.mode, r.solution.chosen, r.cands.layout.fill_fraction)
               for r in runs)
    caps = sorted({k * o.block_unit_hours for o in booked
                   if o.capacity_type == "block" and o.block_unit_hours
                   for k in range(max(1, units(held, o.block_unit_hours) - 3),
                                  units(held, o.block_unit_hours))}, reverse=True)
    deadline = spec.sla.deadline_hours
    out = []
    with_booked = replace(catalog, offers=catalog.offers + tuple(booked))
    for cap in caps[:MAX_UNIT_SOLVES]:
        if deadline is not None and cap >= deadline:
            continue
        capped = spec.model_copy(update={"sla": spec.sla.model_copy(update={
            "deadline_hours": cap})})
        got = _solved(capped, with_booked, policy, objective, solver, explain)
        if got is not None:  # the plan records the spec's own deadline, not the cap
            out.append((replace(got[0], spec=spec), got[1], got[2]))
    return out


def _bound(relaxed: list[LayoutRun], plain: tuple | None, booked: list[Offer],
           objective: str) -> float:
    """A lower bound on every real plan. Time: the relaxation's. Cost: a plan without booked
    nodes costs at least the plain optimum; one with them at least the relaxation's L and at
    least one unit of one block node (B·u; 0 when flex-start may be booked)."""
    bests = [r.best for r in relaxed if r.best is not None]
    if objective == "time":
        return min(b.run_hours for b in bests)
    low = min(b.usd for b in bests)
    fee = min((o.usd_per_hour * (o.block_unit_hours or 0.0) if o.capacity_type == "block"
               else 0.0) for o in booked)
    with_booked = max(low, fee)
    if plain is None:
        return with_booked
    plain_best = min(r.best.usd for r in plain[1] if r.best is not None)
    return min(plain_best, with_booked)


def _finish(p: Plan, win: _Candidate, booked: list[Offer], catalog: Catalog,
            spec: ProjectSpec, objective: str, bound_how: tuple[float, str], value: float,
            explain: bool) -> Plan:
    """The plan's bookings, status against the relaxation's bound, and explanation."""
    bookings = bookings_of(p, catalog, spec)
    bound, how = bound_how
    gap = max(0.0, value / bound - 1.0) if bound > 0 else 0.0
    warnings = list(p.warnings)
    status = p.status
    cross = p.solver.cross_check
    if gap > 1e-6 and abs(value - bound) > 0.005:
        status = Status.feasible
        cross = f"bound {bound:,.2f} {how}; the plan is within {gap:.2%} of it"
        warnings.append(f"with capacity blocks bookable the plan is within {gap:.2%} of a "
                        f"lower bound {how} (status feasible): a plan booking differently "
                        "may be cheaper by at most that")
    else:
        gap = 0.0
    for b in bookings:
        if b.wait_hours:
            warnings.append(f"flex-start: expected wait {b.wait_hours:g} h before pool {b.pool} "
                            f"starts (not billed); run + wait = "
                            f"{p.makespan_hours + b.wait_hours:.2f} h")
    solver = p.solver.model_copy(update={"status": status, "gap": round(gap, 9),
                                         "cross_check": cross})
    # bookings are schema 6; a plan with CPU pools is already 7
    p = p.model_copy(update={"schema_version": max(BOOKING_SCHEMA, p.schema_version)
                             if bookings else p.schema_version,
                             "bookings": bookings, "status": status, "solver": solver,
                             "warnings": warnings})
    if explain:
        ex = explain_plan(win.ctx, win.runs, p, objective)
        ex = ex.model_copy(update={"summary": ex.summary + [compare_line(b) for b in bookings]})
        p = p.model_copy(update={"explain": ex})
    return p


def compare_line(b: Booking) -> str:
    """The booking against the same nodes on demand for the held hours (explain)."""
    head = (f"booking: pool {b.pool} {b.nodes} x {b.instance_type} {b.capacity_type} "
            f"${b.cost_usd}")
    if b.capacity_type == "block":
        head += (f" for {b.units} x {b.unit_hours:g} h = {b.duration_hours:g} h "
                 f"({b.rounding_hours:.2f} h lost to rounding)")
    if b.on_demand_cost_usd is None:
        return head + "; no on-demand offer of this type to compare"
    saved = float(b.on_demand_cost_usd) - float(b.cost_usd)
    return (head + f" vs ${b.on_demand_cost_usd} on demand for the held {b.held_hours:.2f} h: "
            f"{'saves' if saved >= 0 else 'costs'} ${abs(saved):,.2f}")


def bookings_of(p: Plan, catalog: Catalog, spec: ProjectSpec) -> list[Booking]:
    """One booking per pool allocation of a booked capacity type."""
    od = {(o.provider, o.region, o.instance_type): o.usd_per_hour for o in catalog.offers
          if o.capacity_type == "on_demand" and not o.zone}
    start = spec.sla.start_after.isoformat() if spec.sla.start_after else ""
    units_by = {(o.provider, o.region, o.zone, o.instance_type, o.capacity_type): o
                for o in catalog.block_offers}
    out: list[Booking] = []
    for pool in p.pools:
        for a in pool.allocations:
            if a.capacity_type not in BOOKED_TYPES:
                continue
            offer = units_by[(a.provider, a.region, a.zone, a.instance_type, a.capacity_type)]
            held = pool.held_hours
            unit = offer.block_unit_hours or 0.0
            duration = billed_hours(held, unit) if a.capacity_type == "block" else held
            price = od.get((a.provider, a.region, a.instance_type))
            out.append(Booking(
                pool=pool.name, capacity_type=a.capacity_type, provider=a.provider,
                region=a.region, zone=a.zone, instance_type=a.instance_type, nodes=a.nodes,
                usd_per_hour=a.usd_per_hour, unit_hours=unit,
                units=units(held, unit) if a.capacity_type == "block" else 0,
                duration_hours=hours(duration), held_hours=hours(held),
                rounding_hours=hours(duration - held),
                cost_usd=usd(a.nodes * a.usd_per_hour * duration),
                upfront=a.capacity_type == "block", wait_hours=offer.wait_hours,
                earliest_start=start, on_demand_usd_per_hour=price,
                on_demand_cost_usd=usd(a.nodes * price * held) if price is not None else None,
                how_to_book=how_to_book(a.provider, a.region, a.instance_type, a.nodes,
                                        a.capacity_type, duration, start),
            ))
    return out


def how_to_book(provider: str, region: str, itype: str, nodes: int, kind: str,
                duration: float, start: str) -> str:
    """The exact call that books it (AWS: find the offering, then purchase it)."""
    h = round(duration) if kind == "block" else math.ceil(duration - 1e-9)  # never short
    if provider == "aws" and kind == "block":
        return (f"aws ec2 describe-capacity-block-offerings --region {region} --instance-type "
                f"{itype} --instance-count {nodes} --capacity-duration-hours {h} "
                f"--start-date-range {start}T00:00:00Z; then aws ec2 purchase-capacity-block "
                f"--region {region} --capacity-block-offering-id <the cheapest offering's "
                "CapacityBlockOfferingId> --instance-platform Linux/UNIX")
    if kind == "flex_start":
        return (f"gcloud compute instances create <name> --zone <a zone of {region}> "
                f"--machine-type {itype} --provisioning-model FLEX_START --max-run-duration "
                f"{h}h --instance-termination-action DELETE (x {nodes}; or a GKE node pool "
                "with flex-start / queued provisioning: ptplan render)")
    return (f"{provider} calendar reservation of {nodes} x {itype} in {region} for {h} h "
            f"from {start} (GCP: a future reservation in calendar mode)")
