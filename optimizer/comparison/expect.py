"""The arithmetic of ``ptplan compare``, on numbers only (no planning here).

A candidate costs C = its planned run + the data-generation job that fed it (``data.generated_by``)
+ their other costs (``other_costs:``, issue #25).
With probability p the run forgets and the rework R is paid once (the rework is assumed not to
forget again: a recovery from a known-good checkpoint, docs/compare.md). So its cost is a
two-point distribution: C with probability 1 − p, C + R with probability p, and

* expected cost       E = C + p·R
* P90 (0.9 quantile)  C if p ≤ 0.1, else C + R   (F(C) = 1 − p ≥ 0.9 iff p ≤ 0.1)
* break-even p*       the p at which E equals the best other candidate's expected cost E*
                      (the others at their priors, or at p = 0 without priors):
                      C + p*·R = E*  ⇒  p* = (E* − C) / R.
  The candidate is the cheapest in expectation while p < p*; p* < 0: dearer even at p = 0;
  p* ≥ 1: cheapest at any p. Without a prior, R is one more run (``rework_basis``).
"""

from __future__ import annotations

from dataclasses import dataclass

TAIL = 0.1
"""1 − 0.9: the P90 includes the rework once its probability exceeds this."""


@dataclass(frozen=True)
class Candidate:
    name: str
    method: str
    run_usd: float
    """The planned run's total."""
    data_usd: float = 0.0
    """The data-generation job's planned total (0 without ``data.generated_by``)."""
    p: float | None = None
    """Prior forgetting probability (None: no prior)."""
    rework_usd: float | None = None
    """Rework cost from the prior (None: no prior; the break-even then uses one run)."""
    other_usd: float = 0.0
    """The spec's ``other_costs`` (the run's and its data-generation job's; issue #25): in C,
    not in ``run_usd`` or ``data_usd``."""
    recurring_usd: float = 0.0
    """The part of the run's other costs one more run pays again (human review, ops per
    hour; data collection, annotation and the A/B test are bought once)."""

    @property
    def planned_usd(self) -> float:
        return self.run_usd + self.data_usd + self.other_usd

    @property
    def redo_usd(self) -> float:
        """One more run: its compute, storage, network and CPU pools and the recurring other
        costs."""
        return self.run_usd + self.recurring_usd

    @property
    def rework_for_breakeven(self) -> float:
        return self.rework_usd if self.rework_usd is not None else self.redo_usd

    def expected(self, p: float | None = None) -> float:
        """E(p) = C + p·R (at the prior p, or at p = 0 without one)."""
        q = self.p if p is None else p
        if q is None or q == 0:
            return self.planned_usd
        return self.planned_usd + q * self.rework_for_breakeven

    @property
    def p90(self) -> float | None:
        if self.p is None:
            return None
        if self.p <= TAIL:
            return self.planned_usd
        if self.rework_usd is None:  # (a ledger prior with p > 0 always observed a rework)
            return None
        return self.planned_usd + self.rework_usd


def break_even(cands: list[Candidate], i: int) -> float | None:
    """p* of candidate ``i`` against the best other candidate's expected cost (None: alone, or
    a rework of $0)."""
    others = [c.expected() for j, c in enumerate(cands) if j != i]
    r = cands[i].rework_for_breakeven
    if not others or r <= 0:
        return None
    return (min(others) - cands[i].planned_usd) / r


def describe(p_star: float | None) -> str:
    if p_star is None:
        return "n/a"
    if p_star < 0:
        return f"never (p* = {p_star:.3f} < 0)"
    if p_star >= 1:
        return f"any p (p* = {p_star:.3f} >= 1)"
    return f"p < {p_star:.3f}"
