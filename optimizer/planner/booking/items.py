"""What a plan that books capacity says of it: its ``bookings`` (one per pool allocation of a
booked capacity type, with the call that books it), its status against the booking search's
bound, and the explanation's comparison of each booking with the same nodes on demand
(:mod:`ptplan.planner.booking.plans`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from ptplan.planfile.schema import Booking, Plan, Status, hours, usd
from ptplan.planner.assembly.explain import explain_plan
from ptplan.planner.search.context import Context, LayoutRun
from ptplan.providers.base import BOOKED_TYPES, Catalog
from ptplan.providers.blocks import billed_hours, calendar_reservation_name, units
from ptplan.spec.project import ProjectSpec

BOOKING_SCHEMA = 6
"""The plan schema that added bookings (``ptplan.planfile.schema``)."""


def finish(p: Plan, win: tuple[Context, list[LayoutRun]], catalog: Catalog,
           spec: ProjectSpec, objective: str, bound_how: tuple[float, str], value: float,
           explain: bool, notes: Sequence[str] = ()) -> Plan:
    """The plan's bookings, status against the search's bound (and ``notes``: warnings that
    make it ``feasible``), and explanation; ``win`` is the winner's context and runs."""
    bookings = bookings_of(p, catalog, spec)
    bound, how = bound_how
    gap = max(0.0, value / bound - 1.0) if bound > 0 else 0.0
    warnings = list(p.warnings)
    status = p.status
    cross = p.solver.cross_check
    for note in notes:
        status = Status.feasible
        warnings.append(note)
    if gap > 1e-6 and abs(value - bound) > 0.005:
        status = Status.feasible
        cross = f"bound {bound:,.2f} {how}; the plan is within {gap:.2%} of it"
        warnings.append(f"with capacity blocks bookable the plan is within {gap:.2%} of a "
                        f"lower bound {how} (status feasible): a plan booking differently "
                        f"may be {'cheaper' if objective == 'cost' else 'faster'} by at most "
                        "that")
    else:
        gap = 0.0
    for b in bookings:
        if b.wait_hours:
            warnings.append(f"flex-start: expected wait {b.wait_hours:g} h before pool {b.pool} "
                            f"starts (not billed); run + wait = "
                            f"{p.makespan_hours + b.wait_hours:.2f} h")
    solver = p.solver.model_copy(update={"status": status, "gap": round(gap, 9),
                                         "cross_check": cross})
    # bookings are schema 6; a plan with CPU pools is already 7
    p = p.model_copy(update={"schema_version": max(BOOKING_SCHEMA, p.schema_version)
                             if bookings else p.schema_version,
                             "bookings": bookings, "status": status, "solver": solver,
                             "warnings": warnings})
    if explain:
        ex = explain_plan(win[0], win[1], p, objective)
        ex = ex.model_copy(update={"summary": ex.summary + [compare_line(b) for b in bookings]})
        p = p.model_copy(update={"explain": ex})
    return p


def compare_line(b: Booking) -> str:
    """The booking against the same nodes on demand for the held hours (explain)."""
    head = (f"booking: pool {b.pool} {b.nodes} x {b.instance_type} {b.capacity_type} "
            f"${b.cost_usd}")
    if b.capacity_type == "block":
        head += (f" for {b.units} x {b.unit_hours:g} h = {b.duration_hours:g} h "
                 f"({b.rounding_hours:.2f} h lost to rounding)")
    if b.on_demand_cost_usd is None:
        return head + "; no on-demand offer of this type to compare"
    saved = float(b.on_demand_cost_usd) - float(b.cost_usd)
    return (head + f" vs ${b.on_demand_cost_usd} on demand for the held {b.held_hours:.2f} h: "
            f"{'saves' if saved >= 0 else 'costs'} ${abs(saved):,.2f}")


