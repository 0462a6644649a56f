"""Choose one point of each stage's cost–time frontier: the least total cost (stages + hand-
overs) whose critical path meets the deadline (and whose total meets the budget).

Variables: x[s,i] ∈ {0,1} (stage s runs at point i, Σᵢ x[s,i] = 1), start[s] ≥ 0, and for each
hand-over u→v with a pair cost (egress between the points' regions) z[u,i,v,j] ≥ x[u,i] +
x[v,j] − 1, z ≥ 0 (the product of two binaries; minimising makes it exact since its cost is
≥ 0). Precedence: start[v] ≥ start[u] + Σᵢ t[u,i]·x[u,i]; deadline: start[s] + Σᵢ t[s,i]·x[s,i]
≤ D. Objective: Σ cost·x + Σ pair·z, plus 1e-7 × the makespan to break ties toward the faster
schedule. Solved with HiGHS through :mod:`ptplan.core.lp`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pulp

from ptplan.core import lp


@dataclass(frozen=True)
class Point:
    cost: float
    hours: float


@dataclass(frozen=True)
class Choice:
    status: str
    pick: dict[str, int]
    start: dict[str, float]
    cost: float


PairCost = Callable[[str, int, str, int], float]


def longest_path(stages: list[str], after: dict[str, list[str]], hours: dict[str, float]
                 ) -> tuple[float, list[str], dict[str, float]]:
    """(length, path, earliest starts) of the longest path through ``stages`` (in dependency
    order) with durations ``hours``."""
    start: dict[str, float] = {}
    prev: dict[str, str | None] = {}
    for s in stages:
        best, arg = 0.0, None
        for u in after.get(s, []):
            end = start[u] + hours[u]
            if end > best + 1e-12 or (arg is None and end >= best):
                best, arg = end, u
        start[s], prev[s] = best, arg
    last = max(stages, key=lambda s: (start[s] + hours[s], -stages.index(s)))
    path = [last]
    while prev[path[-1]] is not None:
        path.append(prev[path[-1]])  # type: ignore[arg-type]
    return start[last] + hours[last], path[::-1], start


def choose(stages: list[str], after: dict[str, list[str]], points: dict[str, list[Point]],
           own: Callable[[str, int], float], pair: PairCost, deadline: float,
           budget: float | None, solver: str = "highs", time_limit: float = 60.0) -> Choice:
    """The optimal choice (status ``infeasible`` when none meets the deadline and budget).
    ``own(s, i)``: hand-over costs that depend on stage s's point only (storage at its region);
    ``pair(u, i, v, j)``: those that depend on both ends (egress)."""
    prob = pulp.LpProblem("campaign", pulp.LpMinimize)
    x = {(s, i): lp.var(prob, f"x_{k}_{i}", 0, 1, pulp.LpBinary)
         for k, s in enumerate(stages) for i in range(len(points[s]))}
    start = {s: lp.var(prob, f"start_{k}", 0) for k, s in enumerate(stages)}
    span = lp.var(prob, "makespan", 0)
    dur = {s: pulp.lpSum(p.hours * x[s, i] for i, p in enumerate(points[s])) for s in stages}
    cost = [(p.cost + own(s, i)) * x[s, i] for s in stages for i, p in enumerate(points[s])]
    for k, s in enumerate(stages):
        prob += pulp.lpSum(x[s, i] for i in range(len(points[s]))) == 1, f"one_{k}"
        prob += start[s] + dur[s] <= deadline, f"deadline_{k}"
        prob += span >= start[s] + dur[s], f"span_{k}"
        for u in after.get(s, []):
            prob += start[s] >= start[u] + dur[u], f"after_{k}_{stages.index(u)}"
            for i in range(len(points[u])):
                for j in range(len(points[s])):
                    c = pair(u, i, s, j)
                    if c <= 0:
                        continue
                    z = lp.var(prob, f"z_{stages.index(u)}_{i}_{k}_{j}", 0)
                    prob += z >= x[u, i] + x[s, j] - 1
                    cost.append(c * z)
    total = pulp.lpSum(cost)
    if budget is not None:
        prob += total <= budget, "budget"
    prob += total + 1e-7 * span
    status = lp.run(prob, solver, time_limit, 1e-9)
    if status not in ("optimal", "time_limit"):
        return Choice(status, {}, {}, 0.0)
    pick = {s: max(range(len(points[s])), key=lambda i: (x[s, i].value() or 0.0, -i))
            for s in stages}
    hours = {s: points[s][pick[s]].hours for s in stages}
    _, _, earliest = longest_path(stages, after, hours)
    value = sum(points[s][pick[s]].cost + own(s, pick[s]) for s in stages)
    value += sum(pair(u, pick[u], s, pick[s]) for s in stages for u in after.get(s, []))
    return Choice(status, pick, earliest, value)
