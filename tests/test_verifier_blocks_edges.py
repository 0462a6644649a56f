"""The booked-capacity rules of the verifier (``optimizer/planfile/rules_blocks.py``, schema 6) at
their edges (docs/testing.md, mutation testing of ``rules_blocks.py``, issue #27).

Each test starts from the pinned SFT example plan (``tests/data/plans/sft-8b-frozen.json``, the
SFT example's plan frozen before issue #39: one pool ``all`` of 1 × ``a3-edgegpu-8g-nolssd`` at
$43.06614/h, held 6.4026068416 h), turned into a valid booked plan by hand: its allocation a
capacity ``block`` booked in 24-h units, so ⌈6.4026 / 24⌉ = 1 unit, 24 h billed, 24 −
6.4026068416 = 17.5973931584 h lost to rounding, 1 × 43.06614 × 24 = $1,033.58736 → "1033.59"
paid upfront; or ``flex_start`` billed for the held hours only, 1 × 43.06614 × 6.4026068416 =
$275.74. One figure is then broken and ``check_bookings`` must name exactly that, in its own
words."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from ptplan.planfile.rules_blocks import block_units, check_bookings, longest_wait
from ptplan.planfile.schema import Plan

PLAN = Path(__file__).resolve().parent / "data" / "plans" / "sft-8b-frozen.json"
HELD = 6.4026068416
PRICE = 43.06614
ITYPE = "a3-edgegpu-8g-nolssd"
WHAT = f"bookings: 1 x {ITYPE} block for pool all"
FLEX = f"bookings: 1 x {ITYPE} flex_start for pool all"


def _raw(kind: str = "block") -> dict[str, Any]:
    raw: dict[str, Any] = json.loads(PLAN.read_text(encoding="utf-8"))
    pool = raw["pools"][0]
    alloc = pool["allocations"][0]
    assert pool["held_hours"] == HELD and alloc["usd_per_hour"] == PRICE
    assert alloc["instance_type"] == ITYPE and alloc["nodes"] == 1 and alloc["zone"] == ""
    raw["schema_version"] = 6
    alloc["capacity_type"] = kind
    booking = {
        "pool": "all",
        "capacity_type": kind,
        "provider": "gcp",
        "region": "us-central1",
        "instance_type": ITYPE,
        "nodes": 1,
        "usd_per_hour": PRICE,
        "upfront": kind == "block",
        "held_hours": HELD,
        "wait_hours": 0.0,
        "earliest_start": "2026-12-04",
    }
    if kind == "block":
        alloc["billed_hours"] = 24.0
        booking.update(
            unit_hours=24.0,
            units=1,
            duration_hours=24.0,
            rounding_hours=24.0 - HELD,
            cost_usd="1033.59",
        )
    else:
        booking.update(
            unit_hours=0.0,
            units=0,
            duration_hours=HELD,
            rounding_hours=0.0,
            cost_usd="275.74",
            wait_hours=2.0,
        )
    raw["bookings"] = [booking]
    return raw


def _check(raw: dict[str, Any]) -> list[str]:
    return check_bookings(Plan.model_validate(raw))


def _booking(raw: dict[str, Any], **edit: Any) -> dict[str, Any]:
    raw["bookings"][0].update(edit)
    return raw


def test_the_hand_made_booked_plans_pass() -> None:
    assert _check(_raw("block")) == []
    assert _check(_raw("flex_start")) == []


# ---- a booking and its allocation -------------------------------------------------------------


@pytest.mark.parametrize(
    "field,value",
    [
        ("instance_type", "a3-highgpu-8g"),
        ("region", "us-east4"),
        ("provider", "aws"),
        ("pool", "other"),
        ("capacity_type", "flex_start"),
        ("zone", "us-central1-a"),
    ],
)
def test_a_booking_of_another_offer_has_no_allocation(field: str, value: str) -> None:
    """Any field of the key unlike the allocation's: the booking has no allocation, and the
    allocation no booking (two lines, nothing else checked of the stray booking)."""
    raw = _booking(_raw(), **{field: value, "earliest_start": "soon"})
    b = raw["bookings"][0]
    assert _check(raw) == [
        f"bookings: 1 x {b['instance_type']} {b['capacity_type']} for pool {b['pool']} has no "
        "allocation of its own in the pool",
        f"bookings: pool all holds 1 {ITYPE} block without a booking",
    ]


def test_a_second_booking_of_the_same_allocation_is_named_and_the_next_still_checked() -> None:
    """The allocation booked twice: the second is named; a stray booking before the valid one
    is named and the valid one after it still matched (the loop goes on)."""
    raw = _raw()
    raw["bookings"].append(copy.deepcopy(raw["bookings"][0]))
    assert _check(raw) == [f"{WHAT} has no allocation of its own in the pool"]
    raw = _raw()
    stray = dict(raw["bookings"][0], pool="other")
    raw["bookings"].insert(0, stray)
    assert _check(raw) == [
        f"bookings: 1 x {ITYPE} block for pool other has no allocation of its own in the pool"
    ]


def test_a_booking_unlike_its_allocation_in_nodes_or_price() -> None:
    """2 nodes booked (cost 2 × 43.06614 × 24 = $2,067.17), 1 allocated; or $43.0662/h booked
    (6e-5 apart, over the relative 1e-6 × 43.07 = 4.3e-5; cost 43.0662 × 24 = $1,033.59); a
    price 1e-7 relative apart passes."""
    assert _check(_booking(_raw(), nodes=2, cost_usd="2067.17")) == [
        f"bookings: 2 x {ITYPE} block for pool all: the allocation holds 1 at ${PRICE}/h"
    ]
    assert _check(_booking(_raw(), usd_per_hour=43.0662)) == [
        f"{WHAT}: the allocation holds 1 at ${PRICE}/h"
    ]
    assert _check(_booking(_raw(), usd_per_hour=PRICE * (1 + 1e-7))) == []


def test_a_booking_held_unlike_its_pool() -> None:
    assert _check(_booking(_raw(), held_hours=HELD + 0.01)) == [
        f"{WHAT}: held {HELD + 0.01} h != the pool's {HELD} h"
    ]


@pytest.mark.parametrize("nodes,ok", [(1, True), (64, True), (65, False)])
def test_a_booking_holds_1_to_64_instances(nodes: int, ok: bool) -> None:
    """Allocation and booking of ``nodes``: cost nodes × 43.06614 × 24 (64 → $66,150.59)."""
    raw = _booking(_raw(), nodes=nodes, cost_usd=f"{nodes * PRICE * 24:.2f}")
    raw["pools"][0]["allocations"][0]["nodes"] = nodes
    want = (
        []
        if ok
        else [f"bookings: {nodes} x {ITYPE} block for pool all: a booking holds 1 to 64 instances"]
    )
    assert _check(raw) == want


# ---- a block's units, rounding, billing and cost ---------------------------------------------


def test_block_units_cover_the_held_hours_with_whole_units() -> None:
    """⌈held / unit⌉, at least 1, with 1e-9 of slack for hours rounded to 6 places."""
    assert block_units(HELD, 24.0) == 1
    assert block_units(0.0, 24.0) == 1
    assert block_units(72.0, 24.0) == 3
    assert block_units(72.000001, 24.0) == 4
    assert block_units(169.0, 24.0) == 8


def test_a_block_without_a_unit_is_named_and_not_recomputed() -> None:
    """Unit 0 h: "no unit", and neither units nor rounding nor cost are derived from it (the
    bad cost and date are not named); a flex-start booking after it is still checked."""
    raw = _booking(_raw(), unit_hours=0.0, cost_usd="1.00", earliest_start="soon")
    assert _check(raw) == [f"{WHAT}: no unit"]
    # a second allocation of the pool, flex-start 1 x a3-highgpu-8g at $50/h, booked after it:
    # 50 x 6.40260684 = $320.13
    raw["pools"][0]["allocations"].append(
        dict(
            raw["pools"][0]["allocations"][0],
            instance_type="a3-highgpu-8g",
            usd_per_hour=50.0,
            capacity_type="flex_start",
            billed_hours=None,
        )
    )
    raw["bookings"].append(
        dict(
            raw["bookings"][0],
            instance_type="a3-highgpu-8g",
            capacity_type="flex_start",
            usd_per_hour=50.0,
            unit_hours=0.0,
            units=0,
            duration_hours=HELD,
            rounding_hours=0.0,
            cost_usd="320.13",
            upfront=False,
            earliest_start="2026-12-04",
        )
    )
    assert _check(raw) == [f"{WHAT}: no unit"]


def test_a_one_hour_unit_is_a_unit() -> None:
    """Units of 1 h: 6.4026 h take ⌈6.4026⌉ = 7 units, 7 h billed, 0.59739316 h lost to
    rounding, 43.06614 × 7 = $301.46298 → "301.46"."""
    raw = _booking(
        _raw(),
        unit_hours=1.0,
        units=7,
        duration_hours=7.0,
        rounding_hours=7.0 - HELD,
        cost_usd="301.46",
    )
    raw["pools"][0]["allocations"][0]["billed_hours"] = 7.0
    assert _check(raw) == []
    raw["bookings"][0]["units"] = 1
    assert _check(raw) == [f"{WHAT}: 1 x 1 h; covering 6.4026 h takes 7 units (7 h)"]


@pytest.mark.parametrize("edit", [{"units": 2}, {"duration_hours": 48.0}])
def test_a_blocks_units_cover_the_held_hours(edit: dict[str, Any]) -> None:
    """2 units recorded, or 48 h of duration: 6.4026 h take 1 unit of 24 h (the rounding and
    cost are derived from the 24 h, so they still pass)."""
    raw = _booking(_raw(), **edit)
    units = edit.get("units", 1)
    assert _check(raw) == [f"{WHAT}: {units} x 24 h; covering 6.4026 h takes 1 units (24 h)"]


@pytest.mark.parametrize("billed", [None, 24.5, HELD])
def test_a_blocks_allocation_is_billed_its_duration(billed: float | None) -> None:
    raw = _raw()
    raw["pools"][0]["allocations"][0]["billed_hours"] = billed
    assert _check(raw) == [f"{WHAT}: the allocation is billed {billed} h, the booking 24 h"]


def test_a_block_is_paid_upfront() -> None:
    assert _check(_booking(_raw(), upfront=False)) == [f"{WHAT}: a block is paid upfront"]


def test_a_blocks_rounding_hours_are_duration_minus_held() -> None:
    """17.6 h recorded against 24 − 6.40260684 = 17.597393 (0.0026 h over the tolerance of
    max(1e-6, 1e-6 × 17.6)); 17.597393158 (4e-10 off) passes."""
    assert _check(_booking(_raw(), rounding_hours=17.6)) == [
        f"{WHAT}: 17.6 h lost to rounding != 17.597393"
    ]
    assert _check(_booking(_raw(), rounding_hours=17.597393158)) == []


def test_a_blocks_cost_is_nodes_times_price_times_duration_to_the_cent() -> None:
    """$1,033.58736: "1033.59" passes (0.26 ¢ off, tolerance 0.6 ¢ or 1e-6 × $1,033.6 =
    0.1 ¢); "1033.60" (1.3 ¢ off) and the held hours' $275.74 are named."""
    assert _check(_booking(_raw(), cost_usd="1033.60")) == [
        f"{WHAT}: cost 1033.60 != nodes x price x 24 h"
    ]
    assert _check(_booking(_raw(), cost_usd="275.74")) == [
        f"{WHAT}: cost 275.74 != nodes x price x 24 h"
    ]


