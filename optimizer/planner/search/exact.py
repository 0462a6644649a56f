"""Exact enumeration over pool frontiers: the bound that keeps the MILP small.

For one layout, every region's Pareto options are combined exactly:

* sync / colocated: run time T = Σ_k t_k, holding price C = Σ_k c_k. Pools are combined one
  at a time by Minkowski sum followed by a Pareto filter (a dominated partial combination can
  never beat the one dominating it, since cost = T·C is increasing in both), then every
  surviving (T, C) is scored.
* async: T = max_k t_k + φ·t_rollout. For every rollout option and every candidate maximum m
  (any option's busy time), each other pool takes its cheapest option with t ≤ m (on a Pareto
  list: the last one with t ≤ m). The optimum is among these pairs: lowering T to the longest
  pool's time never raises cost.

Egress: an option may carry a fixed egress cost e (the rollout pool's weight sync to nodes
outside the trainer's zone or region); a plan costs T·C + Σ e + storage(T) + fixed network
(dataset staging, checkpoint copies) of its site. Only the rollout pool has e > 0, and it is
combined last (sync: no Pareto filter after it; async: its options are enumerated), so e is
added exactly.

Deadline (T ≤ deadline) and budget (cost ≤ budget) filter candidates; objective ``cost`` takes
the minimum cost, ``time`` the minimum T (then cost). The result is the exact optimum over the
frontiers, used (1) to prune options whose lower bound exceeds it before the MILP is built and
(2) as an independent cross-check of the MILP's answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ptplan.planner.frontier.frontiers import Candidates
from ptplan.planner.search.site_bounds import regions_by_bound

EPS = 1e-9


@dataclass(frozen=True)
class Best:
    region: int
    """The site (index into :attr:`Candidates.regions`)."""
    picks: dict[str, int]
    """Pool name -> index into that pool's frontier arrays."""
    run_hours: float
    usd: float


def rank(b: Best, objective: str) -> tuple[float, float]:
    """Sort key of a plan under ``objective``: (cost, run time) or (run time, cost)."""
    return (b.usd, b.run_hours) if objective == "cost" else (b.run_hours, b.usd)


def _choose(T: np.ndarray, C: np.ndarray, deadline: float | None, budget: float | None,
            objective: str, storage=None, E: np.ndarray | float = 0.0) -> int | None:
    base = T * C + E
    ok = np.ones(len(T), dtype=bool)
    if deadline is not None:
        ok &= deadline * (1 + EPS) + EPS >= T
    idx = np.nonzero(ok)[0]
    if len(idx) == 0:
        return None
    if storage is not None and objective == "cost" and len(idx) > 64:
        # storage is non-decreasing in T: it is at least its value at the shortest run, so
        # only candidates within that of the best exact cost found among the cheapest bases
        # can win (this evaluates storage on a few candidates instead of all of them)
        s_lo = float(storage(float(T[idx].min())))
        first = idx[np.argsort(base[idx], kind="stable")[:64]]
        exact = base[first] + storage(T[first])
        if budget is not None:
            exact = np.where(exact <= budget * (1 + EPS) + EPS, exact, np.inf)
        upper = float(exact.min())
        if np.isfinite(upper):
            idx = idx[base[idx] + s_lo <= upper * (1 + 1e-9) + 1e-9]
    cost = base[idx] + (storage(T[idx]) if storage is not None else 0.0)
    if budget is not None:
        keep = cost <= budget * (1 + EPS) + EPS
        idx, cost = idx[keep], cost[keep]
    if len(idx) == 0:
        return None
    # lexsort: the last key is the primary one
    keys = (T[idx], cost) if objective == "cost" else (cost, T[idx])
    return int(idx[np.lexsort(keys)[0]])


