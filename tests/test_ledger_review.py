"""``runs review`` on the seeded ledger (tests/ledger_seed.py): figures computed by hand, on
SQLite and PostgreSQL; properties: rework is counted once, totals are sums of runs."""

from __future__ import annotations

from decimal import Decimal

import ledger_support
from hypothesis import given, settings
from hypothesis import strategies as st
from ledger_seed import SEED

from ptplan.ledger import db
from ptplan.ledger.records import Cost, RunRecord, load_runs, record
from ptplan.ledger.review import Thresholds, review

ledger_url = ledger_support.ledger_url
pg_server = ledger_support.pg_server


def seeded(url: str) -> list[RunRecord]:
    led = db.Ledger(url)
    with led.write() as conn:
        for r in SEED:  # causes before their repairs
            record(conn, r)
    with led.read() as conn:
        runs = load_runs(conn)
    led.close()
    return runs


def test_seeded_review_by_hand(ledger_url: str) -> None:
    runs = seeded(ledger_url)
    assert len(runs) == 20
    rv = review(runs, ("method", "family", "project"))
    by_id = {r["id"]: r for r in rv["runs"]}
    # rework to the direct cause only; a repair run's own TCO is 0 (its cost is its cause's)
    assert by_id["s1"]["rework_usd"] == "500.00" and by_id["s1"]["tco_usd"] == "1600.00"
    assert by_id["s2"]["rework_usd"] == "700.00" and by_id["s2"]["tco_usd"] == "2000.00"
    assert by_id["s2r"]["rework_usd"] == "200.00" and by_id["s2r"]["tco_usd"] == "200.00"
    assert by_id["s2rr"]["tco_usd"] == "0.00" and by_id["s1r"]["tco_usd"] == "0.00"
    assert by_id["q-s2"]["tco_usd"] == "1300.00" and by_id["q-s2"]["reworked_by"] == ["q-s2r"]
    # s2: 1300 actual on a 1000 plan and a 1200 budget, lost 4 points of MMLU
    assert by_id["s2"]["cost_variance"] == 0.3
    assert by_id["s2"]["flags"] == ["over_budget", "forgetting", "plan_variance"]
    assert by_id["s2"]["cost_per_point_usd"] == "325.00"  # 1300 / 4
    assert by_id["s1"]["eval_share"] == round(100 / 1100, 4)
    assert by_id["s1"]["hours_variance"] == 0.1
    assert by_id["s1"]["flags"] == ["forgetting"]
    assert by_id["r2"]["flags"] == ["target_missed", "plan_variance"]  # -1 point, +33 %
    assert by_id["r2"]["cost_per_point_usd"] is None
    assert by_id["q-s2"]["flags"] == ["forgetting"]  # +25 % exactly is not over 25 %
    assert by_id["q-s3"]["flags"] == ["plan_variance"]  # -50 %, no target recorded
    assert by_id["q-s2r"]["cost_variance"] is None  # no plan
    sft = {g["group"]: g for g in rv["groups"]["method"]}["sft"]
    assert (sft["runs"], sft["repair_runs"]) == (11, 4)
    assert sft["actual_usd"] == "7800.00" and sft["planned_usd"] == "7300.00"
    assert sft["cost_variance"] == round(7500 / 7300 - 1, 4)  # runs with a plan only
    assert sft["target_gain"] == 27.0  # 6 + 4 + 5 + 5 + 4 + 3 (repairs not counted)
    assert sft["cost_per_point_usd"] == "211.11"  # 5700 / 27
    assert sft["tco_per_point_usd"] == "266.67"  # (1600 + 2000 + 900 + 800 + 1300 + 600) / 27
    assert sft["rework_caused_usd"] == "1700.00"  # 500 + 700 + 200 + 300
    assert sft["rework_ratio"] == round(1700 / 6100, 4)
    assert sft["tco_usd"] == "7800.00" and sft["tco_per_run_usd"] == "1114.29"  # 7800 / 7
    assert sft["forgetting_runs"] == 3
    assert sft["eval_share"] == round(250 / 3300, 4)
    fam = {g["group"]: g for g in rv["groups"]["family"]}
    assert fam["llama-8b / opd"]["tco_per_point_usd"] == "293.33"  # 4400 / 15
    assert fam["llama-8b / sft"]["tco_per_point_usd"] == "300.00"  # 4500 / 15
    assert fam["llama-8b / rl"]["tco_per_point_usd"] == "777.78"  # 7000 / 9
    # s1r 500 + s2r 700 + s2rr 200 (the repair of a repair): the recommendation's 0.42x
    assert fam["llama-8b / sft"]["rework_caused_usd"] == "1400.00"
    assert fam["llama-8b / sft"]["rework_ratio"] == round(1400 / 3300, 4)
    # planned: sft 7300 + opd (2000 + 2000 + 1500 + 1200) + rl (3000 + 3000 + 2500 + 2500 + 2000)
    assert rv["totals"] == {"runs": 20, "actual_usd": "28850.00", "planned_usd": "27000.00",
                            "rework_usd": "1700.00", "tco_usd": "28850.00"}
    assert rv["recommendations"] == [{
        "model_family": "llama-8b", "instead_of": "sft", "prefer": "opd",
        "text": "2 of 3 SFT runs on llama-8b lost more than 2 points of general ability; "
                "their rework cost 0.42x their own cost ($1400.00 on $3300.00); TCO per "
                "target point: SFT $300.00, OPD $293.33 over 2 run(s): prefer OPD for llama-8b",
        "evidence_runs": ["o1", "o2", "s1", "s2", "s3"]}]


