"""The local price cache: live pulls stored in SQLite, read back as ``--catalog cache``.

Where: ``--cache PATH``, else ``$PTPLAN_CACHE``, else ``prices.sqlite`` in the user cache
directory, ``platformdirs.user_cache_dir("ptplan")`` (``$XDG_CACHE_HOME/ptplan``, by default
``~/.cache/ptplan``, on Linux; ``~/Library/Caches/ptplan`` on macOS; ``ptplan/ptplan/Cache``
under ``%LOCALAPPDATA%`` on Windows). A file ending in ``.sqlite``/``.sqlite3``/``.db`` can be
passed directly as ``--catalog PATH``.

Tables: ``offers`` and ``reserved_rates`` (one row per normalised
:class:`~ptplan.providers.base.Offer` / :class:`~ptplan.providers.base.ReservedRate`, each with its
``as_of``
and ``source``), ``exclusions`` (prices that could not become offers, with the reason),
``pulls`` (per provider and region: when and from where it was pulled) and ``meta``
(``schema_version``).

Refresh contract (:func:`store_pull`): an adapter first pulls *everything* into memory (a
:class:`Pull`); only a complete pull reaches the cache, written in **one SQLite transaction**
that replaces the provider's rows (or, for a pull limited to some regions, the provider's rows in
those regions). A failed or interrupted pull, or a failure during the write, leaves the previous
catalog whole (SQLite rolls the transaction back, also after a crash, through its journal);
other providers' rows are never touched.

Reading (:func:`load_cache_catalog`): a :class:`~ptplan.providers.base.Catalog` named ``cache`` (or
``cache:<file name>`` for an explicit file) whose ``as_of`` is the **oldest** pull in it, so a
plan states the age of its stalest price and the usual staleness warning applies. Storage tiers
and egress rates are not pulled live: the embedded reference values (REFERENCE_FACTS.md) are
attached, as in the embedded catalog; so are the embedded capacity block rates
(:func:`ptplan.providers.blocks.embedded_block_offers`, for the cached on-demand instance types),
under the live booked-capacity prices of ``block_offers`` (:mod:`ptplan.providers.cache_blocks`).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import platformdirs

from ptplan.core.errors import InputError, ProviderError
from ptplan.core.owned_db import check_tables, sqlite_tables
from ptplan.providers.base import CACHE_SUFFIXES as CACHE_SUFFIXES  # re-exported
from ptplan.providers.base import Catalog, EgressRate, Offer, ReservedRate, StorageTier
from ptplan.providers.blocks import embedded_block_offers
from ptplan.providers.cache_blocks import (
    BlockPull,
    merge,
    offer_of,
    read_rows,
    replace_blocks,
    row_of,
)
from ptplan.providers.cache_rows import OWN_TABLES, BlockRow, OfferRow, PullRow, RateRow, check_row

ENV_VAR = "PTPLAN_CACHE"
CACHE_FILE = "prices.sqlite"
SCHEMA_VERSION = "1"
UNCHANGED = "the cache is unchanged"
"""How every failed refresh ends its one-line message: nothing was written."""

ProgressFn = Callable[[str, int, "int | None"], None]
"""``progress(label, done, total)``: called by adapters after each request (total None when the
number of pages is not known in advance)."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS pulls (
    provider TEXT NOT NULL, region TEXT NOT NULL, as_of TEXT NOT NULL, source TEXT NOT NULL,
    notes TEXT NOT NULL, PRIMARY KEY (provider, region));
CREATE TABLE IF NOT EXISTS offers (
    provider TEXT NOT NULL, region TEXT NOT NULL, zone TEXT NOT NULL,
    instance_type TEXT NOT NULL, gpu TEXT NOT NULL, gpus_per_node INTEGER NOT NULL,
    capacity_type TEXT NOT NULL, usd_per_hour REAL NOT NULL CHECK (usd_per_hour >= 0),
    vcpus REAL, memory_gib REAL, interruptions_per_hour REAL, max_nodes INTEGER,
    as_of TEXT NOT NULL, source TEXT NOT NULL, note TEXT NOT NULL,
    PRIMARY KEY (provider, region, zone, instance_type, capacity_type));