def _sync(arrs: Mapping, deadline: float | None, budget: float | None, objective: str,
          limit: float = np.inf, storage=None
          ) -> tuple[float, float, dict[str, int], float] | None:
    # pools with egress last: no Pareto filter on (T, C) after them, so e is added exactly
    names = sorted(arrs, key=lambda n: (bool(arrs[n][3].any()), len(arrs[n][0])))
    rem_t = {n: sum(float(arrs[k][0].min()) for k in names[i + 1:]) for i, n in enumerate(names)}
    rem_c = {n: sum(float(arrs[k][1].min()) for k in names[i + 1:]) for i, n in enumerate(names)}
    T = np.zeros(1)
    C = np.zeros(1)
    picks = np.zeros((1, 0), dtype=int)
    E = np.zeros(1)
    for name in names:
        t, c, order, e = arrs[name]
        if len(t) == 0:
            return None
        T2 = (T[:, None] + t[None, :]).ravel()
        C2 = (C[:, None] + c[None, :]).ravel()
        rows = np.repeat(np.arange(len(T)), len(t))
        cols = np.tile(np.arange(len(t)), len(T))
        E2 = E[rows] + e[cols]
        ok = np.ones(len(T2), dtype=bool)
        t_lb = T2 + rem_t[name]
        if deadline is not None:
            ok &= t_lb <= deadline * (1 + EPS) + EPS
        if np.isfinite(limit):  # branch and bound against the best plan found so far
            lb = t_lb if objective == "time" else t_lb * (C2 + rem_c[name]) + E2 + (
                storage(t_lb) if storage is not None else 0.0)
            ok &= lb <= limit * (1 + 1e-7) + 1e-7
        keep = np.nonzero(ok)[0]
        if len(keep) == 0:
            return None
        if name != names[-1]:  # intermediate Pareto filter
            sub = np.lexsort((C2[keep], T2[keep]))
            cs = C2[keep][sub]
            prev = np.concatenate(([np.inf], np.minimum.accumulate(cs)[:-1]))
            keep = keep[sub[cs < prev - 1e-12]]
        picks = np.concatenate([picks[rows[keep]], order[cols[keep]][:, None]], axis=1)
        T, C, E = T2[keep], C2[keep], E2[keep]
    k = _choose(T, C, deadline, budget, objective, storage, E)
    if k is None:
        return None
    return (float(T[k]), float(C[k]), {n: int(picks[k, i]) for i, n in enumerate(names)},
            float(E[k]))


def _async(arrs: Mapping, fill: float, deadline: float | None, budget: float | None,
           objective: str, storage=None
           ) -> tuple[float, float, dict[str, int], float] | None:
    names = list(arrs)
    if any(len(arrs[n][0]) == 0 for n in names):
        return None
    tr, cr, order_r, er = arrs["rollout"]
    others = [n for n in names if n != "rollout"]
    # The makespan level m is the slowest pool's time. For a rollout option a, only m = t_a or
    # m = a time of another pool above t_a can be optimal: between two such times the other
    # pools' cheapest options (a prefix minimum) do not change and a longer m only costs more.
    levels = np.unique(np.concatenate([arrs[n][0] for n in others])) if others \
        else np.zeros(0)
    grid_a, grid_m = np.meshgrid(np.arange(len(tr)), np.arange(len(levels)), indexing="ij")
    above = levels[grid_m.ravel()] >= tr[grid_a.ravel()] - 1e-12
    A = np.concatenate([np.arange(len(tr)), grid_a.ravel()[above]])
    m = np.concatenate([tr, levels[grid_m.ravel()[above]]])
    M = np.arange(len(m))
    mv = m[M]
    ok = mv >= tr[A] - 1e-12
    C = cr[A].copy()
    idx_other = {}
    for n in others:
        t, c, _, _ = arrs[n]
        pos = np.searchsorted(t, mv + 1e-12, side="right") - 1
        ok &= pos >= 0
        pos = np.maximum(pos, 0)
        C = C + c[pos]
        idx_other[n] = pos
    T = mv + fill * tr[A]
    E = er[A]
    sel = np.nonzero(ok)[0]
    if len(sel) == 0:
        return None
    k = _choose(T[sel], C[sel], deadline, budget, objective, storage, E[sel])
    if k is None:
        return None
    k = int(sel[k])
    picks = {"rollout": int(order_r[A[k]])}
    for n in others:
        picks[n] = int(arrs[n][2][idx_other[n][k]])
    return float(T[k]), float(C[k]), picks, float(E[k])


def best(c: Candidates, deadline: float | None, budget: float | None, objective: str,
         only_region: int | None = None, limit: float = np.inf) -> Best | None:
    """The exact optimum of this layout over all regions, or None if nothing is feasible.

    Regions are visited in order of a lower bound; once the bound exceeds the best plan found,
    the remaining regions cannot hold a better one and are skipped. With ``limit`` (a cost,
    or a run time for objective ``time``, that the caller already has a plan for) the search
    is pruned by it from the start: the result is the optimum when the optimum is below
    ``limit``; otherwise it is None or some plan no better than ``limit``.
    """
    found: list[tuple[tuple[float, float, int], Best]] = []
    incumbent = limit
    for bound, region, arrs in regions_by_bound(c, objective):
        if only_region is not None and region != only_region:
            continue
        if bound > incumbent * (1 + 1e-9) + 1e-9:
            break
        def storage(t, region=region):
            return c.extra_cost(region, t)

        if c.layout.mode == "async" and "rollout" in arrs:
            r = _async(arrs, c.layout.fill_fraction, deadline, budget, objective, storage)
        else:
            r = _sync(arrs, deadline, budget, objective, incumbent, storage)
        if r is None:
            continue
        T, C, picks, E = r
        b = Best(region, picks, T, T * C + E + float(c.extra_cost(region, T)))
        key = (b.usd, b.run_hours, region) if objective == "cost" else (b.run_hours, b.usd, region)
        found.append((key, b))
        incumbent = min(incumbent, key[0])
    if not found:
        return None
    found.sort(key=lambda x: x[0])
    return found[0][1]
