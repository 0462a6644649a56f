"""Reserved-capacity purchasing for a portfolio (``ptplan reserve``): demand, result, check.

Notation: scenarios s with probability p_s (weights normalised), weeks w = 0 … W−1 of 168 h,
keys k = (provider, region, instance type), demand classes j (a key and the alternatives its
demand may use), products i (one node of key k(i) committed for a term of 8,760·years h).

**Demand, in average concurrent nodes per week.** ``D[s, w, j]`` is node-hours in week w ÷ 168.

* A project's spec is planned once by :func:`optimizer.planner.engine.plan` (plans are cached per
  distinct spec digest, catalog and policy). Every allocation of every pool of the plan holds
  ``nodes`` nodes for ``hours`` hours (the pool's held time) from the project's start,
  ``start_week × 168`` h (and again every ``repeat_every_weeks`` while the start is inside the
  horizon). Week w receives nodes × |[168w, 168(w+1)) ∩ [t0, t0 + hours)| ÷ 168, so node-hours
  are preserved exactly and spread over the weeks the run overlaps.
* On-demand (and held reserved) allocations are demand that commitments may cover. Spot
  allocations are demand that may stay on spot: the same work on non-spot nodes needs
  nodes × effective_fraction nodes (the plan's interruption overhead), and spot covers it at
  usd_per_hour ÷ effective_fraction per useful node-hour.
* Explicit ``demand`` rows give average concurrent nodes directly; prices come from the
  catalog (cheapest on-demand offer of the key, cheapest spot offer in the region) unless the
  row gives them. Scenario multipliers and per-project scenario weights scale the demand.
* Within a week, node-hours are treated as interchangeable: a committed node covers 168
  node-hours of that week whenever they run. This is optimistic for bursty demand (a burst of
  8 nodes for 10 h needs 8 nodes at once); ``docs/reserve.md`` discusses it.

**Costs.** Product i costs c_i = usd_per_hour·H_i + upfront·H_i/T_i over the horizon, H_i the
hours of its term inside the horizon and T_i its term in hours; it covers a_i[w] (the share of
week w inside its term) nodes. Held commitments are paid until they expire (a constant) and
cover their count until then. The MILP is :mod:`optimizer.reserve.milp`.

**Verification** (:mod:`optimizer.reserve.check`): given only the purchase counts and the
demand, the cheapest use of the committed capacity is greedy (each committed node-week serves
the demand whose alternative is dearest: on-demand before spot), so every scenario's cost is
recomputed without the MILP; the MILP's objective must equal it, its own weekly dispatch must
respect every coverage and capacity row, and the reported numbers are the recomputed ones.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from optimizer.core.errors import InfeasibleError, InputError, PlannerError, suggest
from optimizer.plan.schema import Plan, spec_digest, usd
from optimizer.reserve import milp as reserve_model
from optimizer.reserve.check import Evaluation, cvar, evaluate, on_demand_only, verify
from optimizer.reserve.portfolio import DemandRow, Portfolio, applied_defaults
from optimizer.reserve.problem import (
    HOURS_PER_WEEK,
    HOURS_PER_YEAR,
    DemandClass,
    Key,
    Problem,
    ProductRow,
    Risk,
    week_profile,
)
from policies.model import Policy, default_policy
from providers.base import Catalog, ReservedRate


class _Prices:
    """Catalog look-ups by key: cheapest on-demand, cheapest spot, reserved rates."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.od: dict[Key, float] = {}
        self.spot: dict[Key, float] = {}
        for o in catalog.offers:
            k = (o.provider, o.region, o.instance_type)
            book = self.od if o.capacity_type == "on_demand" else (
                self.spot if o.capacity_type == "spot" else None)
            if book is not None and o.usd_per_hour > 0:
                book[k] = min(book.get(k, math.inf), o.usd_per_hour)
        # several purchase options per key (AWS: standard/convertible x upfront options):
        # the default product is the cheapest effective rate (upfront amortised)
        self.reserved: dict[tuple[str, str, str, int], ReservedRate] = {}
        for r in sorted(catalog.reserved_rates, key=lambda r: (
                r.usd_per_hour, r.offering_class or "", r.purchase_option or "")):
            self.reserved.setdefault((r.provider, r.region, r.instance_type, r.term_years), r)

    def known(self, k: Key) -> bool:
        return k in self.od or k in self.spot

    def unknown_message(self, where: str, k: Key) -> str:
        provider, region, itype = k
        regions = {o.region for o in self.catalog.offers if o.provider == provider}
        if region not in regions:
            return (f"{where}.region: {provider} region {region!r} is not in catalog "
                    f"{self.catalog.name}{suggest(region, regions)}; fix the region or give prices")
        types = {o.instance_type for o in self.catalog.offers
                 if o.provider == provider and o.region == region}
        return (f"{where}.instance_type: {itype!r} has no on-demand price in catalog "
                f"{self.catalog.name} for {provider}/{region}{suggest(itype, types)}; fix the "
                "name or give on_demand_usd_per_hour")


