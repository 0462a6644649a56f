"""``ptplan compare``: plan each candidate (and the jobs its cost includes) and lay the whole
costs side by side (:mod:`ptplan.comparison.expect`). Every plan here is a verified plan of
:func:`ptplan.planner.api.plan`."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ptplan.comparison.expect import Candidate, break_even, describe
from ptplan.comparison.priors import (
    LedgerLookup,
    LedgerPrior,
    RiskFile,
    load_risk,
    prior_for,
    rework_spec_path,
)
from ptplan.core.errors import InputError, PlannerError
from ptplan.core.yamlio import quoted
from ptplan.planfile.schema import Plan
from ptplan.spec.project import ProjectSpec, load_spec

COMPARE_SCHEMA_VERSION = 3
"""2: other costs; 3: each candidate's ``interval`` (its plans' 80 % intervals, summed)."""
NO_PRIORS = ("no priors: no risk file (--risk FILE) and no ledger (--ledger URL); forgetting "
             "probabilities are not shown as facts, only the break-even probability of each "
             "candidate (rework = one more run)")

Planner = Callable[[ProjectSpec], Plan]


def generated_by(spec: ProjectSpec, spec_path: str | Path) -> Path | None:
    """The data-generation spec an SFT spec names (``data.generated_by``, relative to it)."""
    ref = spec.data.generated_by
    if ref is None:
        return None
    p = Path(os.path.normpath(Path(spec_path).parent / ref))
    if not p.is_file():
        raise InputError(f"spec {quoted(spec_path)}: data.generated_by {quoted(ref)} not found "
                         f"(looked at {quoted(p)}); give a spec path relative to this spec")
    return p


def load_generator(spec: ProjectSpec, spec_path: str | Path) -> tuple[Path, ProjectSpec] | None:
    p = generated_by(spec, spec_path)
    if p is None:
        return None
    gen = load_spec(str(p))
    if gen.method != "generate":
        raise InputError(f"spec {quoted(spec_path)}: data.generated_by names {quoted(p)}, a "
                         f"method {gen.method} spec; name a method: generate spec")
    return p, gen


class Plans:
    """Plans by spec path (a generator shared by two candidates is planned once)."""

    def __init__(self, planner: Planner) -> None:
        self.planner = planner
        self.done: dict[str, Plan] = {}

    def of(self, path: Path, spec: ProjectSpec) -> Plan:
        key = str(path.resolve())
        if key not in self.done:
            try:
                self.done[key] = self.planner(spec)
            except PlannerError as exc:
                raise type(exc)(f"{path}: {exc}") from None
        return self.done[key]


ONCE = ("data_collection", "annotation", "ab_test")
"""Other-cost lines bought once for the goal: one more run (the rework) does not pay them."""


def other_usd(plan: Plan | None) -> float:
    """The plan's other costs (``other_costs:``; 0 without the section)."""
    return 0.0 if plan is None or plan.other_cost_usd is None else float(plan.other_cost_usd)


def recurring_usd(plan: Plan) -> float:
    """The plan's other costs that one more run pays again (human review, ops per hour)."""
    return sum(float(o.cost_usd) for o in plan.other_costs or [] if o.name not in ONCE)


def other_lines(run: Plan, gen: Plan | None) -> list[dict[str, Any]]:
    return [{"job": job, "name": o.name, "basis": o.basis, "quantity": o.quantity,
             "usd_per_unit": o.usd_per_unit, "cost_usd": float(o.cost_usd)}
            for job, p in (("run", run), ("data_generation", gen)) if p is not None
            for o in p.other_costs or []]


def phase_share(plan: Plan, phase: str) -> float:
    total = float(plan.total_cost_usd)
    cost = sum(float(ph.cost_usd) for ph in plan.phases if ph.name == phase)
    return cost / total if total > 0 else 0.0


def _risk_prior(risk: RiskFile, risk_path: str, spec: ProjectSpec, run: Plan,
                plans: Plans) -> tuple[dict[str, Any] | None, float | None, float | None]:
    """The risk file's prior of a candidate as JSON, its p and its rework cost."""
    prior, found = prior_for(risk, spec.name, spec.method)
    if prior is None:
        return None, None, None
    if prior.rework.spec is not None:
        rpath = rework_spec_path(risk_path, prior.rework)
        rplan = plans.of(rpath, load_spec(str(rpath)))
        rework_usd = float(rplan.total_cost_usd)
        rework = {"kind": "spec", "spec": str(rpath), "cost_usd": rework_usd,
                  "makespan_hours": rplan.makespan_hours}
    else:
        assert prior.rework.fraction_of_run is not None
        rework_usd = prior.rework.fraction_of_run * redo_usd(run)
        rework = {"kind": "fraction_of_run", "fraction": prior.rework.fraction_of_run,
                  "cost_usd": rework_usd}
    return ({"origin": "risk_file", "p_forgetting": prior.p_forgetting, "source": prior.source,
             "from": found, "rework": rework}, prior.p_forgetting, rework_usd)


