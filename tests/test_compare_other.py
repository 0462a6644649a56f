"""``ptplan compare`` counts each candidate's ``other_costs`` (issue #25): in its planned cost C
and so in its expected cost and P90, shown as their own column and footer line; one more run
(the rework without a prior, and a ``fraction_of_run`` rework) pays the recurring lines (human
review, ops per hour) again but not those bought once (data collection, annotation, A/B test).
Comparisons of specs without the section keep their JSON as it was (no new keys)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ptplan.cli.app import app
from ptplan.comparison.expect import Candidate, break_even

ROOT = Path(__file__).resolve().parent.parent
CMP = ROOT / "examples" / "compare"
SFT = CMP / "sft-8b-distilled-data.yaml"
OPD = CMP / "opd-8b-from-32b.yaml"
runner = CliRunner()


def test_hand_computed_other_costs_in_c_and_the_rework() -> None:
    """Run $100 + data generation $20 + other costs $50 (annotation $40 once, ops $10 that a
    rerun pays again): C = $170; without a prior the rework is one more run, 100 + 10 = $110.
    Against a candidate at C = $225: p* = (225 - 170) / 110 = 0.5. With p = 0.2 and a prior's
    rework of $110: E = 170 + 0.2 x 110 = $192, P90 = 170 + 110 = $280 (p > 0.1)."""
    a = Candidate("a", "sft", 100.0, 20.0, None, None, 50.0, 10.0)
    b = Candidate("b", "opd", 225.0)
    assert a.planned_usd == 170.0 and a.rework_for_breakeven == 110.0
    assert break_even([a, b], 0) == pytest.approx(0.5)
    assert break_even([a, b], 1) == pytest.approx((170.0 - 225.0) / 225.0)
    c = Candidate("a", "sft", 100.0, 20.0, 0.2, 110.0, 50.0, 10.0)
    assert c.expected() == pytest.approx(192.0) and c.p90 == pytest.approx(280.0)


@pytest.fixture(scope="module")
def opd_other(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, float, float]:
    """The OPD candidate with annotation $1,000 (once) and ops $10/h; its plan's total and
    hours as ``ptplan plan`` makes them."""
    from ptplan.planner.api import plan
    from ptplan.providers.registry import load_catalog
    from ptplan.spec.project import load_spec

    d = tmp_path_factory.mktemp("other")
    spec = d / "opd-other.yaml"
    spec.write_text(OPD.read_text(encoding="utf-8") + "other_costs:\n  annotation_usd: 1000\n"
                    "  ops_usd_per_hour: 10\n", encoding="utf-8")
    p = plan(load_spec(str(spec)), load_catalog("embedded"), explain=False, timings=False)
    assert p.other_cost_usd is not None
    return spec, float(p.total_cost_usd), p.makespan_hours


def _compare(tmp_path: Path, *args: str) -> dict:
    out = tmp_path / "cmp.json"
    result = runner.invoke(app, ["compare", *args, "--format", "json", "-o", str(out)])
    assert result.exit_code == 0, result.output
    return json.loads(out.read_text(encoding="utf-8"))


def test_compare_counts_other_costs(tmp_path: Path, opd_other: tuple[Path, float, float]) \
        -> None:
    spec, total, hours = opd_other
    risk = tmp_path / "risk.yaml"
    risk.write_text("methods:\n  opd: {p_forgetting: 0.2, rework: {fraction_of_run: 0.5}, "
                    "source: test}\n", encoding="utf-8")
    r = _compare(tmp_path, str(SFT), str(spec), "--risk", str(risk))
    sft, opd = r["candidates"]
    other = 1000.0 + 10.0 * hours
    assert opd["other_cost_usd"] == pytest.approx(other, abs=0.011)  # the plan rounds to cents
    assert opd["run_cost_usd"] == pytest.approx(total - other, abs=0.011)
    assert opd["planned_cost_usd"] == pytest.approx(total)  # the plan's total: C counts them
    assert [(o["name"], o["job"]) for o in opd["other_costs"]] == [("annotation", "run"),
                                                                    ("ops", "run")]
    rework = 0.5 * (total - 1000.0)  # one run: everything but the annotation bought once
    assert opd["prior"]["rework"]["cost_usd"] == pytest.approx(rework, abs=0.01)
    assert opd["expected_cost_usd"] == pytest.approx(total + 0.2 * rework, abs=0.01)
    assert opd["p90_cost_usd"] == pytest.approx(total + rework, abs=0.01)
    assert sft["other_cost_usd"] == 0.0 and sft["other_costs"] == []
    # without a prior for SFT its break-even is against OPD's expected cost
    assert sft["break_even_p"] == pytest.approx(
        (opd["expected_cost_usd"] - sft["planned_cost_usd"]) / sft["run_cost_usd"])
    table = runner.invoke(app, ["compare", str(SFT), str(spec), "--risk", str(risk)])
    assert table.exit_code == 0, table.output
    assert "other $" in table.output
    assert "opd-8b-from-32b: other costs annotation $1,000.00, ops $" in table.output


def test_compare_without_other_costs_adds_no_keys(tmp_path: Path) -> None:
    r = _compare(tmp_path, str(SFT), str(OPD))
    assert all("other_cost_usd" not in c and "other_costs" not in c for c in r["candidates"])
    table = runner.invoke(app, ["compare", str(SFT), str(OPD)])
    assert table.exit_code == 0 and "other $" not in table.output


def test_html_whole_cost_by_part_has_the_other_costs(
        tmp_path: Path, opd_other: tuple[Path, float, float]) -> None:
    """The HTML comparison's cost-by-part chart and table carry the other costs, so its parts
    add up to the planned cost again (run + data generation + other = C)."""
    from ptplan.report.html_methods import compare_doc
    from ptplan.report.tables_compare import compare_footer, compare_rows

    r = _compare(tmp_path, str(SFT), str(opd_other[0]))
    doc = compare_doc(r, compare_rows(r), compare_footer(r))
    chart = next(c for s in doc.sections for c in s.charts if c.title == "whole cost by part")
    values = chart.spec["data"]["values"]
    for c in r["candidates"]:
        mine = {v["part"]: v["usd"] for v in values if v["candidate"] == c["name"]}
        assert mine["other costs"] == c["other_cost_usd"]
        assert sum(mine.values()) == pytest.approx(c["planned_cost_usd"])
    assert chart.table.header == ["candidate", "run $", "data gen $", "other $", "p x rework $",
                                  "total $"]
