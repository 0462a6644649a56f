"""Independent oracles for the CPU pools' sizing (``optimizer/costs/cpu.py``, docs/demand-model.md
§4.9): the needs a spec makes (sandbox, preparation, reward), the capacity types a pool may use,
the nodes of an instance type, the cheapest type for a held and for a work pool.

Specs are the examples under ``examples/`` with the edits each test names; instance types are
the embedded CPU rows (providers/data/cpu_vms.csv, us-east-1): c7i.large 2 vCPU / 4 GiB
$0.08925/h, c7i.2xlarge 8 / 16 $0.357, m7i.2xlarge 8 / 32 $0.4032, c7i.8xlarge 32 / 64 $1.428,
c7i.16xlarge 64 / 128 $2.856, m7i.16xlarge 64 / 256 $3.2256; spot at 0.4 × on-demand, as the
embedded catalog prices it (c7i.16xlarge $1.1424, m7i.16xlarge $1.29024). Expected values are
worked out by hand in each test; nothing here calls the planner.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from ptplan.costs.cpu import (
    PREP_HOURS,
    CpuChoice,
    CpuNeed,
    allowed_capacity,
    choose,
    cpu_needs,
    nodes_for,
    steps_episodes,
)
from ptplan.demand.model import Demand
from ptplan.policies.model import Policy, default_policy
from ptplan.providers.base import Offer
from ptplan.spec.project import parse_spec

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def exact(x: Any) -> Any:
    """Equal to 12 significant digits, with no absolute slack (docs/testing.md)."""
    return pytest.approx(x, rel=1e-12, abs=0)


def demand_of(example: str, **edits: Any) -> Demand:
    """The example with ``section__field`` edits (None removes), as a Demand holding only the
    spec (the CPU pools read nothing else)."""
    d = copy.deepcopy(yaml.safe_load((EXAMPLES / f"{example}.yaml").read_text(encoding="utf-8")))
    for key, value in edits.items():
        section, _, name = key.partition("__")
        if not name:
            d[section] = value
            continue
        sub = d.setdefault(section, {})
        if "__" in name:  # agent__sandbox__vcpus
            name, _, leaf = name.partition("__")
            sub = sub.setdefault(name, {})
            name = leaf
        if value is None:
            sub.pop(name, None)
        else:
            sub[name] = value
    return Demand(parse_spec(d), (), 0, 0.0, 0.0, 0)


def cpu(
    itype: str,
    vcpus: float | None,
    mem: float | None,
    price: float,
    kind: str = "on_demand",
    region: str = "us-east-1",
    provider: str = "aws",
) -> Offer:
    return Offer(
        provider=provider,
        region=region,
        zone="",
        instance_type=itype,
        gpu="",
        gpus_per_node=0,
        capacity_type=kind,
        usd_per_hour=price,
        vcpus=vcpus,
        memory_gib=mem,
        as_of="2025-12-01",
        source="test",
    )


C7I_LARGE = cpu("c7i.large", 2, 4, 0.08925)
C7I_2X = cpu("c7i.2xlarge", 8, 16, 0.357)
M7I_2X = cpu("m7i.2xlarge", 8, 32, 0.4032)
C7I_8X = cpu("c7i.8xlarge", 32, 64, 1.428)
C7I_16X = cpu("c7i.16xlarge", 64, 128, 2.856)
M7I_16X = cpu("m7i.16xlarge", 64, 256, 3.2256)
C7I_16X_SPOT = cpu("c7i.16xlarge", 64, 128, 1.1424, "spot")
M7I_16X_SPOT = cpu("m7i.16xlarge", 64, 256, 1.29024, "spot")

# ---- the needs a spec makes ---------------------------------------------------------------------

# agentic-swe-rl: 64 prompts × 8 samples = 512 episodes a step, 200 steps, sandboxes of 2 vCPU /
# 4 GiB, 30 vCPU-seconds of reward per sample
N_STEP = 512
REWARD_VCPU_H = 200 * 512 * 30 / 3600  # 853.33 vCPU-hours


def test_agentic_example_needs_a_held_sandbox_pool_and_a_reward_pool() -> None:
    needs = cpu_needs(demand_of("agentic-swe-rl"))
    assert [n.name for n in needs] == ["sandbox", "reward"]
    sb, rw = needs
    # 512 sandboxes × 2 vCPU, × 4 GiB, held for the run, following the rollout's capacity
    assert (sb.basis, sb.vcpus, sb.memory_gib, sb.vcpu_hours, sb.phase) == (
        "held",
        1024.0,
        2048.0,
        0.0,
        "rollout",
    )
    # one vCPU per sample of a step at the peak; the run's samples × 30 s of work; scoring
    assert (rw.basis, rw.vcpus, rw.memory_gib, rw.phase) == ("work", 512.0, 0.0, "scoring")
    assert rw.vcpu_hours == exact(REWARD_VCPU_H)


@pytest.mark.parametrize(
    ("workers", "held"),
    [(300, 300), (512, 512), (2000, 512), (1, 1)],
)
def test_tool_workers_cap_the_sandboxes_held(workers: int, held: int) -> None:
    """S = min(N_step, W): 300 workers hold 300 sandboxes (600 vCPU, 1,200 GiB); 2,000 workers
    cannot hold more than the 512 episodes of a step."""
    sb = cpu_needs(demand_of("agentic-swe-rl", agent__tool_workers=workers))[0]
    assert sb.name == "sandbox"
    assert (sb.vcpus, sb.memory_gib) == (2.0 * held, 4.0 * held)


def test_a_step_of_one_episode_still_needs_its_sandbox_and_scorer() -> None:
    """1 prompt × 1 sample a step (N_step = 1): one sandbox (2 vCPU, 4 GiB); the reward's peak is
    one vCPU and its work 200 × 1 × 30 s = 5/3 vCPU-hours."""
    sb, rw = cpu_needs(
        demand_of("agentic-swe-rl", data__prompts_per_step=1, data__samples_per_prompt=1)
    )
    assert (sb.vcpus, sb.memory_gib) == (2.0, 4.0)
    assert rw.vcpus == 1.0 and rw.vcpu_hours == exact(200 * 30 / 3600)


def test_without_a_sandbox_the_agent_needs_only_its_scorer() -> None:
    needs = cpu_needs(demand_of("agentic-swe-rl", agent__sandbox=None))
    assert [n.name for n in needs] == ["reward"]
    assert needs[0].vcpu_hours == exact(REWARD_VCPU_H)


def test_without_a_reward_only_the_sandboxes() -> None:
    needs = cpu_needs(demand_of("agentic-swe-rl", reward=None))
    assert [n.name for n in needs] == ["sandbox"]


@pytest.mark.parametrize(
    ("hours", "vcpus"),
    [(4.0, 125.0), (None, 500.0), (0.5, 1000.0)],
)
def test_preparation_pool_sizes_from_its_hours(hours: float | None, vcpus: float) -> None:
    """500 vCPU-hours of preparation in T hours need 500 / T vCPUs (T = 1 h when unset), billed as
    work, following the rollout; listed between the sandboxes and the reward."""
    assert PREP_HOURS == 1.0
    needs = cpu_needs(
        demand_of("agentic-swe-rl", data__prep_cpu_hours=500.0, data__prep_hours=hours)
    )
    assert [n.name for n in needs] == ["sandbox", "prep", "reward"]
    prep = needs[1]
    assert prep == CpuNeed("prep", "work", vcpus, 0.0, 500.0, "rollout")


def test_sft_with_preparation_needs_only_the_preparation_pool() -> None:
    """SFT has no step of episodes (N_step = 0): 40 vCPU-hours in the default hour."""
    demand = demand_of("sft-8b", data__prep_cpu_hours=40.0)
    assert steps_episodes(demand) == 0
    assert cpu_needs(demand) == [CpuNeed("prep", "work", 40.0, 0.0, 40.0, "rollout")]
    assert cpu_needs(demand_of("sft-8b")) == []


def test_generate_has_no_step_so_its_reward_makes_no_pool() -> None:
    """A ``generate`` job counts ``prompts``, not ``prompts_per_step`` (N_step = 0 × 4): a
    reward section there sizes nothing (the run's samples are N_step × steps = 0)."""
    demand = demand_of("generate-32b", reward={"cpu_seconds_per_sample": 5.0})
    assert steps_episodes(demand) == 0
    assert cpu_needs(demand) == []


def test_steps_episodes_is_prompts_times_samples() -> None:
    assert steps_episodes(demand_of("agentic-swe-rl")) == 64 * 8
    assert steps_episodes(demand_of("grpo-7b")) == 256 * 8  # grpo-7b.yaml: 256 × 8
    assert cpu_needs(demand_of("grpo-7b")) == []  # no agent, reward or preparation


# ---- capacity types -----------------------------------------------------------------------------


def _policy(**phases: list[str]) -> Policy:
    return Policy.model_validate(
        {"name": "t", "phases": {k: {"capacity_types": v} for k, v in phases.items()}}
    )


def test_default_policy_lets_every_pool_use_spot() -> None:
    for phase in ("rollout", "scoring"):
        assert allowed_capacity(default_policy(), phase) == {"on_demand", "spot"}


def test_a_phase_without_spot_keeps_its_pools_on_demand() -> None:
    pol = _policy(rollout=["on_demand"])
    assert allowed_capacity(pol, "rollout") == {"on_demand"}
    assert allowed_capacity(pol, "scoring") == {"on_demand", "spot"}
    # on-demand is always allowed, even where the phase lists spot only; reserved is never used
    assert allowed_capacity(_policy(scoring=["spot"]), "scoring") == {"on_demand", "spot"}
    assert allowed_capacity(_policy(scoring=["reserved"]), "scoring") == {"on_demand"}


@pytest.mark.parametrize(("share", "kinds"), [(1.0, {"on_demand", "spot"}), (0.99, {"on_demand"})])
def test_a_capped_spot_share_keeps_cpu_pools_on_demand(share: float, kinds: set[str]) -> None:
    assert allowed_capacity(Policy(name="t", max_spot_share=share), "rollout") == kinds


# ---- nodes of a type ----------------------------------------------------------------------------

SANDBOXES = CpuNeed("sandbox", "held", 1024.0, 2048.0, 0.0, "rollout")
MEMORY_HEAVY = CpuNeed("sandbox", "held", 512.0, 4096.0, 0.0, "rollout")  # 512 × (1 vCPU, 8 GiB)
REWARD = CpuNeed("reward", "work", 512.0, 0.0, REWARD_VCPU_H, "scoring")


@pytest.mark.parametrize(
    ("need", "offer", "nodes"),
    [
        (SANDBOXES, C7I_16X, 16),  # 1024/64 = 16 exactly (not 17), 2048/128 = 16
        (SANDBOXES, M7I_16X, 16),  # max(16, 2048/256 = 8)
        (SANDBOXES, C7I_8X, 32),  # max(32, 32)
        (MEMORY_HEAVY, C7I_16X, 32),  # max(512/64 = 8, 4096/128 = 32): memory binds
        (MEMORY_HEAVY, M7I_16X, 16),  # max(8, 4096/256 = 16)
        (REWARD, C7I_16X, 8),  # 512/64; a work pool asks no memory
        (CpuNeed("prep", "work", 500.0, 0.0, 500.0, "rollout"), C7I_8X, 16),  # ⌈15.625⌉
    ],
)
def test_nodes_cover_vcpus_and_memory(need: CpuNeed, offer: Offer, nodes: int) -> None:
    assert nodes_for(need, offer) == nodes


def test_nodes_forgive_float_noise_at_a_whole_count() -> None:
    """100 sandboxes × 1.1 vCPU = 110.00000000000001 in floating point: on c7i.large (2 vCPU,
    4 GiB) that is 55 nodes, not 56 (memory 100 × 2 GiB / 4 = 50)."""
    need = cpu_needs(
        demand_of(
            "agentic-swe-rl",
            agent__tool_workers=100,
            agent__sandbox__vcpus=1.1,
            agent__sandbox__memory_gib=2.0,
        )
    )[0]
    assert need.vcpus > 110.0  # the noise the tolerance is for
    assert nodes_for(need, C7I_LARGE) == 55


def test_a_type_without_a_shape_holds_nothing() -> None:
    """No vCPU count (or 0): unusable; no memory: unusable for a pool that needs memory, usable
    for one that does not."""
    assert nodes_for(SANDBOXES, cpu("x", None, 128, 1.0)) == 0
    assert nodes_for(SANDBOXES, cpu("x", 0, 128, 1.0)) == 0
    assert nodes_for(SANDBOXES, cpu("x", 64, None, 1.0)) == 0
    assert nodes_for(SANDBOXES, cpu("x", 64, 0, 1.0)) == 0
    assert nodes_for(REWARD, cpu("x", 64, None, 1.0)) == 8


def test_small_types_and_small_needs_by_hand() -> None:
    """A 1-vCPU type is usable: GCP n1-standard-1 (1 vCPU, 3.75 GB, $0.0475/h in us-central1)
    holds 4 vCPUs of work on 4 nodes, and 2 sandboxes of 1 vCPU / 2 GiB on max(2, ⌈4/3.75⌉) = 2.
    A type under 1 GiB counts its memory too: AWS t3.nano (2 vCPU, 0.5 GiB, $0.0052/h) holds one
    sandbox of 1 vCPU / 1 GiB on max(⌈1/2⌉, ⌈1/0.5⌉) = 2 nodes, and a need of 1 GiB or less is
    still a memory need (a type without a memory size cannot hold it)."""
    n1 = cpu("n1-standard-1", 1, 3.75, 0.0475, region="us-central1", provider="gcp")
    assert nodes_for(CpuNeed("reward", "work", 4.0, 0.0, 10.0, "scoring"), n1) == 4
    assert nodes_for(CpuNeed("sandbox", "held", 2.0, 4.0, 0.0, "rollout"), n1) == 2
    nano = cpu("t3.nano", 2, 0.5, 0.0052)
    one = CpuNeed("sandbox", "held", 1.0, 1.0, 0.0, "rollout")
    assert nodes_for(one, nano) == 2
    assert nodes_for(one, cpu("x", 64, None, 1.0)) == 0
    assert nodes_for(CpuNeed("sandbox", "held", 1.0, 0.5, 0.0, "rollout"), nano) == 1


# ---- the cheapest type --------------------------------------------------------------------------


def test_held_pool_takes_the_least_nodes_times_price() -> None:
    """1024 vCPU / 2048 GiB on-demand: m7i.16xlarge 16 × 3.2256 = $51.6096/h, c7i.8xlarge
    32 × 1.428 = $45.696, c7i.16xlarge 16 × 2.856 = $45.696: a tie (2.856 = 2 × 1.428), broken by
    the offer order (``c7i.16xlarge`` < ``c7i.8xlarge``), whatever the list order."""
    for offers in ([M7I_16X, C7I_8X, C7I_16X], [C7I_16X, M7I_16X, C7I_8X]):
        c = choose(SANDBOXES, offers)
        assert c == CpuChoice(SANDBOXES, C7I_16X, 16, 0.0)
    # memory-heavy sandboxes: c7i.16xlarge 32 × 2.856 = 91.392 against m7i 16 × 3.2256
    c = choose(MEMORY_HEAVY, [C7I_16X, M7I_16X])
    assert c is not None and (c.offer, c.nodes) == (M7I_16X, 16)


def test_work_pool_takes_the_least_price_per_vcpu_not_per_node() -> None:
    """8 vCPUs at the peak: held, one m7i.2xlarge ($0.4032/h) beats one c7i.16xlarge ($2.856);
    as work, 100 vCPU-hours cost 100/8 × 0.4032 = $5.04 on m7i.2xlarge and 100/64 × 2.856 =
    $4.4625 on c7i.16xlarge (1.5625 node-hours on 1 node)."""
    held = CpuNeed("sandbox", "held", 8.0, 0.0, 0.0, "rollout")
    work = CpuNeed("reward", "work", 8.0, 0.0, 100.0, "scoring")
    c = choose(held, [C7I_16X, M7I_2X])
    assert c is not None and (c.offer, c.nodes, c.node_hours_fixed) == (M7I_2X, 1, 0.0)
    c = choose(work, [M7I_2X, C7I_16X])
    assert c is not None and (c.offer, c.nodes) == (C7I_16X, 1)
    assert c.node_hours_fixed == exact(100 / 64)


def test_reward_pool_on_spot_by_hand() -> None:
    """853.33 vCPU-hours: c7i.16xlarge spot 853.33/64 = 13.33 node-hours × $1.1424 = $15.232;
    m7i.16xlarge spot would cost 13.33 × 1.29024 = $17.2032; 8 nodes at the peak."""
    c = choose(REWARD, [M7I_16X_SPOT, C7I_16X_SPOT])
    assert c is not None and (c.offer, c.nodes) == (C7I_16X_SPOT, 8)
    assert c.node_hours_fixed == exact(REWARD_VCPU_H / 64)
    assert c.cost(0.0) == exact(REWARD_VCPU_H / 64 * 1.1424)
    assert c.cost(500.0) == c.cost(0.0)  # work: billed as used, not for the run
    assert c.node_hours(500.0) == c.node_hours_fixed


def test_held_choice_bills_every_node_for_the_run() -> None:
    """16 c7i.16xlarge spot held 100 h: 1,600 node-hours × $1.1424 = $1,827.84."""
    c = choose(SANDBOXES, [C7I_16X_SPOT])
    assert c is not None and c.node_hours_fixed == 0.0
    assert c.node_hours(100.0) == 1600.0
    assert c.cost(100.0) == exact(1827.84)
    assert c.cost(0.0) == 0.0


def test_no_usable_type_gives_none() -> None:
    assert choose(SANDBOXES, []) is None
    assert choose(SANDBOXES, [cpu("x", 64, None, 1.0), cpu("y", None, 64, 1.0)]) is None
    # the usable one is found after unusable ones
    c = choose(SANDBOXES, [cpu("x", 64, None, 0.01), C7I_8X])
    assert c is not None and (c.offer, c.nodes) == (C7I_8X, 32)
