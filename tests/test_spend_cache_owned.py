"""The spend cache: another program's file is left byte for byte, a read creates nothing, a
damaged row (not JSON, a NaN cost) is one line that says to pull again."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from ptplan.core.errors import InputError, ProviderError
from ptplan.spend import bill

PULL = bill.BillPull(provider="aws", source="cost-explorer", by="hour", group_key="phase",
                     tags={"ptplan-run": "grpo"}, since="2026-12-01T00:00:00Z",
                     until="2026-12-02T00:00:00Z", as_of="2026-12-01T06:00:00Z",
                     rows=(bill.BillRow("2026-12-01T00:00:00Z", "2026-12-01T01:00:00Z",
                                        "update", "Spot", 12.5),))


def _digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def test_round_trip_and_read_creates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "spend.sqlite"
    assert bill.load(PULL.key(), path) is None and not path.exists()
    empty = tmp_path / "empty.sqlite"
    sqlite3.connect(empty).close()
    assert bill.load(PULL.key(), empty) is None
    with sqlite3.connect(empty) as con:  # still no table: the read created none
        assert con.execute("SELECT count(*) FROM sqlite_master").fetchone() == (0,)
    bill.store(PULL, path)
    assert bill.load(PULL.key(), path) == PULL


def test_other_programs_file_untouched(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE settings (k TEXT, v TEXT)")
    before = _digest(path)
    for call in (lambda: bill.load(PULL.key(), path), lambda: bill.store(PULL, path)):
        with pytest.raises(InputError, match="not ptplan's"):
            call()
        assert _digest(path) == before


@pytest.mark.parametrize("body", ["{not json", '{"rows": 3}', "[]",
                                  None])  # None: a NaN cost written by hand
def test_damaged_rows_are_one_line(tmp_path: Path, body: str | None) -> None:
    path = tmp_path / "spend.sqlite"
    bill.store(PULL, path)
    if body is None:
        good = PULL.to_json()
        good["rows"][0]["usd"] = "NaN"
        import json
        body = json.dumps(good).replace('"NaN"', "NaN")
    with sqlite3.connect(path) as con:
        con.execute("UPDATE pulls SET body = ?", (body,))
    with pytest.raises(InputError, match="pull again"):
        bill.load(PULL.key(), path)


def test_nan_pull_is_never_stored(tmp_path: Path) -> None:
    bad = bill.BillPull(**{**PULL.__dict__, "rows": (bill.BillRow(
        "2026-12-01T00:00:00Z", "2026-12-01T01:00:00Z", "update", "Spot", float("nan")),)})
    with pytest.raises(ProviderError, match="not a finite number"):
        bill.store(bad, tmp_path / "spend.sqlite")
    assert bill.load(bad.key(), tmp_path / "spend.sqlite") is None


def test_price_cache_leaves_another_programs_file(tmp_path: Path) -> None:
    """`prices refresh --cache app.db` / `--catalog cache` on another program's SQLite file."""
    from ptplan.providers.cache import Pull, load_cache_catalog, store_pull

    path = tmp_path / "app.db"
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE users (id INTEGER)")
    before = _digest(path)
    with pytest.raises(InputError, match="not ptplan's"):
        store_pull(Pull(provider="aws", as_of="2026-12-01T00:00:00Z", source="test",
                        regions=(), offers=(), reserved_rates=(), exclusions=()), path)
    with pytest.raises(InputError, match="not ptplan's"):
        load_cache_catalog(path)
    assert _digest(path) == before
