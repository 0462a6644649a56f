"""Independent oracles for the CPU pools' model (``optimizer/costs/cpu.py``: ``CpuPoolModel``,
``cpu_pool_model``): each pool's type per region and capacity type, the fixed and per-hour
dollars the planner adds to a plan, a region without CPU offers, the per-region memo.

Instance types as in ``tests/test_oracles_cpu.py`` (providers/data/cpu_vms.csv, us-east-1, spot
0.4 × on-demand). ``eu-central-1`` is priced here at 1.13 × us-east-1 (c7i.16xlarge $3.22728/h,
spot $1.290912), an assumption of the test, so that its figures differ; ``us-west-2`` has one
type without a memory size (as a custom catalog may list it), which a sandbox pool cannot use.
Expected values are worked out by hand in each test; nothing here calls the planner.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from test_oracles_cpu import (
    C7I_8X,
    C7I_16X,
    C7I_16X_SPOT,
    M7I_16X,
    M7I_16X_SPOT,
    REWARD_VCPU_H,
    cpu,
    demand_of,
    exact,
)

from ptplan.costs.cpu import CpuNeed, CpuPoolModel, cpu_pool_model
from ptplan.policies.model import Policy, default_policy
from ptplan.providers.base import Catalog, Offer

EU_OD = cpu("c7i.16xlarge", 64, 128, 3.22728, region="eu-central-1")
EU_SPOT = cpu("c7i.16xlarge", 64, 128, 1.290912, "spot", region="eu-central-1")
# another provider's type in a region of the same name, cheaper than any: never chosen for aws
OTHER = cpu("c7i.16xlarge", 64, 128, 0.5, provider="lab")
# reserved capacity is not a CPU pool's capacity type, even when cheaper
RESERVED = cpu("c7i.16xlarge", 64, 128, 0.8, "reserved")
WEST_NO_MEM = cpu("c7i.16xlarge", 64, None, 2.856, region="us-west-2")
OFFERS: tuple[Offer, ...] = (
    M7I_16X,
    C7I_16X,
    C7I_8X,
    M7I_16X_SPOT,
    C7I_16X_SPOT,
    OTHER,
    RESERVED,
    EU_OD,
    EU_SPOT,
    WEST_NO_MEM,
)
# the agentic example's pools: 512 sandboxes (1024 vCPU, 2048 GiB) held; 853.33 vCPU-hours of
# reward with 512 vCPUs at the peak
SANDBOX = CpuNeed("sandbox", "held", 1024.0, 2048.0, 0.0, "rollout")
REWARD = CpuNeed("reward", "work", 512.0, 0.0, REWARD_VCPU_H, "scoring")


def _model(policy: Policy | None = None) -> CpuPoolModel:
    return CpuPoolModel((SANDBOX, REWARD), OFFERS, policy or default_policy())


def test_choices_take_each_pools_cheapest_allowed_type_in_the_region() -> None:
    """Default policy (spot allowed): sandboxes 16 × c7i.16xlarge spot, reward 8 × c7i.16xlarge
    spot; not the `lab` row, not the reserved row, not eu-central-1's."""
    ch = _model().choices("aws", "us-east-1")
    assert ch is not None and [c.need for c in ch] == [SANDBOX, REWARD]
    assert [(c.offer, c.nodes) for c in ch] == [(C7I_16X_SPOT, 16), (C7I_16X_SPOT, 8)]


def test_a_rollout_without_spot_puts_the_sandboxes_on_demand() -> None:
    """``phases.rollout.capacity_types: [on_demand]``: the sandboxes (rollout) on c7i.16xlarge
    on-demand, the reward (scoring) still on spot."""
    pol = Policy.model_validate(
        {"name": "t", "phases": {"rollout": {"capacity_types": ["on_demand"]}}}
    )
    ch = _model(pol).choices("aws", "us-east-1")
    assert ch is not None
    assert [(c.offer, c.nodes) for c in ch] == [(C7I_16X, 16), (C7I_16X_SPOT, 8)]


def test_regions_without_a_usable_type_have_no_choices() -> None:
    m = _model()
    assert m.choices("aws", "ap-south-1") is None  # no CPU offers there
    assert m.choices("gcp", "us-east-1") is None  # no offers of that provider
    # us-west-2's type has no memory size: the reward could use it, the sandboxes cannot
    assert m.choices("aws", "us-west-2") is None
    ch = CpuPoolModel((REWARD,), OFFERS, default_policy()).choices("aws", "us-west-2")
    assert ch is not None and [(c.offer, c.nodes) for c in ch] == [(WEST_NO_MEM, 8)]


