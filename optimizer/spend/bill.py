"""Billing rows and the spend cache.

A pull is every (period, group, purchase type) cost of the run between two instants, read from
the provider in full before anything is stored. The cache is SQLite (``spend.sqlite`` beside
the price cache, ``--cache PATH`` or ``$PTPLAN_SPEND_CACHE``), one row per pull key (provider,
tag filter, grouping, granularity, window); a pull replaces its key's row in **one
transaction**, so a failed or interrupted pull leaves the previous one whole (the same contract
as the price cache, ``ptplan.providers.cache.store_pull``).

The cache is ptplan's alone: a file that holds other tables is refused without a byte changed
(:mod:`ptplan.core.owned_db`); a read opens it read-only and creates nothing; a damaged row
(not JSON, a cost that is not a finite number) is one line that says to pull again.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import sqlite3
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ptplan.core.errors import InputError, ProviderError
from ptplan.core.owned_db import check_tables, sqlite_tables
from ptplan.providers.cache import default_cache_dir

ENV_VAR = "PTPLAN_SPEND_CACHE"
CACHE_FILE = "spend.sqlite"
UNCHANGED = "the spend cache is unchanged"
GRANULARITY = {"day": "DAILY", "hour": "HOURLY"}
PERIOD_HOURS = {"day": 24, "hour": 1}


@dataclass(frozen=True)
class BillRow:
    """Cost of one billing period (``start`` inclusive, ``end`` exclusive, ISO 8601 UTC) for
    one value of the grouping tag and one purchase type (AWS ``PURCHASE_TYPE``; GCP: spot or
    on demand from the SKU). ``group`` is ``""`` for cost that carries no grouping tag."""

    start: str
    end: str
    group: str
    purchase_type: str
    usd: float


@dataclass(frozen=True)
class BillPull:
    provider: str
    source: str
    by: str
    group_key: str
    tags: dict[str, str]
    since: str
    until: str
    as_of: str
    rows: tuple[BillRow, ...] = field(default=())
    estimated: bool = False

    def key(self) -> str:
        return pull_key(self.provider, self.tags, self.group_key, self.by, self.since,
                        self.until)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["rows"] = [asdict(r) for r in self.rows]
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> BillPull:
        """A pull from its JSON; every row's cost must be a finite number (else ValueError)."""
        rows = []
        for r in d["rows"]:
            row = BillRow(**r)
            if isinstance(row.usd, bool) or not isinstance(row.usd, int | float) \
                    or not math.isfinite(row.usd):
                raise ValueError(f"row {row.start} {row.group!r}: cost {row.usd!r} is not a "
                                 "finite number")
            rows.append(row)
        return cls(**{**d, "rows": tuple(rows)})


def pull_key(provider: str, tags: dict[str, str], group_key: str, by: str, since: str,
             until: str) -> str:
    return json.dumps([provider, sorted(tags.items()), group_key, by, since, until])


def parse_instant(value: str, option: str, by: str) -> dt.datetime:
    """``YYYY-MM-DD`` or ``YYYY-MM-DDTHH[:MM[:SS]][Z]`` (UTC) cut to the period (a day or an
    hour)."""
    text = value.strip().removesuffix("Z")
    try:
        t = dt.datetime.fromisoformat(text)
    except ValueError:
        raise InputError(f"{option}: {value!r} is not a date; use YYYY-MM-DD or "
                         "YYYY-MM-DDTHH:00Z (UTC)") from None
    t = t.replace(tzinfo=dt.UTC) if t.tzinfo is None else t.astimezone(dt.UTC)
    t = t.replace(minute=0, second=0, microsecond=0)
    return t.replace(hour=0) if by == "day" else t


def iso(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def resolve_cache(path: str | os.PathLike[str] | None = None) -> Path:
    """``--cache PATH`` > ``$PTPLAN_SPEND_CACHE`` > ``spend.sqlite`` in the user cache dir."""
    if path:
        return Path(path).expanduser()
    env = os.environ.get(ENV_VAR)
    return Path(env).expanduser() if env else default_cache_dir() / CACHE_FILE


_SCHEMA = ("CREATE TABLE IF NOT EXISTS pulls (key TEXT PRIMARY KEY, provider TEXT NOT NULL, "
           "as_of TEXT NOT NULL, body TEXT NOT NULL)")


def _open(path: Path, write: bool) -> sqlite3.Connection | None:
    """The cache, checked to be ptplan's (read-only first). A read of a cache without the
    table gives None and creates nothing; a write creates the file and the table."""
    if path.is_dir():
        raise InputError(f"spend cache {str(path)!r} is a directory; pass a file with --cache")
    tables: set[str] = set()
    if path.exists():
        tables = sqlite_tables(path, "spend cache")
        check_tables(tables, {"pulls"}, "spend cache", repr(str(path)))
    if not write and "pulls" not in tables:
        return None
    try:
        if write:
            path.parent.mkdir(parents=True, exist_ok=True)
            con = sqlite3.connect(str(path), isolation_level=None, timeout=30)
            con.execute(_SCHEMA)
        else:
            con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True,
                                  isolation_level=None, timeout=30)
    except (OSError, sqlite3.Error) as exc:
        raise ProviderError(f"spend cache {str(path)!r} cannot be opened ({exc}); choose a "
                            f"writable --cache path; {UNCHANGED}") from None
    return con


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number")


def store(pull: BillPull, path: Path) -> None:
    """Replace the pull's key in one transaction (a failure rolls back: the old row stays)."""
    try:
        body = json.dumps(pull.to_json(), sort_keys=True, allow_nan=False)
    except ValueError:
        raise ProviderError(f"the bill holds a cost that is not a finite number; nothing is "
                            f"stored ({UNCHANGED})") from None
    con = _open(path, write=True)
    assert con is not None
    try:
        con.execute("BEGIN IMMEDIATE")
        con.execute("DELETE FROM pulls WHERE key = ?", (pull.key(),))
        con.execute("INSERT INTO pulls (key, provider, as_of, body) VALUES (?, ?, ?, ?)",
                    (pull.key(), pull.provider, pull.as_of, body))
        con.execute("COMMIT")
    except sqlite3.Error as exc:
        con.execute("ROLLBACK") if con.in_transaction else None
        raise ProviderError(f"spend cache {str(path)!r}: write failed ({exc}); "
                            f"{UNCHANGED}") from None
    finally:
        con.close()


def load(key: str, path: Path) -> BillPull | None:
    if not path.is_file():
        return None
    con = _open(path, write=False)
    if con is None:
        return None
    try:
        row = con.execute("SELECT body FROM pulls WHERE key = ?", (key,)).fetchone()
    except sqlite3.Error as exc:
        raise InputError(f"spend cache {str(path)!r} is not a ptplan spend cache ({exc}); "
                         "remove it or choose another --cache path") from None
    finally:
        con.close()
    if row is None:
        return None
    try:
        return BillPull.from_json(json.loads(row[0], parse_constant=_reject_constant))
    except (ValueError, TypeError, KeyError) as exc:
        raise InputError(f"spend cache {str(path)!r}: the cached pull is damaged "
                         f"({str(exc)[:120]}); pull again without --cached") from None
