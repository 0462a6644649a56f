"""Capacity blocks and flex-start in plans (issue #15, item 1): hand-derived cases, the
brute-force oracle extended with booked offers, the policy, the verifier and the CLI."""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from planner_fixtures import brute_force, offer, small_catalog, small_spec
from typer.testing import CliRunner

from ptplan.cli.app import app
from ptplan.core.errors import InfeasibleError, InputError
from ptplan.planfile.schema import SCHEMA_VERSION, Plan
from ptplan.planfile.verify import verify_plan
from ptplan.planner.api import plan
from ptplan.policies.model import default_policy
from ptplan.providers.base import Catalog
from ptplan.providers.custom import load_custom_catalog
from ptplan.providers.embedded import embedded_catalog

TODAY = "2026-12-04"


@pytest.fixture(autouse=True)
def _today(monkeypatch):
    monkeypatch.setenv("PTPLAN_TODAY", TODAY)


def block(price: float, unit: float = 24.0, longest: float = 4368.0,
          counts: tuple[int, ...] = (1, 2, 4, 8), region: str = "r1", itype: str = "h100x8",
          gpu: str = "H100", gpn: int = 8) -> object:
    return replace(offer(region, itype, gpu, gpn, "block", price, 64), block_unit_hours=unit,
                   block_max_hours=longest, block_counts=counts)


def flex(price: float, wait: float, region: str = "r1") -> object:
    return replace(offer(region, "h100x8", "H100", 8, "flex_start", price, 4),
                   block_max_hours=168.0, wait_hours=wait)


def with_booked(catalog: Catalog, *offers) -> Catalog:
    return replace(catalog, block_offers=tuple(offers))


def booked_spec(steps: int = 200, deadline: float | None = None, **extra):
    return small_spec(data={"steps": steps},
                      sla={"deadline_hours": deadline, "start_after": TODAY}, **extra)


def _update(p: Plan):
    return next(q for q in p.pools if q.name == "update")


# -- hand-derived -----------------------------------------------------------------------------

STEPS_10_DAYS = 38_000
"""The small GRPO spec (no reference model, so no scoring pool: the update pool runs the update
alone, which the default policy lets book) at this many steps runs 9 to 10 days."""
NO_REF = {"reference_model": False, "placement": {"max_nodes_per_pool": 2}}
"""... and at most 2 nodes per pool, so the run cannot be sped up to fit fewer units."""


def test_ten_day_run_books_a_two_week_block_when_cheaper():
    """A ~235 h run, 168-h units: two weeks (336 h) cover it. At B = 0.6 × on-demand the two
    update nodes cost 2 × 12 × 336 = $8,064 booked vs 2 × 20 × D ≈ $9,400 on demand, so
    booking beats the plain plan by 2 × 20 × D − 8,064. The exact search finds better still
    (as the brute force does): one update node booked for three weeks (a 453 h run, 504 h
    billed), $2.13 cheaper than the two-node two-week plan; the plan is that optimum."""
    plain = plan(small_spec(data={"steps": STEPS_10_DAYS}, sla={"deadline_hours": None},
                            **NO_REF), small_catalog())
    d = plain.makespan_hours
    assert 216 < d < 240  # 9 to 10 days
    spec, catalog = booked_spec(STEPS_10_DAYS, **NO_REF), with_booked(small_catalog(),
                                                                       block(12.0, 168.0))
    p = assert_never_better_and_exact_when_optimal(spec, catalog)
    assert p is not None and p.status == "optimal"
    (b,) = p.bookings
    assert (b.pool, b.nodes, b.units, b.duration_hours) == ("update", 1, 3, 504.0)
    assert b.rounding_hours == pytest.approx(504.0 - p.makespan_hours)
    assert b.cost_usd == "6048.00"  # 1 × 12 × 504
    two_weeks = float(plain.total_cost_usd) - (2 * 20.0 * d - 8064.0)
    assert float(p.total_cost_usd) == pytest.approx(two_weeks - 2.13, abs=0.02)
    assert p.schema_version == SCHEMA_VERSION  # 8: every plan carries its interval
    assert any(line.startswith("booking: pool update 1 x h100x8 block $6048.00")
               for line in plan(spec, catalog).explain.summary)