def test_rates_by_hand_in_two_regions() -> None:
    """us-east-1: fixed = the reward's 853.33/64 node-hours × $1.1424 = $15.232, per hour = 16
    sandbox nodes × $1.1424 = $18.2784. eu-central-1: 853.33/64 × 1.290912 = $17.21216, and
    16 × 1.290912 = $20.654592. Asked in this order, then again (memoised per region)."""
    m = _model()
    east = (REWARD_VCPU_H / 64 * 1.1424, 16 * 1.1424)
    eu = (REWARD_VCPU_H / 64 * 1.290912, 16 * 1.290912)
    for region, want in (("us-east-1", east), ("eu-central-1", eu), ("us-east-1", east)):
        fixed, per_hour = m.rates("aws", region)
        assert fixed == exact(want[0])
        assert per_hour == exact(want[1])
    assert east[0] == pytest.approx(15.232, rel=1e-9) and eu[1] == pytest.approx(20.654592)


def test_rates_of_held_or_work_pools_alone() -> None:
    """Only sandboxes: nothing fixed, 16 × $1.1424 an hour; only the reward: $15.232 fixed,
    nothing per hour."""
    sb = CpuPoolModel((SANDBOX,), OFFERS, default_policy()).rates("aws", "us-east-1")
    assert sb[0] == 0.0 and sb[1] == exact(16 * 1.1424)
    rw = CpuPoolModel((REWARD,), OFFERS, default_policy()).rates("aws", "us-east-1")
    assert rw[0] == exact(REWARD_VCPU_H / 64 * 1.1424) and rw[1] == 0.0


def test_a_region_without_cpu_offers_costs_infinity() -> None:
    m = _model()
    assert m.rates("aws", "ap-south-1") == (math.inf, math.inf)
    got = m.cost("aws", "ap-south-1", np.array([0.0, 10.0, 100.0]))
    assert got.shape == (3,) and np.all(np.isinf(got)) and np.all(got > 0)
    assert math.isinf(float(m.cost("aws", "ap-south-1", 5.0)))


def test_whole_hours_are_priced_as_floats() -> None:
    """Run times given as integers: a region without CPU offers is still +inf for each (not an
    integer's overflow), and a priced one $15.232 + $18.2784 × D."""
    m = _model()
    got = m.cost("aws", "ap-south-1", [0, 10])
    assert got.dtype == np.float64 and list(got) == [math.inf, math.inf]
    got = m.cost("aws", "us-east-1", [0, 10])
    fixed, per_hour = REWARD_VCPU_H / 64 * 1.1424, 16 * 1.1424
    assert got.dtype == np.float64 and list(got) == exact([fixed, fixed + 10 * per_hour])


def test_cost_is_fixed_plus_per_hour_times_the_run() -> None:
    """us-east-1: $15.232 + $18.2784 × D, for D = 0, 10, 144 h (the example's deadline)."""
    m = _model()
    fixed, per_hour = REWARD_VCPU_H / 64 * 1.1424, 16 * 1.1424
    got = m.cost("aws", "us-east-1", [0, 10, 144])
    assert got.dtype == np.float64
    assert list(got) == exact([fixed, fixed + 10 * per_hour, fixed + 144 * per_hour])
    assert float(m.cost("aws", "us-east-1", 2.5)) == exact(fixed + 2.5 * per_hour)


def test_cpu_pool_model_uses_the_catalogs_cpu_offers() -> None:
    """The model prices the catalog's ``cpu_offers`` (never its GPU ``offers``) under the given
    policy; a spec without CPU work has no model (its plans stay as they were)."""
    catalog = Catalog(
        name="cpu-test", as_of="2025-12-01", offers=(M7I_16X_SPOT,), cpu_offers=OFFERS
    )
    pol = Policy(name="t", max_spot_share=0.5)
    m = cpu_pool_model(demand_of("agentic-swe-rl"), catalog, pol)
    assert m is not None
    assert m.offers == OFFERS and m.policy is pol
    assert [n.name for n in m.needs] == ["sandbox", "reward"]
    assert m.needs[0] == SANDBOX and m.needs[1].vcpu_hours == exact(REWARD_VCPU_H)
    # spot share capped: both pools on-demand, c7i.16xlarge at $2.856
    fixed, per_hour = m.rates("aws", "us-east-1")
    assert fixed == exact(REWARD_VCPU_H / 64 * 2.856)
    assert per_hour == exact(16 * 2.856)
    assert cpu_pool_model(demand_of("grpo-7b"), catalog, pol) is None
