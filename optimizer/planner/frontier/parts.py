"""The shapes a pool frontier is made of: a :class:`Group` (one GPU shape arranged around a
zone, with its node sequences and busy-time grid) and the :class:`PoolFrontier` (one pool's
Pareto options as arrays, each turned back into a :class:`~ptplan.planner.candidates.PoolOption`
on demand). Built by :mod:`ptplan.planner.frontier.pool`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ptplan.costs.network import NetworkModel
from ptplan.demand.rates import PhaseRate
from ptplan.planner.candidates import PoolOption, PoolSpec
from ptplan.providers.base import Offer

Shape = tuple[str, str, str, int]
"""(provider, region, GPU, GPUs per node): the offers one group draws from."""
Site = tuple[str, str, str]


@dataclass(frozen=True)
class RatesKey:
    """What a group's rates are (its GPU and GPUs per node; the pool and layout are its
    frontier's): sent in their place by a frontier built in another process, whose rates
    hold closures that do not pickle (:func:`ptplan.planner.frontier.frontiers.build_frontiers`)."""

    gpu: str
    gpus_per_node: int


class LazyRates(Sequence):
    """A group's rates per phase of its pool, computed on first use (through the demand
    model's memo, so the same values the enumerator gave): a frontier built in another
    process sends :class:`RatesKey` instead, and most of its groups' rates are never read."""

    def __init__(self, make: Callable[[], list[list[PhaseRate]]]) -> None:
        self._make = make
        self._rates: list[list[PhaseRate]] | None = None

    def _get(self) -> list[list[PhaseRate]]:
        if self._rates is None:
            self._rates = self._make()
        return self._rates

    def __getitem__(self, k):  # type: ignore[no-untyped-def, override]
        return self._get()[k]

    def __len__(self) -> int:
        return len(self._get())



@dataclass
class Group:
    """One (provider, region, GPU shape) for one pool and one arrangement of its offers
    around a zone: the grid of node counts. Non-spot nodes come first from
    ``nonspot_seq``; spot nodes from ``spot_seq``, the site's zone first, then (rollout pool)
    the region's other zones, whose nodes are *remote*."""

    provider: str
    region: str
    gpu: str
    gpus_per_node: int
    nonspot_seq: list[Offer]
    spot_seq: list[Offer]
    rates: Sequence[list[PhaseRate]]
    """Per phase of the pool, its rates on this shape (:class:`LazyRates` where the group
    was built in another process)."""
    nonspot_offers: list[Offer]
    spot_offers: list[Offer]
    """Spot offers of the site's zone (rotated by
    :func:`ptplan.planner.search.fills.fill_variants`)."""
    e_nodes: np.ndarray
    omega: np.ndarray
    picks: list[np.ndarray]
    remote: np.ndarray = field(default_factory=lambda: np.zeros(1, dtype=int))
    """Remote nodes among the first j spot nodes (cumulative)."""
    all_remote: bool = False
    """Cross-region entries (split plans): every node is remote."""
    disk: float = 0.0
    """Boot-disk $/h of one node (in the cumulative prices)."""


def _fill(seq: list[Offer], k: int) -> list[tuple[Offer, int]]:
    counts: dict[str, list] = {}
    for o in seq[:k]:
        counts.setdefault(o.key, [o, 0])[1] += 1
    return [(o, n) for o, n in counts.values()]


@dataclass
class PoolFrontier:
    """Pareto options of one pool, per site, as arrays (objects built on demand)."""

    pool: PoolSpec
    groups: list[Group]
    t: np.ndarray
    c: np.ndarray
    gid: np.ndarray
    i: np.ndarray
    j: np.ndarray
    region: np.ndarray
    """Index into :attr:`Candidates.regions` (sites); -1 for cross-region entries."""
    e: np.ndarray
    """Egress (USD over the run) of site-bound entries, priced against their site."""
    remote: np.ndarray
    """Nodes paying egress (outside the site's zone, or all nodes of cross-region entries)."""
    place: np.ndarray
    """Cross-region entries: index into :attr:`Candidates.places` (-1 for site-bound)."""
    memo: dict = field(default_factory=dict, compare=False, repr=False, kw_only=True)
    """What the search derives from the frontier alone (grouped by site, a site's arrays),
    kept for the layouts that share the pool."""

    def option(self, k: int, sites: list[Site], site: int | None = None,
               network: NetworkModel | None = None) -> PoolOption:
        """Option ``k`` priced against its site (``sites`` = :attr:`Candidates.regions`);
        cross-region entries need the trainer's ``site`` (an index into ``sites``) and the
        ``network`` model."""
        g = self.groups[int(self.gid[k])]
        i, j = int(self.i[k]), int(self.j[k])
        fill = _fill(g.nonspot_seq, i) + _fill(g.spot_seq, j)
        hours, precisions, rates_used = [], [], []
        for ph, rates, pick in zip(self.pool.phases, g.rates, g.picks, strict=True):
            r = rates[int(pick[i, j])]
            scale = 1.0
            if r.nodes_per_replica > 1:
                scale = ((i + j) // r.nodes_per_replica) * r.nodes_per_replica / (i + j)
            hours.append((ph, r.busy(float(g.e_nodes[i, j]) * scale)))
            precisions.append((ph, r.precision))
            rates_used.append(r)
        home, egress, remote, path = self._egress(k, g, sites, site, network)
        return PoolOption(
            pool=self.pool.name, provider=g.provider, region=g.region, gpu=g.gpu,
            gpus_per_node=g.gpus_per_node, fill=tuple(fill), nodes=i + j,
            effective_nodes=float(g.e_nodes[i, j]), usd_per_hour=float(self.c[k]),
            busy_hours=float(self.t[k]), phase_hours=tuple(hours),
            precisions=tuple(precisions), rates=tuple(rates_used),
            overhead_fraction=float(g.omega[i, j]), site=home, egress_usd=egress,
            remote_nodes=remote, egress_path=path,
            disk_usd_per_hour=(i + j) * g.disk,
        )

    def _egress(self, k: int, g: Group, sites: list[Site], site: int | None,
                network: NetworkModel | None) -> tuple[Site, float, int, str]:
        """(trainer's site, egress USD, nodes paying egress, network path) of option ``k``."""
        own = int(self.region[k])
        if own >= 0:
            remote = int(self.remote[k])
            return sites[own], float(self.e[k]), remote, "cross_zone" if remote else "same_zone"
        if site is None or network is None:
            raise ValueError("a cross-region option needs the trainer's site")
        nodes = int(self.i[k]) + int(self.j[k])
        path, per_node, fixed = network.cross_region_terms(sites[site], (g.provider, g.region))
        return sites[site], nodes * per_node + fixed, nodes, path