def bookings_of(p: Plan, catalog: Catalog, spec: ProjectSpec) -> list[Booking]:
    """One booking per pool allocation of a booked capacity type."""
    od = {(o.provider, o.region, o.instance_type): o.usd_per_hour for o in catalog.offers
          if o.capacity_type == "on_demand" and not o.zone}
    start = spec.sla.start_after.isoformat() if spec.sla.start_after else ""
    units_by = {(o.provider, o.region, o.zone, o.instance_type, o.capacity_type): o
                for o in catalog.block_offers}
    out: list[Booking] = []
    for pool in p.pools:
        for a in pool.allocations:
            if a.capacity_type not in BOOKED_TYPES:
                continue
            offer = units_by[(a.provider, a.region, a.zone, a.instance_type, a.capacity_type)]
            held = pool.held_hours
            unit = offer.block_unit_hours or 0.0
            duration = billed_hours(held, unit) if a.capacity_type == "block" else held
            price = od.get((a.provider, a.region, a.instance_type))
            out.append(Booking(
                pool=pool.name, capacity_type=a.capacity_type, provider=a.provider,
                region=a.region, zone=a.zone, instance_type=a.instance_type, nodes=a.nodes,
                usd_per_hour=a.usd_per_hour, unit_hours=unit,
                units=units(held, unit) if a.capacity_type == "block" else 0,
                duration_hours=hours(duration), held_hours=hours(held),
                rounding_hours=hours(duration - held),
                cost_usd=usd(a.nodes * a.usd_per_hour * duration),
                upfront=a.capacity_type == "block", wait_hours=offer.wait_hours,
                earliest_start=start, on_demand_usd_per_hour=price,
                on_demand_cost_usd=usd(a.nodes * price * held) if price is not None else None,
                how_to_book=how_to_book(a.provider, a.region, a.instance_type, a.nodes,
                                        a.capacity_type, duration, start),
            ))
    return out


def how_to_book(provider: str, region: str, itype: str, nodes: int, kind: str,
                duration: float, start: str) -> str:
    """The exact call that books it (AWS: find the offering, then purchase it)."""
    h = round(duration) if kind == "block" else math.ceil(duration - 1e-9)  # never short
    if provider == "aws" and kind == "block":
        return (f"aws ec2 describe-capacity-block-offerings --region {region} --instance-type "
                f"{itype} --instance-count {nodes} --capacity-duration-hours {h} "
                f"--start-date-range {start}T00:00:00Z; then aws ec2 purchase-capacity-block "
                f"--region {region} --capacity-block-offering-id <the cheapest offering's "
                "CapacityBlockOfferingId> --instance-platform Linux/UNIX")
    if kind == "flex_start":
        return (f"gcloud compute instances create <name> --zone <a zone of {region}> "
                f"--machine-type {itype} --provisioning-model FLEX_START --max-run-duration "
                f"{h}h --instance-termination-action DELETE (x {nodes}; or a GKE node pool "
                "with flex-start / queued provisioning: ptplan render)")
    if provider == "gcp":
        # a future reservation request in calendar mode (the flags of
        # https://cloud.google.com/compute/docs/instances/create-future-reservations-calendar-mode
        # and the gcloud reference of `compute future-reservations create`); the
        # reservation it delivers is named so that a GKE node pool can consume it
        begin = datetime.fromisoformat(start).replace(tzinfo=UTC)
        end = begin + timedelta(hours=h)
        name = calendar_reservation_name(itype, start)
        return (f"gcloud compute future-reservations create {name} --zone <a zone of {region} "
                f"that sells {itype}> --machine-type {itype} --total-count {nodes} "
                f"--start-time {begin:%Y-%m-%dT%H:%M:%SZ} --end-time {end:%Y-%m-%dT%H:%M:%SZ} "
                "--reservation-mode CALENDAR --deployment-type DENSE --planning-status SUBMITTED "
                f"--require-specific-reservation --reservation-name {name} "
                "--auto-delete-auto-created-reservations (not cancellable once approved)")
    return (f"{provider} calendar reservation of {nodes} x {itype} in {region} for {h} h "
            f"from {start}")
