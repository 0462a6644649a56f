"""Every rule of the verifier fires: ``ptplan check`` fails, naming the rule, on a valid plan with
exactly that invariant broken, and passes on the plan as it is.

The valid plans are the pinned example plans (``tests/golden/cli/plan-*.json``, the planner's own
output). Each case edits one figure so that only its rule's invariant breaks, runs ``ptplan
check`` through the CLI and asserts exit 1 and a ``violation: <family>`` line; the unbroken plan
exits 0. :func:`test_every_rule_has_a_firing_case` enumerates the rule functions (``RULES`` and
the spec check) and the rule family names the verifier's sources can print, so adding a rule
without a firing case here fails.
"""

from __future__ import annotations

import copy
import importlib
import inspect
import json
import pkgutil
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import ptplan.planfile
from ptplan.cli.app import app
from ptplan.planfile import (
    rules_blocks,
    rules_catalog,
    rules_costs,
    rules_cpu,
    rules_framework,
    rules_phases,
    rules_pools,
    rules_record,
    rules_spec,
    rules_uncertainty,
    verify,
)
from ptplan.planfile.schema import Plan

pytestmark = pytest.mark.shipped_framework
"""The goldens are the examples as a user plans them (framework verl==0.9 by default)."""

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden" / "cli"
GRPO = "plan-grpo-7b.json"
GRPO3 = "plan-grpo-7b-openrlhf.json"
"""The GRPO example planned for OpenRLHF 0.11: rollout, scoring (the reference's own group) and
update on three pools, the shape the pool and allocation breaks edit (veRL's plan scores on
the trainer's pool)."""
OPD = "plan-opd-8b-from-32b.json"
SFT = "plan-sft-8b.json"
GEN = "plan-generate-32b.json"
runner = CliRunner()

Plan_ = dict[str, Any]


def _load(name: str) -> Plan_:
    return json.loads((GOLDEN / name).read_text(encoding="utf-8"))


def _pool(p: Plan_, name: str) -> dict[str, Any]:
    return next(x for x in p["pools"] if x["name"] == name)


def _phase(p: Plan_, name: str) -> dict[str, Any]:
    return next(x for x in p["phases"] if x["name"] == name)


def _item(items: list[dict[str, Any]], key: str, value: str) -> dict[str, Any]:
    return next(x for x in items if x[key] == value)


# ---- the breaks: each edits one figure of a valid plan -----------------------------------------

def b_framework(p: Plan_) -> None:
    """Schema 9: veRL's plan (fp8 rollouts) recorded as made for OpenRLHF 0.11, whose vLLM
    engines run bf16 only (tests/test_framework_plans.py fires every framework.* rule)."""
    assert p["framework"] == "verl==0.9"
    p["framework"] = "openrlhf==0.11"


def b_uncertainty(p: Plan_) -> None:
    """The 80 % interval's high end edited (schema 8); a plan written before it claims
    schema 8 without one."""
    if "uncertainty" in p:
        p["uncertainty"]["total_cost_usd"][1] = "1.00"
    else:
        p["schema_version"] = 8


def b_pool_price(p: Plan_) -> None:
    """A pool's $/h is not the sum over its allocations."""
    _pool(p, "update")["usd_per_hour"] *= 1.1


def b_zone(p: Plan_) -> None:
    """A scoring (stateless, non-rollout) spot node outside the trainer's zone."""
    _pool(p, "scoring")["allocations"][0]["zone"] = p["zone"] + "-other"


def b_hold(p: Plan_) -> None:
    """A pool's idle hours are not held − busy."""
    _pool(p, "update")["idle_hours"] += 1.0


def b_coverage(p: Plan_) -> None:
    """The rollout phase does not process its tokens in its busy hours."""
    _phase(p, "rollout")["tokens"] *= 3


def b_latency_floor(p: Plan_) -> None:
    """A phase busy for less than its latency floor."""
    ph = _phase(p, "update")
    ph["latency_floor_hours"] = ph["busy_hours"] * 2


def b_spot_stateless(p: Plan_) -> None:
    """A spot rollout node with no interruption overhead (coverage still holds: more work)."""
    pool = _pool(p, "rollout")
    pool["allocations"][0]["effective_fraction"] = 1.0
    effective = sum(a["nodes"] * a["effective_fraction"] for a in pool["allocations"])
    for ph in p["phases"]:  # the recorded rates follow the effective nodes
        if ph["pool"] == "rollout" and ph["tokens_per_node_hour"]:
            ph["tokens_per_node_hour"] = ph["tokens"] / (
                ph["busy_hours"] * effective * ph["usable_node_fraction"])


def b_spot_gang(p: Plan_) -> None:
    """The update pool (a gang) with an effective fraction below the gang model's 1 (no spot)."""
    _pool(p, "update")["allocations"][0]["effective_fraction"] = 1.0 - 1e-4
    ph = _phase(p, "update")  # keep coverage: the phase rate rises to make up for it
    ph["tokens_per_node_hour"] = ph["tokens_per_node_hour"] / (1.0 - 1e-4)


