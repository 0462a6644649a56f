"""The ledger never touches a database that is not its own, never creates schema on a read,
and never prints a password (SQLite and PostgreSQL)."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import ledger_support
import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from ptplan.cli.app import app
from ptplan.core.errors import InputError
from ptplan.ledger import db

pg_server = ledger_support.pg_server
ledger_url = ledger_support.ledger_url
runner = CliRunner()


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _other_app_db(path: Path) -> Path:
    con = sqlite3.connect(path)
    con.executescript("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT);"
                      "INSERT INTO users (name) VALUES ('ada');"
                      "CREATE TABLE orders (id INTEGER PRIMARY KEY, total REAL);")
    con.close()
    return path


def _one_line_exit_2(result: object, *needles: str) -> str:
    out = result.output  # type: ignore[attr-defined]
    assert result.exit_code == 2, out  # type: ignore[attr-defined]
    assert "Traceback" not in out
    lines = [ln for ln in out.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, out
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("args", [["runs", "list"], ["runs", "review"],
                                  ["runs", "export", "--format", "csv"]])
def test_other_programs_sqlite_is_left_byte_for_byte(tmp_path: Path, args: list[str]) -> None:
    app_db = _other_app_db(tmp_path / "app.db")
    before = _digest(app_db)
    r = runner.invoke(app, [*args, "--ledger", str(app_db)])
    _one_line_exit_2(r, "app.db", "not ptplan's", "users")
    assert _digest(app_db) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]


def test_write_refused_too(tmp_path: Path) -> None:
    app_db = _other_app_db(tmp_path / "app.db")
    before = _digest(app_db)
    with pytest.raises(InputError, match="not ptplan's"):
        db.Ledger(f"sqlite:///{app_db}", write=True)
    assert _digest(app_db) == before


def test_ledger_tables_without_marker_refused(tmp_path: Path) -> None:
    fake = tmp_path / "fake.db"
    con = sqlite3.connect(fake)
    con.execute("CREATE TABLE runs (id TEXT)")
    con.close()
    before = _digest(fake)
    with pytest.raises(InputError, match="schema marker"):
        db.Ledger(f"sqlite:///{fake}", write=True)
    assert _digest(fake) == before


def test_read_creates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "ledger.sqlite"
    r = runner.invoke(app, ["runs", "list", "--ledger", str(path)])
    assert r.exit_code == 0, r.output
    assert not path.exists() and not path.parent.exists()
    empty = tmp_path / "empty.sqlite"
    sqlite3.connect(empty).close()  # a zero-byte file: a database with no tables
    before = _digest(empty)
    r = runner.invoke(app, ["runs", "list", "--ledger", str(empty)])
    assert r.exit_code == 0, r.output
    assert _digest(empty) == before


@pytest.mark.parametrize("junk", [b"\x00\xff" * 300, b"not a database at all\n" * 50])
def test_random_bytes_file(tmp_path: Path, junk: bytes) -> None:
    path = tmp_path / "junk.bin"
    path.write_bytes(junk)
    r = runner.invoke(app, ["runs", "list", "--ledger", str(path)])
    _one_line_exit_2(r, "junk.bin")
    assert path.read_bytes() == junk


@pytest.mark.parametrize("value", ["\x00\x01garbage", "postgres://u:S3cretPw@h:notaport/db",
                                   "mongodb://u:S3cretPw@h/db", "postgresql://u:S3cretPw@h:99x/d"])
def test_bad_ledger_values_one_line_no_secret(value: str) -> None:
    r = runner.invoke(app, ["runs", "list", "--ledger", value])
    line = _one_line_exit_2(r, "--ledger")
    assert "S3cretPw" not in r.output and "S3cretPw" not in line


def test_postgres_database_of_another_app_is_refused(pg_server: str) -> None:
    url = ledger_support.new_pg_database(pg_server)
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE invoices (id serial PRIMARY KEY, total numeric)")
    r = runner.invoke(app, ["runs", "list", "--ledger", url])
    _one_line_exit_2(r, "not ptplan's", "invoices")
    with pytest.raises(InputError, match="not ptplan's"):
        db.Ledger(url, write=True)
    with engine.connect() as conn:
        assert set(sa.inspect(conn).get_table_names()) == {"invoices"}
    engine.dispose()


def test_reads_on_an_empty_database_create_no_schema(ledger_url: str) -> None:
    led = db.Ledger(ledger_url, write=False)
    with led.read() as conn:
        assert conn.execute(sa.select(db.runs)).fetchall() == []
    led.close()
    path = db._sqlite_path(ledger_url)
    if path is not None:
        assert not path.exists()
    else:
        engine = sa.create_engine(ledger_url)
        with engine.connect() as conn:
            assert sa.inspect(conn).get_table_names() == []
        engine.dispose()
    db.Ledger(ledger_url, write=True).close()  # a write creates it
    reader = db.Ledger(ledger_url, write=False)
    assert not reader.empty
    reader.close()


def test_bill_of_a_look_alike_project_is_not_taken(tmp_path: Path) -> None:
    """`grpo#7b#math` and `grpo-7b-math` are different plans: the tags render wrote differ
    (a sanitised name carries a hash of the original), and a run recorded from its plan takes
    only the rows spelled exactly as its own deployment's tags (and plan prefix)."""
    import json

    from ptplan.ledger.records import bill_costs, cost_tags, tag_spellings
    from ptplan.planfile.tags import SANITIZE

    rows = []
    for project, usd in (("grpo#7b#math", 100), ("grpo-7b-math", 7)):
        for spell in SANITIZE.values():
            rows.append({"usd": usd, "ptplan-project": spell(project), "ptplan-method": "rl",
                         "ptplan-phase": "update", "ptplan-capacity-type": "spot"})
    bill = tmp_path / "bill.json"
    bill.write_text(json.dumps(rows))
    for project, usd in (("grpo#7b#math", 100), ("grpo-7b-math", 7)):
        spellings = tag_spellings(project, "rl", None)
        (cost,) = bill_costs(bill, cost_tags(project, "rl"), spellings)
        assert float(cost.usd) == usd * len(SANITIZE), project  # its own rows only
    # the prefix: a row of another plan of the same project is not this run's
    other = [{**rows[-1], "ptplan-plan": "grpo-7b-math-aaaaaa"}]
    bill.write_text(json.dumps(other))
    with pytest.raises(InputError, match="no row's tags match"):
        bill_costs(bill, cost_tags("grpo-7b-math", "rl"),
                   tag_spellings("grpo-7b-math", "rl", "grpo-7b-math-bbbbbb"))