class _Builder:
    def __init__(self, pf: Portfolio, catalog: Catalog, base_dir: Path, policy: Policy,
                 solver: str) -> None:
        self.pf, self.catalog, self.base_dir = pf, catalog, base_dir
        self.policy, self.solver = policy, solver
        self.prices = _Prices(catalog)
        self.W = pf.horizon_weeks
        self.S = len(pf.scenarios)
        self.keys: dict[Key, int] = {}
        self.od: dict[int, tuple[float, str]] = {}
        self.classes: dict[tuple[int, float | None], DemandClass] = {}
        self.warnings: list[str] = []

    def key(self, k: Key) -> int:
        return self.keys.setdefault(k, len(self.keys))

    def set_od(self, k: Key, given: float | None, where: str) -> int:
        i = self.key(k)
        if given is None:
            if i in self.od:
                return i
            if k not in self.prices.od:
                raise InputError(self.prices.unknown_message(where, k))
            self.od[i] = (self.prices.od[k], f"catalog {self.catalog.name}")
            return i
        have = self.od.get(i)
        if have is not None and have[1] != f"catalog {self.catalog.name}" and have[0] != given:
            raise InputError(f"{where}.on_demand_usd_per_hour = {given}: {have[1]} gives "
                             f"{have[0]} for {'/'.join(k)}; use one on-demand price per "
                             "instance type and region")
        self.od[i] = (given, where)
        return i

    def add(self, k: int, spot: float | None, nodes: np.ndarray, source: str) -> None:
        ck = (k, None if spot is None else round(spot, 9))
        cls = self.classes.setdefault(ck, DemandClass(k, spot, np.zeros((self.S, self.W))))
        cls.nodes += nodes
        cls.sources.add(source)

    # ---- explicit rows ----------------------------------------------------------------
    def row(self, r: DemandRow, where: str, scale: np.ndarray) -> None:
        k: Key = (r.provider, r.region, r.instance_type)
        i = self.set_od(k, r.on_demand_usd_per_hour, where)
        spot = None
        if r.spot_ok:
            spot = r.spot_usd_per_hour or self.prices.spot.get(k)
            if spot is None:
                raise InputError(f"{where}.spot_ok: catalog {self.catalog.name} has no spot "
                                 f"offer for {'/'.join(k)}; give spot_usd_per_hour or set "
                                 "spot_ok: false")
        prof = np.zeros(self.W)
        if r.weekly_nodes is not None:
            values = np.array(r.weekly_nodes[: max(0, self.W - r.start_week)])
            prof[r.start_week: r.start_week + len(values)] = values
            if r.start_week + len(r.weekly_nodes) > self.W:
                self.warnings.append(f"{where}: weekly_nodes run past the {self.W}-week "
                                     "horizon; those weeks are not evaluated")
        else:
            end = self.W if r.end_week is None else min(r.end_week, self.W)
            prof[r.start_week:end] = r.nodes or 0.0
        self.add(i, spot, scale[:, None] * prof[None, :], r.label or where)

    # ---- projects ---------------------------------------------------------------------
    def projects(self) -> tuple[list[dict[str, Any]], float, int]:
        from optimizer.planner.api import plan
        from optimizer.spec.project import load_spec, parse_spec

        cache: dict[str, Plan] = {}
        seconds = 0.0
        out: list[dict[str, Any]] = []
        names: dict[str, int] = {}
        for n, pr in enumerate(self.pf.projects):
            where = f"projects[{n}]"
            try:
                if isinstance(pr.spec, str):
                    path = Path(pr.spec)
                    spec = load_spec(str(path if path.is_absolute() else self.base_dir / path))
                else:
                    spec = parse_spec(pr.spec, f"{where}.spec")
            except InputError as exc:
                raise InputError(f"portfolio {where}.spec: {exc}") from None
            digest = spec_digest(spec.model_dump(mode="json"))
            if digest not in cache:
                start = time.perf_counter()
                try:
                    cache[digest] = plan(spec, self.catalog, solver=self.solver, explain=False,
                                         timings=False, policy=self.policy)
                except PlannerError as exc:
                    raise type(exc)(f"portfolio {where} ({spec.name}): {exc}") from None
                seconds += time.perf_counter() - start
            p = cache[digest]
            base = pr.name or spec.name
            names[base] = names.get(base, 0) + 1
            name = base if names[base] == 1 else f"{base}#{names[base]}"
            out.append(self.project_demand(pr, p, name, where))
        return out, seconds, len(cache)

    def project_demand(self, pr: Any, p: Plan, name: str, where: str) -> dict[str, Any]:
        scale = np.array([s.demand_multiplier * pr.scenario_weights.get(s.name, 1.0)
                          for s in self.pf.scenarios])
        starts = [pr.start_week]
        while pr.repeat_every_weeks and starts[-1] + pr.repeat_every_weeks < self.W:
            starts.append(starts[-1] + pr.repeat_every_weeks)
        starts = [s for s in starts if s < self.W]
        node_hours = 0.0
        keys: set[str] = set()
        for pool in p.pools:
            for a in pool.allocations:
                k: Key = (a.provider, a.region, a.instance_type)
                i = self.set_od(k, None, f"{where} ({name}) plan allocation")
                keys.add("/".join(k))
                prof = sum((week_profile(self.W, s * HOURS_PER_WEEK, a.hours) for s in starts),
                           np.zeros(self.W))
                if a.capacity_type == "spot":
                    eff = a.effective_fraction if a.effective_fraction > 0 else 1.0
                    nodes, spot = a.nodes * eff, a.usd_per_hour / eff
                else:
                    nodes, spot = float(a.nodes), None
                    if a.capacity_type == "reserved":
                        self.warnings.append(
                            f"project {name}: its plan uses held reserved capacity of "
                            f"{'/'.join(k)}; it is counted as demand here, and the holding "
                            "counts only if listed under existing (so nothing counts twice)")
                node_hours += nodes * float(prof.sum()) * HOURS_PER_WEEK
                self.add(i, spot, nodes * scale[:, None] * prof[None, :], f"project {name}")
        return {"name": name, "spec_name": p.spec_name, "start_week": pr.start_week,
                "repeat_every_weeks": pr.repeat_every_weeks, "runs_in_horizon": len(starts),
                "makespan_hours": p.makespan_hours, "plan_cost_usd": p.total_cost_usd,
                "node_hours_in_horizon": round(node_hours, 6),
                "instance_types": sorted(keys)}


