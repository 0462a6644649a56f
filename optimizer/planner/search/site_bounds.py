"""Sites by lower bound: each pool's options at a site as arrays, and the bound on any plan
at a site that orders the exact search (:func:`ptplan.planner.search.exact.best`) and the option
bounds (:mod:`ptplan.planner.search.option_bounds`).

Without cross-region entries a site's bound comes from each pool's per-site minima (min busy
time, min $/h, min busy time × $/h, min egress), computed for all sites at once, and a site's
arrays are built only when read (:class:`SiteArrays`), kept on the pool's frontier for the
layouts that share it. With cross-region entries (split plans), whose egress is priced
against the site, every site's arrays are built eagerly.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping

import numpy as np

from ptplan.planner.frontier.frontiers import Candidates, PoolFrontier
from ptplan.planner.frontier.pareto import pareto_mask3


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
    (:meth:`Candidates.extra_cost_with`), the fixed network per site."""
    out = np.empty(len(sites))
    by_place: dict[tuple[str, str], list[int]] = {}
    for k, site in enumerate(sites.tolist()):
        by_place.setdefault(c.regions[site][:2], []).append(k)
    for rows in by_place.values():
        at = np.asarray(rows)
        d = run_hours[at]
        fixed = np.asarray([c.fixed_network(int(s)) for s in sites[at]])
        out[at] = c.extra_cost_with(int(sites[at[0]]), fixed, d)
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
