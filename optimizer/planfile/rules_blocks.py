"""Verifier rules on capacity booked for the run (schema 6): ``bookings``.

Re-derived from the plan alone (the billing rule of :mod:`ptplan.providers.blocks`, restated): every
``block`` or ``flex_start`` allocation of a pool has one booking of the same pool, type,
instance type, count and $/instance-hour, and every booking one allocation; a block's units
are the fewest whole units covering the pool's held hours (u·⌈held/u⌉, at least one), its
duration, hours lost to rounding, billed hours and cost follow, and it holds 1 to 64
instances; flex-start is billed for the held hours only (no units, no rounding), for at most
7 days; the run plus the longest expected wait meets the deadline (rule ``deadline``).
"""

from __future__ import annotations

import datetime as dt
import math

from ptplan.planfile.rules_base import close, money
from ptplan.planfile.schema import Allocation, Plan, PoolPlan

BOOKED = ("block", "flex_start")
MAX_NODES = 64
FLEX_START_MAX_HOURS = 168.0


def block_units(held: float, unit: float) -> int:
    """The fewest whole units of ``unit`` hours covering ``held`` (at least one)."""
    return max(1, math.ceil(held / unit - 1e-9))


def rounding_usd(pool: PoolPlan) -> float:
    """What a pool's block allocations cost past its held hours."""
    return sum(a.nodes * a.usd_per_hour * ((a.billed_hours or pool.held_hours) - pool.held_hours)
               for a in pool.allocations if a.capacity_type == "block")


def billed(a: Allocation) -> float:
    return a.billed_hours if a.billed_hours is not None else a.hours


def check_bookings(plan: Plan) -> list[str]:
    v: list[str] = []
    allocs = {(p.name, a.capacity_type, a.provider, a.region, a.zone, a.instance_type): (p, a)
              for p in plan.pools for a in p.allocations if a.capacity_type in BOOKED}
    seen: set[tuple] = set()
    for b in plan.bookings:
        key = (b.pool, b.capacity_type, b.provider, b.region, b.zone, b.instance_type)
        what = f"bookings: {b.nodes} x {b.instance_type} {b.capacity_type} for pool {b.pool}"
        if key not in allocs or key in seen:
            v.append(f"{what} has no allocation of its own in the pool")
            continue
        seen.add(key)
        pool, a = allocs[key]
        held = pool.held_hours
        if a.nodes != b.nodes or not close(a.usd_per_hour, b.usd_per_hour):
            v.append(f"{what}: the allocation holds {a.nodes} at ${a.usd_per_hour}/h")
        if not close(b.held_hours, held):
            v.append(f"{what}: held {b.held_hours} h != the pool's {held} h")
        if not 1 <= b.nodes <= MAX_NODES:
            v.append(f"{what}: a booking holds 1 to {MAX_NODES} instances")
        if b.capacity_type == "block":
            if b.unit_hours <= 0:
                v.append(f"{what}: no unit")
                continue
            n = block_units(held, b.unit_hours)
            duration = n * b.unit_hours
            if b.units != n or not close(b.duration_hours, duration):
                v.append(f"{what}: {b.units} x {b.unit_hours:g} h; covering {held:.4f} h "
                         f"takes {n} units ({duration:g} h)")
            if a.billed_hours is None or not close(a.billed_hours, duration):
                v.append(f"{what}: the allocation is billed {a.billed_hours} h, the booking "
                         f"{duration:g} h")
            if not b.upfront:
                v.append(f"{what}: a block is paid upfront")
        else:
            duration = held
            if b.units or b.unit_hours or a.billed_hours is not None:
                v.append(f"{what}: flex-start is billed as used (no units)")
            if held > FLEX_START_MAX_HOURS * (1 + 1e-9):
                v.append(f"{what}: flex-start runs at most {FLEX_START_MAX_HOURS:g} h, the "
                         f"pool is held {held:.2f} h")
        if not close(b.rounding_hours, duration - held, abs_=1e-6):
            v.append(f"{what}: {b.rounding_hours} h lost to rounding != {duration - held:.6f}")
        if not close(money(b.cost_usd), b.nodes * b.usd_per_hour * duration, abs_=0.006):
            v.append(f"{what}: cost {b.cost_usd} != nodes x price x {duration:g} h")
        try:
            dt.date.fromisoformat(b.earliest_start)
        except ValueError:
            v.append(f"{what}: earliest_start {b.earliest_start!r} is not a date")
    for key, (pool, a) in sorted(allocs.items()):
        if key not in seen:
            v.append(f"bookings: pool {pool.name} holds {a.nodes} {a.instance_type} "
                     f"{a.capacity_type} without a booking")
    if plan.bookings and plan.schema_version < 6:
        v.append(f"bookings: a plan with bookings is schema 6, not {plan.schema_version}")
    return v


def longest_wait(plan: Plan) -> float:
    return max((b.wait_hours for b in plan.bookings), default=0.0)
