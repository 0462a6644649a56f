"""The ``cpu_pools`` and CPU ``catalog_match`` rules at their edges (issue #27 item 5: the
surviving mutants of ``optimizer/planfile/rules_cpu.py``, docs/testing.md).

Each test plans the agentic example (``examples/agentic-swe-rl.yaml``), breaks one thing in
the plan JSON and asserts the exact lines the rule gives, with the figures worked here from
the rule's formulas (docs/demand-model.md §4.9) and the catalog's CPU rows
(``providers/data/cpu_vms.csv``: c7i.16xlarge 64 vCPU, 128 GiB, $2.856/h on demand; m7i.16xlarge
64 vCPU, 256 GiB, $3.2256/h; c7i.8xlarge 32 vCPU, 64 GiB, $1.428/h; spot = 0.4 x on demand,
the embedded snapshot's CPU spot rule). The plan made by the planner is the input, never the
expected value: the example's pools are sandbox = 1024 vCPU, 2048 GiB held for the run on
16 x c7i.16xlarge spot, reward = 853.33 vCPU-hours of work (200 steps x 512 samples x 30 s) on
8 x c7i.16xlarge spot (tests/test_cpu_pools.py works these by hand).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import yaml

from ptplan.demand.model import build_demand
from ptplan.planfile.rules_cpu import (
    check_cpu_against_catalog,
    check_cpu_against_spec,
    check_cpu_pools,
)
from ptplan.planfile.schema import Plan
from ptplan.planner.api import plan
from ptplan.providers.embedded import embedded_catalog
from ptplan.spec.project import parse_spec

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "agentic-swe-rl.yaml"
SPOT = 0.4  # the embedded snapshot's CPU spot price: 0.4 x on demand
C7I_16, M7I_16, C7I_8 = 2.856, 3.2256, 1.428  # on-demand $/h, providers/data/cpu_vms.csv


def _spec_dict() -> dict[str, Any]:
    return yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))


def _plan_json() -> dict[str, Any]:
    """Planned in each test (never cached: mutmut forks every mutant from one parent process,
    docs/testing.md)."""
    p = plan(parse_spec(_spec_dict()), embedded_catalog(), timings=False)
    return json.loads(p.to_json())


def _pool(d: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in d["cpu_pools"] if c["name"] == name)


def _cents(x: float) -> str:
    return str(Decimal(repr(x)).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))


def _broken(change: Callable[[dict[str, Any]], None]) -> Plan:
    d = _plan_json()
    change(d)
    return Plan.model_validate(d)


def test_the_unbroken_plan_passes_and_is_the_expected_shape() -> None:
    d = _plan_json()
    sb, rw = _pool(d, "sandbox"), _pool(d, "reward")
    assert (sb["instance_type"], sb["capacity_type"], sb["nodes"]) == ("c7i.16xlarge", "spot", 16)
    assert (rw["instance_type"], rw["capacity_type"], rw["nodes"]) == ("c7i.16xlarge", "spot", 8)
    p = Plan.model_validate(d)
    assert check_cpu_pools(p) == []
    assert check_cpu_against_catalog(p, embedded_catalog()) == []


# ---- node counts and node-hours from a tampered node shape ---------------------------------

def test_zero_vcpus_per_node() -> None:
    """vCPUs per node 0: the vCPU bound is skipped (no division by 0). Sandbox: the memory
    bound ⌈2048 / 128⌉ = 16 still holds its 16 nodes, held node-hours unchanged: no line.
    Reward: no memory need either, so 0 nodes are wanted, and work ÷ 0 vCPUs is no finite
    node-hours: 8 nodes "need 0", 13.3333 node-hours "gives inf"."""
    def change(d: dict[str, Any]) -> None:
        _pool(d, "sandbox")["vcpus_per_node"] = 0.0
        _pool(d, "reward")["vcpus_per_node"] = 0.0
    assert check_cpu_pools(_broken(change)) == [
        "cpu_pools: reward has 8 nodes; 512 vCPUs and 0 GiB need 0 of c7i.16xlarge",
        "cpu_pools: reward bills 13.3333 node-hours, the work basis gives inf",
    ]


def test_one_vcpu_per_node() -> None:
    """vCPUs per node 1: sandbox max(⌈1024 / 1⌉, ⌈2048 / 128⌉) = 1024 nodes; reward ⌈512 / 1⌉
    = 512 nodes and 853.333 vCPU-hours ÷ 1 = 853.333 node-hours."""
    def change(d: dict[str, Any]) -> None:
        _pool(d, "sandbox")["vcpus_per_node"] = 1.0
        _pool(d, "reward")["vcpus_per_node"] = 1.0
    assert check_cpu_pools(_broken(change)) == [
        "cpu_pools: sandbox has 16 nodes; 1024 vCPUs and 2048 GiB need 1024 of c7i.16xlarge",
        "cpu_pools: reward has 8 nodes; 512 vCPUs and 0 GiB need 512 of c7i.16xlarge",
        "cpu_pools: reward bills 13.3333 node-hours, the work basis gives 853.333",
    ]


def test_memory_per_node_zero_and_one() -> None:
    """Memory needed but 0 GiB per node: no number of nodes holds it (the rule's stand-in
    10**18); 1 GiB per node: max(⌈1024 / 64⌉, ⌈2048 / 1⌉) = 2048 nodes."""
    out = check_cpu_pools(_broken(lambda d: _pool(d, "sandbox").update(memory_gib_per_node=0.0)))
    assert out == ["cpu_pools: sandbox has 16 nodes; 1024 vCPUs and 2048 GiB need "
                   "1000000000000000000 of c7i.16xlarge"]
    out = check_cpu_pools(_broken(lambda d: _pool(d, "sandbox").update(memory_gib_per_node=1.0)))
    assert out == ["cpu_pools: sandbox has 16 nodes; 1024 vCPUs and 2048 GiB need 2048 of "
                   "c7i.16xlarge"]


def test_memory_need_zero_and_one_gib() -> None:
    """No memory need: the memory bound is skipped even on a node with 0 GiB (16 nodes from the
    vCPUs, no line). 1 GiB and no vCPUs: ⌈1 / 128⌉ = 1 node is wanted, not 0 and not 16."""
    def no_memory(d: dict[str, Any]) -> None:
        _pool(d, "sandbox").update(memory_gib_needed=0.0, memory_gib_per_node=0.0)
    assert check_cpu_pools(_broken(no_memory)) == []

    def one_gib(d: dict[str, Any]) -> None:
        _pool(d, "sandbox").update(vcpus_needed=0.0, memory_gib_needed=1.0)
    assert check_cpu_pools(_broken(one_gib)) == [
        "cpu_pools: sandbox has 16 nodes; 0 vCPUs and 1 GiB need 1 of c7i.16xlarge"]


# ---- spot and the recorded policy ------------------------------------------------------------

def _spot_lines(phases: tuple[str, ...]) -> list[str]:
    names = {"rollout": "sandbox", "scoring": "reward"}
    return [f"cpu_pools: {names[ph]} is on spot; the plan's policy does not let {ph} use spot "
            f"(or caps the spot share)" for ph in phases]


def test_a_capped_spot_share_forbids_spot_cpu_pools() -> None:
    """``max_spot_share`` 0.5 (< 1): the CPU pools follow the planner's rule (spot only with an
    uncapped share, optimizer/costs/cpu.py ``allowed_capacity``), so both spot pools are lines;
    at exactly 1.0, and with the key absent (the policy default 1.0), none."""
    assert check_cpu_pools(_broken(lambda d: d["policy"].update(max_spot_share=0.5))) == \
        _spot_lines(("rollout", "scoring"))
    assert check_cpu_pools(_broken(lambda d: d["policy"].update(max_spot_share=1.0))) == []
    assert check_cpu_pools(_broken(lambda d: d["policy"].pop("max_spot_share"))) == []


def test_a_malformed_policy_allows_no_spot() -> None:
    """A policy whose phase entry is missing or not a mapping, or whose spot share is not a
    number, lets nothing use spot (the rule fails closed)."""
    assert check_cpu_pools(_broken(lambda d: d["policy"]["phases"].pop("rollout"))) == \
        _spot_lines(("rollout",))
    assert check_cpu_pools(_broken(lambda d: d["policy"]["phases"].update(scoring=None))) == \
        _spot_lines(("scoring",))
    assert check_cpu_pools(_broken(lambda d: d["policy"].update(max_spot_share="lots"))) == \
        _spot_lines(("rollout", "scoring"))


# ---- the catalog -----------------------------------------------------------------------------

def test_a_type_not_in_the_catalog_does_not_stop_the_next_pool() -> None:
    """Sandbox on c7i.48xlarge (no such row in the snapshot) and the reward at $0.50/h instead
    of the catalog's 0.4 x 2.856 = $1.1424/h: both lines, the second pool still compared."""
    def change(d: dict[str, Any]) -> None:
        _pool(d, "sandbox")["instance_type"] = "c7i.48xlarge"
        _pool(d, "reward")["usd_per_hour"] = 0.5
    out = check_cpu_against_catalog(_broken(change), embedded_catalog())
    assert out == [
        "catalog_match: CPU c7i.48xlarge spot in us-east-1 is not in catalog embedded",
        "catalog_match: CPU c7i.16xlarge spot: 64 vCPUs, 128 GiB at $0.5/h; the catalog says "
        "64.0, 128.0 at $1.1424/h",
    ]


