"""GCP DWS capacity booked in plans from the embedded catalog (issue #15, GCP side): the
published flex-start and calendar-mode rates of ``providers/data/gcp_dws.csv`` chosen where
they beat on demand, and not where whole days of calendar mode cost more than the run.

The catalog is the embedded one cut to a3-megagpu-8g in us-central1 (on demand $92.21427/h;
flex-start $44.851548/h = 8 × 4.423936 + 9.46006; calendar mode $48.189028/h = 8 × 4.841121 +
9.46006, in 24-h units up to 90 days), so every pool runs on that machine and the figures can
be checked by hand; the small GRPO spec of planner_fixtures.py."""

from __future__ import annotations

from dataclasses import replace
from datetime import date, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from planner_fixtures import small_catalog, small_spec
from test_blocks import (
    assert_never_better_and_exact_when_optimal,
    block,
    booked_spec,
    flex,
    with_booked,
)

from ptplan.planfile.verify import verify_plan
from ptplan.planner.api import plan
from ptplan.providers.base import Catalog, Offer
from ptplan.providers.embedded import embedded_catalog

TODAY = "2026-12-04"
OD, FLEX, CAL = 92.21427, 44.851548, 48.189028


@pytest.fixture(autouse=True)
def _today(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PTPLAN_TODAY", TODAY)


def mega(kinds: tuple[str, ...] = ("block", "flex_start")) -> Catalog:
    emb = embedded_catalog()

    def keep(o: Offer) -> bool:
        return (o.provider, o.region, o.instance_type) == ("gcp", "us-central1",
                                                           "a3-megagpu-8g")

    return replace(emb, offers=tuple(o for o in emb.offers
                                     if keep(o) and o.capacity_type == "on_demand"),
                   block_offers=tuple(o for o in emb.block_offers
                                      if keep(o) and o.capacity_type in kinds),
                   cpu_offers=(), reserved_rates=())


def test_the_embedded_rates_are_the_published_skus() -> None:
    rates = {o.capacity_type: o.usd_per_hour for o in mega().offers + mega().block_offers}
    assert rates == {"on_demand": OD, "flex_start": FLEX, "block": CAL}
    assert pytest.approx(8 * 4.423936 + 9.46006) == FLEX and pytest.approx(
        8 * 4.841121 + 9.46006) == CAL


def test_a_short_run_books_flex_start_billed_as_used() -> None:
    """Flex-start is billed per hour at 48.6 % of on demand and the run is far under 7 days:
    the update pool's n nodes cost n × 44.851548 × held instead of n × 92.21427 × held."""
    plain = plan(small_spec(sla={"deadline_hours": None}), mega())
    p = plan(small_spec(sla={"deadline_hours": None, "start_after": TODAY}), mega())
    assert p.status == "optimal" and verify_plan(p) == []
    (b,) = p.bookings
    update = next(q for q in p.pools if q.name == "update")
    assert (b.pool, b.capacity_type, b.instance_type, b.units) == (
        "update", "flex_start", "a3-megagpu-8g", 0)
    assert b.held_hours == update.held_hours < 168
    assert float(b.cost_usd) == pytest.approx(b.nodes * FLEX * b.held_hours, abs=0.006)
    assert float(b.on_demand_cost_usd) == pytest.approx(b.nodes * OD * b.held_hours, abs=0.006)
    assert float(p.total_cost_usd) < float(plain.total_cost_usd)
    assert "--provisioning-model FLEX_START" in b.how_to_book


def test_a_run_past_seven_days_books_calendar_mode_in_whole_days() -> None:
    """Without the reference model and with 2 nodes per pool the run holds its pools 181.15 h:
    past flex-start's 7 days, so the update pool's 2 nodes book calendar mode for ⌈181.15/24⌉
    = 8 days: 2 × 48.189028 × 192 = $18,504.59 (10.85 h lost to rounding) against
    2 × 92.21427 × 181.15 = $33,409.67 on demand."""
    extra = {"reference_model": False, "placement": {"max_nodes_per_pool": 2}}
    p = plan(small_spec(data={"steps": 30_000}, sla={"deadline_hours": None,
                                                     "start_after": TODAY}, **extra), mega())
    assert p.status == "optimal" and verify_plan(p) == []
    (b,) = p.bookings
    assert (b.capacity_type, b.nodes, b.unit_hours, b.units, b.duration_hours) == (
        "block", 2, 24.0, 8, 192.0)
    assert b.held_hours == pytest.approx(181.15, abs=0.01) and b.held_hours > 168
    assert b.cost_usd == f"{2 * CAL * 192:.2f}" == "18504.59"
    assert float(b.on_demand_cost_usd) == pytest.approx(2 * OD * b.held_hours, abs=0.006)
    assert b.rounding_hours == pytest.approx(192 - b.held_hours)
    # the exact request: 2 VMs for 8 days from the start date, in calendar mode, delivered
    # as a reservation named for the GKE node pool to consume
    start = date.fromisoformat(TODAY)
    end = (start + timedelta(days=8)).isoformat()
    name = f"ptplan-a3-megagpu-8g-{start:%Y%m%d}"
    assert b.how_to_book.startswith(f"gcloud compute future-reservations create {name} ")
    for flag in ("--machine-type a3-megagpu-8g", "--total-count 2",
                 f"--start-time {TODAY}T00:00:00Z", f"--end-time {end}T00:00:00Z",
                 "--reservation-mode CALENDAR", f"--reservation-name {name}"):
        assert flag in b.how_to_book
    plain = plan(small_spec(data={"steps": 30_000}, sla={"deadline_hours": None}, **extra),
                 mega())
    assert float(p.total_cost_usd) < float(plain.total_cost_usd)


def test_calendar_mode_does_not_pay_when_one_day_costs_more_than_the_run() -> None:
    """Calendar mode only (no flex-start): the plain plan costs $393.04 in all, and one node
    booked for the shortest reservation, one day, alone costs 48.189028 × 24 = $1,156.54; so no
    plan that books beats it, and the plan with a start date is the plain plan."""
    plain = plan(small_spec(sla={"deadline_hours": None}), mega(("block",)))
    p = plan(small_spec(sla={"deadline_hours": None, "start_after": TODAY}), mega(("block",)))
    assert plain.total_cost_usd == "393.04" and float(plain.total_cost_usd) < CAL * 24
    assert p.status == "optimal" and p.bookings == []
    assert p.total_cost_usd == plain.total_cost_usd
    assert [q.allocations for q in p.pools] == [q.allocations for q in plain.pools]


@settings(max_examples=10, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(price=st.floats(2.0, 30.0), steps=st.sampled_from([200, 1500, 3000]),
       flex_price=st.floats(5.0, 25.0), deadline=st.sampled_from([None, 30.0, 60.0]))
def test_calendar_mode_shaped_offers_match_brute_force(price, steps, flex_price, deadline):
    """GCP's terms on the brute-force fixture: calendar mode sells any count (here 1 to the
    offer's cap of 3) in 24-h units up to 90 days, beside flex-start in the same region; the
    exact search (its lazy cap and count relaxations) must reach the enumeration's optimum."""
    spec = booked_spec(steps, deadline, placement={"max_nodes_per_pool": 3})
    calendar = replace(block(price, 24.0, longest=2160.0, counts=()), max_nodes=3,
                       max_start_days=60)
    catalog = with_booked(small_catalog(caps=(2, 1)), calendar, flex(flex_price, 0.0))
    assert_never_better_and_exact_when_optimal(spec, catalog)
