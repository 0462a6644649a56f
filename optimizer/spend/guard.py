"""The circuit breaker: forecast the cost at completion from the spend to date, the burn rate
and the progress, and decide ``ok`` / ``warn`` / ``stop`` by the plan's budget thresholds.

Figures (docs/spend.md):

* spent ``A`` at ``t`` hours since the run started (the bill's cumulative cost);
* burn rate ``r = (A(e) − A(e − w)) / w`` over the last ``w = min(window, e)`` hours before
  the bill's edge ``e``, the end of the last period whose cost rose (the bill lags usage:
  Cost Explorer by up to a day, the BigQuery export by hours, so empty last periods are more
  often lag than a stopped run, and the guard errs on the side of spending); the cumulative
  cost is linear between period ends;
* progress ``s`` of the plan's ``S`` steps (the largest step in the metrics); the run takes
  ``t / s`` hours a step, so the hours left are ``(S − s) · t / s``; without progress data the
  plan's own hours left, ``max(0, makespan − t)``;
* forecast at completion ``F = A + r · hours left`` (earned-value EAC with the recent burn);
* thresholds: the plan's ``budget_warn_usd`` / ``budget_stop_usd`` (budget × the policy's
  ``warn_at`` / ``stop_at``); a plan without a budget uses its own total cost × those shares;
  ``against="upper"``: those shares of the upper end of the plan's 80 % interval (its
  ``uncertainty.total_cost_usd[1]``; a plan without one: fixed costs + the time-billed cost ×
  the model's high multiplier), never above the budget's own thresholds;
* target ``NAME>=VALUE`` (or ``<=``): reached when the latest value meets it; its trajectory is
  the least-squares line through the last ``TREND_POINTS`` values, extrapolated to step ``S``.

Decision: ``stop`` when the spend has reached the stop threshold without the target, or the
forecast reaches it (and the target is not reached); ``warn`` when the spend or the forecast
reaches the warn threshold, the spend reached stop with the target met, the target's
trajectory misses it at step ``S``, or the bill holds no cost of the plan's tags at all (the
guard would be blind); else ``ok``. Every reason is one line.

Numbers in, checked: every input is a finite number in range or :func:`decide` refuses it
with a one-line :class:`InputError` (exit 2): the window (hours > 0), the hours since the run
started (≥ 0), each point of the spend series (hours ≥ 0, cumulative cost ≥ 0; points may come
in any order; repeated hours and a falling cumulative cost are read as the running maximum, so
spend once seen is never un-seen), the steps done (≥ 0) and the target's values. A plan whose
budget thresholds or total are not finite is refused the same way. Should any figure the
decision compares (spent, burn, forecast, thresholds) still come out non-finite, the decision
is ``stop`` with the reason: a breaker that cannot read its meter trips; it never says ``ok``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from ptplan.core.errors import InputError
from ptplan.planfile.schema import Plan

LEVELS = {"ok": 0, "warn": 10, "stop": 11}
"""Decision → exit code."""
TREND_POINTS = 5
DEFAULT_WINDOW_HOURS = 24.0
_TARGET = re.compile(r"^\s*(?P<name>[^<>=\s][^<>=]*?)\s*(?P<op>>=|<=)\s*(?P<value>[-+0-9.eE]+)\s*$")


@dataclass(frozen=True)
class Target:
    name: str
    op: str
    value: float

    def met(self, v: float) -> bool:
        return v >= self.value if self.op == ">=" else v <= self.value

    def __str__(self) -> str:
        return f"{self.name}{self.op}{self.value:g}"


def parse_target(text: str) -> Target:
    m = _TARGET.match(text)
    try:
        value = float(m["value"]) if m else float("nan")
    except ValueError:
        value = float("nan")
    if not m or value != value:
        raise InputError(f"--target: {text!r} is not NAME>=VALUE or NAME<=VALUE; e.g. "
                         "\"val-core/openai/gsm8k/reward/mean@1>=0.8\"")
    return Target(m["name"], m["op"], value)


def cumulative_at(series: list[tuple[float, float]], hours: float) -> float:
    """The cumulative cost at ``hours``, linear between the points (0, 0) and period ends."""
    pts = [(0.0, 0.0), *sorted(series)]
    if hours <= 0:
        return 0.0
    for (h0, c0), (h1, c1) in pairwise(pts):
        if h0 <= hours <= h1:
            return c0 if h1 == h0 else c0 + (c1 - c0) * (hours - h0) / (h1 - h0)
    return pts[-1][1]


def billed_edge(series: list[tuple[float, float]], hours: float) -> float:
    """The end of the last period (up to ``hours``) whose cost rose: the bill's edge."""
    edge, last = 0.0, 0.0
    for h, c in sorted(series):
        if h <= hours and c > last:
            edge = h
        last = max(last, c)
    return edge