CREATE TABLE IF NOT EXISTS reserved_rates (
    provider TEXT NOT NULL, region TEXT NOT NULL, instance_type TEXT NOT NULL,
    term_years INTEGER NOT NULL, offering_class TEXT NOT NULL, purchase_option TEXT NOT NULL,
    usd_per_hour REAL NOT NULL CHECK (usd_per_hour >= 0), upfront_usd REAL NOT NULL,
    recurring_usd_per_hour REAL, assumption INTEGER NOT NULL,
    as_of TEXT NOT NULL, source TEXT NOT NULL,
    PRIMARY KEY (provider, region, instance_type, term_years, offering_class, purchase_option));
CREATE TABLE IF NOT EXISTS exclusions (
    provider TEXT NOT NULL, region TEXT NOT NULL, reason TEXT NOT NULL,
    as_of TEXT NOT NULL, source TEXT NOT NULL);
"""


@dataclass(frozen=True)
class Pull:
    """A complete pull of one provider (built in memory before anything is written).

    ``regions`` empty: the pull covers the whole provider and replaces all its rows; otherwise
    it replaces only the rows of those regions."""

    provider: str
    as_of: str
    source: str
    regions: tuple[str, ...]
    offers: tuple[Offer, ...]
    reserved_rates: tuple[ReservedRate, ...]
    exclusions: tuple[str, ...]
    notes: tuple[str, ...] = ()


def utc_now(now: dt.datetime | None = None) -> str:
    """``as_of`` stamp of a pull: UTC, ISO 8601 to the second (``2026-05-01T12:00:00Z``)."""
    stamp = (now or dt.datetime.now(dt.UTC)).astimezone(dt.UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%SZ")


def default_cache_dir() -> Path:
    """The user cache directory of ptplan (platformdirs: XDG on Linux, the OS's elsewhere)."""
    return Path(platformdirs.user_cache_dir("ptplan"))


def resolve_cache_path(path: str | os.PathLike[str] | None = None) -> Path:
    """``--cache PATH`` > ``$PTPLAN_CACHE`` > the user cache directory."""
    if path:
        return Path(path).expanduser()
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser()
    return default_cache_dir() / CACHE_FILE


def _region_of_exclusion(text: str, regions: tuple[str, ...]) -> str:
    return next((r for r in regions if f" {r}" in text or f"{r}/" in text), "")


OFFER_COLUMNS: tuple[str, ...] = (
    "provider", "region", "zone", "instance_type", "gpu", "gpus_per_node", "capacity_type",
    "usd_per_hour", "vcpus", "memory_gib", "interruptions_per_hour", "max_nodes", "as_of",
    "source", "note")
"""The ``offers`` columns: :class:`~ptplan.providers.base.Offer` fields of the same names."""
RATE_COLUMNS: tuple[str, ...] = (
    "provider", "region", "instance_type", "term_years", "offering_class", "purchase_option",
    "usd_per_hour", "upfront_usd", "recurring_usd_per_hour", "assumption", "as_of", "source")
"""The ``reserved_rates`` columns: :class:`~ptplan.providers.base.ReservedRate` fields."""


def _insert(table: str, columns: tuple[str, ...]) -> str:
    return (f"INSERT INTO {table} ({', '.join(columns)}) "
            f"VALUES ({', '.join(':' + c for c in columns)})")


def _refresh_fix(provider: str | None = None) -> str:
    return f"`ptplan prices refresh --provider {provider or 'aws|gcp'}`"


@contextmanager
def _connect(path: Path, write: bool) -> Iterator[sqlite3.Connection]:
    shown = repr(str(path))
    if path.is_dir():
        raise InputError(f"price cache {shown} is a directory; pass the cache file (for "
                         f"example {str(path / CACHE_FILE)!r}) with --cache or "
                         f"${ENV_VAR}")
    if write and path.exists() and not os.access(path, os.W_OK):
        raise ProviderError(f"price cache {shown} is read-only; make it writable (chmod u+w) "
                            f"or refresh into another file with --cache; {UNCHANGED}")
    if write and not path.exists() and path.parent.is_dir() \
            and not os.access(path.parent, os.W_OK | os.X_OK):
        raise ProviderError(f"price cache directory {str(path.parent)!r} is read-only; "
                            f"choose a writable --cache path or ${ENV_VAR}; {UNCHANGED}")
    if path.is_file():  # another program's database is left byte for byte (read-only look)
        check_tables(sqlite_tables(path, "price cache"), OWN_TABLES, "price cache", shown)
    if write:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(f"--cache: cannot create {str(path.parent)!r} ({exc.strerror}); "
                             f"choose a writable path with --cache or ${ENV_VAR}") from None
    elif not path.is_file():
        raise InputError(f"price cache {str(path)!r} does not exist: run `ptplan prices refresh "
                         "--provider aws|gcp` first, or use --catalog embedded")
    try:
        uri = path.resolve().as_uri() + ("" if write else "?mode=ro")
        con = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=30)
    except sqlite3.Error as exc:
        raise InputError(f"--cache: cannot open {str(path)!r} ({exc}); choose a writable "
                         "path") from None
    con.row_factory = sqlite3.Row
    try:
        yield con
    except sqlite3.OperationalError as exc:
        if write and "readonly" in str(exc).replace("-", "").replace(" ", ""):
            raise ProviderError(f"price cache {shown} is read-only ({exc}); make it and its "
                                "directory writable or refresh into another file with "
                                f"--cache; {UNCHANGED}") from None
        raise InputError(f"price cache {shown} is unreadable or not a ptplan price cache "
                         f"({exc}); remove it or choose another --cache path") from None
    except sqlite3.DatabaseError as exc:
        raise InputError(f"price cache {str(path)!r} is unreadable or not a ptplan price cache "
                         f"({exc}); remove it or choose another --cache path") from None
    finally:
        con.close()