def b_memory(p: Plan_) -> None:
    """A replica needs more GPUs than the pool's nodes have."""
    _phase(p, "update")["replica_gpus"] = 64


def b_capacity(p: Plan_) -> None:
    """More scoring nodes than their offer's cap."""
    a = _pool(p, "scoring")["allocations"][0]
    a["max_nodes"] = a["nodes"] - 1


def b_capacity_spot(p: Plan_) -> None:
    """Spot where the pool does not allow it."""
    _pool(p, "scoring")["spot_ok"] = False


def b_makespan(p: Plan_) -> None:
    """The async run is not max(pool busy) + one step of fill."""
    p["fill_fraction"] = 0.5


def b_storage(p: Plan_) -> None:
    """An item billed below its tier's minimum duration (its cost still GB-months × price)."""
    item = _item(p["storage"], "data_class", "retained_checkpoints")
    item["min_days"] = float(item.get("min_days") or 0) + 90  # beyond what it is billed for


def b_storage_price(p: Plan_) -> None:
    """An item whose cost is not GB-months × price + retrieval (the totals follow it)."""
    item = _item(p["storage"], "data_class", "hot_checkpoints")
    item["usd_per_gb_month"] *= 2


def b_network_path(p: Plan_) -> None:
    """Weight sync labelled cross-zone between two places in one zone."""
    _item(p["network"], "flow", "weight_sync")["path"] = "cross_zone"


def b_network_bytes(p: Plan_) -> None:
    """Weight sync moving fewer bytes than nodes × steps × W."""
    _item(p["network"], "flow", "weight_sync")["gb"] *= 0.5


def b_totals(p: Plan_) -> None:
    """The idle cost is not Σ pools' $/h × idle hours."""
    p["idle_cost_usd"] = f"{float(p['idle_cost_usd']) + 1:.2f}"


def b_totals_total(p: Plan_) -> None:
    """The total is not compute + storage + network (network forgotten is the same check)."""
    p["total_cost_usd"] = f"{float(p['total_cost_usd']) + 5:.2f}"


def b_other_costs(p: Plan_) -> None:
    """Schema 6: an other-cost line whose cost is not quantity × rate (the totals follow it)."""
    p["schema_version"] = max(6, p["schema_version"])
    p["other_costs"] = [{"name": "ops", "basis": "per_hour", "quantity": p["makespan_hours"],
                         "usd_per_unit": 10.0, "cost_usd": "1.00"}]
    p["other_cost_usd"] = "1.00"
    p["total_cost_usd"] = f"{float(p['total_cost_usd']) + 1:.2f}"


def b_cpu_pools(p: Plan_) -> None:
    """Schema 7: a CPU pool whose cost is not node-hours × rate (the totals follow it)."""
    p["schema_version"] = max(7, p["schema_version"])
    held = p["makespan_hours"]
    p["cpu_pools"] = [{"name": "sandbox", "basis": "held", "vcpus_needed": 64.0,
                       "memory_gib_needed": 128.0, "vcpu_hours": 0.0, "provider": p["provider"],
                       "region": p["region"], "instance_type": "c7i.16xlarge",
                       "capacity_type": "on_demand", "vcpus_per_node": 64.0,
                       "memory_gib_per_node": 128.0, "nodes": 1, "node_hours": held,
                       "usd_per_hour": 2.856, "cost_usd": "1.00"}]
    p["cpu_cost_usd"] = "1.00"
    p["total_cost_usd"] = f"{float(p['total_cost_usd']) + 1:.2f}"


def b_deadline(p: Plan_) -> None:
    p["deadline_hours"] = p["makespan_hours"] / 2


def b_booking(p: Plan_) -> None:
    """The update's nodes relabelled as a capacity block, with no booking for them."""
    pool = next(q for q in p["pools"] if q["name"] == "update")
    pool["allocations"][0]["capacity_type"] = "block"


def b_budget(p: Plan_) -> None:
    p["budget_usd"] = "1.00"


def b_policy(p: Plan_) -> None:
    """The policy the plan records forbids spot for rollout."""
    p["policy"]["phases"]["rollout"]["capacity_types"] = ["on_demand", "reserved"]


# ---- method generate: the sampling-only plan (one stateless pool "all", spot) ----------------

def g_coverage(p: Plan_) -> None:
    """The generation does not process its tokens in its busy hours."""
    _phase(p, "rollout")["tokens"] *= 3


def g_spot_stateless(p: Plan_) -> None:
    """A spot generation node with no interruption overhead (the rates follow it)."""
    pool = _pool(p, "all")
    pool["allocations"][0]["effective_fraction"] = 1.0
    effective = sum(a["nodes"] * a["effective_fraction"] for a in pool["allocations"])
    ph = _phase(p, "rollout")
    ph["tokens_per_node_hour"] = ph["tokens"] / (
        ph["busy_hours"] * effective * ph["usable_node_fraction"])


