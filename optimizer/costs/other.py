"""Costs beyond compute (``other_costs:`` in the spec): fixed lines, human review per sample and
operations per hour of the run. They do not depend on where the run is placed, only on its
length, so the planner adds ``fixed + per_hour × run hours`` to every option's cost (the exact
search and the MILP's budget row see them like storage); the plan lists each line and the
verifier recomputes them from the spec and the plan's makespan (docs/spec.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from ptplan.demand.model import Demand


@dataclass(frozen=True)
class OtherLine:
    name: Literal["data_collection", "annotation", "ab_test", "human_review", "ops"]
    basis: Literal["fixed", "per_sample", "per_hour"]
    quantity: float
    """1 (fixed), samples, or hours (filled in with the run's hours)."""
    usd_per_unit: float

    def cost(self, hours: float) -> float:
        q = hours if self.basis == "per_hour" else self.quantity
        return q * self.usd_per_unit


@dataclass(frozen=True)
class OtherCostModel:
    lines: tuple[OtherLine, ...]

    @property
    def fixed(self) -> float:
        return sum(ln.cost(0.0) for ln in self.lines if ln.basis != "per_hour")

    @property
    def per_hour(self) -> float:
        return sum(ln.usd_per_unit for ln in self.lines if ln.basis == "per_hour")

    def cost(self, run_hours):  # type: ignore[no-untyped-def]
        """fixed + per_hour × D for run time(s) D (an array in, an array out)."""
        return self.fixed + self.per_hour * np.asarray(run_hours, dtype=float)


def reviewed_samples(demand: Demand) -> int:
    """``human_review_samples``, else every evaluated sample (eval runs × prompts × samples)."""
    spec = demand.spec
    o = spec.other_costs
    assert o is not None
    if o.human_review_samples is not None:
        return o.human_review_samples
    if spec.eval is None:
        return 0
    return demand.eval_runs * spec.eval.prompts * spec.eval.samples_per_prompt


def other_cost_model(demand: Demand) -> OtherCostModel | None:
    """The spec's ``other_costs`` as lines (None without the section)."""
    o = demand.spec.other_costs
    if o is None:
        return None
    fixed: tuple[tuple[Literal["data_collection", "annotation", "ab_test"], float], ...] = (
        ("data_collection", o.data_collection_usd), ("annotation", o.annotation_usd),
        ("ab_test", o.ab_test_usd))
    lines = [OtherLine(name, "fixed", 1.0, usd) for name, usd in fixed if usd > 0]
    if o.human_review_usd_per_sample > 0:
        lines.append(OtherLine("human_review", "per_sample", float(reviewed_samples(demand)),
                               o.human_review_usd_per_sample))
    if o.ops_usd_per_hour > 0:
        lines.append(OtherLine("ops", "per_hour", 0.0, o.ops_usd_per_hour))
    return OtherCostModel(tuple(lines))
