"""The reserve purchase problem as data: products one can buy, demand classes, scenarios, risk.

Built by :func:`ptplan.reservations.purchase.build_problem`; solved by
:mod:`ptplan.reservations.milp`; re-checked without the solver by :mod:`ptplan.reservations.check`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ptplan.core.errors import InputError

HOURS_PER_WEEK = 168.0
HOURS_PER_YEAR = 8760.0
Key = tuple[str, str, str]
TOL = 1e-6


@dataclass(frozen=True)
class Risk:
    """CVaR at level ``alpha``; objective (1 − weight)·E[cost] + weight·CVaR_alpha[cost]."""

    alpha: float
    weight: float

    @staticmethod
    def parse(text: str | None) -> Risk | None:
        if text is None or text in ("", "none"):
            return None
        parts = text.split(":")
        bad = InputError(f"--risk: {text!r} is not understood; use cvar:ALPHA or "
                         "cvar:ALPHA:WEIGHT with 0 < ALPHA < 1 and 0 < WEIGHT <= 1, e.g. cvar:0.9")
        if parts[0] != "cvar" or len(parts) not in (2, 3):
            raise bad
        try:
            alpha = float(parts[1])
            weight = float(parts[2]) if len(parts) == 3 else 0.5
        except ValueError:
            raise bad from None
        if not (0 < alpha < 1) or not (0 < weight <= 1):
            raise bad
        return Risk(alpha, weight)


@dataclass(frozen=True)
class ProductRow:
    name: str
    key: int
    term_years: int
    usd_per_hour: float
    upfront_usd: float
    source: str
    assumption: bool
    active: np.ndarray
    """Share of each week inside the term (1 … 1, then a partial week, then 0)."""
    buy_week: int = 0
    """Week of purchase: 0 (now) or a later quarter's first week (``--ladder quarterly``)."""

    @property
    def paid_hours(self) -> float:
        return float(self.active.sum()) * HOURS_PER_WEEK

    @property
    def term_hours(self) -> float:
        return HOURS_PER_YEAR * self.term_years

    @property
    def unit_cost_usd(self) -> float:
        """What one node costs the horizon (recurring + the upfront's share)."""
        return self.paid_hours * (self.usd_per_hour + self.upfront_usd / self.term_hours)

    @property
    def effective_usd_per_hour(self) -> float:
        return self.usd_per_hour + self.upfront_usd / self.term_hours


SPEND_KINDS = ("ec2_instance_savings_plan", "compute_savings_plan", "flexible_cud")
"""Spend commitments, in the order a provider applies them after instance reservations."""


@dataclass(frozen=True)
class SpendRow:
    """A spend commitment ($/h paid whether used or not) bought in ``buy_week``.

    ``rates[k] = (c, s)``: one node-hour of key k consumes c dollars of the commitment and
    replaces s dollars of on-demand spend (AWS Savings Plans: c = the plan's rate for the
    instance type, s = its on-demand price; GCP flexible CUDs: s = the eligible part of the
    price, c = s × (1 − discount)). ``step`` is the commitment's granularity in $/h."""

    name: str
    kind: str
    provider: str
    term_years: int
    rates: dict[int, tuple[float, float]]
    step: float
    source: str
    assumption: bool
    active: np.ndarray
    buy_week: int = 0
    scope: str = ""
    """Which usage it may cover, in words (``aws p5/us-east-1``, ``every aws region``)."""

    @property
    def rank(self) -> tuple[int, int, str]:
        """Order of application: instance SPs before compute SPs, longer terms first."""
        return (SPEND_KINDS.index(self.kind), -self.term_years, self.name)

    @property
    def paid_hours(self) -> float:
        return float(self.active.sum()) * HOURS_PER_WEEK

    def order(self, classes: list[DemandClass], on_demand: list[float | None]) -> list[int]:
        """Classes this commitment may cover, in the order it covers them: most saved per
        commitment dollar first (on AWS, the highest discount first, as AWS applies a plan)."""
        out = []
        for j, c in enumerate(classes):
            if c.key not in self.rates:
                continue
            saving = self.saving(c, on_demand[c.key] or 0.0)
            if saving > 0:
                out.append((-saving / self.rates[c.key][0], j))
        return [j for _, j in sorted(out)]

    def saving(self, c: DemandClass, od: float) -> float:
        """USD saved per node-hour of class c covered: its alternative (on-demand, or spot
        when cheaper) minus the on-demand spend the commitment leaves to pay."""
        _, saved = self.rates[c.key]
        alt = od if c.spot_usd_per_hour is None else min(od, c.spot_usd_per_hour)
        return alt - (od - saved)


@dataclass
class DemandClass:
    key: int
    spot_usd_per_hour: float | None
    """Per useful node-hour; None: this demand may not run on spot."""
    nodes: np.ndarray
    """(S, W) average concurrent nodes."""
    sources: set[str] = field(default_factory=set)


@dataclass
class Problem:
    name: str
    weeks: int
    scenarios: list[str]
    weights: list[float]
    multipliers: list[float]
    prob: np.ndarray
    keys: list[Key]
    on_demand: list[float | None]
    classes: list[DemandClass]
    products: list[ProductRow]
    existing_nodes: np.ndarray
    """(K, W) nodes held today, until they expire."""
    existing_cost_usd: float
    risk: Risk | None
    warnings: list[str] = field(default_factory=list)
    defaults: list[str] = field(default_factory=list)
    projects: list[dict[str, Any]] = field(default_factory=list)
    planning_seconds: float = 0.0
    distinct_plans: int = 0
    spend: list[SpendRow] = field(default_factory=list)
    """Spend commitments, in the order they are applied (:attr:`SpendRow.rank`)."""


def week_profile(weeks: int, t0_hours: float, hours: float) -> np.ndarray:
    """Hours of [t0, t0 + hours) inside each week, ÷ 168 (the share of the week)."""
    edges = np.arange(weeks + 1) * HOURS_PER_WEEK
    lo = np.clip(edges[:-1], t0_hours, t0_hours + hours)
    hi = np.clip(edges[1:], t0_hours, t0_hours + hours)
    return (hi - lo) / HOURS_PER_WEEK
