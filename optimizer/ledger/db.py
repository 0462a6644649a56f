"""Where the ledger lives and how it is written: SQLAlchemy Core tables, Alembic migrations.

The ledger is a SQLite file in the platform data dir by default, any path given by
``--ledger PATH`` or ``PTPLAN_LEDGER``, or a PostgreSQL database given by URL
(``postgresql://user@host/db``). Every write is one transaction: a run with its costs,
results and metrics lands whole or not at all, and so does a migration (SQLite's and
PostgreSQL's DDL are transactional; SQLite transactions are opened ``BEGIN IMMEDIATE`` so that
concurrent writers queue on the file lock instead of failing, PostgreSQL migrations hold an
advisory lock).

Never touch what is not ours (:mod:`ptplan.core.owned_db`): before anything is written, the
database is looked at read-only. One that holds a table that is not the ledger's, or that holds
ledger tables without the ledger's schema marker (Alembic's ``alembic_version`` at a revision of
ours), is refused in one line (exit 2) without a byte changed. A read never creates anything: a
ledger that does not exist yet (no file, or an empty database) reads as an empty ledger, kept in
memory. Messages show URLs with their password masked (:func:`ptplan.core.redact.redact`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from ptplan.core.errors import InputError
from ptplan.core.owned_db import check_tables, sqlite_tables
from ptplan.core.redact import redact, redact_value

ENV = "PTPLAN_LEDGER"
MIGRATIONS = Path(__file__).with_name("migrations")
HEAD = "0001"
_LOCK_KEY = 0x7074706C616E  # "ptplan": the PostgreSQL advisory lock migrations hold

metadata = sa.MetaData()
runs = sa.Table(
    "runs", metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("recorded_on", sa.String(10), nullable=False),
    sa.Column("project", sa.String(200), nullable=False),
    sa.Column("method", sa.String(8), nullable=False),
    sa.Column("algorithm", sa.String(32)),
    sa.Column("model_family", sa.String(100), nullable=False),
    sa.Column("outcome", sa.String(16), nullable=False),
    sa.Column("repairs", sa.String(64), sa.ForeignKey("runs.id")),
    sa.Column("planned_cost_cents", sa.BigInteger),
    sa.Column("planned_hours", sa.Float),
    sa.Column("budget_cents", sa.BigInteger),
    sa.Column("wall_hours", sa.Float),
    sa.Column("node_hours", sa.Float),
    sa.Column("tags", sa.Text, nullable=False),
    sa.Column("plan", sa.Text),
    sa.Column("spec", sa.Text),
    sa.Column("note", sa.Text, nullable=False),
)
costs = sa.Table(
    "run_costs", metadata,
    sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.id"), primary_key=True),
    sa.Column("phase", sa.String(100), primary_key=True),
    sa.Column("capacity_type", sa.String(16), primary_key=True),
    sa.Column("cents", sa.BigInteger, nullable=False),
)
results = sa.Table(
    "run_results", metadata,
    sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.id"), primary_key=True),
    sa.Column("kind", sa.String(8), primary_key=True),
    sa.Column("name", sa.String(100), primary_key=True),
    sa.Column("before", sa.Float, nullable=False),
    sa.Column("after", sa.Float, nullable=False),
)
metrics = sa.Table(
    "run_metrics", metadata,
    sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.id"), primary_key=True),
    sa.Column("name", sa.String(200), primary_key=True),
    sa.Column("step", sa.Integer, primary_key=True),
    sa.Column("source", sa.String(16), nullable=False),
    sa.Column("phase", sa.String(32)),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("value", sa.Float, nullable=False),
)


OURS = frozenset({"alembic_version", *metadata.tables})
"""Every table a ledger may hold; anything else means the database is another program's."""
REVISIONS = frozenset({"0001"})
"""The ledger's Alembic revisions (its schema marker)."""


def default_path() -> Path:
    from platformdirs import user_data_dir

    return Path(user_data_dir("ptplan", appauthor=False)) / "ledger.sqlite"


def resolve_url(ledger: str | None) -> str:
    """``--ledger`` value, else ``PTPLAN_LEDGER``, else the SQLite file in the data dir."""
    given = ledger or os.environ.get(ENV, "").strip() or None
    shown = redact(repr(redact_value(given))) if given is not None else ""
    if given is not None and (not given.isprintable() or "\x00" in given):
        raise InputError(f"--ledger: {shown} holds control characters; give a file "
                         "path, sqlite:///PATH or postgresql://USER@HOST/DB")
    if given is None:
        path = default_path()
    elif "://" in given:
        url = sa.engine.make_url(given) if _parses(given) else None
        if url is None or url.get_backend_name() not in ("sqlite", "postgresql"):
            raise InputError(f"--ledger: {shown} is not a SQLite or PostgreSQL URL "
                             "(or its port is not a number); use a file path, sqlite:///PATH "
                             "or postgresql://USER@HOST:PORT/DB")
        if url.get_backend_name() == "postgresql" and url.drivername == "postgresql":
            url = url.set(drivername="postgresql+psycopg")
        return url.render_as_string(hide_password=False)
    else:
        path = Path(given).expanduser()
    if path.is_dir():
        raise InputError(f"--ledger: {str(path)!r} is a directory; give the ledger's file path")
    return f"sqlite:///{path.resolve()}"


def _parses(text: str) -> bool:
    try:
        url = sa.engine.make_url(text)
        _ = url.port  # a port that is not a number fails here or in make_url
    except (sa.exc.ArgumentError, ValueError, TypeError):
        return False
    return True


def _sqlite_path(url: str) -> Path | None:
    u = sa.engine.make_url(url)
    return Path(u.database) if u.get_backend_name() == "sqlite" and u.database else None


