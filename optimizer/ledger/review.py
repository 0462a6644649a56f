"""``runs review``: the method–cost–benefit table of the ledger.

Per run: planned vs actual cost and hours (variance = actual ÷ planned − 1), target points
gained (mean of after − before over its target metrics), cost per point, general-capability
change (mean of after − before over its general metrics: the forgetting signal), eval share of
cost, the rework it caused and its total cost of ownership, flags. Per group (method, model
family × method, project): the same summed over runs.

Rework is attributed once: a run that repairs another is the rework of the run it names
(``repairs``), never of anything further up a chain, so a run's TCO is its own cost (zero for
a repair run, whose cost belongs to its cause) plus the cost of the runs that repair it, and
Σ TCO = Σ actual cost over any set of runs closed under ``repairs``. Money stays in integer
cents until printed. The recommendation is only stated with the recorded figures behind it.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from ptplan.core.fit import model_interval
from ptplan.ledger.records import RunRecord, cents, usd

GROUPINGS = ("method", "family", "project")
BEYOND = ("other", "cpu")
"""Cost lines beyond the GPU pools (issue #25): the spec's other costs and the CPU pools."""


@dataclass(frozen=True)
class Thresholds:
    forgetting_points: float = 2.0
    variance: float = 0.25


@dataclass
class RunRow:
    run: RunRecord
    actual: int
    planned: int | None
    rework: int = 0
    reworked_by: list[str] = field(default_factory=list)

    def planned_beyond(self, kind: str) -> int:
        """The plan's ``other`` or ``cpu`` lines (cents; in ``planned``)."""
        return sum(c for k, _, c in self.run.planned_lines if k == kind)

    def has_beyond(self) -> bool:
        return bool(self.run.planned_lines) or any(self.run.actual_beyond(k) for k in BEYOND)

    @property
    def tco(self) -> int:
        return (0 if self.run.repairs else self.actual) + self.rework

    @property
    def gain(self) -> float | None:
        t = [r.after - r.before for r in self.run.results if r.kind == "target"]
        return sum(t) / len(t) if t else None

    @property
    def general(self) -> float | None:
        g = [r.after - r.before for r in self.run.results if r.kind == "general"]
        return sum(g) / len(g) if g else None

    @property
    def cost_variance(self) -> float | None:
        return None if not self.planned else self.actual / self.planned - 1.0

    @property
    def hours_variance(self) -> float | None:
        r = self.run
        if not r.planned_hours or r.wall_hours is None:
            return None
        return r.wall_hours / r.planned_hours - 1.0

    def eval_share(self) -> float | None:
        """Eval's own bill lines ÷ actual; without them, the plan's eval share of its phases."""
        if self.actual <= 0:
            return None
        if any("eval" in c.phase.split("-") for c in self.run.costs):
            if any(c.phase != "eval" and "eval" in c.phase.split("-") for c in self.run.costs):
                return None  # eval shares a pool's bill lines: not separable
            return sum(cents(c.usd) for c in self.run.costs if c.phase == "eval") / self.actual
        plan = self.run.plan
        if not plan or not plan.get("phases"):
            return None
        total = sum(cents(p["cost_usd"]) for p in plan["phases"])
        ev = sum(cents(p["cost_usd"]) for p in plan["phases"] if p["name"] == "eval")
        return ev / total if total else None

    def flags(self, th: Thresholds) -> list[str]:
        out = []
        r = self.run
        if r.budget_usd is not None and self.actual > cents(r.budget_usd):
            out.append("over_budget")
        if self.gain is not None and self.gain <= 0:
            out.append("target_missed")
        if self.general is not None and self.general < -th.forgetting_points:
            out.append("forgetting")
        v = [x for x in (self.cost_variance, self.hours_variance) if x is not None]
        if any(abs(x) > th.variance for x in v):
            out.append("plan_variance")
        return out


def rows(runs: list[RunRecord]) -> list[RunRow]:
    """Review rows, rework attributed to each repair's direct cause (once)."""
    out = {r.id: RunRow(r, r.actual_cents,
                        None if r.planned_cost_usd is None else cents(r.planned_cost_usd))
           for r in runs}
    for row in out.values():
        cause = row.run.repairs
        if cause is not None and cause in out:
            out[cause].rework += row.actual
            out[cause].reworked_by.append(row.run.id)
    return list(out.values())


def _r(x: float | None, n: int = 4) -> float | None:
    return None if x is None else round(x, n)


def _per_point(c: int, gain: float) -> str | None:
    return usd(round(c / gain)) if gain > 0 else None


def beyond_json(members: list[RunRow]) -> dict[str, Any]:
    """Planned and actual other costs and CPU pools, summed (their own lines, in the totals)."""
    return {f"{when}_{kind}_usd": usd(sum(
        m.planned_beyond(kind) if when == "planned" else m.run.actual_beyond(kind)
        for m in members)) for kind in BEYOND for when in ("planned", "actual")}


def run_json(row: RunRow, th: Thresholds, beyond: bool = False) -> dict[str, Any]:
    out = _run_json(row, th)
    if beyond:
        out.update(beyond_json([row]))
        out["planned_lines"] = [{"kind": k, "name": n, "usd": usd(c)}
                                for k, n, c in row.run.planned_lines]
    return out


def _run_json(row: RunRow, th: Thresholds) -> dict[str, Any]:
    r = row.run
    g = row.gain
    return {"id": r.id, "project": r.project, "method": r.method, "algorithm": r.algorithm,
            "model_family": r.model_family, "outcome": r.outcome, "repairs": r.repairs,
            "planned_usd": usd(row.planned), "actual_usd": usd(row.actual),
            "cost_variance": _r(row.cost_variance), "planned_hours": _r(r.planned_hours),
            "wall_hours": _r(r.wall_hours), "hours_variance": _r(row.hours_variance),
            "target_gain": _r(g), "cost_per_point_usd":
                None if g is None else _per_point(row.actual, g),
            "general_change": _r(row.general), "eval_share": _r(row.eval_share()),
            "rework_usd": usd(row.rework), "reworked_by": sorted(row.reworked_by),
            "tco_usd": usd(row.tco), "flags": row.flags(th), **interval_json(r)}


def _pair(raw: Any) -> tuple[float, float] | None:
    try:
        lo, hi = (float(v) for v in raw)
    except (TypeError, ValueError):
        return None
    return (lo, hi) if math.isfinite(lo) and math.isfinite(hi) and 0 <= lo <= hi else None


def planned_interval(r: RunRecord) -> dict[str, Any] | None:
    """The run's plan's 80 % interval of cost and hours: its ``uncertainty`` when the plan
    carries one, else the demand model's interval for the run's method applied as the plan
    would (hours × [low, high]; cost = fixed + time-billed (compute, boot disks, CPU pools;
    the whole total when the plan lists none of them) × [low, high]); None without a plan."""
    plan = r.plan or {}
    unc = plan.get("uncertainty")
    if isinstance(unc, dict):
        cost, hours = _pair(unc.get("total_cost_usd")), _pair(unc.get("makespan_hours"))
        level = unc.get("level")
        if cost and hours and isinstance(level, (int, float)):
            return {"level": float(level), "usd": list(cost), "hours": list(hours),
                    "basis": str(unc.get("basis") or "the plan's uncertainty")}
    if r.planned_cost_usd is None or r.planned_hours is None or not plan:
        return None
    iv = model_interval(r.method)
    try:
        total = float(r.planned_cost_usd)
        keys = [k for k in ("compute_cost_usd", "disk_cost_usd", "cpu_cost_usd") if k in plan]
        timed = min(total, sum(float(plan[k] or 0) for k in keys)) if keys else total
    except (TypeError, ValueError):
        return None
    fixed = total - timed
    return {"level": iv.level, "usd": [fixed + timed * iv.low, fixed + timed * iv.high],
            "hours": [r.planned_hours * iv.low, r.planned_hours * iv.high],
            "basis": f"the model's interval for {r.method} (the plan carries none): {iv.basis}"}


def interval_json(r: RunRecord) -> dict[str, Any]:
    """``planned_interval`` (level, usd and hours [low, high], basis) and ``within_interval``
    (cost, hours: whether the actual landed inside; None where it is not known)."""
    iv = planned_interval(r)
    if iv is None:
        return {"planned_interval": None, "within_interval": {"cost": None, "hours": None}}
    lo, hi = iv["usd"]
    actual = r.actual_cents / 100
    cost = lo - 0.005 <= actual <= hi + 0.005 if r.costs else None
    hours = None if r.wall_hours is None else \
        iv["hours"][0] - 1e-9 <= r.wall_hours <= iv["hours"][1] + 1e-9
    return {"planned_interval": {"level": iv["level"], "usd": [usd(round(lo * 100)),
                                                               usd(round(hi * 100))],
                                 "hours": [round(iv["hours"][0], 4), round(iv["hours"][1], 4)],
                                 "basis": iv["basis"]},
            "within_interval": {"cost": cost, "hours": hours}}


def _key(row: RunRow, by: str) -> str:
    r = row.run
    return {"method": r.method, "family": f"{r.model_family} / {r.method}",
            "project": r.project}[by]


def group_json(key: str, members: list[RunRow], th: Thresholds, beyond: bool = False) \
        -> dict[str, Any]:
    out = _group_json(key, members, th)
    if beyond:
        out.update(beyond_json(members))
    return out


def _group_json(key: str, members: list[RunRow], th: Thresholds) -> dict[str, Any]:
    own = [m for m in members if not m.run.repairs]
    actual = sum(m.actual for m in members)
    planned_rows = [m for m in members if m.planned is not None]
    planned = sum(m.planned or 0 for m in planned_rows)
    planned_actual = sum(m.actual for m in planned_rows)
    variances = [m.cost_variance for m in members if m.cost_variance is not None]
    gained = [m for m in own if m.gain is not None]
    gain = sum(m.gain or 0.0 for m in gained)
    generals = [m.general for m in members if m.general is not None]
    rework = sum(m.rework for m in members)
    own_cost = sum(m.actual for m in own)
    tco = sum(m.tco for m in members)
    return {
        "group": key, "runs": len(members), "repair_runs": len(members) - len(own),
        "planned_usd": usd(planned) if planned_rows else None, "actual_usd": usd(actual),
        "cost_variance": _r(planned_actual / planned - 1.0) if planned else None,
        "cost_variance_stdev": _r(statistics.stdev(variances)) if len(variances) > 1 else None,
        "target_gain": _r(gain) if gained else None,
        "cost_per_point_usd": _per_point(sum(m.actual for m in gained), gain) if gained else None,
        "tco_per_point_usd": _per_point(sum(m.tco for m in gained), gain) if gained else None,
        "general_change_mean": _r(statistics.fmean(generals)) if generals else None,
        "forgetting_runs": sum("forgetting" in m.flags(th) for m in members),
        "rework_caused_usd": usd(rework),
        "rework_ratio": _r(rework / own_cost) if own_cost else None,
        "tco_usd": usd(tco), "tco_per_run_usd": usd(round(tco / len(own))) if own else None,
        "eval_share": _r(_weighted_eval(members)),
        "flagged_runs": sum(bool(m.flags(th)) for m in members),
    }


def _weighted_eval(members: list[RunRow]) -> float | None:
    known: list[tuple[float, int]] = []
    for m in members:
        share = m.eval_share()
        if share is not None:
            known.append((share, m.actual))
    total = sum(a for _, a in known)
    return sum(s * a for s, a in known) / total if total else None


def recommendations(rs: list[RunRow], th: Thresholds) -> list[dict[str, Any]]:
    """Per model family: a method whose runs mostly forgot and whose TCO per target point is
    above another method's on the same family gives way to it; the figures are the evidence."""
    out = []
    for family in sorted({r.run.model_family for r in rs}):
        fam = [r for r in rs if r.run.model_family == family]
        stats: dict[str, dict[str, Any]] = {}
        for name in sorted({r.run.method for r in fam}):
            ms = [r for r in fam if r.run.method == name]
            own = [r for r in ms if not r.run.repairs]
            gained = [r for r in own if r.gain is not None]
            gain = sum(r.gain or 0.0 for r in gained)
            stats[name] = {
                "own": own, "forgot": [r for r in own if "forgetting" in r.flags(th)],
                "own_cost": sum(r.actual for r in own), "rework": sum(r.rework for r in ms),
                "tco_per_point": (sum(r.tco for r in gained) / gain) if gain > 0 else None,
                "gained_runs": len(gained)}
        for method, s in stats.items():
            if len(s["own"]) < 2 or 2 * len(s["forgot"]) < len(s["own"]) or not s["rework"]:
                continue
            alts = [(a, t) for a, t in stats.items() if a != method and t["tco_per_point"]
                    and not t["forgot"]]
            if not alts or s["tco_per_point"] is None:
                continue
            alt, t = min(alts, key=lambda x: (x[1]["tco_per_point"], x[0]))
            if t["tco_per_point"] >= s["tco_per_point"]:
                continue
            ratio = s["rework"] / s["own_cost"]
            text = (f"{len(s['forgot'])} of {len(s['own'])} {method.upper()} runs on {family} "
                    f"lost more than {th.forgetting_points:g} points of general ability; their "
                    f"rework cost {ratio:.2f}x their own cost (${usd(s['rework'])} on "
                    f"${usd(s['own_cost'])}); TCO per target point: {method.upper()} "
                    f"${usd(round(s['tco_per_point']))}, {alt.upper()} "
                    f"${usd(round(t['tco_per_point']))} over {t['gained_runs']} run(s): "
                    f"prefer {alt.upper()} for {family}")
            out.append({"model_family": family, "instead_of": method, "prefer": alt,
                        "text": text, "evidence_runs": sorted(
                            [r.run.id for r in s["own"]] + [r.run.id for r in t["own"]])})
    return out


def review(runs: list[RunRecord], by: tuple[str, ...] = ("method", "family"),
           th: Thresholds = Thresholds()) -> dict[str, Any]:
    rs = rows(runs)
    beyond = any(r.has_beyond() for r in rs)  # only then: ledgers without keep their review
    groups: dict[str, list[dict[str, Any]]] = {}
    for b in by:
        keys = sorted({_key(r, b) for r in rs})
        groups[b] = [group_json(k, [r for r in rs if _key(r, b) == k], th, beyond)
                     for k in keys]
    totals = {"runs": len(rs), "actual_usd": usd(sum(r.actual for r in rs)),
              "planned_usd": usd(sum(r.planned or 0 for r in rs)),
              "rework_usd": usd(sum(r.rework for r in rs)),
              "tco_usd": usd(sum(r.tco for r in rs))}
    if beyond:
        totals.update(beyond_json(rs))
    return {
        "thresholds": {"forgetting_points": th.forgetting_points, "variance": th.variance},
        "runs": [run_json(r, th, beyond) for r in rs],
        "groups": groups,
        "totals": totals,
        "recommendations": recommendations(rs, th),
    }


def attach_plans(rv: dict[str, Any], plans: list[dict[str, Any]]) -> None:
    """Add to each recommendation the plan made now for a spec of the preferred method
    (``runs review --alternative SPEC``): its name, method, cost, hours and catalog."""
    for rec in rv["recommendations"]:
        for p in plans:
            if p["method"] == rec["prefer"]:
                rec.setdefault("planned_now", []).append(p)
                rec["text"] += (f"; an {p['method'].upper()} plan for {p['spec']} costs "
                                f"${p['total_cost_usd']} over {p['makespan_hours']:.1f} h "
                                f"(planned now on catalog {p['catalog']})")