def g_capacity_spot(p: Plan_) -> None:
    """Spot where the pool does not allow it."""
    _pool(p, "all")["spot_ok"] = False


def g_hold(p: Plan_) -> None:
    _pool(p, "all")["idle_hours"] += 1.0


def g_policy(p: Plan_) -> None:
    """The recorded policy forbids spot for the rollout phase the job samples in."""
    p["policy"]["phases"]["rollout"]["capacity_types"] = ["on_demand", "reserved"]


# ---- sub-rules: every violation branch of each family ------------------------------------------

def b_pool_nodes(p: Plan_) -> None:
    """A pool's node count is not the sum of its allocations."""
    _pool(p, "scoring")["nodes"] += 1


def b_pool_shape(p: Plan_) -> None:
    """An allocation of another GPU shape in the pool (its price and cost unchanged)."""
    _pool(p, "scoring")["allocations"][0]["gpus_per_node"] = 2


def b_alloc_region(p: Plan_) -> None:
    _pool(p, "scoring")["allocations"][0]["region"] = "elsewhere1"


def b_alloc_cost(p: Plan_) -> None:
    a = _pool(p, "scoring")["allocations"][0]
    a["cost_usd"] = f"{float(a['cost_usd']) + 1:.2f}"


def b_pool_region(p: Plan_) -> None:
    """A whole pool (and its allocations) outside the plan's region, without split_regions."""
    pool = _pool(p, "scoring")
    pool["region"] = "elsewhere1"
    for a in pool["allocations"]:
        a["region"] = "elsewhere1"


def b_pool_cost(p: Plan_) -> None:
    pool = _pool(p, "update")
    pool["cost_usd"] = f"{float(pool['cost_usd']) + 1:.2f}"


def b_alloc_hours(p: Plan_) -> None:
    """An allocation billed for less than the run (its cost follows)."""
    a = _pool(p, "update")["allocations"][0]
    a["hours"] = a["hours"] / 2
    a["cost_usd"] = f"{a['nodes'] * a['usd_per_hour'] * a['hours']:.2f}"


def b_pool_busy(p: Plan_) -> None:
    """A pool's busy hours are not its phases' (idle follows)."""
    pool = _pool(p, "scoring")
    pool["busy_hours"] -= 0.5
    pool["idle_hours"] += 0.5


def b_unknown_pool(p: Plan_) -> None:
    _phase(p, "eval")["pool"] = "nowhere"


def b_usable(p: Plan_) -> None:
    """A usable-node fraction that is not the whole replicas (coverage still holds)."""
    _phase(p, "update")["usable_node_fraction"] = 0.5


def b_multinode(p: Plan_) -> None:
    """Training across nodes on nodes too small for it."""
    p["multi_node_training_min_gpus_per_node"] = 64
    _pool(p, "update")["nodes"] = 2  # the accounting break is the price of the shape check


def b_pool_cap(p: Plan_) -> None:
    """A pool-size cap below the largest pool's nodes."""
    p["max_nodes_per_pool"] = max(q["nodes"] for q in p["pools"]) - 1


def b_shared_cap(p: Plan_) -> None:
    """Two pools together over one offer's cap, each within it."""
    roll = _pool(p, "rollout")["allocations"][0]
    score = _pool(p, "scoring")["allocations"][0]
    for key in ("provider", "region", "zone", "instance_type", "capacity_type"):
        roll[key] = score[key]
    roll["max_nodes"] = score["max_nodes"] = score["nodes"]


def b_network_cost(p: Plan_) -> None:
    item = _item(p["network"], "flow", "weight_sync")
    item["usd_per_gb"] = 0.5


def b_sync_reach(p: Plan_) -> None:
    """Weight sync to more nodes than the rollout pool has (its bytes follow)."""
    item = _item(p["network"], "flow", "weight_sync")
    item["nodes"] += 1
    item["gb"] = item["nodes"] * p["steps"] * p["weight_sync_gb_per_node_step"]


def b_sync_cross_zone(p: Plan_) -> None:
    """A rollout node outside the trainer's zone billed as same-zone weight sync."""
    _pool(p, "rollout")["allocations"][0]["zone"] = p["zone"] + "-other"


def b_totals_network(p: Plan_) -> None:
    p["network_cost_usd"] = "1.00"
    p["total_cost_usd"] = f"{float(p['total_cost_usd']) + 1:.2f}"


def b_totals_compute(p: Plan_) -> None:
    p["compute_cost_usd"] = f"{float(p['compute_cost_usd']) + 2:.2f}"
    p["total_cost_usd"] = f"{float(p['total_cost_usd']) + 2:.2f}"


def b_totals_storage(p: Plan_) -> None:
    p["storage_cost_usd"] = f"{float(p['storage_cost_usd']) + 2:.2f}"
    p["total_cost_usd"] = f"{float(p['total_cost_usd']) + 2:.2f}"


