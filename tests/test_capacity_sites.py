"""Contested caps across the zones of a region, against the exhaustive search.

The capacity split search (:mod:`ptplan.planner.search.capacity`) runs per site (the trainer's
zone) and splits an offer only among the pools that can use it there: a zone's spot offer is
contested by every spot pool at that zone, but at the region's other zones only by the
rollout pool, which may take remote spot nodes (docs/planner.md, "Zones, regions and
egress"). These catalogs
put small spot caps in two zones of a region, so that the rollout and scoring pools of the
GRPO fixture contest them at one zone and not at the other; the planner's plan must be the
brute force's optimum (``tests/planner_fixtures.py``, which enumerates every node count of
every offer for every pool at every zone and enforces the caps over the pools together).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from planner_fixtures import brute_force, offer, small_spec
from test_planner import assert_matches_brute_force

from ptplan.planner.api import plan
from ptplan.providers.base import Catalog, EgressRate


def two_zone_catalog(h100_spot_a: float, h100_spot_b: float, l4_spot_a: float,
                     l4_spot_b: float, cap_a: int, cap_b: int, r2: float = 1.2) -> Catalog:
    """Region r1 with spot H100 and L4 nodes in zones a and b (caps ``cap_a``, ``cap_b``)
    and on-demand nodes region-wide (cross-zone egress $0.01/GB); r2 a dearer copy with one
    zone."""
    offers = [
        offer("r1", "h100x8", "H100", 8, "on_demand", 20.0, 2),
        offer("r1", "l4x1", "L4", 1, "on_demand", 0.8, 2),
        offer("r1", "h100x8", "H100", 8, "spot", h100_spot_a, cap_a, 0.002, "a"),
        offer("r1", "h100x8", "H100", 8, "spot", h100_spot_b, cap_b, 0.002, "b"),
        offer("r1", "l4x1", "L4", 1, "spot", l4_spot_a, cap_a, 0.004, "a"),
        offer("r1", "l4x1", "L4", 1, "spot", l4_spot_b, cap_b, 0.004, "b"),
        offer("r2", "h100x8", "H100", 8, "on_demand", 20.0 * r2, 2),
        offer("r2", "h100x8", "H100", 8, "spot", h100_spot_a * r2, cap_a, 0.002, "a"),
        offer("r2", "l4x1", "L4", 1, "spot", l4_spot_a * r2, cap_a, 0.004, "a"),
    ]
    # the rollout pool's nodes outside the trainer's zone pay for their weight copies
    egress = (EgressRate("lab", "same_zone", 0.0, "test", "U"),
              EgressRate("lab", "cross_zone", 0.01, "test", "U"))
    return Catalog(name="two-zones", as_of="2026-11-01", offers=tuple(offers), egress=egress)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    h100_a=st.floats(2, 30), h100_b=st.floats(2, 30), l4_a=st.floats(0.05, 1.5),
    l4_b=st.floats(0.05, 1.5), cap_a=st.sampled_from([1, 2]), cap_b=st.sampled_from([1, 2]),
    deadline=st.sampled_from([0.5, 1.0, 2.0, 4.0, None]),
    pipeline=st.sampled_from(["sync", "async"]),
    objective=st.sampled_from(["cost", "time"]),
)
@example(h100_a=3.0, h100_b=3.1, l4_a=0.1, l4_b=0.12, cap_a=1, cap_b=1, deadline=1.0,
         pipeline="sync", objective="time")
@example(h100_a=9.0, h100_b=4.0, l4_a=0.3, l4_b=0.1, cap_a=2, cap_b=1, deadline=None,
         pipeline="async", objective="time")
@example(h100_a=2.5, h100_b=2.5, l4_a=0.06, l4_b=0.06, cap_a=1, cap_b=2, deadline=0.5,
         pipeline="sync", objective="cost")
def test_zone_caps_contested_by_rollout_and_scoring_match_brute_force(
        h100_a, h100_b, l4_a, l4_b, cap_a, cap_b, deadline, pipeline, objective):
    spec = small_spec(sla={"deadline_hours": deadline}, pipeline=pipeline,
                      placement={"max_nodes_per_pool": 3})
    catalog = two_zone_catalog(h100_a, h100_b, l4_a, l4_b, cap_a, cap_b)
    assert_matches_brute_force(spec, catalog, objective)


@pytest.mark.parametrize("objective", ["cost", "time"])
def test_a_plan_that_contests_a_zone_cap_is_split_there(objective):
    """Cheap spot in zone a only (one node of each shape): the fastest and the cheapest plans
    want it in both spot pools; the plan respects the cap (the pools hold it together) and
    equals the brute force's."""
    spec = small_spec(sla={"deadline_hours": None}, pipeline="sync",
                      placement={"max_nodes_per_pool": 3})
    catalog = two_zone_catalog(2.0, 25.0, 0.05, 1.4, 1, 1)
    expected = brute_force(spec, catalog, objective)
    assert expected is not None
    p = plan(spec, catalog, objective, explain=False)
    used: dict[str, int] = {}
    for pool in p.pools:
        for a in pool.allocations:
            if a.capacity_type == "spot":
                key = (a.zone, a.instance_type)
                used[key] = used.get(key, 0) + a.nodes
    assert all(n <= 1 for n in used.values()), used
    assert_matches_brute_force(spec, catalog, objective)
