"""Shared fixtures: the example specs as plain dicts (fresh copies) and a one-line check."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import settings

# CI runs Hypothesis derandomized (the same examples every run: a red CI is reproducible and
# a green one is not luck); locally each run explores new examples. A failure prints its
# reproduction blob either way.
settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("dev", print_blob=True)
# the deep fuzz run (benchmarks/fuzz_deep.py: pytest tests/test_fuzz.py
# --hypothesis-profile=deep): 2,500 examples per fuzz target, derandomized like CI
settings.register_profile("deep", max_examples=2500, derandomize=True, print_blob=True,
                          deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
EXAMPLE_FILES = ("grpo-7b.yaml", "opd-8b-from-32b.yaml", "sft-8b.yaml")

_RAW: dict[str, dict[str, Any]] = {
    name: yaml.safe_load((EXAMPLES / name).read_text(encoding="utf-8")) for name in EXAMPLE_FILES
}


def _fitted_module(module: Any) -> bool:
    marks = getattr(module, "pytestmark", [])
    marks = marks if isinstance(marks, list) else [marks]
    return any(getattr(m, "name", "") == "fitted" for m in marks)


@pytest.fixture(autouse=True, scope="module")
def _physics_only(request: pytest.FixtureRequest):
    """Tests of the demand model's physics, the planner and the outputs run the model without
    the suite-fitted factors (``ptplan.core.fit.identity_fit``): their expected figures come
    from formulas. A module marked ``pytestmark = pytest.mark.fitted`` (the validation suite,
    the targets, the plan's interval) runs with the stored fit, and so do its module-scoped
    fixtures: this fixture is module-scoped and autouse, so it is in force before them. Forked
    planner workers inherit the choice."""
    from ptplan.core.fit import identity_fit, using

    if _fitted_module(request.module):
        yield
        return
    with using(identity_fit()):
        yield


@pytest.fixture(autouse=True)
def _fitted_test(request: pytest.FixtureRequest):
    """A single test marked ``@pytest.mark.fitted`` in a physics module runs with the stored
    fit (its function-scoped fixtures too)."""
    from ptplan.core.fit import load_fit, using

    if request.node.get_closest_marker("fitted") is None or _fitted_module(request.module):
        yield
        return
    with using(load_fit()):
        yield


def _marked(module: Any, name: str) -> bool:
    marks = getattr(module, "pytestmark", [])
    marks = marks if isinstance(marks, list) else [marks]
    return any(getattr(m, "name", "") == name for m in marks)


@pytest.fixture(autouse=True, scope="module")
def _abstract_plans(request: pytest.FixtureRequest):
    """Tests of the planner's mechanics plan specs without ``framework:`` for ``any`` (the
    abstract plan: their hand-derived figures predate the framework's limits, issue #40). A
    module marked ``pytestmark = pytest.mark.shipped_framework`` (the goldens, the examples'
    figures, the launches and renders, the framework tests) reads such specs with the shipped
    default, ``verl==0.9``, as a user does; so does a single test marked with it. The default
    is applied when a spec is read, so specs pickled to spawned workers carry it."""
    from ptplan.spec import frameworks

    if _marked(request.module, "shipped_framework"):
        yield
        return
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(frameworks, "DEFAULT", frameworks.ANY)
        yield


@pytest.fixture(autouse=True)
def _shipped_test(request: pytest.FixtureRequest):
    """A test marked ``@pytest.mark.shipped_framework`` reads specs with ``verl==0.9``."""
    from ptplan.spec import frameworks

    if request.node.get_closest_marker("shipped_framework") is None \
            or _marked(request.module, "shipped_framework"):
        yield
        return
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(frameworks, "DEFAULT", "verl==0.9")
        yield


def example_dict(name: str) -> dict[str, Any]:
    """A fresh, mutable copy of an example spec as loaded from YAML."""
    return copy.deepcopy(_RAW[name])


def assert_one_line(message: str) -> None:
    assert message.strip(), "empty error message"
    assert len(message.splitlines()) == 1, f"message is not one line: {message!r}"


@pytest.fixture
def grpo() -> dict[str, Any]:
    return example_dict("grpo-7b.yaml")


@pytest.fixture
def opd() -> dict[str, Any]:
    return example_dict("opd-8b-from-32b.yaml")


@pytest.fixture
def sft() -> dict[str, Any]:
    return example_dict("sft-8b.yaml")



# No silent skips in CI: with CI set, a skipped test fails unless it carries
# @pytest.mark.ci_skip_ok(reason=...) (tests/ci_skips.py).
from ci_skips import pytest_make_collect_report, pytest_runtest_makereport  # noqa: E402, F401
