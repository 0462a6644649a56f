"""The cost rules added to the verifier after its 2026-12-03 mutation run, at their edges
(docs/testing.md, mutation testing of ``optimizer/planfile/rules_costs.py``, 2026-12-05): boot
disks (schema 4), other costs (schema 6), the flex-start wait against the deadline (schema 6)
and the tighter total of schema 4 on.

Each test starts from the pinned SFT example plan (``tests/data/plans/sft-8b-frozen.json``, the
SFT example's plan frozen before issue #39: schema 5, one pool ``all`` of 1 node with a 200 GB
boot disk at $0.10/GB-month, i.e. 200 × 0.1 / 730 = $0.02739726/h, $0.18 for the run; makespan
6.40260684 h, deadline 48 h, total $283.83), edits one figure and calls the rule function; the
expected line follows from the edit and the rule's documented tolerance."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from ptplan.planfile.rules_costs import (
    check_deadline_budget,
    check_disks,
    check_other_costs,
    check_totals,
)
from ptplan.planfile.rules_pools import check_pool_accounting
from ptplan.planfile.schema import Booking, Plan

PLAN = Path(__file__).resolve().parent / "data" / "plans" / "sft-8b-frozen.json"
HELD = 6.4026068416


def _raw() -> dict[str, Any]:
    raw: dict[str, Any] = json.loads(PLAN.read_text(encoding="utf-8"))
    assert raw["schema_version"] == 5 and raw["makespan_hours"] == HELD
    assert raw["deadline_hours"] == 48.0 and raw["total_cost_usd"] == "283.83"
    return raw


def _plan(raw: dict[str, Any]) -> Plan:
    return Plan.model_validate(raw)


# ---- disks -------------------------------------------------------------------------------------

def test_disks_are_checked_from_schema_4_on() -> None:
    """A disk cost 5 cents off is named on a schema-4 plan (the schema that priced disks) as on
    schema 5, and not on schema 3 (no disks then)."""
    raw = _raw()
    raw["pools"][0]["disk_cost_usd"] = "0.23"
    want = ["disks: pool all disks 0.23 != $/h x held hours = 0.18",
            "totals: disks 0.18 != 0.23 from the pools"]
    for version, lines in ((5, want), (4, want), (3, [])):
        raw["schema_version"] = version
        assert check_disks(_plan(raw)) == lines, version


def test_a_one_gb_boot_disk_has_a_size() -> None:
    """1 GB is a boot disk size (only ≤ 0 is none): its rate, 1 × 0.1 / 730, differs from the
    recorded one, but no "no boot disk size" line."""
    raw = _raw()
    raw["pools"][0]["boot_disk_gb"] = 1
    got = check_disks(_plan(raw))
    assert got == ["disks: pool all disks $0.027397/h != nodes x GB x $/GB-month / 730 = "
                   "0.000137"], got
    raw["pools"][0]["boot_disk_gb"] = 0
    assert "disks: pool all has no boot disk size" in check_disks(_plan(raw))


def test_the_disk_rate_is_compared_to_1e_9_dollars_per_hour() -> None:
    """The recorded rate is compared within $1e-9/h (rel 1e-6 of $0.027/h is $2.7e-8): half a
    micro-dollar off is named, 5e-10 is not."""
    raw = _raw()
    rate = raw["pools"][0]["disk_usd_per_hour"]
    raw["pools"][0]["disk_usd_per_hour"] = rate + 5e-7
    assert [x.split(" ")[3] for x in check_disks(_plan(raw))] == ["disks"]
    raw["pools"][0]["disk_usd_per_hour"] = rate + 5e-10
    assert check_disks(_plan(raw)) == []


# ---- other costs -------------------------------------------------------------------------------

def _with_other(quantity_ops: float = HELD, fixed_quantity: float = 1.0,
                ops_cost: str | None = None, total: str | None = None) -> Plan:
    """Two lines: data collection $5,000 fixed, ops $25/h for the run's 6.4026 h = $160.07;
    their sum $5,160.07."""
    raw = _raw()
    raw["schema_version"] = 6
    raw["other_costs"] = [
        {"name": "data_collection", "basis": "fixed", "quantity": fixed_quantity,
         "usd_per_unit": 5000.0, "cost_usd": "5000.00"},
        {"name": "ops", "basis": "per_hour", "quantity": quantity_ops, "usd_per_unit": 25.0,
         "cost_usd": ops_cost or "160.07"}]
    raw["other_cost_usd"] = total or "5160.07"
    return _plan(raw)


def test_consistent_other_costs_pass() -> None:
    assert round(HELD * 25, 2) == 160.07
    assert check_other_costs(_with_other()) == []


def test_an_hourly_line_is_billed_for_the_run_within_a_micro_hour() -> None:
    """Half an hour more than the run is named (and its cost then differs from quantity × $/h);
    3e-7 h more is within the 1e-6 h tolerance."""
    got = check_other_costs(_with_other(quantity_ops=HELD + 0.5))
    assert got[0] == f"other_costs: ops is billed for {HELD + 0.5:g} h, the run lasts {HELD:g} h"
    assert check_other_costs(_with_other(quantity_ops=HELD + 3e-7)) == []


def test_a_fixed_line_is_counted_once() -> None:
    got = check_other_costs(_with_other(fixed_quantity=2.0))
    assert got[0] == "other_costs: data_collection is fixed but counted 2 times", got


def test_a_line_cost_is_quantity_times_price_to_the_cent() -> None:
    """$0.50 off a line is named; the line's cost is compared within 0.6 cents."""
    got = check_other_costs(_with_other(ops_cost="160.57", total="5160.57"))
    assert got == ["other_costs: ops 160.57 != quantity x $/unit = 160.07"], got