def build_problem(pf: Portfolio, catalog: Catalog, base_dir: Path, policy: Policy | None = None,
                  solver: str = "highs", risk: Risk | None = None) -> Problem:
    """Plan the projects, build weekly demand, products and holdings (see module docstring)."""
    b = _Builder(pf, catalog, base_dir, policy or default_policy(), solver)
    W, S = b.W, b.S
    projects, seconds, distinct = b.projects()
    for s, sc in enumerate(pf.scenarios):
        onehot = np.zeros(S)
        onehot[s] = sc.demand_multiplier
        rows = pf.demand if sc.demand is None else sc.demand
        prefix = "demand" if sc.demand is None else f"scenarios[{s}].demand"
        for n, r in enumerate(rows):
            b.row(r, f"{prefix}[{n}]", onehot)
    demand_keys = {c.key for c in b.classes.values() if c.nodes.any()}
    if not demand_keys:
        late = sum(1 for p in pf.projects if p.start_week >= W)
        raise InfeasibleError(
            f"portfolio {pf.name}: nothing to buy for: no demand inside the {W}-week horizon "
            f"({len(pf.projects)} projects, {late} starting after it; {len(pf.demand)} demand "
            "rows); add projects or demand rows, or move start weeks into the horizon")
    products = _products(pf, b, demand_keys)
    held: list[tuple[int, int, float, int]] = []
    for n, e in enumerate(pf.existing):
        k: Key = (e.provider, e.region, e.instance_type)
        if k not in b.keys and not b.prices.known(k):
            raise InputError(b.prices.unknown_message(f"existing[{n}]", k))
        held.append((b.key(k), e.count, e.usd_per_hour, min(e.expires_week, W)))
    existing = np.zeros((len(b.keys), W))
    existing_cost = 0.0
    for i, count, rate, until in held:
        existing[i, :until] += count
        existing_cost += count * rate * until * HOURS_PER_WEEK
    weights = [sc.weight for sc in pf.scenarios]
    total = sum(weights)
    defaults = applied_defaults(pf)
    if abs(total - 1) > 1e-9:
        defaults.append(f"scenario weights normalised to probabilities (they summed to {total:g})")
    keys = list(b.keys)
    for k in keys:
        i = b.keys[k]
        if i not in b.od and k in b.prices.od:
            b.od[i] = (b.prices.od[k], f"catalog {catalog.name}")
    if any(pr.assumption for pr in products):
        b.warnings.append("some product rates are the catalog's assumed discounts (not quoted "
                          "prices); give products with your quoted usd_per_hour before buying")
    classes = sorted(b.classes.values(), key=lambda c: (
        c.key, c.spot_usd_per_hour is not None, c.spot_usd_per_hour or 0.0))
    for c in classes:
        if c.spot_usd_per_hour is not None and c.spot_usd_per_hour >= b.od[c.key][0]:
            c.spot_usd_per_hour = None  # spot dearer than on-demand: never used
    return Problem(
        name=pf.name, weeks=W, scenarios=[s.name for s in pf.scenarios], weights=weights,
        multipliers=[s.demand_multiplier for s in pf.scenarios],
        prob=np.array(weights) / total, keys=keys,
        on_demand=[b.od[i][0] if i in b.od else None for i in range(len(keys))],
        classes=classes, products=products, existing_nodes=existing,
        existing_cost_usd=existing_cost, risk=risk, warnings=sorted(set(b.warnings)),
        defaults=defaults, projects=projects, planning_seconds=seconds,
        distinct_plans=distinct)