def b_totals_phases(p: Plan_) -> None:
    ph = _phase(p, "update")
    ph["cost_usd"] = f"{float(ph['cost_usd']) + 3:.2f}"


def b_storage_cents(p: Plan_) -> None:
    """An item 5 cents off GB-months × price (tolerances are half a cent per rounding)."""
    item = _item(p["storage"], "data_class", "hot_checkpoints")
    item["cost_usd"] = f"{float(item['cost_usd']) + 0.05:.2f}"


def b_storage_min_barely(p: Plan_) -> None:
    """Billed 0.05 % short of the tier's minimum duration."""
    item = _item(p["storage"], "data_class", "retained_checkpoints")
    item["min_days"] = item["gb_months"] * 730.0 / (item["gb"] * 24.0) * 1.0005


def b_disks_rate(p: Plan_) -> None:
    """A pool's disk $/h is not nodes × GB × $/GB-month ÷ 730 (its cost follows the wrong rate)."""
    pool = _pool(p, "scoring")
    pool["disk_usd_per_hour"] *= 2
    _set_disk_cost(p, pool, pool["disk_usd_per_hour"] * p["makespan_hours"])


def b_disks_cost(p: Plan_) -> None:
    """A pool's disks billed for less than its held hours (the totals follow)."""
    _set_disk_cost(p, _pool(p, "update"), _pool(p, "update")["disk_usd_per_hour"]
                   * p["makespan_hours"] / 2)


def b_disks_total(p: Plan_) -> None:
    """The plan's disk total is not the pools' sum (the total follows it)."""
    p["disk_cost_usd"] = f"{float(p['disk_cost_usd']) + 1:.2f}"
    p["total_cost_usd"] = f"{float(p['total_cost_usd']) + 1:.2f}"


def b_disks_tier(p: Plan_) -> None:
    """Disks priced at a rate without naming the tier it comes from."""
    _pool(p, "rollout")["disk_tier"] = ""


def _set_disk_cost(p: Plan_, pool: dict[str, Any], usd: float) -> None:
    """Move one pool's disk cost and carry it into the plan's disk total and total."""
    delta = round(usd, 2) - float(pool["disk_cost_usd"])
    pool["disk_cost_usd"] = f"{round(usd, 2):.2f}"
    p["disk_cost_usd"] = f"{float(p['disk_cost_usd']) + delta:.2f}"
    p["total_cost_usd"] = f"{float(p['total_cost_usd']) + delta:.2f}"
# ---- rules on what the plan records (issue #21) ------------------------------------------------

def b_phase_alloc(p: Plan_) -> None:
    """A phase's allocation is not its pool's (a different capacity type)."""
    _phase(p, "scoring")["allocations"][0]["capacity_type"] = "on_demand"


def b_phase_alloc_hours(p: Plan_) -> None:
    a = _phase(p, "eval")["allocations"][0]
    a["hours"] *= 2
    a["cost_usd"] = f"{a['nodes'] * a['usd_per_hour'] * a['hours']:.2f}"


def b_gpu_hours(p: Plan_) -> None:
    _phase(p, "update")["gpu_hours"] *= 2


def b_pool_phases(p: Plan_) -> None:
    _pool(p, "rollout")["phases"].remove("eval")


def b_held(p: Plan_) -> None:
    _pool(p, "scoring")["held_hours"] += 1.0


def b_idle_cost(p: Plan_) -> None:
    pool = _pool(p, "update")
    pool["idle_cost_usd"] = f"{float(pool['idle_cost_usd']) * 2:.2f}"


def b_gang_fraction(p: Plan_) -> None:
    _pool(p, "update")["gang_overhead_fraction"] = 0.01


def b_rate(p: Plan_) -> None:
    _phase(p, "rollout")["tokens_per_node_hour"] *= 1.5


def b_stall(p: Plan_) -> None:
    _phase(p, "checkpoint")["replica_gpus"] = 8


def b_npr(p: Plan_) -> None:
    _phase(p, "scoring")["nodes_per_replica"] = 2


def b_fill(p: Plan_) -> None:
    p["fill_fraction"] = 0.5  # a colocated plan has no fill


def b_status(p: Plan_) -> None:
    p["status"] = "time_limit"


def b_calibrated(p: Plan_) -> None:
    _phase(p, "rollout")["calibrated"] = True


def b_flow(p: Plan_) -> None:
    _item(p["network"], "flow", "experience")["flow"] = "dataset_staging"


def b_spot_ok(p: Plan_) -> None:
    p["policy"]["phases"]["scoring"]["capacity_types"] = ["on_demand"]
    p["policy"]["max_spot_share"] = 1.0


def b_split(p: Plan_) -> None:
    p["split_regions"] = True


def b_budget_stop(p: Plan_) -> None:
    p["budget_stop_usd"] = f"{float(p['budget_stop_usd']) * 2:.2f}"


