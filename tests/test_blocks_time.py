"""Capacity blocks and flex-start with objective ``time`` (issue #15, item 1): the exact search
of :mod:`ptplan.planner.booking.fastest` against the brute-force enumeration of
``tests/planner_fixtures.py`` (time = run + flex-start wait; the cheapest plan on a tie), hand-
derived cases, and the search's reuse of frontiers (the same plans as solving every
subproblem from scratch)."""

from __future__ import annotations

import datetime as dt
import json
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from planner_fixtures import brute_force, small_catalog, small_spec
from test_blocks import TODAY, block, booked_spec, flex, with_booked
from typer.testing import CliRunner

from ptplan.cli.app import app
from ptplan.core.errors import InfeasibleError
from ptplan.planfile.schema import Plan
from ptplan.planfile.verify import verify_plan
from ptplan.planner.api import plan
from ptplan.providers.custom import load_custom_catalog
from ptplan.risk.model import build_model
from ptplan.risk.runner import run_trials


@pytest.fixture(autouse=True)
def _today(monkeypatch):
    monkeypatch.setenv("PTPLAN_TODAY", TODAY)


def assert_fastest(spec, catalog):
    """The plan is the enumeration's fastest (run + wait), the cheapest of those, proven."""
    want = brute_force(spec, catalog, "time")
    if want is None:
        with pytest.raises(InfeasibleError):
            plan(spec, catalog, "time", explain=False)
        return None
    p = plan(spec, catalog, "time", explain=False)
    assert verify_plan(p) == []
    wait = max((b.wait_hours for b in p.bookings), default=0.0)
    assert (p.status, p.solver.gap) == ("optimal", 0.0)
    assert p.makespan_hours + wait == pytest.approx(want[1], rel=1e-6)
    assert float(p.total_cost_usd) == pytest.approx(want[0], rel=1e-6, abs=0.006)
    return p


def _capped(steps: int = 3000, budget: float | None = None, deadline: float | None = None):
    """On-demand H100 capped at one node: a block adds update nodes, so it can speed the run."""
    spec = small_spec(data={"steps": steps}, sla={"deadline_hours": deadline,
                                                  "start_after": TODAY},
                      placement={"max_nodes_per_pool": 4}, budget={"max_usd": budget})
    return spec, small_catalog(caps=(1, 1))


def test_a_block_adds_the_nodes_that_make_the_run_fastest():
    """Hand-derived: with one on-demand H100 node, the plain fastest plan takes 42.2 h
    ($1,223.49); two block nodes (one 24-h unit, 2 × 12 × 24 = $576) bring the update to three
    nodes and the run to 18.1 h for $1,101.49: faster and, here, cheaper too."""
    spec, catalog = _capped()
    plain = plan(spec.model_copy(update={"sla": spec.sla.model_copy(update={
        "start_after": None})}), catalog, "time", explain=False)
    assert plain.makespan_hours == pytest.approx(42.19, abs=0.01)
    p = assert_fastest(spec, with_booked(catalog, block(12.0, counts=(1, 2))))
    assert p is not None
    (b,) = p.bookings
    assert (b.nodes, b.units, b.cost_usd) == (2, 1, "576.00")
    assert p.makespan_hours == pytest.approx(18.12, abs=0.01)
    assert p.total_cost_usd == "1101.49"


def test_a_budget_below_the_blocks_whole_units_leaves_no_plan():
    """Priced per held hour the booked plan would cost $960; its whole unit makes it $1,101.49,
    above a $1,000 budget, and no plan without the block fits it either (the plain plan
    costs at least $1,223.49): infeasible, as the enumeration says."""
    spec, catalog = _capped(budget=1000.0)
    assert assert_fastest(spec, with_booked(catalog, block(12.0, counts=(1, 2)))) is None


def test_the_flex_start_wait_counts_in_the_time():
    """Flex-start nodes as fast as on demand but waiting 30 h: the run with them would be
    faster (more nodes) but ends later once the wait is added; with no wait they win."""
    spec, catalog = _capped()
    slow = assert_fastest(spec, with_booked(catalog, flex(10.0, 30.0)))
    assert slow is not None and slow.bookings == []
    fast = assert_fastest(spec, with_booked(catalog, flex(10.0, 0.0)))
    assert fast is not None and [b.capacity_type for b in fast.bookings] == ["flex_start"]
    assert fast.makespan_hours < slow.makespan_hours