def redo_usd(run: Plan) -> float:
    """One more run: the plan's total less the other costs bought once (:data:`ONCE`)."""
    return float(run.total_cost_usd) - other_usd(run) + recurring_usd(run)


def _ledger_prior(lp: LedgerPrior, run: Plan) -> tuple[dict[str, Any], float, float | None]:
    rework_usd = (None if lp.rework_fraction is None
                  else lp.rework_fraction * redo_usd(run))
    rework = (None if lp.rework_fraction is None else
              {"kind": "ledger_ratio", "fraction": lp.rework_fraction, "cost_usd": rework_usd})
    return ({"origin": "ledger", "p_forgetting": lp.p_forgetting, "source": lp.source,
             "from": lp.found, "rework": rework, "counts": lp.counts},
            lp.p_forgetting, rework_usd)


def compare(spec_paths: list[str], planner: Planner, risk_path: str | None = None,
            progress: Callable[[int, int, str], None] | None = None,
            ledger: LedgerLookup | None = None, ledger_label: str = "") -> dict[str, Any]:
    """The comparison report (JSON-ready; docs/compare.md). ``ledger``: the run ledger's prior
    of a candidate; where the risk file also has one, the risk file's wins (said in a note)."""
    if len(spec_paths) < 2:
        raise InputError("compare: give at least two specs (the candidate methods)")
    risk: RiskFile | None = load_risk(risk_path) if risk_path is not None else None
    specs = [(Path(p), load_spec(p)) for p in spec_paths]
    names = [s.name for _, s in specs]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise InputError(f"compare: two candidates share the name {dup[0]!r}; give each spec "
                         "its own name")
    plans = Plans(planner)
    rows: list[dict[str, Any]] = []
    cands: list[Candidate] = []
    notes: list[str] = []
    others: list[list[dict[str, Any]] | None] = []
    for n, (path, spec) in enumerate(specs):
        if progress is not None:
            progress(n, len(specs), f"compare: planning {spec.name}")
        run = plans.of(path, spec)
        gen = load_generator(spec, path)
        gen_plan = plans.of(*gen) if gen is not None else None
        prior: dict[str, Any] | None = None
        p: float | None = None
        rework_usd: float | None = None
        if risk is not None:
            assert risk_path is not None
            prior, p, rework_usd = _risk_prior(risk, risk_path, spec, run, plans)
        lp: LedgerPrior | None = None
        if ledger is not None:
            lp, why = ledger(spec)
            notes += [f"{spec.name}: {w}" for w in why]
        if prior is not None and lp is not None:
            notes.append(f"{spec.name}: the risk file's prior ({prior['from']}, P(forget) "
                         f"{prior['p_forgetting']:g}) wins over the ledger's ({lp.found}, "
                         f"P(forget) {lp.p_forgetting:.3f}, {lp.source})")
        elif lp is not None:
            prior, p, rework_usd = _ledger_prior(lp, run)
        if prior is None and (risk is not None or ledger is not None):
            where = " or ".join(w for w, on in (
                (f"the risk file (no specs.{spec.name}, no methods.{spec.method})",
                 risk is not None),
                (f"the ledger (no {spec.method} run with general results)", ledger is not None))
                if on)
            notes.append(f"{spec.name}: no prior in {where}; only its break-even is shown")
        cand = Candidate(spec.name, spec.method, float(run.total_cost_usd) - other_usd(run),
                         float(gen_plan.total_cost_usd) - other_usd(gen_plan)
                         if gen_plan is not None else 0.0,
                         p, rework_usd, other_usd(run) + other_usd(gen_plan),
                         recurring_usd(run))
        cands.append(cand)
        others.append(other_lines(run, gen_plan)
                      if run.other_costs is not None or (gen_plan is not None and
                                                         gen_plan.other_costs is not None)
                      else None)
        rows.append({
            "name": spec.name, "spec": str(path), "method": spec.method,
            "run_cost_usd": cand.run_usd, "run_hours": run.makespan_hours,
            "data_generation": None if gen is None or gen_plan is None else {
                "spec": str(gen[0]), "cost_usd": cand.data_usd,
                "makespan_hours": gen_plan.makespan_hours},
            "planned_cost_usd": cand.planned_usd,
            "hours": run.makespan_hours + (gen_plan.makespan_hours if gen_plan else 0.0),
            "eval_share": phase_share(run, "eval"),
            "deadline_hours": spec.sla.deadline_hours, "budget_usd": spec.budget.max_usd,
            "prior": prior,
            "expected_cost_usd": cand.expected() if prior is not None else None,
            "p90_cost_usd": cand.p90,
            "interval": _interval(run, gen_plan),
        })
    if progress is not None:
        progress(len(specs), len(specs), "compare: done")
    if any(o is not None for o in others):  # only then: comparisons without stay as they were
        for row, cand, lines in zip(rows, cands, others, strict=True):
            row["other_cost_usd"] = cand.other_usd
            row["other_costs"] = lines or []
    for i, row in enumerate(rows):
        p_star = break_even(cands, i)
        row["break_even_p"] = p_star
        row["break_even"] = describe(p_star)
        row["break_even_rework_usd"] = cands[i].rework_for_breakeven
        row["break_even_rework_basis"] = ("prior" if cands[i].rework_usd is not None
                                          else "one more run")
    _same_goal(specs, notes)
    have = [r for r in rows if r["expected_cost_usd"] is not None]
    key = "expected_cost_usd" if len(have) == len(rows) else "planned_cost_usd"
    ranking = [r["name"] for r in sorted(rows, key=lambda r: (r[key], r["name"]))]
    sources = [s for s, on in ((f"risk file {risk_path}", risk is not None),
                               (f"ledger {ledger_label}", ledger is not None)) if on]
    statement = None
    if not sources:
        statement = NO_PRIORS
    elif not have:
        statement = ("no priors: neither " if len(sources) > 1 else "no priors: ") + \
            " nor ".join(sources) + " gives one for any candidate; only the break-even " \
            "probabilities are shown (rework = one more run)"
    return {"compare_schema_version": COMPARE_SCHEMA_VERSION,
            "priors": "; ".join(sources) or None,
            "statement": statement,
            "ranked_by": key, "ranking": ranking, "candidates": rows, "notes": notes}


