"""``ptplan plan SPEC --risk pNN``: the cheapest plan whose simulated quantile of makespan meets
the deadline (and of cost, the budget).

The planner meets the deadline and budget in expectation. This search hands it an *effective*
deadline D' ≤ D (and budget B' ≤ B) and re-checks every candidate by simulation with the same
seed (common random numbers): starting from the expected-value plan, each failing candidate's
tail margin (its quantile − D) is taken off its own makespan, D' ← makespan − (q − D)
(likewise B' ← total − (q_cost − B)), until a candidate passes (with the model's uncertainty,
whose multiplier scales the whole run, the margin is taken off as a ratio instead:
D' ← makespan × D / q, B' ← total × B / q_cost); then the gap between the last
failing and the passing D' is bisected (a looser D' never costs more), so the plan returned is
the cheapest passing candidate found. If the planner cannot meet a tightened deadline or budget
at all, that constraint binds and no plan meets the quantile: exit 1 naming it.

The simulation covers the demand model's own uncertainty as well as spot interruptions (unless
``RiskOptions.model_uncertainty`` is off): each trial's job time is × a lognormal multiplier
matched to the plan's 80 % interval (:mod:`ptplan.risk.uncertainty`). The report says what
each source adds at the quantile and which dominates.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ptplan.core.errors import InfeasibleError, InputError, PlannerError
from ptplan.planfile.schema import Plan, usd
from ptplan.planfile.verify import verify_plan
from ptplan.risk.model import RunModel, build_model
from ptplan.risk.montecarlo import ChunkResult
from ptplan.risk.runner import run_trials
from ptplan.risk.uncertainty import attribution, attribution_sentence, with_model_uncertainty
from ptplan.spec.project import ProjectSpec

MAX_ROUNDS = 12
BISECTIONS = 3


@dataclass
class Candidate:
    deadline: float | None
    budget: float | None
    plan: Plan
    q_makespan: float
    q_cost: float
    model: RunModel | None = field(default=None, repr=False)
    result: ChunkResult | None = field(default=None, repr=False)

    def meets(self, deadline: float | None, budget: float | None) -> bool:
        return (deadline is None or self.q_makespan <= deadline + 1e-9) and \
            (budget is None or self.q_cost <= budget + 1e-6)

    def row(self) -> dict[str, Any]:
        return {"effective_deadline_hours": self.deadline, "effective_budget_usd": self.budget,
                "total_cost_usd": self.plan.total_cost_usd,
                "makespan_hours": round(self.plan.makespan_hours, 6),
                "q_makespan_hours": round(self.q_makespan, 6),
                "q_cost_usd": round(self.q_cost, 2), "layout": self.plan.layout}


@dataclass
class RiskOptions:
    quantile: float
    label: str
    trials: int = 10_000
    seed: int = 0
    correlated: float = 0.0
    shortage_hours: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)
    model_uncertainty: bool = True
    """Draw each trial's job time from the model's interval as well as its interruptions."""


def _simulate(p: Plan, opt: RiskOptions) -> tuple[RunModel, ChunkResult, float, float]:
    import numpy as np

    model = build_model(p, opt.correlated, opt.shortage_hours)
    if opt.model_uncertainty:
        model = with_model_uncertainty(model, p)
    res = run_trials(model, opt.trials, opt.seed)
    return (model, res, float(np.quantile(res.makespan_hours, opt.quantile)),
            float(np.quantile(res.cost_usd, opt.quantile)))


def sources(cand: Candidate, opt: RiskOptions) -> dict[str, Any] | None:
    """What the model's uncertainty and spot interruptions each add at the quantile (the
    interruptions alone: the same seed with the multiplier at 1)."""
    from dataclasses import replace

    if not opt.model_uncertainty or cand.model is None or cand.result is None:
        return None
    spot = run_trials(replace(cand.model, time_mu=0.0, time_sigma=0.0), opt.trials, opt.seed)
    res = cand.result
    return attribution(cand.model, opt.quantile, (res.makespan_hours, res.cost_usd),
                       (spot.makespan_hours, spot.cost_usd), res.time_multiplier)


def risk_plan(spec: ProjectSpec, solve: Callable[[ProjectSpec], Plan], opt: RiskOptions,
              progress: Callable[[int, int], None] | None = None
              ) -> tuple[Plan, dict[str, Any]]:
    """(the chosen plan, recording the spec's own deadline and budget, and the risk report)."""
    deadline, budget = spec.sla.deadline_hours, spec.budget.max_usd
    if deadline is None and budget is None:
        raise InputError("--risk: the spec has neither sla.deadline_hours nor budget.max_usd; "
                         "set one for the quantile to meet")
    tick = progress or (lambda done, total: None)

    def attempt(d: float | None, b: float | None) -> Candidate:
        s = spec.model_copy(update={
            "sla": spec.sla.model_copy(update={"deadline_hours": d}),
            "budget": spec.budget.model_copy(update={"max_usd": b})})
        p = solve(s)
        model, res, qm, qc = _simulate(p, opt)
        tick(len(tried) + 1, MAX_ROUNDS + BISECTIONS)
        return Candidate(d, b, p, qm, qc, model, res)

    tried: list[Candidate] = []
    base = attempt(deadline, budget)
    tried.append(base)
    best = base if base.meets(deadline, budget) else None
    fail = base
    while best is None and len(tried) < MAX_ROUNDS:
        d = fail.deadline
        if deadline is not None and fail.q_makespan > deadline:
            # the plan's own time holds its flex-start wait (the deadline holds run + wait)
            own = fail.plan.makespan_hours + max((b.wait_hours for b in fail.plan.bookings),
                                                 default=0.0)
            d = own * deadline / fail.q_makespan / 1.0001 if opt.model_uncertainty \
                else own - (fail.q_makespan - deadline) * 1.0001
        b = fail.budget
        if budget is not None and fail.q_cost > budget:
            total = float(fail.plan.total_cost_usd)
            b = total * budget / fail.q_cost - 0.01 if opt.model_uncertainty \
                else total - (fail.q_cost - budget) - 0.01
        if (d is not None and d <= 0) or (b is not None and b <= 0):
            _binds(opt, deadline, budget, fail, None)
        try:
            cand = attempt(d, b)
        except InfeasibleError as exc:
            _binds(opt, deadline, budget, fail, exc)
        tried.append(cand)
        if cand.meets(deadline, budget):
            best = cand
        else:
            fail = cand
    if best is None:
        _binds(opt, deadline, budget, fail, None)
    assert best is not None
    if best is not base:
        lo, hi = best, fail  # lo passes (tighter), hi fails (looser)
        for _ in range(BISECTIONS):
            mid_d = None if lo.deadline is None or hi.deadline is None \
                else (lo.deadline + hi.deadline) / 2
            mid_b = None if lo.budget is None or hi.budget is None \
                else (lo.budget + hi.budget) / 2
            try:
                mid = attempt(mid_d, mid_b)
            except InfeasibleError:
                break
            tried.append(mid)
            if mid.meets(deadline, budget):
                lo = mid
                if float(mid.plan.total_cost_usd) < float(best.plan.total_cost_usd):
                    best = mid
            else:
                hi = mid
    chosen = _restore(best.plan, spec)
    price = float(best.plan.total_cost_usd) - float(base.plan.total_cost_usd)
    report = {
        "quantile": opt.label, "trials": opt.trials, "seed": opt.seed,
        "correlated": opt.correlated, "deadline_hours": deadline, "budget_usd": budget,
        "expected_value_plan": base.row(), "chosen": best.row(),
        "price_of_certainty_usd": round(price, 2), "candidates": [c.row() for c in tried],
        "model_uncertainty": opt.model_uncertainty,
    }
    src = sources(best, opt)
    if src is not None:
        report["sources"] = src
    statement = _statement(report)
    chosen = chosen.model_copy(update={"explain": chosen.explain.model_copy(update={
        "summary": [*chosen.explain.summary, statement]})})
    report["statement"] = statement
    return chosen, report


def _restore(p: Plan, spec: ProjectSpec) -> Plan:
    """The plan as made for the spec: its own deadline and budget (a plan meeting a tighter one
    meets these), re-verified."""
    b = spec.budget.max_usd
    pol = p.policy.get("budget") or {}
    upd: dict[str, Any] = {"deadline_hours": spec.sla.deadline_hours,
                           "budget_usd": usd(b) if b is not None else None,
                           "budget_warn_usd": usd(b * pol.get("warn_at", 0.8)) if b else None,
                           "budget_stop_usd": usd(b * pol.get("stop_at", 1.0)) if b else None}
    out = p.model_copy(update=upd).rounded()  # as printed (a spec's deadline may be longer)
    problems = verify_plan(out)
    if problems:
        raise PlannerError("internal error: the risk plan failed verification ("
                           + "; ".join(problems[:3]) + "); please report this bug")
    return out


def _statement(r: dict[str, Any]) -> str:
    q, ev, ch = r["quantile"].upper(), r["expected_value_plan"], r["chosen"]
    parts = [f"risk {q}: the expected-value plan (${ev['total_cost_usd']}) has {q} makespan "
             f"{ev['q_makespan_hours']:.3f} h and {q} cost ${ev['q_cost_usd']:,.2f}"]
    if r["price_of_certainty_usd"] == 0 and ch == ev:
        parts.append("it already meets " + _targets(r, q) + "; the price of certainty is $0.00")
    else:
        d, b = ch["effective_deadline_hours"], ch["effective_budget_usd"]
        against = " and ".join(([f"deadline {d:.3f} h"] if d is not None else [])
                               + ([f"budget ${b:,.2f}"] if b is not None else []))
        parts.append(f"the chosen plan (${ch['total_cost_usd']}, planned against {against}) "
                     f"has {q} makespan {ch['q_makespan_hours']:.3f} h and {q} cost "
                     f"${ch['q_cost_usd']:,.2f}: "
                     f"it meets {_targets(r, q)} for ${r['price_of_certainty_usd']:,.2f} more "
                     "(the price of certainty)")
    if r.get("sources") is not None:
        parts.append(attribution_sentence(r["sources"], r["quantile"]))
    elif not r.get("model_uncertainty", True):
        parts.append("spot interruptions only (the model's uncertainty left out)")
    return "; ".join(parts) + f" ({r['trials']:,} trials, seed {r['seed']})"


def _targets(r: dict[str, Any], q: str) -> str:
    t = []
    if r["deadline_hours"] is not None:
        t.append(f"the {r['deadline_hours']:g} h deadline")
    if r["budget_usd"] is not None:
        t.append(f"the ${r['budget_usd']:,.2f} budget")
    return " and ".join(t) + f" at {q}"


def _binds(opt: RiskOptions, deadline: float | None, budget: float | None, last: Candidate,
           exc: Exception | None) -> None:
    q = opt.label.upper()
    which = []
    if deadline is not None and last.q_makespan > deadline:
        which.append(f"the deadline binds: {q} makespan {last.q_makespan:.3f} h > "
                     f"{deadline:g} h")
    if budget is not None and last.q_cost > budget:
        which.append(f"the budget binds: {q} cost ${last.q_cost:,.2f} > ${budget:,.2f}")
    why = f"; tightening further is infeasible ({exc})" if exc is not None else \
        "; tightening the planner's deadline/budget no longer helps"
    if opt.model_uncertainty and last.model is not None and last.model.time_interval:
        level, low, high, _ = last.model.time_interval
        why += (f" (the quantile covers the model's uncertainty: job time ×{low:.3g}–×{high:.3g}"
                f" at {level * 100:g} %, as well as spot interruptions)")
    raise InfeasibleError(f"--risk {opt.label}: no plan meets {q}: " + " and ".join(which)
                          + f" for the last candidate (${last.plan.total_cost_usd}, planned "
                          f"against deadline {last.deadline} h, budget {last.budget})" + why)
