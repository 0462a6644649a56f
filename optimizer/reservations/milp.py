"""The stochastic MILP of ``ptplan reserve``: how many commitments to buy now.

Portfolio purchasing has its own model module because it is a different problem from a project
plan (integer commitment counts shared by all projects, recourse per scenario and week), and
keeping it apart leaves :mod:`ptplan.planner.search.milp` the planner's formulation alone;
both share that module's solver layer (HiGHS via highspy, CBC fallback, silenced banner,
variables attached with the PuLP 3.3 API).

Notation (see :mod:`ptplan.reservations.purchase`): scenarios s with probability p_s, weeks w of
168 h, keys k (provider, region, instance type), demand classes j of key k(j) with demand D_sjw
(average concurrent nodes), on-demand price o_k, spot price σ_j per useful node-hour (only for
classes that may run on spot and where spot is cheaper), products i of key k(i) with horizon
cost c_i per node (recurring + upfront share of the term inside the horizon) and week coverage
a_iw ∈ [0, 1], held nodes E_kw (until they expire) at a constant cost C_E.

Variables (names from ``[A-Za-z0-9_]``; :attr:`ReserveModel.names` maps name → (family, key))::

    x_i ∈ Z, 0 ≤ x_i ≤ ⌈max_sw Σ_j∈k(i) D_sjw⌉   nodes of product i bought now
    u_sjw ∈ [0, D_sjw]   committed node-weeks serving class j        (only where D_sjw > 0)
    v_sjw ∈ [0, D_sjw]   spot nodes serving class j                  (spot classes only)
    on-demand serves the rest, D_sjw − u_sjw − v_sjw

Constraint families:

* ``cover``     u_sjw + v_sjw ≤ D_sjw                    (the rest runs on on-demand)
* ``capacity``  Σ_j∈k u_sjw ≤ E_kw + Σ_i∈k a_iw x_i     committed nodes used ≤ held + bought
* ``cvar``      η_s ≥ cost_s − θ, η_s ≥ 0                (only with a risk term)

Scenario cost: cost_s = Σ_i c_i x_i + C_E + 168·Σ_jw [o_k(D − u − v) + σ_j v].
Objective: min Σ_s p_s cost_s; with ``--risk cvar:α[:ω]``, min (1 − ω)·Σ_s p_s cost_s +
ω·(θ + Σ_s p_s η_s / (1 − α)), the Rockafellar–Uryasev linearisation of CVaR_α (the expected
cost of the worst 1 − α of probability mass), ω = 0.5 unless given.

Spend commitments q (:mod:`ptplan.reservations.spend`): y_q ∈ Z≥0 steps of ``step`` $/h;
z_sqjw ∈ [0, D_sjw] node-weeks of class j it covers (only where that saves); ``cover`` becomes
u + v + Σ_q z ≤ D; ``spend``  Σ_j c_qk(j) z_sqjw ≤ a_qw·step·y_q; the cost adds
step·y_q·H_q and −168·s_qk·z. With ``--ladder`` every product and commitment appears once per
purchase week (its own a_iw), so the model is unchanged.

The upper bound on x_i is valid: a node beyond the key's peak demand is never used and costs
c_i ≥ 0, so some optimum lies within it. Always feasible (on-demand is unbounded).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import pulp

from ptplan.core.errors import PlannerError
from ptplan.core.lp import check_solver, run, var
from ptplan.reservations.problem import HOURS_PER_WEEK, Problem


@dataclass
class ReserveModel:
    prob: pulp.LpProblem
    x: list[pulp.LpVariable]
    u: dict[tuple[int, int, int], pulp.LpVariable]
    v: dict[tuple[int, int, int], pulp.LpVariable]
    names: dict[str, tuple[str, str]] = field(default_factory=dict)
    y: list[pulp.LpVariable] = field(default_factory=list)
    z: dict[tuple[int, int, int, int], pulp.LpVariable] = field(default_factory=dict)


@dataclass
class ReserveSolution:
    counts: list[int]
    steps: list[int]
    """Per spend commitment: its $/h in steps of ``step``."""
    objective: float
    status: str
    gap: float
    seconds: float
    solver: str
    used: list[np.ndarray]
    spot: list[np.ndarray]
    covered: list[np.ndarray]
    """Per class, (S, W) nodes covered by spend commitments."""
    spent: list[np.ndarray]
    """Per spend commitment, (S, W) commitment dollars per hour consumed."""
    variables: int
    integers: int
    constraints: int


def build(pb: Problem) -> ReserveModel:
    S, W = len(pb.scenarios), pb.weeks
    prob = pulp.LpProblem("reserve", pulp.LpMinimize)
    names: dict[str, tuple[str, str]] = {}
    demand_by_key = np.zeros((len(pb.keys), S, W))
    for c in pb.classes:
        demand_by_key[c.key] += c.nodes
    x = []
    for i, p in enumerate(pb.products):
        ub = math.ceil(float(demand_by_key[p.key].max()) - 1e-9) if p.active.any() else 0
        xi = var(prob, f"x_{i}", 0, max(ub, 0), pulp.LpInteger)
        names[xi.name] = ("buy", p.name)
        x.append(xi)
    y = []
    for q, r in enumerate(pb.spend):
        need = np.zeros((S, W))
        for c in pb.classes:
            if c.key in r.rates:
                need += r.rates[c.key][0] * c.nodes
        on = r.active > 0
        ub = math.ceil(float((need[:, on] / r.active[on]).max(initial=0.0)) / r.step - 1e-9)
        yq = var(prob, f"y_{q}", 0, max(ub, 0), pulp.LpInteger)
        names[yq.name] = ("commit", r.name)
        y.append(yq)
    u: dict[tuple[int, int, int], pulp.LpVariable] = {}
    v: dict[tuple[int, int, int], pulp.LpVariable] = {}
    z: dict[tuple[int, int, int, int], pulp.LpVariable] = {}
    cost: list[pulp.LpAffineExpression] = []
    for s in range(S):
        terms: dict[pulp.LpVariable, float] = {}
        const = pb.existing_cost_usd
        for i, p in enumerate(pb.products):
            terms[x[i]] = p.unit_cost_usd
        for q, r in enumerate(pb.spend):
            terms[y[q]] = r.step * r.paid_hours
        for j, c in enumerate(pb.classes):
            od = pb.on_demand[c.key] or 0.0
            for w in map(int, np.flatnonzero(c.nodes[s] > 0)):
                d = float(c.nodes[s, w])
                const += HOURS_PER_WEEK * od * d
                uv = var(prob, f"u_{s}_{j}_{w}", 0, d)
                names[uv.name] = ("use", f"{pb.scenarios[s]}:{j}:{w}")
                u[s, j, w] = uv
                terms[uv] = -HOURS_PER_WEEK * od
                alts = []
                if c.spot_usd_per_hour is not None:
                    vv = var(prob, f"v_{s}_{j}_{w}", 0, d)
                    names[vv.name] = ("spot", f"{pb.scenarios[s]}:{j}:{w}")
                    v[s, j, w] = vv
                    terms[vv] = HOURS_PER_WEEK * (c.spot_usd_per_hour - od)
                    alts.append(vv)
                for q, r in enumerate(pb.spend):
                    if c.key not in r.rates or r.active[w] <= 0 or r.saving(c, od) <= 0:
                        continue
                    zv = var(prob, f"z_{s}_{q}_{j}_{w}", 0, d)
                    names[zv.name] = ("spend", f"{pb.scenarios[s]}:{r.name}:{j}:{w}")
                    z[s, q, j, w] = zv
                    terms[zv] = -HOURS_PER_WEEK * r.rates[c.key][1]
                    alts.append(zv)
                if alts:
                    row = f"cover_{s}_{j}_{w}"
                    prob += uv + pulp.lpSum(alts) <= d, row
                    names[row] = ("cover", f"{pb.scenarios[s]}:{j}:{w}")
        cost.append(pulp.LpAffineExpression(terms, constant=const))
    classes_of: dict[int, list[int]] = {}
    for j, c in enumerate(pb.classes):
        classes_of.setdefault(c.key, []).append(j)
    products_of: dict[int, list[int]] = {}
    for i, p in enumerate(pb.products):
        products_of.setdefault(p.key, []).append(i)
    for s in range(S):
        for k, js in classes_of.items():
            for w in range(W):
                load = [u[s, j, w] for j in js if (s, j, w) in u]
                if not load:
                    continue
                bought = [(x[i], float(pb.products[i].active[w])) for i in products_of.get(k, [])
                          if pb.products[i].active[w] > 0]
                row = f"capacity_{s}_{k}_{w}"
                prob += (pulp.lpSum(load) - pulp.LpAffineExpression(bought)
                         <= float(pb.existing_nodes[k, w])), row
                names[row] = ("capacity", f"{pb.scenarios[s]}:{'/'.join(pb.keys[k])}:{w}")
    spent: dict[tuple[int, int, int], list[tuple[pulp.LpVariable, float]]] = {}
    for (s, q, j, w), zv in z.items():
        spent.setdefault((s, q, w), []).append((zv, pb.spend[q].rates[pb.classes[j].key][0]))
    for (s, q, w), load in sorted(spent.items(), key=lambda kv: kv[0]):
        r = pb.spend[q]
        row = f"spend_{s}_{q}_{w}"
        prob += (pulp.LpAffineExpression(load) - float(r.active[w]) * r.step * y[q] <= 0), row
        names[row] = ("spend", f"{pb.scenarios[s]}:{r.name}:{w}")
    expected = pulp.lpSum(float(pb.prob[s]) * cost[s] for s in range(S))
    if pb.risk is None:
        prob += expected
    else:
        theta = var(prob, "cvar_theta")
        eta = [var(prob, f"cvar_eta_{s}", 0) for s in range(S)]
        for s in range(S):
            prob += eta[s] >= cost[s] - theta, f"cvar_{s}"
            names[f"cvar_{s}"] = ("cvar", pb.scenarios[s])
        a, w_ = pb.risk.alpha, pb.risk.weight
        tail = theta + pulp.lpSum(float(pb.prob[s]) * eta[s] for s in range(S)) / (1 - a)
        prob += (1 - w_) * expected + w_ * tail
    return ReserveModel(prob, x, u, v, names, y, z)


SPEND_GAP = 1e-9
"""Relative MIP gap when spend commitments or later purchases are in the model."""
TIE_TOL = 1e-7
"""Relative slack on the expected cost when breaking ties among equally cheap purchases."""


def _tie_break(pb: Problem, model: ReserveModel, primary: pulp.LpAffineExpression,
               best: float, solver: str, time_limit: float, gap: float) -> float:
    """Among purchases as cheap as the optimum (to :data:`TIE_TOL`), the one with the fewest
    weighted commitment dollars: weight 3 for instance reservations, 2 for EC2 Instance
    Savings Plans, 1 for Compute Savings Plans and flexible CUDs (the more flexible wins a
    tie), plus (W − buy week)/(W + 1) (a later purchase wins a tie). Equal rates make such ties
    common (the catalog's Instance SP and RI defaults are both 35 % off), and without this rule
    HiGHS and CBC may pick different purchases of the same cost. Returns the primary objective
    at the chosen purchase; the first solution stands if the second solve fails."""
    W = pb.weeks
    rank = {"ec2_instance_savings_plan": 2.0, "compute_savings_plan": 1.0, "flexible_cud": 1.0}
    terms: dict[pulp.LpVariable, float] = {}
    for xi, p in zip(model.x, pb.products, strict=True):
        terms[xi] = (3.0 + (W - p.buy_week) / (W + 1)) * p.unit_cost_usd
    for yq, r in zip(model.y, pb.spend, strict=True):
        terms[yq] = (rank[r.kind] + (W - r.buy_week) / (W + 1)) * r.step * r.paid_hours
    values = {v.name: v.value() for v in model.prob.variables()}
    model.prob += primary <= best + TIE_TOL * max(1.0, abs(best)), "tie_break_cost"
    model.prob.setObjective(pulp.LpAffineExpression(terms))
    if run(model.prob, solver, time_limit, gap) == "optimal":
        return float(pulp.value(primary) or 0.0)
    for v in model.prob.variables():  # pragma: no cover - numerical trouble only
        v.varValue = values.get(v.name)
    return best


def solve(pb: Problem, solver: str = "highs", time_limit: float = 300.0,
          gap: float = 1e-6) -> ReserveSolution:
    """Build and solve; raises :class:`PlannerError` if the solver returns no solution."""
    check_solver(solver)
    start = time.perf_counter()
    model = build(pb)
    if pb.spend or any(p.buy_week for p in pb.products):
        # commitments in $0.001/h steps move the cost by cents: a 1e-6 gap would leave a
        # few steps wrong (and a tie-break would keep them)
        gap = min(gap, SPEND_GAP)
    status = run(model.prob, solver, time_limit, gap)
    if status not in ("optimal", "time_limit"):
        raise PlannerError(f"the MILP solver returned {status!r} for a model that is always "
                           "feasible; retry with --solver cbc or report a bug")
    primary = model.prob.objective
    objective_value = float(pulp.value(primary) or 0.0)
    if status == "optimal" and (pb.spend or any(p.buy_week for p in pb.products)):
        objective_value = _tie_break(pb, model, primary, objective_value, solver, time_limit,
                                     gap)
    seconds = time.perf_counter() - start
    S, W = len(pb.scenarios), pb.weeks
    used = [np.zeros((S, W)) for _ in pb.classes]
    spot = [np.zeros((S, W)) for _ in pb.classes]
    for (s, j, w), uv in model.u.items():
        used[j][s, w] = uv.value() or 0.0
    for (s, j, w), vv in model.v.items():
        spot[j][s, w] = vv.value() or 0.0
    covered = [np.zeros((S, W)) for _ in pb.classes]
    spent = [np.zeros((S, W)) for _ in pb.spend]
    for (s, q, j, w), zv in model.z.items():
        covered[j][s, w] += zv.value() or 0.0
        spent[q][s, w] += (zv.value() or 0.0) * pb.spend[q].rates[pb.classes[j].key][0]
    counts = [round(xv.value() or 0.0) for xv in model.x]
    steps = [round(yv.value() or 0.0) for yv in model.y]
    gap_value = 0.0
    highs = getattr(model.prob, "solverModel", None)
    if solver == "highs" and highs is not None:
        info = highs.getInfo()
        gap_value = float(max(0.0, info.mip_gap)) if info.mip_gap < 1e30 else 0.0
    return ReserveSolution(
        counts=counts, steps=steps, objective=objective_value,
        status=status,
        gap=gap_value, seconds=seconds, solver=solver, used=used, spot=spot,
        covered=covered, spent=spent,
        variables=model.prob.numVariables(), integers=len(model.x) + len(model.y),
        constraints=model.prob.numConstraints())
