"""What-if mode 2: sweep one price rule's value, marking where the optimal plan switches.

Plan cost is affine in the swept value for each of the three operators, so the optimal cost is
the minimum of affine functions of the value; a plan that is optimal at two values is optimal at
every value between them (also under a budget, whose feasible set of plans shrinks
monotonically; and for objective time). The sweep therefore solves the ends and a few evenly
spaced points, then bisects only the gaps whose two solved ends differ (or are not proven
optimal), in parallel rounds, and infers the points inside gaps whose ends have the same
optimal plan, priced exactly.

Where a gap's two ends have different plans A (left) and B (right), both found under the
cost objective, the next points are aimed where the two plans' costs cross: each is priced
at every value of the gap (affine, so exactly) and the two values around the last one at
which A costs no more than B are solved. If nothing else is optimal inside, those two points
close the gap at once (A up to the crossing, B after it); if a third plan appears there, its
gaps are aimed at in the next round. This only chooses which points to solve: a point is still
inferred only between two solved points with the same optimal plan. Other gaps (an end
without a plan, objective time) are bisected evenly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from ptplan.core.errors import InputError
from ptplan.planfile.schema import Plan, usd
from ptplan.providers.base import Catalog
from ptplan.scenarios.analysis import (
    METHOD_NOTE,
    Use,
    allocation_key,
    disk_use,
    egress_rate_of,
    exact_total_usd,
    money_delta,
    scenario_notes,
    signature,
    summary,
    use_of,
)
from ptplan.scenarios.diff import diff_plans
from ptplan.scenarios.pricerules import KIND_UNITS, PriceRule, Selector, apply_rules, make_rule
from ptplan.scenarios.runner import Outcome, Runner, Setup, validate_jobs


def linspace(start: float, stop: float, steps: int) -> list[float]:
    """``steps`` evenly spaced values from ``start`` to ``stop``, as
    start + (stop − start)·i/(steps − 1). (``numpy.linspace`` computes start + i·step and
    pins the end to ``stop``: its values differ from these in the last bit for about half of
    all inputs, which would change the values a sweep reports.)"""
    if steps < 2:
        raise InputError(f"--steps: {steps} is too few; ask for at least 2 points")
    if steps > 100_000:
        raise InputError(f"--steps: {steps} is too many; ask for at most 100000 points")
    return [start + (stop - start) * i / (steps - 1) for i in range(steps)]


@dataclass(frozen=True)
class SweepPoint:
    value: float
    outcome: Outcome | None
    """The re-solve at this value; None when the point was inferred (``from_index``)."""
    from_index: int | None = None
    """Inferred points: the solved point whose plan is optimal here too."""


def run_sweep(setup: Setup, selector: Selector, op: str, values: Sequence[float],
              runner: Runner, base_rules: Sequence[PriceRule] = (), every_point: bool = False
              ) -> dict[str, Any]:
    """The sweep's report (JSON-ready): :func:`sweep`, then :func:`sweep_report`."""
    base, points = sweep(setup, selector, op, values, runner, base_rules, every_point)
    return sweep_report(setup, selector, op, base, points, base_rules)


def initial_points(n: int, workers: int) -> list[int]:
    """The first round of a sweep: both ends and evenly spaced points, one round for the pool."""
    g = min(n, max(3, 2 * workers + 1))
    return sorted({round(i * (n - 1) / (g - 1)) for i in range(g)})


def sweep(setup: Setup, selector: Selector, op: str, values: Sequence[float], runner: Runner,
          base_rules: Sequence[PriceRule] = (), every_point: bool = False, aim: bool = True
          ) -> tuple[Outcome, list[SweepPoint]]:
    """The baseline (``base_rules`` only) and one point per swept value (see the module
    docstring); ``every_point`` solves every value instead; ``aim`` False bisects every gap
    evenly (the points solved differ, the report's plans and prices do not)."""
    n = len(values)

    def job(i: int) -> tuple[PriceRule, ...]:
        return (*base_rules, make_rule(selector, op, values[i]))

    validate_jobs(setup, [tuple(base_rules), *[job(i) for i in range(n)]])
    runner.ready()
    solved: dict[int, Outcome] = {}
    todo = list(range(n)) if every_point else initial_points(n, runner.workers)
    outs = runner.map([tuple(base_rules), *[job(i) for i in todo]])
    base = outs[0]
    solved.update(zip(todo, outs[1:], strict=True))
    catalog, _ = apply_rules(setup.catalog, base_rules)

    def crossing(i: int, j: int) -> int | None:
        a, b = solved[i].plan, solved[j].plan
        if not aim or setup.objective != "cost" or a is None or b is None:
            return None
        return _last_no_dearer(
            i, j, lambda k: _repriced(a, make_rule(selector, op, values[k]), catalog)[0],
            lambda k: _repriced(b, make_rule(selector, op, values[k]), catalog)[0])

    while todo := _next_round(solved, runner.workers, crossing):
        solved.update(zip(todo, runner.map([job(i) for i in todo]), strict=True))
    points: list[SweepPoint] = []
    last = None
    for i, v in enumerate(values):
        if i in solved:
            last = i
            points.append(SweepPoint(v, solved[i]))
        else:
            points.append(SweepPoint(v, None, last))
    return base, points


