"""Golden JSON of ``plan``, ``pareto``, ``whatif`` and ``reserve`` on the examples.

A refactor that changes any figure fails here. The files are the commands' own output with
``--no-timings`` (``pareto`` records no timings); regenerate them deliberately, after checking
that the change in numbers is intended, with the one command that regenerates every golden of
the suite (docs/testing.md): ``PTPLAN_UPDATE_GOLDEN=1 python -m pytest
tests/test_example_figures.py tests/test_golden_cli.py tests/test_render.py
tests/test_report_html.py`` (the HTML reports are made of these files).
"""

from __future__ import annotations

import difflib
import json
import os
from pathlib import Path

import pytest
from golden_compare import one_step
from typer.testing import CliRunner

from ptplan.cli.app import app

pytestmark = pytest.mark.shipped_framework
"""The examples as a user plans them: specs without ``framework:`` take verl==0.9."""

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden" / "cli"
EX = ROOT / "examples"
UPDATE = os.environ.get("PTPLAN_UPDATE_GOLDEN") == "1"
TODAY = "2026-12-03"
"""The golden files were made on this day (the catalog's age is printed): PTPLAN_TODAY pins it."""

CASES: dict[str, list[str]] = {
    "plan-grpo-7b.json": ["plan", str(EX / "grpo-7b.yaml"), "--explain", "--no-timings"],
    "plan-grpo-7b-openrlhf.json": ["plan", str(EX / "grpo-7b.yaml"), "--framework",
                                   "openrlhf==0.11", "--explain", "--no-timings"],
    "plan-opd-8b-from-32b.json": ["plan", str(EX / "opd-8b-from-32b.yaml"), "--explain",
                                  "--no-timings"],
    "plan-sft-8b.json": ["plan", str(EX / "sft-8b.yaml"), "--explain", "--no-timings"],
    "plan-generate-32b.json": ["plan", str(EX / "generate-32b.yaml"), "--explain",
                               "--no-timings"],
    "pareto-grpo.json": ["pareto", str(EX / "grpo-7b.yaml"), "--points", "3"],
    "pareto-sft.json": ["pareto", str(EX / "sft-8b.yaml"), "--points", "4"],
    "whatif-grpo.json": ["whatif", str(EX / "grpo-7b.yaml"), "--price",
                         "capacity_type=spot *= 1.5", "--workers", "1", "--no-timings"],
    "reserve.json": ["reserve", str(EX / "portfolio.yaml"), "--no-timings"],
}


def same_figures(a: object, b: object) -> bool:
    """``a`` and ``b`` are the same JSON document, floats equal or
    :func:`~golden_compare.one_step` apart.

    The outputs round every float to 12 significant digits (ptplan.core.numbers), which takes
    away the last-bit differences of CPUs and numpy releases (2.3 → 2.4 moved
    ``makespan_hours`` from 2.32490192535172 to 2.3249019253517207; an AMD EPYC computed a
    campaign's 0.060475558692875686 as ...690): each pair is written as one number
    (2.32490192535, 0.0604755586929). Only a value
    within that noise of a rounding boundary can still come out one unit apart in its 12th
    digit; every printed figure (``"15.89"``: money is a string) and every other value must be
    equal."""
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(same_figures(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_figures(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float):
        return a == b or one_step(a, b)
    return type(a) is type(b) and a == b


def test_same_figures_tolerates_only_the_last_bits() -> None:
    assert same_figures({"h": 2.32490192535}, {"h": 2.32490192536})  # one unit in the 12th
    assert same_figures({"h": 0.0604755586929}, {"h": 0.060475558693})
    assert not same_figures({"h": 2.32490192535}, {"h": 2.32490192537})
    assert not same_figures({"h": 2.3249019253}, {"h": 2.3249019254})  # the 11th digit
    assert not same_figures({"h": 0.0}, {"h": 1e-300})
    assert not same_figures({"c": "15.89"}, {"c": "15.90"})
    assert not same_figures({"a": 1, "b": 2}, {"b": 2, "a": 1})  # key order is output too
    assert not same_figures([1.0], [1])
    assert not same_figures({"n": 1}, {"n": 1, "m": 2})


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_json(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PTPLAN_TODAY", TODAY)
    out = tmp_path / name
    result = CliRunner().invoke(app, [*CASES[name], "--format", "json", "-o", str(out)])
    assert result.exit_code == 0, result.output
    text = out.read_text(encoding="utf-8")
    golden = GOLDEN / name
    if UPDATE:
        golden.write_text(text, encoding="utf-8", newline="\n")
    expected = golden.read_text(encoding="utf-8")
    if text != expected and not same_figures(json.loads(text), json.loads(expected)):
        diff = "".join(difflib.unified_diff(expected.splitlines(True), text.splitlines(True),
                                            f"golden/{name}", f"now/{name}", n=2))
        pytest.fail(f"{name} differs from its golden file (PTPLAN_UPDATE_GOLDEN=1 regenerates "
                    f"once the change is intended):\n{diff[:6000]}")
