"""Capacity booked for the run in plans: capacity blocks and flex-start (schema 6).

A ``block`` (AWS Capacity Blocks for ML, GCP calendar reservations) is paid for whole units
covering the pool's held time, D: ``nodes × price × u·⌈D/u⌉``; ``flex_start`` (GCP DWS) is
billed as used but runs at most 7 days and starts after an expected wait, which the deadline
must absorb (D + wait ≤ deadline). Both are bookable only for a run with a start date
(``sla.start_after``), within the offer's booking window (:mod:`ptplan.providers.blocks`).

How the plan is found:

1. **Real plans.** (a) The plan without booked offers, where in each pool the policy lets book
   an on-demand allocation is converted, in part or whole, to the booked offer of the same
   instance type when that is cheaper at the run's held time (the count that saves most among
   the offer's allowed counts). (b) The relaxation's plan (booked offers priced per held hour,
   without rounding, count steps, the 7-day limit or the wait), priced for real when its
   counts are sold and it meets the deadline (with the wait) and budget; converted as in (a).
2. **Objective cost: exact.** :func:`ptplan.planner.booking.exact.search` solves the
   subproblems (a cap on the run, a booked count per block offer) whose lower bound is below
   the best plan found; the status is ``optimal`` when its bound is reached (always, unless it
   stops after its maximum number of solves: then ``feasible`` with the gap, in a warning;
   with more subproblems than it lists, the relaxation re-solved with the run capped at 1–3
   fewer whole units adds real plans and the relaxation's bound applies).
3. **Objective time: exact.** :func:`ptplan.planner.booking.fastest.fastest` finds the least
   time (run + flex-start wait) over the same subproblems with a wait threshold, then the
   cost search at that time finds the cheapest plan taking it (the engine's order).

The subproblems share their pool frontiers (:mod:`ptplan.planner.booking.contexts`) and
are solved with the layouts that cannot win pruned; the winner's is solved again with every
layout when the plan is explained.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

from ptplan.core import clock
from ptplan.core.errors import InfeasibleError
from ptplan.planfile.schema import Plan
from ptplan.planner.assembly.build import build_plan
from ptplan.planner.assembly.phases import rounding_cost
from ptplan.planner.booking.contexts import Contexts
from ptplan.planner.booking.exact import Outcome, Sub, _priced, search, solve
from ptplan.planner.booking.fastest import TimeOutcome, fastest
from ptplan.planner.booking.items import finish
from ptplan.planner.candidates import PoolOption, PoolSpec, filter_offers
from ptplan.planner.search.engine import Context, LayoutRun, run_hours, solve_runs
from ptplan.policies.model import Policy
from ptplan.providers.base import BOOKED_TYPES, Catalog, Offer
from ptplan.providers.blocks import allowed_counts, billed_hours, check_start, fits, units
from ptplan.spec.project import ProjectSpec


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
    filt = filter_offers(placement, replace(catalog, offers=catalog.block_offers), policy,
                         spec.release)
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


def _solved(contexts: Contexts, spec: ProjectSpec, extra: list[Offer], objective: str,
            solver: str, explain: bool, diagnose: bool = False
            ) -> tuple[Context, list[LayoutRun], list[LayoutRun]] | None:
    """The plan on the catalog plus ``extra`` under ``spec``'s deadline and budget (None when
    there is none; with ``diagnose``, raises naming what binds)."""
    ctx = replace(contexts.get(extra), spec=spec)
    try:
        runs, solved = solve_runs(ctx, objective, solver, every_layout=explain)
    except InfeasibleError:
        if diagnose:
            raise
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
    contexts = Contexts(spec, catalog, policy, booked)
    plain = _solved(contexts, spec, [], objective, solver, explain)
    # the relaxation (booked offers priced per held hour), in their regions: its plan is a
    # candidate; solved again with every layout if it wins and is explained
    whole = Sub(tuple(booked), deadline, budget, objective)
    relaxed = solve(contexts, spec, whole, solver)
    if relaxed is None and plain is None:
        # no plan even with booked capacity at its hourly rate: raises naming what binds
        _solved(contexts, spec, booked, objective, solver, explain, diagnose=True)
        raise InfeasibleError("no plan meets the deadline and budget, with or without "
                              "booked capacity")
    found: list[tuple[_Candidate, Sub | None]] = []

    def add(source, sub: Sub | None = None) -> None:
        if source is not None:
            ctx, runs, solved = source
            found.extend((c, sub) for r in solved
                         if (c := _candidate(ctx, runs, r, booked, deadline, budget)) is not None)

    def evaluate(limit: float | None, key):
        def real(ctx, runs, r):
            c = _candidate(replace(ctx, spec=spec), runs, r, [], limit, budget)
            return (key(c), c) if c is not None else None
        return real

    add(plain)
    add(relaxed, whole)
    notes: list[str] = []
    outcome: Outcome | TimeOutcome | None = None
    if objective == "cost":
        outcome = search(contexts, spec, booked, solver,
                         min((c.cost for c, _ in found), default=math.inf),
                         evaluate(deadline, lambda c: c.cost))
    else:
        outcome = fastest(contexts, spec, booked, solver,
                          min((c.held + c.wait for c, _ in found), default=math.inf),
                          evaluate(deadline, lambda c: c.held + c.wait))
    if outcome is not None:
        found += outcome.found  # type: ignore[arg-type]
        if isinstance(outcome, TimeOutcome) and math.isfinite(outcome.best):
            # phase 2: the cheapest plan taking the least time (the engine's tolerance)
            t = outcome.best * (1 + TIME_TIE) + TIME_TIE
            at_t = spec.model_copy(update={"sla": spec.sla.model_copy(update={
                "deadline_hours": t if deadline is None else min(deadline, t)})})
            at_best = min((c.cost for c, _ in found if c.held + c.wait <= t), default=math.inf)
            cheap = search(contexts, at_t, booked, solver, at_best,
                           evaluate(at_t.sla.deadline_hours, lambda c: c.cost))
            if cheap is not None:
                found += cheap.found  # type: ignore[arg-type]
            best_cost = min((c.cost for c, _ in found if c.held + c.wait <= t), default=math.inf)
            if cheap is None or cheap.bound < best_cost - 0.005:
                notes.append("capacity blocks: the least time is proven, but the search for the "
                             "cheapest plan taking it stopped early; a plan of the same time "
                             "may be cheaper")
    else:
        for source in _fewer_units(contexts, spec, booked, relaxed, objective, solver, explain):
            add(source)
    if not found:
        raise InfeasibleError(
            "capacity blocks: the plan with booked capacity needs whole block units (or a "
            "flex-start wait) that break the deadline or budget, and no plan without them "
            "meets both; relax sla.deadline_hours or budget.max_usd, or give a start date "
            "with more booking choices")
    win, sub = _winner(found, objective)
    if explain and sub is not None:  # the explanation lists every layout's own optimum
        win = _with_every_layout(contexts, spec, sub, solver, win,
                                 evaluate(deadline, lambda c: c.cost))
    bound = outcome.bound if outcome is not None else _bound(
        relaxed[1] if relaxed is not None else [], plain, booked, objective)
    value = win.cost if objective == "cost" else win.held + win.wait
    p = build_plan(win.ctx, win.runs, [win.run], objective, solver, start, timings)
    how = ("from the exact search's subproblems left unsolved (whole block units priced)"
           if outcome is not None else "from booked capacity priced per held hour")
    return finish(p, (win.ctx, win.runs), catalog, spec, objective, (bound, how), value,
                  explain, notes)


TIME_TIE = 1e-9
"""Run times within this fraction tie (the MILP's lexicographic tolerance,
:mod:`ptplan.planner.search.milp`): the cheaper plan wins."""


def _winner(found: list[tuple[_Candidate, Sub | None]], objective: str
            ) -> tuple[_Candidate, Sub | None]:
    """The cheapest plan (then the shortest); with objective time, the cheapest of the plans
    within :data:`TIME_TIE` of the least time."""
    if objective == "cost":
        return min(found, key=lambda x: (round(x[0].cost, 9), round(x[0].held, 9)))
    t = min(c.held + c.wait for c, _ in found)
    found = [x for x in found if x[0].held + x[0].wait <= t * (1 + TIME_TIE) + TIME_TIE]
    return min(found, key=lambda x: (round(x[0].cost, 9), round(x[0].held + x[0].wait, 9)))


def _with_every_layout(contexts: Contexts, spec: ProjectSpec, sub: Sub, solver: str,
                       win: _Candidate, evaluate) -> _Candidate:
    """The winner's subproblem solved again with every layout (the subproblems are solved
    with the others pruned): the same plan, with each layout's own optimum for the
    explanation's alternatives; the winner as it was if the plan differs."""
    got = solve(contexts, spec, sub, solver, every_layout=True)
    if got is None:
        return win
    ctx, runs, solved = got
    name = win.run.cands.layout.name
    blocks = [o for o in contexts.booked if o.capacity_type == "block"]
    for r in solved:
        if r.cands.layout.name != name:
            continue
        priced = _priced(r, blocks)
        real = evaluate(ctx, [priced if x is r else x for x in runs], priced)
        if real is not None and abs(real[1].cost - win.cost) <= 0.005 and \
                abs(real[1].held - win.held) <= 1e-6 * max(1.0, win.held):
            return real[1]
    return win