def _active(weeks: int, years: int) -> np.ndarray:
    return week_profile(weeks, 0.0, HOURS_PER_YEAR * years)


def _products(pf: Portfolio, b: _Builder, demand_keys: set[int]) -> list[ProductRow]:
    out: list[ProductRow] = []
    if pf.products is None:
        inv = {i: k for k, i in b.keys.items()}
        for i in sorted(demand_keys, key=lambda i: inv[i]):
            k = inv[i]
            found = False
            for years in (1, 3):
                r = b.prices.reserved.get((*k, years))
                if r is None:
                    continue
                found = True
                out.append(ProductRow(f"{'/'.join(k)}/{years}y", i, years, r.usd_per_hour, 0.0,
                                      r.source, r.assumption, _active(b.W, years)))
            if not found:
                b.warnings.append(f"catalog {b.catalog.name} has no reserved rate for "
                                  f"{'/'.join(k)}: no product to buy for it (list products)")
        return out
    for n, p in enumerate(pf.products):
        k = (p.provider, p.region, p.instance_type)
        if k not in b.keys and not b.prices.known(k):
            raise InputError(b.prices.unknown_message(f"products[{n}]", k))
        rate, source, assumption = p.usd_per_hour, "portfolio", False
        if rate is None:
            r = b.prices.reserved.get((*k, p.term_years))
            if r is None:
                raise InputError(f"products[{n}].usd_per_hour: catalog {b.catalog.name} has no "
                                 f"{p.term_years}-year rate for {'/'.join(k)}; give "
                                 "usd_per_hour")
            rate, source, assumption = r.usd_per_hour, r.source, r.assumption
        out.append(ProductRow(p.name, b.key(k), p.term_years, rate, p.upfront_usd, source,
                              assumption, _active(b.W, p.term_years)))
    return out


