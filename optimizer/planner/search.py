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

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import numpy as np

from optimizer.planner.frontier import Candidates, PoolFrontier
from optimizer.planner.pareto import pareto_mask3

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


def _cross_region(c: Candidates, f, site: int) -> tuple[np.ndarray, np.ndarray]:
    """Cross-region entries of a pool usable with a trainer at ``site`` (other regions), and
    their egress priced against it; pruned by Pareto dominance in (t, c, nodes) within each
    group of places that share a price per node and a fixed part (exact: there e is
    increasing in the nodes)."""
    home = c.regions[site]
    key = ("cross_region", f.pool.name, home[:2])
    if key in c.memo:
        return c.memo[key]
    assert c.network is not None
    idx_all = np.nonzero(f.place >= 0)[0]
    price: dict[int, tuple[float, float]] = {}
    for p in np.unique(f.place[idx_all]):
        place = c.places[int(p)]
        if place == home[:2]:
            continue
        _, per_node, fixed = c.network.cross_region_terms(home, place)
        price[int(p)] = (per_node, fixed)
    keep_idx, keep_e = [], []
    classes: dict[tuple[float, float], list[int]] = {}
    for p, pr in price.items():
        classes.setdefault((round(pr[0], 9), round(pr[1], 9)), []).append(p)
    for (per_node, fixed), ps in sorted(classes.items()):
        idx = idx_all[np.isin(f.place[idx_all], ps)]
        nodes = f.i[idx] + f.j[idx]
        sel = idx[pareto_mask3(f.t[idx], f.c[idx], nodes)]
        keep_idx.append(sel)
        keep_e.append((f.i[sel] + f.j[sel]) * per_node + fixed)
    out = ((np.concatenate(keep_idx), np.concatenate(keep_e)) if keep_idx
           else (np.zeros(0, dtype=int), np.zeros(0)))
    c.memo[key] = out
    return out


def _region_arrays(c: Candidates, region: int) -> dict[str, tuple[np.ndarray, np.ndarray,
                                                                    np.ndarray, np.ndarray]]:
    """Per pool at one site: (busy hours, $/h, frontier index, egress USD), by busy time. A
    pool's arrays at a site depend on its frontier alone unless it has cross-region entries
    (priced against the site): they are kept on the frontier, which the layouts sharing the
    pool share."""
    out = {}
    for name, f in c.frontiers.items():
        cross = _has_cross(f)
        key = ("site", len(c.regions), region)  # a site is an index into the sites list
        hit = None if cross else f.memo.get(key)
        if hit is None:
            idx = _at_site(f, region, len(c.regions))
            e = f.e[idx]
            if cross:
                extra, extra_e = _cross_region(c, f, region)
                idx = np.concatenate([idx, extra])
                e = np.concatenate([e, extra_e])
            order = np.argsort(f.t[idx], kind="stable")
            hit = (f.t[idx[order]], f.c[idx[order]], idx[order], e[order])
            if not cross:
                f.memo[key] = hit
        out[name] = hit
    return out


def _has_cross(f: PoolFrontier) -> bool:
    """Whether the frontier has cross-region entries (split plans)."""
    hit = f.memo.get("cross")
    if hit is None:
        hit = f.memo["cross"] = bool((f.place >= 0).any())
    return hit  # type: ignore[no-any-return]