def trend(points: list[tuple[int, float]], at: int) -> float | None:
    """Least-squares line through the last TREND_POINTS (step, value), evaluated at ``at``."""
    pts = sorted(points)[-TREND_POINTS:]
    if len(pts) < 2 or len({s for s, _ in pts}) < 2:
        return None
    n = len(pts)
    mx = sum(s for s, _ in pts) / n
    my = sum(v for _, v in pts) / n
    slope = sum((s - mx) * (v - my) for s, v in pts) / sum((s - mx) ** 2 for s, _ in pts)
    return my + slope * (at - mx)


def _number(value: Any, what: str, fix: str, low: float | None = 0.0,
            strict: bool = False) -> float:
    """``value`` as a finite float ``≥ low`` (``> low`` when ``strict``), else one line."""
    try:
        x = float(value)
    except (TypeError, ValueError, OverflowError):
        x = math.nan
    if not math.isfinite(x) or (low is not None and (x <= low if strict else x < low)):
        raise InputError(f"{what}: {value!r} is not a finite number"
                         f"{'' if low is None else (' > ' if strict else ' ≥ ') + f'{low:g}'}; "
                         f"{fix}")
    return x


def _out(x: float, digits: int) -> float | None:
    """A figure for the report: rounded, or None when it is not finite (JSON has no NaN)."""
    return round(x, digits) if math.isfinite(x) else None


def checked_series(series: list[tuple[float, float]], where: str = "spend series"
                   ) -> list[tuple[float, float]]:
    """The spend series with every point finite (hours ≥ 0, cumulative cost ≥ 0), sorted by
    hours, one point per hour value, and never falling: points in any order, repeated hours
    and a cumulative cost that drops (a credit, rows out of order) are read as the running
    maximum, so the guard never un-sees spend."""
    points = []
    for i, point in enumerate(series):
        h, c = point
        fix = "the spend data is damaged: pull it again (ptplan spend) or fix the file"
        points.append((_number(h, f"{where}: point {i} hours", fix),
                       _number(c, f"{where}: point {i} cumulative cost", fix)))
    out: list[tuple[float, float]] = []
    top = 0.0
    for h, c in sorted(points):
        top = max(top, c)
        if out and out[-1][0] == h:
            out[-1] = (h, top)
        else:
            out.append((h, top))
    return out


AGAINST = ("expected", "upper")
"""What the thresholds are set against: the plan's expected figures (its budget, else its
total cost) or the upper end of its 80 % interval."""
_FIX = "the plan file is damaged: make it again with ptplan plan"


def _cents(x: float) -> float:
    """Money rounded to the cent it is shown at (non-finite values kept: they trip the guard)."""
    return round(x, 2) if math.isfinite(x) else x


def upper_cost(plan: Plan) -> tuple[float, float, str]:
    """(level, the plan's upper cost, where it came from): its ``uncertainty`` when it carries
    one, else fixed costs + the time-billed cost (compute, boot disks, CPU pools) × the high
    multiplier of the model's interval for its method."""
    from ptplan.core.fit import model_interval

    unc = getattr(plan, "uncertainty", None)
    if unc is not None:
        hi = _number(unc.total_cost_usd[1], "plan uncertainty.total_cost_usd", _FIX)
        return float(unc.level), hi, f"the upper end of the plan's {unc.level * 100:g} % interval"
    iv = model_interval(plan.method)
    total = _number(plan.total_cost_usd, "plan total_cost_usd", _FIX)
    timed = sum(_number(x or 0, f"plan {name}", _FIX) for name, x in (
        ("compute_cost_usd", plan.compute_cost_usd), ("disk_cost_usd", plan.disk_cost_usd),
        ("cpu_cost_usd", plan.cpu_cost_usd)))
    timed = min(timed, total)
    return (iv.level, total - timed + timed * iv.high,
            f"the upper end of the model's {iv.level * 100:g} % interval (×{iv.high:g} on the "
            "time-billed cost; the plan carries none)")