def b_catalog_price(p: Plan_) -> None:
    """A storage price that is not the catalog's, on an item too small for its cost to move."""
    _item(p["storage"], "data_class", "dataset")["usd_per_gb_month"] *= 1.5


def check_catalog(plan: Plan) -> list[str]:
    """``catalog_match`` against the packaged (embedded) catalog the examples are made on."""
    made_on = rules_catalog.packaged_catalog(plan)
    assert made_on is not None
    return rules_catalog.check_against_catalog(plan, made_on)


CASES: dict[str, tuple[str, Callable[[Plan_], None], str, Callable[..., list[str]]]] = {
    # case: (plan, break, family printed, rule function)
    "gen_coverage": (GEN, g_coverage, "coverage", rules_phases.check_coverage),
    "gen_spot_stateless": (GEN, g_spot_stateless, "spot_overhead",
                           rules_pools.check_spot_overheads),
    "gen_capacity_spot": (GEN, g_capacity_spot, "capacity", rules_pools.check_capacity),
    "gen_hold": (GEN, g_hold, "hold", rules_pools.check_hold),
    "gen_deadline": (GEN, b_deadline, "deadline", rules_costs.check_deadline_budget),
    "gen_budget": (GEN, b_budget, "budget", rules_costs.check_deadline_budget),
    "gen_totals": (GEN, b_totals_total, "totals", rules_costs.check_totals),
    "pool_accounting": (GRPO, b_pool_price, "pool_accounting", rules_pools.check_pool_accounting),
    "uncertainty": (GRPO, b_uncertainty, "uncertainty", rules_uncertainty.check_uncertainty),
    "framework": (GRPO, b_framework, "framework", rules_framework.check_framework),
    "zones": (GRPO3, b_zone, "zones", rules_pools.check_zones),
    "hold": (GRPO, b_hold, "hold", rules_pools.check_hold),
    "coverage": (GRPO, b_coverage, "coverage", rules_phases.check_coverage),
    "latency_floor": (GRPO, b_latency_floor, "coverage", rules_phases.check_latency_floors),
    "spot_stateless": (GRPO, b_spot_stateless, "spot_overhead",
                       rules_pools.check_spot_overheads),
    "spot_gang": (GRPO3, b_spot_gang, "spot_overhead", rules_pools.check_spot_overheads),
    "memory": (GRPO, b_memory, "memory", rules_phases.check_memory_fit),
    "capacity": (GRPO3, b_capacity, "capacity", rules_pools.check_capacity),
    "capacity_spot": (GRPO3, b_capacity_spot, "capacity", rules_pools.check_capacity),
    "makespan": (GRPO, b_makespan, "makespan", rules_costs.check_makespan),
    "storage_min_days": (GRPO, b_storage, "storage", rules_costs.check_storage),
    "storage_price": (GRPO, b_storage_price, "storage", rules_costs.check_storage),
    "network_path": (GRPO, b_network_path, "network", rules_costs.check_network),
    "network_bytes": (GRPO, b_network_bytes, "network", rules_costs.check_network),
    "totals_idle": (GRPO, b_totals, "totals", rules_costs.check_totals),
    "totals_total": (SFT, b_totals_total, "totals", rules_costs.check_totals),
    "deadline": (OPD, b_deadline, "deadline", rules_costs.check_deadline_budget),
    "budget": (OPD, b_budget, "budget", rules_costs.check_deadline_budget),
    "bookings": (GRPO3, b_booking, "bookings", rules_blocks.check_bookings),
    "policy": (GRPO, b_policy, "policy", verify.check_policy),
    "pool_nodes": (GRPO3, b_pool_nodes, "pool_accounting", rules_pools.check_pool_accounting),
    "pool_shape": (GRPO3, b_pool_shape, "pool_accounting", rules_pools.check_pool_accounting),
    "alloc_region": (GRPO3, b_alloc_region, "pool_accounting",
                     rules_pools.check_pool_accounting),
    "alloc_cost": (GRPO3, b_alloc_cost, "pool_accounting", rules_pools.check_pool_accounting),
    "pool_region": (GRPO3, b_pool_region, "pool_accounting", rules_pools.check_pool_accounting),
    "pool_cost": (GRPO, b_pool_cost, "pool_accounting", rules_pools.check_pool_accounting),
    "alloc_hours": (GRPO, b_alloc_hours, "hold", rules_pools.check_hold),
    "pool_busy": (GRPO3, b_pool_busy, "hold", rules_pools.check_hold),
    "unknown_pool": (GRPO, b_unknown_pool, "coverage", rules_phases.check_coverage),
    "usable": (GRPO, b_usable, "memory", rules_phases.check_memory_fit),
    "multinode": (GRPO, b_multinode, "capacity", rules_pools.check_capacity),
    "pool_cap": (GRPO, b_pool_cap, "capacity", rules_pools.check_capacity),
    "shared_cap": (GRPO3, b_shared_cap, "capacity", rules_pools.check_capacity),
    "network_cost": (GRPO, b_network_cost, "network", rules_costs.check_network),
    "sync_reach": (GRPO, b_sync_reach, "network", rules_costs.check_network),
    "sync_cross_zone": (GRPO, b_sync_cross_zone, "network", rules_costs.check_network),
    "totals_network": (GRPO, b_totals_network, "totals", rules_costs.check_network),
    "totals_compute": (GRPO, b_totals_compute, "totals", rules_costs.check_totals),
    "totals_storage": (GRPO, b_totals_storage, "totals", rules_costs.check_totals),
    "totals_phases": (GRPO, b_totals_phases, "totals", rules_costs.check_totals),
    "storage_cents": (GRPO, b_storage_cents, "storage", rules_costs.check_storage),
    "other_costs": (GRPO, b_other_costs, "other_costs", rules_costs.check_other_costs),
    "cpu_pools": (GRPO, b_cpu_pools, "cpu_pools", rules_cpu.check_cpu_pools),
    "storage_min_barely": (GRPO, b_storage_min_barely, "storage", rules_costs.check_storage),
    "disks_rate": (GRPO3, b_disks_rate, "disks", rules_costs.check_disks),
    "disks_cost": (OPD, b_disks_cost, "disks", rules_costs.check_disks),
    "disks_total": (SFT, b_disks_total, "totals", rules_costs.check_disks),
    "disks_tier": (GRPO, b_disks_tier, "disks", rules_costs.check_disks),
    "phase_alloc": (GRPO3, b_phase_alloc, "allocations", rules_record.check_allocations),
    "phase_alloc_hours": (GRPO, b_phase_alloc_hours, "allocations",
                          rules_record.check_allocations),
    "gpu_hours": (GRPO, b_gpu_hours, "allocations", rules_record.check_allocations),
    "pool_phases": (GRPO, b_pool_phases, "allocations", rules_record.check_allocations),
    "held": (GRPO3, b_held, "hold", rules_record.check_record_pools),
    "idle_cost": (GRPO, b_idle_cost, "totals", rules_record.check_record_pools),
    "gang_fraction": (GRPO, b_gang_fraction, "spot_overhead", rules_record.check_record_pools),
    "rate": (GRPO, b_rate, "coverage", rules_record.check_record_phases),
    "stall": (GRPO, b_stall, "coverage", rules_record.check_record_phases),
    "npr": (GRPO, b_npr, "memory", rules_record.check_record_phases),
    "fill": (SFT, b_fill, "makespan", rules_record.check_record_plan),
    "status": (GRPO, b_status, "status", rules_record.check_record_plan),
    "calibrated": (GRPO, b_calibrated, "calibration", rules_record.check_record_plan),
    "flow": (GRPO, b_flow, "network", rules_record.check_record_plan),
    "spot_ok": (GRPO3, b_spot_ok, "policy", rules_record.check_record_policy),
    "split": (GRPO, b_split, "policy", rules_record.check_record_policy),
    "budget_stop": (OPD, b_budget_stop, "budget", rules_record.check_record_policy),
    "catalog_price": (GRPO, b_catalog_price, "catalog_match", check_catalog),
}
ONLY_FAMILY = {"storage_price": {"storage", "totals"}, "budget": {"budget", "policy"},
               "alloc_region": {"pool_accounting", "policy"},
               "pool_region": {"pool_accounting", "policy"},
               "multinode": {"capacity", "pool_accounting", "disks"},
               "pool_nodes": {"pool_accounting", "disks"},
               "pool_busy": {"hold", "totals"},
               "unknown_pool": {"coverage", "hold", "allocations"},
               "totals_phases": {"totals", "allocations"}, "usable": {"memory", "coverage"},
               "storage_cents": {"storage", "totals"},
               "capacity_spot": {"capacity", "policy"}, "spot_ok": {"policy", "capacity"},
               "gpu_hours": {"allocations"}, "pool_phases": {"allocations"},
               "held": {"hold"}, "flow": {"network", "spec_match"},
               "gen_budget": {"budget", "policy"}, "gen_capacity_spot": {"capacity", "policy"}}
