"""The planner's MILP for one pool layout (PuLP; solver plumbing in :mod:`ptplan.core.lp`).

Sets: pools k of the layout; options a ∈ A_k (see :mod:`ptplan.planner.candidates`: provider,
region, GPU shape, node counts per offer) with busy time t_ka [h], holding price C_ka [$/h] and
egress e_ka [$] (weight sync to rollout nodes outside the trainer's zone or region); sites g
(the trainer's provider, region and zone).

Variables (names from ``[A-Za-z0-9_]``; :attr:`Model.names` maps name → (family, key))::

    z_ka ∈ {0,1}   pool k uses option a            y_g ∈ {0,1}  the plan's site is g
    D ≥ 0          run time (makespan) [h]         u_ka ≥ 0     = z_ka · D, held hours of a

Constraint families (one function each):

* ``one_option``      Σ_a z_ka = 1                                   for every pool k
* ``single_region``   z_ka ≤ y_g(a), Σ_g y_g = 1  every option is priced against one site (its
                      egress depends on where the trainer is), so one site is chosen
* ``makespan``        sync / colocated: D ≥ Σ_k Σ_a t_ka z_ka (stages run one after another)
                      async: D ≥ Σ_a t_ka z_ka + φ·Σ_a t_ra z_ra for every k (pools overlap;
                      φ = 1/steps of pipeline fill by the rollout pool r)
* ``deadline``        D ≤ deadline
* ``hold``            u_ka ≥ D − D̄·(1 − z_ka): every pool is held (and billed) for the whole
                      run, idle or not. This is the exact linearisation of the product of a
                      binary and a bounded continuous variable (D ≤ D̄); u is only bounded
                      below, and every objective or budget row pushes it down to z·D. The
                      valid inequality u_ka ≥ t_ka·z_ka (a pool is held at least while busy)
                      tightens the LP relaxation.
* ``offer_capacity``  Σ_ka n_ka,o z_ka ≤ cap_o for every capped offer o used by options of
                      more than one pool: pools are held at the same time, so they share it
* ``budget``          Σ C_ka u_ka + Σ e_ka z_ka ≤ budget

Objective ``cost``: min Σ C_ka u_ka + Σ e_ka z_ka. Objective ``time``: min D, then
(lexicographic, second solve) min cost subject to D ≤ D* (1 + 1e-9).

Exactness: the product run time × holding price is represented exactly (no outer search over
D), and options are pruned only by Pareto dominance, so an optimum of this MILP over all
layouts is an optimum of the planning problem (see the tests' brute-force cross-check).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import pulp

from ptplan.core.lp import mip_gap, run, var
from ptplan.planner.candidates import Layout, PoolOption


@dataclass(frozen=True)
class OptionSet:
    """What the MILP chooses from: per pool, its (pruned) options; the regions they span."""

    layout: Layout
    options: dict[str, list[PoolOption]]
    regions: list[tuple[str, str, str]]
    """Sites (provider, region, zone) the options are priced against."""
    caps: dict[str, int | None] = field(default_factory=dict)
    """Real caps by offer key (options may carry per-pool shares of a capped offer)."""


@dataclass
class Model:
    prob: pulp.LpProblem
    z: dict[tuple[str, int], pulp.LpVariable]
    u: dict[tuple[str, int], pulp.LpVariable]
    y: dict[tuple[str, str, str], pulp.LpVariable]
    D: pulp.LpVariable
    d_max: float
    names: dict[str, tuple[str, str]] = field(default_factory=dict)
    rows: dict[str, list[str]] = field(default_factory=dict)
    """Constraint family -> row names."""


@dataclass(frozen=True)
class Solution:
    status: str  # optimal | infeasible | time_limit | error
    chosen: dict[str, PoolOption]
    objective: float
    gap: float
    seconds: float
    solver: str


def _name(model: Model, family: str, key: str, name: str) -> str:
    model.names[name] = (family, key)
    model.rows.setdefault(family, []).append(name)
    return name


def upper_run_time(c: OptionSet) -> float:
    """D̄: a valid upper bound on the run time of any plan built from these options."""
    worst = {k: max(o.busy_hours for o in opts) for k, opts in c.options.items()}
    fill = c.layout.fill_fraction * worst.get("rollout", 0.0)
    if c.layout.mode == "async":
        return max(worst.values()) + fill
    return sum(worst.values())


def build(c: OptionSet, deadline: float | None, budget: float | None, objective: str
          ) -> Model:
    prob = pulp.LpProblem("ptplan", pulp.LpMinimize)
    d_max = upper_run_time(c)
    if deadline is not None:
        d_max = min(d_max, deadline)
    D = var(prob, "D_hours", 0, max(d_max, 0.0))
    model = Model(prob, {}, {}, {}, D, d_max)
    model.names["D_hours"] = ("run_time", "")
    for pool, opts in c.options.items():
        for i, opt in enumerate(opts):
            z = var(prob, f"z_{pool}_{i}", cat=pulp.LpBinary)
            u = var(prob, f"u_{pool}_{i}", 0)
            model.z[(pool, i)] = z
            model.u[(pool, i)] = u
            model.names[z.name] = ("option", opt.key)
            model.names[u.name] = ("held_hours", opt.key)
    add_one_option(model, c)
    add_single_region(model, c)
    add_makespan(model, c)
    add_hold(model, c)
    add_offer_capacity(model, c)
    if budget is not None:
        add_budget(model, c, budget)
    cost = cost_expr(model, c)
    if objective == "cost":
        prob += cost
    else:
        prob += D
    return model


def cost_expr(model: Model, c: OptionSet) -> pulp.LpAffineExpression:
    return pulp.lpSum(
        opt.usd_per_hour * model.u[(pool, i)] + opt.egress_usd * model.z[(pool, i)]
        for pool, opts in c.options.items() for i, opt in enumerate(opts)
    )


def add_one_option(model: Model, c: OptionSet) -> None:
    for pool, opts in c.options.items():
        name = _name(model, "one_option", pool, f"one_option_{pool}")
        model.prob += pulp.lpSum(model.z[(pool, i)] for i in range(len(opts))) == 1, name


def add_single_region(model: Model, c: OptionSet) -> None:
    if len(c.regions) <= 1:
        return
    for j, site in enumerate(c.regions):
        model.y[site] = var(model.prob, f"y_region_{j}", cat=pulp.LpBinary)
        model.names[f"y_region_{j}"] = ("region", ":".join(site))
    model.prob += (pulp.lpSum(model.y.values()) == 1,
                   _name(model, "single_region", "", "single_region_choose_one"))
    for pool, opts in c.options.items():
        for i, opt in enumerate(opts):
            name = _name(model, "single_region", opt.key, f"region_link_{pool}_{i}")
            model.prob += model.z[(pool, i)] <= model.y[opt.site], name


def _busy(model: Model, c: OptionSet, pool: str) -> pulp.LpAffineExpression:
    return pulp.lpSum(opt.busy_hours * model.z[(pool, i)]
                      for i, opt in enumerate(c.options[pool]))


def add_makespan(model: Model, c: OptionSet) -> None:
    lay = c.layout
    if lay.mode == "async":
        fill = (lay.fill_fraction * _busy(model, c, "rollout")
                if "rollout" in c.options else 0.0)
        for pool in c.options:
            name = _name(model, "makespan", pool, f"makespan_{pool}")
            model.prob += _busy(model, c, pool) + fill <= model.D, name
    else:
        total = pulp.lpSum(_busy(model, c, pool) for pool in c.options)
        model.prob += total <= model.D, _name(model, "makespan", "", "makespan_sum")


def add_hold(model: Model, c: OptionSet) -> None:
    for pool, opts in c.options.items():
        for i, opt in enumerate(opts):
            name = _name(model, "hold", f"{pool}:{i}", f"hold_{pool}_{i}")
            model.prob += (model.u[(pool, i)] >= model.D - model.d_max * (1 - model.z[(pool, i)]),
                           name)
            # valid tightening: a chosen pool is held at least its own busy time
            name = _name(model, "hold", f"{pool}:{i}:busy", f"hold_busy_{pool}_{i}")
            model.prob += model.u[(pool, i)] >= opt.busy_hours * model.z[(pool, i)], name


def add_offer_capacity(model: Model, c: OptionSet) -> None:
    users: dict[str, set[str]] = {}
    caps: dict[str, int] = {}
    for pool, opts in c.options.items():
        for opt in opts:
            for o, _ in opt.fill:
                cap = c.caps.get(o.key, o.max_nodes)
                if cap is not None:
                    users.setdefault(o.key, set()).add(pool)
                    caps[o.key] = cap
    for j, key in enumerate(sorted(k for k, pools in users.items() if len(pools) > 1)):
        terms = [n * model.z[(pool, i)] for pool, opts in c.options.items()
                 for i, opt in enumerate(opts) for o, n in opt.fill if o.key == key]
        name = _name(model, "offer_capacity", key, f"offer_capacity_{j}")
        model.prob += pulp.lpSum(terms) <= caps[key], name


def add_budget(model: Model, c: OptionSet, budget: float) -> None:
    model.prob += cost_expr(model, c) <= budget, _name(model, "budget", "", "budget")


def solve(c: OptionSet, deadline: float | None, budget: float | None, objective: str,
          solver: str = "highs", time_limit: float = 60.0, gap: float = 1e-6) -> Solution:
    """Build and solve; returns the chosen option per pool (exact status mapping)."""
    if any(not opts for opts in c.options.values()):
        return Solution("infeasible", {}, float("nan"), 0.0, 0.0, solver)
    start = time.perf_counter()
    model = build(c, deadline, budget, objective)
    status = run(model.prob, solver, time_limit, gap)
    if status in ("optimal", "time_limit") and objective == "time":
        # lexicographic: cheapest among the fastest
        d_star = model.D.value() or 0.0
        model.prob += d_star * (1 + 1e-9) + 1e-9 >= model.D, "lex_time"
        model.prob.setObjective(cost_expr(model, c))
        status = run(model.prob, solver, time_limit, gap)
    seconds = time.perf_counter() - start
    if status not in ("optimal", "time_limit"):
        return Solution(status, {}, float("nan"), 0.0, seconds, solver)
    chosen: dict[str, PoolOption] = {}
    for (pool, i), z in model.z.items():
        if (z.value() or 0.0) > 0.5:
            chosen[pool] = c.options[pool][i]
    objective_value = pulp.value(model.prob.objective) or 0.0
    gap_value = mip_gap(model.prob, solver)
    return Solution(status, chosen, float(objective_value), gap_value, seconds, solver)