def purchase_rows(pb: Problem, counts: list[int], ev: Evaluation) -> list[dict[str, Any]]:
    """Per product: count, prices, break-even and expected utilisation. Committed usage of a
    key is attributed to held commitments first, then to products by longer term, then name."""
    S, W = len(pb.scenarios), pb.weeks
    used_by_key = np.zeros((len(pb.keys), S, W))
    for j, c in enumerate(pb.classes):
        used_by_key[c.key] += ev.used[j]
    left = np.maximum(used_by_key - pb.existing_nodes[:, None, :], 0.0)
    util: dict[int, float | None] = {}
    order = sorted(range(len(pb.products)), key=lambda i: (
        pb.products[i].key, -pb.products[i].term_years, pb.products[i].name))
    for i in order:
        p = pb.products[i]
        cap = counts[i] * p.active
        take = np.minimum(left[p.key], cap[None, :])
        left[p.key] -= take
        util[i] = (float(pb.prob @ take.sum(axis=1)) / float(cap.sum())) if counts[i] else None
    # the next unit: demand above all committed capacity of the key, capped at one node
    rows = []
    for i, p in enumerate(pb.products):
        demand = np.zeros((S, W))
        for c in pb.classes:
            if c.key == p.key:
                demand += c.nodes
        spare = np.clip(demand - ev.capacity[p.key][None, :], 0.0, 1.0) * p.active[None, :]
        nxt = float(pb.prob @ spare.sum(axis=1)) / float(p.active.sum()) if p.active.any() else 0
        od = pb.on_demand[p.key]
        spots = [c.spot_usd_per_hour for c in pb.classes
                 if c.key == p.key and c.spot_usd_per_hour is not None and c.nodes.any()]
        used = util[i]
        provider, region, itype = pb.keys[p.key]
        rows.append({
            "product": p.name, "provider": provider, "region": region, "instance_type": itype,
            "term_years": p.term_years, "count": counts[i],
            "upfront_usd": usd(p.upfront_usd), "upfront_total_usd": usd(p.upfront_usd * counts[i]),
            "usd_per_hour": p.usd_per_hour,
            "effective_usd_per_hour": round(p.effective_usd_per_hour, 6),
            "on_demand_usd_per_hour": od,
            "break_even_utilization": round(p.effective_usd_per_hour / od, 6) if od else None,
            "spot_usd_per_hour": round(min(spots), 6) if spots else None,
            "expected_utilization": None if used is None else round(used, 6),
            "next_unit_utilization": round(nxt, 6),
            "horizon_cost_usd": usd(p.unit_cost_usd * counts[i]),
            "paid_hours_in_horizon": p.paid_hours,
            "rate_source": p.source, "rate_assumed": p.assumption,
        })
    rows.sort(key=lambda r: (r["provider"], r["region"], r["instance_type"], r["term_years"],
                             r["product"]))
    return rows


# ---- the result --------------------------------------------------------------------------
SCHEMA_VERSION = 1


@dataclass
class ReserveResult:
    report: dict[str, Any]
    problem: Problem
    counts: list[int]
    evaluation: Evaluation


