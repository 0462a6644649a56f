"""The ledger's storage on SQLite and PostgreSQL: migrations in one transaction, writes in one
transaction, concurrent writers, record → export round trips."""

from __future__ import annotations

import json
import multiprocessing
import shutil
import threading
from pathlib import Path

import ledger_support
import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ptplan.core.errors import InputError
from ptplan.ledger import db
from ptplan.ledger.records import (
    Cost,
    Result,
    RunRecord,
    export_json,
    load_runs,
    record,
)

ledger_url = ledger_support.ledger_url  # fixtures: SQLite and PostgreSQL
pg_server = ledger_support.pg_server


def run(i: str, **kw: object) -> RunRecord:
    base: dict[str, object] = {
        "id": i, "recorded_on": "2026-11-02", "project": "p", "method": "sft",
        "model_family": "llama-8b", "outcome": "kept", "planned_cost_usd": "100.00",
        "planned_hours": 2.0, "costs": [Cost(phase="update", capacity_type="spot",
                                             usd="90.50")],
        "results": [Result(kind="target", name="gsm8k", before=1.0, after=2.5)]}
    base.update(kw)
    return RunRecord.model_validate(base)


def tables(url: str) -> set[str]:
    engine = sa.create_engine(url)
    try:
        return set(sa.inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_open_migrates_to_head(ledger_url: str) -> None:
    led = db.Ledger(ledger_url)
    with led.read() as conn:
        assert db.current_revision(conn) == db.HEAD
    assert {"runs", "run_costs", "run_results", "run_metrics", "alembic_version"} \
        <= tables(ledger_url)
    db.Ledger(ledger_url)  # re-opening an up-to-date ledger changes nothing
    led.close()


def test_failed_migration_leaves_the_database_as_it_was(ledger_url: str,
                                                        tmp_path: Path) -> None:
    led = db.Ledger(ledger_url)
    with led.write() as conn:
        record(conn, run("a"))
    scripts = tmp_path / "migrations"
    shutil.copytree(db.MIGRATIONS, scripts)
    (scripts / "versions" / "0002_broken.py").write_text(
        '"""A migration that fails half-way."""\n'
        "import sqlalchemy as sa\nfrom alembic import op\n"
        "revision = '0002'\ndown_revision = '0001'\nbranch_labels = None\ndepends_on = None\n"
        "def upgrade():\n"
        "    op.create_table('half_done', sa.Column('x', sa.Integer))\n"
        "    op.add_column('runs', sa.Column('extra', sa.Integer))\n"
        "    op.execute('INSERT INTO no_such_table VALUES (1)')\n"
        "def downgrade():\n    pass\n", encoding="utf-8")
    with pytest.raises(sa.exc.DBAPIError):
        db.migrate(led.engine, scripts)
    assert "half_done" not in tables(ledger_url)
    with led.read() as conn:
        assert db.current_revision(conn) == "0001"
        cols = {c["name"] for c in sa.inspect(conn).get_columns("runs")}
        assert "extra" not in cols
        assert [r.id for r in load_runs(conn)] == ["a"]
    led.close()


def test_a_failed_write_leaves_nothing(ledger_url: str) -> None:
    led = db.Ledger(ledger_url)
    with led.write() as conn:
        record(conn, run("a"))
    before = _dump(led)
    with pytest.raises(InputError, match="already in the ledger"), led.write() as conn:
        record(conn, run("b"))  # written, then the transaction fails
        record(conn, run("a"))
    with pytest.raises(InputError, match="unknown run 'zz'"), led.write() as conn:
        record(conn, run("c", repairs="zz"))
    assert _dump(led) == before
    led.close()


def _dump(led: db.Ledger) -> str:
    with led.read() as conn:
        return export_json(load_runs(conn))


def _writer(url: str, prefix: str, n: int) -> None:
    led = db.Ledger(url)  # every writer migrates on open too: the first opens race
    for k in range(n):
        with led.write() as conn:
            record(conn, run(f"{prefix}-{k}", costs=[Cost(phase="update", capacity_type="spot",
                                                           usd=f"{k}.01")]))
    led.close()


def test_concurrent_threads_never_lose_a_record(ledger_url: str) -> None:
    threads = [threading.Thread(target=_writer, args=(ledger_url, f"t{i}", 6)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    led = db.Ledger(ledger_url)
    with led.read() as conn:
        ids = {r.id for r in load_runs(conn)}
        n_costs = conn.execute(sa.select(sa.func.count()).select_from(db.costs)).scalar()
    assert ids == {f"t{i}-{k}" for i in range(6) for k in range(6)}
    assert n_costs == 36
    led.close()


def test_concurrent_processes_never_lose_a_record(ledger_url: str) -> None:
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(ledger_url, f"p{i}", 5)) for i in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    led = db.Ledger(ledger_url)
    with led.read() as conn:
        assert {r.id for r in load_runs(conn)} == {f"p{i}-{k}" for i in range(4)
                                                  for k in range(5)}
    led.close()


money = st.integers(min_value=0, max_value=10**11).map(lambda c: f"{c // 100}.{c % 100:02d}")
finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False).map(lambda x: round(x, 6))
phase = st.sampled_from(["rollout", "scoring", "update", "eval", "rollout-scoring", "all",
                         "update-eval"])
cap = st.sampled_from(["on_demand", "spot", "reserved", "mixed"])
name = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1,
               max_size=20)