def test_a_bookings_earliest_start_is_a_date() -> None:
    assert _check(_booking(_raw(), earliest_start="2026-12-04")) == []
    assert _check(_booking(_raw(), earliest_start="soon")) == [
        f"{WHAT}: earliest_start 'soon' is not a date"
    ]


# ---- flex-start ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "edit,billed", [({"units": 1}, None), ({"unit_hours": 24.0}, None), ({}, HELD)]
)
def test_flex_start_has_no_units_and_no_billed_hours(
    edit: dict[str, Any], billed: float | None
) -> None:
    """One unit, a unit of 24 h, or billed hours on the allocation: each alone is named."""
    raw = _booking(_raw("flex_start"), **edit)
    raw["pools"][0]["allocations"][0]["billed_hours"] = billed
    assert _check(raw) == [f"{FLEX}: flex-start is billed as used (no units)"]


def _flex_held(hours: float) -> dict[str, Any]:
    """Pool and booking held ``hours`` (cost 43.06614 × hours)."""
    raw = _booking(
        _raw("flex_start"), held_hours=hours, duration_hours=hours, cost_usd=f"{PRICE * hours:.2f}"
    )
    raw["pools"][0]["held_hours"] = hours
    return raw


@pytest.mark.parametrize(
    "hours,ok",
    [
        (168.0, True),
        (168.0000001, True),
        (168.0 * (1 + 1e-9), True),
        (168.000001, False),
        (169.0, False),
    ],
)
def test_flex_start_runs_at_most_seven_days(hours: float, ok: bool) -> None:
    """The cap is 168 h × (1 + 1e-9) = 168.000000168 h: 168 h, 168.0000001 h and the cap
    itself pass, 168.000001 h and 169 h are named."""
    want = [] if ok else [f"{FLEX}: flex-start runs at most 168 h, the pool is held {hours:.2f} h"]
    assert _check(_flex_held(hours)) == want


