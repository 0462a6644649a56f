"""The site bounds' arithmetic (ptplan.planner.search.site_bounds): the vector form equals the
scalar form bit for bit on random minima, with either term of the bound binding, every layout mode;
the extra cost per site equals ``Candidates.extra_cost`` site by site."""

from __future__ import annotations

import random
from types import SimpleNamespace

import numpy as np
import pytest
from planner_fixtures import small_catalog

from ptplan.costs.storage import DataClass, ObjectGroup, StorageModel
from ptplan.planner.frontier.frontiers import Candidates
from ptplan.planner.search import site_bounds
from ptplan.providers.base import StorageTier


def _stub(mode: str, fill: float = 0.0, per_site: float = 0.0, per_hour: float = 0.0,
          sites: int = 8):
    """A layout's candidates as the bounds read them: extra cost = per_site × site +
    per_hour × run time (a fixed network and a storage term), no other costs or CPU pools."""
    return SimpleNamespace(
        layout=SimpleNamespace(mode=mode, fill_fraction=fill),
        regions=[("p", f"r{k}", "") for k in range(sites)],
        fixed_network=lambda region: per_site * region,
        extra_cost=lambda region, t: per_hour * np.asarray(t) + per_site * region,
        extra_cost_with=lambda region, fixed, t: per_hour * np.asarray(t) + fixed,
        other=None, cpu=None)


def test_the_time_price_term_binds_where_the_pools_differ() -> None:
    """Two pools, one fast and dear, one slow and cheap: (Σ√m)² = 400, but the least run
    time times the least holding price, (1 + 100) × (100 + 1), is larger and is the bound."""
    minima = {"a": (1.0, 100.0, 100.0, 0.0), "b": (100.0, 1.0, 100.0, 0.0)}
    c = _stub("sync")
    assert site_bounds._bound(c, minima, "cost", 0) == 101.0 * 101.0
    tables = {n: np.asarray([[1.0, *v]]) for n, v in minima.items()}
    assert site_bounds._bounds(c, tables, np.asarray([0]), "cost").tolist() == [101.0 * 101.0]
    # the Cauchy–Schwarz term where the pools cost alike
    alike = {"a": (10.0, 10.0, 100.0, 0.0), "b": (10.0, 10.0, 100.0, 0.0)}
    assert site_bounds._bound(c, alike, "cost", 0) == 400.0
    # async: the longest pool plus the rollout's fill
    c = _stub("async", fill=0.5)
    minima = {"rollout": (4.0, 2.0, 8.0, 1.0), "update": (10.0, 3.0, 30.0, 0.0)}
    assert site_bounds._bound(c, minima, "time", 0) == 10.0 + 0.5 * 4.0
    assert site_bounds._bound(c, minima, "cost", 0) == max(8.0 + 30.0 + 0.5 * 8.0, 12.0 * 5.0) + 1.0


def test_the_extra_cost_enters_only_for_a_real_site() -> None:
    minima = {"a": (2.0, 3.0, 6.0, 0.5)}
    c = _stub("sync", per_site=1000.0, per_hour=1.0)
    assert site_bounds._bound(c, minima, "cost", 3) == 6.0 + 0.5 + (3000.0 + 2.0)
    assert site_bounds._bound(c, minima, "cost", -1) == 6.0 + 0.5  # no site: no extra


@pytest.mark.parametrize("mode", ["sync", "colocated", "async"])
@pytest.mark.parametrize("objective", ["cost", "time"])
def test_vector_bounds_equal_scalar_bounds_on_random_minima(mode: str, objective: str) -> None:
    rng = random.Random(f"{mode}-{objective}")
    for trial in range(40):
        names = ["rollout", "scoring", "update"][: rng.randint(1, 3)]
        if mode == "async" and "rollout" not in names:
            names = ["rollout", *names]
        sites = rng.randint(1, 6)
        tables = {}
        for n in names:
            t = np.asarray([10 ** rng.uniform(-1, 2) for _ in range(sites)])
            cc = np.asarray([10 ** rng.uniform(-1, 2) for _ in range(sites)])
            tc = t * cc * np.asarray([rng.uniform(1, 3) for _ in range(sites)])
            e = np.asarray([rng.choice([0.0, rng.uniform(0, 50)]) for _ in range(sites)])
            tables[n] = np.column_stack([np.ones(sites), t, cc, tc, e])
        fill = rng.uniform(0, 0.2)
        c = _stub(mode, fill, per_site=3.0, per_hour=0.25, sites=sites)
        at = np.arange(sites)
        got = site_bounds._bounds(c, tables, at, objective)
        for k in range(sites):
            minima = {n: tuple(float(x) for x in tables[n][k, 1:]) for n in names}
            assert got[k] == site_bounds._bound(c, minima, objective, k), (trial, k)


class _Network:
    """Fixed flows that differ per site (zone included)."""

    def fixed_cost(self, site, rollout=None) -> float:
        return 7.0 * len(site[2]) + (100.0 if site[1] == "r2" else 0.0)


def test_extra_at_equals_extra_cost_site_by_site() -> None:
    tier = StorageTier("lab", "*", "standard", 0.02, 0, 0.0, "ms", "test", "custom")
    cat = small_catalog()
    from dataclasses import replace

    cat = replace(cat, storage_tiers=(tier,))
    storage = StorageModel((DataClass("ckpt", "ms", (ObjectGroup(2, 50.0, 100.0, 1.0),)),), cat)
    c = Candidates(layout=None, frontiers={},  # type: ignore[arg-type]
                   regions=[("lab", "r1", "a"), ("lab", "r1", "bb"), ("lab", "r2", ""),
                            ("lab", "r1", "")],
                   network=_Network(), storage=storage)  # type: ignore[arg-type]
    sites = np.asarray([3, 0, 2, 1])
    hours = np.asarray([5.0, 50.0, 500.0, 0.0])
    got = site_bounds._extra_at(c, sites, hours)
    want = [float(c.extra_cost(int(s), float(h))) for s, h in zip(sites, hours, strict=True)]
    assert got.tolist() == want
    assert len(set(want)) == 4  # every term differs somewhere
