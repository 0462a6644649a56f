"""Busy time of one pool over the (non-spot nodes × spot nodes) grid of one GPU shape.

The grid depends on the shape, the class sizes and the spot classes' overheads, not on
prices, so it is shared by every region (and every price scenario) where those agree.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import accumulate
from typing import NamedTuple

import numpy as np

from ptplan.demand.model import Demand
from ptplan.demand.rates import PhaseRate
from ptplan.planner.candidates import PoolSpec
from ptplan.providers.base import Offer


class BusyGrid(NamedTuple):
    valid: np.ndarray
    """Node counts (i non-spot, j spot) the pool may take."""
    busy: np.ndarray
    """Busy hours at each (i, j)."""
    picks: list[np.ndarray]
    """Per phase, the index of the rate (precision) used at each (i, j)."""
    e_nodes: np.ndarray
    """Effective nodes at each (i, j)."""
    omega: np.ndarray
    """Spot overhead fraction at each (i, j)."""


def cheapest_first(offers: list[Offer], weights: list[float], room: int, extra: float = 0.0
                   ) -> list[Offer]:
    """One entry per node, cheapest first (by price, plus ``extra`` $/h per node (its boot
    disk), per effective node-hour, then key), each offer up to its cap, at most ``room``
    nodes."""
    seq: list[Offer] = []
    for i, take in cheapest_runs(offers, weights, room, extra):
        seq.extend([offers[i]] * take)
    return seq


def cheapest_runs(offers: list[Offer], weights: list[float], room: int, extra: float = 0.0
                  ) -> list[tuple[int, int]]:
    """:func:`cheapest_first` as runs: (index into ``offers``, nodes taken), in order."""
    order = sorted(range(len(offers)), key=lambda i: (
        (offers[i].usd_per_hour + extra) / max(weights[i], 1e-9), offers[i].key))
    runs: list[tuple[int, int]] = []
    taken = 0
    for i in order:
        take = min(offers[i].max_nodes or room, room - taken)
        if take > 0:
            runs.append((i, take))
            taken += take
        if taken >= room:
            break
    return runs


def cumulative(values: Iterable[float]) -> np.ndarray:
    """Running sums starting at 0 (the value of taking 0, 1, 2, ... nodes)."""
    return np.fromiter(accumulate(values, initial=0.0), float)


def busy_grid(demand: Demand, pool: PoolSpec, rates_per_phase: list[list[PhaseRate]],
              gpn: int, cap: int, n_nonspot: int, sp_eff: np.ndarray, sp_lam: np.ndarray,
              memo: dict | None = None) -> BusyGrid:
    """Busy hours over the grid of one shape: rows are 0 .. ``n_nonspot`` − 1 non-spot
    nodes, columns 0, 1, ... spot nodes, whose cumulative effective nodes and interruption
    rates are ``sp_eff`` and ``sp_lam``. ``memo``: the phases' times by effective nodes
    already computed for other grids of the same rates (:func:`_by_effective_nodes`)."""
    nn = np.arange(n_nonspot)[:, None]
    ns = np.arange(len(sp_eff))[None, :]
    total = nn + ns
    valid = _valid_counts(demand, pool, gpn, cap, nn, ns, total)
    n_tot = np.maximum(total, 1).astype(float)
    e_nodes, omega, stable = _effective_nodes(demand, pool, nn, sp_eff, sp_lam, total, n_tot)
    valid &= stable
    # the demand model runs only at the counts the pool may take (about half the grid: the
    # cap bounds non-spot + spot nodes); elsewhere busy is +inf and no rate is picked
    at = np.nonzero(valid)
    busy_at = np.full(len(at[0]), pool.stall_hours)
    picks: list[np.ndarray] = []
    if memo is not None and all(r.nodes_per_replica == 1 for rates in rates_per_phase
                                for r in rates):
        per_phase = _by_effective_nodes(memo, rates_per_phase, e_nodes[at])
    else:
        per_phase = [_fastest_rate(rates, total[at], n_tot[at], e_nodes[at])
                     for rates in rates_per_phase]
    for best, pick_at in per_phase:
        busy_at = busy_at + best
        pick = np.zeros(total.shape, dtype=int)
        pick[at] = pick_at
        picks.append(pick)
    busy = np.full(total.shape, np.inf)
    busy[at] = busy_at
    valid &= np.isfinite(busy)
    return BusyGrid(valid, busy, picks, e_nodes, omega)


def _valid_counts(demand: Demand, pool: PoolSpec, gpn: int, cap: int, nn: np.ndarray,
                  ns: np.ndarray, total: np.ndarray) -> np.ndarray:
    """Node counts allowed by the cap, the policy's spot share and multi-node training."""
    valid = (total >= 1) & (total <= cap)
    if pool.max_spot_share < 1.0:  # policy: at most this share of the pool's nodes on spot
        valid &= ns <= pool.max_spot_share * total + 1e-9
    if pool.stateful and gpn < demand.spec.placement.multi_node_training_min_gpus_per_node:
        valid &= total <= 1  # data-parallel training across small nodes: not modelled
    return valid