"""Cases whose break legitimately shows in a second family: a dearer item moves the totals; the
policy's ``budget.stop_at`` is a share of the same budget; a pool in a second region breaks the
policy's ``split_regions``; a phase's cost is a part of compute and the sum of its
allocations; the usable fraction is a factor of the recorded rate (coverage); a two-node
pool with one allocated node is also an accounting error, and its disks are priced for the
other count; a pool's busy hours set its idle cost (totals) and a phase moved to an unknown
pool leaves its pool's busy hours short (hold). A pool's ``spot_ok`` is both a capacity rule
(spot only where allowed) and a record of the policy."""


def _mirror(p: Plan_) -> None:
    """Phase allocations copy their pool's (``allocations`` rule): a break of a pool allocation
    is carried into the copies, so that each case breaks one invariant."""
    pools = {x["name"]: x for x in p["pools"]}
    for ph in p["phases"]:
        pool = pools.get(ph["pool"])
        if pool is None or len(pool["allocations"]) != len(ph["allocations"]):
            continue
        for a, src in zip(ph["allocations"], pool["allocations"], strict=True):
            a.update({k: src[k] for k in rules_record.MIRRORED})


def _check(tmp_path: Path, data: Plan_, *extra: str) -> tuple[int, str]:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    result = runner.invoke(app, ["check", str(path), *extra])
    return result.exit_code, result.output