def test_a_dearer_spot_type_names_the_cheapest() -> None:
    """Sandbox moved to m7i.16xlarge spot (0.4 x 3.2256 = $1.29024/h, 256 GiB): still 16
    nodes, 16 x D node-hours, so 16·D·1.29024 against the cheapest fitting type, c7i.16xlarge
    spot at 16·D·1.1424 (D = the plan's makespan)."""
    d = _plan_json()
    D = d["makespan_hours"]
    sb = _pool(d, "sandbox")
    sb.update(instance_type="m7i.16xlarge", usd_per_hour=SPOT * M7I_16, memory_gib_per_node=256.0,
              cost_usd=_cents(16 * D * SPOT * M7I_16))
    d["cpu_cost_usd"] = str(Decimal(sb["cost_usd"]) + Decimal(_pool(d, "reward")["cost_usd"]))
    p = Plan.model_validate(d)
    assert check_cpu_pools(p) == []  # internally consistent: only the catalog tells
    assert check_cpu_against_catalog(p, embedded_catalog()) == [
        f"catalog_match: CPU pool sandbox on m7i.16xlarge costs ${16 * D * SPOT * M7I_16:.2f}; "
        f"c7i.16xlarge spot would cost ${16 * D * SPOT * C7I_16:.2f}"]