def _schema_version(con: sqlite3.Connection) -> str | None:
    row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return None if row is None else str(row["value"])


def _check_schema(con: sqlite3.Connection, path: Path) -> None:
    version = _schema_version(con)
    if version != SCHEMA_VERSION:
        raise InputError(f"price cache {str(path)!r} has schema {version or 'none'!r}, "
                         f"this ptplan reads {SCHEMA_VERSION!r}; refresh into a new --cache path")


def _validate_pull(pull: Pull) -> None:
    """Every row of a pull through its model before anything is written."""
    problems = [check_row(OfferRow, "offers", {c: getattr(o, c) for c in OFFER_COLUMNS})
                for o in pull.offers]
    problems += [check_row(RateRow, "reserved_rates", {c: getattr(r, c) for c in RATE_COLUMNS})
                 for r in pull.reserved_rates]
    problem = next((p for p in problems if p), None)
    if problem:
        raise ProviderError(f"the {pull.provider} prices could not be stored ({problem}); "
                            f"{UNCHANGED}")


def store_pull(pull: Pull | BlockPull, path: str | os.PathLike[str] | None = None) -> Path:
    """Write a complete pull atomically (one transaction); returns the cache path. A
    :class:`~ptplan.providers.cache_blocks.BlockPull` (live booked-capacity prices) replaces only
    the
    provider's ``block_offers`` rows."""
    target = resolve_cache_path(path)
    if isinstance(pull, BlockPull):
        problem = next((p for p in (check_row(BlockRow, "block_offers", row_of(o))
                                    for o in pull.offers) if p), None)
        if problem:
            raise ProviderError(f"the {pull.provider} prices could not be stored ({problem}); "
                                f"{UNCHANGED}")
    else:
        _validate_pull(pull)
    with _connect(target, write=True) as con:
        con.execute("BEGIN IMMEDIATE")
        try:
            for statement in _SCHEMA.split(";"):  # not executescript: it would COMMIT
                if statement.strip():
                    con.execute(statement)
            if _schema_version(con) not in (None, SCHEMA_VERSION):
                _check_schema(con, target)
            con.execute("INSERT OR IGNORE INTO meta (key, value) "
                        "VALUES ('schema_version', :version)", {"version": SCHEMA_VERSION})
            if isinstance(pull, BlockPull):
                replace_blocks(con, pull)
            else:
                _replace(con, pull)
            con.execute("COMMIT")
        except sqlite3.IntegrityError as exc:
            con.execute("ROLLBACK")
            raise ProviderError(f"the {pull.provider} prices could not be stored ({exc}: a "
                                f"negative price or a repeated offer); {UNCHANGED}") from None
        except BaseException:
            con.execute("ROLLBACK")
            raise
    return target


