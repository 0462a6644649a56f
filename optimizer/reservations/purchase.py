"""Reserved-capacity purchasing for a portfolio (``ptplan reserve``): demand, result, check.

Notation: scenarios s with probability p_s (weights normalised), weeks w = 0 … W−1 of 168 h,
keys k = (provider, region, instance type), demand classes j (a key and the alternatives its
demand may use), products i (one node of key k(i) committed for a term of 8,760·years h).

**Demand, in average concurrent nodes per week.** ``D[s, w, j]`` is node-hours in week w ÷ 168.

* A project's spec is planned once by :func:`ptplan.planner.api.plan` (plans are cached
  per distinct spec digest, catalog and policy). Every allocation of every pool of the plan holds
  ``nodes`` nodes for ``hours`` hours (the pool's held time) from the project's start,
  ``start_week × 168`` h (and again every ``repeat_every_weeks`` while the start is inside the
  horizon). Week w receives nodes × |[168w, 168(w+1)) ∩ [t0, t0 + hours)| ÷ 168, so node-hours
  are preserved exactly and spread over the weeks the run overlaps.
* On-demand (and held reserved) allocations are demand that commitments may cover. Spot
  allocations are demand that may stay on spot: the same work on non-spot nodes needs
  nodes × effective_fraction nodes (the plan's interruption overhead), and spot covers it at
  usd_per_hour ÷ effective_fraction per useful node-hour.
* Explicit ``demand`` rows give average concurrent nodes directly; prices come from the
  catalog (cheapest on-demand offer of the key, cheapest spot offer in the region) unless the
  row gives them. Scenario multipliers and per-project scenario weights scale the demand.
* Within a week, node-hours are treated as interchangeable: a committed node covers 168
  node-hours of that week whenever they run. This is optimistic for bursty demand (a burst of
  8 nodes for 10 h needs 8 nodes at once); ``docs/reserve.md`` discusses it.

**Costs.** Product i costs c_i = usd_per_hour·H_i + upfront·H_i/T_i over the horizon, H_i the
hours of its term inside the horizon and T_i its term in hours; it covers a_i[w] (the share of
week w inside its term) nodes. Held commitments are paid until they expire (a constant) and
cover their count until then. The MILP is :mod:`ptplan.reservations.milp`.

**Spend commitments** (:mod:`ptplan.reservations.spend`): C $/h paid every hour of the term;
a covered node-hour of key k consumes c_k of C and replaces s_k of on-demand spend; they are
applied after instance commitments in the providers' order. **Laddering** (``ladder=
"quarterly"``): every product and commitment is offered in each quarter's first week; week 0's
purchase is the answer.

**Verification** (:mod:`ptplan.reservations.check`): given only the purchase counts and the
demand, the cheapest use of the committed capacity is greedy (each committed node-week serves
the demand whose alternative is dearest: on-demand before spot), so every scenario's cost is
recomputed without the MILP; the MILP's objective must equal it, its own weekly dispatch must
respect every coverage and capacity row, and the reported numbers are the recomputed ones.

Modules: :mod:`ptplan.reservations.build` builds the problem, :mod:`ptplan.reservations.milp`
solves it, :mod:`ptplan.reservations.check` re-checks it, :mod:`ptplan.reservations.report` writes
the report; this module runs them in that order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ptplan.core.errors import PlannerError
from ptplan.policies.model import Policy
from ptplan.providers.base import Catalog
from ptplan.reservations import milp as reserve_model
from ptplan.reservations.build import build_problem
from ptplan.reservations.check import Evaluation, evaluate, on_demand_only, verify
from ptplan.reservations.portfolio import Portfolio
from ptplan.reservations.problem import Problem, Risk
from ptplan.reservations.report import reserve_report


@dataclass
class ReserveResult:
    report: dict[str, Any]
    problem: Problem
    counts: list[int]
    evaluation: Evaluation


def reserve(pf: Portfolio, catalog: Catalog, base_dir: Path, policy: Policy | None = None,
            solver: str = "highs", risk: Risk | None = None, timings: bool = True,
            time_limit: float = 300.0,
            progress: Callable[[int, int], None] | None = None,
            ladder: str | None = None) -> ReserveResult:
    """Plan the projects, solve the purchase MILP, re-check it and assemble the report.
    ``progress(done, total)`` is told as each project is planned."""
    pb = build_problem(pf, catalog, base_dir, policy, solver, risk, progress, ladder)
    sol = reserve_model.solve(pb, solver, time_limit)
    problems = verify(pb, sol.counts, sol.objective, sol.status, sol.used, sol.spot,
                      sol.steps, sol.covered, sol.spent)
    if problems:
        raise PlannerError("reserve: the purchase failed its independent re-check ("
                           + "; ".join(problems[:3]) + "); report a bug")
    ev = evaluate(pb, sol.counts, sol.steps)
    base = evaluate(pb, [0] * len(pb.products))
    report = reserve_report(pf, catalog, pb, sol, ev, base, on_demand_only(pb), timings)
    return ReserveResult(report, pb, sol.counts, ev)
