"""Ledger test support: a throw-away PostgreSQL cluster and the ``ledger_url`` fixture that
runs each ledger test against SQLite and against PostgreSQL.

The cluster is the Debian package's (``initdb``/``pg_ctl`` from PATH or
/usr/lib/postgresql/*/bin; ``.ci/run`` installs it when missing) in a temp dir on a free local
port, trust authentication on 127.0.0.1 only. PostgreSQL refuses to run as root: as root the
server runs as the ``postgres`` user the package creates (``runuser``). Without PostgreSQL the
PostgreSQL cases skip, which fails CI (tests/ci_skips.py): CI must run them.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest


def _pg_bin() -> Path | None:
    found = shutil.which("initdb")
    cands = ([Path(found).resolve().parent] if found else []) + \
        [Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)]
    for d in cands:
        if (d / "initdb").exists() and (d / "pg_ctl").exists():
            return d
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_owner(cmd: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return cmd
    return ["runuser", "-u", "postgres", "--", *cmd]


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """``postgresql+psycopg://postgres@127.0.0.1:PORT`` of a fresh cluster (no database)."""
    bindir = _pg_bin()
    if bindir is None:
        pytest.skip("PostgreSQL is not installed (apt-get install postgresql; .ci/run does)")
    root = Path(tempfile.mkdtemp(prefix="ptplan-pg-"))
    data = root / "data"
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        root.chmod(0o700)
    port = _free_port()
    subprocess.run(_as_owner([str(bindir / "initdb"), "-D", str(data), "-U", "postgres",
                              "--auth=trust", "-E", "UTF8", "--no-sync"]),
                   check=True, capture_output=True)
    opts = f"-p {port} -c listen_addresses=127.0.0.1 -k {root} -c fsync=off " \
           "-c max_connections=60"
    subprocess.run(_as_owner([str(bindir / "pg_ctl"), "-D", str(data), "-o", opts, "-w",
                              "-l", str(root / "log"), "start"]), check=True,
                   capture_output=True)
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}"
    finally:
        subprocess.run(_as_owner([str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate",
                                  "stop"]), capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


def new_pg_database(server: str) -> str:
    import sqlalchemy as sa

    name = "ledger_" + uuid.uuid4().hex[:12]
    engine = sa.create_engine(f"{server}/postgres", isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE {name}")
    engine.dispose()
    return f"{server}/{name}"


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A new, empty ledger on each backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    return new_pg_database(request.getfixturevalue("pg_server"))