def test_a_tie_on_time_goes_to_the_cheaper_plan():
    """Block nodes at a tenth of on demand, with room for on-demand nodes too: the fastest run
    holds as many update nodes either way; it books the block when that is cheaper."""
    spec, catalog = _capped()
    catalog = replace(catalog, offers=tuple(
        replace(o, max_nodes=4) if o.capacity_type == "on_demand" else o
        for o in catalog.offers))
    p = assert_fastest(spec, with_booked(catalog, block(2.0, counts=(1, 2))))
    assert p is not None and p.bookings


@settings(max_examples=14, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(price=st.floats(2.0, 30.0), unit=st.sampled_from([24.0, 168.0]),
       steps=st.sampled_from([200, 1500, 3000]), flex_price=st.floats(5.0, 25.0),
       wait=st.sampled_from([0.0, 1.0, 6.0]), deadline=st.sampled_from([None, 30.0]),
       budget=st.sampled_from([None, 300.0, 1200.0]),
       counts=st.sampled_from([(1,), (1, 2), (2,)]), caps=st.sampled_from([(2, 1), (1, 1)]))
def test_random_booked_offers_fastest_matches_brute_force(price, unit, steps, flex_price, wait,
                                                          deadline, budget, counts, caps):
    spec = booked_spec(steps, deadline, placement={"max_nodes_per_pool": 3},
                       budget={"max_usd": budget})
    catalog = with_booked(small_catalog(caps=caps), block(price, unit, counts=counts),
                          flex(flex_price, wait, region="r2"))
    assert_fastest(spec, catalog)


@pytest.mark.parametrize("objective", ["cost", "time"])
@pytest.mark.parametrize("case", [
    (9.0, 24.0, "r1", 12.0, 1.0, "r2", 30.0, None),
    (14.0, 24.0, "r2", 11.0, 0.0, "r1", None, None),
    (6.0, 168.0, "r1", 15.0, 6.0, "r1", None, 1500.0),
])
def test_reused_frontiers_give_the_plans_of_fresh_ones(objective, case, monkeypatch):
    """The subproblems share pool frontiers and are searched in the booked offers' regions
    (:mod:`ptplan.planner.booking.contexts`); with every subproblem built from scratch over
    every region (``engine.prepare``) the plan is the same (explanation included)."""
    from ptplan.planner.booking import contexts as booking_contexts
    from ptplan.planner.search.engine import prepare

    price, unit, where, flex_price, wait, flex_where, deadline, budget = case
    spec = booked_spec(3000, deadline, placement={"max_nodes_per_pool": 3},
                       budget={"max_usd": budget})
    catalog = with_booked(small_catalog(caps=(2, 1)),
                          block(price, unit, counts=(1, 2), region=where),
                          flex(flex_price, wait, region=flex_where))
    reused = plan(spec, catalog, objective, explain=True, timings=False)

    def fresh(self, extra, regional=False):
        return prepare(self.spec, replace(self.catalog, offers=self.catalog.offers
                                          + tuple(extra)), self.policy)

    monkeypatch.setattr(booking_contexts.Contexts, "get", fresh)
    assert plan(spec, catalog, objective, explain=True, timings=False).to_json() == \
        reused.to_json()


# -- pareto and whatif book as plan does ------------------------------------------------------

LAB = """as_of: 2026-11-01
offers:
  - {provider: lab, region: r1, instance_type: h100x8, gpu: H100, gpus_per_node: 8,
     on_demand_usd_per_hour: 20.0, block_usd_per_hour: 12.0, block_unit_hours: 24,
     block_max_nodes: 4, flex_start_usd_per_hour: 14.0, flex_start_wait_hours: 2}
  - {provider: lab, region: r1, instance_type: l4x1, gpu: L4, gpus_per_node: 1,
     on_demand_usd_per_hour: 0.8}
"""
SPEC = """name: grpo-1.5b-test
method: rl
algorithm: grpo
model: {params_b: 1.54, layers: 28, hidden_size: 1536, heads: 12, kv_heads: 2, head_dim: 128}
data: {steps: 3000, prompts_per_step: 256, samples_per_prompt: 8, prompt_tokens: 512,
       response_tokens: 2048}
checkpoints: {every_steps: 20}
reference_model: false
placement: {max_nodes_per_pool: 4}
"""


def _files(tmp_path):
    (tmp_path / "lab.yaml").write_text(LAB)
    (tmp_path / "spec.yaml").write_text(SPEC)
    return str(tmp_path / "spec.yaml"), str(tmp_path / "lab.yaml")


def test_cli_pareto_start_after_books_each_point_as_plan_does(tmp_path):
    """Each point is `plan --start-after` at its deadline (same cost and bookings); the ends
    are the fastest plan (its run + flex-start wait) and the cheapest; without a start date
    no point books, and the booked frontier is never dearer at the same deadline."""
    import json

    from typer.testing import CliRunner

    from ptplan.cli.app import app
    from ptplan.planner.api import pareto
    from ptplan.providers.custom import load_custom_catalog
    from ptplan.spec.project import load_spec

    spec, lab = _files(tmp_path)
    r = CliRunner().invoke(app, ["pareto", spec, "--catalog", lab, "--start-after", TODAY,
                                 "--points", "5", "--format", "json"])
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    booked = [p for p in report["points"] if p.get("bookings")]
    assert booked and all("flex_start" in " ".join(p["pools"]) for p in booked)
    s = load_spec(spec)
    s = s.model_copy(update={"sla": s.sla.model_copy(update={
        "start_after": dt.date.fromisoformat(TODAY)})})
    cat = load_custom_catalog(lab)
    for point in report["points"]:
        at = s.model_copy(update={"sla": s.sla.model_copy(update={
            "deadline_hours": point["deadline_hours"]})})
        p = plan(at, cat, explain=False)
        assert (p.total_cost_usd, p.makespan_hours) == (point["total_cost_usd"],
                                                       point["makespan_hours"])
        assert len(p.bookings) == len(point.get("bookings", []))
    fast = plan(s, cat, "time", explain=False)
    wait = max((b.wait_hours for b in fast.bookings), default=0.0)
    assert report["fastest_hours"] == pytest.approx(fast.makespan_hours + wait, abs=1e-6)
    assert report["cheapest_usd"] == plan(s, cat, explain=False).total_cost_usd
    plain = pareto(load_spec(spec), cat, points=5)
    assert not any(p.get("bookings") for p in plain["points"])
    assert float(report["cheapest_usd"]) < float(plain["cheapest_usd"])


def test_cli_whatif_start_after_books_each_scenario_as_plan_does(tmp_path):
    """The baseline and each scenario are the plans `plan --start-after` makes of their
    catalogs: on demand at 0.5 × undercuts flex-start, which the baseline books."""
    import json

    from typer.testing import CliRunner

    from ptplan.cli.app import app
    from ptplan.providers.custom import load_custom_catalog
    from ptplan.scenarios.pricerules import apply_rules, parse_rule
    from ptplan.spec.project import load_spec

    spec, lab = _files(tmp_path)
    rule = "capacity_type=on_demand *= 0.5"
    r = CliRunner().invoke(app, ["whatif", spec, "--catalog", lab, "--start-after", TODAY,
                                 "--price", rule, "--format", "json", "--no-timings",
                                 "--workers", "1"])
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    s = load_spec(spec)
    s = s.model_copy(update={"sla": s.sla.model_copy(update={
        "start_after": dt.date.fromisoformat(TODAY)})})
    cat = load_custom_catalog(lab)
    base = plan(s, cat, explain=False, timings=False)
    assert report["baseline"]["bookings"] and \
        report["baseline"]["total_cost_usd"] == base.total_cost_usd
    cheaper, _ = apply_rules(cat, [parse_rule(rule)])
    (scenario,) = report["scenarios"]
    want = plan(s, cheaper, explain=False, timings=False)
    assert scenario["plan"]["total_cost_usd"] == want.total_cost_usd
    assert len(scenario["plan"].get("bookings", [])) == len(want.bookings) == 0


# -- plan --risk and simulate with bookings ---------------------------------------------------

def _booked_spot_plan(block_price: float, flex_fields: str = ""):
    """A plan whose update pool books a block (one 24-h unit) beside a spot rollout pool."""
    text = LAB.replace("on_demand_usd_per_hour: 20.0, block_usd_per_hour: 12.0",
                       "on_demand_usd_per_hour: 20.0, spot_usd_per_hour: 8.0, "
                       f"spot_interruptions_per_hour: 0.3, block_usd_per_hour: {block_price}")
    text = text.replace("flex_start_usd_per_hour: 14.0, flex_start_wait_hours: 2",
                        flex_fields or "flex_start_usd_per_hour: 99.0")
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "lab.yaml").write_text(text)
        cat = load_custom_catalog(str(Path(d) / "lab.yaml"))
    spec = booked_spec(3000, 22.0, reference_model=False, placement={"max_nodes_per_pool": 4})
    return plan(spec, cat, explain=False, timings=False)


