"""The exact search for plans that book capacity blocks (objective ``cost``).

A block node is billed for whole units, ``price × u·⌈H/u⌉`` for a run held H hours: a fixed
sum once the number of units is known, not a rate. The search splits the plans into
subproblems (C, s): a *cap* C and a booked count s_b per block offer b (0 or a count the offer
sells). In subproblem (C, s) the run is capped at min(C, deadline), block b's nodes are free
per hour with at most s_b of them, and the plan pays the fixed Σ_b s_b·p_b·u_b·⌈C/u_b⌉ on top
(taken off the budget); flex-start offers (billed per hour) are offered at their rate when
C ≤ their longest run and C + wait ≤ deadline. Each subproblem is an ordinary plan, solved
exactly by the engine (:mod:`ptplan.planner.search.engine`).

Why this is exact. The caps are every multiple of every block offer's unit up to the first at
or past the deadline (within the offer's longest booking), the flex-start limits (168 h and
deadline − wait) and the deadline. A plan held H hours with s_b block nodes lies in subproblem
(C, s) with C the least cap ≥ H: there ⌈C/u_b⌉ = ⌈H/u_b⌉ for every b (the next multiple of u_b
is a cap, so C is at most it) and every flex-start offer it uses is offered (its limits are
caps), so the subproblem's value is at most the plan's cost. Conversely a subproblem's plan
booking s_b nodes of b and using t_b ≤ s_b of them is a real plan costing at most the value
when t_b is a count the offer sells (it books t_b). Plans without blocks need only the flex-
start caps and the deadline. So min over subproblems = the optimum, as long as every
subproblem whose lower bound is below the best plan found is solved.

Lower bounds and order: one solve with every block offer free (at its largest count) and
flex-start at its rate (a relaxation of every subproblem) gives E; subproblem (C, s) is at
least E + its fixed sum. Subproblems are solved in the order of that bound until the bound
reaches the best plan found (then the plan is proven optimal) or :data:`MAX_SOLVES` solves
were made (then the plan is ``feasible`` with its gap to the least bound left).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from ptplan.core.errors import InfeasibleError
from ptplan.planner.booking.contexts import Contexts
from ptplan.planner.search.engine import Context, LayoutRun, solve_runs
from ptplan.providers.base import Offer
from ptplan.providers.blocks import FLEX_START_MAX_HOURS, allowed_counts
from ptplan.spec.project import ProjectSpec

MAX_SOLVES = 40
"""Subproblems solved at most; past it the plan states its gap to the least bound left."""
MAX_SUBPROBLEMS = 20_000
"""Subproblems listed at most (counts of several offers multiply); past it: no exact search."""
TOL = 1e-9

Evaluate = Callable[[Context, list[LayoutRun], LayoutRun], "tuple[float, object] | None"]
"""(context, runs, solved run) -> (real cost, candidate) of the plan, or None."""


@dataclass
class Outcome:
    found: list[tuple[object, Sub]]
    """Candidates of the solved subproblems (real plans), each with its subproblem."""
    bound: float
    """A lower bound on every plan's cost (the optimum when a candidate reaches it)."""
    solves: int


def _units(cap: float, unit: float) -> float:
    if math.isinf(cap):
        return math.inf
    return unit * max(1, math.ceil(cap / unit - TOL))


def caps(blocks: list[Offer], flexes: list[Offer], deadline: float | None,
         limit: float) -> tuple[list[float], list[float]]:
    """(caps for plans with block nodes, caps for plans without), ascending; block caps stop
    at the first multiple past ``limit`` (a run beyond it costs more than a plan found)."""
    last = deadline if deadline is not None else limit
    plain = {math.inf if deadline is None else deadline}
    for f in flexes:
        plain.add(min(f.block_max_hours or FLEX_START_MAX_HOURS, FLEX_START_MAX_HOURS))
        if deadline is not None and deadline - f.wait_hours > 0:
            plain.add(deadline - f.wait_hours)
    with_blocks = set(plain)
    for b in blocks:
        u = b.block_unit_hours or 24.0
        k = 1
        while True:
            c = k * u
            if c > (b.block_max_hours or math.inf) + TOL:
                break
            with_blocks.add(c)
            if c >= last - TOL:
                break
            k += 1
    return sorted(with_blocks), sorted(plain)


