"""What changed between two plans: totals, pools, phases, node moves, storage tiers, and
one-line statements (the explanation of a what-if answer)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from ptplan.planfile.schema import Plan
from ptplan.scenarios.analysis import money_delta, pool_label, signature

Row = dict[str, Any]


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
    d_total = money_delta(new.total_cost_usd, base.total_cost_usd)
    d_hours = new.makespan_hours - base.makespan_hours
    if base.layout != new.layout:
        lines.append(f"layout {base.layout} -> {new.layout}")
    if (base.provider, base.region) != (new.provider, new.region):
        lines.append(f"region {base.provider} {base.region} -> {new.provider} {new.region}")
    pools = _pool_rows(base, new, lines)
    phases = _phase_rows(base, new, lines)
    moves = _moves(base, new)
    for m in moves:
        lines.append(f"{m['allocation']}: {m['baseline_nodes']} -> {m['scenario_nodes']} nodes")
    storage = _storage_rows(base, new, lines)
    if base.disk_cost_usd != new.disk_cost_usd:
        lines.append(f"boot disks ${base.disk_cost_usd} -> ${new.disk_cost_usd}")
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
        "compute_delta_usd": money_delta(new.compute_cost_usd, base.compute_cost_usd),
        "disks_delta_usd": money_delta(new.disk_cost_usd, base.disk_cost_usd),
        "disks": {"baseline": _disks(base), "scenario": _disks(new),
                  "baseline_usd": base.disk_cost_usd, "scenario_usd": new.disk_cost_usd,
                  "delta_usd": money_delta(new.disk_cost_usd, base.disk_cost_usd)},
        "storage_delta_usd": money_delta(new.storage_cost_usd, base.storage_cost_usd),
        "network_delta_usd": money_delta(new.network_cost_usd, base.network_cost_usd),
        "zone": {"baseline": base.zone, "scenario": new.zone},
        "idle_delta_usd": money_delta(new.idle_cost_usd, base.idle_cost_usd),
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


def _pool_rows(base: Plan, new: Plan, lines: list[str]) -> list[Row]:
    """Per pool name: both plans' pools and costs; a statement (to ``lines``) per change."""
    pools: list[Row] = []
    old_pools = {p.name: p for p in base.pools}
    new_pools = {p.name: p for p in new.pools}
    for name in sorted(set(old_pools) | set(new_pools)):
        a, b = old_pools.get(name), new_pools.get(name)
        row = {"pool": name,
               "baseline": pool_label(a) if a else None, "scenario": pool_label(b) if b else None,
               "baseline_cost_usd": a.cost_usd if a else None,
               "scenario_cost_usd": b.cost_usd if b else None,
               "delta_usd": money_delta(b.cost_usd if b else "0", a.cost_usd if a else "0")}
        pools.append(row)
        if row["baseline"] != row["scenario"]:
            lines.append(f"pool {name}: {row['baseline'] or 'absent'} -> "
                         f"{row['scenario'] or 'absent'}")
    return pools


def _phase_rows(base: Plan, new: Plan, lines: list[str]) -> list[Row]:
    """Per phase (the baseline's order, then new ones): pool, precision, busy time and cost in
    both plans; a statement (to ``lines``) per precision change."""
    phases: list[Row] = []
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
            "delta_usd": money_delta(b2.cost_usd if b2 else "0", a2.cost_usd if a2 else "0"),
        })
        if a2 and b2 and a2.precision != b2.precision:
            lines.append(f"phase {name}: precision {a2.precision} -> {b2.precision}")
    return phases


def _disks(p: Plan) -> str:
    """The plan's boot disks in one line: nodes x GB on tier at $/GB-month."""
    parts = sorted({f"{p_.boot_disk_gb} GB on {p_.disk_tier or 'no block tier'} at "
                    f"${p_.disk_usd_per_gb_month:g}/GB-month" for p_ in p.pools})
    return f"{sum(x.nodes for x in p.pools)} x " + "; ".join(parts)


def _storage_rows(base: Plan, new: Plan, lines: list[str]) -> list[Row]:
    """Per data class: the tier in both plans and the cost change; a statement (to ``lines``)
    per tier change."""
    storage: list[Row] = []
    old_st = {i.data_class: i for i in base.storage}
    new_st = {i.data_class: i for i in new.storage}
    for cls in sorted(set(old_st) | set(new_st)):
        s0, s1 = old_st.get(cls), new_st.get(cls)
        storage.append({"data_class": cls,
                        "baseline_tier": s0.tier if s0 else None,
                        "scenario_tier": s1.tier if s1 else None,
                        "delta_usd": money_delta(s1.cost_usd if s1 else "0",
                                                 s0.cost_usd if s0 else "0")})
        if (s0 and s0.tier) != (s1 and s1.tier):
            lines.append(f"storage {cls}: {s0.tier if s0 else 'none'} -> "
                         f"{s1.tier if s1 else 'none'}")
    return storage


def _moves(base: Plan, new: Plan) -> list[Row]:
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
