"""``ptplan compare`` (issue #18, part 2): whole costs of candidate methods.

The arithmetic is checked on a case computed by hand (SFT cheaper per run, dearer in
expectation above a forgetting probability derived below); the command is checked on the
examples: its run costs are the plans' totals, its expectations and break-evens follow the
formulas, and the ranking flips exactly at the break-even. Bad risk files are one line, exit 2.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ptplan.cli.app import app
from ptplan.comparison.expect import Candidate, break_even, describe

ROOT = Path(__file__).resolve().parent.parent
CMP = ROOT / "examples" / "compare"
SFT = CMP / "sft-8b-distilled-data.yaml"
OPD = CMP / "opd-8b-from-32b.yaml"
runner = CliRunner()


def test_hand_computed_break_even() -> None:
    """SFT: run $100 + data generation $20 = $120 planned; it forgets with p and then costs one
    more run ($100). OPD: $200 planned, forgets with 0.1 and reworks half its run ($100), so
    E_opd = 200 + 0.1 x 100 = $210. SFT is cheaper in expectation while 120 + 100 p < 210, i.e.
    p < 0.9: the break-even is 0.9. At p = 0.95 SFT, cheaper per run, is dearer in expectation
    (120 + 95 = 215 > 210)."""
    for p_sft, sft_wins in ((0.85, True), (0.95, False)):
        sft = Candidate("sft", "sft", 100.0, 20.0, p_sft, 100.0)
        opd = Candidate("opd", "opd", 200.0, 0.0, 0.1, 100.0)
        assert sft.planned_usd < opd.planned_usd  # cheaper per run
        assert opd.expected() == pytest.approx(210.0)
        assert sft.expected() == pytest.approx(120.0 + 100.0 * p_sft)
        assert break_even([sft, opd], 0) == pytest.approx(0.9)
        assert (sft.expected() < opd.expected()) is sft_wins
        # OPD's own break-even: 200 + 100 p = E_sft  =>  p = (E_sft - 200) / 100
        assert break_even([sft, opd], 1) == pytest.approx((120.0 + 100.0 * p_sft - 200.0) / 100)
    # P90 of the two-point cost: the rework counts once p exceeds 0.1
    assert Candidate("a", "sft", 100.0, 0.0, 0.1, 50.0).p90 == 100.0
    assert Candidate("a", "sft", 100.0, 0.0, 0.11, 50.0).p90 == 150.0
    # without a prior: no expectation of its own, the break-even uses one more run
    bare = Candidate("b", "sft", 100.0, 20.0)
    assert bare.p90 is None and bare.expected() == 120.0
    assert break_even([bare, Candidate("o", "opd", 200.0)], 0) == pytest.approx(0.8)
    assert break_even([bare], 0) is None
    assert describe(0.8) == "p < 0.800"
    assert describe(-0.5).startswith("never") and describe(1.5).startswith("any p")


def _compare(tmp_path: Path, *args: str) -> dict:
    out = tmp_path / "cmp.json"
    result = runner.invoke(app, ["compare", str(SFT), str(OPD), *args, "--format", "json",
                                 "-o", str(out)])
    assert result.exit_code == 0, result.output
    return json.loads(out.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def plans() -> dict[str, float]:
    """The run totals as ``ptplan plan`` makes them (the generator's too)."""
    from ptplan.planner.api import plan
    from ptplan.providers.registry import load_catalog
    from ptplan.spec.project import load_spec

    cat = load_catalog("embedded")
    out = {}
    for path in (SFT, OPD, ROOT / "examples" / "generate-32b.yaml", CMP / "recovery-sft.yaml"):
        p = plan(load_spec(str(path)), cat, explain=False, timings=False)
        out[path.stem] = float(p.total_cost_usd)
    return out


def test_compare_without_priors(tmp_path: Path, plans: dict[str, float]) -> None:
    r = _compare(tmp_path)
    assert r["priors"] is None and r["statement"].startswith("no priors")
    sft, opd = r["candidates"]
    assert sft["run_cost_usd"] == plans["sft-8b-distilled-data"]
    assert sft["data_generation"]["cost_usd"] == plans["generate-32b"]
    assert sft["planned_cost_usd"] == pytest.approx(plans["sft-8b-distilled-data"]
                                                    + plans["generate-32b"])
    assert opd["data_generation"] is None and opd["run_cost_usd"] == plans["opd-8b-from-32b"]
    for c in (sft, opd):
        assert c["prior"] is None and c["expected_cost_usd"] is None
        assert c["p90_cost_usd"] is None and c["break_even_rework_basis"] == "one more run"
    # p* = (C_other - C_self) / one run
    assert sft["break_even_p"] == pytest.approx(
        (opd["planned_cost_usd"] - sft["planned_cost_usd"]) / sft["run_cost_usd"])
    assert opd["break_even_p"] == pytest.approx(
        (sft["planned_cost_usd"] - opd["planned_cost_usd"]) / opd["run_cost_usd"])
    assert 0 < sft["eval_share"] < 1
    assert r["ranked_by"] == "planned_cost_usd"


def _risk(tmp_path: Path, p_sft: float, p_opd: float = 0.05, sft_rework: str =
          "{fraction_of_run: 4.0}") -> Path:
    f = tmp_path / "risk.yaml"
    f.write_text(f"methods:\n  sft: {{p_forgetting: {p_sft}, rework: {sft_rework}, "
                 "source: test}\n"
                 f"  opd: {{p_forgetting: {p_opd}, rework: {{fraction_of_run: 0.5}}, "
                 "source: test}\n", encoding="utf-8")
    return f


def test_ranking_flips_at_the_break_even(tmp_path: Path, plans: dict[str, float]) -> None:
    """SFT is cheaper per run; with a rework of 4 runs it is dearer in expectation above
    p* = (E_opd - C_sft) / (4 x run_sft), E_opd = C_opd + 0.05 x 0.5 x C_opd: just below p*
    it ranks first, just above it second."""
    c_sft = plans["sft-8b-distilled-data"] + plans["generate-32b"]
    c_opd = plans["opd-8b-from-32b"]
    e_opd = c_opd * (1 + 0.05 * 0.5)
    rework = 4.0 * plans["sft-8b-distilled-data"]
    p_star = (e_opd - c_sft) / rework
    assert 0 < p_star < 1, "the examples make a case where the ranking can flip"
    r = _compare(tmp_path, "--risk", str(_risk(tmp_path, round(p_star - 0.01, 4))))
    sft, opd = r["candidates"]
    assert sft["break_even_p"] == pytest.approx(p_star)
    assert sft["expected_cost_usd"] == pytest.approx(c_sft + round(p_star - 0.01, 4) * rework)
    assert opd["expected_cost_usd"] == pytest.approx(e_opd)
    assert r["ranking"] == [sft["name"], opd["name"]] and r["ranked_by"] == "expected_cost_usd"
    assert sft["p90_cost_usd"] == pytest.approx(c_sft + rework)  # p > 0.1: the rework counts
    assert opd["p90_cost_usd"] == pytest.approx(c_opd)  # p = 0.05 <= 0.1
    r = _compare(tmp_path, "--risk", str(_risk(tmp_path, round(p_star + 0.01, 4))))
    assert r["ranking"] == [opd["name"], sft["name"]]


def test_rework_spec_is_planned_for_real(tmp_path: Path, plans: dict[str, float]) -> None:
    r = _compare(tmp_path, "--risk", str(CMP / "risk.yaml"))
    sft = r["candidates"][0]
    assert sft["prior"]["rework"]["kind"] == "spec"
    assert sft["prior"]["rework"]["cost_usd"] == plans["recovery-sft"]
    assert sft["prior"]["source"].startswith("illustrative")


def test_compare_table_markdown_and_chart(tmp_path: Path) -> None:
    args = ["compare", str(SFT), str(OPD), "--risk", str(CMP / "risk.yaml")]
    table = runner.invoke(app, args)
    assert table.exit_code == 0, table.output
    assert "cheapest while" in table.output and "source: illustrative" in table.output
    md = runner.invoke(app, [*args, "--format", "markdown"])
    assert md.output.startswith("# ptplan compare") or "# ptplan compare" in md.output
    svgs = []
    for n in (1, 2):
        chart = tmp_path / f"c{n}.svg"
        res = runner.invoke(app, ["-q", *args, "--chart", str(chart), "-o",
                                  str(tmp_path / "t.txt")])
        assert res.exit_code == 0, res.output
        svgs.append(chart.read_bytes())
    assert svgs[0] == svgs[1] and b"<svg" in svgs[0]


@pytest.mark.parametrize(("text", "words"), [
    ("methods:\n  sft: {p_forgetting: 1.5, rework: {fraction_of_run: 1}, source: x}\n",
     "less than or equal to 1"),
    ("methods:\n  sft: {p_forgetting: 0.2, rework: {fraction_of_run: 1}}\n", "source"),
    ("methods:\n  sft: {p_forgetting: 0.2, rework: {fraction_of_run: 1, spec: a.yaml}, "
     "source: x}\n", "exactly one of fraction_of_run or spec"),
    ("methods:\n  sft: {p_forgeting: 0.2, rework: {fraction_of_run: 1}, source: x}\n",
     "p_forgeting"),
    ("methods:\n  sftt: {p_forgetting: 0.2, rework: {fraction_of_run: 1}, source: x}\n",
     "sftt"),
    ("methods: {}\n", "no prior"),
    ("- 1\n- 2\n", "mapping"),
    ("methods:\n  sft: {p_forgetting: 0.2, rework: {spec: missing.yaml}, source: x}\n",
     "not found"),
])
def test_bad_risk_files_are_one_line_exit_2(tmp_path: Path, text: str, words: str) -> None:
    f = tmp_path / "risk.yaml"
    f.write_text(text, encoding="utf-8")
    result = runner.invoke(app, ["-q", "compare", str(SFT), str(OPD), "--risk", str(f)])
    assert result.exit_code == 2, result.output
    lines = [x for x in result.output.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert words in lines[0], lines[0]


def test_compare_needs_two_specs() -> None:
    one = runner.invoke(app, ["-q", "compare", str(SFT)])
    assert one.exit_code == 2 and "at least two specs" in one.output