MAX_UNIT_SOLVES = 6
"""Extra relaxations solved with the run capped at fewer whole units (see _fewer_units)."""


def _fewer_units(contexts: Contexts, spec: ProjectSpec, booked: list[Offer],
                 relaxed: tuple | None,
                 objective: str, solver: str, explain: bool) -> list:
    """The relaxation re-solved with the run capped at 1, 2, 3 fewer whole units of each
    block offer than the relaxation's plan holds (at most :data:`MAX_UNIT_SOLVES`): a faster
    plan that fits in fewer units can be cheaper for real than the relaxation's own, which
    does not see its rounding. More real plans to choose from; the bound is unchanged. Only
    when the exact search has too many subproblems to list."""
    if objective != "cost" or relaxed is None:
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
    for cap in caps[:MAX_UNIT_SOLVES]:
        if deadline is not None and cap >= deadline:
            continue
        capped = spec.model_copy(update={"sla": spec.sla.model_copy(update={
            "deadline_hours": cap})})
        got = _solved(contexts, capped, booked, objective, solver, explain)
        if got is not None:  # the plan records the spec's own deadline, not the cap
            out.append((replace(got[0], spec=spec), got[1], got[2]))
    return out


def _bound(relaxed: list[LayoutRun], plain: tuple | None, booked: list[Offer],
           objective: str) -> float:
    """A lower bound on every real plan. Time: the least of the relaxation's and the plain
    plan's. Cost: a plan without booked nodes costs at least the plain optimum; one with them
    at least the relaxation's L and at least one unit of one block node (B·u; 0 when
    flex-start may be booked)."""
    bests = [r.best for r in relaxed if r.best is not None]
    plain_bests = [r.best for r in plain[1] if r.best is not None] if plain is not None else []
    if objective == "time":  # the relaxation is searched in the booked offers' regions
        return min(b.run_hours for b in bests + plain_bests)
    if not bests:
        return min(b.usd for b in plain_bests)
    low = min(b.usd for b in bests)
    fee = min((o.usd_per_hour * (o.block_unit_hours or 0.0) if o.capacity_type == "block"
               else 0.0) for o in booked)
    with_booked = max(low, fee)
    if plain is None:
        return with_booked
    return min(min(b.usd for b in plain_bests), with_booked)