def _effective_nodes(demand: Demand, pool: PoolSpec, nn: np.ndarray, sp_eff: np.ndarray,
                     sp_lam: np.ndarray, total: np.ndarray, n_tot: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray | bool]:
    """(effective nodes, overhead fraction ω, where the gang's ω is low enough) per count: a
    stateful pool is a gang (Young's interval on the summed spot rate), a stateless pool's
    spot nodes each lose their own share."""
    if pool.stateful:
        eff = demand.spec.efficiency
        lam = np.broadcast_to(sp_lam[None, :], total.shape)
        c_h, r_h = eff.checkpoint_minutes / 60.0, eff.restart_minutes / 60.0
        omega = np.sqrt(2.0 * c_h * lam) + r_h * lam
        return n_tot * (1.0 - omega), omega, omega < 0.9
    e_nodes = nn + sp_eff[None, :]
    return e_nodes, 1.0 - e_nodes / n_tot, True


def _fastest_rate(rates: list[PhaseRate], total: np.ndarray, n_tot: np.ndarray,
                  e_nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One phase: its busy hours with the fastest rate that runs at each count, and which."""
    best = np.full(total.shape, np.inf)
    pick = np.zeros(total.shape, dtype=int)
    for idx, r in enumerate(rates):
        scale = 1.0
        if r.nodes_per_replica > 1:
            scale = (total // r.nodes_per_replica) * r.nodes_per_replica / n_tot
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.where(total >= r.nodes_per_replica,
                         r.busy_array(np.maximum(e_nodes * scale, 1e-9)), np.inf)
        better = t < best
        best = np.where(better, t, best)
        pick = np.where(better, idx, pick)
    return best, pick


def _by_effective_nodes(memo: dict, rates_per_phase: list[list[PhaseRate]], e: np.ndarray
                        ) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per phase, :func:`_fastest_rate` at effective nodes ``e``, each distinct value computed
    once across the grids sharing ``memo`` (the same rates). Exact where every rate runs on
    whole nodes (one node per replica): a phase's time is then a function of the effective
    nodes alone, which the grids of one shape share in part (the same non-spot rows, the same
    spot offers' overheads; on the RL example's rollout pools 179,000 valid counts hold
    79,000 distinct values)."""
    if len(e) == 0:
        return [(np.zeros(0), np.zeros(0, dtype=int)) for _ in rates_per_phase]
    uniq, inv = np.unique(e, return_inverse=True)
    known: np.ndarray = memo.get("e", np.zeros(0))
    k = np.minimum(np.searchsorted(known, uniq), max(len(known) - 1, 0))
    hit = known[k] == uniq if len(known) else np.zeros(len(uniq), dtype=bool)
    new = uniq[~hit]
    if len(new):
        ones = np.ones(len(new))
        got = [_fastest_rate(rates, ones, ones, new) for rates in rates_per_phase]
        merged = np.concatenate((known, new))
        order = np.argsort(merged, kind="stable")
        old = memo.get("v", [(np.zeros(0), np.zeros(0, dtype=int))] * len(got))
        memo["e"] = merged[order]
        memo["v"] = [(np.concatenate((b0, b))[order], np.concatenate((p0, p))[order])
                     for (b0, p0), (b, p) in zip(old, got, strict=True)]
    k = np.searchsorted(memo["e"], uniq)[inv]
    return [(b[k], p[k]) for b, p in memo["v"]]