def _flex_ok(f: Offer, cap: float, deadline: float | None) -> bool:
    longest = min(f.block_max_hours or FLEX_START_MAX_HOURS, FLEX_START_MAX_HOURS)
    return cap <= longest + TOL and (deadline is None or cap + f.wait_hours <= deadline + TOL)


def _combos(blocks: list[Offer], cap: float, room: float) -> list[tuple[float, tuple[int, ...]]]:
    """(fixed sum, count per block offer) with at least one block node, fixed sum < room."""
    out: list[tuple[float, tuple[int, ...]]] = []

    def walk(i: int, acc: float, counts: tuple[int, ...]) -> None:
        if len(out) > MAX_SUBPROBLEMS:
            return
        if i == len(blocks):
            if any(counts):
                out.append((acc, counts))
            return
        b = blocks[i]
        walk(i + 1, acc, (*counts, 0))
        u = b.block_unit_hours or 24.0
        if _units(cap, u) > (b.block_max_hours or math.inf) + TOL:
            return
        for n in allowed_counts(b):
            fee = n * b.usd_per_hour * _units(cap, u)
            if acc + fee < room:
                walk(i + 1, acc + fee, (*counts, n))

    walk(0, 0.0, ())
    return out


@dataclass(frozen=True)
class Sub:
    """One subproblem: the extra (booked) offers, the cap on the run, the budget, the
    objective. Solved by :func:`solve`; kept with its candidates so that the winner's may be
    solved again with every layout for the explanation."""

    extra: tuple[Offer, ...]
    cap: float | None
    budget: float | None
    objective: str = "cost"


def solve(contexts: Contexts, spec: ProjectSpec, sub: Sub, solver: str, every_layout: bool = False
          ) -> tuple[Context, list[LayoutRun], list[LayoutRun]] | None:
    """The subproblem solved exactly by the engine (None when it has no plan); the context
    returned carries the spec (the plan records the spec's deadline and budget, not the
    subproblem's).

    Without ``every_layout`` only the regions of the extra offers are searched: a plan of the
    subproblem that uses none of them is a plan without booked capacity (matched or beaten by
    the plain plan, a candidate already) or, in a subproblem with block nodes, one that pays
    their fixed sum for nothing (matched by the subproblem without them). Not when the policy
    splits pools across regions (a pool's nodes may then sit in another region)."""
    ctx = contexts.get(list(sub.extra), regional=not every_layout)
    sla = spec.sla.model_copy(update={"deadline_hours": sub.cap})
    capped = spec.model_copy(update={"sla": sla, "budget": spec.budget.model_copy(
        update={"max_usd": sub.budget})})
    try:
        runs, solved = solve_runs(replace(ctx, spec=capped), sub.objective, solver,
                                  every_layout=every_layout, diagnose_infeasible=False)
    except InfeasibleError:
        return None
    return replace(ctx, spec=spec), runs, solved


def level_extra(contexts: Contexts, blocks: list[Offer], flexes: list[Offer], cap: float,
                held: float, deadline: float | None) -> list[Offer]:
    """The booked offers of a relaxation of every plan held at most ``held`` ≤ ``cap`` hours
    whose units are those of ``cap``: each block node priced per held hour at
    p·u⌈cap/u⌉ / held (what its whole units cost per hour of a run that long, at least),
    capped at its largest count; the flex-start offers usable under that cap, at their rate."""
    out = []
    for b in blocks:
        billed = _units(cap, b.block_unit_hours or 24.0)
        if billed > (b.block_max_hours or math.inf) + TOL:
            continue
        out.append(contexts.variant(b, b.usd_per_hour * billed / held, max(allowed_counts(b))))
    return out + [f for f in flexes if _flex_ok(f, cap, deadline)]


