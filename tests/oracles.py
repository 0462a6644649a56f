"""Reference implementations of ptplan's cost formulas, written from their documentation and
the providers' published billing rules, not from the package's code.

They import only data types (``ptplan.providers.base``: Offer, StorageTier, EgressRate; the spec
model) and never a costing function of the package, so a bug in the package's formulas cannot
move both sides of a comparison. Each function cites the rule it restates.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from ptplan.providers.base import EgressRate, Offer, StorageTier

HOURS_PER_MONTH = 730.0
"""AWS and GCP bill storage per GB-month of 730 h (8,760 h / 12)."""
HOURS_PER_YEAR = 8760.0
"""AWS: a 1-year reservation term is 31,536,000 s = 8,760 h (3 years: 26,280 h)."""
ACCESS = {"ms": 0, "minutes": 1, "hours": 2}


# ---- spot overhead (docs: docs/planner.md "Capacity", candidates module docstring) -----

def stateless_effective(lam: float, lost_min: float, restart_min: float) -> float:
    """A stateless worker (rollout, scoring) loses the work in flight and restarts at each
    interruption: useful share 1 − λ·(lost + restart) (hours)."""
    return 1.0 - lam * (lost_min + restart_min) / 60.0


def gang_effective(lams: Iterable[float], ckpt_min: float, restart_min: float) -> float:
    """A gang (the update pool) stops whenever any node is interrupted: with Λ the sum of the
    nodes' rates, Young's checkpoint interval √(2C/Λ) costs √(2CΛ) of the time and each restart
    RΛ: useful share 1 − √(2CΛ) − RΛ (C, R in hours)."""
    big = sum(lams)
    c, r = ckpt_min / 60.0, restart_min / 60.0
    return 1.0 - math.sqrt(2.0 * c * big) - r * big


# ---- compute -----------------------------------------------------------------------------------

def pool_hourly(allocs: Iterable[tuple[int, Offer]]) -> float:
    """A pool's $/h: Σ nodes × the offer's catalog price."""
    return sum(n * o.usd_per_hour for n, o in allocs)


def cents(x: float) -> str:
    """Money as the plan prints it: USD to the cent, half up."""
    from decimal import ROUND_HALF_UP, Decimal

    return str(Decimal(repr(float(x))).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))


# ---- storage (costs/storage.py docstring: the classes and their lifetimes) ----------------------

@dataclass(frozen=True)
class RefClass:
    name: str
    access: str
    objects: tuple[tuple[float, float], ...]
    """(GB, lifetime in hours) of every object."""
    retrieval_gb: float = 0.0


def checkpoint_classes(*, steps: int, every: int, run_hours: float, full_gb: float,
                       weights_gb: float, keep_hot: int, archive_every: int,
                       retention_days: float, metrics_days: float) -> list[RefClass]:
    """Checkpoints i = 1 … n (n = ⌊steps / every⌋) written at step i·every, i.e. at time
    D·i·every/steps. The last ``keep_hot`` are hot from their write to the end of the run and
    ``retention_days`` after; every earlier one is hot until ``keep_hot`` newer ones are written
    (keep_hot intervals), then, unless archived, retained ``retention_days``; every
    ``archive_every``-th checkpoint (i divisible by it) also has a weights-only archive copy
    kept ``metrics_days``, retrieved once."""
    n = steps // every
    if n == 0:
        return []
    d = run_hours
    k = min(keep_hot, n)
    ret = retention_days * 24.0
    written = {i: d * i * every / steps for i in range(1, n + 1)}
    interval = d * every / steps
    hot: list[tuple[float, float]] = []
    retained: list[tuple[float, float]] = []
    archived: list[tuple[float, float]] = []
    for i in range(1, n + 1):
        if i > n - k:
            hot.append((full_gb, d - written[i] + ret))
        else:
            hot.append((full_gb, k * interval))
            if i % archive_every:
                retained.append((full_gb, ret))
        if i % archive_every == 0:
            archived.append((weights_gb, metrics_days * 24.0))
    out = [RefClass("hot_checkpoints", "ms", tuple(hot))]
    if retained:
        out.append(RefClass("retained_checkpoints", "ms", tuple(retained)))
    if archived:
        out.append(RefClass("archived_checkpoints", "hours", tuple(archived),
                            retrieval_gb=weights_gb))
    return out


def class_on_tier(c: RefClass, tier: StorageTier) -> tuple[float, float]:
    """(billed GB-months, USD): each object is billed for its lifetime or the tier's minimum
    storage duration, whichever is longer, plus one retrieval of ``retrieval_gb``."""
    floor = tier.min_days * 24.0
    gbm = sum(gb * max(life, floor) for gb, life in c.objects) / HOURS_PER_MONTH
    return gbm, gbm * tier.usd_per_gb_month + c.retrieval_gb * tier.retrieval_usd_per_gb


def cheapest_tier(c: RefClass, tiers: Iterable[StorageTier]) -> tuple[str, float, float]:
    """(tier, GB-months, USD) of the cheapest tier fast enough for the class (ties: by name)."""
    scored = []
    for t in tiers:
        if ACCESS.get(t.access, 9) <= ACCESS[c.access]:
            gbm, usd = class_on_tier(c, t)
            scored.append((usd, t.tier, gbm))
    usd, name, gbm = min(scored)
    return name, gbm, usd


# ---- network (costs/network.py docstring: paths and flows) -------------------------------------

CONTINENT = {"us-": "na", "northamerica-": "na", "europe-": "eu", "eu-": "eu", "asia-": "asia",
             "ap-northeast": "asia"}


def path(src: tuple[str, str, str], dst: tuple[str, str, str]) -> str:
    if src[0] != dst[0]:
        return "internet"
    if src[1] != dst[1]:
        a = next((v for k, v in CONTINENT.items() if src[1].startswith(k)), "?")
        b = next((v for k, v in CONTINENT.items() if dst[1].startswith(k)), "?")
        return "inter_region" if a == b != "?" else "inter_continent"
    return "cross_zone" if src[2] and dst[2] and src[2] != dst[2] else "same_zone"


def rate(rows: Iterable[EgressRate], provider: str, p: str) -> float:
    """$/GB leaving ``provider`` on path ``p`` (inter_continent falls back to inter_region)."""
    table = {}
    for e in rows:
        table.setdefault((e.provider, e.path), e.usd_per_gb)
    if (provider, p) in table:
        return table[(provider, p)]
    if p == "inter_continent":
        return table.get((provider, "inter_region"), 0.0)
    return 0.0


def weight_sync_usd(nodes: int, steps: int, params_b: float, usd_per_gb: float) -> float:
    """Each rollout node receives the bf16 weights (params × 2 B) once per step."""
    return nodes * steps * params_b * 2.0 * usd_per_gb


# ---- reserved rates and reserve portfolio (docs/reserve.md; AWS reserved terms) ----------------

def effective_hourly(hourly: float, upfront: float, years: int) -> float:
    """An AWS reservation's effective rate: hourly + upfront / (years × 8,760 h)."""
    return hourly + upfront / (years * HOURS_PER_YEAR)


def horizon_unit_cost(weeks: int, term_years: int, hourly: float, upfront: float) -> float:
    """One committed node over a horizon of ``weeks`` weeks from now: paid for the hours of its
    term inside the horizon, at hourly + the upfront's share of the term."""
    paid = min(weeks * 168.0, term_years * HOURS_PER_YEAR)
    return paid * (hourly + upfront / (term_years * HOURS_PER_YEAR))


def portfolio_cost(bought: int, unit_cost: float, demand: list[float], on_demand: float,
                   held: list[float] | None = None, held_cost: float = 0.0) -> float:
    """One key, one scenario: committed nodes (held + bought) serve the weekly average demand,
    the rest runs on on-demand for 168 h a week."""
    held = held or [0.0] * len(demand)
    od = sum(max(0.0, d - bought - h) for d, h in zip(demand, held, strict=True)) * 168.0
    return bought * unit_cost + held_cost + od * on_demand