def _last_no_dearer(i: int, j: int, cost_a: Callable[[int], float],
                    cost_b: Callable[[int], float]) -> int:
    """For a gap whose left end's plan A is optimal at index ``i`` and right end's plan B at
    ``j``: the last index from ``i`` on at which A costs no more than B (``j − 1`` when A
    costs no more anywhere inside). The costs are affine in the value, so A's excess over B
    changes sign once: everything after the first index where A is dearer is dearer too."""
    over = next((k for k in range(i + 1, j) if cost_a(k) > cost_b(k)), j)
    return over - 1


def _next_round(solved: dict[int, Outcome], workers: int,
                crossing: Callable[[int, int], int | None] | None = None) -> list[int]:
    """Points to solve next, inside each gap between solved points whose optimal plans
    differ (or are not proven optimal): the two points around the ends' plans' cost
    crossing where ``crossing(i, j)`` gives it (the last index at which the left plan costs
    no more), else evenly spaced, the workers shared among such gaps."""
    gaps = [(i, j) for i, j in pairwise(sorted(solved)) if j > i + 1
            and not _same_optimum(solved[i], solved[j])]
    if not gaps:
        return []
    aimed = {g: crossing(*g) if crossing is not None else None for g in gaps}
    even = [g for g in gaps if aimed[g] is None]
    per_gap = max(1, workers // len(even)) if even else 0
    todo = {i + (j - i) * (q + 1) // (per_gap + 1) for i, j in even for q in range(per_gap)}
    for (i, j), k in aimed.items():
        if k is not None:
            todo |= {m for m in (k, k + 1) if i < m < j}
    return sorted(todo - set(solved))


def _same_optimum(a: Outcome, b: Outcome) -> bool:
    return (a.plan is not None and b.plan is not None and a.plan.status == "optimal"
            and b.plan.status == "optimal" and signature(a.plan) == signature(b.plan))


def _repriced(p: Plan, rule: PriceRule, catalog: Catalog) -> tuple[float, Use | None]:
    """Plan ``p`` (solved at another value of the swept rule) priced with ``rule`` applied to
    ``catalog``: (unrounded total USD, use of the matched items)."""
    if rule.selector.kind == "offer":
        return _repriced_offers(p, rule, catalog)
    if rule.selector.kind == "storage":
        return _repriced_storage(p, rule, catalog)
    return _repriced_egress(p, rule, catalog)


def _repriced_offers(p: Plan, rule: PriceRule, catalog: Catalog) -> tuple[float, Use]:
    base = {o.key: o.usd_per_hour for o in catalog.offers if rule.selector.matches(o)}
    compute = 0.0
    qty = spend = 0.0
    items = []
    for pool in p.pools:
        for a in pool.allocations:
            k = allocation_key(a)
            price = rule.new_price(base[k]) if k in base else a.usd_per_hour
            compute += a.nodes * a.hours * price
            if k in base:
                items.append((pool.name, k, a.nodes))
                qty += a.nodes * a.hours
                spend += a.nodes * a.hours * price
    rest = exact_total_usd(p) - sum(a.nodes * a.hours * a.usd_per_hour for pool in p.pools
                                    for a in pool.allocations)
    return compute + rest, Use(tuple(sorted(items)), qty, spend)


def _repriced_storage(p: Plan, rule: PriceRule, catalog: Catalog) -> tuple[float, Use]:
    from ptplan.costs.disks import block_tier
    from ptplan.costs.storage import tiers_for

    total = exact_total_usd(p)
    items, qty, spend = [], 0.0, 0.0
    for i in p.storage:
        tiers = [t for t in tiers_for(catalog, i.provider, i.region)
                 if t.tier == i.tier and rule.selector.matches(t)]
        if tiers:
            price = rule.new_price(tiers[0].usd_per_gb_month)
            total += i.gb_months * (price - i.usd_per_gb_month)
            items.append((i.data_class, i.tier, 0))
            qty += i.gb_months
            spend += i.gb_months * price
    for pool, gb_months in disk_use(p, rule.selector, catalog):  # boot disks on block tiers
        t = block_tier(catalog, pool.provider, pool.region)
        assert t is not None
        price = rule.new_price(t.usd_per_gb_month)
        total += gb_months * (price - pool.disk_usd_per_gb_month)
        items.append((f"disks:{pool.name}", pool.disk_tier, pool.nodes))
        qty += gb_months
        spend += gb_months * price
    return total, Use(tuple(sorted(items)), qty, spend)


def _repriced_egress(p: Plan, rule: PriceRule, catalog: Catalog) -> tuple[float, Use]:
    """A plan's cost is linear in its network rates."""
    total = exact_total_usd(p)
    items, qty, spend = [], 0.0, 0.0
    for n in p.network:
        rate = egress_rate_of(catalog, n.src.provider, n.path)
        if rate is not None and rule.selector.matches(rate):
            price = rule.new_price(rate.usd_per_gb)
            total += n.gb * (price - n.usd_per_gb)
            items.append((n.flow, n.path, n.nodes or 0))
            qty += n.gb
            spend += n.gb * price
    return total, Use(tuple(sorted(items)), qty, spend)


def _point_row(pt: SweepPoint, points: Sequence[SweepPoint], rule: PriceRule, base: Outcome,
               selector: Selector, catalog: Catalog) -> tuple[dict[str, Any], Plan | None]:
    """One point of the report, and its plan (solved, or inferred and repriced)."""
    if pt.outcome is not None:
        p, error = pt.outcome.plan, pt.outcome.error
        use = use_of(p, selector, catalog)
        total = p.total_cost_usd if p else None
    else:
        assert pt.from_index is not None
        src = points[pt.from_index].outcome
        assert src is not None and src.plan is not None
        p, error = src.plan, None
        exact, use = _repriced(p, rule, catalog)
        total = usd(exact)
    return {
        "value": pt.value, "rule": rule.text, "solved": pt.outcome is not None,
        "status": p.status if p else "infeasible", "total_cost_usd": total,
        "delta_usd": (money_delta(total, base.plan.total_cost_usd)
                      if total is not None and base.plan else None),
        "makespan_hours": p.makespan_hours if p else None,
        "summary": summary(p) if p else None, "error": error,
        "matched_quantity": use.quantity if use else None,
        "matched_spend_usd": usd(use.spend_usd) if use else None,
        "switch": False,
    }, p


def sweep_report(setup: Setup, selector: Selector, op: str, base: Outcome,
                 points: Sequence[SweepPoint], base_rules: Sequence[PriceRule] = ()
                 ) -> dict[str, Any]:
    """The sweep as JSON-ready rows, with the switches between consecutive values."""
    catalog, _ = apply_rules(setup.catalog, base_rules)
    rows: list[dict[str, Any]] = []
    switches = []
    prev_plan: Plan | None = None
    prev_error: str | None = None
    for k, pt in enumerate(points):
        row, p = _point_row(pt, points, make_rule(selector, op, pt.value), base, selector,
                            catalog)
        row["switch"] = switched = k > 0 and signature(prev_plan) != signature(p)
        rows.append(row)
        if switched:
            ch = (diff_plans(prev_plan, p)["statements"] if prev_plan and p else
                  [f"no feasible plan: {row['error'] or prev_error}"])
            switches.append({"between": [rows[-2]["value"], pt.value], "changes": ch})
        prev_plan, prev_error = p, row["error"]
    solved = sum(1 for r in rows if r["solved"])
    unit = {"*=": "multiplier", "+=": KIND_UNITS[selector.kind] + " added",
            "=": KIND_UNITS[selector.kind]}[op]
    return {
        "schema_version": 1, "kind": "sweep", "spec_name": setup.spec.name,
        "objective": setup.objective, "catalog": setup.catalog.name,
        "catalog_as_of": setup.catalog.as_of, "policy": setup.policy.name,
        "swept": f"{selector.text} {op}", "value_unit": unit,
        "base_rules": [r.text for r in base_rules],
        "matched": len(selector.indices(catalog)),
        "matched_quantity_unit": ("node-hours" if selector.kind == "offer" else "GB-months"),
        "baseline": {"total_cost_usd": base.plan.total_cost_usd if base.plan else None,
                     "makespan_hours": base.plan.makespan_hours if base.plan else None,
                     "summary": summary(base.plan) if base.plan else None,
                     "error": base.error},
        "points_solved": solved, "points": rows, "switches": switches,
        "notes": [METHOD_NOTE,
                  f"{solved} of {len(rows)} points solved; each other point lies between two "
                  "solved points with the same optimal plan, which is then optimal there too "
                  "(plan cost is affine in the swept value), and is priced exactly",
                  "switch: the plan rents other nodes (offers or counts), another layout or "
                  "other storage tiers than at the previous value",
                  *scenario_notes([make_rule(selector, op, 1.0)])],
    }
