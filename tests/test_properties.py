"""Metamorphic properties of the planner, the Pareto filters and reserve (Hypothesis, with
``@example`` cases for the shapes that break such code: ties, duplicates, running-minimum
dips, infeasible edges).

Example counts are modest (the suite must stay well under CI's time budget): each planner
property plans a small GRPO job (about 0.1 s) a few dozen times.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from planner_fixtures import offer, small_catalog, small_spec

from ptplan.core.errors import InfeasibleError
from ptplan.planfile.schema import Plan
from ptplan.planner.api import plan
from ptplan.planner.frontier.pareto import pareto_mask, pareto_mask3
from ptplan.providers.base import Catalog, EgressRate, StorageTier
from ptplan.reservations.milp import solve as reserve_solve
from ptplan.reservations.problem import DemandClass, Problem, ProductRow

SETTINGS = settings(max_examples=10, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
TIERS = (StorageTier("lab", "*", "standard", 0.023, 0, 0.0, "ms", "t", "U"),
         StorageTier("lab", "*", "cold", 0.004, 90, 0.02, "ms", "t", "U"))
EGRESS = (EgressRate("lab", "cross_zone", 0.01, "t", "U"),)


def catalog(h100_od=20.0, h100_spot=9.0, l4_od=0.8, l4_spot=0.35, l40s_od=1.9, r2=1.1,
            caps=(3, 2)) -> Catalog:
    """small_catalog with storage tiers, cross-zone egress and a second spot zone, so that
    every cost component of the plan is non-zero somewhere."""
    base = small_catalog(h100_od, h100_spot, l4_od, l4_spot, l40s_od, r2, caps)
    extra = offer("r1", "h100x8", "H100", 8, "spot", h100_spot * 1.05, 1, 0.002, "b")
    return replace(base, offers=(*base.offers, extra), storage_tiers=TIERS, egress=EGRESS)


prices = st.fixed_dictionaries({
    "h100_od": st.floats(10, 40), "h100_spot": st.floats(3, 30), "l4_od": st.floats(0.3, 2),
    "l4_spot": st.floats(0.1, 2), "l40s_od": st.floats(0.8, 4), "r2": st.floats(0.7, 1.4)})
DEFAULT = {"h100_od": 20.0, "h100_spot": 9.0, "l4_od": 0.8, "l4_spot": 0.35, "l40s_od": 1.9,
           "r2": 1.1}
DEFAULT_FAILING = {"h100_od": 19.0, "h100_spot": 3.0, "l4_od": 1.0, "l4_spot": 1.0,
                   "l40s_od": 1.0, "r2": 1.0}
"""Prices under which an added dear local spot offer raises the plan's cost (the documented
approximation: :func:`test_known_approximation_local_spot_before_remote`)."""


def run(spec, cat: Catalog, objective: str = "cost") -> Plan | None:
    try:
        return plan(spec, cat, objective, explain=False)
    except InfeasibleError:
        return None


def total(p: Plan) -> float:
    return float(p.total_cost_usd)


def slack(*plans: Plan) -> float:
    """What a plan proven only within its gap (status feasible: pools competing for capped
    offers) may exceed the optimum by; 0 for proven optima."""
    return 1e-9 + sum(total(p) * p.solver.gap for p in plans if p.status != "optimal")


def shape(p: Plan) -> list:
    return sorted((pool.name, a.instance_type, a.capacity_type.value, a.zone, a.region, a.nodes)
                  for pool in p.pools for a in pool.allocations)


def scaled(cat: Catalog, k: float) -> Catalog:
    return replace(cat, offers=tuple(replace(o, usd_per_hour=o.usd_per_hour * k)
                                     for o in cat.offers),
                   storage_tiers=tuple(replace(t, usd_per_gb_month=t.usd_per_gb_month * k,
                                               retrieval_usd_per_gb=t.retrieval_usd_per_gb * k)
                                       for t in cat.storage_tiers),
                   egress=tuple(replace(e, usd_per_gb=e.usd_per_gb * k) for e in cat.egress))


# ---- planner -----------------------------------------------------------------------------------

@SETTINGS
@given(p=prices, k=st.sampled_from([0.25, 0.5, 2.0, 3.0, 10.0]),
       deadline=st.sampled_from([1.0, 2.0, 6.0, None]))
@example(p=DEFAULT, k=2.0, deadline=1.0)  # the 1-h deadline needs a cross-zone rollout node
def test_scaling_every_price_scales_every_cost(p, k, deadline) -> None:
    spec = small_spec(sla={"deadline_hours": deadline})
    a = run(spec, catalog(**p))
    b = run(spec, scaled(catalog(**p), k))
    assert (a is None) == (b is None)
    if a is None or b is None:
        return
    assert shape(b) == shape(a)
    assert b.makespan_hours == pytest.approx(a.makespan_hours, rel=1e-9)
    for field in ("total_cost_usd", "compute_cost_usd", "storage_cost_usd",
                  "network_cost_usd", "idle_cost_usd"):
        # each figure is rounded to the cent once: k × (x ± 0.005) vs (k·x ± 0.005); compute
        # is the balance of three rounded figures (total − storage − network): ± 0.015
        err = 0.0151 if field == "compute_cost_usd" else 0.006
        assert float(getattr(b, field)) == pytest.approx(
            k * float(getattr(a, field)), abs=err * (k + 1)), field


@SETTINGS
@given(p=prices, d1=st.floats(0.5, 8), extra=st.floats(0, 40))
@example(p=DEFAULT, d1=0.9, extra=0.2)
@example(p=DEFAULT, d1=1.0, extra=0.0)
def test_a_later_deadline_never_costs_more(p, d1, extra) -> None:
    cat = catalog(**p)
    a = run(small_spec(sla={"deadline_hours": d1}), cat)
    b = run(small_spec(sla={"deadline_hours": d1 + extra}), cat)
    if a is not None:
        assert b is not None
        assert total(b) <= total(a) + slack(a, b)


@SETTINGS
@given(p=prices, b1=st.floats(40, 200), extra=st.floats(0, 300),
       objective=st.sampled_from(["cost", "time"]))
@example(p=DEFAULT, b1=70.0, extra=5.0, objective="time")
def test_a_larger_budget_never_costs_more(p, b1, extra, objective) -> None:
    """Cost objective: never dearer; time objective: never slower (and within the budget)."""
    cat = catalog(**p)
    a = run(small_spec(sla={"deadline_hours": None}, budget={"max_usd": b1}), cat, objective)
    b = run(small_spec(sla={"deadline_hours": None}, budget={"max_usd": b1 + extra}), cat,
            objective)
    if a is None:
        return
    assert b is not None
    assert total(b) <= b1 + extra
    if objective == "cost":
        assert total(b) <= total(a) + slack(a, b)
    else:
        assert b.makespan_hours <= a.makespan_hours * (1 + 1e-9)


@pytest.mark.xfail(strict=True, reason="documented approximation (docs/planner.md, egress): "
                   "at a site the rollout pool fills its spot nodes from the trainer's zone "
                   "first; fixing it turns this test green and strict xfail then fails: "
                   "drop the mark and the restriction in the property above")
def test_known_approximation_local_spot_before_remote() -> None:
    """A dear spot offer ($19/h, 1 node) added in the trainer's zone a, where the scoring pool
    takes one of the two $3 nodes: the rollout pool's share is then [a $3, new $19] before
    zone b's $3.15 node, so the plan that used a + b ($63.77) is no longer found ($63.99)."""
    cat = catalog(**DEFAULT_FAILING)
    spec = small_spec(sla={"deadline_hours": 1.0})
    base = run(spec, cat)
    new = offer("r1", "h100x8-new", "H100", 8, "spot", 19.0, 1, 0.003, "a")
    more = run(spec, replace(cat, offers=(*cat.offers, new)))
    assert base is not None and more is not None
    assert (total(base), total(more)) == (63.77, 63.77)


