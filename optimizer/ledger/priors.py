"""Forgetting priors from the recorded runs (``ptplan compare --ledger URL``; docs/compare.md).

Per method, over the ledger's own runs of that method (a repair run is rework, not a run of
its own) whose general-capability results were recorded (``--general``: without them a run
can neither be counted as forgetting nor as not):

* ``p_forgetting`` = forgot ÷ n, "forgot" being the review's ``forgetting`` flag (the mean
  general change below −``forgetting_points``, :mod:`ptplan.ledger.review`);
* ``rework_fraction`` = Σ rework of the runs that forgot ÷ Σ their own actual cost: the cost
  of a forgetting event as a fraction of the run. A run's rework here is its whole repair
  chain: the runs that name it in ``repairs``, the runs that repair those, and so on (the
  review books a repair of a repair to the repair run it fixes; the event that started the
  chain is what a prior prices). ``None`` when no run forgot (then p = 0 and no
  rework was ever observed: nothing is invented in its place).

Model family first: the runs of the candidate's family (``model_family`` as recorded by ``runs
record --model-family``) when at least ``min_runs`` of them count; otherwise the method's runs
over every family, and the prior says so. Money stays in integer cents until the ratio.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from ptplan.ledger.records import RunRecord
from ptplan.ledger.review import RunRow, Thresholds, rows

MIN_FAMILY_RUNS = 3
"""Family-level priors need at least this many counted runs of the method on the family."""


@dataclass(frozen=True)
class Observed:
    method: str
    level: str
    """``family`` (the family's runs) or ``method`` (every family's)."""
    family: str | None
    """The family the runs are of (``None`` at method level)."""
    n: int
    """Own runs of the method (and family) with general results."""
    forgot: int
    rework_cents: int
    """Σ cost of the repair chains of the runs that forgot."""
    forgot_cents: int
    """Σ own actual cost of the runs that forgot."""
    runs: tuple[str, ...]
    """The counted runs' ids."""
    fallback: str | None = None
    """Why the family level was not used (``None``: it was, or no family was asked)."""

    @property
    def p_forgetting(self) -> float:
        return self.forgot / self.n

    @property
    def rework_fraction(self) -> float | None:
        return self.rework_cents / self.forgot_cents if self.forgot_cents > 0 else None

    def as_json(self) -> dict[str, Any]:
        return {"level": self.level, "family": self.family, "n": self.n, "forgot": self.forgot,
                "p_forgetting": self.p_forgetting, "rework_fraction": self.rework_fraction,
                "rework_usd_of_forgetting_runs": f"{self.rework_cents / 100:.2f}",
                "cost_usd_of_forgetting_runs": f"{self.forgot_cents / 100:.2f}",
                "runs": list(self.runs), "fallback": self.fallback}


def _counted(rs: list[RunRow], method: str, family: str | None) -> list[RunRow]:
    return [r for r in rs if r.run.method == method and not r.run.repairs
            and r.general is not None and (family is None or r.run.model_family == family)]


def chain_cents(rows_by_id: dict[str, RunRow], run_id: str) -> int:
    """Σ actual cost of the runs that repair ``run_id``, directly or through other repairs."""
    total, todo, seen = 0, [run_id], {run_id}
    while todo:
        for child in rows_by_id[todo.pop()].reworked_by:
            if child not in seen:
                seen.add(child)
                total += rows_by_id[child].actual
                todo.append(child)
    return total


def _observed(rs: list[RunRow], by_id: dict[str, RunRow], method: str, family: str | None,
              th: Thresholds, level: str, fallback: str | None) -> Observed:
    forgot = [r for r in rs if "forgetting" in r.flags(th)]
    return Observed(method, level, family, len(rs), len(forgot),
                    sum(chain_cents(by_id, r.run.id) for r in forgot),
                    sum(r.actual for r in forgot),
                    tuple(sorted(r.run.id for r in rs)), fallback)


class Priors:
    """The ledger's runs, reviewed once; priors per (method, family)."""

    def __init__(self, runs: list[RunRecord], th: Thresholds = Thresholds(),
                 min_runs: int = MIN_FAMILY_RUNS) -> None:
        self.runs = runs
        self.rows = rows(runs)
        self.by_id = {r.run.id: r for r in self.rows}
        self.th = th
        self.min_runs = min_runs

    def observed(self, method: str, family: str | None) -> Observed | None:
        """The family's prior if it has ``min_runs`` counted runs, else the method's over every
        family (saying why), else ``None`` (no counted run of the method at all)."""
        fallback = None
        if family is not None:
            fam = _counted(self.rows, method, family)
            if len(fam) >= self.min_runs:
                return _observed(fam, self.by_id, method, family, self.th, "family", None)
            fallback = (f"{len(fam)} {method} run(s) with general results on {family} "
                        f"(fewer than {self.min_runs}): method-level prior over every family")
        every = _counted(self.rows, method, None)
        if not every:
            return None
        return _observed(every, self.by_id, method, None, self.th, "method", fallback)

    def families_of_shape(self, shape: tuple[float, int, int]) -> list[str]:
        """The model families of recorded runs whose stored spec trains a model of this shape
        (``params_b``, ``layers``, ``hidden_size``)."""
        out = {r.model_family for r in self.runs if r.spec and spec_shape(r.spec) == shape}
        return sorted(out)


def spec_shape(text: str) -> tuple[float, int, int] | None:
    """(params_b, layers, hidden_size) of a spec's text as the ledger stores it (None when it
    does not say)."""
    try:
        doc = yaml.safe_load(text)
        m = doc["model"]
        if isinstance(m, dict) and "params_b" not in m and isinstance(m.get("preset"), str):
            from ptplan.spec.presets import fill

            m = fill(m)[0]  # the preset's shape under the fields given
        return (float(m["params_b"]), int(m["layers"]), int(m["hidden_size"]))
    except (yaml.YAMLError, TypeError, KeyError, ValueError):
        return None
