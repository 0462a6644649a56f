"""Region bounds from per-site minima (optimizer.planner.search.regions_by_bound) equal the
bounds computed from each site's full arrays, and a site's arrays, read lazily, equal the
eager ones: every site, every layout, both objectives, on the RL, OPD and agentic examples
(the last with CPU pools and other costs in its bounds)."""

from __future__ import annotations

import numpy as np
import pytest

from optimizer.planner import search
from optimizer.planner.engine import prepare
from optimizer.spec.project import load_spec
from providers.embedded import embedded_catalog


@pytest.fixture(scope="module", params=["examples/grpo-7b.yaml", "examples/opd-8b-from-32b.yaml",
                                        "examples/agentic-swe-rl.yaml"])
def ctx(request):
    return prepare(load_spec(request.param), embedded_catalog())


def _eager(c, objective: str) -> list[tuple[float, int]]:
    out = []
    for region in range(len(c.regions)):
        arrs = search._region_arrays(c, region)
        if any(len(a[0]) == 0 for a in arrs.values()):
            continue
        if c.cpu is not None and not np.isfinite(c.extra_cost(region, 0.0)):
            continue
        out.append((search.region_bound(c, arrs, objective, region), region))
    return sorted(out)


@pytest.mark.parametrize("objective", ["cost", "time"])
def test_bounds_from_site_minima_equal_the_full_arrays(ctx, objective: str) -> None:
    for c in ctx.runs:
        got = search.regions_by_bound(c, objective)
        assert [(b, r) for b, r, _ in got] == _eager(c, objective)  # exactly, bit for bit
        assert len(got) > 1


def test_site_arrays_are_read_lazily_and_equal_the_eager_ones(ctx) -> None:
    c = ctx.runs[0]
    entries = search.regions_by_bound(c, "cost")
    for _, region, arrs in entries[:5] + entries[-3:]:
        assert isinstance(arrs, search.SiteArrays)
        assert arrs._arrs is None  # nothing computed before it is read
        assert list(arrs) == list(c.frontiers) and len(arrs) == len(c.frontiers)
        assert all(name in arrs for name in c.frontiers) and "nope" not in arrs
        eager = search._region_arrays(c, region)
        for name in c.frontiers:
            for x, y in zip(arrs[name], eager[name], strict=True):
                assert np.array_equal(x, y)
        assert dict(arrs.items()).keys() == eager.keys()


def test_sites_missing_a_pool_are_left_out(ctx) -> None:
    for c in ctx.runs:
        kept = {r for _, r, _ in search.regions_by_bound(c, "cost")}
        for region in range(len(c.regions)):
            counts = [len(search._at_site(c, n, f.region, region))
                      for n, f in c.frontiers.items()]
            if min(counts) == 0:
                assert region not in kept


def test_the_agentic_example_prices_its_cpu_pools_and_other_costs_in_its_bounds() -> None:
    """The agentic example's bounds include its CPU pools and other costs (the
    fixture's third spec checks them bit for bit), so they are really there."""
    ctx = prepare(load_spec("examples/agentic-swe-rl.yaml"), embedded_catalog())
    assert any(c.cpu is not None for c in ctx.runs)
    assert any(c.other is not None for c in ctx.runs)