@SETTINGS
@given(p=prices, gpu=st.sampled_from([("h100x8", "H100", 8), ("l4x1", "L4", 1),
                                      ("l40sx1", "L40S", 1)]),
       kind=st.sampled_from(["on_demand", "spot"]), factor=st.floats(0.3, 1.5),
       cap=st.integers(1, 3), deadline=st.sampled_from([1.0, 2.0, 6.0]))
@example(p=DEFAULT, gpu=("h100x8", "H100", 8), kind="on_demand", factor=0.6, cap=2,
         deadline=6.0)
def test_adding_an_offer_never_costs_more(p, gpu, kind, factor, cap, deadline) -> None:
    """An added on-demand offer, or an added spot offer no dearer than the shape's other spot
    offers in its region, never raises the cost. (A dearer spot offer in the trainer's zone
    can: the rollout pool fills its spot nodes from the trainer's zone first, the documented
    approximation pinned by :func:`test_known_approximation_local_spot_before_remote`.)"""
    cat = catalog(**p)
    spec = small_spec(sla={"deadline_hours": deadline})
    base = run(spec, cat)
    price = next(o.usd_per_hour for o in cat.offers if o.instance_type == gpu[0]
                 and o.capacity_type == "on_demand" and o.region == "r1") * factor
    spot = [o.usd_per_hour for o in cat.offers if o.instance_type == gpu[0]
            and o.capacity_type == "spot" and o.region == "r1"]
    if kind == "spot" and spot:
        price = min(price, min(spot))
    new = offer("r1", gpu[0] + "-new", gpu[1], gpu[2], kind, price, cap,
                0.003 if kind == "spot" else None, "a" if kind == "spot" else "")
    more = run(spec, replace(cat, offers=(*cat.offers, new)))
    if base is not None:
        assert more is not None
        assert total(more) <= total(base) + slack(base, more)