def test_an_equally_cheap_type_passes() -> None:
    """Sandbox on 32 x c7i.8xlarge spot: 32 · 0.4 · 1.428 = 16 · 0.4 · 2.856 = $18.2784 per
    hour of the run, the same as the cheapest: no line (ties are not "a cheaper type")."""
    d = _plan_json()
    D = d["makespan_hours"]
    sb = _pool(d, "sandbox")
    sb.update(instance_type="c7i.8xlarge", usd_per_hour=SPOT * C7I_8, vcpus_per_node=32.0,
              memory_gib_per_node=64.0, nodes=32, node_hours=32 * D,
              cost_usd=_cents(32 * D * SPOT * C7I_8))
    p = Plan.model_validate(d)
    assert check_cpu_pools(p) == []
    assert check_cpu_against_catalog(p, embedded_catalog()) == []


def test_on_demand_when_spot_is_allowed_names_the_spot_type() -> None:
    """Sandbox on c7i.16xlarge on demand ($2.856/h) while the policy lets rollout use spot:
    16·D·2.856 against c7i.16xlarge spot at 16·D·1.1424."""
    d = _plan_json()
    D = d["makespan_hours"]
    _pool(d, "sandbox").update(capacity_type="on_demand", usd_per_hour=C7I_16,
                               cost_usd=_cents(16 * D * C7I_16))
    assert check_cpu_against_catalog(Plan.model_validate(d), embedded_catalog()) == [
        f"catalog_match: CPU pool sandbox on c7i.16xlarge costs ${16 * D * C7I_16:.2f}; "
        f"c7i.16xlarge spot would cost ${16 * D * SPOT * C7I_16:.2f}"]


def test_without_spot_the_cheapest_on_demand_type_is_named() -> None:
    """Spot share capped at 0.5 (no spot for CPU pools) and the sandbox on m7i.16xlarge on
    demand ($3.2256/h): the cheapest allowed is c7i.16xlarge on demand, 16·D·2.856; no spot
    offer is considered."""
    d = _plan_json()
    D = d["makespan_hours"]
    d["policy"]["max_spot_share"] = 0.5
    _pool(d, "sandbox").update(instance_type="m7i.16xlarge", capacity_type="on_demand",
                               usd_per_hour=M7I_16, memory_gib_per_node=256.0,
                               cost_usd=_cents(16 * D * M7I_16))
    out = check_cpu_against_catalog(Plan.model_validate(d), embedded_catalog())
    assert out == [
        f"catalog_match: CPU pool sandbox on m7i.16xlarge costs ${16 * D * M7I_16:.2f}; "
        f"c7i.16xlarge on_demand would cost ${16 * D * C7I_16:.2f}"]


