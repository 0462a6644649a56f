"""The verifier's rules at their edges: exact violation lines, tolerances at the rounding of the
figures they check, and the formulas of the spot overheads worked out by hand.

``test_verifier_rules`` proves each rule fires on a gross break; these cases pin where the line
is (a figure one rounding off passes, one rounding more fails), what the message says, and the
cases a rule must not flag (a reserved allocation, experience across zones, a split rollout
region, a busy time equal to the run or the floor). Each starts from the pinned GRPO plan
(``tests/data/plans/grpo-7b-schema3.json``, the GRPO example's plan before boot disks were
priced: gcp us-west4-a, async; pools rollout 2 × H100 spot, scoring 12 × L4 spot, update
1 × 8 H100 on demand; spot model lost 5, restart 10, checkpoint 3 minutes) and calls the
rule function directly.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pytest

from ptplan.planfile.rules_costs import (
    check_deadline_budget,
    check_makespan,
    check_network,
    check_storage,
    check_totals,
)
from ptplan.planfile.rules_phases import check_coverage, check_latency_floors, check_memory_fit
from ptplan.planfile.rules_pools import (
    check_capacity,
    check_hold,
    check_pool_accounting,
    check_spot_overheads,
)
from ptplan.planfile.schema import Plan

FIXTURE = Path(__file__).resolve().parent / "data" / "plans" / "grpo-7b-schema3.json"
"""The GRPO example's plan as the planner made it before boot disks were priced (schema 3:
rollout 2 x a3-highgpu-1g spot, total $894.97): these edge cases are worked out by hand on
its figures, and a schema-3 plan is still checked by every rule (its disks are 0)."""
Plan_ = dict[str, Any]


@pytest.fixture
def p() -> Plan_:
    return json.loads((FIXTURE).read_text(encoding="utf-8"))


def _pool(p: Plan_, name: str) -> dict[str, Any]:
    return next(x for x in p["pools"] if x["name"] == name)


def _phase(p: Plan_, name: str) -> dict[str, Any]:
    return next(x for x in p["phases"] if x["name"] == name)


def _net(p: Plan_, flow: str) -> dict[str, Any]:
    return next(x for x in p["network"] if x["flow"] == flow)


def run(rule, p: Plan_) -> list[str]:
    return rule(Plan.model_validate(p))


def _cents(x: float) -> str:
    return f"{x:.2f}"


def test_fixture_figures(p: Plan_) -> None:
    """The figures the cases below rely on."""
    assert (p["zone"], p["pipeline_mode"], p["steps"]) == ("us-west4-a", "async", 300)
    assert [x["name"] for x in p["pools"]] == ["rollout", "scoring", "update"]
    assert p["spot_model"] == {"lost_work_minutes": 5.0, "restart_minutes": 10.0,
                               "checkpoint_minutes": 3.0}
    assert (_pool(p, "update")["nodes"], _pool(p, "update")["gpus_per_node"]) == (1, 8)
    assert len(p["storage"]) == 6 and len(p["phases"]) == 6 and len(p["network"]) == 3
    for rule in (check_pool_accounting, check_hold, check_spot_overheads, check_capacity,
                 check_coverage, check_latency_floors, check_memory_fit, check_makespan,
                 check_storage, check_network, check_totals, check_deadline_budget):
        assert run(rule, p) == [], rule.__name__


# ---- pool_accounting ---------------------------------------------------------------------------

def test_pool_nodes_message(p: Plan_) -> None:
    _pool(p, "scoring")["nodes"] = 13
    assert run(check_pool_accounting, p) == [
        "pool_accounting: pool scoring nodes 13 != sum of allocations"]


def test_allocation_cost_message(p: Plan_) -> None:
    _pool(p, "scoring")["allocations"][0]["cost_usd"] = "35.56"
    assert run(check_pool_accounting, p) == [
        "pool_accounting: g2-standard-4 cost 35.56 != nodes x price x hours"]


def test_pool_cost_message_gives_price_times_run(p: Plan_) -> None:
    """44.26095 $/h × 16.517242694771394 h = $731.07."""
    _pool(p, "update")["cost_usd"] = "732.07"
    assert run(check_pool_accounting, p) == [
        "pool_accounting: pool update cost 732.07 != 731.07"]


def test_empty_pool_has_no_nodes(p: Plan_) -> None:
    pool = _pool(p, "scoring")
    pool.update(nodes=0, allocations=[], usd_per_hour=0.0, cost_usd="0.00")
    assert run(check_pool_accounting, p) == ["pool_accounting: pool scoring has no nodes"]


def _move(pool: dict[str, Any], region: str, zone: str) -> None:
    pool["region"] = region
    for a in pool["allocations"]:
        a["region"], a["zone"] = region, zone


def test_split_regions_lets_only_the_rollout_pool_elsewhere(p: Plan_) -> None:
    p["split_regions"] = True
    _move(_pool(p, "rollout"), "us-east1", "us-east1-b")
    assert run(check_pool_accounting, p) == []
    _move(_pool(p, "scoring"), "us-east1", "us-east1-b")
    assert run(check_pool_accounting, p) == [
        "pool_accounting: pool scoring is in gcp/us-east1, outside the plan's region "
        "gcp/us-west4"]


def test_without_split_regions_the_rollout_pool_stays(p: Plan_) -> None:
    _move(_pool(p, "rollout"), "us-east1", "us-east1-b")
    assert run(check_pool_accounting, p) == [
        "pool_accounting: pool rollout is in gcp/us-east1, outside the plan's region "
        "gcp/us-west4"]


# ---- hold --------------------------------------------------------------------------------------

def test_hold_checks_pools_after_an_empty_one(p: Plan_) -> None:
    pool = _pool(p, "scoring")
    pool.update(nodes=0, allocations=[])
    _pool(p, "update")["idle_hours"] += 1.0
    got = run(check_hold, p)
    assert len(got) == 1 and got[0].startswith("hold: pool update idle 1.05375"), got


def test_busy_for_the_whole_run_is_allowed(p: Plan_) -> None:
    held = p["makespan_hours"]
    pool = _pool(p, "update")
    extra = held - pool["busy_hours"]
    pool["busy_hours"], pool["idle_hours"] = held, 0.0
    _phase(p, "update")["busy_hours"] += extra
    assert run(check_hold, p) == []


def test_busy_half_an_hour_beyond_the_run(p: Plan_) -> None:
    held = p["makespan_hours"]
    pool = _pool(p, "update")
    pool["busy_hours"], pool["idle_hours"] = held + 0.5, 0.0
    _phase(p, "update")["busy_hours"] += held + 0.5 - 16.46348605523519
    assert run(check_hold, p) == [
        f"hold: pool update busy {held + 0.5} h exceeds the run {held} h"]


# ---- spot_overhead: the formulas by hand -------------------------------------------------------

def test_stateless_spot_fraction_by_hand(p: Plan_) -> None:
    """λ = 0.5 /h, lost 5 + restart 10 min: 1 − 0.5 × 15 / 60 = 0.875."""
    a = _pool(p, "rollout")["allocations"][0]
    a["interruptions_per_hour"], a["effective_fraction"] = 0.5, 0.875
    assert run(check_spot_overheads, p) == []
    a["effective_fraction"] = 0.876
    assert run(check_spot_overheads, p) == [
        "spot_overhead: a3-highgpu-1g effective fraction 0.876 != 0.875000000"]


def test_gang_spot_fraction_by_hand(p: Plan_) -> None:
    """The update pool as a gang of 2 spot nodes at λ = 0.05 /h each plus 1 on-demand node (its
    recorded rate does not count): Λ = 0.1 /h, C = 3 min, R = 10 min:
    1 − √(2 × 0.05 h × 0.1) − (10/60) × 0.1 = 1 − 0.1 − 0.016667 = 0.883333."""
    want = 1.0 - 0.1 - 0.1 / 6.0
    assert want == pytest.approx(0.8833333333)
    pool = _pool(p, "update")
    od = pool["allocations"][0]
    spot = dict(od, capacity_type="spot", nodes=2, interruptions_per_hour=0.05)
    od.update(interruptions_per_hour=0.3)
    pool["allocations"] = [spot, od]
    for a in pool["allocations"]:
        a["effective_fraction"] = round(want, 8)
    assert run(check_spot_overheads, p) == []
    for a in pool["allocations"]:
        a["effective_fraction"] = 0.8833
    got = run(check_spot_overheads, p)
    assert got == ["spot_overhead: pool update effective fraction 0.8833 != 0.883333333 "
                   "(gang model)"] * 2, got


def test_every_pool_is_checked_whatever_the_order(p: Plan_) -> None:
    p["pools"] = [_pool(p, "update"), _pool(p, "scoring"), _pool(p, "rollout")]
    _pool(p, "rollout")["allocations"][0]["effective_fraction"] = 1.0
    got = run(check_spot_overheads, p)
    assert len(got) == 1 and got[0].startswith("spot_overhead: a3-highgpu-1g "), got


def test_on_demand_and_unrated_spot_are_not_discounted(p: Plan_) -> None:
    """On-demand is never interrupted (whatever rate is recorded), and spot without a rate is
    taken as uninterrupted: fraction 1 in both models."""
    roll = _pool(p, "rollout")["allocations"][0]
    roll.update(capacity_type="on_demand", interruptions_per_hour=0.5, effective_fraction=1.0)
    sc = _pool(p, "scoring")["allocations"][0]
    sc.update(interruptions_per_hour=None, effective_fraction=1.0)
    up = _pool(p, "update")["allocations"][0]
    up.update(capacity_type="spot", interruptions_per_hour=None, effective_fraction=1.0)
    assert run(check_spot_overheads, p) == []


# ---- capacity ----------------------------------------------------------------------------------

def test_reserved_is_a_capacity_type(p: Plan_) -> None:
    _pool(p, "update")["allocations"][0]["capacity_type"] = "reserved"
    assert run(check_capacity, p) == []


def test_region_level_offer_over_its_cap_names_the_region(p: Plan_) -> None:
    """(A cap of 0 is refused by the schema since #21: caps are at least 1.)"""
    alloc = _pool(p, "update")["allocations"][0]
    alloc["nodes"], alloc["max_nodes"] = 2, 1
    assert run(check_capacity, p) == [
        "capacity: 2 a3-edgegpu-8g-nolssd on_demand in us-west4 exceeds the offer's cap 1",
        "capacity: pools together hold 2 a3-edgegpu-8g-nolssd on_demand in us-west4, the "
        "offer's cap is 1"]


def test_shared_cap_message_names_the_zone(p: Plan_) -> None:
    roll = _pool(p, "rollout")["allocations"][0]
    score = _pool(p, "scoring")["allocations"][0]
    for key in ("instance_type", "gpu"):
        roll[key] = score[key]
    assert run(check_capacity, p) == [
        "capacity: pools together hold 10 g2-standard-4 spot in us-west4-a, the offer's cap "
        "is 8"]


def test_multi_node_training_rule_edges(p: Plan_) -> None:
    """One node is not multi-node training whatever its size; 2 nodes of exactly the minimum
    GPUs per node are allowed."""
    p["multi_node_training_min_gpus_per_node"] = 16
    assert run(check_capacity, p) == []
    p["multi_node_training_min_gpus_per_node"] = 8
    _pool(p, "update")["nodes"] = 2
    _pool(p, "update")["allocations"][0]["nodes"] = 2
    assert run(check_capacity, p) == []


def test_pool_cap_is_inclusive(p: Plan_) -> None:
    p["max_nodes_per_pool"] = 12  # the scoring pool's nodes
    assert run(check_capacity, p) == []
    p["max_nodes_per_pool"] = 11
    assert run(check_capacity, p) == [
        "capacity: pool scoring has 12 nodes, the pool cap is 11"]


# ---- coverage and memory -----------------------------------------------------------------------

def test_a_low_effective_fraction_loses_coverage(p: Plan_) -> None:
    """Half the rollout nodes' time lost: the rollout and eval phases cover half their tokens."""
    _pool(p, "rollout")["allocations"][0]["effective_fraction"] = 0.5
    got = run(check_coverage, p)
    assert [x.split(" ")[2] for x in got] == ["rollout", "eval"], got
    assert got[0] == ("coverage: phase rollout covers "
                      f"{2 * 0.5 * 40469208.02308477 * 15.546989991512909:.6g} of 1.25829e+09 "
                      "tokens")


def test_busy_exactly_at_the_latency_floor_is_allowed(p: Plan_) -> None:
    ph = _phase(p, "update")
    ph["latency_floor_hours"] = ph["busy_hours"]
    assert run(check_latency_floors, p) == []


def test_multi_node_replicas_use_whole_replicas_only(p: Plan_) -> None:
    """3 nodes, replicas of 2 nodes (16 GPUs): one replica, 2 of 3 nodes usable."""
    _pool(p, "update")["nodes"] = 3
    ph = _phase(p, "update")
    ph.update(nodes_per_replica=2, replica_gpus=16, usable_node_fraction=2 / 3)
    assert run(check_memory_fit, p) == []
    ph["usable_node_fraction"] = 1.0
    assert run(check_memory_fit, p) == [
        f"memory: phase update usable fraction 1.0 != {2 / 3}"]


# ---- makespan, storage, deadline, budget -------------------------------------------------------

def test_makespan_a_minute_off(p: Plan_) -> None:
    p["makespan_hours"] += 1 / 60
    assert len(run(check_makespan, p)) == 1


def test_async_without_a_rollout_pool_has_no_fill(p: Plan_) -> None:
    """Run = max(pool busy) + fill × rollout busy; no pool named rollout adds nothing."""
    _pool(p, "rollout")["name"] = "generation"
    p["makespan_hours"] = max(x["busy_hours"] for x in p["pools"])
    assert run(check_makespan, p) == []


def test_storage_half_a_gb_hour_short_of_the_minimum(p: Plan_) -> None:
    """1 GB for a 30-day minimum is 720 GB-hours; 719.5 billed is short."""
    item = next(x for x in p["storage"] if x["data_class"] == "retained_checkpoints")
    item.update(gb=1.0, min_days=30.0, gb_months=719.5 / 730.0, usd_per_gb_month=0.0,
                cost_usd="0.00")
    got = run(check_storage, p)
    assert len(got) == 1 and "below the gcs_nearline minimum duration of 30 days" in got[0], got
    item["gb_months"] = 720.0 / 730.0
    assert run(check_storage, p) == []


def test_deadline_and_budget_are_inclusive(p: Plan_) -> None:
    p["deadline_hours"] = p["makespan_hours"]
    p["budget_usd"] = p["total_cost_usd"]
    assert run(check_deadline_budget, p) == []


# ---- network -----------------------------------------------------------------------------------

def test_experience_across_zones_may_be_labelled_same_zone(p: Plan_) -> None:
    """The one accepted exception: experience data between zones of one region."""
    item = _net(p, "experience")
    item["src"]["zone"] = "us-west4-b"
    assert run(check_network, p) == []
    w = _net(p, "weight_sync")
    w["dst"]["zone"] = "us-west4-b"
    assert run(check_network, p)[0] == ("network: weight_sync from us-west4 to us-west4 is "
                                        "labelled same_zone, the ends say cross_zone")


def test_experience_with_a_wrong_label_is_named(p: Plan_) -> None:
    _net(p, "experience")["path"] = "inter_region"
    assert run(check_network, p) == [
        "network: experience from us-west4 to us-west4 is labelled inter_region, the ends say "
        "same_zone"]


def _priced(p: Plan_) -> None:
    """Staging 1,000.4 GB at $0.01 = $10.004 → "10.00"; experience 18.874368 GB at $0.02 =
    $0.377 → "0.38"; total $10.38."""
    st = _net(p, "dataset_staging")
    st.update(gb=1000.4, usd_per_gb=0.01, cost_usd="10.00")
    ex = _net(p, "experience")
    ex.update(usd_per_gb=0.02, cost_usd="0.38")
    p["network_cost_usd"] = "10.38"


def test_network_items_rounded_to_cents_and_summed(p: Plan_) -> None:
    _priced(p)
    assert run(check_network, p) == []
    p["network_cost_usd"] = "10.40"  # within half a cent per item and the total's rounding
    assert run(check_network, p) == []
    p["network_cost_usd"] = "10.36"
    assert run(check_network, p) == []
    p["network_cost_usd"] = "10.00"
    assert run(check_network, p) == ["totals: network 10.00 != 10.38 from its items"]


def test_network_item_half_a_dollar_off(p: Plan_) -> None:
    _priced(p)
    _net(p, "dataset_staging")["cost_usd"] = "10.50"
    p["network_cost_usd"] = "10.88"
    assert run(check_network, p) == [
        "network: dataset_staging cost 10.50 != GB x $/GB = 10.00"]


def test_weight_sync_in_two_items(p: Plan_) -> None:
    """One node per item (same path): together they reach both rollout nodes."""
    w = _net(p, "weight_sync")
    w.update(nodes=1, gb=4560.0)
    p["network"].append(copy.deepcopy(w))
    assert run(check_network, p) == []


def test_no_weight_sync_when_nothing_is_sent(p: Plan_) -> None:
    p["weight_sync_gb_per_node_step"] = 0.0
    p["network"] = [x for x in p["network"] if x["flow"] != "weight_sync"]
    assert run(check_network, p) == []


def test_small_weights_still_reach_every_node(p: Plan_) -> None:
    """0.5 GB per node and step (a 0.25 B model in bf16): 2 nodes × 300 × 0.5 = 300 GB."""
    p["weight_sync_gb_per_node_step"] = 0.5
    _net(p, "weight_sync")["gb"] = 300.0
    assert run(check_network, p) == []
    _net(p, "weight_sync").update(nodes=3, gb=450.0)
    assert run(check_network, p) == [
        "network: weight sync reaches 3 node(s), the rollout pool has 2"]


def test_rollout_in_another_zone_billed_cross_zone(p: Plan_) -> None:
    _pool(p, "rollout")["allocations"][0]["zone"] = "us-west4-b"
    w = _net(p, "weight_sync")
    w["dst"]["zone"] = "us-west4-b"
    w["path"] = "cross_zone"
    assert run(check_network, p) == []


def test_rollout_in_another_zone_billed_same_zone(p: Plan_) -> None:
    _pool(p, "rollout")["allocations"][0]["zone"] = "us-west4-b"
    assert run(check_network, p) == [
        "network: 0 rollout node(s) billed cross-zone, 2 are outside the trainer's zone "
        "us-west4-a"]


def test_split_region_rollout_is_not_counted_as_cross_zone(p: Plan_) -> None:
    p["split_regions"] = True
    _move(_pool(p, "rollout"), "us-east1", "us-east1-b")
    w = _net(p, "weight_sync")
    w["dst"].update(region="us-east1", zone="us-east1-b")
    w["path"] = "inter_region"
    assert run(check_network, p) == []


# ---- totals ------------------------------------------------------------------------------------

def test_totals_count_pools_after_an_empty_one(p: Plan_) -> None:
    """The scoring pool emptied: compute = (5.65474 + 44.26095) $/h × held; idle = each pool's
    $/h × (held − busy); its phase costs nothing."""
    held = p["makespan_hours"]
    _pool(p, "scoring").update(nodes=0, allocations=[], usd_per_hour=0.0, cost_usd="0.00")
    _phase(p, "scoring")["cost_usd"] = "0.00"
    compute = (5.65474 + 44.26095) * held
    idle = 5.65474 * (held - 16.126991860861057) + 44.26095 * (held - 16.46348605523519)
    p["compute_cost_usd"] = _cents(compute)
    p["idle_cost_usd"] = _cents(idle)
    p["total_cost_usd"] = _cents(round(compute, 2) + 15.28)
    assert run(check_totals, p) == []


@pytest.mark.parametrize(("field", "also_total", "line"), [
    # Σ $/h × held = (5.65474 + 3.3436 + 44.26095) × 16.517242694771394 = 879.6962
    ("compute_cost_usd", True, "totals: compute 880.19 != 879.70"),
    ("idle_cost_usd", False, "totals: idle 6.55 != 6.05"),
    ("total_cost_usd", False, "totals: total 895.47 != compute + disks + storage + network 894.97"),
])
def test_totals_half_a_dollar_off(p: Plan_, field: str, also_total: bool, line: str) -> None:
    p[field] = _cents(float(p[field]) + 0.5)
    if also_total:
        p["total_cost_usd"] = _cents(float(p["total_cost_usd"]) + 0.5)
    assert line in run(check_totals, p)


def test_total_within_its_roundings(p: Plan_) -> None:
    p["total_cost_usd"] = _cents(float(p["total_cost_usd"]) + 0.01)
    assert run(check_totals, p) == []


def test_total_includes_network(p: Plan_) -> None:
    p["network_cost_usd"] = "10.38"
    p["total_cost_usd"] = _cents(894.97 + 10.38)
    assert run(check_totals, p) == []


def test_storage_total_within_half_a_cent_per_item(p: Plan_) -> None:
    """Six items: 7 roundings of half a cent = 3.5 cents; 4 cents off is still within 0.042."""
    p["storage_cost_usd"] = "15.32"
    p["total_cost_usd"] = "895.01"
    assert run(check_totals, p) == []
    p["storage_cost_usd"] = "15.33"
    p["total_cost_usd"] = "895.02"
    assert run(check_totals, p) == ["totals: storage 15.33 != 15.28 from its items"]


def test_phase_costs_within_half_a_cent_per_phase(p: Plan_) -> None:
    """Six phases and the idle (7 × 0.006) and compute, the balance of five rounded parts
    (5 × 0.0051): 0.0675. A campaign frontier point at $390/h rounded 2.4 cents apart."""
    ph = _phase(p, "update")
    ph["cost_usd"] = _cents(float(ph["cost_usd"]) + 0.06)
    assert run(check_totals, p) == []
    ph["cost_usd"] = _cents(float(ph["cost_usd"]) + 0.01)
    got = run(check_totals, p)
    assert len(got) == 1 and got[0].startswith("totals: phases + idle = "), got


def test_gang_formula_constants() -> None:
    """The hand figure of ``test_gang_spot_fraction_by_hand``: √(2 × 3/60 × 0.1) = 0.1."""
    assert math.sqrt(2 * 3 / 60 * 0.1) == pytest.approx(0.1)


def test_cross_zone_count_in_the_message(p: Plan_) -> None:
    """Both rollout nodes outside the trainer's zone, one billed cross-zone and one same-zone."""
    _pool(p, "rollout")["allocations"][0]["zone"] = "us-west4-b"
    w = _net(p, "weight_sync")
    w.update(nodes=1, gb=4560.0)
    cross = copy.deepcopy(w)
    cross["dst"]["zone"] = "us-west4-b"
    cross["path"] = "cross_zone"
    p["network"].append(cross)
    assert run(check_network, p) == [
        "network: 1 rollout node(s) billed cross-zone, 2 are outside the trainer's zone "
        "us-west4-a"]


def test_a_pool_at_the_cap_is_not_over_it(p: Plan_) -> None:
    """A (tampered) pool cap of 2: the 12-node scoring pool is over it; the 2-node rollout
    pool, exactly at it, and the 1-node update pool are not (a cap of 0, which tested a 1-node
    pool over it, is refused by the schema since #21)."""
    p["max_nodes_per_pool"] = 2
    assert run(check_capacity, p) == ["capacity: pool scoring has 12 nodes, the pool cap is 2"]