@SETTINGS
@given(p=prices, deadline=st.sampled_from([1.0, 2.0, 6.0, None]))
@example(p=DEFAULT, deadline=6.0)
def test_removing_the_chosen_offer_never_costs_less(p, deadline) -> None:
    cat = catalog(**p)
    spec = small_spec(sla={"deadline_hours": deadline})
    base = run(spec, cat)
    if base is None:
        return
    used = {(a.region, a.zone, a.instance_type, a.capacity_type.value)
            for pool in base.pools for a in pool.allocations}
    for key in sorted(used):
        fewer = replace(cat, offers=tuple(o for o in cat.offers if (
            o.region, o.zone, o.instance_type, o.capacity_type) != key))
        q = run(spec, fewer)
        assert q is None or total(q) >= total(base) - slack(base, q), key


@SETTINGS
@given(p=prices, prompts=st.sampled_from([64, 128, 256]), more=st.sampled_from([1.25, 2.0]),
       deadline=st.sampled_from([2.0, 6.0, None]))
@example(p=DEFAULT, prompts=256, more=1.25, deadline=None)
def test_more_tokens_never_cost_less(p, prompts, more, deadline) -> None:
    cat = catalog(**p)
    a = run(small_spec(sla={"deadline_hours": deadline},
                       data={"prompts_per_step": prompts}), cat)
    b = run(small_spec(sla={"deadline_hours": deadline},
                       data={"prompts_per_step": int(prompts * more)}), cat)
    if b is not None:
        assert a is not None
        assert total(b) >= total(a) - slack(a, b)


@SETTINGS
@given(p=prices, cut=st.floats(0.1, 1.0), deadline=st.sampled_from([1.0, 2.0, 6.0, None]))
@example(p=DEFAULT, cut=0.5, deadline=1.0)
def test_a_spot_price_cut_never_raises_the_cost(p, cut, deadline) -> None:
    cat = catalog(**p)
    spec = small_spec(sla={"deadline_hours": deadline})
    a = run(spec, cat)
    cheaper = replace(cat, offers=tuple(replace(o, usd_per_hour=o.usd_per_hour * cut)
                                        if o.capacity_type == "spot" else o
                                        for o in cat.offers))
    b = run(spec, cheaper)
    if a is not None:
        assert b is not None
        assert total(b) <= total(a) + slack(a, b)


# ---- Pareto filters against an O(n²) reference ------------------------------------------------

def ref_front(points: list[tuple]) -> list[tuple]:
    """Distinct points no other point weakly dominates with a strict improvement somewhere
    (lower is better in every coordinate): each non-dominated value once."""
    out = set()
    for p in points:
        if not any(all(a <= b for a, b in zip(q, p, strict=True)) and q != p for q in points):
            out.add(p)
    return sorted(out)


def _check2(t: list[int], c: list[int]) -> None:
    ta, ca = np.array(t, dtype=float), np.array(c, dtype=float)
    idx = pareto_mask(ta, ca)
    got = [(t[i], c[i]) for i in idx]
    assert got == sorted(got), "indices are sorted by t"
    assert sorted(got) == ref_front(list(zip(t, c, strict=True)))
    assert len(set(idx.tolist())) == len(idx)


def _check3(t: list[int], c: list[int], lv: list[int]) -> None:
    idx = pareto_mask3(np.array(t, dtype=float), np.array(c, dtype=float), np.array(lv))
    got = sorted((t[i], c[i], lv[i]) for i in idx)
    assert got == ref_front(list(zip(t, c, lv, strict=True)))
    assert len(set(idx.tolist())) == len(idx) == len(got)


