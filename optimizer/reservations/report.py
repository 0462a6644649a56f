"""The ``ptplan reserve`` report: purchases, scenarios, coverage and the solver record, every
figure recomputed by :mod:`ptplan.reservations.check` from the purchase and the demand."""

from __future__ import annotations

from typing import Any

import numpy as np

from ptplan.planfile.schema import usd
from ptplan.providers.base import Catalog
from ptplan.reservations.check import Evaluation, cvar
from ptplan.reservations.milp import ReserveSolution
from ptplan.reservations.portfolio import Portfolio
from ptplan.reservations.problem import HOURS_PER_WEEK, Problem

SCHEMA_VERSION = 1


def reserve_report(pf: Portfolio, catalog: Catalog, pb: Problem, sol: ReserveSolution,
                   ev: Evaluation, base: Evaluation, od_only: np.ndarray, timings: bool
                   ) -> dict[str, Any]:
    """The report of purchase ``sol`` (evaluated: ``ev``; with no purchase: ``base``; all on
    demand: ``od_only`` per scenario)."""
    expected, base_expected = ev.expected(pb), base.expected(pb)
    od_expected = float(pb.prob @ od_only)
    rows = purchase_rows(pb, sol.counts, ev)
    commits = commitment_rows(pb, sol.steps, ev)
    return {
        "schema_version": SCHEMA_VERSION, "portfolio": pf.name, "horizon_weeks": pb.weeks,
        "status": sol.status,
        "objective": "expected cost" if pb.risk is None else
        f"(1 - {pb.risk.weight:g}) x expected cost + {pb.risk.weight:g} x CVaR_{pb.risk.alpha:g}",
        "purchases": [r for r in rows if r["buy_week"] == 0],
        "commitments": [r for r in commits if r["buy_week"] == 0],
        "later_purchases": sorted(
            (r for r in rows + commits if r["buy_week"] > 0),
            key=lambda r: (r["buy_week"], "count" not in r, r.get("product") or r["commitment"])),
        "expected_total_cost_usd": usd(expected),
        "existing_only_cost_usd": usd(base_expected),
        "on_demand_only_cost_usd": usd(od_expected),
        "expected_savings_vs_existing_only_usd": usd(base_expected - expected),
        "expected_savings_vs_on_demand_only_usd": usd(od_expected - expected),
        "upfront_due_now_usd": usd(sum(n * p.upfront_usd for n, p in zip(
            sol.counts, pb.products, strict=True) if p.buy_week == 0)),
        "risk": _risk(pb, ev, base),
        "scenarios": _scenario_rows(pb, ev, base, od_only),
        "existing": _existing_rows(pf, pb),
        "coverage": coverage_rows(pb, ev),
        "projects": pb.projects,
        "solver": _solver(pb, sol, timings),
        "verification": "ok: costs recomputed from the purchase and the demand without the "
                        "MILP; coverage and capacity rows checked for every scenario and week",
        "catalog": {"name": catalog.name, "as_of": catalog.as_of},
        "warnings": pb.warnings + ([w] if (w := catalog.staleness_warning()) else []),
        "defaults_applied": pb.defaults,
    }


def _scenario_rows(pb: Problem, ev: Evaluation, base: Evaluation, od_only: np.ndarray
                   ) -> list[dict[str, Any]]:
    """Per scenario: its cost with the purchase, with held commitments only and all on
    demand, and the demand and committed node-hours."""
    rows = []
    for s, name in enumerate(pb.scenarios):
        dem = sum(float(c.nodes[s].sum()) for c in pb.classes) * HOURS_PER_WEEK
        use = sum(float(u[s].sum()) for u in ev.used) * HOURS_PER_WEEK
        cov = sum(float(z[s].sum()) for z in ev.covered) * HOURS_PER_WEEK
        rows.append({
            "name": name, "weight": pb.weights[s], "probability": round(float(pb.prob[s]), 12),
            "demand_multiplier": pb.multipliers[s],
            "total_cost_usd": usd(ev.total[s]), "new_commitment_cost_usd": usd(ev.new_cost_usd),
            "existing_commitment_cost_usd": usd(pb.existing_cost_usd),
            "on_demand_cost_usd": usd(ev.on_demand_cost[s]), "spot_cost_usd": usd(ev.spot_cost[s]),
            "existing_only_cost_usd": usd(base.total[s]),
            "on_demand_only_cost_usd": usd(od_only[s]),
            "demand_node_hours": round(dem, 6), "committed_node_hours_used": round(use, 6),
            "spend_covered_node_hours": round(cov, 6),
        })
    return rows


