"""The exact search for the fastest plan that may book capacity (objective ``time``).

A plan's time is its held time H plus the expected wait W of the flex-start offers it uses
(0 without); the fastest plan is the least time within the deadline and budget, the cheapest
of those on a tie (the engine's own order: least run time, then least cost). Two phases:

1. **The least time T\\*.** Subproblems (C, s, w) as in :mod:`ptplan.planner.booking.exact`
   (a cap C, a booked count s_b per block offer, its fixed sum Σ s_b·p_b·u_b⌈C/u_b⌉ taken off
   the budget) and a wait w: the flex-start offers waiting at most w are offered (those
   usable under C), and the subproblem's value is the engine's least run time + w. A plan P
   (held H, waiting W, booking t) lies in subproblem (C(H), t, W), C(H) the least cap ≥ H:
   its units are those of C(H), its flex-start offers are offered (their limits are caps),
   its cost minus the fixed sum is within the budget left: so that value ≤ H + W. And a
   subproblem's plan is a real plan taking at most its value (its wait ≤ w). The least value
   is T\\*. Each subproblem's value is at least max(E, C⁻) + w, with E the least run time with
   every block free and C⁻ the cap before C (a plan at cap C is held longer than C⁻); and a
   plan of cap C faster than the best time found T holds H ≤ h = min(C, deadline, T), so it
   pays at least p_b·u_b⌈C/u_b⌉/h per hour per block node: one solve with blocks priced so
   (:func:`ptplan.planner.booking.exact.level_extra`) bounds every subproblem of cap C.
   Subproblems are solved in the order of their bound, each with its run capped below T − w,
   until the bound reaches T. Without a budget only the subproblem with every block offer at
   its largest count is solved per cap and wait (it holds the plans of the others).
2. **The cheapest plan taking T\\*.** The exact cost search of
   :mod:`ptplan.planner.booking.exact` with the deadline T\\* (engine tolerance 1e-9).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import pairwise

from ptplan.planner.booking.contexts import Contexts
from ptplan.planner.booking.exact import (
    MAX_SOLVES,
    MAX_SUBPROBLEMS,
    TOL,
    Evaluate,
    Sub,
    _combos,
    _flex_ok,
    _priced,
    _units,
    caps,
    level_extra,
    solve,
)
from ptplan.providers.base import Offer
from ptplan.providers.blocks import allowed_counts
from ptplan.spec.project import ProjectSpec

REL = 1e-9
"""Times within this fraction of each other tie (the engine's lexicographic tolerance)."""


@dataclass
class TimeOutcome:
    found: list[tuple[object, Sub]]
    """Candidates of the solved subproblems (real plans), each with its subproblem."""
    bound: float
    """A lower bound on every plan's time (the optimum when a candidate reaches it)."""
    best: float
    """The least time of a real plan found (with the incumbent's)."""
    solves: int


def _largest(blocks: list[Offer], cap: float) -> list[tuple[float, tuple[int, ...]]]:
    """Without a budget the fixed sum binds nothing: a subproblem with every block offer at its
    largest count (those whose units fit under the cap) holds every plan of the cap's other
    subproblems, so it alone is solved (its value is at most theirs)."""
    top = tuple(max(allowed_counts(b)) if _units(cap, b.block_unit_hours or 24.0)
                <= (b.block_max_hours or math.inf) + TOL else 0 for b in blocks)
    return [(0.0, top)] if any(top) else []


def fastest(contexts: Contexts, spec: ProjectSpec, booked: list[Offer], solver: str,
            incumbent: float, evaluate: Evaluate) -> TimeOutcome | None:
    """Phase 1 (module docstring): ``incumbent`` is the least time of a real plan known;
    ``evaluate`` returns (time, candidate) of a solved plan priced for real. None when there
    are too many subproblems to list."""
    deadline, budget = spec.sla.deadline_hours, spec.budget.max_usd
    blocks = [o for o in booked if o.capacity_type == "block"]
    flexes = [o for o in booked if o.capacity_type == "flex_start"]
    free = [contexts.variant(b, 0.0, max(allowed_counts(b))) for b in blocks]
    relaxed = solve(contexts, spec, Sub(tuple(free + flexes), deadline, budget, "time"), solver)
    if relaxed is None:  # no plan uses booked capacity: the best plan without it is optimal
        return TimeOutcome([], incumbent, incumbent, 1)
    low = min(r.best.run_hours for r in relaxed[2] if r.best is not None)
    best = incumbent
    last = min(deadline if deadline is not None else math.inf, best)
    cap_b, cap_p = caps(blocks, flexes, deadline, last if math.isfinite(last) else 1e6)
    waits = sorted({0.0} | {f.wait_hours for f in flexes})
    room = math.inf if budget is None else budget
    subs: list[tuple[float, float, float, float, tuple[int, ...]]] = []
    for w in waits:
        if any(abs(f.wait_hours - w) <= TOL for f in flexes):  # no block: flex-start only
            subs += [(max(low, prev) + w, c, w, 0.0, (0,) * len(blocks))
                     for prev, c in pairwise([0.0, *cap_p])]
        for prev, c in pairwise([0.0, *cap_b]):
            subs += [(max(low, prev) + w, c, w, fee, counts)
                     for fee, counts in (_combos(blocks, c, room) if budget is not None
                                         else _largest(blocks, c))]
            if len(subs) > MAX_SUBPROBLEMS:
                return None
    subs.sort(key=lambda x: (x[0], x[1], x[2], x[3], x[4]))
    found: list[tuple[object, Sub]] = []
    solved_low, solves = math.inf, 0
    level: dict[float, float] = {}  # cap -> least run time of a plan it holds (a bound)
    for lb, c, w, fee, counts in subs:
        if lb >= best * (1 - REL):
            return TimeOutcome(found, min(best, solved_low, lb), best, solves)
        if solves >= MAX_SOLVES:
            return TimeOutcome(found, min(best, solved_low, lb), best, solves)
        if c < low * (1 - REL):
            continue  # no plan is held at most c hours
        # a plan of this cap faster than the best found is held at most `held` hours
        held = min(c, deadline if deadline is not None else math.inf, best)
        if math.isinf(held):
            continue  # nothing bookable without a cap
        if c not in level:
            got = solve(contexts, spec, Sub(tuple(level_extra(
                contexts, blocks, flexes, c, held, deadline)), held, budget, "time"), solver)
            solves += 1
            level[c] = math.inf if got is None else min(
                r.best.run_hours for r in got[2] if r.best is not None)
        if level[c] + w >= best * (1 - REL):
            continue
        extra = [contexts.variant(b, 0.0, n) for b, n in zip(blocks, counts, strict=True) if n]
        extra += [f for f in flexes if f.wait_hours <= w + TOL and _flex_ok(f, c, deadline)]
        waits_w = any(f.capacity_type == "flex_start" and f.wait_hours > w - TOL for f in extra)
        if (w > 0 or not any(counts)) and not waits_w:
            continue  # the plain plan, or a subproblem of a shorter wait
        # (an offered flex-start offer meets the deadline with its wait: c + w <= deadline)
        cap_run = min(held, best - w)
        if cap_run <= 0:
            continue
        sub = Sub(tuple(extra), cap_run, None if budget is None else budget - fee, "time")
        got = solve(contexts, spec, sub, solver)
        solves += 1
        if got is None:
            continue
        ctx, runs, solved = got
        solved_low = min(solved_low, w + min(r.best.run_hours for r in solved
                                             if r.best is not None))
        for r in solved:
            priced = _priced(r, blocks)
            real = evaluate(ctx, [priced if x is r else x for x in runs], priced)
            if real is not None:
                found.append((real[1], sub))
                best = min(best, real[0])
    return TimeOutcome(found, min(best, solved_low), best, solves)
