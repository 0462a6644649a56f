"""What-if price analysis: scenarios, sweeps, break-even prices and plan diffs, in parallel.

Every answer here is an exact, verified re-solve of the planner on a catalog edited by price
rules (:mod:`optimizer.whatif.pricerules`); nothing is extrapolated from the baseline plan.

Why re-solve rather than re-price one MILP. The planner's MILP is solved over a pruned option
set: pool options are Pareto-filtered on (busy time, $/h) and then cut by exact cost bounds
against the incumbent (:mod:`optimizer.planner.search`), and both cuts depend on prices. A coefficient
change on the kept MILP, or LP cost ranging (``highspy.Highs.getRanging``) on it, is therefore
exact only for plans that survived the baseline's pruning, not for the full problem: an option
pruned at today's prices can be the optimum at tomorrow's. So a scenario re-runs the whole
pipeline (candidates → bound → MILP → verify) on the edited catalog, and reuses only what does
not depend on prices:

* the spec, catalog and policy, parsed once per worker process (or Ray actor);
* the demand model (:func:`optimizer.demand.model.build_demand`), passed as ``demand=``;
* the busy-time grids of every (pool, GPU shape, class sizes, spot overheads), kept in a
  per-worker ``grid_cache`` dict passed to :func:`optimizer.planner.engine.prepare`;
* the positions of the offers each selector matches, computed once per selector;
* no explanation pass (``explain=False``): the plan diff is the explanation.

Break-even prices. Scaling the matched prices by a multiplier m, every plan P costs
a_P + m·b_P (b_P = its spend on the matched offers at m = 1), so the optimal cost
min_P (a_P + m·b_P) is concave and piecewise linear in m and the optimal plan's matched spend
b(m) is non-increasing: the multipliers at which the plan's use of the matched offers is the
baseline's form one interval around m = 1 (with a budget, plans that exceed it drop out as m
rises, which keeps the interval property). Its ends are found by k-section on exact re-solves
(k = the number of workers; bisection with one), to a stated tolerance on m; both bracketing
plans are reported with their diff, and the multiplier where their two cost lines cross,
m* = (a_B − a_A)/(b_A − b_B), when it lies inside the bracket (a switch forced by the budget
has no crossing). Ties at the break-even itself may be resolved either way.

Parallelism (:mod:`optimizer.whatif.runner`). Scenarios run in a process pool (``spawn``; each
worker is initialised once with the spec, catalog and policy) or on Ray actors
(``ray.util.ActorPool``); results come back in submission order, and each plan is a
deterministic function of its inputs, so the output does not depend on the number of workers or
the backend.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from itertools import pairwise
from typing import Any

from optimizer.core.errors import InfeasibleError, InputError
from optimizer.plan.schema import Plan, usd
from optimizer.whatif.pricerules import (
    KIND_UNITS,
    PriceRule,
    Selector,
    apply_rules,
    make_rule,
)
from optimizer.whatif.runner import (  # noqa: F401 (Session, default_workers: re-exported)
    Outcome,
    Runner,
    Session,
    Setup,
    default_workers,
    validate_jobs,
)
from providers.base import Catalog

DEFAULT_TOLERANCE = 1e-3
"""Break-even: width of the final bracket on the price multiplier (0.1 % of the price)."""


# --------------------------------------------------------------------------- summaries


def offer_key(a: Any) -> str:
    """:attr:`providers.base.Offer.key` of a plan allocation."""
    zone = f"/{a.zone}" if a.zone else ""
    return f"{a.provider}:{a.region}{zone}:{a.instance_type}:{a.capacity_type}"


def pool_label(pool: Any) -> str:
    kinds: dict[str, int] = {}
    for a in pool.allocations:
        kinds[a.capacity_type] = kinds.get(a.capacity_type, 0) + a.nodes
    types = sorted({a.instance_type for a in pool.allocations})
    mix = " + ".join(f"{k} {n}" for k, n in sorted(kinds.items()))
    return (f"{pool.name}: {pool.nodes} x {pool.gpu} x {pool.gpus_per_node} "
            f"({', '.join(types)}; {mix})")


def summary(p: Plan) -> dict[str, Any]:
    """What a plan rents, in a few strings (layout, region, per pool GPUs and capacity)."""
    return {"layout": p.layout, "pipeline_mode": p.pipeline_mode, "provider": p.provider,
            "region": p.region, "pools": [pool_label(pool) for pool in p.pools],
            "storage_tiers": sorted({i.tier for i in p.storage})}


def signature(p: Plan | None) -> tuple:
    """Plans with equal signatures rent the same nodes of the same offers (a sweep marks a
    switch where it changes)."""
    if p is None:
        return ("infeasible",)
    return (p.layout, tuple((pool.name, offer_key(a), a.nodes) for pool in p.pools
                            for a in pool.allocations),
            tuple((i.data_class, i.tier) for i in p.storage))


def _money_delta(new: str, old: str) -> str:
    return str(Decimal(new) - Decimal(old))


def _pct(new: str, old: str) -> float | None:
    base = Decimal(old)
    return None if base == 0 else round(float((Decimal(new) - base) / base * 100), 2)


def _alloc_label(key: tuple[str, ...]) -> str:
    pool, provider, region, zone, itype, kind = key
    return f"{pool}: {provider} {zone or region} {itype} {kind}"


def diff_plans(base: Plan, new: Plan) -> dict[str, Any]:
    """What changed from ``base`` to ``new``: totals, makespan, layout and region, per-pool and
    per-phase costs, node moves per offer, storage tiers, and one-line statements."""
    lines: list[str] = []
    d_total = _money_delta(new.total_cost_usd, base.total_cost_usd)
    d_hours = new.makespan_hours - base.makespan_hours
    if base.layout != new.layout:
        lines.append(f"layout {base.layout} -> {new.layout}")
    if (base.provider, base.region) != (new.provider, new.region):
        lines.append(f"region {base.provider} {base.region} -> {new.provider} {new.region}")
    pools: list[dict[str, Any]] = []
    old_pools = {p.name: p for p in base.pools}
    new_pools = {p.name: p for p in new.pools}
    for name in sorted(set(old_pools) | set(new_pools)):
        a, b = old_pools.get(name), new_pools.get(name)
        row = {"pool": name,
               "baseline": pool_label(a) if a else None, "scenario": pool_label(b) if b else None,
               "baseline_cost_usd": a.cost_usd if a else None,
               "scenario_cost_usd": b.cost_usd if b else None,
               "delta_usd": _money_delta(b.cost_usd if b else "0", a.cost_usd if a else "0")}
        pools.append(row)
        if row["baseline"] != row["scenario"]:
            lines.append(f"pool {name}: {row['baseline'] or 'absent'} -> "
                         f"{row['scenario'] or 'absent'}")
    phases: list[dict[str, Any]] = []
    old_ph = {p.name: p for p in base.phases}
    new_ph = {p.name: p for p in new.phases}
    for name in [p.name for p in base.phases] + [n for n in new_ph if n not in old_ph]:
        a2, b2 = old_ph.get(name), new_ph.get(name)
        phases.append({
            "phase": name,
            "baseline_pool": a2.pool if a2 else None, "scenario_pool": b2.pool if b2 else None,
            "baseline_precision": a2.precision if a2 else None,
            "scenario_precision": b2.precision if b2 else None,
            "baseline_busy_hours": a2.busy_hours if a2 else None,
            "scenario_busy_hours": b2.busy_hours if b2 else None,
            "baseline_cost_usd": a2.cost_usd if a2 else None,
            "scenario_cost_usd": b2.cost_usd if b2 else None,
            "delta_usd": _money_delta(b2.cost_usd if b2 else "0", a2.cost_usd if a2 else "0"),
        })
        if a2 and b2 and a2.precision != b2.precision:
            lines.append(f"phase {name}: precision {a2.precision} -> {b2.precision}")
    moves = _moves(base, new)
    for m in moves:
        lines.append(f"{m['allocation']}: {m['baseline_nodes']} -> {m['scenario_nodes']} nodes")
    storage: list[dict[str, Any]] = []
    old_st = {i.data_class: i for i in base.storage}
    new_st = {i.data_class: i for i in new.storage}
    for cls in sorted(set(old_st) | set(new_st)):
        s0, s1 = old_st.get(cls), new_st.get(cls)
        storage.append({"data_class": cls,
                        "baseline_tier": s0.tier if s0 else None,
                        "scenario_tier": s1.tier if s1 else None,
                        "delta_usd": _money_delta(s1.cost_usd if s1 else "0",
                                                  s0.cost_usd if s0 else "0")})
        if (s0 and s0.tier) != (s1 and s1.tier):
            lines.append(f"storage {cls}: {s0.tier if s0 else 'none'} -> "
                         f"{s1.tier if s1 else 'none'}")
    if base.network_cost_usd != new.network_cost_usd or base.zone != new.zone:
        lines.append(f"network ${base.network_cost_usd} -> ${new.network_cost_usd} (trainer "
                     f"zone {base.zone or base.region} -> {new.zone or new.region})")
    if abs(d_hours) > 1e-9:
        lines.append(f"makespan {base.makespan_hours:,.2f} h -> {new.makespan_hours:,.2f} h "
                     f"({d_hours:+,.2f} h)")
    lines.append(f"total ${base.total_cost_usd} -> ${new.total_cost_usd} "
                 f"({'+' if not d_total.startswith('-') else ''}{d_total} USD)")
    return {
        "total": {"baseline_usd": base.total_cost_usd, "scenario_usd": new.total_cost_usd,
                  "delta_usd": d_total, "delta_percent": _pct(new.total_cost_usd,
                                                              base.total_cost_usd)},
        "compute_delta_usd": _money_delta(new.compute_cost_usd, base.compute_cost_usd),
        "storage_delta_usd": _money_delta(new.storage_cost_usd, base.storage_cost_usd),
        "network_delta_usd": _money_delta(new.network_cost_usd, base.network_cost_usd),
        "zone": {"baseline": base.zone, "scenario": new.zone},
        "idle_delta_usd": _money_delta(new.idle_cost_usd, base.idle_cost_usd),
        "makespan_hours": {"baseline": base.makespan_hours, "scenario": new.makespan_hours,
                           "delta": d_hours},
        "layout": {"baseline": base.layout, "scenario": new.layout},
        "region": {"baseline": f"{base.provider} {base.region}",
                   "scenario": f"{new.provider} {new.region}"},
        "same_allocation": signature(base) == signature(new),
        "pools": pools,
        "phases": phases,
        "moves": moves,
        "storage": storage,
        "statements": lines,
    }


def _moves(base: Plan, new: Plan) -> list[dict[str, Any]]:
    """Node counts per (pool, offer) that differ (nodes moved, added or removed)."""

    def table(p: Plan) -> dict[tuple[str, ...], tuple[int, float]]:
        return {(pool.name, a.provider, a.region, a.zone, a.instance_type, a.capacity_type):
                (a.nodes, a.usd_per_hour) for pool in p.pools for a in pool.allocations}

    old, new_t = table(base), table(new)
    out = []
    for key in sorted(set(old) | set(new_t)):
        n0, p0 = old.get(key, (0, None))
        n1, p1 = new_t.get(key, (0, None))
        if n0 != n1:
            out.append({"allocation": _alloc_label(key), "pool": key[0], "provider": key[1],
                        "region": key[2], "zone": key[3], "instance_type": key[4],
                        "capacity_type": key[5], "baseline_nodes": n0, "scenario_nodes": n1,
                        "baseline_usd_per_hour": p0, "scenario_usd_per_hour": p1})
    return out


# --------------------------------------------------------------------------- scenarios


@dataclass
class Scenario:
    name: str
    rules: tuple[PriceRule, ...]


def _plan_json(p: Plan | None) -> Any:
    return p.model_dump(mode="json") if p is not None else None


def _effects(o: Outcome) -> list[dict[str, Any]]:
    return [e.as_dict() for e in o.effects]


def run_scenarios(setup: Setup, scenarios: Sequence[Scenario], runner: Runner
                  ) -> dict[str, Any]:
    """The baseline plan and each scenario's plan, with deltas and changes (JSON-ready)."""
    validate_jobs(setup, [s.rules for s in scenarios])
    outcomes = runner.map([(), *[s.rules for s in scenarios]])
    base, rest = outcomes[0], outcomes[1:]
    rows = []
    for sc, o in zip(scenarios, rest, strict=True):
        delta = changes = None
        if o.plan is not None and base.plan is not None:
            changes = diff_plans(base.plan, o.plan)
            delta = changes["total"]["delta_usd"]
        rows.append({"name": sc.name, "rules": [r.text for r in sc.rules],
                     "effects": _effects(o), "plan": _plan_json(o.plan), "error": o.error,
                     "delta_usd": delta, "changes": changes,
                     "notes": scenario_notes(sc.rules)})
    return {
        "schema_version": 1, "kind": "whatif", "spec_name": setup.spec.name,
        "objective": setup.objective, "catalog": setup.catalog.name,
        "catalog_as_of": setup.catalog.as_of, "policy": setup.policy.name,
        "baseline": _plan_json(base.plan), "baseline_error": base.error,
        "scenarios": rows,
        "method": METHOD_NOTE,
    }