def _replace(con: sqlite3.Connection, pull: Pull) -> None:
    params = {"provider": pull.provider, **{f"region{i}": r for i, r in enumerate(pull.regions)}}
    where = "provider = :provider"
    if pull.regions:
        where += f" AND region IN ({', '.join(f':region{i}' for i in range(len(pull.regions)))})"
    for table in ("offers", "reserved_rates", "exclusions", "pulls"):
        con.execute(f"DELETE FROM {table} WHERE {where}", params)
    _insert_offers(con, pull.offers)
    _insert_rates(con, pull.reserved_rates)
    common = {"provider": pull.provider, "as_of": pull.as_of, "source": pull.source}
    con.executemany(
        _insert("exclusions", ("provider", "region", "reason", "as_of", "source")),
        [{**common, "region": _region_of_exclusion(text, pull.regions), "reason": text}
         for text in pull.exclusions])
    notes = json.dumps(list(pull.notes))
    con.executemany(_insert("pulls", ("provider", "region", "as_of", "source", "notes")),
                    [{**common, "region": r, "notes": notes} for r in pull.regions or ("*",)])


def _insert_offers(con: sqlite3.Connection, offers: tuple[Offer, ...]) -> None:
    con.executemany(_insert("offers", OFFER_COLUMNS), [asdict(o) for o in offers])


def _insert_rates(con: sqlite3.Connection, rates: tuple[ReservedRate, ...]) -> None:
    con.executemany(_insert("reserved_rates", RATE_COLUMNS), [asdict(r) for r in rates])


@dataclass(frozen=True)
class PullInfo:
    provider: str
    regions: tuple[str, ...]
    """``("*",)`` for a whole-provider pull."""
    as_of: str
    source: str
    notes: tuple[str, ...]


def pulls(path: str | os.PathLike[str] | None = None) -> list[PullInfo]:
    """What the cache holds: one entry per (provider, as_of, source), regions merged."""
    target = resolve_cache_path(path)
    with _connect(target, write=False) as con:
        _check_schema(con, target)
        rows = con.execute("SELECT provider, region, as_of, source, notes FROM pulls "
                           "ORDER BY provider, as_of, region").fetchall()
    merged: dict[tuple[str, str, str, str], list[str]] = {}
    for row in rows:
        _checked(PullRow, "pulls", row, target)
        key = (row["provider"], row["as_of"], row["source"], row["notes"])
        merged.setdefault(key, []).append(row["region"])
    return [PullInfo(p, tuple(regions), a, s, tuple(json.loads(n)))
            for (p, a, s, n), regions in merged.items()]


