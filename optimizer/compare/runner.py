"""``ptplan compare``: plan each candidate (and the jobs its cost includes) and lay the whole
costs side by side (:mod:`optimizer.compare.expect`). Every plan here is a verified plan of
:func:`optimizer.planner.api.plan`."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from optimizer.compare.expect import Candidate, break_even, describe
from optimizer.compare.priors import RiskFile, load_risk, prior_for, rework_spec_path
from optimizer.core.errors import InputError, PlannerError
from optimizer.core.yamlio import quoted
from optimizer.plan.schema import Plan
from optimizer.spec.project import ProjectSpec, load_spec

COMPARE_SCHEMA_VERSION = 1
NO_PRIORS = ("no priors: no risk file given (--risk FILE); forgetting probabilities are not "
             "shown as facts, only the break-even probability of each candidate (rework = one "
             "more run)")

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


def phase_share(plan: Plan, phase: str) -> float:
    total = float(plan.total_cost_usd)
    cost = sum(float(ph.cost_usd) for ph in plan.phases if ph.name == phase)
    return cost / total if total > 0 else 0.0


def compare(spec_paths: list[str], planner: Planner, risk_path: str | None = None,
            progress: Callable[[int, int, str], None] | None = None) -> dict[str, Any]:
    """The comparison report (JSON-ready; docs/compare.md)."""
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
    for n, (path, spec) in enumerate(specs):
        if progress is not None:
            progress(n, len(specs), f"compare: planning {spec.name}")
        run = plans.of(path, spec)
        gen = load_generator(spec, path)
        gen_plan = plans.of(*gen) if gen is not None else None
        prior, found = prior_for(risk, spec.name, spec.method) if risk else (None, "")
        rework: dict[str, Any] | None = None
        rework_usd: float | None = None
        if prior is not None:
            assert risk_path is not None
            if prior.rework.spec is not None:
                rpath = rework_spec_path(risk_path, prior.rework)
                rplan = plans.of(rpath, load_spec(str(rpath)))
                rework_usd = float(rplan.total_cost_usd)
                rework = {"kind": "spec", "spec": str(rpath), "cost_usd": rework_usd,
                          "makespan_hours": rplan.makespan_hours}
            else:
                assert prior.rework.fraction_of_run is not None
                rework_usd = prior.rework.fraction_of_run * float(run.total_cost_usd)
                rework = {"kind": "fraction_of_run", "fraction": prior.rework.fraction_of_run,
                          "cost_usd": rework_usd}
        elif risk is not None:
            notes.append(f"{spec.name}: the risk file has no prior for it (no specs.{spec.name} "
                         f"and no methods.{spec.method}); only its break-even is shown")
        cand = Candidate(spec.name, spec.method, float(run.total_cost_usd),
                         float(gen_plan.total_cost_usd) if gen_plan is not None else 0.0,
                         prior.p_forgetting if prior is not None else None, rework_usd)
        cands.append(cand)
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
            "prior": None if prior is None else {
                "p_forgetting": prior.p_forgetting, "source": prior.source, "from": found,
                "rework": rework},
            "expected_cost_usd": cand.expected() if prior is not None else None,
            "p90_cost_usd": cand.p90,
        })
    if progress is not None:
        progress(len(specs), len(specs), "compare: done")
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
    return {"compare_schema_version": COMPARE_SCHEMA_VERSION,
            "priors": (f"risk file {risk_path}" if risk is not None else None),
            "statement": (None if risk is not None else NO_PRIORS),
            "ranked_by": key, "ranking": ranking, "candidates": rows, "notes": notes}


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