METHOD_NOTE = ("every plan is an exact, verified re-solve on the catalog with the rules applied "
               "(explain pass skipped); deltas are scenario minus baseline")


def scenario_notes(rules: Sequence[PriceRule]) -> list[str]:
    """Caveats a user needs next to the numbers."""
    return [f"egress rule {r.text!r} prices the plan's network flows on matching paths "
            "(plan.network: weight sync to rollout nodes outside the trainer's zone or region, "
            "experience data, dataset staging, checkpoint copies); a plan without such flows "
            "does not change" for r in rules if r.selector.kind == "egress"]


# --------------------------------------------------------------------------- use of offers


@dataclass(frozen=True)
class Use:
    """How a plan uses the items a selector matches."""

    items: tuple[tuple[str, str, int], ...]
    """(pool or data class, offer key or tier, nodes or 0) of matched allocations."""
    quantity: float
    """Node-hours held on matched offers (GB-months on matched storage tiers)."""
    spend_usd: float

    def key(self) -> tuple:
        return (self.items, round(self.quantity, 6))


def egress_rate_of(catalog: Catalog, provider: str, path: str) -> Any:
    """The catalog rate the planner priced a network item with (the same lookup as
    :meth:`optimizer.costs.network.NetworkModel.rate`); None for same-zone traffic, which the planner
    never charges, and for paths the catalog lacks (priced at 0)."""
    if path == "same_zone":
        return None
    for want in ((path, "inter_region") if path == "inter_continent" else (path,)):
        for e in catalog.egress:
            if e.provider == provider and e.path == want:
                return e
    return None