# ---- the spec --------------------------------------------------------------------------------

def test_spec_without_sandboxes_names_both_pool_lists() -> None:
    d = _spec_dict()
    p = Plan.model_validate(_plan_json())
    assert check_cpu_against_spec(p, build_demand(parse_spec(d))) == []
    no_sandbox = copy.deepcopy(d)
    no_sandbox["agent"].pop("sandbox")
    assert check_cpu_against_spec(p, build_demand(parse_spec(no_sandbox))) == [
        "spec_match: CPU pools ['reward', 'sandbox'] != spec ['reward']"]


def test_close_never_matches_a_non_finite_value() -> None:
    """Bug found by the mutants of the 0-vCPU guard (docs/testing.md, "Bugs these tests
    found"): ``close(x, inf)`` was true for every x (|x − inf| = inf ≤ 1e-6 · inf), so the
    infinite work node-hours of a 0-vCPU node matched any recorded figure."""
    from ptplan.planfile.rules_base import close

    inf, nan = float("inf"), float("nan")
    assert not close(13.3333, inf) and not close(inf, 13.3333) and not close(-inf, 0.0)
    assert not close(inf, inf) and not close(nan, nan) and not close(1.0, nan)
    assert close(1.0, 1.0 + 1e-7) and not close(1.0, 1.0 + 1e-5)


def test_a_few_cents_dearer_than_the_catalog_is_both_lines() -> None:
    """The sandbox recorded at $1.1426/h instead of the catalog's $1.1424/h: a price line, and
    16·D·1.1426 exceeds the cheapest type's 16·D·1.1424 by 16·D·0.0002 (≈ $0.35 for the
    example's D ≈ 108 h) — well under a dollar, still "a cheaper type was passed over"."""
    d = _plan_json()
    D = d["makespan_hours"]
    _pool(d, "sandbox").update(usd_per_hour=1.1426, cost_usd=_cents(16 * D * 1.1426))
    assert 0.1 < 16 * D * 0.0002 < 1.0
    assert check_cpu_against_catalog(Plan.model_validate(d), embedded_catalog()) == [
        "catalog_match: CPU c7i.16xlarge spot: 64 vCPUs, 128 GiB at $1.1426/h; the catalog "
        "says 64.0, 128.0 at $1.1424/h",
        f"catalog_match: CPU pool sandbox on c7i.16xlarge costs ${16 * D * 1.1426:.2f}; "
        f"c7i.16xlarge spot would cost ${16 * D * SPOT * C7I_16:.2f}"]


def test_cost_and_total_tolerances_are_cents() -> None:
    """A pool's cost is node-hours x $/h to the cent (half a cent of rounding and a bit); the
    total of two pools is their sum within 0.006 x (2 + 1) = $0.018: 50 cents off a pool, or 2
    cents off the total, is a line."""
    d = _plan_json()
    sb = _pool(d, "sandbox")
    exact = sb["node_hours"] * sb["usd_per_hour"]
    sb["cost_usd"] = str(Decimal(sb["cost_usd"]) + Decimal("0.50"))
    d["cpu_cost_usd"] = str(Decimal(d["cpu_cost_usd"]) + Decimal("0.50"))
    assert check_cpu_pools(Plan.model_validate(d)) == [
        f"cpu_pools: sandbox {sb['cost_usd']} != node-hours x $/h = {exact:.2f}"]
    d = _plan_json()
    total = sum(Decimal(c["cost_usd"]) for c in d["cpu_pools"])
    d["cpu_cost_usd"] = str(total + Decimal("0.02"))
    assert check_cpu_pools(Plan.model_validate(d)) == [
        f"totals: CPU pools {total + Decimal('0.02')} != {float(total):.2f} from their pools"]
    d["cpu_cost_usd"] = str(total + Decimal("0.01"))  # inside 0.018
    assert check_cpu_pools(Plan.model_validate(d)) == []