def test_simulation_bills_a_block_only_past_its_end():
    """A block is prepaid for whole units: a delayed run costs nothing more on its nodes until
    it outlasts the booking (slack = booked hours − the interruption-free run), then their
    on-demand price per hour; the other nodes cost their rate per hour of delay as before."""
    p = _booked_spot_plan(4.0)
    (b,) = [x for x in p.bookings if x.capacity_type == "block"]
    m = build_model(p)
    assert m.wait_hours == 0.0
    ((slack, past),) = m.overruns
    assert slack == pytest.approx(b.duration_hours - m.base_makespan_hours)
    assert past == pytest.approx(b.nodes * b.on_demand_usd_per_hour)
    rate = sum(q.usd_per_hour + q.disk_usd_per_hour for q in p.pools)
    assert m.usd_per_hour == pytest.approx(rate - b.nodes * b.usd_per_hour)
    res = run_trials(m, 4000, 0)
    delay = res.makespan_hours - m.base_makespan_hours
    assert (delay <= slack).all()  # this plan's delays stay inside its block: no extra
    assert np.allclose(res.cost_usd, m.base_cost_usd + m.usd_per_hour * delay
                       + res.fallback_usd)
    short = replace(m, overruns=((1.0, past),))  # a block ending 1 h after the run
    res = run_trials(short, 4000, 0)
    delay = res.makespan_hours - m.base_makespan_hours
    assert (delay > 1.0).any() and (delay <= 1.0).any()
    plain = m.base_cost_usd + m.usd_per_hour * delay + res.fallback_usd
    assert np.allclose(res.cost_usd - plain, past * np.maximum(0.0, delay - 1.0))