def _interval(run: Plan, gen: Plan | None) -> dict[str, Any] | None:
    """The candidate's 80 % interval: its run's and its data generation's plan intervals
    added end to end (``planned_cost_usd`` and ``hours`` are their sums)."""
    plans = [p for p in (run, gen) if p is not None]
    if any(p.uncertainty is None for p in plans):
        return None
    us = [p.uncertainty for p in plans if p.uncertainty is not None]
    return {"level": us[0].level,
            "planned_cost_usd": [round(sum(float(u.total_cost_usd[i]) for u in us), 2)
                                 for i in (0, 1)],
            "hours": [sum(u.makespan_hours[i] for u in us) for i in (0, 1)]}


def _same_goal(specs: list[tuple[Path, ProjectSpec]], notes: list[str]) -> None:
    """Candidates for one goal train the same model under the same deadline and budget."""
    shapes = {s.model.model_dump_json(include={"params_b", "layers", "hidden_size"})
              for _, s in specs}
    if len(shapes) > 1:
        notes.append("the candidates train models of different shapes: check that they serve "
                     "the same goal")
    for what, get in (("deadline", lambda s: s.sla.deadline_hours),
                      ("budget", lambda s: s.budget.max_usd)):
        values = {get(s) for _, s in specs}
        if len(values) > 1:
            notes.append(f"the candidates' {what}s differ ("
                         + ", ".join(f"{s.name}: {get(s)}" for _, s in specs)
                         + "): each is planned against its own")


def curve(report: dict[str, Any], points: int = 101) -> list[dict[str, Any]]:
    """Expected cost vs forgetting probability per candidate (the ``--chart``): E(p) = C + p·R
    on p = 0 … 1, R the prior's rework or, without one, one more run."""
    out = []
    for r in report["candidates"]:
        c, rework = r["planned_cost_usd"], r["break_even_rework_usd"]
        ps = [i / (points - 1) for i in range(points)]
        out.append({"name": r["name"], "method": r["method"], "p": ps,
                    "expected_cost_usd": [c + p * rework for p in ps],
                    "prior_p": r["prior"]["p_forgetting"] if r["prior"] else None})
    return out
