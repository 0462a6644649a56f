"""The tamper suite (issue #21), generated from the plan schema by :mod:`tamper`: every numeric
leaf of each example's plan (``tests/golden/cli/plan-*.json``, the planner's own output) scaled,
zeroed, negated and made non-finite, every boolean flipped and every string enum swapped for
each other value. ``ptplan check`` must fail each tampering: from the plan alone for fields
the schema marks ``derived`` (the default) or ``catalog`` (compared with the embedded catalog
the examples are planned on), with ``--spec`` for fields it marks ``spec``.
Fields marked ``informational`` are tampered too and must not crash ``check`` (no traceback),
but may pass.

Counts (stated by :func:`test_tamper_suite_counts`, which fails when they drift, so a new plan
field shows up here): see ``TAMPER_COUNTS``.
"""

from __future__ import annotations

import json
from collections import Counter
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from tamper import Tamper, apply, check_text, leaves, tampers

from ptplan.planfile.schema import CHECK_KINDS, Plan
from ptplan.spec.project import ProjectSpec, load_spec

pytestmark = pytest.mark.shipped_framework
"""The golden plans are the examples as a user plans them (framework verl==0.9 by default)."""

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden" / "cli"
EXAMPLES = {"grpo-7b": "grpo-7b.yaml", "opd-8b-from-32b": "opd-8b-from-32b.yaml",
            "sft-8b": "sft-8b.yaml"}

TAMPER_COUNTS = {"derived": 1769, "spec": 690, "catalog": 192, "informational": 366}
"""Tamperings per kind of field, over the three example plans (schema 6: each allocation's
``capacity_type`` is also swapped to ``block`` and ``flex_start``, 48 more derived; schema 8:
the ``uncertainty`` block's figures are derived, and issue #39's plans have other pools;
schema 9: the plans are veRL 0.9's, the GRPO one on two pools instead of three, with fewer
layouts among its alternatives)."""


@cache
def plan_of(example: str) -> dict[str, Any]:
    return json.loads((GOLDEN / f"plan-{example}.json").read_text(encoding="utf-8"))


@cache
def spec_of(example: str) -> ProjectSpec:
    return load_spec(str(ROOT / "examples" / EXAMPLES[example]))


ALL: list[Tamper] = [t for ex in EXAMPLES for t in tampers(ex, plan_of(ex))]


def _run(t: Tamper, with_spec: bool) -> tuple[int, list[str]]:
    return check_text(apply(plan_of(t.example), t), spec_of(t.example) if with_spec else None)


@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_untampered_plans_pass(example: str) -> None:
    assert check_text(json.dumps(plan_of(example))) == (0, [])
    assert check_text(json.dumps(plan_of(example)), spec_of(example)) == (0, [])


@pytest.mark.parametrize("t", [t for t in ALL if t.check in ("derived", "catalog")], ids=str)
def test_derived_field_tampering_fails_check(t: Tamper) -> None:
    """From the plan alone (and, for ``catalog`` fields, the embedded catalog the examples are
    planned on)."""
    code, problems = _run(t, with_spec=False)
    assert code in (1, 2), f"check passed {t}"
    assert problems and all(len(p.splitlines()) == 1 for p in problems)


@pytest.mark.parametrize("t", [t for t in ALL if t.check == "spec"], ids=str)
def test_spec_field_tampering_fails_check_with_spec(t: Tamper) -> None:
    code, _ = _run(t, with_spec=True)
    assert code in (1, 2), f"check --spec passed {t}"


@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_informational_tampering_never_crashes(example: str) -> None:
    """Informational fields may change freely; ``check`` still answers (no traceback)."""
    for t in ALL:
        if t.example == example and t.check == "informational":
            code, _ = _run(t, with_spec=True)
            assert code in (0, 1, 2)


def test_tamper_suite_counts() -> None:
    counts = Counter(t.check for t in ALL)
    kinds = Counter(t.kind for t in ALL)
    print(f"tamper suite: {len(ALL)} tamperings ({dict(counts)}; {dict(kinds)})")
    assert set(counts) <= set(CHECK_KINDS)
    assert dict(counts) == TAMPER_COUNTS, (
        f"the tamper suite changed: {dict(counts)}; a plan field was added or re-classified: "
        "update TAMPER_COUNTS (and docs/reliability.md) on purpose")


def test_every_field_kind_is_declared_in_the_schema() -> None:
    """``x-check`` values come from CHECK_KINDS, and every informational field is declared as
    such in the published schema (``ptplan schema plan``), not in a list here."""
    schema = Plan.model_json_schema()
    text = json.dumps(schema)
    for kind in ("informational", "spec"):
        assert f'"x-check": "{kind}"' in text
    found = {c for _, _, _, c in leaves(plan_of("grpo-7b"))}
    assert found == set(CHECK_KINDS)


def test_non_finite_tampering_is_refused_at_parse_time() -> None:
    for t in ALL:
        if t.kind == "non_finite" and t.example == "sft-8b":
            code, problems = _run(t, with_spec=False)
            assert code == 2 and "numbers must be finite" in problems[0], t
