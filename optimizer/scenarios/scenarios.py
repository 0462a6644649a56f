"""What-if mode 1: named price scenarios against the baseline, each an exact re-solve (see
:mod:`ptplan.scenarios.analysis`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ptplan.core.errors import InputError
from ptplan.scenarios.analysis import METHOD_NOTE, plan_json, scenario_notes
from ptplan.scenarios.diff import diff_plans
from ptplan.scenarios.pricerules import PriceRule, parse_rule
from ptplan.scenarios.runner import Outcome, Runner, Setup, validate_jobs

NAME_RE = re.compile(r"^\s*([A-Za-z0-9_.\- ]+?)\s*:\s*(.+)$")


@dataclass
class Scenario:
    name: str
    rules: tuple[PriceRule, ...]


def parse_scenario(text: str, index: int) -> tuple[str, list[str]]:
    """``"[NAME:] RULE; RULE"`` → (name, rule texts)."""
    name = f"scenario {index}"
    body = text
    m = NAME_RE.match(text)
    if m and "=" not in m.group(1):
        name, body = m.group(1), m.group(2)
    rules = [r.strip() for r in body.split(";") if r.strip()]
    if not rules:
        raise InputError(f"--scenario {text!r}: no rules; write 'NAME: RULE; RULE', e.g. "
                         "'spot-up: capacity_type=spot *= 1.4; gpu=H100 *= 0.9'")
    return name, rules


def scenarios_from(price_rules: tuple[PriceRule, ...], texts: Sequence[str]) -> list[Scenario]:
    """The scenarios of ``--price`` rules (together "scenario 1") and of each ``--scenario``
    text; names must differ."""
    scenarios: list[Scenario] = []
    if price_rules:
        scenarios.append(Scenario("scenario 1", price_rules))
    for text in texts:
        name, rules = parse_scenario(text, len(scenarios) + 1)
        scenarios.append(Scenario(name, tuple(parse_rule(t) for t in rules)))
    names = [sc.name for sc in scenarios]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise InputError(f"--scenario: name {dup!r} is used twice; give each scenario "
                         "its own name")
    return scenarios


def run_scenarios(setup: Setup, scenarios: Sequence[Scenario], runner: Runner
                  ) -> dict[str, Any]:
    """The baseline plan and each scenario's plan, with deltas and changes (JSON-ready)."""
    validate_jobs(setup, [s.rules for s in scenarios])
    outcomes = runner.map([(), *[s.rules for s in scenarios]])
    base, rest = outcomes[0], outcomes[1:]
    return {
        "schema_version": 1, "kind": "whatif", "spec_name": setup.spec.name,
        "objective": setup.objective, "catalog": setup.catalog.name,
        "catalog_as_of": setup.catalog.as_of, "policy": setup.policy.name,
        "baseline": plan_json(base.plan), "baseline_error": base.error,
        "scenarios": [_scenario_row(sc, o, base) for sc, o in zip(scenarios, rest, strict=True)],
        "method": METHOD_NOTE,
    }


def _scenario_row(sc: Scenario, o: Outcome, base: Outcome) -> dict[str, Any]:
    """One scenario's plan (or error), the rules' effects, and its changes from the baseline."""
    delta = changes = None
    if o.plan is not None and base.plan is not None:
        changes = diff_plans(base.plan, o.plan)
        delta = changes["total"]["delta_usd"]
    return {"name": sc.name, "rules": [r.text for r in sc.rules],
            "effects": [e.as_dict() for e in o.effects], "plan": plan_json(o.plan),
            "error": o.error, "delta_usd": delta, "changes": changes,
            "notes": scenario_notes(sc.rules)}
