"""``ptplan compare --ledger URL`` (issue #18): forgetting priors observed in the run ledger.

The priors are computed by hand from the seeded ledger of tests/ledger_seed.py (forgetting:
a run's mean general change below -2 points, as ``runs review`` flags it), on SQLite and on
PostgreSQL; the command's expected costs follow from the plans' totals and those priors. A
family with too few runs falls back to the method's runs over every family and says so; a
method with no ledger run shows only its break-even; a risk file's prior wins over the
ledger's, and the output says so.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import ledger_support
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ledger_seed import SEED
from typer.testing import CliRunner

from ptplan.cli.app import app
from ptplan.ledger import db
from ptplan.ledger.priors import Priors, chain_cents, spec_shape
from ptplan.ledger.records import Cost, Result, RunRecord, load_runs, record

ledger_url = ledger_support.ledger_url
pg_server = ledger_support.pg_server

ROOT = Path(__file__).resolve().parent.parent
CMP = ROOT / "examples" / "compare"
SFT = CMP / "sft-8b-distilled-data.yaml"
OPD = CMP / "opd-8b-from-32b.yaml"
runner = CliRunner()


def seed(url: str, runs: list[RunRecord] = SEED) -> list[RunRecord]:
    led = db.Ledger(url)
    with led.write() as conn:
        for r in runs:  # causes before their repairs
            record(conn, r)
    with led.read() as conn:
        out = load_runs(conn)
    led.close()
    return out


def test_priors_by_hand(ledger_url: str) -> None:
    pr = Priors(seed(ledger_url))
    # llama-8b SFT: s1 (65 -> 62), s2 (65 -> 61) forgot, s3 (65 -> 64) did not: p = 2/3.
    # Rework = each forgetting run's repair chain: s1r $500; s2r $700 + s2rr $200 (the repair
    # of the repair) = $900; on their own cost $1,100 + $1,300: 1400 / 2400.
    o = pr.observed("sft", "llama-8b")
    assert o is not None and (o.level, o.family, o.n, o.forgot) == ("family", "llama-8b", 3, 2)
    assert o.p_forgetting == pytest.approx(2 / 3)
    assert (o.rework_cents, o.forgot_cents) == (140000, 240000)
    assert o.rework_fraction == pytest.approx(1400 / 2400)
    assert o.runs == ("s1", "s2", "s3") and o.fallback is None
    # qwen-7b SFT: q-s1, q-s2 have general results (q-s3 none; q-s2r is a repair): 2 < 3 ->
    # every family's SFT runs: s1, s2, s3, q-s1, q-s2 (70 -> 67.5), m-s1 (60 -> 58.5);
    # forgot s1, s2, q-s2: p = 3/6; rework 1400 + 300 on 1100 + 1300 + 1000
    o = pr.observed("sft", "qwen-7b")
    assert o is not None and (o.level, o.family, o.n, o.forgot) == ("method", None, 6, 3)
    assert o.rework_fraction == pytest.approx(1700 / 3400)
    assert o.fallback is not None and "2 sft run(s) with general results on qwen-7b" in \
        o.fallback and "fewer than 3" in o.fallback
    # with --min-runs 2 qwen's own: 1 of 2 forgot, rework 300 on 1000
    o = Priors(pr.runs, min_runs=2).observed("sft", "qwen-7b")
    assert o is not None and (o.level, o.n, o.forgot) == ("family", 2, 1)
    assert o.rework_fraction == pytest.approx(0.3)
    # OPD: o1, o2 on llama (2 < 3) -> o1, o2, q-o1 (m-o1 has no general result): none forgot,
    # so p = 0 and no rework was observed (None: nothing invented)
    o = pr.observed("opd", "llama-8b")
    assert o is not None and (o.level, o.n, o.forgot, o.p_forgetting) == ("method", 3, 0, 0.0)
    assert o.rework_fraction is None
    # a stricter threshold: s2 (-4) only on llama
    o = Priors(pr.runs, _forgetting_above(3.5)).observed("sft", "llama-8b")
    assert o is not None and (o.forgot, o.rework_cents, o.forgot_cents) == (1, 90000, 130000)
    assert pr.observed("generate", None) is None  # no run of the method at all


def _forgetting_above(points: float) -> Any:
    from ptplan.ledger.review import Thresholds

    return Thresholds(forgetting_points=points)


@pytest.fixture(scope="module")
def plans() -> dict[str, float]:
    from ptplan.planner.api import plan
    from ptplan.providers.registry import load_catalog
    from ptplan.spec.project import load_spec

    cat = load_catalog("embedded")
    return {p.stem: float(plan(load_spec(str(p)), cat, explain=False, timings=False)
                          .total_cost_usd)
            for p in (SFT, OPD, ROOT / "examples" / "generate-32b.yaml")}


def _compare(tmp_path: Path, *args: str, fmt: str = "json") -> Any:
    out = tmp_path / f"cmp.{fmt}"
    res = runner.invoke(app, ["-q", "compare", str(SFT), str(OPD), *args, "--format", fmt,
                              "-o", str(out)])
    assert res.exit_code == 0, res.output
    text = out.read_text(encoding="utf-8")
    return json.loads(text) if fmt == "json" else text


def test_compare_with_ledger_priors(ledger_url: str, tmp_path: Path,
                                   plans: dict[str, float]) -> None:
    """SFT at llama-8b's prior: E = C + (2/3)(1400/2400) run; OPD at the method-level p = 0:
    E = P90 = C, no rework observed, its break-even on one more run."""
    seed(ledger_url)
    r = _compare(tmp_path, "--ledger", ledger_url, "--family", "llama-8b")
    sft, opd = r["candidates"]
    run_sft = plans["sft-8b-distilled-data"]
    c_sft = run_sft + plans["generate-32b"]
    c_opd = plans["opd-8b-from-32b"]
    rework = 1400 / 2400 * run_sft
    assert sft["prior"]["origin"] == "ledger" and sft["prior"]["from"] == \
        "ledger family llama-8b"
    assert sft["prior"]["counts"]["n"] == 3 and sft["prior"]["counts"]["forgot"] == 2
    assert sft["prior"]["counts"]["family_from"] == "--family"
    assert "2 of 3 sft run(s) on llama-8b forgot" in sft["prior"]["source"]
    assert sft["prior"]["rework"]["cost_usd"] == pytest.approx(rework)
    assert sft["expected_cost_usd"] == pytest.approx(c_sft + 2 / 3 * rework)
    assert sft["p90_cost_usd"] == pytest.approx(c_sft + rework)  # p > 0.1
    assert sft["break_even_p"] == pytest.approx((c_opd - c_sft) / rework)
    assert opd["prior"]["from"] == "ledger method opd (every family)"
    assert opd["prior"]["p_forgetting"] == 0 and opd["prior"]["rework"] is None
    assert opd["expected_cost_usd"] == opd["p90_cost_usd"] == pytest.approx(c_opd)
    assert opd["break_even_rework_basis"] == "one more run"
    assert any("opd-8b-from-32b: 2 opd run(s) with general results on llama-8b (fewer than 3)"
               in n for n in r["notes"])
    assert r["ranked_by"] == "expected_cost_usd" and r["statement"] is None
    assert r["priors"].startswith("ledger ") and r["compare_schema_version"] == 3


def test_family_from_the_ledgers_runs_of_the_same_shape(tmp_path: Path) -> None:
    """Without --family: the family of the recorded runs whose spec trains the candidate's
    model shape; two families of that shape: method-level, and a note asks for --family."""
    text = SFT.read_text(encoding="utf-8")
    assert spec_shape(text) == (8.1907, 36, 4096)
    runs = [r.model_copy(update={"spec": text}) if r.model_family == "llama-8b" else r
            for r in SEED]
    url = f"sqlite:///{tmp_path / 'a.sqlite'}"
    seed(url, runs)
    r = _compare(tmp_path, "--ledger", url)
    sft = r["candidates"][0]
    assert sft["prior"]["from"] == "ledger family llama-8b"
    assert sft["prior"]["counts"]["family_from"] == "the ledger's runs of the same model shape"
    runs = [r.model_copy(update={"spec": text}) if r.model_family in ("llama-8b", "qwen-7b")
            else r for r in SEED]
    url = f"sqlite:///{tmp_path / 'b.sqlite'}"
    seed(url, runs)
    r = _compare(tmp_path, "--ledger", url)
    sft = r["candidates"][0]
    assert sft["prior"]["from"] == "ledger method sft (every family)"
    assert any("several families (llama-8b, qwen-7b)" in n and "--family" in n
               for n in r["notes"])


def test_no_runs_of_a_method_no_prior(tmp_path: Path) -> None:
    """A ledger of SFT runs only: OPD gets no prior (only its break-even); a ledger of RL runs
    only: the statement says no candidate has one."""
    url = f"sqlite:///{tmp_path / 'sft.sqlite'}"
    seed(url, [r for r in SEED if r.method == "sft"])
    r = _compare(tmp_path, "--ledger", url, "--family", "llama-8b")
    sft, opd = r["candidates"]
    assert sft["prior"] is not None and opd["prior"] is None
    assert opd["expected_cost_usd"] is None and opd["p90_cost_usd"] is None
    assert any("opd-8b-from-32b: no prior in the ledger (no opd run with general results)"
               in n for n in r["notes"])
    assert r["ranked_by"] == "planned_cost_usd"
    rl = f"sqlite:///{tmp_path / 'rl.sqlite'}"
    seed(rl, [r for r in SEED if r.method == "rl"])
    r = _compare(tmp_path, "--ledger", rl)
    assert r["statement"].startswith("no priors: ledger ") and "any candidate" in r["statement"]
    assert all(c["prior"] is None for c in r["candidates"])


def test_risk_file_wins_over_the_ledger(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'l.sqlite'}"
    seed(url)
    risk = tmp_path / "risk.yaml"
    risk.write_text("methods:\n  sft: {p_forgetting: 0.1, rework: {fraction_of_run: 1}, "
                    "source: team}\n", encoding="utf-8")
    r = _compare(tmp_path, "--ledger", url, "--family", "llama-8b", "--risk", str(risk))
    sft, opd = r["candidates"]
    assert sft["prior"]["origin"] == "risk_file" and sft["prior"]["p_forgetting"] == 0.1
    assert opd["prior"]["origin"] == "ledger"  # the ledger fills what the file leaves out
    assert any(n.startswith("sft-8b-on-32b-answers: the risk file's prior (methods.sft, "
                            "P(forget) 0.1) wins over the ledger's (ledger family llama-8b, "
                            "P(forget) 0.667") for n in r["notes"])
    assert r["priors"] == f"risk file {risk}; ledger {url}"


def test_table_and_markdown_show_counts_and_source(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'l.sqlite'}"
    seed(url)
    args = ["--ledger", url, "--family", "llama-8b"]
    for fmt in ("table", "markdown"):
        text = " ".join(_compare(tmp_path, *args, fmt=fmt).split())
        assert "0.667 (2/3)" in text and "0.000 (0/3)" in text
        assert "from ledger family llama-8b" in text
        assert "2 of 3 sft run(s) on llama-8b forgot" in text
        assert "the ledger's rework ratio" in text


@pytest.mark.parametrize(("args", "words"), [
    (["--family", "llama-8b"], "--family"),
    (["--ledger", "mysql://u@h/d"], "not a SQLite or PostgreSQL URL"),
    (["--ledger", "sqlite:///x.sqlite", "--min-runs", "0"], "--min-runs"),
    (["--ledger", "EMPTY"], "has no runs"),
])
def test_bad_ledger_options_are_one_line_exit_2(args: list[str], words: str,
                                                tmp_path: Path) -> None:
    """(An empty ledger is refused: most likely a wrong path, as `runs review` says.)"""
    args = [str(tmp_path / "empty.sqlite") if a == "EMPTY" else a for a in args]
    res = runner.invoke(app, ["-q", "compare", str(SFT), str(OPD), *args])
    assert res.exit_code == 2, res.output
    lines = [x for x in res.output.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and words in lines[0], res.output


@st.composite
def ledgers(draw: st.DrawFn) -> list[RunRecord]:
    """Repair forests over two families, with or without general results."""
    n = draw(st.integers(1, 14))
    out: list[RunRecord] = []
    for i in range(n):
        cause = draw(st.none() | st.integers(0, i - 1)) if i else None
        general = draw(st.none() | st.floats(-6, 3, allow_nan=False))
        out.append(RunRecord(
            id=f"r{i}", recorded_on="2026-11-01", project="p",
            method=draw(st.sampled_from(["sft", "opd"])),
            model_family=draw(st.sampled_from(["f", "g"])), outcome="kept",
            repairs=None if cause is None else f"r{cause}",
            costs=[Cost(phase="update", capacity_type="spot",
                        usd=f"{draw(st.integers(1, 10**6)) / 100:.2f}")],
            results=[] if general is None else
            [Result(kind="general", name="mmlu", before=60.0, after=60.0 + general)]))
    return out


@settings(max_examples=150, deadline=None)
@given(runs=ledgers())
def test_priors_are_consistent_with_the_runs(runs: list[RunRecord]) -> None:
    """Each repair run belongs to exactly one root's chain (so the chains of all root runs sum
    to all repair costs); the method level counts exactly the families' runs; 0 <= p <= 1."""
    pr = Priors(runs, min_runs=1)
    by_id = {r.id: r for r in runs}

    def root(r: RunRecord) -> str:
        while r.repairs:
            r = by_id[r.repairs]
        return r.id

    roots = [r for r in runs if not r.repairs]
    for r in roots:
        assert chain_cents(pr.by_id, r.id) == sum(x.actual_cents for x in runs
                                                  if x.repairs and root(x) == r.id)
    assert sum(chain_cents(pr.by_id, r.id) for r in roots) == \
        sum(x.actual_cents for x in runs if x.repairs)
    for method in ("sft", "opd"):
        whole = pr.observed(method, None)
        fams = [pr.observed(method, f) for f in ("f", "g")]
        counted = [r for r in roots if r.method == method and r.results]
        if not counted:
            assert whole is None
            continue
        assert whole is not None and whole.n == len(counted)
        assert 0 <= whole.p_forgetting <= 1
        assert whole.forgot == sum(r.results[0].after - r.results[0].before < -2
                                   for r in counted)
        fam_level = [o for o in fams if o is not None and o.level == "family"]
        assert sum(o.n for o in fam_level) == whole.n
        assert sum(o.forgot for o in fam_level) == whole.forgot
        assert sum(o.rework_cents for o in fam_level) == whole.rework_cents
        if whole.rework_fraction is not None:
            assert whole.rework_fraction >= 0
