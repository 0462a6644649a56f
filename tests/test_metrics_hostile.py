"""Metrics readers under hostile input: one line, never a traceback, never a write, no secret
(the reader side of the safe-operations issue)."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ptplan.core.errors import InputError
from ptplan.ledger import metrics as mx


@pytest.mark.parametrize("step", ["NaN", "Infinity", "-Infinity", "-1", "2.5", "1e400"])
def test_bad_step_is_one_line(tmp_path: Path, step: str) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text('{"step": 1, "data": {"timing_s/gen": 3.0}}\n'
                    f'{{"step": {step}, "data": {{"timing_s/gen": 3.0}}}}\n')
    with pytest.raises(InputError, match="line 2: step"):
        mx.read_jsonl(path)


def test_non_utf8_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_bytes(b'{"step": 1, "data": {"timing_s/gen": 3.0}}\n\xff\xfe\x00garbage\n')
    with pytest.raises(InputError, match="not UTF-8"):
        mx.read_jsonl(path)


def test_nan_values_are_skipped_not_stored(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text('{"step": 1, "data": {"timing_s/gen": NaN, "timing_s/update_actor": 2}}\n')
    ms = mx.read_jsonl(path)
    assert [(m.name, m.value) for m in ms] == [("timing_s/update_actor", 2.0)]


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=400))
def test_jsonl_fuzz_never_traces_back(tmp_path: Path, blob: bytes) -> None:
    path = tmp_path / "fuzz.jsonl"
    path.write_bytes(blob)
    try:
        mx.read_jsonl(path)
    except InputError as exc:
        assert "\n" not in str(exc)


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=300))
def test_tensorboard_fuzz_never_traces_back(tmp_path: Path, blob: bytes) -> None:
    path = tmp_path / "events.out.tfevents.1"
    path.write_bytes(blob)
    try:
        mx.read_tensorboard(path)
    except InputError as exc:
        assert "\n" not in str(exc)


def test_mlflow_sqlite_uri_on_the_ledger_is_refused(tmp_path: Path) -> None:
    """An MLflow sqlite: URI that points at the ledger (or any other file) gets no MLflow
    schema: the file is left byte for byte."""
    from ptplan.ledger import db

    ledger = tmp_path / "ledger.sqlite"
    db.Ledger(f"sqlite:///{ledger}", write=True).close()
    before = hashlib.sha256(ledger.read_bytes()).hexdigest()
    with pytest.raises(InputError, match="not an MLflow tracking database"):
        mx.read_mlflow(f"sqlite:///{ledger}", "0" * 32)
    assert hashlib.sha256(ledger.read_bytes()).hexdigest() == before
    missing = tmp_path / "nothing.db"
    with pytest.raises(InputError, match="never creates"):
        mx.read_mlflow(f"sqlite:///{missing}", "0" * 32)
    assert not missing.exists()
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as con:
        con.execute("CREATE TABLE t (x)")
    with pytest.raises(InputError, match="not an MLflow"):
        mx.read_mlflow(f"sqlite:///{other}", "0" * 32)


def test_mlflow_server_password_never_printed(monkeypatch: pytest.MonkeyPatch) -> None:
    # MLflow retries a refused connection with backoff for minutes by default
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "5")
    uri = "http://alice:S3cretPw@127.0.0.1:9/"  # port 9: discard, nothing listens
    with pytest.raises(InputError) as info:
        mx.read_mlflow(uri, "0" * 32)
    assert "S3cretPw" not in str(info.value) and "alice" in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("blob", [b"usd,ptplan-project\n\xff\xfe,x\n", b"usd\x00,a\n1,2\n",
                                  b'usd,ptplan-project\n"unterminated,x\n'])
def test_hostile_bill_csv_is_one_line(tmp_path: Path, blob: bytes) -> None:
    from ptplan.ledger.records import bill_costs

    path = tmp_path / "bill.csv"
    path.write_bytes(blob)
    try:
        bill_costs(path, {"ptplan-project": "x", "ptplan-method": "rl"})
    except InputError as exc:
        assert "\n" not in str(exc) and "bill" in str(exc)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=300), st.sampled_from([".csv", ".json"]))
def test_bill_fuzz_never_traces_back(tmp_path: Path, blob: bytes, suffix: str) -> None:
    from ptplan.ledger.records import bill_costs

    path = tmp_path / f"bill{suffix}"
    path.write_bytes(blob)
    try:
        bill_costs(path, {"ptplan-project": "x", "ptplan-method": "rl"})
    except InputError as exc:
        assert "\n" not in str(exc)