@pytest.mark.parametrize("name", sorted({c[0] for c in CASES.values()}))
def test_unbroken_plans_pass(name: str, tmp_path: Path) -> None:
    code, out = _check(tmp_path, _load(name))
    assert code == 0, out
    assert out.startswith("ok:")


@pytest.mark.parametrize("case", sorted(CASES))
def test_rule_fires_through_check(case: str, tmp_path: Path) -> None:
    plan_name, brk, family, rule = CASES[case]
    good = _load(plan_name)
    assert rule(Plan.model_validate(good)) == [], "the rule holds on the unbroken plan"
    bad = copy.deepcopy(good)
    brk(bad)
    if family != "allocations":
        _mirror(bad)
    if family != "catalog_match":  # a break of a catalog fact is also a catalog_match one
        bad["catalog"]["notes"] = [*bad["catalog"]["notes"], "test: edited catalog"]
    if (family != "uncertainty" and bad.get("uncertainty") is not None
            and bad.get("schema_version", 0) >= 8):
        # the interval follows the broken figures, so that only the broken invariant fires
        from ptplan.planfile.uncertainty import with_uncertainty

        bad["uncertainty"] = json.loads(
            with_uncertainty(Plan.model_validate(bad)).to_json())["uncertainty"]
    code, out = _check(tmp_path, bad)
    assert code == 1, out
    lines = [x for x in out.splitlines() if x.startswith("violation: ")]
    assert lines, out
    fired = {re.match(r"violation: ([a-z_]+)", x).group(1) for x in lines}  # type: ignore
    assert family in fired, out
    # exactly that invariant: no other family fires
    assert fired <= ONLY_FAMILY.get(case, {family}), out
    got = rule(Plan.model_validate(bad))
    assert got and all(x.startswith((family, "totals")) for x in got), got


@pytest.mark.parametrize("notes", [True, 3, "one note", None, {}])
def test_edited_catalog_notes_are_another_catalog_not_a_traceback(notes: object,
                                                                  tmp_path: Path) -> None:
    """Found by the fuzzer: ``catalog.notes`` edited to a non-list made ``check`` raise
    (``list(True)``). Such a plan names a catalog that is not the embedded snapshot: it is
    checked without the catalog rules, and its unchanged figures still hold."""
    plan = _load("plan-grpo-7b.json")
    plan["catalog"]["notes"] = notes
    code, out = _check(tmp_path, plan)
    assert code == 0, out
    assert out.startswith("ok:")


def test_spec_match_fires_with_spec(tmp_path: Path) -> None:
    """``check --spec``: the spec's deadline differs from the plan's (nothing else changed)."""
    spec = ROOT / "examples" / "sft-8b.yaml"
    good = _load(SFT)
    code, out = _check(tmp_path, good, "--spec", str(spec))
    assert code == 0, out
    bad = copy.deepcopy(good)
    bad["deadline_hours"] = (bad["deadline_hours"] or 0) + 10
    code, out = _check(tmp_path, bad, "--spec", str(spec))
    assert code == 1
    assert {x.split(":")[1].strip() for x in out.splitlines() if x.startswith("violation:")} \
        == {"spec_match"}, out
    assert "deadline" in out


def test_policy_option_fires(tmp_path: Path) -> None:
    """``check --policy``: a stricter policy than the plan was made under names its rule."""
    pol = tmp_path / "strict.yaml"
    pol.write_text("name: strict\nmax_spot_share: 0.0\n", encoding="utf-8")
    code, out = _check(tmp_path, _load(GRPO), "--policy", str(pol))
    assert code == 1, out
    assert "violation: policy strict: max_spot_share" in out


def test_boot_disk_policy_fires(tmp_path: Path) -> None:
    """``check --policy``: a policy asking other boot disks than the plan priced names
    ``boot_disk_gb``; a plan whose pool lost its disk size fails ``disks`` too."""
    pol = tmp_path / "disks.yaml"
    pol.write_text("name: disks\nextends: default\nboot_disk_gb: 500\n", encoding="utf-8")
    code, out = _check(tmp_path, _load(GRPO), "--policy", str(pol))
    assert code == 1, out
    assert "violation: policy disks: boot_disk_gb: pool rollout is priced with 200 GB" in out
    bad = _load(SFT)
    _pool(bad, "all")["boot_disk_gb"] = 0
    code, out = _check(tmp_path, bad)
    assert code == 1, out
    assert "violation: disks: pool all has no boot disk size" in out


