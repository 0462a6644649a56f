"""Region bounds from per-site minima (ptplan.planner.search.site_bounds.regions_by_bound) equal the
bounds computed from each site's full arrays, and a site's arrays, read lazily, equal the
eager ones: every site, every layout, both objectives, on the RL, OPD and agentic examples
(the last with CPU pools and other costs in its bounds)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from ptplan.planner.search import site_bounds
from ptplan.planner.search.engine import prepare
from ptplan.providers.embedded import embedded_catalog
from ptplan.spec.project import load_spec


@pytest.fixture(scope="module", params=["examples/grpo-7b.yaml", "examples/opd-8b-from-32b.yaml",
                                        "examples/agentic-swe-rl.yaml"])
def ctx(request):
    return prepare(load_spec(request.param), embedded_catalog())


def _eager(c, objective: str) -> list[tuple[float, int]]:
    out = []
    for region in range(len(c.regions)):
        arrs = site_bounds._region_arrays(c, region)
        if any(len(a[0]) == 0 for a in arrs.values()):
            continue
        if c.cpu is not None and not np.isfinite(c.extra_cost(region, 0.0)):
            continue
        out.append((site_bounds.region_bound(c, arrs, objective, region), region))
    return sorted(out)


@pytest.mark.parametrize("objective", ["cost", "time"])
def test_bounds_from_site_minima_equal_the_full_arrays(ctx, objective: str) -> None:
    for c in ctx.runs:
        got = site_bounds.regions_by_bound(c, objective)
        assert [(b, r) for b, r, _ in got] == _eager(c, objective)  # exactly, bit for bit
        assert len(got) > 1


def test_site_arrays_are_read_lazily_and_equal_the_eager_ones(ctx) -> None:
    c = ctx.runs[0]
    entries = site_bounds.regions_by_bound(c, "cost")
    for _, region, arrs in entries[:5] + entries[-3:]:
        assert isinstance(arrs, site_bounds.SiteArrays)
        assert arrs._arrs is None  # nothing computed before it is read
        assert list(arrs) == list(c.frontiers) and len(arrs) == len(c.frontiers)
        assert all(name in arrs for name in c.frontiers) and "nope" not in arrs
        for name, f in c.frontiers.items():
            # from scratch: the site's options by busy time (stable), their prices, egress
            idx = np.nonzero(f.region == region)[0]
            idx = idx[np.argsort(f.t[idx], kind="stable")]
            want = (f.t[idx], f.c[idx], idx, f.e[idx])
            for x, y in zip(arrs[name], want, strict=True):
                assert np.array_equal(x, y)
        assert list(dict(arrs.items())) == list(c.frontiers)


def test_layouts_sharing_a_pool_share_its_site_arrays(ctx) -> None:
    """A pool's arrays at a site are kept on its frontier: the layouts that share the pool
    (the sync layouts' rollout pool, say) read the same arrays, computed once."""
    shared = 0
    for a in ctx.runs:
        for b in ctx.runs:
            if a is b:
                continue
            for name, f in a.frontiers.items():
                if b.frontiers.get(name) is not f:
                    continue
                region = site_bounds.regions_by_bound(a, "cost")[0][1]
                if region not in {r for _, r, _ in site_bounds.regions_by_bound(b, "cost")}:
                    continue
                x = site_bounds._region_arrays(a, region)[name]
                y = site_bounds._region_arrays(b, region)[name]
                assert x is y
                shared += 1
    assert shared or len(ctx.runs) == 1  # the agentic example has one layout


def test_sites_missing_a_pool_are_left_out(ctx) -> None:
    for c in ctx.runs:
        kept = {r for _, r, _ in site_bounds.regions_by_bound(c, "cost")}
        for region in range(len(c.regions)):
            at = [site_bounds._at_site(f, region, len(c.regions)) for f in c.frontiers.values()]
            for f, idx in zip(c.frontiers.values(), at, strict=True):
                # a site's options in frontier order (ascending), exactly those of the site
                assert bool(np.all(np.diff(idx) > 0))
                assert np.array_equal(idx, np.nonzero(f.region == region)[0])
            counts = [len(idx) for idx in at]
            if min(counts) == 0:
                assert region not in kept


def test_the_agentic_example_prices_its_cpu_pools_and_other_costs_in_its_bounds() -> None:
    """The agentic example's bounds include its CPU pools and other costs (the
    fixture's third spec checks them bit for bit), so they are really there."""
    ctx = prepare(load_spec("examples/agentic-swe-rl.yaml"), embedded_catalog())
    assert any(c.cpu is not None for c in ctx.runs)
    assert any(c.other is not None for c in ctx.runs)


def test_prepared_frontiers_equal_each_pool_built_alone(ctx) -> None:
    """``frontier.build_frontiers`` (which prepares every distinct pool frontier, shared
    between processes where it may fork) gives each layout the frontier that
    ``pool_frontier`` builds for that pool alone, with the layout's network and split
    setting."""
    from ptplan.planner.frontier.frontiers import sites_of
    from ptplan.planner.frontier.pool import pool_frontier

    cap = ctx.spec.placement.max_nodes_per_pool
    sites = sites_of(ctx.offers)
    for c in ctx.runs:
        for pool in c.layout.pools:
            alone, _ = pool_frontier(ctx.demand, c.layout, pool, ctx.offers, cap, sites, None,
                                     c.network, c.layout.policy.split_regions, {})
            got = c.frontiers[pool.name]
            for col in ("t", "c", "gid", "i", "j", "region", "e", "remote", "place"):
                assert np.array_equal(getattr(got, col), getattr(alone, col)), (pool.name, col)


@pytest.mark.parametrize("objective", ["cost", "time"])
def test_split_plans_keep_the_eager_bounds(objective: str) -> None:
    """With ``split_regions`` the rollout pool has cross-region entries, priced against each
    site: the bounds come from each site's full arrays. A region that sorts first and holds
    only rollout GPUs (no trainer) is left out without stopping the others."""
    from planner_fixtures import offer

    from tests.test_network import split_policy, split_spec, two_region_catalog

    cat = two_region_catalog(inter_region=0.001)
    cat = replace(cat, offers=(offer("us-0", "l4x1", "L4", 1, "on_demand", 0.5, 16),
                               *cat.offers))
    ctx = prepare(split_spec(), cat, split_policy())
    cross = 0
    for c in ctx.runs:
        cross += any(bool((f.place >= 0).any()) for f in c.frontiers.values())
        got = site_bounds.regions_by_bound(c, objective)
        assert [(b, r) for b, r, _ in got] == _eager(c, objective)
        assert got and all(c.regions[r][1] != "us-0" for _, r, _ in got)
        # eager: every site's arrays priced against the site
        assert not any(isinstance(arrs, site_bounds.SiteArrays) for _, _, arrs in got)
    assert cross