def test_rounding_to_week_units_makes_on_demand_cheaper():
    """The same run with B = 0.8 × on-demand: cheaper per hour, but 2 × 16 × 336 = $10,752
    for two weeks is more than 2 × 20 × D ≈ $9,400 on demand for the ~235 h held: no booking,
    and the plan is the plain plan, proven optimal."""
    spec = booked_spec(STEPS_10_DAYS, **NO_REF)
    p = plan(spec, with_booked(small_catalog(), block(16.0, 168.0)))
    plain = plan(small_spec(data={"steps": STEPS_10_DAYS}, sla={"deadline_hours": None},
                            **NO_REF), small_catalog())
    assert p.bookings == []
    assert p.total_cost_usd == plain.total_cost_usd
    assert 2 * 20.0 * plain.makespan_hours < 2 * 16.0 * 336
    want = brute_force(spec, with_booked(small_catalog(), block(16.0, 168.0)))
    assert want is not None and float(p.total_cost_usd) == pytest.approx(want[0], abs=0.006)


def test_a_faster_plan_that_fits_one_week_beats_two_weeks():
    """With 4 nodes per pool allowed, the cheapest plan books 2 nodes for ONE week and adds an
    on-demand node (and a second rollout node) to finish inside it: 2 × 12 × 168 = $4,032 booked
    instead of 2 × 12 × 336; the exhaustive enumeration agrees."""
    spec = booked_spec(STEPS_10_DAYS, reference_model=False)
    catalog = with_booked(small_catalog(), block(12.0, 168.0))
    p = plan(spec, catalog)
    (b,) = p.bookings
    assert (b.nodes, b.units, b.cost_usd) == (2, 1, "4032.00") and p.makespan_hours <= 168
    assert p.deadline_hours is None  # found under a 168-h cap; the plan records the spec's
    assert [a.capacity_type for a in _update(p).allocations] == ["block", "on_demand"]
    want = brute_force(spec, catalog)
    assert want is not None and float(p.total_cost_usd) == pytest.approx(want[0], abs=0.006)


def test_daily_units_book_whole_days():
    """24-h units: the run's held time rounds up to whole days; lost hours = days·24 − D."""
    p = plan(booked_spec(STEPS_10_DAYS, **NO_REF),
             with_booked(small_catalog(), block(16.0, 24.0)))
    (b,) = p.bookings
    assert b.units == math.ceil(p.makespan_hours / 24)
    assert b.rounding_hours == pytest.approx(b.units * 24 - p.makespan_hours)
    assert _update(p).allocations[-1].billed_hours == b.units * 24


def test_flex_start_wait_is_added_to_the_deadline_check():
    """Flex-start at half price with a 2 h wait: used when run + wait meets the deadline, and
    not when only the run does."""
    cheap = with_booked(small_catalog(), flex(10.0, 2.0))
    free = plan(booked_spec(200, deadline=40.0, **NO_REF), cheap)
    assert [b.capacity_type for b in free.bookings] == ["flex_start"]
    assert free.bookings[0].wait_hours == 2.0 and free.bookings[0].rounding_hours == 0.0
    assert any("flex-start: expected wait 2 h" in w for w in free.warnings)
    tight = plan(booked_spec(200, deadline=free.makespan_hours + 1.0, **NO_REF), cheap)
    assert all(b.capacity_type != "flex_start" for b in tight.bookings)
    assert tight.makespan_hours + max((b.wait_hours for b in tight.bookings), default=0) \
        <= free.makespan_hours + 1.0


def test_flex_start_runs_at_most_seven_days():
    p = plan(booked_spec(STEPS_10_DAYS, **NO_REF), with_booked(small_catalog(), flex(10.0, 0.0)))
    assert p.makespan_hours > 168 and p.bookings == []


# -- the policy ------------------------------------------------------------------------------

def test_a_block_never_covers_a_phase_the_policy_forbids():
    """A block of the rollout's shape at a fraction of spot: the default policy lets only the
    update book, so no rollout or scoring pool holds it; block_phases: [] forbids it all."""
    catalog = with_booked(small_catalog(), block(0.5, 24.0), block(0.01, 24.0, itype="l4x1",
                                                                     gpu="L4", gpn=1))
    p = plan(booked_spec(3000), catalog)
    for pool in p.pools:
        for a in pool.allocations:
            if a.capacity_type == "block":
                assert set(pool.phases) - {"checkpoint"} <= {"update"}
    none = default_policy().model_copy(update={"block_phases": []})
    q = plan(booked_spec(3000), catalog, policy=none)
    assert q.bookings == []
    assert "block_phases" in q.policy and "block_phases" not in p.policy