def search(contexts: Contexts, spec: ProjectSpec, booked: list[Offer], solver: str,
           incumbent: float, evaluate: Evaluate) -> Outcome | None:
    """The exact search (module docstring); None when too many subproblems to list."""
    deadline, budget = spec.sla.deadline_hours, spec.budget.max_usd
    blocks = [o for o in booked if o.capacity_type == "block"]
    flexes = [o for o in booked if o.capacity_type == "flex_start"]
    free = [contexts.variant(b, 0.0, max(allowed_counts(b))) for b in blocks]
    relaxed = solve(contexts, spec, Sub(tuple(free + flexes), deadline, budget), solver)
    if relaxed is None:  # no plan uses booked capacity: the best plan without it is optimal
        return Outcome([], incumbent, 1)
    low = min(r.best.usd for r in relaxed[2] if r.best is not None)
    # a run held longer than `limit` pays more than `incumbent` in block fees alone
    cheapest = min((b.usd_per_hour * min(allowed_counts(b)) for b in blocks), default=1.0)
    limit = max(1.0, (incumbent - low) / cheapest) if math.isfinite(incumbent) else 1e6
    cap_b, cap_p = caps(blocks, flexes, deadline, limit)
    subs: list[tuple[float, float, tuple[int, ...]]] = []
    for c in cap_p:
        subs.append((low, c, (0,) * len(blocks)))
    for c in cap_b:
        subs += [(low + fee, c, counts) for fee, counts in
                 _combos(blocks, c, incumbent - low if math.isfinite(incumbent) else math.inf)]
        if len(subs) > MAX_SUBPROBLEMS:
            return None
    subs.sort(key=lambda x: (x[0], x[1], x[2]))
    found: list[tuple[object, Sub]] = []
    best, solved_low, solves = incumbent, math.inf, 0
    level: dict[float, float] = {}  # cap -> lower bound on the plans it holds
    for lb, c, counts in subs:
        if lb >= best - 0.005:
            return Outcome(found, min(best, solved_low, lb), solves)
        if solves >= MAX_SOLVES:
            return Outcome(found, min(solved_low, lb, best), solves)
        fixed = lb - low
        extra = [contexts.variant(b, 0.0, n) for b, n in zip(blocks, counts, strict=True) if n]
        extra += [f for f in flexes if _flex_ok(f, c, deadline)]
        if not extra:  # the plan without booked capacity: already a candidate
            continue
        run_cap = None if math.isinf(c) else min(c, deadline or math.inf)
        if any(counts) and run_cap is not None and c not in level:
            # one solve bounds every subproblem of this cap: block nodes per hour at their
            # whole units' cost over the longest run the cap allows (a plan held H ≤ that
            # pays at least this per hour); no plan below the best found: the cap is done
            got = solve(contexts, spec, Sub(tuple(level_extra(
                contexts, blocks, flexes, c, run_cap, deadline)), run_cap,
                None if math.isinf(best) else min(best, budget or math.inf)), solver)
            solves += 1
            level[c] = math.inf if got is None else min(
                r.best.usd for r in got[2] if r.best is not None)
        if any(counts) and level.get(c, -math.inf) >= best - 0.005:
            continue
        # only a plan cheaper than the best found matters: its cost is the subproblem's
        # budget (no plan within it: the subproblem's value is at least the best found)
        room = min(best, math.inf if budget is None else budget) - fixed
        sub = Sub(tuple(extra), run_cap, None if math.isinf(room) else room)
        got = solve(contexts, spec, sub, solver)
        solves += 1
        if got is None:
            continue
        ctx, runs, solved = got
        value = fixed + min(r.best.usd for r in solved if r.best is not None)
        solved_low = min(solved_low, value)
        for r in solved:
            priced = _priced(r, blocks)
            real = evaluate(ctx, [priced if x is r else x for x in runs], priced)
            if real is not None:
                found.append((real[1], sub))
                best = min(best, real[0])
    return Outcome(found, min(best, solved_low), solves)


def _priced(r: LayoutRun, blocks: list[Offer]) -> LayoutRun:
    """The run with the free block offers replaced by the real ones (their rate per hour;
    the real pricing rounds them to whole units)."""
    assert r.solution is not None
    real = {b.key: b for b in blocks}
    chosen = {}
    for pool, opt in r.solution.chosen.items():
        fill = tuple((real.get(o.key, o) if o.capacity_type == "block" else o, n)
                     for o, n in opt.fill)
        rate = opt.usd_per_hour + sum(n * real[o.key].usd_per_hour for o, n in opt.fill
                                      if o.capacity_type == "block")
        chosen[pool] = replace(opt, fill=fill, usd_per_hour=rate)
    return replace(r, solution=replace(r.solution, chosen=chosen))
