"""Fuzzing of what the operations commands read (the safe-operations issue): ledger files and
URLs (``runs list --ledger``), metrics (JSONL and TensorBoard through ``runs import-metrics``),
bills (``runs record --bill``), spend caches (``guard --cached``) and spend files
(``guard --spend-from FILE``), each derived from a valid input and then damaged.

The property is the CLI's contract, as in ``tests/test_fuzz.py``: every run ends with a known
exit code (0, 1, 2, 3; the guard's 10 and 11) and never with a traceback, an error is one
``error:`` line, and a password planted in a URL is never printed. Same profiles: CI runs
``FUZZ_EXAMPLES`` per target, ``benchmarks/fuzz_deep.py`` (profile ``deep``) 2,500.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_fuzz import FUZZ, _value
from typer.testing import CliRunner

from ptplan.cli.app import app

ROOT = Path(__file__).resolve().parent.parent
GRPO = str(ROOT / "examples" / "grpo-7b.yaml")
runner = CliRunner()
SECRET = "S3cretPw0rd"
KNOWN_EXITS = {0, 1, 2, 3, 10, 11}
OPS_EXAMPLES = 40
"""Examples per target in CI (each one runs a command that opens a ledger); the deep profile
runs as many as ``tests/test_fuzz.py``'s targets."""
FUZZ = settings(FUZZ, max_examples=settings.default.max_examples
                if settings.default.max_examples >= 1000 else OPS_EXAMPLES)


def _contract(args: list[str]) -> str:
    r = runner.invoke(app, args)
    assert r.exception is None or isinstance(r.exception, SystemExit), \
        f"{args}: traceback {r.exception!r}\n{r.output[-2000:]}"
    assert r.exit_code in KNOWN_EXITS, (args, r.exit_code, r.output[-2000:])
    errors = [line for line in r.output.splitlines() if line.startswith("error:")]
    assert len(errors) <= 1, r.output[-2000:]
    assert SECRET not in r.output
    return r.output


@pytest.fixture(scope="module")
def plan_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("plan") / "p.json"
    r = runner.invoke(app, ["plan", GRPO, "--format", "json", "--no-timings", "-o", str(path)])
    assert r.exit_code == 0, r.output
    return path


def _workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


_url_part = st.one_of(st.text(max_size=12), st.sampled_from(
    ["", "h", "127.0.0.1", ":", "@", "/", "%", "?x=1", "#", "\x00", "é", "99999", "-1", "abc"]))


@FUZZ
@given(st.sampled_from(["postgresql", "postgres", "sqlite", "mysql", "", "file", "postgresql+x",
                        "x"]), _url_part, _url_part, _url_part, _url_part)
def test_fuzz_ledger_urls(scheme: str, user: str, host: str, port: str, db: str) -> None:
    """Ledger URLs with a password planted: resolved, or refused in one line without the
    password (resolved in-process: connecting would try the network)."""
    from ptplan.core.errors import InputError
    from ptplan.core.redact import redact, redact_value
    from ptplan.ledger.db import resolve_url

    url = f"{scheme}://{user}:{SECRET}@{host}:{port}/{db}"
    try:
        resolve_url(url)
    except InputError as exc:
        assert SECRET not in str(exc) and "\n" not in str(exc), str(exc)
    # how ptplan quotes a URL the user gave, whitespace or control characters in it or not
    assert SECRET not in redact(repr(redact_value(url)))


@FUZZ
@given(st.binary(max_size=600), st.booleans())
def test_fuzz_ledger_files(tmp_path_factory: pytest.TempPathFactory, blob: bytes,
                           sqlite_header: bool) -> None:
    """A ledger path that holds anything: random bytes, or a SQLite header followed by them."""
    path = _workdir(tmp_path_factory) / "ledger.sqlite"
    path.write_bytes((b"SQLite format 3\x00" if sqlite_header else b"") + blob)
    before = path.read_bytes()
    _contract(["runs", "list", "--ledger", str(path)])
    assert path.read_bytes() == before


def _jsonl_lines() -> st.SearchStrategy[str]:
    good = {"step": 1, "data": {"timing_s/gen": 30.0, "timing_s/update_actor": 9.0}}
    return st.one_of(
        st.just(json.dumps(good)),
        st.builds(lambda v: json.dumps({"step": v, "data": good["data"]}, allow_nan=True),
                  _value),
        st.builds(lambda v: json.dumps({"step": 2, "data": {"timing_s/gen": v}},
                                       allow_nan=True), _value),
        st.text(max_size=40))


