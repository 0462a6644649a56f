"""The demand model's own uncertainty in the simulation (``plan --risk pNN``; docs/simulate.md).

The model's 80 % interval (:func:`ptplan.core.fit.model_interval`, from the leave-one-out
errors of the validation suite) says the job's true time lies in [low × x, high × x] with 80 %
probability. The simulation draws one job-time multiplier per trial from the lognormal whose
10th and 90th percentiles are ``low`` and ``high``::

    μ = (ln low + ln high) / 2,   σ = (ln high − ln low) / (2 · z),   z = Φ⁻¹(0.9) = 1.2816

(the interval need not be centred on 1: a model that is biased low has μ > 0). A trial with
multiplier m runs m × the plan's interruption-free busy time of every pool, so it is exposed
to interruptions m times as long; the cost that scales with time (every pool's instances and
boot disks, $/h × hours) scales with it, storage, network and other costs do not.

:func:`attribution` says which source dominates: the quantile of cost and makespan with the
model's uncertainty alone (no interruptions), with spot interruptions alone (the multiplier at
1, the same seed), and with both, each against the interruption-free run at multiplier 1, and
the share of each in the variance of log cost.
"""

from __future__ import annotations

import math
from dataclasses import replace
from statistics import NormalDist
from typing import Any

import numpy as np

from ptplan.core.errors import InputError
from ptplan.core.fit import LEVEL, model_interval
from ptplan.planfile.schema import Plan
from ptplan.risk.model import RunModel


def lognormal_of(low: float, high: float, level: float = LEVEL) -> tuple[float, float]:
    """(μ, σ) of the lognormal whose (1 − level)/2 and (1 + level)/2 quantiles are ``low``
    and ``high``."""
    if not (0.0 < low <= high and math.isfinite(high)) or not 0.0 < level < 1.0:
        raise InputError(f"model interval: [{low}, {high}] at level {level} is not an "
                         "interval of positive multipliers")
    z = NormalDist().inv_cdf(0.5 + level / 2.0)
    return (math.log(low) + math.log(high)) / 2.0, (math.log(high) - math.log(low)) / (2.0 * z)


def _pair(raw: Any, x: float) -> tuple[float, float] | None:
    """Multipliers [lo / x, hi / x] of a plan's ``uncertainty`` pair, when it is one."""
    try:
        lo, hi = (float(v) for v in raw)
    except (TypeError, ValueError):
        return None
    if not (x > 0 and math.isfinite(lo) and math.isfinite(hi) and 0 < lo <= hi):
        return None
    return lo / x, hi / x


def _get(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)


def plan_time_interval(plan: Plan) -> tuple[float, float, float, str]:
    """(level, low, high, basis) of the job-time multiplier: the plan's own ``uncertainty``
    (its ``factor``, else its makespan pair ÷ its makespan) when it carries one, else the
    model's interval of the plan's method."""
    unc = getattr(plan, "uncertainty", None)
    if unc is not None:
        pair = _pair(_get(unc, "factor"), 1.0) or _pair(_get(unc, "makespan_hours"),
                                                         float(plan.makespan_hours))
        level = _get(unc, "level")
        if pair is not None and isinstance(level, (int, float)) and 0 < level < 1:
            return (float(level), pair[0], pair[1],
                    str(_get(unc, "basis") or "the plan's uncertainty"))
    iv = model_interval(plan.method)
    return iv.level, iv.low, iv.high, iv.basis


def _time_rate(plan: Plan) -> float | None:
    """The plan's time-billed cost per hour of its makespan, when its ``uncertainty`` says."""
    unc = getattr(plan, "uncertainty", None)
    raw = None if unc is None else _get(unc, "time_cost_usd")
    if raw is None:
        return None
    try:
        rate = float(raw) / float(plan.makespan_hours)
    except (TypeError, ValueError, ZeroDivisionError):
        return None
    return rate if math.isfinite(rate) and rate >= 0 else None