def test_no_recommendation_without_evidence() -> None:
    # qwen: 1 of 3 SFT runs forgot -> no call; a stricter threshold silences llama's too
    rv = review(SEED, th=Thresholds(forgetting_points=5.0))
    assert rv["recommendations"] == []


def _cents(s: str | None) -> int:
    return 0 if s is None else int(Decimal(s) * 100)


@st.composite
def forests(draw: st.DrawFn) -> list[RunRecord]:
    n = draw(st.integers(1, 12))
    out: list[RunRecord] = []
    for i in range(n):
        cause = draw(st.none() | st.integers(0, i - 1)) if i else None
        out.append(RunRecord(
            id=f"r{i}", recorded_on="2026-11-01", project=draw(st.sampled_from("ab")),
            method=draw(st.sampled_from(["sft", "rl", "opd"])), model_family="f",
            outcome="kept", repairs=None if cause is None else f"r{cause}",
            planned_cost_usd=draw(st.none() | st.sampled_from(["10.00", "99.99"])),
            costs=[Cost(phase="update", capacity_type="spot",
                        usd=f"{draw(st.integers(0, 10**7)) / 100:.2f}")]))
    return out


@settings(max_examples=150, deadline=None)
@given(runs=forests())
def test_rework_counted_once_and_totals_are_sums(runs: list[RunRecord]) -> None:
    rv = review(runs, ("method", "family", "project"))
    actual = sum(r.actual_cents for r in runs)
    rows = rv["runs"]
    assert sum(_cents(r["tco_usd"]) for r in rows) == actual
    assert _cents(rv["totals"]["tco_usd"]) == _cents(rv["totals"]["actual_usd"]) == actual
    # each repair run's cost is the rework of exactly one run, its direct cause
    repairs = [r for r in runs if r.repairs]
    assert sum(_cents(r["rework_usd"]) for r in rows) == sum(r.actual_cents for r in repairs)
    for r in rows:
        mine = [x for x in repairs if x.repairs == r["id"]]
        assert _cents(r["rework_usd"]) == sum(x.actual_cents for x in mine)
    for groups in rv["groups"].values():
        assert sum(g["runs"] for g in groups) == len(runs)
        assert sum(_cents(g["actual_usd"]) for g in groups) == actual
        assert sum(_cents(g["tco_usd"]) for g in groups) == actual
        assert sum(_cents(g["rework_caused_usd"]) for g in groups) == \
            _cents(rv["totals"]["rework_usd"])