@FUZZ
@given(st.lists(_jsonl_lines(), max_size=6), st.binary(max_size=20))
def test_fuzz_metrics_jsonl(tmp_path_factory: pytest.TempPathFactory, lines: list[str],
                            tail: bytes) -> None:
    work = _workdir(tmp_path_factory)
    path = work / "m.jsonl"
    path.write_bytes("\n".join(lines).encode("utf-8", "surrogatepass") + tail)
    ledger = work / "ledger.sqlite"
    _contract(["runs", "record", "r1", "--model-family", "qwen-7b", "--method", "rl",
               "--cost", "update=10", "--ledger", str(ledger)])
    _contract(["runs", "import-metrics", "r1", "--jsonl", str(path), "--ledger", str(ledger)])


@FUZZ
@given(st.binary(max_size=400))
def test_fuzz_metrics_tensorboard(tmp_path_factory: pytest.TempPathFactory, blob: bytes
                                  ) -> None:
    work = _workdir(tmp_path_factory)
    path = work / "events.out.tfevents.1"
    path.write_bytes(blob)
    _contract(["runs", "import-metrics", "r1", "--tensorboard", str(path), "--ledger",
               str(work / "ledger.sqlite")])


_bill_rows = st.lists(st.dictionaries(
    st.sampled_from(["usd", "cost_usd", "ptplan-project", "ptplan-method", "ptplan-phase",
                     "ptplan-capacity-type", "other"]), _value, max_size=6), max_size=5)


@FUZZ
@given(_bill_rows, st.sampled_from([".json", ".csv"]), st.binary(max_size=30))
def test_fuzz_bills(tmp_path_factory: pytest.TempPathFactory, rows: list[dict], suffix: str,
                    noise: bytes) -> None:
    work = _workdir(tmp_path_factory)
    path = work / f"bill{suffix}"
    if suffix == ".json":
        path.write_bytes(json.dumps(rows, allow_nan=True, default=str).encode() + noise)
    else:
        keys = sorted({k for r in rows for k in r}) or ["usd"]
        text = ",".join(keys) + "\n" + "\n".join(
            ",".join(str(r.get(k, "")) for k in keys) for r in rows)
        path.write_bytes(text.encode("utf-8", "surrogatepass") + noise)
    _contract(["runs", "record", "r1", "--model-family", "qwen-7b", "--method", "rl",
               "--bill", str(path), "--ledger", str(work / "ledger.sqlite")])


@FUZZ
@given(_value, st.one_of(st.just("rows"), st.text(max_size=8)))
def test_fuzz_spend_files(tmp_path_factory: pytest.TempPathFactory, plan_file: Path,
                          value: object, where: str) -> None:
    """`guard --spend-from FILE` with a damaged spend report: never ok from a NaN."""
    work = _workdir(tmp_path_factory)
    good = {"hours": 10, "periods": [{"hours": 5, "actual_cumulative_usd": 100.0},
                                     {"hours": 10, "actual_cumulative_usd": 30000.0}]}
    for damaged in ({**good, "hours": value},
                    {**good, "periods": [*good["periods"],
                                         {"hours": 11, "actual_cumulative_usd": value}]},
                    {**good, where: value}):
        path = work / "s.json"
        path.write_text(json.dumps(damaged, allow_nan=True, default=str))
        out = _contract(["guard", str(plan_file), "--spend-from", str(path)])
        assert not out.startswith("ok"), out  # $30,000 spent: never ok, whatever follows


@FUZZ
@given(_value)
def test_fuzz_spend_cache_rows(tmp_path_factory: pytest.TempPathFactory, body: object) -> None:
    """A spend cache whose row was damaged: the pull is read whole or refused in one line."""
    from ptplan.core.errors import InputError
    from ptplan.spend.bill import BillPull, load

    cache = _workdir(tmp_path_factory) / "spend.sqlite"
    with sqlite3.connect(cache) as con:
        con.execute("CREATE TABLE pulls (key TEXT PRIMARY KEY, provider TEXT NOT NULL, "
                    "as_of TEXT NOT NULL, body TEXT NOT NULL)")
        con.execute("INSERT INTO pulls VALUES ('k', 'aws', '2026-12-01T00:00:00Z', ?)",
                    (json.dumps(body, allow_nan=True, default=str),))
    try:
        pull = load("k", cache)
    except InputError as exc:
        assert "\n" not in str(exc)
    else:
        assert isinstance(pull, BillPull)
