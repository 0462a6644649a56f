"""Distributions of a simulation, as the report's JSON and the trials' CSV (its table and
chart: :mod:`ptplan.report.tables_simulate`).

Quantiles are NumPy's default (linear interpolation between order statistics); the confidence
interval of a mean is mean ± 1.96 × sample standard deviation ÷ √trials (normal approximation,
95 %). Every figure is rounded once, here, so equal seeds give equal bytes.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from ptplan.core.errors import InputError
from ptplan.risk.model import RunModel
from ptplan.risk.montecarlo import ChunkResult

SIMULATE_SCHEMA_VERSION = 1
Z95 = 1.959963984540054
QUANTILES = (50, 90, 99)
_QUANTILE = re.compile(r"^[pP](?P<q>[0-9]{1,2}(?:\.[0-9]+)?)$")


def parse_quantile(text: str) -> float:
    """``p90`` → 0.90; any ``pNN`` or ``pNN.N`` strictly between 0 and 100."""
    m = _QUANTILE.match(text.strip())
    q = float(m["q"]) if m else math.nan
    if not 0.0 < q < 100.0:
        raise InputError(f"--risk: {text!r} is not a quantile; use pNN with 0 < NN < 100, "
                         "e.g. p90 or p99.5")
    return q / 100.0


def mean_ci(x: np.ndarray) -> tuple[float, float]:
    """(mean, half-width of its 95 % confidence interval)."""
    if len(x) < 2:
        return float(x.mean()), math.inf
    return float(x.mean()), float(Z95 * x.std(ddof=1) / math.sqrt(len(x)))


def p_met(makespan: np.ndarray, deadline: float) -> float:
    """Share of trials finishing by ``deadline`` hours."""
    return float(np.count_nonzero(makespan <= deadline) / len(makespan))


def _dist(x: np.ndarray, digits: int) -> dict[str, float]:
    mean, half = mean_ci(x)
    out = {"mean": round(mean, digits), "ci95_low": round(mean - half, digits),
           "ci95_high": round(mean + half, digits), "std": round(float(x.std(ddof=1))
                                                                  if len(x) > 1 else 0.0, digits)}
    for q in QUANTILES:
        out[f"p{q}"] = round(float(np.quantile(x, q / 100)), digits)
    out["max"] = round(float(x.max()), digits)
    return out


def summarise(model: RunModel, res: ChunkResult, trials: int, seed: int) -> dict[str, Any]:
    """The simulation report (JSON-ready)."""
    x, c = res.makespan_hours, res.cost_usd
    over_mean, over_half = mean_ci(x - model.base_makespan_hours - model.wait_hours)
    report: dict[str, Any] = {
        "simulate_schema_version": SIMULATE_SCHEMA_VERSION,
        "spec_name": model.name, "pipeline_mode": model.mode, "trials": trials, "seed": seed,
        "correlated": model.correlated, "shortage_hours": model.shortage_hours,
        "checkpoints": model.checkpoint_mode, "async_buffer": model.async_buffer,
        "makespan_hours": _dist(x, 6), "cost_usd": _dist(c, 2),
        "deadline_hours": model.deadline_hours,
        "p_deadline_met": None if model.deadline_hours is None
        else round(p_met(x, model.deadline_hours), 6),
        "budget_usd": model.budget_usd,
        "p_budget_exceeded": None if model.budget_usd is None
        else round(float(np.count_nonzero(c > model.budget_usd) / len(c)), 6),
        "interruptions_mean": round(float(res.interruptions.mean()), 6),
        "fallback_usd_mean": round(float(res.fallback_usd.mean()), 2),
        "overhead": {
            "base_makespan_hours": round(model.base_makespan_hours, 6),
            "plan_makespan_hours": round(model.plan_makespan_hours, 6),
            "plan_expected_hours": round(model.plan_overhead_hours, 6),
            "simulated_mean_hours": round(over_mean, 6),
            "simulated_ci95_hours": [round(over_mean - over_half, 6),
                                     round(over_mean + over_half, 6)],
            "plan_expected_usd": round(model.usd_per_hour * model.plan_overhead_hours, 2),
            "simulated_mean_usd": round(float(c.mean()) - model.base_cost_usd, 2),
            "plan_within_ci": bool(abs(model.plan_overhead_hours - over_mean) <= over_half),
        },
        "pools": [_pool_row(model, i, res) for i in range(len(model.pools))],
        "notes": list(model.notes),
    }
    return report


def _pool_row(model: RunModel, i: int, res: ChunkResult) -> dict[str, Any]:
    """A pool's busy time: base, the plan's (with its expected overhead) and simulated."""
    p = model.pools[i]
    mean, half = mean_ci(p.base_busy_hours + res.pool_slip_hours[:, i])
    plan_busy = model.plan_pool_busy.get(p.name, p.base_busy_hours)
    return {"name": p.name, "nodes": p.nodes, "stateful": p.stateful,
            "interruptions_per_hour": round(p.independent_rate + sum(
                model.zone_rates[h.zone] for h in p.zone_hits), 9),
            "base_busy_hours": round(p.base_busy_hours, 6),
            "plan_busy_hours": round(plan_busy, 6),
            "simulated_busy_hours": round(mean, 6),
            "simulated_busy_ci95": [round(mean - half, 6), round(mean + half, 6)]}


def simulate_csv(res: ChunkResult) -> str:
    """One row per trial."""
    lines = ["trial,makespan_hours,cost_usd,interruptions,fallback_usd"]
    for i, (m, c, n, f) in enumerate(zip(res.makespan_hours, res.cost_usd,
                                         res.interruptions, res.fallback_usd, strict=True)):
        lines.append(f"{i},{m:.6f},{c:.2f},{int(n)},{f:.2f}")
    return "\n".join(lines) + "\n"
