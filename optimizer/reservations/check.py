"""Independent re-check of a ``ptplan reserve`` answer: costs and coverage without the MILP.

Given only the purchase counts and the weekly demand of :mod:`ptplan.reservations.purchase`, the
cheapest use of held + bought commitments is greedy: in every scenario and week, each committed node
serves the demand whose alternative is dearest (demand that must run on on-demand first, then
spot-ok demand, dearest spot first), because a committed node-hour costs nothing at the margin
and saves exactly the alternative's price; the rest runs on spot where allowed and cheaper,
else on-demand. :func:`evaluate` computes every scenario's cost that way, :func:`verify`
compares it with the MILP's objective and checks the MILP's own dispatch row by row, and the
reported numbers are the recomputed ones (so HiGHS and CBC print the same bytes).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ptplan.reservations.problem import HOURS_PER_WEEK, TOL, Problem


@dataclass
class Evaluation:
    capacity: np.ndarray
    """(K, W) committed nodes: held + bought."""
    used: list[np.ndarray]
    on_demand: list[np.ndarray]
    spot: list[np.ndarray]
    """Per class, (S, W) nodes."""
    covered: list[np.ndarray]
    """Per class, (S, W) nodes covered by spend commitments (they run on on-demand)."""
    spent: list[np.ndarray]
    """Per spend commitment, (S, W) commitment $/h consumed."""
    new_cost_usd: float
    on_demand_cost: np.ndarray
    spot_cost: np.ndarray
    total: np.ndarray
    """(S,) USD per scenario, including held commitments."""

    def expected(self, pb: Problem) -> float:
        return float(pb.prob @ self.total)


def capacity(pb: Problem, counts: list[int]) -> np.ndarray:
    cap = pb.existing_nodes.copy()
    for n, p in zip(counts, pb.products, strict=True):
        cap[p.key] += n * p.active
    return cap


def evaluate(pb: Problem, counts: list[int], steps: list[int] | None = None) -> Evaluation:
    """The bill of held + bought commitments, scenario by scenario and week by week, in the
    providers' order: instance reservations (each node to the dearest alternative first), then
    spend commitments in :attr:`SpendRow.rank` order, each to the usage it saves most on per
    commitment dollar first (see :mod:`ptplan.reservations.spend` for why that is also the
    cheapest use)."""
    steps = steps if steps is not None else [0] * len(pb.spend)
    cap = capacity(pb, counts)
    S, W = len(pb.scenarios), pb.weeks
    left = np.broadcast_to(cap[:, None, :], (cap.shape[0], S, W)).copy()
    used = [np.zeros((S, W)) for _ in pb.classes]
    od = [np.zeros((S, W)) for _ in pb.classes]
    sp = [np.zeros((S, W)) for _ in pb.classes]

    def alternative(j: int) -> float:
        c = pb.classes[j]
        price = pb.on_demand[c.key] or 0.0
        return min(price, c.spot_usd_per_hour) if c.spot_usd_per_hour is not None else price

    order = sorted(range(len(pb.classes)), key=lambda j: (-alternative(j), j))
    od_cost, spot_cost = np.zeros(S), np.zeros(S)
    rests = []
    for j in order:
        c = pb.classes[j]
        take = np.minimum(c.nodes, left[c.key])
        left[c.key] -= take
        used[j] = take
        rests.append(c.nodes - take)
    covered = [np.zeros((S, W)) for _ in pb.classes]
    spent = [np.zeros((S, W)) for _ in pb.spend]
    rest_of = dict(zip(order, rests, strict=True))
    for q, (n, r) in enumerate(zip(steps, pb.spend, strict=True)):
        budget = np.broadcast_to(n * r.step * r.active, (S, W)).copy()
        for j in r.order(pb.classes, pb.on_demand):
            c = pb.classes[j]
            rate, saved = r.rates[c.key]
            take = np.minimum(rest_of[j], budget / rate)
            rest_of[j] = rest_of[j] - take
            budget -= take * rate
            spent[q] += take * rate
            covered[j] += take
            od_cost += take.sum(axis=1) * HOURS_PER_WEEK * ((pb.on_demand[c.key] or 0.0) - saved)
    for j in order:
        c = pb.classes[j]
        rest = rest_of[j]
        price = pb.on_demand[c.key] or 0.0
        if c.spot_usd_per_hour is not None:
            sp[j] = rest
            spot_cost += rest.sum(axis=1) * HOURS_PER_WEEK * c.spot_usd_per_hour
        else:
            od[j] = rest
            od_cost += rest.sum(axis=1) * HOURS_PER_WEEK * price
    new = sum(n * p.unit_cost_usd for n, p in zip(counts, pb.products, strict=True))
    new += sum(n * r.step * r.paid_hours for n, r in zip(steps, pb.spend, strict=True))
    total = new + pb.existing_cost_usd + od_cost + spot_cost
    return Evaluation(cap, used, od, sp, covered, spent, float(new), od_cost, spot_cost, total)


def cvar(pb: Problem, costs: np.ndarray, alpha: float) -> float:
    """CVaR of a discrete cost distribution: min over θ of θ + E[(cost − θ)+]/(1 − α); the
    minimum is attained at one of the scenario costs (Rockafellar–Uryasev)."""
    return float(min(t + pb.prob @ np.maximum(costs - t, 0.0) / (1 - alpha) for t in costs))


def objective(pb: Problem, ev: Evaluation) -> float:
    if pb.risk is None:
        return ev.expected(pb)
    w = pb.risk.weight
    return (1 - w) * ev.expected(pb) + w * cvar(pb, ev.total, pb.risk.alpha)


def on_demand_only(pb: Problem) -> np.ndarray:
    """(S,) every node-hour on on-demand: no commitments held or bought, no spot."""
    out = np.zeros(len(pb.scenarios))
    for c in pb.classes:
        out += c.nodes.sum(axis=1) * HOURS_PER_WEEK * (pb.on_demand[c.key] or 0.0)
    return out


def verify(pb: Problem, counts: list[int], milp_objective: float, status: str,
           used: list[np.ndarray], spot: list[np.ndarray],
           steps: list[int] | None = None, covered: list[np.ndarray] | None = None,
           spent: list[np.ndarray] | None = None) -> list[str]:
    """Re-check a MILP answer from the purchase and the demand alone (empty list =
    consistent)."""
    problems: list[str] = []
    steps = steps if steps is not None else [0] * len(pb.spend)
    if any(n < 0 or int(n) != n for n in counts):
        problems.append(f"purchase counts must be whole and non-negative: {counts}")
    if any(n < 0 or int(n) != n for n in steps):
        problems.append(f"commitment steps must be whole and non-negative: {steps}")
    ev = evaluate(pb, counts, steps)
    S, W = len(pb.scenarios), pb.weeks
    covered = covered if covered is not None else [np.zeros((S, W)) for _ in pb.classes]
    for q, (n, r) in enumerate(zip(steps, pb.spend, strict=True)):
        load = spent[q] if spent is not None else np.zeros((S, W))
        if (load > n * r.step * r.active[None, :] + TOL * max(1.0, n * r.step)).any():
            problems.append(f"commitment {r.name}: the MILP consumes more than its "
                            f"{n * r.step:g} $/h in some week")
    best = objective(pb, ev)
    scale = max(1.0, abs(best))
    if best > milp_objective + 1e-6 * scale:
        problems.append(f"recomputed objective {best:.4f} exceeds the MILP's "
                        f"{milp_objective:.4f} for the same purchase")
    if status == "optimal" and milp_objective > best + 1e-6 * scale:
        problems.append(f"the MILP's objective {milp_objective:.4f} exceeds the cheapest use "
                        f"of its own purchase ({best:.4f})")
    load = np.zeros_like(ev.capacity[:, None, :].repeat(len(pb.scenarios), axis=1))
    for j, c in enumerate(pb.classes):
        u, s, z = used[j], spot[j], covered[j]
        if (u < -TOL).any() or (s < -TOL).any() or (z < -TOL).any() or \
                (u + s + z > c.nodes + TOL).any():
            problems.append(f"class {j} ({'/'.join(pb.keys[c.key])}): dispatch outside "
                            "0 <= committed + spot <= demand")
        if c.spot_usd_per_hour is None and (s > TOL).any():
            problems.append(f"class {j}: spot used by demand that may not run on spot")
        load[c.key] += u
        e_sum = ev.used[j] + ev.covered[j] + ev.on_demand[j] + ev.spot[j]
        if not np.allclose(e_sum, c.nodes, atol=TOL):
            problems.append(f"class {j}: recomputed coverage does not add up to demand")
    if (load > ev.capacity[:, None, :] + TOL).any():
        problems.append("the MILP uses more committed nodes than held + bought in some week")
    recomputed = ev.new_cost_usd + pb.existing_cost_usd + ev.on_demand_cost + ev.spot_cost
    if not np.allclose(recomputed, ev.total):
        problems.append("scenario totals differ from the sum of their parts")
    return problems


