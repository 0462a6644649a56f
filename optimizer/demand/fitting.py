"""Fitting the demand model's efficiency factors on published runs, with leave-one-out honesty.

Each case is decomposed once, with the unfitted model (:func:`ptplan.core.fit.identity_fit`),
into the seconds per step of each factor family on its pool. A family's factor divides its
time, and the per-step overhead adds to the update, so the prediction under any factors is a
closed form of that decomposition (:func:`predict`): the same arithmetic the demand model does
when the factors are stored (``tests/test_validation.py`` checks the two agree).

The fit minimises the confidence-weighted squared log error over the cases, with a weak prior
(ridge) pulling each log factor towards 0 (the physics as it stands), by cyclic golden-section
search: deterministic, no solver dependency. Leave-one-out: each case is predicted with the
factors fitted on the other cases. Intervals are the empirical 10th/90th percentiles of the
leave-one-out ratios reported ÷ predicted, at split-conformal levels (:func:`interval_of`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

FAMILIES = ("generation", "scoring", "update_rl", "update_sft", "update_sft_megatron",
            "update_offload")
"""Factor families, in parameter order; the last parameter is the per-step overhead."""
CONFIDENCE_WEIGHT = {"High": 1.0, "Medium": 0.7, "Low": 0.4}
"""Weight of a case's squared log error: the record's own uncertainty (its band)."""
RIDGE = 0.02
"""Prior weight on each squared log factor: a factor moves only as far as the cases push it."""
LOG_BOUNDS = (math.log(0.05), math.log(5.0))
"""A factor between 0.05 and 5: an efficiency, not a knob."""
OVERHEAD_BOUNDS = (0.0, 120.0)
"""Seconds per RL step of framework time outside the phases."""
MIN_FAMILY_CASES = 8
"""A job family gets its own interval only with at least this many cases; else the pooled one."""


@dataclass(frozen=True)
class Decomposed:
    """One case under the unfitted model: seconds per step of each family (times the
    family's factor applies to), the seconds no factor touches, and how the step is formed."""

    id: str
    family_seconds: tuple[tuple[str, str, float], ...]
    """(family, side, seconds): side is ``gen`` (rollout, eval) or ``rest`` (scoring, update)."""
    fixed_gen: float
    """Seconds on the generation side no factor touches (weight sync; a governed phase)."""
    fixed_rest: float
    mode: str
    overhead: bool
    """The job is rl/opd: the per-step overhead applies."""
    metric: str
    reported: float
    steps: int
    gpus: int
    checkpoint_seconds: float
    weight: float
    job_family: str


def predict(case: Decomposed, factors: dict[str, float], overhead: float) -> float:
    gen, rest = case.fixed_gen, case.fixed_rest
    for fam, side, secs in case.family_seconds:
        t = secs / factors.get(fam, 1.0)
        if side == "gen":
            gen += t
        else:
            rest += t
    if case.overhead:
        rest += overhead
    step = max(gen, rest) if case.mode == "async" else gen + rest
    if case.metric == "seconds_per_step":
        return step
    return (step * case.steps + case.checkpoint_seconds) * case.gpus / 3600.0


def _unpack(x: Sequence[float]) -> tuple[dict[str, float], float]:
    return {f: math.exp(v) for f, v in zip(FAMILIES, x[:-1], strict=True)}, float(x[-1])


def loss(cases: Sequence[Decomposed], x: Sequence[float]) -> float:
    factors, overhead = _unpack(x)
    err = sum(c.weight * math.log(predict(c, factors, overhead) / c.reported) ** 2
              for c in cases)
    return err + RIDGE * sum(v * v for v in x[:-1])


def _golden(f, lo: float, hi: float, iters: int = 40) -> float:
    g = (math.sqrt(5.0) - 1.0) / 2.0
    a, b = lo, hi
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(iters):
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = f(d)
    return (a + b) / 2.0


def fit(cases: Sequence[Decomposed], sweeps: int = 12) -> tuple[dict[str, float], float]:
    """Factors and overhead minimising :func:`loss` (cyclic coordinate golden-section)."""
    x = [0.0] * len(FAMILIES) + [0.0]
    used = {fam for c in cases for fam, _, _ in c.family_seconds}
    if not any(c.overhead for c in cases):
        used.discard("overhead")
    for _ in range(sweeps):
        for i in range(len(x)):
            name = FAMILIES[i] if i < len(FAMILIES) else "overhead"
            if i < len(FAMILIES) and name not in used:
                continue
            lo, hi = LOG_BOUNDS if i < len(FAMILIES) else OVERHEAD_BOUNDS

            def f(v: float, i: int = i) -> float:
                y = list(x)
                y[i] = v
                return loss(cases, y)

            x[i] = _golden(f, lo, hi)
    factors, overhead = _unpack(x)
    return {k: float(f"{v:.4g}") for k, v in factors.items()}, float(f"{overhead:.4g}")


def quantile(xs: Sequence[float], p: float) -> float:
    """Linear-interpolated empirical quantile (numpy's default method)."""
    return float(np.quantile(np.asarray(xs, dtype=float), p))


@dataclass(frozen=True)
class Result:
    factors: dict[str, float]
    overhead: float
    ratio: dict[str, float]
    """Case id → predicted ÷ reported with the factors fitted on every case."""
    loo_ratio: dict[str, float]
    """Case id → predicted ÷ reported with the factors fitted on the other cases."""
    intervals: dict[str, tuple[float, float, int]]
    """Job family (and ``all``) → (low, high, cases) multipliers of a prediction."""
    loo_covered: dict[str, bool]
    """Case id → its reported figure lies inside the interval built without it."""


def interval_of(residuals: Sequence[float], level: float = 0.8) -> tuple[float, float]:
    """The [low, high] multipliers that cover ``level`` of new cases: split-conformal order
    statistics of the n residuals, the k_lo-th and k_hi-th smallest with k_lo = ⌊(n + 1)·a⌋
    and k_hi = ⌈(n + 1)(1 − a)⌉, a = (1 − level)/2 (Vovk et al., *Algorithmic Learning in a
    Random World*, 2005; Lei et al., "Distribution-free predictive inference", JASA 2018, §2.2):
    the plain 10th/90th percentiles of n past errors cover a new case less than 80 % of the
    time when n is small. Where k falls outside 1..n (fewer than 9 residuals at 80 %) the
    sample's extreme is taken, and the interval is then narrower than conformal's."""
    xs = sorted(residuals)
    n = len(xs)
    tail = (1.0 - level) / 2.0
    k_lo = math.floor((n + 1) * tail + 1e-9)
    k_hi = math.ceil((n + 1) * (1.0 - tail) - 1e-9)
    return xs[min(max(k_lo, 1), n) - 1], xs[min(max(k_hi, 1), n) - 1]


def run(cases: Sequence[Decomposed], level: float = 0.8) -> Result:
    factors, overhead = fit(cases)
    ratio = {c.id: predict(c, factors, overhead) / c.reported for c in cases}
    loo: dict[str, float] = {}
    for c in cases:
        others = [o for o in cases if o.id != c.id]
        f_i, o_i = fit(others)
        loo[c.id] = predict(c, f_i, o_i) / c.reported
    resid = {c.id: 1.0 / loo[c.id] for c in cases}  # reported ÷ predicted
    fam_of = {c.id: c.job_family for c in cases}
    intervals: dict[str, tuple[float, float, int]] = {}
    lo, hi = interval_of(list(resid.values()), level)
    intervals["all"] = (lo, hi, len(cases))
    for fam in sorted(set(fam_of.values())):
        members = [r for k, r in resid.items() if fam_of[k] == fam]
        if len(members) >= MIN_FAMILY_CASES:
            lo, hi = interval_of(members, level)
            intervals[fam] = (lo, hi, len(members))
    covered: dict[str, bool] = {}
    for c in cases:
        fam = c.job_family if c.job_family in intervals else "all"
        pool = [r for k, r in resid.items() if k != c.id and (fam == "all" or fam_of[k] == fam)]
        lo, hi = interval_of(pool, level)
        covered[c.id] = lo <= resid[c.id] <= hi
    return Result(factors, overhead, ratio, loo, intervals, covered)
