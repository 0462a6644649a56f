"""Never touch what is not ours: the databases ptplan opens must be its own.

The run ledger, the spend cache and the price cache are SQLite files (the ledger may also be a
PostgreSQL schema). A path or URL can point, by mistake, at another program's database; opening
it for writing and creating tables there changes data ptplan does not own. Before any write,
and on every read, the owner checks here look at the database **read-only** and refuse (one
line, exit 2, naming the file) a database that holds a table that is not ours; a read never
creates anything (a missing file is reported, or read as empty by the caller).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path

from ptplan.core.errors import InputError

__all__ = ["check_tables", "sqlite_tables"]


def sqlite_tables(path: Path, what: str) -> set[str]:
    """The tables and views of the SQLite file at ``path``, read without changing a byte.

    A file that is not SQLite (random bytes, another format) is one line naming it.
    """
    try:
        con = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True, timeout=30)
    except sqlite3.Error as exc:
        raise InputError(f"{what} {str(path)!r} cannot be opened ({exc}); check the path") \
            from None
    try:
        rows = con.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view') "
                           "AND name NOT LIKE 'sqlite_%'").fetchall()
    except sqlite3.DatabaseError as exc:
        raise InputError(f"{what} {str(path)!r} is not a SQLite database ({exc}); nothing was "
                         "changed: give ptplan a file of its own") from None
    finally:
        con.close()
    return {str(r[0]) for r in rows}


def check_tables(tables: Iterable[str], ours: Iterable[str], what: str, where: str) -> None:
    """Refuse a database that holds any table not in ``ours`` (an empty one is fine)."""
    foreign = sorted(set(tables) - set(ours))
    if foreign:
        shown = ", ".join(foreign[:6]) + (", ..." if len(foreign) > 6 else "")
        raise InputError(f"{what} {where} holds tables that are not ptplan's ({shown}): it "
                         "belongs to another program, so ptplan leaves it untouched (nothing "
                         "was changed); give ptplan a database of its own")