def with_model_uncertainty(model: RunModel, plan: Plan) -> RunModel:
    """``model`` with the job-time multiplier of the plan's interval."""
    level, low, high, basis = plan_time_interval(plan)
    mu, sigma = lognormal_of(low, high, level)
    return replace(model, time_mu=mu, time_sigma=sigma,
                   time_interval=(level, low, high, basis), time_usd_per_hour=_time_rate(plan))


def model_only(model: RunModel, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(makespan, cost) per trial with the model's uncertainty alone: no interruptions."""
    ext = (m - 1.0) * model.base_makespan_hours
    cost = model.base_cost_usd + model.time_rate * ext
    for slack, past in model.overruns:
        cost = cost + past * np.maximum(0.0, ext - slack)
    return model.base_makespan_hours + ext + model.wait_hours, cost


def _log_var(x: np.ndarray) -> float:
    x = x[x > 0]
    return float(np.var(np.log(x))) if len(x) > 1 else 0.0


def attribution(model: RunModel, q: float, combined: tuple[np.ndarray, np.ndarray],
                spot: tuple[np.ndarray, np.ndarray], m: np.ndarray) -> dict[str, Any]:
    """What each source adds at quantile ``q`` over the interruption-free run at multiplier 1,
    as (makespan hours, cost $) per trial of both together, of spot interruptions alone and
    the multipliers ``m`` of the model's uncertainty."""
    alone = model_only(model, m)
    base_h = model.base_makespan_hours + model.wait_hours
    base_c = model.base_cost_usd

    def adds(pair: tuple[np.ndarray, np.ndarray]) -> dict[str, float]:
        return {"makespan_hours": round(float(np.quantile(pair[0], q)) - base_h, 6),
                "cost_usd": round(float(np.quantile(pair[1], q)) - base_c, 2)}

    vm, vs = _log_var(alone[1]), _log_var(spot[1])
    share = vm / (vm + vs) if vm + vs > 0 else 0.5
    out: dict[str, Any] = {
        "base_makespan_hours": round(base_h, 6), "base_cost_usd": round(base_c, 2),
        "model": adds(alone), "spot": adds(spot), "both": adds(combined),
        "log_cost_variance_share": {"model": round(share, 4), "spot": round(1.0 - share, 4)},
    }
    if model.time_interval is not None:
        level, low, high, basis = model.time_interval
        out["interval"] = {"level": level, "low": low, "high": high, "basis": basis,
                           "mu": round(model.time_mu, 6), "sigma": round(model.time_sigma, 6)}
    x, y = out["model"]["cost_usd"], out["spot"]["cost_usd"]
    out["dominant"] = "model" if x > y else "spot" if y > x else "neither"
    return out


def attribution_sentence(a: dict[str, Any], label: str) -> str:
    """"at P90 the model's uncertainty adds $X (h), spot interruptions $Y (h): the model
    dominates"."""
    q = label.upper()
    m, s = a["model"], a["spot"]
    who = {"model": "the model dominates", "spot": "spot interruptions dominate",
           "neither": "neither dominates"}[a["dominant"]]
    iv = a.get("interval")
    basis = "" if iv is None else (f"; job time ×{iv['low']:.3g}–×{iv['high']:.3g} at "
                                   f"{iv['level'] * 100:g} %")
    share = a["log_cost_variance_share"]["model"]
    return (f"at {q} the model's uncertainty adds ${m['cost_usd']:,.2f} "
            f"({m['makespan_hours']:+.3f} h), spot interruptions ${s['cost_usd']:,.2f} "
            f"({s['makespan_hours']:+.3f} h), both ${a['both']['cost_usd']:,.2f} "
            f"({a['both']['makespan_hours']:+.3f} h) over the interruption-free run at the "
            f"model's figures: {who} ({share * 100:.0f} % of the variance of log cost is the "
            f"model's{basis})")
