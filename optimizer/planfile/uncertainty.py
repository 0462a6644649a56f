"""The plan's 80 % interval (schema 8, ``uncertainty``; the rule: :mod:`rules_uncertainty`).

The demand model's interval for the plan's method (:func:`ptplan.core.fit.model_interval`:
multipliers [L, H] on the job's time, the empirical 10th and 90th percentiles of the
leave-one-out errors of the validation suite) applies to every phase the model predicts. A
phase calibrated from the team's own ledger runs (``calibration[]`` with ``run_rates`` from at
least :data:`MIN_RUNS` runs) is known from those runs instead: its multipliers are the 10th and
90th percentiles of measured ÷ run rate over the runs (``statistics.quantiles``, inclusive).
The plan's multipliers are the GPU-hour-weighted sum of the phases' ones (the shares combined
as if their errors moved together: the widest, never an optimistic combination):

    factor = (1 − Σ s_j) × [L, H] + Σ s_j × [l_j, h_j]

Makespan × factor; total = fixed + time-scaled × factor, where the time-scaled cost is what
is billed by the hour (compute, boot disks, CPU pools, per-hour other costs) and the fixed
cost the rest (storage, network, fixed and per-sample other costs).

``check`` recomputes all of it from the plan's own figures; the suite's interval
(``model_factor``, ``family``, ``cases``) is compared with the stored fit when the plan was
made with it (``fit``, the stored fit's digest), as ``catalog_match`` compares prices only with
the catalog snapshot a plan was made on.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from decimal import Decimal

from ptplan.core.fit import fit_digest, model_interval
from ptplan.core.numbers import round_float
from ptplan.planfile.fields import usd
from ptplan.planfile.schema import CalibrationRecord, Plan
from ptplan.planfile.schema_items import Uncertainty

UNCERTAINTY_SCHEMA = 8
MIN_RUNS = 3
"""Runs a calibration entry needs before its own spread replaces the suite's."""


def run_spread(rec: CalibrationRecord) -> tuple[float, float] | None:
    """[low, high] time multipliers of a calibration record's runs (q10, q90 of measured ÷
    run rate), or None below :data:`MIN_RUNS` runs."""
    rates = rec.run_rates
    if len(rates) < MIN_RUNS or rec.measured_tokens_per_second_per_gpu <= 0:
        return None
    ratios = sorted(rec.measured_tokens_per_second_per_gpu / r for r in rates)
    q = statistics.quantiles(ratios, n=10, method="inclusive")
    return q[0], q[-1]


@dataclass(frozen=True)
class _Narrowed:
    share: float
    low: float
    high: float
    runs: tuple[str, ...]
    cells: tuple[str, ...]


def narrowed(plan: Plan, low: float, high: float) -> _Narrowed:
    """The factor after calibration: phases with a record of ≥ 3 run rates take its spread."""
    pools = {p.name: p for p in plan.pools}
    total = sum(ph.gpu_hours for ph in plan.phases)
    share = lo = hi = 0.0
    runs: set[str] = set()
    cells: list[str] = []
    for ph in plan.phases:
        pool = pools.get(ph.pool)
        if not ph.calibrated or pool is None or total <= 0 or ph.gpu_hours <= 0:
            continue
        rec = next((c for c in plan.calibration if c.phase == ph.name and c.gpu == pool.gpu
                    and ph.precision in c.applied_to), None)
        spread = run_spread(rec) if rec is not None else None
        if rec is None or spread is None:
            continue
        s = ph.gpu_hours / total
        share += s
        lo += s * spread[0]
        hi += s * spread[1]
        runs.update(rec.runs)
        cells.append(f"{ph.name} on {pool.gpu} {factor_text(*spread)}")
    share = min(share, 1.0)
    return _Narrowed(share, (1 - share) * low + lo, (1 - share) * high + hi,
                     tuple(sorted(runs)), tuple(cells))


def time_cost(plan: Plan) -> Decimal:
    """The part of the total billed by the hour: instances, boot disks, CPU pools and
    per-hour other costs."""
    out = Decimal(plan.compute_cost_usd) + Decimal(plan.disk_cost_usd)
    if plan.cpu_cost_usd is not None:
        out += Decimal(plan.cpu_cost_usd)
    for item in plan.other_costs or []:
        if item.basis == "per_hour":
            out += Decimal(item.cost_usd)
    return out


def factor_text(lo: float, hi: float) -> str:
    """``×0.82–1.35``: multipliers to three decimals, trailing zeros dropped."""
    return f"×{_n(lo)}–{_n(hi)}"


def _n(x: float) -> str:
    return f"{x:.3f}".rstrip("0").rstrip(".")


_x = factor_text


def uncertainty_of(plan: Plan) -> Uncertainty:
    """The interval of ``plan`` from its own figures and the stored fit."""
    iv = model_interval(plan.method)
    n = narrowed(plan, iv.low, iv.high)
    timed = time_cost(plan)
    fixed = Decimal(plan.total_cost_usd) - timed
    total = [usd(float(fixed) + float(timed) * f) for f in (n.low, n.high)]
    pct = f"{100 * iv.level:.0f} %"
    basis = (f"{pct} interval of the demand model for {plan.method}: {_x(iv.low, iv.high)} "
             f"(family {iv.family}, {iv.cases} cases: {iv.basis})")
    if n.runs:
        basis += (f"; calibration from {len(n.runs)} ledger runs narrows the {pct} interval "
                  f"from {_x(iv.low, iv.high)} to {_x(n.low, n.high)} (their q10–q90: "
                  f"{', '.join(n.cells)}; {100 * n.share:.0f} % of the GPU-hours)")
    basis += (f"; the makespan and the time-billed cost ${timed} (compute, boot disks, CPU "
              f"pools, per-hour other costs) {_x(n.low, n.high)}; storage, network and fixed "
              f"or per-sample other costs (${fixed}) unchanged")
    return Uncertainty(
        level=iv.level, total_cost_usd=total,
        # from the makespan as the plan writes it (12 significant digits), so a last-bit
        # difference in the search's arithmetic cannot tip the product's rounding
        makespan_hours=[round_float(plan.makespan_hours) * f for f in (n.low, n.high)],
        factor=[n.low, n.high], model_factor=[iv.low, iv.high], family=iv.family,
        cases=iv.cases, time_cost_usd=str(timed), calibrated_share=n.share,
        calibration_runs=len(n.runs), fit=fit_digest(), basis=basis)


def with_uncertainty(plan: Plan) -> Plan:
    """``plan`` as schema 8, with its interval."""
    return plan.model_copy(update={"schema_version": max(plan.schema_version,
                                                         UNCERTAINTY_SCHEMA),
                                   "uncertainty": uncertainty_of(plan)})
