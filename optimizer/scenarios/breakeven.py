"""What-if mode 3: break-even multipliers on the matched prices, below and above today's,
where the plan's use of the matched items changes (k-section on exact re-solves; the argument
is in :mod:`ptplan.scenarios.analysis`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ptplan.core.errors import InfeasibleError, InputError
from ptplan.planfile.schema import Plan
from ptplan.providers.base import Catalog
from ptplan.scenarios.analysis import Use, exact_total_usd, plan_json, summary, use_json, use_of
from ptplan.scenarios.diff import diff_plans
from ptplan.scenarios.pricerules import KIND_UNITS, PriceRule, Selector, apply_rules, make_rule
from ptplan.scenarios.runner import Outcome, Runner, Setup, validate_jobs

DEFAULT_TOLERANCE = 1e-3
"""Break-even: width of the final bracket on the price multiplier (0.1 % of the price)."""

METHOD = ("the matched prices are multiplied by m; each side's bracket [same, changed] "
          "holds the multiplier where the plan's use of the matched items changes, "
          "found by k-section on exact re-solves to the tolerance; LP ranging on the "
          "planner's pruned MILP is not valid for the full problem, so it is not used; "
          "crossing_multiplier is where the two bracketing plans cost the same")


@dataclass
class _Probe:
    """Re-solves at price multipliers, each once, and the use of the matched items."""

    runner: Runner
    selector: Selector
    base_rules: tuple[PriceRule, ...]
    catalog: Catalog
    cache: dict[float, Outcome] = field(default_factory=dict)

    def rules(self, m: float) -> tuple[PriceRule, ...]:
        return (*self.base_rules, make_rule(self.selector, "*=", m))

    def run(self, ms: Sequence[float]) -> list[Outcome]:
        todo = [m for m in dict.fromkeys(ms) if m not in self.cache]
        for m, o in zip(todo, self.runner.map([self.rules(m) for m in todo]), strict=True):
            self.cache[m] = o
        return [self.cache[m] for m in ms]

    def key(self, o: Outcome) -> tuple:
        u = use_of(o.plan, self.selector, self.catalog)
        return ("infeasible",) if u is None else u.key()


def break_even(setup: Setup, selector: Selector, runner: Runner, low: float = 0.0,
               high: float = 10.0, tolerance: float = DEFAULT_TOLERANCE,
               base_rules: Sequence[PriceRule] = ()) -> dict[str, Any]:
    """Multipliers on the matched prices, below and above 1, where the plan's use of the
    matched items changes (JSON-ready report)."""
    if not (0 <= low <= 1 <= high):
        raise InputError(f"--from/--to: break-even searches multipliers around 1 (today's "
                         f"price), got [{low:g}, {high:g}]; use --from <= 1 <= --to, --from >= 0")
    if not tolerance > 0:
        raise InputError(f"--tolerance: {tolerance:g} must be > 0 (e.g. 0.001)")
    base_rules = tuple(base_rules)
    catalog, _ = apply_rules(setup.catalog, base_rules)
    validate_jobs(setup, [(*base_rules, make_rule(selector, "*=", m)) for m in (low, high)])
    probe = _Probe(runner, selector, base_rules, catalog)
    runner.ready()
    k = max(1, runner.workers)
    base, lo_o, hi_o = probe.run([1.0, low, high])
    if base.plan is None:
        raise InfeasibleError(f"break-even: no feasible plan at today's prices ({base.error})")
    ref = probe.key(base)
    sides = [_side(probe, direction, end, end_o, ref, tolerance, k)
             for direction, end, end_o in (("down", low, lo_o), ("up", high, hi_o))]
    return {
        "schema_version": 1, "kind": "break_even", "spec_name": setup.spec.name,
        "objective": setup.objective, "catalog": setup.catalog.name,
        "catalog_as_of": setup.catalog.as_of, "policy": setup.policy.name,
        "selector": selector.text, "base_rules": [r.text for r in base_rules],
        "matched": len(selector.indices(catalog)),
        "price_unit": KIND_UNITS[selector.kind], "tolerance": tolerance,
        "baseline": {"total_cost_usd": base.plan.total_cost_usd,
                     "summary": summary(base.plan),
                     "use": use_json(use_of(base.plan, selector, catalog))},
        "solves": len(probe.cache),
        "sides": sides,
        "method": METHOD,
    }


def _side(probe: _Probe, direction: str, end: float, end_o: Outcome, ref: tuple,
          tolerance: float, k: int) -> dict[str, Any]:
    """One direction from m = 1 to ``end``: the bracket where the use changes, both plans
    and their diff, or that the use does not change."""
    side: dict[str, Any] = {"direction": direction, "searched": sorted([1.0, end])}
    if end == 1.0 or probe.key(end_o) == ref:
        side.update(found=False, note=f"the use of the matched items is the same over "
                    f"multipliers [{min(1.0, end):g}, {max(1.0, end):g}]")
        return side
    a, b, rounds = _search(probe, 1.0, end, tolerance, k)
    oa, ob = probe.run([a, b])
    ua = use_of(oa.plan, probe.selector, probe.catalog)
    ub = use_of(ob.plan, probe.selector, probe.catalog)
    cross = (_crossing(ua, ub, oa.plan, ob.plan, a, b)
             if ua and ub and oa.plan and ob.plan else None)
    side.update(
        found=True, rounds=rounds,
        multiplier_same=a, multiplier_changed=b,
        bracket=sorted([a, b]), crossing_multiplier=cross,
        prices_same=_prices(probe, oa, a), prices_changed=_prices(probe, ob, b),
        use_same=use_json(ua), use_changed=use_json(ub),
        plan_same=plan_json(oa.plan), plan_changed=plan_json(ob.plan),
        error_changed=ob.error,
        changes=diff_plans(oa.plan, ob.plan) if oa.plan and ob.plan else None,
    )
    return side


def _search(probe: _Probe, inside: float, outside: float, tol: float, k: int
            ) -> tuple[float, float, int]:
    """k-section for the end of the interval of multipliers where the use of the matched
    items equals that at ``inside``, towards ``outside`` (whose use differs)."""
    ref = probe.key(probe.run([inside])[0])
    a, b = inside, outside
    rounds = 0
    while abs(b - a) > tol:
        rounds += 1
        pts = [a + (b - a) * (i + 1) / (k + 1) for i in range(k)]
        outs = probe.run(pts)
        new_a, new_b = a, b
        for m, o in zip(pts, outs, strict=True):
            if probe.key(o) == ref:
                new_a = m
            else:
                new_b = m
                break
        a, b = new_a, new_b
    return a, b, rounds


def _crossing(sel_use_a: Use, sel_use_b: Use, pa: Plan, pb: Plan, ma: float, mb: float
              ) -> float | None:
    """m where a_A + m·b_A = a_B + m·b_B (b = matched spend at m = 1), if in [ma, mb]."""
    b_a = sel_use_a.spend_usd / ma if ma else None
    b_b = sel_use_b.spend_usd / mb if mb else None
    if b_a is None or b_b is None or abs(b_a - b_b) < 1e-12:
        return None
    a_a = exact_total_usd(pa) - ma * b_a
    a_b = exact_total_usd(pb) - mb * b_b
    m = (a_b - a_a) / (b_a - b_b)
    lo, hi = min(ma, mb), max(ma, mb)
    slack = 1e-6 * max(1.0, hi)
    return m if lo - slack <= m <= hi + slack else None


def _prices(probe: _Probe, o: Outcome, m: float) -> dict[str, float]:
    """Prices of the matched items the plan uses at multiplier m."""
    u = use_of(o.plan, probe.selector, probe.catalog)
    if u is None:
        return {}
    if probe.selector.kind == "offer":
        base = {x.key: x.usd_per_hour for x in probe.catalog.offers}
        return {k: base[k] * m for _, k, _ in u.items}
    assert o.plan is not None
    if probe.selector.kind == "egress":
        return {f"{n.src.provider}:{n.path}": n.usd_per_gb for n in o.plan.network
                if (n.flow, n.path, n.nodes or 0) in u.items}
    return {f"{i.provider}:{i.region}:{i.tier}": i.usd_per_gb_month
            for i in o.plan.storage if (i.data_class, i.tier, 0) in u.items}