def _checked(model: type, table: str, row: sqlite3.Row, path: Path) -> dict[str, Any]:
    """The row as a dict once its model accepts it; otherwise a one-line error naming the
    table, the row's key and the refresh that rewrites it (exit 3)."""
    data = {k: row[k] for k in row.keys()}  # noqa: SIM118 (a Row iterates over values)
    problem = check_row(model, table, data)
    if problem:
        provider = data.get("provider")
        named = provider if provider in ("aws", "gcp") else None
        raise ProviderError(f"price cache {str(path)!r}: {problem}; rewrite it with "
                            f"{_refresh_fix(named)}, or remove the file")
    return data


def load_cache_catalog(path: str | os.PathLike[str] | None = None) -> Catalog:
    """The cached prices as a Catalog (``as_of`` = the oldest pull in it)."""
    target = resolve_cache_path(path)
    with _connect(target, write=False) as con:
        _check_schema(con, target)
        offers = [Offer(**_checked(OfferRow, "offers", row, target)) for row in con.execute(
            f"SELECT {', '.join(OFFER_COLUMNS)} FROM offers "
            "ORDER BY provider, region, zone, instance_type, capacity_type")]
        rates = [ReservedRate(**_checked(RateRow, "reserved_rates", row, target) | {
                     "assumption": bool(row["assumption"])}) for row in con.execute(
            f"SELECT {', '.join(RATE_COLUMNS)} FROM reserved_rates ORDER BY provider, region, "
            "instance_type, term_years, offering_class, purchase_option")]
        exclusions = [str(row["reason"]) for row in con.execute(
            "SELECT reason FROM exclusions ORDER BY provider, region, reason")]
        booked = [offer_of(_checked(BlockRow, "block_offers", row, target))
                  for row in read_rows(con)]
    infos = pulls(target)
    if not offers or not infos:
        raise InputError(f"price cache {str(target)!r} holds no offers: run `ptplan prices "
                         "refresh --provider aws|gcp` first, or use --catalog embedded")
    providers = sorted({o.provider for o in offers})
    notes = [f"{i.provider} prices pulled {i.as_of} "
             + ("(all regions)" if i.regions == ("*",) else f"({', '.join(i.regions)})")
             + f" from {i.source}" for i in infos]
    notes += sorted({n for i in infos for n in i.notes})
    notes += sorted({f"{o.provider} booked-capacity prices pulled {o.as_of} from {o.source}"
                     for o in booked})
    notes.append("storage tiers and egress rates: embedded reference values "
                 "(REFERENCE_FACTS.md), not pulled live")
    explicit = path is not None and str(path) != ""
    return Catalog(
        name=f"cache:{target.name}" if explicit else "cache",
        as_of=min(i.as_of for i in infos),
        offers=tuple(o for o in offers if o.gpus_per_node > 0),
        cpu_offers=tuple(o for o in offers if o.gpus_per_node == 0),
        storage_tiers=_storage(providers),
        egress=_egress(providers),
        reserved_rates=tuple(rates),
        exclusions=tuple(exclusions),
        notes=tuple(notes),
        # booked capacity: live pulled prices (block_offers) over the embedded published rates
        # (providers/data/capacity_blocks.csv, gcp_dws.csv) shaped by the cached on-demand offers
        block_offers=merge(booked, embedded_block_offers(
            tuple(o for o in offers if o.capacity_type == "on_demand"))),
    )


def _storage(providers: list[str]) -> tuple[StorageTier, ...]:
    from ptplan.providers.embedded import STORAGE

    return tuple(StorageTier(p, "*", t, price, days, fee, access, "REFERENCE_FACTS.md", status)
                 for p, t, price, days, fee, access, status in STORAGE if p in providers)


def _egress(providers: list[str]) -> tuple[EgressRate, ...]:
    from ptplan.providers.embedded import EGRESS

    return tuple(EgressRate(p, path, rate, "REFERENCE_FACTS.md", status)
                 for p, path, rate, status in EGRESS if p in providers)


def cache_catalog() -> Catalog:
    """``--catalog cache``: the cache at ``$PTPLAN_CACHE`` or the user cache directory."""
    return load_cache_catalog(None)
