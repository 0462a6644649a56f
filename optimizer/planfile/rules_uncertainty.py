"""``uncertainty`` (schema 8): the plan's 80 % interval recomputed from its own figures
(makespan, time-billed and fixed costs, the calibrated phases' GPU-hours and run rates) and,
when the plan was made with the stored fit (same ``fit`` digest), the fit's interval for its
method (:mod:`ptplan.planfile.uncertainty`)."""

from __future__ import annotations

from decimal import Decimal

from ptplan.core.fit import LEVEL, fit_digest, model_interval
from ptplan.planfile.rules_base import close, money
from ptplan.planfile.schema import Plan
from ptplan.planfile.uncertainty import (
    UNCERTAINTY_SCHEMA,
    factor_text,
    narrowed,
    time_cost,
)

_x = factor_text


def check_uncertainty(plan: Plan) -> list[str]:
    """``uncertainty``: the interval recomputed from the plan's figures (and, when the plan was
    made with the stored fit, the fit's interval for its method)."""
    u = plan.uncertainty
    if u is None:
        return ([f"uncertainty: a plan of schema {plan.schema_version} carries its 80 % "
                 "interval (uncertainty); it is missing"]
                if plan.schema_version >= UNCERTAINTY_SCHEMA else [])
    if plan.schema_version < UNCERTAINTY_SCHEMA:
        return [f"uncertainty: the interval needs schema {UNCERTAINTY_SCHEMA}, the plan says "
                f"{plan.schema_version}"]
    v: list[str] = []
    if not close(u.level, LEVEL, abs_=1e-9):
        v.append(f"uncertainty: level {u.level:g} != {LEVEL:g}")
    if u.fit == fit_digest():
        iv = model_interval(plan.method)
        if (u.family, u.cases) != (iv.family, iv.cases) or not all(
                close(a, b) for a, b in zip(u.model_factor, (iv.low, iv.high), strict=True)):
            v.append(f"uncertainty: model interval {_x(*u.model_factor)} ({u.family}, "
                     f"{u.cases} cases) is not the stored fit's {_x(iv.low, iv.high)} for "
                     f"{plan.method} ({iv.family}, {iv.cases} cases)")
    lo, hi = u.model_factor
    if lo > hi:
        v.append(f"uncertainty: model interval {_x(lo, hi)} is reversed")
    n = narrowed(plan, lo, hi)
    if not close(u.calibrated_share, n.share) or u.calibration_runs != len(n.runs):
        v.append(f"uncertainty: calibrated share {u.calibrated_share:.6g} from "
                 f"{u.calibration_runs} runs != {n.share:.6g} from {len(n.runs)} (the phases' "
                 "GPU-hours and the calibration records' run rates)")
    if not all(close(a, b) for a, b in zip(u.factor, (n.low, n.high), strict=True)):
        v.append(f"uncertainty: factor {_x(*u.factor)} != {_x(n.low, n.high)} (model interval "
                 "and calibrated share)")
    timed = time_cost(plan)
    if Decimal(u.time_cost_usd) != timed:
        v.append(f"uncertainty: time-billed cost {u.time_cost_usd} != compute + disks + CPU "
                 f"+ per-hour other costs {timed}")
    fixed = money(plan.total_cost_usd) - float(timed)
    for i, f in enumerate((n.low, n.high)):
        want = plan.makespan_hours * f
        if not close(u.makespan_hours[i], want):
            v.append(f"uncertainty: makespan {('low', 'high')[i]} {u.makespan_hours[i]:.6g} h "
                     f"!= makespan x factor {want:.6g} h")
        cost = fixed + float(timed) * f
        if not close(money(u.total_cost_usd[i]), cost, rel=1e-9, abs_=0.0101):
            v.append(f"uncertainty: total {('low', 'high')[i]} {u.total_cost_usd[i]} != fixed "
                     f"+ time-billed x factor {cost:.2f}")
    return v