def test_the_other_costs_total_takes_a_rounding_per_line() -> None:
    """The total may differ from the sum of its two lines by 0.6 cents per line plus one
    (1.8 cents): 1 cent off passes, 2 cents and $1 off are named."""
    assert check_other_costs(_with_other(total="5160.08")) == []
    assert check_other_costs(_with_other(total="5160.09")) == [
        "totals: other costs 5160.09 != 5160.07 from their lines"]
    assert check_other_costs(_with_other(total="5161.07")) == [
        "totals: other costs 5161.07 != 5160.07 from their lines"]


# ---- the flex-start wait and the deadline ------------------------------------------------------

def _wait(hours: float) -> Plan:
    plan = _plan(_raw())
    booking = Booking.model_validate({
        "pool": "all", "capacity_type": "flex_start", "provider": "gcp", "region": "r",
        "instance_type": "a3-highgpu-8g", "nodes": 1, "usd_per_hour": 1.0, "unit_hours": 0.0,
        "units": 0, "duration_hours": HELD, "held_hours": HELD, "rounding_hours": 0.0,
        "cost_usd": "6.40", "upfront": False, "wait_hours": hours, "earliest_start": ""})
    return plan.model_copy(update={"bookings": [booking]})


def test_the_flex_start_wait_counts_against_the_deadline() -> None:
    """6.4026 h of run + 41.6 h of queue = 48.0026 h > 48 h (× (1 + 1e-6)): named; a wait that
    ends the run exactly at the deadline, or 41 h, passes."""
    assert check_deadline_budget(_plan(_raw())) == []
    assert check_deadline_budget(_wait(41.6)) == [
        f"deadline: run {HELD} h + flex-start wait 41.6 h exceeds the deadline 48.0 h"]
    assert check_deadline_budget(_wait(48.0 - HELD)) == []
    assert check_deadline_budget(_wait(41.0)) == []


# ---- the total ---------------------------------------------------------------------------------

def test_from_schema_4_the_total_is_exact_to_the_cent() -> None:
    """From schema 4 the parts add up to the cent (tolerance 0.51 cents): a total 1 cent off is
    named on schemas 4 and 5; a schema-3 plan, written with four separate roundings, may be off
    by 1.51 cents."""
    raw = _raw()
    raw["total_cost_usd"] = "283.84"
    for version in (5, 4):
        raw["schema_version"] = version
        got = check_totals(_plan(copy.deepcopy(raw)))
        assert any(x.startswith("totals: total 283.84 != compute + disks") for x in got), version
    raw["schema_version"] = 3
    assert not any(x.startswith("totals: total") for x in check_totals(_plan(raw)))


# ---- a block's rounding in the pool's cost -----------------------------------------------------

def test_a_blocks_unused_hours_are_in_the_pools_cost() -> None:
    """The pool's one allocation as a capacity block billed for 7 h (the run holds it
    6.4026 h): the allocation and the pool cost 1 × $43.06614/h × 7 h = $301.46, not the
    $275.74 of the held hours; recorded as 301.46 both pass."""
    raw = _raw()
    raw["schema_version"] = 6
    alloc = raw["pools"][0]["allocations"][0]
    assert alloc["usd_per_hour"] == 43.06614 and raw["pools"][0]["cost_usd"] == "275.74"
    alloc["capacity_type"], alloc["billed_hours"] = "block", 7.0
    assert check_pool_accounting(_plan(raw)) == [
        "pool_accounting: a3-edgegpu-8g-nolssd cost 275.74 != nodes x price x hours",
        "pool_accounting: pool all cost 275.74 != 301.46"]
    alloc["cost_usd"] = raw["pools"][0]["cost_usd"] = "301.46"
    assert check_pool_accounting(_plan(raw)) == []