def test_flex_starts_rounding_and_cost_are_the_held_hours() -> None:
    """Rounding 0 h (0.5 recorded is named); cost 43.06614 × 6.40260684 = $275.74 ("1033.59",
    a block's 24 h, is named)."""
    assert _check(_booking(_raw("flex_start"), rounding_hours=0.5)) == [
        f"{FLEX}: 0.5 h lost to rounding != 0.000000"
    ]
    assert _check(_booking(_raw("flex_start"), cost_usd="1033.59")) == [
        f"{FLEX}: cost 1033.59 != nodes x price x 6.40261 h"
    ]


# ---- the plan -------------------------------------------------------------------------------


def test_bookings_need_schema_6() -> None:
    raw = _raw()
    raw["schema_version"] = 5
    assert _check(raw) == ["bookings: a plan with bookings is schema 6, not 5"]
    raw = json.loads(PLAN.read_text(encoding="utf-8"))
    assert raw["schema_version"] == 5 and "bookings" not in raw
    assert _check(raw) == []


def test_the_longest_wait_is_the_largest_bookings_and_0_without_one() -> None:
    raw = _raw("flex_start")
    assert longest_wait(Plan.model_validate(raw)) == 2.0
    raw["bookings"].append(dict(raw["bookings"][0], pool="other", wait_hours=5.5))
    raw["bookings"].insert(0, dict(raw["bookings"][0], pool="other", wait_hours=1.0))
    assert longest_wait(Plan.model_validate(raw)) == 5.5
    assert longest_wait(Plan.model_validate(json.loads(PLAN.read_text(encoding="utf-8")))) == 0.0