small_ints = st.integers(0, 6)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(small_ints, small_ints), max_size=25))
@example([])
@example([(1, 1), (1, 1), (1, 1)])  # duplicates: one survives
@example([(0, 5), (1, 3), (2, 4), (3, 2), (4, 6)])  # running-minimum dips
@example([(2, 2), (2, 1), (2, 3), (1, 2)])  # ties in t
@example([(3, 1), (1, 3), (2, 2), (2, 2), (1, 3)])  # staircase with duplicate steps
def test_pareto_mask_equals_reference(points) -> None:
    _check2([p[0] for p in points], [p[1] for p in points])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(small_ints, small_ints, st.integers(0, 3)), max_size=25))
@example([])
@example([(1, 1, 0), (1, 1, 0), (1, 1, 1)])  # duplicates, and the same (t, c) a level up
@example([(0, 5, 2), (1, 3, 0), (2, 4, 1), (3, 2, 2), (4, 1, 0)])  # dips across levels
@example([(1, 1, 3), (2, 2, 0), (0, 9, 0), (5, 0, 3)])  # the higher level is the better (t, c)
@example([(0, 0, 1), (0, 0, 0)])  # same (t, c): the lower level wins
@example([(3, 3, 0), (1, 1, 1), (2, 2, 2)])  # each level beats the next in (t, c) only
@example([(0, 100, 0), (1, 0, 2), (2, 50, 1)])  # wide cost range against the level shift
def test_pareto_mask3_equals_reference(points) -> None:
    _check3([p[0] for p in points], [p[1] for p in points], [p[2] for p in points])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1e4), st.floats(0, 1e6)), min_size=1, max_size=40))
def test_pareto_mask_on_real_values(points) -> None:
    """Float inputs (no ties within 1e-12): every kept point is undominated, every dropped one
    is dominated by a kept one."""
    t = np.array([p[0] for p in points])
    c = np.array([p[1] for p in points])
    keep = set(pareto_mask(t, c).tolist())
    for i in range(len(points)):
        dominated = any((t[j] <= t[i] and c[j] <= c[i]) and (t[j], c[j]) != (t[i], c[i])
                        for j in range(len(points)))
        if dominated:
            assert i not in keep
    for i in keep:
        assert not any((t[j] <= t[i] and c[j] < c[i] - 1e-9) or (t[j] < t[i] and c[j] <= c[i])
                       for j in range(len(points)) if j != i)


# ---- reserve -----------------------------------------------------------------------------------

def _active(weeks: int, years: int) -> np.ndarray:
    term = years * 8760.0
    return np.array([min(1.0, max(0.0, (term - 168.0 * w) / 168.0)) for w in range(weeks)])


@settings(max_examples=15, deadline=None)
@given(weeks=st.integers(4, 60), seed=st.integers(0, 10_000),
       cheap=st.floats(0.2, 0.95), spot=st.booleans())
@example(weeks=60, seed=1, cheap=0.2, spot=False)  # very cheap commitments, partial last week
def test_reserve_never_buys_more_than_the_peak(weeks, seed, cheap, spot) -> None:
    """However cheap the commitment, no more nodes of a key are bought than its peak weekly
    demand over scenarios (rounded up)."""
    rng = np.random.default_rng(seed)
    od = 10.0
    nodes = rng.uniform(0, 4, (2, weeks)) * (rng.uniform(0, 1, (2, weeks)) > 0.3)
    classes = [DemandClass(0, 4.0 if spot else None, nodes)]
    products = [ProductRow(f"p{y}", 0, y, od * cheap / y, 0.0, "t", False, _active(weeks, y))
                for y in (1, 3)]
    pb = Problem(name="t", weeks=weeks, scenarios=["a", "b"], weights=[0.5, 0.5],
                 multipliers=[1.0, 1.0], prob=np.array([0.5, 0.5]),
                 keys=[("lab", "r1", "h100x8")], on_demand=[od], classes=classes,
                 products=products, existing_nodes=np.zeros((1, weeks)), existing_cost_usd=0.0,
                 risk=None)
    sol = reserve_solve(pb, "highs", 60.0)
    peak = math.ceil(float(nodes.max()) - 1e-9)
    assert sum(sol.counts) <= peak