records = st.builds(
    lambda i, costs, results, planned, hours, outcome, note, plan: RunRecord(
        id=f"r{i}", recorded_on="2026-10-31", project="proj ü", method="rl", algorithm="grpo",
        model_family="qwen-7b", outcome=outcome, planned_cost_usd=planned, planned_hours=hours,
        budget_usd=planned, wall_hours=hours, node_hours=None,
        tags={"ptplan-project": "proj"},
        costs=[Cost(phase=p, capacity_type=c, usd=u) for (p, c), u in costs.items()],
        results=[Result(kind=k, name=n, before=b, after=a) for (k, n), (b, a) in
                 results.items()], plan=plan, spec=None, note=note),
    st.integers(0, 10**6),
    st.dictionaries(st.tuples(phase, cap), money, max_size=5).map(
        lambda d: dict(sorted(d.items()))),
    st.dictionaries(st.tuples(st.sampled_from(["general", "target"]), name),
                    st.tuples(finite, finite), max_size=4).map(lambda d: dict(sorted(d.items()))),
    st.none() | money, st.none() | st.floats(0, 1e4, allow_nan=False), st.sampled_from(
        ["kept", "rolled_back", "abandoned"]), name,
    st.none() | st.just({"steps": 3, "phases": [], "pools": []}))


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rs=st.lists(records, min_size=1, max_size=4, unique_by=lambda r: r.id))
def test_record_then_export_round_trips(tmp_path: Path, rs: list[RunRecord]) -> None:
    url = f"sqlite:///{tmp_path / 'rt.sqlite'}"
    Path(tmp_path / "rt.sqlite").unlink(missing_ok=True)
    led = db.Ledger(url)
    with led.write() as conn:
        for r in rs:
            record(conn, r)
    with led.read() as conn:
        back = load_runs(conn)
    led.close()
    key = sorted(rs, key=lambda r: (r.recorded_on, r.id))
    assert [b.model_dump() for b in back] == [
        r.model_copy(update={"costs": sorted(r.costs, key=lambda c: (c.phase, c.capacity_type)),
                             "results": sorted(r.results, key=lambda x: (x.kind, x.name))}
                     ).model_dump() for r in key]
    exported = json.loads(export_json(back))["runs"]
    assert [RunRecord.model_validate(e) for e in exported] == back


def test_round_trip_on_postgresql(pg_server: str) -> None:
    url = ledger_support.new_pg_database(pg_server)
    r = run("pg-1", costs=[Cost(phase="rollout-scoring", capacity_type="spot",
                                usd="123456789.99")], note="naïve ☃",
            results=[Result(kind="general", name="mmlu", before=65.25, after=-1e-9)])
    led = db.Ledger(url)
    with led.write() as conn:
        record(conn, r)
    with led.read() as conn:
        assert load_runs(conn) == [r]
    led.close()


def test_ledger_location(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(db.ENV, str(tmp_path / "env.sqlite"))
    assert db.resolve_url(None) == f"sqlite:///{(tmp_path / 'env.sqlite').resolve()}"
    assert db.resolve_url(str(tmp_path / "x.db")).endswith("x.db")
    assert db.resolve_url("postgresql://u@h/d") == "postgresql+psycopg://u@h/d"
    monkeypatch.delenv(db.ENV)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert db.resolve_url(None).endswith("/ptplan/ledger.sqlite")
    with pytest.raises(InputError, match="not a SQLite or PostgreSQL URL"):
        db.resolve_url("mysql://u@h/d")
    with pytest.raises(InputError, match="is a directory"):
        db.resolve_url(str(tmp_path))
