"""The local price cache: live pulls stored in SQLite, read back as ``--catalog cache``.

Where: ``--cache PATH``, else ``$PTPLAN_CACHE``, else ``prices.sqlite`` in the user cache
directory (``platformdirs.user_cache_dir("ptplan")`` when platformdirs is installed, otherwise
``$XDG_CACHE_HOME/ptplan`` or ``~/.cache/ptplan``). A file ending in ``.sqlite``/``.sqlite3``/
``.db`` can be passed directly as ``--catalog PATH``.

Tables: ``offers`` and ``reserved_rates`` (one row per normalised
:class:`~providers.base.Offer` / :class:`~providers.base.ReservedRate`, each with its ``as_of``
and ``source``), ``exclusions`` (prices that could not become offers, with the reason),
``pulls`` (per provider and region: when and from where it was pulled) and ``meta``
(``schema_version``).

Refresh contract (:func:`store_pull`): an adapter first pulls *everything* into memory (a
:class:`Pull`); only a complete pull reaches the cache, written in **one SQLite transaction**
that replaces the provider's rows (or, for a pull limited to some regions, the provider's rows in
those regions). A failed or interrupted pull, or a failure during the write, leaves the previous
catalog whole (SQLite rolls the transaction back, also after a crash, through its journal);
other providers' rows are never touched.

Reading (:func:`load_cache_catalog`): a :class:`~providers.base.Catalog` named ``cache`` (or
``cache:<file name>`` for an explicit file) whose ``as_of`` is the **oldest** pull in it, so a
plan states the age of its stalest price and the usual staleness warning applies. Storage tiers
and egress rates are not pulled live: the embedded reference values (REFERENCE_FACTS.md) are
attached, as in the embedded catalog.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from optimizer.core.errors import InputError, ProviderError
from providers.base import Catalog, EgressRate, Offer, ReservedRate, StorageTier

ENV_VAR = "PTPLAN_CACHE"
CACHE_FILE = "prices.sqlite"
CACHE_SUFFIXES: tuple[str, ...] = (".sqlite", ".sqlite3", ".db")
SCHEMA_VERSION = "1"

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
    try:
        import platformdirs

        return Path(platformdirs.user_cache_dir("ptplan"))
    except ImportError:
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        return Path(base) / "ptplan"


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


@contextmanager
def _connect(path: Path, write: bool) -> Iterator[sqlite3.Connection]:
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
    try:
        yield con
    except sqlite3.DatabaseError as exc:
        raise InputError(f"price cache {str(path)!r} is unreadable or not a ptplan price cache "
                         f"({exc}); remove it or choose another --cache path") from None
    finally:
        con.close()


def _check_schema(con: sqlite3.Connection, path: Path) -> None:
    row = con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    if row is None or row[0] != SCHEMA_VERSION:
        raise InputError(f"price cache {str(path)!r} has schema {row[0] if row else 'none'!r}, "
                         f"this ptplan reads {SCHEMA_VERSION!r}; refresh into a new --cache path")


def store_pull(pull: Pull, path: str | os.PathLike[str] | None = None) -> Path:
    """Write a complete pull atomically (one transaction); returns the cache path."""
    target = resolve_cache_path(path)
    with _connect(target, write=True) as con:
        con.execute("BEGIN IMMEDIATE")
        try:
            for statement in _SCHEMA.split(";"):  # not executescript: it would COMMIT
                if statement.strip():
                    con.execute(statement)
            existing = con.execute(
                "SELECT value FROM meta WHERE key='schema_version'").fetchone()
            if existing is not None and existing[0] != SCHEMA_VERSION:
                _check_schema(con, target)
            con.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)",
                        (SCHEMA_VERSION,))
            _replace(con, pull)
            con.execute("COMMIT")
        except sqlite3.IntegrityError as exc:
            con.execute("ROLLBACK")
            raise ProviderError(f"the {pull.provider} prices could not be stored ({exc}: a "
                                "negative price or a repeated offer); the cache is unchanged"
                                ) from None
        except BaseException:
            con.execute("ROLLBACK")
            raise
    return target


def _replace(con: sqlite3.Connection, pull: Pull) -> None:
    where, args = "provider = ?", [pull.provider]
    if pull.regions:
        where += f" AND region IN ({','.join('?' * len(pull.regions))})"
        args += list(pull.regions)
    for table in ("offers", "reserved_rates", "exclusions", "pulls"):
        con.execute(f"DELETE FROM {table} WHERE {where}", args)
    _insert_offers(con, pull.offers)
    _insert_rates(con, pull.reserved_rates)
    con.executemany(
        "INSERT INTO exclusions VALUES (?, ?, ?, ?, ?)",
        [(pull.provider, _region_of_exclusion(text, pull.regions), text, pull.as_of, pull.source)
         for text in pull.exclusions])
    regions = pull.regions or ("*",)
    con.executemany("INSERT INTO pulls VALUES (?, ?, ?, ?, ?)",
                    [(pull.provider, r, pull.as_of, pull.source, json.dumps(list(pull.notes)))
                     for r in regions])


def _insert_offers(con: sqlite3.Connection, offers: tuple[Offer, ...]) -> None:
    con.executemany(
        "INSERT INTO offers VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(o.provider, o.region, o.zone, o.instance_type, o.gpu, o.gpus_per_node, o.capacity_type,
          o.usd_per_hour, o.vcpus, o.memory_gib, o.interruptions_per_hour, o.max_nodes, o.as_of,
          o.source, o.note) for o in offers])


def _insert_rates(con: sqlite3.Connection, rates: tuple[ReservedRate, ...]) -> None:
    con.executemany(
        "INSERT INTO reserved_rates VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(r.provider, r.region, r.instance_type, r.term_years, r.offering_class,
          r.purchase_option, r.usd_per_hour, r.upfront_usd, r.recurring_usd_per_hour,
          int(r.assumption), r.as_of, r.source) for r in rates])


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
    for provider, region, as_of, source, notes in rows:
        merged.setdefault((provider, as_of, source, notes), []).append(region)
    return [PullInfo(p, tuple(regions), a, s, tuple(json.loads(n)))
            for (p, a, s, n), regions in merged.items()]


def load_cache_catalog(path: str | os.PathLike[str] | None = None) -> Catalog:
    """The cached prices as a Catalog (``as_of`` = the oldest pull in it)."""
    target = resolve_cache_path(path)
    with _connect(target, write=False) as con:
        _check_schema(con, target)
        offers = [
            Offer(provider=r[0], region=r[1], zone=r[2], instance_type=r[3], gpu=r[4],
                  gpus_per_node=int(r[5]), capacity_type=r[6], usd_per_hour=float(r[7]),
                  vcpus=r[8], memory_gib=r[9], interruptions_per_hour=r[10], max_nodes=r[11],
                  as_of=r[12], source=r[13], note=r[14])
            for r in con.execute("SELECT * FROM offers ORDER BY provider, region, zone, "
                                 "instance_type, capacity_type")]
        rates = [
            ReservedRate(provider=r[0], region=r[1], instance_type=r[2], term_years=int(r[3]),
                         offering_class=r[4], purchase_option=r[5], usd_per_hour=float(r[6]),
                         upfront_usd=float(r[7]), recurring_usd_per_hour=r[8],
                         assumption=bool(r[9]), as_of=r[10], source=r[11])
            for r in con.execute("SELECT * FROM reserved_rates ORDER BY provider, region, "
                                 "instance_type, term_years, offering_class, purchase_option")]
        exclusions = [r[0] for r in con.execute(
            "SELECT reason FROM exclusions ORDER BY provider, region, reason")]
    infos = pulls(target)
    if not offers or not infos:
        raise InputError(f"price cache {str(target)!r} holds no offers: run `ptplan prices "
                         "refresh --provider aws|gcp` first, or use --catalog embedded")
    providers = sorted({o.provider for o in offers})
    notes = [f"{i.provider} prices pulled {i.as_of} "
             + ("(all regions)" if i.regions == ("*",) else f"({', '.join(i.regions)})")
             + f" from {i.source}" for i in infos]
    notes += sorted({n for i in infos for n in i.notes})
    notes.append("storage tiers and egress rates: embedded reference values "
                 "(REFERENCE_FACTS.md), not pulled live")
    explicit = path is not None and str(path) != ""
    return Catalog(
        name=f"cache:{target.name}" if explicit else "cache",
        as_of=min(i.as_of for i in infos),
        offers=tuple(offers),
        storage_tiers=_storage(providers),
        egress=_egress(providers),
        reserved_rates=tuple(rates),
        exclusions=tuple(exclusions),
        notes=tuple(notes),
    )


def _storage(providers: list[str]) -> tuple[StorageTier, ...]:
    from providers.embedded import STORAGE

    return tuple(StorageTier(p, "*", t, price, days, fee, access, "REFERENCE_FACTS.md", status)
                 for p, t, price, days, fee, access, status in STORAGE if p in providers)


def _egress(providers: list[str]) -> tuple[EgressRate, ...]:
    from providers.embedded import EGRESS

    return tuple(EgressRate(p, path, rate, "REFERENCE_FACTS.md", status)
                 for p, path, rate, status in EGRESS if p in providers)


def cache_catalog() -> Catalog:
    """``--catalog cache``: the cache at ``$PTPLAN_CACHE`` or the user cache directory."""
    return load_cache_catalog(None)