def _by_site(f: PoolFrontier, n_sites: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The frontier grouped by site once (a stable sort): (order, sites in that order, where
    each site 0 .. ``n_sites`` starts in it)."""
    hit = f.memo.get(("by site", n_sites))
    if hit is None:
        order = np.argsort(f.region, kind="stable")
        sorted_sites = f.region[order]
        starts = np.searchsorted(sorted_sites, np.arange(n_sites + 1))
        hit = f.memo[("by site", n_sites)] = (order, sorted_sites, starts)
    return hit  # type: ignore[no-any-return]


def _at_site(f: PoolFrontier, region: int, n_sites: int) -> np.ndarray:
    """Indices (ascending) of a pool's options at one site (:func:`_by_site`)."""
    order, _, starts = _by_site(f, n_sites)
    return order[starts[region]:starts[region + 1]]


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


def region_bound(c: Candidates, arrs: Mapping, objective: str, region: int = -1) -> float:
    """A lower bound on any plan at one site, with m_k = min t·c of pool k at the site:
    compute ≥ max(Σ_k m_k, T_min·Σ_k min c), and more where the layout allows —

    * sync / colocated (T = Σ t_k): T·C = (Σ t_k)(Σ c_k) ≥ (Σ_k √(t_k c_k))² ≥ (Σ_k √m_k)²
      (Cauchy–Schwarz), far above Σ m_k when the pools cost alike;
    * async (T = max t_k + φ·t_rollout ≥ t_k, and ≥ (1 + φ)·t_rollout): c_k·T ≥ m_k and
      c_rollout·T ≥ (1 + φ)·m_rollout;

    plus Σ_k min e + storage(T_min) + fixed network."""
    minima = {n: (float(a[0].min()), float(a[1].min()), float((a[0] * a[1]).min()),
                  float(a[3].min())) for n, a in arrs.items()}
    return _bound(c, minima, objective, region)


def _bound(c: Candidates, minima: dict[str, tuple[float, float, float, float]],
           objective: str, region: int) -> float:
    """:func:`region_bound` from each pool's (min t, min c, min t·c, min e) at the site."""
    min_t = {n: v[0] for n, v in minima.items()}
    min_c = {n: v[1] for n, v in minima.items()}
    is_async = c.layout.mode == "async" and "rollout" in minima
    if is_async:
        t_lb = max(min_t.values()) + c.layout.fill_fraction * min_t["rollout"]
    else:
        t_lb = sum(min_t.values())
    if objective == "time":
        return t_lb
    m = {n: v[2] for n, v in minima.items()}
    if is_async:
        busy = sum(m.values()) + c.layout.fill_fraction * m["rollout"]
    else:
        roots = sum(math.sqrt(v) for v in m.values())
        busy = max(sum(m.values()), roots * roots)
    egress = sum(v[3] for v in minima.values())
    extra = float(c.extra_cost(region, t_lb)) if region >= 0 else 0.0
    return max(busy, t_lb * sum(min_c.values())) + egress + extra


def _bounds(c: Candidates, tables: dict[str, np.ndarray], sites: np.ndarray,
            objective: str) -> np.ndarray:
    """:func:`_bound` at many sites at once, from each pool's (options, min t, min c,
    min t·c, min e) rows at those sites: the same operations in the same order, element by
    element, so the same bounds to the bit (``tests/test_site_bounds.py``)."""
    zero = np.zeros(len(sites))
    names = list(tables)
    fill = c.layout.fill_fraction
    is_async = c.layout.mode == "async" and "rollout" in tables

    def total(col: int) -> np.ndarray:
        acc = zero
        for n in names:
            acc = acc + tables[n][:, col]
        return acc

    if is_async:
        longest = tables[names[0]][:, 1]
        for n in names[1:]:
            longest = np.maximum(longest, tables[n][:, 1])
        t_lb = longest + fill * tables["rollout"][:, 1]
    else:
        t_lb = total(1)
    if objective == "time":
        return t_lb
    if is_async:
        busy = total(3) + fill * tables["rollout"][:, 3]
    else:
        roots = zero
        for n in names:
            roots = roots + np.sqrt(tables[n][:, 3])
        busy = np.maximum(total(3), roots * roots)
    return np.maximum(busy, t_lb * total(2)) + total(4) + _extra_at(c, sites, t_lb)


def _extra_at(c: Candidates, sites: np.ndarray, run_hours: np.ndarray) -> np.ndarray:
    """:meth:`Candidates.extra_cost` at each site at its own run time: one call per region
    for what depends on the region (storage, CPU pools), the fixed network per site."""
    out = np.empty(len(sites))
    by_place: dict[tuple[str, str], list[int]] = {}
    for k, site in enumerate(sites.tolist()):
        by_place.setdefault(c.regions[site][:2], []).append(k)
    for rows in by_place.values():
        at = np.asarray(rows)
        d = run_hours[at]
        first = int(sites[at[0]])
        extra = c.storage_cost(first, d) + np.asarray(
            [c.fixed_network(int(s)) for s in sites[at]])
        if c.other is not None:
            extra = extra + c.other.cost(d)
        if c.cpu is not None:
            provider, name = c.regions[first][:2]
            extra = extra + c.cpu.cost(provider, name, d)
        out[at] = extra
    return out


class SiteArrays(Mapping):
    """:func:`_region_arrays` of one site, computed when first read: the search reads them
    only at the sites it visits, and their bounds come from per-site minima
    (:func:`_site_minima`)."""

    def __init__(self, c: Candidates, region: int) -> None:
        self.c, self.region = c, region
        self._arrs: dict | None = None

    def _get(self) -> dict:
        if self._arrs is None:
            self._arrs = _region_arrays(self.c, self.region)
        return self._arrs

    def __getitem__(self, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return self._get()[name]  # type: ignore[no-any-return]

    def __iter__(self) -> Iterator[str]:
        return iter(self.c.frontiers)  # the order of _region_arrays' keys

    def __len__(self) -> int:
        return len(self.c.frontiers)

    def __contains__(self, name: object) -> bool:
        return name in self.c.frontiers


def _site_minima(c: Candidates) -> dict[str, np.ndarray]:
    """Per pool, per site: (options, min t, min c, min t·c, min e) as a (sites × 5) array,
    from the frontier grouped by site once. The same values :func:`region_bound` takes from
    a site's arrays (a minimum does not depend on the order it is taken in)."""
    n_sites = len(c.regions)
    out = {}
    for name, f in c.frontiers.items():
        order, _, starts = _by_site(f, n_sites)
        lo, hi = starts[:-1], starts[1:]
        table = np.full((n_sites, 5), np.inf)
        table[:, 0] = hi - lo
        has = np.nonzero(hi > lo)[0]
        if len(has):
            t, cc, e = f.t[order], f.c[order], f.e[order]
            for col, v in ((1, t), (2, cc), (3, t * cc), (4, e)):
                table[has, col] = np.minimum.reduceat(v, lo[has])
        out[name] = table
    return out


def regions_by_bound(c: Candidates, objective: str) -> list[tuple[float, int, Mapping]]:
    """Regions with options in every pool, by lower bound (cached: candidates are immutable
    once built). Each region's arrays (:class:`SiteArrays`) are computed when first read;
    with cross-region entries (split plans), whose egress depends on the site, eagerly."""
    cached = c.memo.get(("regions_by_bound", objective))
    if cached is not None:
        return cached
    out: list[tuple[float, int, Mapping]] = []
    if any(bool((f.place >= 0).any()) for f in c.frontiers.values()):
        for region in range(len(c.regions)):
            arrs = _region_arrays(c, region)
            if any(len(a[0]) == 0 for a in arrs.values()):
                continue
            if c.cpu is not None and not np.isfinite(c.extra_cost(region, 0.0)):
                continue  # the spec's CPU pools have no CPU offer in this region
            out.append((region_bound(c, arrs, objective, region), region, arrs))
    else:
        tables = _site_minima(c)
        sites = np.arange(len(c.regions))
        for tab in tables.values():
            sites = sites[tab[sites, 0] > 0]  # options in every pool
        if c.cpu is not None and len(sites):
            sites = sites[np.isfinite(_extra_at(c, sites, np.zeros(len(sites))))]
        bounds = _bounds(c, {n: tab[sites] for n, tab in tables.items()}, sites, objective)
        out = [(float(bounds[k]), int(sites[k]), SiteArrays(c, int(sites[k])))
               for k in range(len(sites))]
    out.sort(key=lambda x: (x[0], x[1]))
    c.memo[("regions_by_bound", objective)] = out
    return out


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