def test_cli_plan_risk_books_and_counts_the_flex_start_wait(tmp_path, monkeypatch):
    """plan --risk with a start date plans each candidate through the booking search; the
    simulated makespan of a flex-start plan holds its wait, and the chosen plan meets the
    deadline at P90 with it (spot interruptions alone: the model's interval left out)."""
    monkeypatch.setattr("ptplan.risk.tighten.with_model_uncertainty", lambda model, plan: model)
    spec, lab = _files(tmp_path)
    (tmp_path / "lab.yaml").write_text(LAB.replace(
        "on_demand_usd_per_hour: 20.0, block", "on_demand_usd_per_hour: 20.0, "
        "spot_usd_per_hour: 8.0, spot_interruptions_per_hour: 0.3, block"))
    (tmp_path / "spec.yaml").write_text(SPEC + "sla: {deadline_hours: 22}\n")
    out = tmp_path / "plan.json"
    r = CliRunner().invoke(app, ["plan", spec, "--catalog", lab, "--start-after", TODAY,
                                 "--risk", "p90", "--format", "json", "--no-timings",
                                 "-o", str(out)])
    assert r.exit_code == 0, r.output
    p = json.loads(out.read_text())
    (b,) = p["bookings"]
    assert b["capacity_type"] == "flex_start" and b["wait_hours"] == 2.0
    m = build_model(Plan.model_validate(p))
    res = run_trials(m, 10_000, 0)
    assert m.wait_hours == 2.0
    assert res.makespan_hours.min() >= m.base_makespan_hours + 2.0 - 1e-9  # the wait is in
    assert float(np.quantile(res.makespan_hours, 0.9)) <= 22.0