def thresholds(plan: Plan, against: str = "expected") -> tuple[float, float, str]:
    """(warn $, stop $, the basis in words)."""
    if against not in AGAINST:
        raise InputError(f"--against: unknown value {against!r}; use one of "
                         f"{', '.join(AGAINST)}")
    shares = plan.policy.get("budget", {}) if isinstance(plan.policy, dict) else {}
    warn_at = _number(shares.get("warn_at", 0.8), "plan policy budget.warn_at", _FIX)
    stop_at = _number(shares.get("stop_at", 1.0), "plan policy budget.stop_at", _FIX)
    budget: tuple[float, float, str] | None = None
    if plan.budget_warn_usd is not None and plan.budget_stop_usd is not None:
        budget = (_number(plan.budget_warn_usd, "plan budget_warn_usd", _FIX),
                  _number(plan.budget_stop_usd, "plan budget_stop_usd", _FIX),
                  "the plan's budget")
    if against == "upper":
        _, hi, where = upper_cost(plan)
        warn, stop = hi * warn_at, hi * stop_at
        basis = f"against {where}, ${hi:,.2f}"
        if budget is None:
            return warn, stop, basis + " (no budget in the plan)"
        if budget[1] <= stop:
            return (min(warn, budget[0]), budget[1],
                    f"{basis}, capped by the plan's budget (its stop ${budget[1]:,.2f})")
        return min(warn, budget[0]), stop, basis + " (below the plan's budget)"
    if budget is not None:
        return budget
    total = _number(plan.total_cost_usd, "plan total_cost_usd", _FIX)
    return (total * warn_at, total * stop_at, "the plan's total cost (no budget in the plan)")


