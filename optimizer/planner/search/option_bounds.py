"""Per-option lower bounds over pool frontiers, and the options the MILP keeps.

:func:`option_bounds` bounds, for every option of every pool, the objective of any plan that
uses it: the option combined exactly with the best completion by the other pools (a
Minkowski–Pareto set under the deadline and budget for sync / colocated layouts; for async
ones the cheapest other options under each candidate maximum busy time). Options whose bound
exceeds the incumbent (:func:`ptplan.planner.search.exact.best`) cannot be in an optimum and are
left out of the MILP (:func:`prune_for_milp`).
"""

from __future__ import annotations

import numpy as np

from ptplan.planner.frontier.frontiers import Candidates
from ptplan.planner.search.exact import EPS, Best
from ptplan.planner.search.site_bounds import regions_by_bound


def _minkowski(arrs: list[tuple[np.ndarray, np.ndarray]], deadline: float | None,
               limit: float = np.inf, objective: str = "cost", extra_t: float = 0.0,
               extra_c: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Pareto set of (Σt, Σc) over one option per pool, pruned by deadline and by ``limit``
    (a bound computed with the remaining pools' and ``extra_*`` smallest t and c)."""
    T, C = np.zeros(1), np.zeros(1)
    for i, (t, c) in enumerate(arrs):
        T2 = (T[:, None] + t[None, :]).ravel()
        C2 = (C[:, None] + c[None, :]).ravel()
        rt = extra_t + sum(float(a[0].min()) for a in arrs[i + 1:])
        rc = extra_c + sum(float(a[1].min()) for a in arrs[i + 1:])
        ok = np.ones(len(T2), dtype=bool)
        if deadline is not None:
            ok &= T2 + rt <= deadline * (1 + EPS) + EPS
        if np.isfinite(limit):
            lb = T2 + rt if objective == "time" else (T2 + rt) * (C2 + rc)
            ok &= lb <= limit * (1 + 1e-6) + 1e-7
        T2, C2 = T2[ok], C2[ok]
        if len(T2) == 0:
            return T2, C2
        sub = np.lexsort((C2, T2))
        cs = C2[sub]
        prev = np.concatenate(([np.inf], np.minimum.accumulate(cs)[:-1]))
        keep = sub[cs < prev - 1e-12]
        T, C = T2[keep], C2[keep]
    return T, C


def option_bounds(c: Candidates, deadline: float | None, budget: float | None, objective: str,
                  limit: float = np.inf) -> dict[str, np.ndarray]:
    """Per pool and frontier index: a lower bound on the objective of any plan using it.

    sync / colocated: exact (the best completion over the Minkowski–Pareto set of the other
    pools, under the deadline and budget). async: exact for rollout options (best over the
    candidate maxima m ≥ t, the other pools at their cheapest option within m); for other pools
    the same with the fill term of the fastest rollout option. Egress: the option's own plus
    the least of the other pools'.
    """
    lay = c.layout
    out = {n: np.full(len(f.t), np.inf) for n, f in c.frontiers.items()}
    for bound, region, arrs in regions_by_bound(c, objective):
        if bound > limit * (1 + 1e-6) + 1e-7:
            break
        names = list(arrs)
        is_async = lay.mode == "async" and "rollout" in arrs
        min_e = {k: float(a[3].min()) for k, a in arrs.items()}
        for n in names:
            t, cc, order, own_e = arrs[n]
            # egress: the option's own, plus the least of every other pool (a lower bound)
            e_add = own_e[:, None] + sum(v for k, v in min_e.items() if k != n)
            if not is_async:
                T_r, C_r = _minkowski([arrs[k][:2] for k in names if k != n], deadline, limit,
                                      objective, float(t.min()), float(cc.min()))
                if len(T_r) == 0:
                    continue
                T = t[:, None] + T_r[None, :]
                C = cc[:, None] + C_r[None, :]
            else:
                # the run is m + fill for a maximum m ≥ t; the other pools take their cheapest
                # option with busy time ≤ m, G(m), a step function falling only where some
                # pool's running-minimum price falls. Between such steps the cost only grows
                # with m, so m = t and the steps above t are the only candidates (exact).
                others = [arrs[k] for k in names if k != n]

                def cheapest(x: np.ndarray, others=others) -> np.ndarray:
                    total = np.zeros(x.shape)
                    for tk, ck, _, _ in others:
                        pos = np.searchsorted(tk, x + 1e-12, side="right") - 1
                        run = np.minimum.accumulate(ck)
                        total = total + np.where(pos >= 0, run[np.maximum(pos, 0)], np.inf)
                    return total

                steps = [tk[np.concatenate(([True], np.diff(np.minimum.accumulate(ck)) < 0))]
                         for tk, ck, _, _ in others]
                m = np.unique(np.concatenate(steps)) if steps else np.zeros(0)
                fill = (lay.fill_fraction * t[:, None] if n == "rollout"
                        else lay.fill_fraction * float(arrs["rollout"][0].min()))
                m_all = np.concatenate([t[:, None], np.broadcast_to(m[None, :], (len(t), len(m)))],
                                       axis=1)
                G = np.concatenate([cheapest(t)[:, None],
                                    np.broadcast_to(cheapest(m)[None, :], (len(t), len(m)))],
                                   axis=1)
                T = np.where(m_all >= t[:, None] - 1e-12, m_all + fill, np.inf)
                C = cc[:, None] + G
            with np.errstate(invalid="ignore"):
                cost = T * C + e_add + c.extra_cost(region, np.where(np.isfinite(T), T, 0.0))
            ok = np.isfinite(cost) & np.isfinite(T)
            if deadline is not None:
                ok &= deadline * (1 + EPS) + EPS >= T
            if budget is not None:
                ok &= cost <= budget * (1 + EPS) + EPS
            value = cost if objective == "cost" else np.broadcast_to(T, cost.shape)
            value = np.where(ok, value, np.inf)
            np.minimum.at(out[n], order, value.min(axis=1))
    return out


def prune_for_milp(c: Candidates, incumbent: Best, deadline: float | None,
                   budget: float | None, objective: str, keep_gap: float = 1e-6,
                   max_per_pool: int | None = None) -> dict[str, np.ndarray]:
    """Frontier indices per pool whose bound is within ``keep_gap`` of the incumbent (the
    ``max_per_pool`` lowest bounds at most), ordered by bound."""
    limit = incumbent.usd if objective == "cost" else incumbent.run_hours
    bounds = option_bounds(c, deadline, budget, objective, limit * (1 + keep_gap))
    out = {}
    for n, b in bounds.items():
        idx = np.nonzero(b <= limit * (1 + keep_gap) + 1e-7)[0]
        idx = idx[np.argsort(b[idx], kind="stable")]
        out[n] = idx[:max_per_pool] if max_per_pool else idx
    return out