def test_no_pools_is_named(tmp_path: Path) -> None:
    bad = _load(SFT)
    bad["pools"] = []
    code, out = _check(tmp_path, bad)
    assert code == 1
    assert "violation: pool_accounting: the plan has no pools" in out


# ---- the enumeration ---------------------------------------------------------------------------

def _families_in_source() -> set[str]:
    """Rule family names the verifier's sources print: the word before ``: `` at the start of a
    string literal (``policy {line}`` for the policy family)."""
    found: set[str] = set()
    # every rules_* module of the package (a new one is enumerated without editing this test)
    mods = [importlib.import_module(f"ptplan.planfile.{m.name}")
            for m in pkgutil.iter_modules(ptplan.planfile.__path__)
            if m.name.startswith("rules_")]
    assert {m.__name__ for m in (rules_pools, rules_phases, rules_costs, rules_record, rules_spec,
                                 rules_catalog, rules_cpu)} <= {m.__name__ for m in mods}
    for mod in [*mods, verify]:
        src = inspect.getsource(mod)
        found |= set(re.findall(r'f?"([a-z_]+): ', src))
        found |= set(re.findall(r'f"(policy) \{', src))
    return found


def test_every_rule_has_a_firing_case() -> None:
    rules = {f.__name__ for f in verify.RULES}
    covered = {c[3].__name__ for c in CASES.values()}
    assert rules - covered == set(), f"rules without a firing case: {rules - covered}"
    families = _families_in_source()
    fired = {c[2] for c in CASES.values()} | {"spec_match"}
    assert families, "no rule family found in the verifier's sources"
    assert families - fired == set(), f"rule families without a firing case: {families - fired}"
    # the module docstring lists the families too
    doc = verify.__doc__ or ""
    listed = set(re.findall(r"\* ``([a-z_]+)", doc))
    assert listed - fired - {"policy"} == set(), listed - fired


# ---- spec_match: every branch of verify_against_spec --------------------------------------------

def _spec_sft():
    from ptplan.spec.project import load_spec

    return load_spec(str(ROOT / "examples" / "sft-8b.yaml"))


def _sm_name(p: Plan_) -> None:
    p["spec_name"] = "other"


def _sm_digest(p: Plan_) -> None:
    p["spec_digest"] = "sha256:" + "0" * 64


def _sm_tokens(p: Plan_) -> None:
    _phase(p, "update")["tokens"] *= 1.01


def _sm_precision(p: Plan_) -> None:
    _phase(p, "update")["precision"] = "int4"


def _sm_pool(p: Plan_) -> None:
    _phase(p, "update")["pool"] = "nowhere"


def _sm_gpu(p: Plan_) -> None:
    _pool(p, "all")["gpu"] = "NoSuchGPU"


def _sm_floor(p: Plan_) -> None:
    _phase(p, "update")["latency_floor_hours"] += 0.5


def _sm_busy(p: Plan_) -> None:
    _phase(p, "update")["busy_hours"] *= 1.01


def _sm_rate(p: Plan_) -> None:
    _phase(p, "update")["tokens_per_node_hour"] *= 1.01


def _sm_layout(p: Plan_) -> None:
    _phase(p, "update")["parallel_layout"]["tp"] = 64


def _sm_policy(p: Plan_) -> None:
    p["policy"] = {"no_such_key": 1}


def _sm_effective(p: Plan_) -> None:
    _phase(p, "update")["usable_node_fraction"] = 0.0


SPEC_CASES = {
    "name": (_sm_name, "plan is for"), "digest": (_sm_digest, "digest differs"),
    "tokens": (_sm_tokens, "tokens"), "precision": (_sm_precision, "is not allowed"),
    "pool": (_sm_pool, "unknown pool"), "gpu": (_sm_gpu, "unknown GPU"),
    "floor": (_sm_floor, "latency floor"), "busy": (_sm_busy, "busy"),
    "rate": (_sm_rate, "throughput"), "layout": (_sm_layout, "layout"),
    "policy": (_sm_policy, "not a valid policy"), "effective": (_sm_effective, "no effective"),
}


@pytest.mark.parametrize("case", sorted(SPEC_CASES))
def test_spec_match_branches(case: str) -> None:
    brk, words = SPEC_CASES[case]
    good = _load(SFT)
    spec = _spec_sft()
    assert verify.verify_against_spec(Plan.model_validate(good), spec) == []
    bad = copy.deepcopy(good)
    brk(bad)
    got = verify.verify_against_spec(Plan.model_validate(bad), spec)
    assert got and all(x.startswith("spec_match: ") for x in got), got
    assert any(words in x for x in got), got


def test_spec_match_when_the_spec_has_no_such_phase() -> None:
    """A plan phase the spec does not have (an SFT spec against an RL plan's phases)."""
    got = verify.verify_against_spec(Plan.model_validate(_load(GRPO)), _spec_sft())
    assert any("has no rollout phase" in x for x in got), got
