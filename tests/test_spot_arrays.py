"""A pool's spot sequence as running sums (``frontier.pool.Enumerator.spot_arrays``) and the
signature that lets grids be shared: for a gang (a stateful pool) every spot node counts as
one effective node, so two sequences of equal length differ only in their interruption
rates, and those must keep their grids apart (mutation-testing gap, docs/testing.md)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ptplan.demand.model import build_demand
from ptplan.planner.candidates import layouts
from ptplan.planner.frontier.pool import Enumerator
from ptplan.providers.embedded import embedded_catalog
from ptplan.spec.project import load_spec


def _pool(stateful: bool):
    demand = build_demand(load_spec("examples/grpo-7b.yaml"))
    for lay in layouts(demand, None):
        for pool in lay.pools:
            if pool.stateful == stateful:
                return demand, lay, pool
    raise AssertionError("no such pool")


def _spot(hazard: float, price: float):
    offer = next(o for o in embedded_catalog().offers if o.capacity_type == "spot")
    return replace(offer, interruptions_per_hour=hazard, usd_per_hour=price, max_nodes=2)


def test_a_gangs_sequences_of_equal_length_but_other_hazards_do_not_share_a_grid():
    demand, lay, pool = _pool(stateful=True)
    enum = Enumerator(demand, lay, pool, 4, {})
    calm = enum.spot_arrays([_spot(0.01, 3.0)], [], 0.5)
    rough = enum.spot_arrays([_spot(0.04, 3.0)], [], 0.5)
    # (sequence, remote, $/h, effective nodes, hazards, signature, local, remote)
    assert calm[2].tolist() == rough[2].tolist() == [0.0, 3.5, 7.0]
    assert calm[3].tolist() == rough[3].tolist() == [0.0, 1.0, 2.0]  # a gang: 1 per node
    assert calm[4].tolist() == [0.0, 0.01, 0.02] and rough[4].tolist() == [0.0, 0.04, 0.08]
    assert calm[5] != rough[5]


def test_a_stateless_pools_signature_is_its_effective_nodes_alone():
    demand, lay, pool = _pool(stateful=False)
    enum = Enumerator(demand, lay, pool, 4, {})
    a = enum.spot_arrays([_spot(0.01, 3.0)], [], 0.0)
    b = enum.spot_arrays([_spot(0.01, 5.0)], [], 0.0)
    assert a[5] == b[5] and a[5][1] == b""  # prices apart, the same grid
    assert np.array_equal(a[3], b[3]) and a[2].tolist() == [0.0, 3.0, 6.0]