def use_of(p: Plan | None, selector: Selector, catalog: Catalog) -> Use | None:
    if p is None:
        return None
    if selector.kind == "offer":
        keys = {o.key for o in catalog.offers if selector.matches(o)}
        items, qty, spend = [], 0.0, 0.0
        for pool in p.pools:
            for a in pool.allocations:
                k = offer_key(a)
                if k in keys:
                    items.append((pool.name, k, a.nodes))
                    qty += a.nodes * a.hours
                    spend += a.nodes * a.hours * a.usd_per_hour
        return Use(tuple(sorted(items)), qty, spend)
    if selector.kind == "storage":
        from optimizer.costs.storage import tiers_for

        items, qty, spend = [], 0.0, 0.0
        for i in p.storage:
            tiers = [t for t in tiers_for(catalog, i.provider, i.region) if t.tier == i.tier]
            if any(selector.matches(t) for t in tiers):
                items.append((i.data_class, i.tier, 0))
                qty += i.gb_months
                spend += i.gb_months * i.usd_per_gb_month
        return Use(tuple(sorted(items)), qty, spend)
    items, qty, spend = [], 0.0, 0.0  # egress: GB of the plan's network items on matched rates
    for n in p.network:
        rate = egress_rate_of(catalog, n.src.provider, n.path)
        if rate is not None and selector.matches(rate):
            items.append((n.flow, n.path, n.nodes or 0))
            qty += n.gb
            spend += n.gb * n.usd_per_gb
    return Use(tuple(sorted(items)), qty, spend)