# -- exactness against the brute force -------------------------------------------------------

def assert_never_better_and_exact_when_optimal(spec, catalog):
    """The plan is the brute force's optimum and says so (the exact search of
    :mod:`ptplan.planner.booking.exact`: status optimal, no gap)."""
    want = brute_force(spec, catalog)
    if want is None:
        with pytest.raises(InfeasibleError):
            plan(spec, catalog, explain=False)
        return None
    p = plan(spec, catalog, explain=False)
    assert verify_plan(p) == []
    assert (p.status, p.solver.gap) == ("optimal", 0.0)
    assert float(p.total_cost_usd) == pytest.approx(want[0], rel=1e-6, abs=0.006)
    return p


@pytest.mark.parametrize("price,unit,steps,deadline", [
    (12.0, 24.0, 3000, None), (4.0, 24.0, 200, 40.0), (19.0, 24.0, 3000, 30.0),
    (14.0, 168.0, 3000, None), (30.0, 24.0, 3000, None), (6.0, 24.0, 3300, 24.0),
])
def test_blocks_match_brute_force(price, unit, steps, deadline):
    spec = booked_spec(steps, deadline, placement={"max_nodes_per_pool": 3})
    catalog = with_booked(small_catalog(caps=(2, 1)), block(price, unit, counts=(1, 2)))
    assert_never_better_and_exact_when_optimal(spec, catalog)


