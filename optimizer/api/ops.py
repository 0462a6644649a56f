"""The public API's analysis commands (:mod:`ptplan.api`): ``whatif``, ``reserve``,
``simulate`` and ``compare``. Each does what its ``ptplan`` command does and returns the report
that command prints with ``--format json`` (its floats rounded to 12 significant digits, as
printed: :mod:`ptplan.core.numbers`); charts, tables and progress bars stay with the command
line."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from ptplan.api.inputs import as_catalog, as_plan, as_policy, as_spec, with_start_after
from ptplan.core.errors import InputError
from ptplan.core.numbers import round_floats
from ptplan.planfile.schema import Plan
from ptplan.policies.model import Policy
from ptplan.providers.base import Catalog
from ptplan.spec.project import ProjectSpec

__all__ = ["compare", "reserve", "simulate", "whatif"]


def _texts(rules: str | Sequence[str] | None) -> list[str]:
    """Rule strings: one string is one rule."""
    return [rules] if isinstance(rules, str) else list(rules or [])


def whatif(spec: ProjectSpec | str | os.PathLike[str], rules: str | Sequence[str] = (),
           catalog: Catalog | str | os.PathLike[str] | None = None, *,
           scenarios: str | Sequence[str] = (), sweep: str | None = None,
           start: float | None = None, stop: float | None = None, steps: int = 11,
           every_point: bool = False, break_even: str | None = None, tolerance: float = 1e-3,
           policy: Policy | str | os.PathLike[str] | None = None,
           objective: Literal["cost", "time"] = "cost", solver: Literal["highs", "cbc"] = "highs",
           workers: int | None = 1, ray_address: str | None = None, timings: bool = True,
           start_after: dt.date | str | None = None) -> dict[str, Any]:
    """What-if prices, as ``ptplan whatif``: the baseline plan against price scenarios, a sweep
    of one price, or the break-even prices where the plan changes. Every scenario is a full,
    verified re-solve.

    A rule is ``"SELECTOR OP VALUE"``, as ``--price`` takes it: SELECTOR is ``*`` or
    comma-separated ``KEY=GLOB`` (offers: provider, region, zone, instance_type, gpu,
    capacity_type; storage.provider, storage.region, storage.tier, storage.access; egress.provider,
    egress.path), OP is ``*=`` (scale), ``+=`` (add) or ``=`` (set), e.g.
    ``"capacity_type=spot *= 1.4"``.

    Args:
        spec: The project spec, or the path of its YAML.
        rules: Price rules (``--price``): together one scenario, applied in order; with
            ``sweep`` or ``break_even``, applied before it. One string is one rule.
        catalog: A catalog, a reference for ``ptplan.load_catalog``, or ``None``: embedded.
        scenarios: More scenarios (``--scenario``), each ``"[NAME:] RULE; RULE"``.
        sweep: ``"SELECTOR OP"`` (``--sweep``): sweep the value from ``start`` to ``stop`` in
            ``steps`` points.
        start: Sweep start (``--from``); break-even: the lowest multiplier searched (0).
        stop: Sweep end (``--to``); break-even: the highest multiplier searched (10).
        steps: Sweep points, ends included.
        every_point: Sweep: re-solve every point (by default a gap whose two ends have the same
            optimal plan is not searched inside).
        break_even: ``"SELECTOR"`` (``--break-even``): the price multipliers where the plan's
            use of the matched offers (or storage tiers) changes.
        tolerance: Break-even: the bracket width on the multiplier.
        policy: A policy, the path of a policy YAML, or ``None``: the default policy.
        objective: ``cost`` or ``time``, as for ``ptplan.plan``.
        solver: The MILP solver: ``highs`` or ``cbc``.
        workers: Local worker processes; 1 (the default here) solves in this process, ``None``
            takes the command's default (``min(2, CPUs)`` spawned processes, which need the
            calling script's code under ``if __name__ == "__main__":``). The report does not
            depend on it.
        ray_address: Run on a Ray cluster at this address (``auto``, ``ray://host:10001``,
            ``local``); needs the ``ray`` extra.
        timings: ``False`` zeroes the solver seconds for byte-identical output.
        start_after: The run starts on or after this date: each scenario books capacity blocks
            and flex-start as ``ptplan.plan`` does.

    Returns:
        The report ``ptplan whatif --format json`` prints for the mode: scenarios (with each
        scenario's changes against the baseline), the sweep's points and plan switches, or the
        break-even multipliers.

    Raises:
        InputError: No rule, scenario, sweep or break-even given, both a sweep and a break-even,
            a malformed rule, or a rule that matches nothing.
        InfeasibleError: The baseline has no feasible plan.
    """
    from ptplan.scenarios.pricerules import parse_rule
    from ptplan.scenarios.runner import Runner, Setup

    prices, texts = _texts(rules), _texts(scenarios)
    modes = [m for m, on in (("sweep", sweep), ("break_even", break_even)) if on is not None]
    if len(modes) > 1:
        raise InputError("sweep and break_even: give one of them per call")
    if modes and texts:
        raise InputError(f"scenarios cannot be combined with {modes[0]}; use rules for the "
                         "prices applied before the sweep or search")
    if not modes and not prices and not texts:
        raise InputError("whatif: nothing to compare; give rules, scenarios, sweep or "
                         "break_even")
    if not modes and (start is not None or stop is not None):
        raise InputError("start/stop: only with sweep or break_even")
    base_rules = tuple(parse_rule(r) for r in prices)
    s = with_start_after(as_spec(spec), start_after)
    setup = Setup(s, as_catalog(catalog), as_policy(policy), objective, solver, timings)
    with Runner(setup, workers, ray_address) as runner:
        if sweep is not None:
            from ptplan.scenarios.pricerules import parse_partial
            from ptplan.scenarios.sweep import linspace, run_sweep

            if start is None or stop is None:
                raise InputError("sweep needs start and stop (and steps, default 11)")
            sel, op = parse_partial(sweep)
            return round_floats(run_sweep(setup, sel, op, linspace(start, stop, steps),
                                          runner, base_rules, every_point))
        if break_even is not None:
            from ptplan.scenarios.breakeven import break_even as search
            from ptplan.scenarios.pricerules import parse_selector

            return round_floats(search(setup, parse_selector(break_even), runner,
                                       0.0 if start is None else start,
                                       10.0 if stop is None else stop, tolerance, base_rules))
        from ptplan.scenarios.scenarios import run_scenarios, scenarios_from

        return round_floats(run_scenarios(setup, scenarios_from(base_rules, texts), runner))


def reserve(portfolio: str | os.PathLike[str] | Mapping[str, Any],
            catalog: Catalog | str | os.PathLike[str] | None = None, *,
            policy: Policy | str | os.PathLike[str] | None = None,
            solver: Literal["highs", "cbc"] = "highs", risk: str | None = None,
            ladder: Literal["quarterly"] | None = None, timings: bool = True,
            base_dir: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """How many 1- and 3-year commitments (reservations, Savings Plans, flexible CUDs) to buy
    for a portfolio of projects, as ``ptplan reserve``.

    Args:
        portfolio: The portfolio file, or its content as a mapping (as the YAML would load).
        catalog: A catalog, a reference for ``ptplan.load_catalog``, or ``None``: embedded.
        policy: The policy the projects are planned under (a policy, its path, or ``None``: the
            default policy).
        solver: The MILP solver: ``highs`` or ``cbc``.
        risk: ``"cvar:ALPHA[:WEIGHT]"``, e.g. ``"cvar:0.9"``: minimise (1 - WEIGHT) x expected
            cost + WEIGHT x CVaR_ALPHA (WEIGHT 0.5); ``None``: the expected cost.
        ladder: ``"quarterly"``: decide a purchase for every quarter of the horizon (this
            quarter's is the answer); ``None``: buy now only.
        timings: ``False`` zeroes the seconds for byte-identical output.
        base_dir: The folder the projects' spec paths are relative to; ``None``: the
            portfolio file's folder, or the working directory for a mapping.

    Returns:
        The report ``ptplan reserve --format json`` prints: purchases, expected costs,
        scenarios and weekly coverage.

    Raises:
        InputError: A malformed portfolio, risk or ladder, or a bad project spec.
        PlannerError: The purchase fails its independent re-check (a bug: please report it).
    """
    from ptplan.reservations.portfolio import Portfolio, load_portfolio, portfolio_dir
    from ptplan.reservations.purchase import Risk
    from ptplan.reservations.purchase import reserve as run

    rk = Risk.parse(risk)
    if ladder is not None and ladder != "quarterly":
        raise InputError(f"ladder: {ladder!r} is not a ladder; use quarterly")
    if isinstance(portfolio, Mapping):
        from ptplan.core.yamlio import validate

        pf = validate(Portfolio, dict(portfolio), "portfolio")
        folder = Path(os.fspath(base_dir) if base_dir is not None else ".").resolve()
    else:
        pf = load_portfolio(os.fspath(portfolio))
        folder = portfolio_dir(os.fspath(portfolio)) if base_dir is None else \
            Path(os.fspath(base_dir)).resolve()
    result = run(pf, as_catalog(catalog), folder, as_policy(policy), solver, rk, timings,
                 ladder=ladder)
    return round_floats(result.report)


def simulate(plan: Plan | str | os.PathLike[str], trials: int = 10_000, seed: int = 0, *,
             workers: int | None = None, ray_address: str | None = None,
             correlated: float = 0.0, shortage_hours: float = 0.0,
             checkpoints: Literal["lifecycle", "young"] = "lifecycle",
             async_buffer: Literal["one-step", "unbounded"] = "one-step") -> dict[str, Any]:
    """Monte Carlo of a plan under spot interruptions, as ``ptplan simulate``: makespan and
    cost distributions, P(deadline met), P(budget exceeded), and the plan's expected overhead
    beside the simulated mean. The same seed gives the same report.

    Args:
        plan: The plan, or the path of a plan JSON.
        trials: Simulated runs (1 to 2,000,000).
        seed: The seed (0 to 2**64 - 1).
        workers: Local worker processes; ``None``: 1. The report does not depend on it.
        ray_address: Run the chunks on a Ray cluster at this address; needs the ``ray`` extra.
        correlated: Share of each spot node's hazard from zone-wide reclaims (0 to 1).
        shortage_hours: After a zone-wide reclaim, spot capacity returns after this many hours
            (on-demand fallback where the policy allows it).
        checkpoints: Gang checkpoints: ``lifecycle`` (every_steps) or ``young`` (Young's
            interval, the planner's model).
        async_buffer: Async pools: ``one-step`` off-policy, or ``unbounded`` (the planner's
            formula).

    Returns:
        The summary ``ptplan simulate --format json`` prints.

    Raises:
        InputError: A bad trial count, seed, share or mode, a plan without a lifecycle
            (schema 1), or Ray asked for but not installed.
    """
    from ptplan.risk.model import build_model
    from ptplan.risk.runner import check_counts, run_trials
    from ptplan.risk.summary import summarise

    check_counts(trials, workers, seed)
    if ray_address is not None:
        try:
            import ray  # noqa: F401
        except ImportError:
            raise InputError("ray_address: the ray package is not installed; install the "
                             "extra: pip install 'ptplan[ray]'") from None
    p = as_plan(plan)
    model = build_model(p, correlated, shortage_hours, checkpoints, async_buffer)
    res = run_trials(model, trials, seed, workers, ray_address)
    return round_floats(summarise(model, res, trials, seed))


def compare(spec_paths: Sequence[str | os.PathLike[str]], *,
            risk: str | os.PathLike[str] | None = None,
            catalog: Catalog | str | os.PathLike[str] | None = None,
            policy: Policy | str | os.PathLike[str] | None = None,
            solver: Literal["highs", "cbc"] = "highs") -> dict[str, Any]:
    """Candidate methods for one goal side by side by their whole cost, as ``ptplan
    compare``: planned cost and time, data generation, eval share, forgetting prior and
    rework, expected cost, P90, and the break-even forgetting probability where the ranking
    flips (docs/compare.md).

    Args:
        spec_paths: Two or more candidate specs' paths (paths, not loaded specs: a spec's
            ``data.generated_by`` is resolved against its folder).
        risk: A risk file: forgetting priors per method or spec, with their rework and source.
            ``None``: only break-even probabilities.
        catalog: A catalog, a reference for ``ptplan.load_catalog``, or ``None``: embedded.
        policy: A policy, the path of a policy YAML, or ``None``: the default policy.
        solver: The MILP solver: ``highs`` or ``cbc``.

    Returns:
        The report ``ptplan compare --format json`` prints.

    Raises:
        InputError: Fewer than two specs, two with the same name, or a bad spec or risk file.
        InfeasibleError: A candidate has no feasible plan.
    """
    from ptplan.comparison.runner import compare as run
    from ptplan.planner.api import plan as make_plan

    if isinstance(spec_paths, str | os.PathLike):
        raise InputError("compare: spec_paths is one path; give a list of two or more specs")
    pol = as_policy(policy)
    cat = as_catalog(catalog)
    return round_floats(run([os.fspath(p) for p in spec_paths],
                            lambda s: make_plan(s, cat, "cost", solver, explain=False,
                                                timings=False, policy=pol),
                            None if risk is None else os.fspath(risk)))