def _risk(pb: Problem, ev: Evaluation, base: Evaluation) -> dict[str, Any] | None:
    if pb.risk is None:
        return None
    return {"measure": "cvar", "alpha": pb.risk.alpha, "weight": pb.risk.weight,
            "cvar_usd": usd(cvar(pb, ev.total, pb.risk.alpha)),
            "existing_only_cvar_usd": usd(cvar(pb, base.total, pb.risk.alpha))}


def _existing_rows(pf: Portfolio, pb: Problem) -> list[dict[str, Any]]:
    return [{"provider": e.provider, "region": e.region,
             "instance_type": e.instance_type, "count": e.count,
             "usd_per_hour": e.usd_per_hour, "expires_week": e.expires_week,
             "cost_in_horizon_usd": usd(e.count * e.usd_per_hour * HOURS_PER_WEEK
                                        * min(e.expires_week, pb.weeks))}
            for e in pf.existing]


def _solver(pb: Problem, sol: ReserveSolution, timings: bool) -> dict[str, Any]:
    return {"name": sol.solver, "status": sol.status, "gap": round(sol.gap, 6),
            "seconds": round(sol.seconds, 3) if timings else 0.0,
            "planning_seconds": round(pb.planning_seconds, 3) if timings else 0.0,
            "variables": sol.variables, "integer_variables": sol.integers,
            "constraints": sol.constraints, "distinct_plans": pb.distinct_plans}


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
            "term_years": p.term_years, "buy_week": p.buy_week, "count": counts[i],
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
    rows.sort(key=lambda r: (r["buy_week"], r["provider"], r["region"], r["instance_type"],
                             r["term_years"], r["product"]))
    return rows


def commitment_rows(pb: Problem, steps: list[int], ev: Evaluation) -> list[dict[str, Any]]:
    """Per spend commitment: the $/h to commit, its use and what it covers."""
    rows = []
    for q, (n, r) in enumerate(zip(steps, pb.spend, strict=True)):
        paid = n * r.step * float(r.active.sum())
        used = float(pb.prob @ ev.spent[q].sum(axis=1))
        discounts = sorted({round(1 - c / s, 6) for c, s in r.rates.values()})
        rows.append({
            "commitment": r.name, "kind": r.kind, "provider": r.provider,
            "term_years": r.term_years, "buy_week": r.buy_week, "scope": r.scope,
            "usd_per_hour": round(n * r.step, 6), "step_usd_per_hour": r.step,
            "covers": sorted("/".join(pb.keys[k]) for k in r.rates),
            "discount_min": discounts[0], "discount_max": discounts[-1],
            "expected_utilization": round(used / paid, 6) if paid > 0 else None,
            "horizon_cost_usd": usd(n * r.step * r.paid_hours),
            "paid_hours_in_horizon": r.paid_hours,
            "rate_source": r.source, "rate_assumed": r.assumption})
    return rows


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
            spend = sum((ev.covered[j][s] for j in js), np.zeros(pb.weeks))
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
                    "spend_covered_nodes": round(float(spend[w]), 6),
                    "on_demand_nodes": round(float(od[w]), 6),
                    "spot_nodes": round(float(sp[w]), 6)})
    return rows