@settings(max_examples=12, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(price=st.floats(2.0, 30.0), unit=st.sampled_from([24.0, 168.0]),
       steps=st.sampled_from([200, 1500, 3000]), flex_price=st.floats(5.0, 25.0),
       wait=st.sampled_from([0.0, 1.0, 6.0]), deadline=st.sampled_from([None, 30.0]),
       counts=st.sampled_from([(1,), (1, 2), (2,)]))
def test_random_booked_offers_match_brute_force(price, unit, steps, flex_price, wait,
                                                deadline, counts):
    spec = booked_spec(steps, deadline, placement={"max_nodes_per_pool": 3})
    catalog = with_booked(small_catalog(caps=(2, 1)), block(price, unit, counts=counts),
                          flex(flex_price, wait, region="r2"))
    assert_never_better_and_exact_when_optimal(spec, catalog)


# -- the verifier ----------------------------------------------------------------------------

def _booked_plan() -> Plan:
    return plan(booked_spec(3000, **NO_REF), with_booked(small_catalog(), block(12.0, 24.0)))


@pytest.mark.parametrize("field,value,rule", [
    ("units", 2, "covering"), ("rounding_hours", 0.0, "lost to rounding"),
    ("cost_usd", "1.00", "nodes x price"), ("earliest_start", "soon", "not a date"),
])
def test_verifier_rechecks_block_rounding(field, value, rule):
    p = _booked_plan()
    assert verify_plan(p) == []
    bad = p.model_copy(update={"bookings": [p.bookings[0].model_copy(update={field: value})]})
    assert any(rule in v for v in verify_plan(bad))


def test_verifier_rechecks_billed_hours_and_missing_bookings():
    p = _booked_plan()
    pools = [q.model_copy(update={"allocations": [
        a.model_copy(update={"billed_hours": p.makespan_hours}) for a in q.allocations]})
        for q in p.pools]
    assert any("billed" in v or "cost" in v for v in verify_plan(
        p.model_copy(update={"pools": pools})))
    assert any("without a booking" in v for v in verify_plan(
        p.model_copy(update={"bookings": []})))


def test_json_round_trip_and_plain_plans_stay_schema_5():
    p = _booked_plan()
    again = Plan.model_validate(json.loads(p.to_json()))
    assert verify_plan(again) == [] and again.schema_version == SCHEMA_VERSION
    plain = plan(small_spec(), small_catalog())
    text = plain.to_json()
    assert '"schema_version": 9' in text and "bookings" not in text and "billed_hours" not in text


# -- the catalog and the start date ----------------------------------------------------------

def test_embedded_block_prices_are_published_rates_apart_from_offers():
    cat = embedded_catalog()
    p5 = {(o.region, o.instance_type): o for o in cat.block_offers}
    o = p5[("us-east-1", "p5.48xlarge")]
    assert (o.usd_per_hour, o.block_unit_hours, o.max_start_days, o.gpu) == \
        (39.33, 24.0, 56, "H100")
    assert "aws.amazon.com/ec2/capacityblocks/pricing" in o.source and o.as_of == "2024-12-01"
    assert all(x.capacity_type in ("on_demand", "spot") for x in cat.offers)


def test_a_start_in_the_past_is_an_input_error_and_far_starts_drop_aws_blocks():
    catalog = with_booked(small_catalog(), block(1.0, 24.0))
    with pytest.raises(InputError, match="start_after: 2026-01-01 is in the past"):
        plan(small_spec(sla={"deadline_hours": 40, "start_after": "2026-01-01"}), catalog)
    far = replace(block(1.0, 24.0), max_start_days=56)
    late = (dt.date.fromisoformat(TODAY) + dt.timedelta(days=60)).isoformat()
    p = plan(small_spec(data={"steps": 3000}, sla={"deadline_hours": None,
                                                     "start_after": late}),
             with_booked(small_catalog(), far))
    assert p.bookings == []


def test_custom_catalog_block_and_flex_fields(tmp_path):
    path = tmp_path / "lab.yaml"
    path.write_text(
        "as_of: 2026-11-01\noffers:\n"
        "  - {provider: lab, region: r1, instance_type: h100x8, gpu: H100, gpus_per_node: 8,\n"
        "     on_demand_usd_per_hour: 20.0, block_usd_per_hour: 12.0, block_unit_hours: 168,\n"
        "     block_max_nodes: 16, flex_start_usd_per_hour: 11.0, flex_start_wait_hours: 3}\n")
    cat = load_custom_catalog(str(path))
    kinds = {o.capacity_type: o for o in cat.block_offers}
    assert (kinds["block"].block_unit_hours, kinds["block"].block_max_hours,
            kinds["block"].max_nodes) == (168.0, 182 * 24.0, 16)
    assert (kinds["flex_start"].wait_hours, kinds["flex_start"].block_max_hours) == (3.0, 168.0)
    path.write_text(path.read_text().replace("block_unit_hours: 168", "block_unit_hours: 100"))
    with pytest.raises(InputError, match="block_unit_hours"):
        load_custom_catalog(str(path))


def test_cli_plan_start_after_writes_bookings(tmp_path):
    spec = tmp_path / "spec.yaml"
    with open("examples/grpo-7b.yaml") as f:
        spec.write_text(f.read())
    out = tmp_path / "plan.json"
    res = CliRunner().invoke(app, ["plan", str(spec), "--start-after", TODAY, "--format",
                                   "json", "--no-timings", "-o", str(out)])
    assert res.exit_code == 0, res.output
    p = Plan.model_validate(json.loads(out.read_text()))
    assert verify_plan(p) == []
    res = CliRunner().invoke(app, ["plan", str(spec), "--start-after", "tomorrow"])
    assert res.exit_code == 2 and "--start-after" in res.output


def test_the_price_cache_carries_the_block_rates_for_its_instance_types(tmp_path):
    """A cache holding p5.48xlarge on demand in us-east-1 (and an instance type without a block
    rate) reads back with the embedded block rate for p5 there, shaped by the cached offer."""
    from ptplan.providers.base import Offer
    from ptplan.providers.cache import Pull, load_cache_catalog, store_pull

    def od(itype: str, price: float) -> Offer:
        return Offer(provider="aws", region="us-east-1", zone="", instance_type=itype,
                     gpu="H100", gpus_per_node=8, capacity_type="on_demand",
                     usd_per_hour=price, as_of="2026-12-01T00:00:00Z", source="test")

    db = tmp_path / "prices.sqlite"
    store_pull(Pull("aws", "2026-12-01T00:00:00Z", "test", ("us-east-1",),
                    (od("p5.48xlarge", 55.04), od("p5en.48xlarge", 63.3)), (), ()), db)
    cat = load_cache_catalog(db)
    assert [(o.instance_type, o.capacity_type, o.usd_per_hour, o.block_unit_hours)
            for o in cat.block_offers] == [("p5.48xlarge", "block", 39.33, 24.0)]


def test_check_with_spec_compares_the_bookings_start(tmp_path):
    """``sla.start_after`` is not in the digest (a plan made with --start-after matches its
    spec file); ``check --spec`` holds the bookings to the spec's date when it has one."""
    from ptplan.planfile.verify import verify_against_spec

    p = _booked_plan()
    spec = booked_spec(3000, **NO_REF)
    assert verify_against_spec(p, spec) == []
    assert verify_against_spec(p, spec.model_copy(update={"sla": spec.sla.model_copy(
        update={"start_after": None})})) == []
    later = spec.model_copy(update={"sla": spec.sla.model_copy(
        update={"start_after": dt.date(2026, 12, 11)})})
    assert any("starts 2026-12-04, the spec's sla.start_after is 2026-12-11" in v
               for v in verify_against_spec(p, later))


def test_a_booked_plan_validates_against_the_published_schema():
    import jsonschema

    schema = Plan.model_json_schema()
    data = json.loads(_booked_plan().to_json())
    assert list(jsonschema.Draft202012Validator(schema).iter_errors(data)) == []
    data["bookings"][0]["capacity_type"] = "blocky"
    assert list(jsonschema.Draft202012Validator(schema).iter_errors(data))


# -- sla.deadline as a date --------------------------------------------------------------------

def test_a_date_deadline_counts_hours_from_the_start_date():
    """2026-12-10 00:00 UTC to the end of 2026-12-12 is 72 h; a datetime is its instant (UTC
    when naive); the plan shows where the hours came from."""
    spec = small_spec(sla={"start_after": "2026-12-10", "deadline": "2026-12-12",
                           "deadline_hours": None})
    assert spec.sla.deadline_hours == 72.0
    assert small_spec(sla={"start_after": "2026-12-10", "deadline": "2026-12-11T06:30:00",
                           "deadline_hours": None}).sla.deadline_hours == 30.5
    assert small_spec(sla={"start_after": "2026-12-10", "deadline": "2026-12-10T12:00:00+02:00",
                           "deadline_hours": 10}).sla.deadline_hours == 10.0  # agree
    p = plan(spec, small_catalog(), explain=False)
    assert p.deadline_hours == 72.0
    assert p.defaults_applied[0] == ("sla.deadline_hours = 72 (from sla.deadline 2026-12-12, "
                                     "counted from sla.start_after 2026-12-10 00:00 UTC)")


@pytest.mark.parametrize("sla,message", [
    ({"deadline": "2026-12-12", "deadline_hours": None},
     "deadline 2026-12-12 is a date but start_after is not given; give sla.start_after (the "
     "run's first day) or sla.deadline_hours"),
    ({"start_after": "2026-12-10", "deadline": "2026-12-09", "deadline_hours": None},
     "deadline 2026-12-09 is not after start_after 2026-12-10; give a later deadline"),
    ({"start_after": "2026-12-10", "deadline": "2026-12-10", "deadline_hours": 30},
     "deadline 2026-12-10 (24 h after start_after) and deadline_hours 30 disagree; give one of "
     "them"),
])
def test_a_date_deadline_without_or_before_the_start_is_an_input_error(sla, message):
    with pytest.raises(Exception, match=re.escape(message)):
        small_spec(sla=sla)


def test_cli_start_after_recounts_a_date_deadline(tmp_path):
    text = Path("examples/grpo-7b.yaml").read_text().replace(
        "  deadline_hours: 72\n", "  start_after: 2026-12-10\n  deadline: 2026-12-12\n", 1)
    spec = tmp_path / "spec.yaml"
    spec.write_text(text)
    out = tmp_path / "plan.json"
    r = CliRunner().invoke(app, ["plan", str(spec), "--start-after", "2026-12-11",
                                 "--format", "json", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert json.loads(out.read_text())["deadline_hours"] == 48.0
    spec.write_text(text.replace("  start_after: 2026-12-10\n", ""))
    r = CliRunner().invoke(app, ["plan", str(spec)])
    assert r.exit_code == 2
    assert "deadline 2026-12-12 is a date but start_after is not given" in r.output