def _sqlite_transactions(engine: Engine) -> None:
    """pysqlite does not open a transaction before DDL, and opens deferred ones: take over
    (SQLAlchemy's documented recipe) so that migrations roll back and writers queue."""

    @sa.event.listens_for(engine, "connect")
    def _connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None
        dbapi_conn.execute("PRAGMA foreign_keys = ON")

    @sa.event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def make_engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        engine = sa.create_engine(url, connect_args={"timeout": 60}, poolclass=sa.NullPool)
        _sqlite_transactions(engine)
        return engine
    try:
        return sa.create_engine(url, poolclass=sa.NullPool)
    except ModuleNotFoundError as exc:
        raise InputError(f"--ledger: a PostgreSQL ledger needs the driver ({exc.name}); "
                         "pip install 'ptplan[postgres]'") from None


def _alembic_config(conn: Connection, script_location: Path) -> Any:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(script_location))
    cfg.attributes["connection"] = conn
    return cfg


def current_revision(conn: Connection) -> str | None:
    from alembic.runtime.migration import MigrationContext

    return MigrationContext.configure(conn).get_current_revision()


def migrate(engine: Engine, script_location: Path = MIGRATIONS, target: str = "heads") -> None:
    """Bring the ledger to ``target`` in one transaction: all migrations or none."""
    from alembic import command

    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _LOCK_KEY})
        command.upgrade(_alembic_config(conn, script_location), target)


class Ledger:
    """An open ledger.

    ``write=True`` (recording): the ledger is created where there is none and migrated to the
    head revision. ``write=False`` (listing, reviewing, exporting): nothing is created or
    migrated; a ledger that does not exist yet reads as empty. Either way a database that is
    not the ledger's is refused before anything is touched.
    """

    def __init__(self, url: str, migrate_now: bool = True, write: bool = True) -> None:
        self.url = url
        self.empty = False
        try:
            state = self._inspect()
        except sa.exc.OperationalError as exc:
            raise InputError(f"--ledger: cannot open {self.display}: "
                             f"{_first_line(exc.orig)}; check the path or URL") from None
        if state != "current" and not write:
            if state == "behind":
                raise InputError(f"--ledger: {self.display} is at an older schema; a write "
                                 "(`ptplan runs record`) migrates it first")
            self.empty = True  # nothing recorded yet: read an empty ledger, create nothing
            self.engine = sa.create_engine("sqlite://", poolclass=sa.StaticPool)
            migrate(self.engine)
            return
        path = _sqlite_path(url)
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise InputError(f"--ledger: cannot create {str(path.parent)!r} "
                                 f"({exc.strerror}); choose a writable path") from None
        self.engine = make_engine(url)
        if migrate_now and write and state != "current":
            try:
                migrate(self.engine)
            except sa.exc.OperationalError as exc:
                raise InputError(f"--ledger: cannot open {self.display}: "
                                 f"{_first_line(exc.orig)}; check the path or URL") from None

    def _inspect(self) -> str:
        """``absent`` (no database or no tables), ``behind`` or ``current``, read-only;
        refuses a database that is not the ledger's."""
        path = _sqlite_path(self.url)
        if path is not None:
            if not path.exists():
                return "absent"
            tables = sqlite_tables(path, "--ledger")
            revision = self._sqlite_revision(path) if "alembic_version" in tables else None
        else:
            engine = make_engine(self.url)
            try:
                with engine.connect() as conn:
                    tables = set(sa.inspect(conn).get_table_names())
                    revision = current_revision(conn) if "alembic_version" in tables else None
            finally:
                engine.dispose()
        check_tables(tables, OURS, "--ledger", self.display)
        if not tables:
            return "absent"
        if revision not in REVISIONS:
            raise InputError(f"--ledger: {self.display} holds tables named like the ledger's "
                             f"but not its schema marker (revision {revision!r}); nothing was "
                             "changed: give ptplan a database of its own")
        return "current" if revision == HEAD else "behind"

    @staticmethod
    def _sqlite_revision(path: Path) -> str | None:
        import sqlite3

        con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
        try:
            row = con.execute("SELECT version_num FROM alembic_version").fetchone()
        except sqlite3.Error:
            return None
        finally:
            con.close()
        return None if row is None else str(row[0])

    @property
    def display(self) -> str:
        return repr(sa.engine.make_url(self.url).render_as_string(hide_password=True))

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """One transaction; anything raised inside rolls it back. A write the database refuses
        (a run id recorded meanwhile by another writer, a value too long) is one line."""
        try:
            with self.engine.begin() as conn:
                yield conn
        except sa.exc.IntegrityError as exc:
            raise InputError(f"ledger {self.display} refused the write (" +
                             _first_line(exc.orig) + "); nothing was written: a run of this "
                             "id may have been recorded meanwhile, see `ptplan runs list`") \
                from None
        except sa.exc.DataError as exc:
            raise InputError(f"ledger {self.display} refused a value ({_first_line(exc.orig)})"
                             "; nothing was written") from None

    @contextmanager
    def read(self) -> Iterator[Connection]:
        with self.engine.connect() as conn:
            yield conn

    def close(self) -> None:
        self.engine.dispose()


def _first_line(exc: object) -> str:
    text = str(exc).strip()
    return redact(text.splitlines()[0]) if text else type(exc).__name__


def open_ledger(ledger: str | None, write: bool = True) -> Ledger:
    """The ledger of ``--ledger`` / ``PTPLAN_LEDGER`` / the default file; ``write=False`` for
    commands that only read (nothing is created or migrated then)."""
    return Ledger(resolve_url(ledger), write=write)