def decide(plan: Plan, series: list[tuple[float, float]], hours: float,
           steps_done: int | None, target: Target | None = None,
           target_points: list[tuple[int, float]] | None = None,
           window: float = DEFAULT_WINDOW_HOURS, against: str = "expected") -> dict[str, Any]:
    """The guard's numbers, reasons and decision (see the module doc for every formula)."""
    window = _number(window, "--window", "give a positive number of hours, e.g. --window 24",
                     strict=True)
    hours = _number(hours, "spend hours since the run started",
                    "the spend data is damaged: pull it again (ptplan spend) or fix the file")
    series = checked_series(series)
    if steps_done is not None:
        steps_done = int(_number(steps_done, "--metrics: steps done",
                                 "the metrics' step must be a whole number ≥ 0"))
    if target_points:
        target_points = [(int(_number(s, "--metrics: step", "steps are whole numbers ≥ 0")),
                          _number(v, f"--target: value of {target.name if target else '?'} "
                                  f"at step {s}", "the metric must be a finite number",
                                  low=None))
                         for s, v in target_points]
    spent = cumulative_at(series, hours)
    edge = billed_edge(series, hours)
    w = min(window, edge)
    burn = (cumulative_at(series, edge) - cumulative_at(series, edge - w)) / w if w > 0 else 0.0
    total_steps = plan.steps
    if steps_done is not None and steps_done > 0:
        left = max(0.0, (total_steps - steps_done) * hours / steps_done)
        basis = f"{steps_done}/{total_steps} steps in {hours:g} h"
    else:
        left = max(0.0, plan.makespan_hours - hours)
        basis = f"no progress data: the plan's {plan.makespan_hours:.2f} h less {hours:g} h"
    forecast = spent + burn * left
    # decide on the figures as shown (cents): an interpolation at a vanishing hour may land a
    # hair under a threshold it meets (Hypothesis: $999.9999… shown as $1,000.00 at stop $1,000)
    spent, forecast = _cents(spent), _cents(forecast)
    warn_usd, stop_usd, source = thresholds(plan, against)
    reasons: list[tuple[str, str]] = []
    latest = projected = None
    reached = False
    if target is not None and target_points:
        latest_step, latest = max(target_points)
        reached = target.met(latest)
        projected = trend(target_points, total_steps)
        if reached:
            reasons.append(("ok", f"target {target} reached at step {latest_step} "
                            f"({target.name} = {latest:g}): the run has what it was for"))
    money = (f"spent ${spent:,.2f} in {hours:g} h, burn ${burn:,.2f}/h over the last {w:g} h "
             f"of billed cost{'' if edge >= hours else f' (to hour {edge:g})'}, "
             f"forecast ${forecast:,.2f} at completion ({basis})")
    if spent >= stop_usd:
        if reached:
            reasons.append(("warn", f"spent ${spent:,.2f} ≥ stop ${stop_usd:,.2f} ({source}); "
                            "the target is reached, so no stop"))
        else:
            why = "without the target" if target is not None else "(no --target to spare it)"
            reasons.append(("stop", f"spent ${spent:,.2f} ≥ stop ${stop_usd:,.2f} ({source}) "
                            f"{why}"))
    elif forecast >= stop_usd and not reached:
        reasons.append(("stop", f"forecast ${forecast:,.2f} ≥ stop ${stop_usd:,.2f} ({source}): "
                        f"{money}"))
    elif spent >= warn_usd or forecast >= warn_usd:
        what = "spent" if spent >= warn_usd else "forecast"
        value = spent if spent >= warn_usd else forecast
        reasons.append(("warn", f"{what} ${value:,.2f} ≥ warn ${warn_usd:,.2f} ({source}): "
                        f"{money}"))
    if target is not None and not reached:
        if not target_points:
            reasons.append(("warn", f"target {target}: no value of {target.name} in the "
                            "metrics yet"))
        elif projected is not None and not target.met(projected):
            reasons.append(("warn", f"target {target}: trajectory reaches {projected:.4g} at "
                            f"step {total_steps} (latest {latest:g}), short of it"))
    if not any(c > 0 for _, c in series):
        reasons.append(("warn", "no cost of the plan's tags in the bill yet: the tags may not "
                        "be active as cost allocation tags, or the bill lags; the guard sees "
                        "nothing"))
    if steps_done is None:
        reasons.append(("ok", "no progress data (--metrics): forecast from the plan's hours"))
    blind = [name for name, x in (("spent", spent), ("burn", burn), ("forecast", forecast),
                                  ("warn", warn_usd), ("stop", stop_usd))
             if not math.isfinite(x)]
    if blind:
        reasons.append(("stop", f"{', '.join(blind)} not a finite number: the guard cannot "
                        "read the spend, so it trips (check the bill and the plan)"))
    if not any(level != "ok" for level, _ in reasons):
        reasons.append(("ok", f"on track: {money}; warn ${warn_usd:,.2f}, stop "
                        f"${stop_usd:,.2f} ({source})"))
    decision = max((level for level, _ in reasons), key=LEVELS.__getitem__)
    return {
        "decision": decision, "exit_code": LEVELS[decision],
        "reasons": [f"{level}: {text}" for level, text in reasons],
        "spent_usd": _out(spent, 2), "hours": round(hours, 4),
        "burn_usd_per_hour": _out(burn, 4), "burn_window_hours": round(w, 4),
        "billed_to_hours": round(edge, 4),
        "steps_done": steps_done, "steps": total_steps, "hours_left": _out(left, 4),
        "forecast_usd": _out(forecast, 2), "warn_usd": _out(warn_usd, 2),
        "stop_usd": _out(stop_usd, 2), "thresholds_from": source, "against": against,
        "plan_total_usd": plan.total_cost_usd,
        "target": None if target is None else {
            "name": target.name, "op": target.op, "value": target.value, "latest": latest,
            "reached": reached, "projected_at_completion": None if projected is None
            else round(projected, 6)}}