# --------------------------------------------------------------------------- sweeps


def linspace(start: float, stop: float, steps: int) -> list[float]:
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


def initial_points(n: int, workers: int) -> list[int]:
    """The first round of a sweep: both ends and evenly spaced points, one round for the pool."""
    g = min(n, max(3, 2 * workers + 1))
    return sorted({round(i * (n - 1) / (g - 1)) for i in range(g)})


def sweep(setup: Setup, selector: Selector, op: str, values: Sequence[float], runner: Runner,
          base_rules: Sequence[PriceRule] = (), every_point: bool = False
          ) -> tuple[Outcome, list[SweepPoint]]:
    """The baseline (``base_rules`` only) and one point per swept value.

    Plan cost is affine in the swept value for each of the three operators, so the optimal cost
    is the minimum of affine functions of the value; a plan that is optimal at two values is
    optimal at every value between them (also under a budget, whose feasible set of plans
    shrinks monotonically; and for objective time). The sweep therefore solves the ends and a
    few evenly spaced points, then bisects only the gaps whose two solved ends differ (or are
    not proven optimal), in parallel rounds, and infers the points inside gaps whose ends have
    the same optimal plan. ``every_point`` solves every value instead."""
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
    while True:
        gaps = [(i, j) for i, j in pairwise(sorted(solved)) if j > i + 1
                and not _same_optimum(solved[i], solved[j])]
        if not gaps:
            break
        per_gap = max(1, runner.workers // len(gaps))
        todo = sorted({i + (j - i) * (q + 1) // (per_gap + 1) for i, j in gaps
                       for q in range(per_gap)} - set(solved))
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


def _same_optimum(a: Outcome, b: Outcome) -> bool:
    return (a.plan is not None and b.plan is not None and a.plan.status == "optimal"
            and b.plan.status == "optimal" and signature(a.plan) == signature(b.plan))


def _repriced(p: Plan, rule: PriceRule, catalog: Catalog) -> tuple[float, Use | None]:
    """Plan ``p`` (solved at another value of the swept rule) priced with ``rule`` applied to
    ``catalog``: (unrounded total USD, use of the matched items)."""
    sel = rule.selector
    if sel.kind == "offer":
        base = {o.key: o.usd_per_hour for o in catalog.offers if sel.matches(o)}
        compute = 0.0
        qty = spend = 0.0
        items = []
        for pool in p.pools:
            for a in pool.allocations:
                k = offer_key(a)
                price = rule.new_price(base[k]) if k in base else a.usd_per_hour
                compute += a.nodes * a.hours * price
                if k in base:
                    items.append((pool.name, k, a.nodes))
                    qty += a.nodes * a.hours
                    spend += a.nodes * a.hours * price
        rest = exact_total_usd(p) - sum(a.nodes * a.hours * a.usd_per_hour for pool in p.pools
                                        for a in pool.allocations)
        return compute + rest, Use(tuple(sorted(items)), qty, spend)
    if sel.kind == "storage":
        from optimizer.costs.storage import tiers_for

        total = exact_total_usd(p)
        items, qty, spend = [], 0.0, 0.0
        for i in p.storage:
            tiers = [t for t in tiers_for(catalog, i.provider, i.region)
                     if t.tier == i.tier and sel.matches(t)]
            if tiers:
                price = rule.new_price(tiers[0].usd_per_gb_month)
                total += i.gb_months * (price - i.usd_per_gb_month)
                items.append((i.data_class, i.tier, 0))
                qty += i.gb_months
                spend += i.gb_months * price
        return total, Use(tuple(sorted(items)), qty, spend)
    total = exact_total_usd(p)  # egress: a plan's cost is linear in its network rates
    items, qty, spend = [], 0.0, 0.0
    for n in p.network:
        rate = egress_rate_of(catalog, n.src.provider, n.path)
        if rate is not None and sel.matches(rate):
            price = rule.new_price(rate.usd_per_gb)
            total += n.gb * (price - n.usd_per_gb)
            items.append((n.flow, n.path, n.nodes or 0))
            qty += n.gb
            spend += n.gb * price
    return total, Use(tuple(sorted(items)), qty, spend)


def sweep_report(setup: Setup, selector: Selector, op: str, base: Outcome,
                 points: Sequence[SweepPoint], base_rules: Sequence[PriceRule] = ()
                 ) -> dict[str, Any]:
    catalog, _ = apply_rules(setup.catalog, base_rules)
    rows: list[dict[str, Any]] = []
    switches = []
    prev_plan: Plan | None = None
    prev_error: str | None = None
    for k, pt in enumerate(points):
        rule = make_rule(selector, op, pt.value)
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
        switched = k > 0 and signature(prev_plan) != signature(p)
        rows.append({
            "value": pt.value, "rule": rule.text, "solved": pt.outcome is not None,
            "status": p.status if p else "infeasible", "total_cost_usd": total,
            "delta_usd": (_money_delta(total, base.plan.total_cost_usd)
                          if total is not None and base.plan else None),
            "makespan_hours": p.makespan_hours if p else None,
            "summary": summary(p) if p else None, "error": error,
            "matched_quantity": use.quantity if use else None,
            "matched_spend_usd": usd(use.spend_usd) if use else None,
            "switch": switched,
        })
        if switched:
            ch = (diff_plans(prev_plan, p)["statements"] if prev_plan and p else
                  [f"no feasible plan: {error or prev_error}"])
            switches.append({"between": [rows[-2]["value"], pt.value], "changes": ch})
        prev_plan, prev_error = p, error
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


# --------------------------------------------------------------------------- break-even


@dataclass
class _Probe:
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


def exact_total_usd(p: Plan) -> float:
    """A plan's total before rounding to cents: Σ nodes × hours × $/h over the pools'
    allocations + Σ (GB-months × $/GB-month + retrieval GB × fee) over storage + Σ GB × $/GB
    over the network items."""
    compute = sum(a.nodes * a.hours * a.usd_per_hour for pool in p.pools
                  for a in pool.allocations)
    storage = sum(i.gb_months * i.usd_per_gb_month + i.retrieval_gb * i.retrieval_usd_per_gb
                  for i in p.storage)
    network = sum(i.gb * i.usd_per_gb for i in p.network)
    return compute + storage + network


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


def break_even(setup: Setup, selector: Selector, runner: Runner, low: float = 0.0,
               high: float = 10.0, tolerance: float = DEFAULT_TOLERANCE,
               base_rules: Sequence[PriceRule] = ()) -> dict[str, Any]:
    """Multipliers on the matched prices, below and above 1, where the plan's use of the
    matched items changes (k-section on exact re-solves; see the module docstring)."""
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
    sides = []
    for direction, end, end_o in (("down", low, lo_o), ("up", high, hi_o)):
        side: dict[str, Any] = {"direction": direction, "searched": sorted([1.0, end])}
        if end == 1.0 or probe.key(end_o) == ref:
            side.update(found=False, note=f"the use of the matched items is the same over "
                        f"multipliers [{min(1.0, end):g}, {max(1.0, end):g}]")
            sides.append(side)
            continue
        a, b, rounds = _search(probe, 1.0, end, tolerance, k)
        oa, ob = probe.run([a, b])
        ua = use_of(oa.plan, selector, catalog)
        ub = use_of(ob.plan, selector, catalog)
        cross = (_crossing(ua, ub, oa.plan, ob.plan, a, b)
                 if ua and ub and oa.plan and ob.plan else None)
        side.update(
            found=True, rounds=rounds,
            multiplier_same=a, multiplier_changed=b,
            bracket=sorted([a, b]), crossing_multiplier=cross,
            prices_same=_prices(probe, oa, a), prices_changed=_prices(probe, ob, b),
            use_same=_use_json(ua), use_changed=_use_json(ub),
            plan_same=_plan_json(oa.plan), plan_changed=_plan_json(ob.plan),
            error_changed=ob.error,
            changes=diff_plans(oa.plan, ob.plan) if oa.plan and ob.plan else None,
        )
        sides.append(side)
    return {
        "schema_version": 1, "kind": "break_even", "spec_name": setup.spec.name,
        "objective": setup.objective, "catalog": setup.catalog.name,
        "catalog_as_of": setup.catalog.as_of, "policy": setup.policy.name,
        "selector": selector.text, "base_rules": [r.text for r in base_rules],
        "matched": len(selector.indices(catalog)),
        "price_unit": KIND_UNITS[selector.kind], "tolerance": tolerance,
        "baseline": {"total_cost_usd": base.plan.total_cost_usd,
                     "summary": summary(base.plan),
                     "use": _use_json(use_of(base.plan, selector, catalog))},
        "solves": len(probe.cache),
        "sides": sides,
        "method": ("the matched prices are multiplied by m; each side's bracket [same, changed] "
                   "holds the multiplier where the plan's use of the matched items changes, "
                   "found by k-section on exact re-solves to the tolerance; LP ranging on the "
                   "planner's pruned MILP is not valid for the full problem, so it is not used; "
                   "crossing_multiplier is where the two bracketing plans cost the same"),
    }


def _use_json(u: Use | None) -> dict[str, Any] | None:
    if u is None:
        return None
    return {"items": [list(x) for x in u.items], "quantity": u.quantity,
            "spend_usd": usd(u.spend_usd)}