def reserve(pf: Portfolio, catalog: Catalog, base_dir: Path, policy: Policy | None = None,
            solver: str = "highs", risk: Risk | None = None, timings: bool = True,
            time_limit: float = 300.0) -> ReserveResult:
    """Plan the projects, solve the purchase MILP, re-check it and assemble the report."""

    pb = build_problem(pf, catalog, base_dir, policy, solver, risk)
    sol = reserve_model.solve(pb, solver, time_limit)
    problems = verify(pb, sol.counts, sol.objective, sol.status, sol.used, sol.spot)
    if problems:
        raise PlannerError("reserve: the purchase failed its independent re-check ("
                           + "; ".join(problems[:3]) + "); report a bug")
    ev = evaluate(pb, sol.counts)
    base = evaluate(pb, [0] * len(pb.products))
    od_only = on_demand_only(pb)
    scenarios = []
    for s, name in enumerate(pb.scenarios):
        dem = sum(float(c.nodes[s].sum()) for c in pb.classes) * HOURS_PER_WEEK
        use = sum(float(u[s].sum()) for u in ev.used) * HOURS_PER_WEEK
        scenarios.append({
            "name": name, "weight": pb.weights[s], "probability": round(float(pb.prob[s]), 12),
            "demand_multiplier": pb.multipliers[s],
            "total_cost_usd": usd(ev.total[s]), "new_commitment_cost_usd": usd(ev.new_cost_usd),
            "existing_commitment_cost_usd": usd(pb.existing_cost_usd),
            "on_demand_cost_usd": usd(ev.on_demand_cost[s]), "spot_cost_usd": usd(ev.spot_cost[s]),
            "existing_only_cost_usd": usd(base.total[s]),
            "on_demand_only_cost_usd": usd(od_only[s]),
            "demand_node_hours": round(dem, 6), "committed_node_hours_used": round(use, 6),
        })
    expected, base_expected = ev.expected(pb), base.expected(pb)
    od_expected = float(pb.prob @ od_only)
    risk_out = None
    if pb.risk is not None:
        risk_out = {"measure": "cvar", "alpha": pb.risk.alpha, "weight": pb.risk.weight,
                    "cvar_usd": usd(cvar(pb, ev.total, pb.risk.alpha)),
                    "existing_only_cvar_usd": usd(cvar(pb, base.total, pb.risk.alpha))}
    report: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION, "portfolio": pf.name, "horizon_weeks": pb.weeks,
        "status": sol.status,
        "objective": "expected cost" if pb.risk is None else
        f"(1 - {pb.risk.weight:g}) x expected cost + {pb.risk.weight:g} x CVaR_{pb.risk.alpha:g}",
        "purchases": purchase_rows(pb, sol.counts, ev),
        "expected_total_cost_usd": usd(expected),
        "existing_only_cost_usd": usd(base_expected),
        "on_demand_only_cost_usd": usd(od_expected),
        "expected_savings_vs_existing_only_usd": usd(base_expected - expected),
        "expected_savings_vs_on_demand_only_usd": usd(od_expected - expected),
        "upfront_due_now_usd": usd(sum(n * p.upfront_usd
                                       for n, p in zip(sol.counts, pb.products, strict=True))),
        "risk": risk_out,
        "scenarios": scenarios,
        "existing": [{"provider": e.provider, "region": e.region,
                      "instance_type": e.instance_type, "count": e.count,
                      "usd_per_hour": e.usd_per_hour, "expires_week": e.expires_week,
                      "cost_in_horizon_usd": usd(e.count * e.usd_per_hour * HOURS_PER_WEEK
                                                 * min(e.expires_week, pb.weeks))}
                     for e in pf.existing],
        "coverage": coverage_rows(pb, ev),
        "projects": pb.projects,
        "solver": {"name": sol.solver, "status": sol.status, "gap": round(sol.gap, 6),
                   "seconds": round(sol.seconds, 3) if timings else 0.0,
                   "planning_seconds": round(pb.planning_seconds, 3) if timings else 0.0,
                   "variables": sol.variables, "integer_variables": sol.integers,
                   "constraints": sol.constraints, "distinct_plans": pb.distinct_plans},
        "verification": "ok: costs recomputed from the purchase and the demand without the "
                        "MILP; coverage and capacity rows checked for every scenario and week",
        "catalog": {"name": catalog.name, "as_of": catalog.as_of},
        "warnings": pb.warnings + ([w] if (w := catalog.staleness_warning()) else []),
        "defaults_applied": pb.defaults,
    }
    return ReserveResult(report, pb, sol.counts, ev)


def coverage_rows(pb: Problem, ev: Evaluation) -> list[dict[str, Any]]:
    """Per scenario, key and week with demand or committed capacity: how demand was covered."""
    rows = []
    for s, name in enumerate(pb.scenarios):
        for k, key in enumerate(pb.keys):
            js = [j for j, c in enumerate(pb.classes) if c.key == k]
            dem = sum((pb.classes[j].nodes[s] for j in js), np.zeros(pb.weeks))
            spot_ok = sum((pb.classes[j].nodes[s] for j in js
                           if pb.classes[j].spot_usd_per_hour is not None), np.zeros(pb.weeks))
            used = sum((ev.used[j][s] for j in js), np.zeros(pb.weeks))
            od = sum((ev.on_demand[j][s] for j in js), np.zeros(pb.weeks))
            sp = sum((ev.spot[j][s] for j in js), np.zeros(pb.weeks))
            for w in range(pb.weeks):
                if dem[w] <= 0 and ev.capacity[k, w] <= 0:
                    continue
                rows.append({
                    "scenario": name, "provider": key[0], "region": key[1],
                    "instance_type": key[2], "week": w, "demand_nodes": round(float(dem[w]), 6),
                    "spot_ok_nodes": round(float(spot_ok[w]), 6),
                    "committed_nodes": round(float(ev.capacity[k, w]), 6),
                    "committed_used_nodes": round(float(used[w]), 6),
                    "on_demand_nodes": round(float(od[w]), 6),
                    "spot_nodes": round(float(sp[w]), 6)})
    return rows
