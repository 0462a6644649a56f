"""Booked-capacity prices in the local price cache: the ``block_offers`` table.

Live GCP DWS prices (:mod:`ptplan.providers.gcp_dws`: flex-start and calendar-mode reservations) are
stored here by ``ptplan prices blocks --provider gcp``, one row per (provider, region, zone,
instance type, capacity type) with the booking terms of :class:`~ptplan.providers.base.Offer`
(``block_unit_hours``, ``block_max_hours``, ``wait_hours``, ``max_start_days``). Like the
``offers`` table, a pull replaces the provider's rows (or its rows in the regions pulled) in the
one transaction :func:`ptplan.providers.cache.store_block_pull` opens; every row goes through
:class:`~ptplan.providers.cache_rows.BlockRow` on write and on read. ``--catalog cache`` reads them
over the embedded published rates of the same key (:func:`merge`).

Pure SQL on a connection the cache module opens (no import of :mod:`ptplan.providers.cache`).
"""

from __future__ import annotations

import sqlite3
from dataclasses import asdict, dataclass
from typing import Any

from ptplan.providers.base import Offer

BLOCK_SCHEMA = """
CREATE TABLE IF NOT EXISTS block_offers (
    provider TEXT NOT NULL, region TEXT NOT NULL, zone TEXT NOT NULL,
    instance_type TEXT NOT NULL, gpu TEXT NOT NULL, gpus_per_node INTEGER NOT NULL,
    capacity_type TEXT NOT NULL CHECK (capacity_type IN ('block', 'flex_start')),
    usd_per_hour REAL NOT NULL CHECK (usd_per_hour >= 0),
    vcpus REAL, memory_gib REAL, max_nodes INTEGER,
    as_of TEXT NOT NULL, source TEXT NOT NULL, note TEXT NOT NULL,
    block_unit_hours REAL, block_max_hours REAL, wait_hours REAL NOT NULL,
    max_start_days INTEGER, block_counts TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (provider, region, zone, instance_type, capacity_type))
"""
BLOCK_COLUMNS: tuple[str, ...] = (
    "provider", "region", "zone", "instance_type", "gpu", "gpus_per_node", "capacity_type",
    "usd_per_hour", "vcpus", "memory_gib", "max_nodes", "as_of", "source", "note",
    "block_unit_hours", "block_max_hours", "wait_hours", "max_start_days", "block_counts")
"""The ``block_offers`` columns: :class:`~ptplan.providers.base.Offer` fields of the same names
(``block_counts``, the instance counts one booking may hold, space-separated; empty: any)."""


@dataclass(frozen=True)
class BlockPull:
    """A complete pull of one provider's booked-capacity prices (built before any write);
    ``regions`` empty: it replaces all the provider's rows, otherwise those regions' rows."""

    provider: str
    as_of: str
    source: str
    regions: tuple[str, ...]
    offers: tuple[Offer, ...]
    exclusions: tuple[str, ...] = ()
    instance_types: tuple[str, ...] = ()
    """Non-empty: only these instance types' rows (in ``regions``) are replaced (an AWS pull
    quotes one instance type's offerings)."""


def row_of(offer: Offer) -> dict[str, Any]:
    data = asdict(offer)
    data["block_counts"] = " ".join(str(n) for n in offer.block_counts)
    return {c: data[c] for c in BLOCK_COLUMNS}


def replace_blocks(con: sqlite3.Connection, pull: BlockPull) -> None:
    """Inside the caller's transaction: the provider's (regions') rows replaced by the pull's."""
    con.execute(BLOCK_SCHEMA)
    params = {"provider": pull.provider,
              **{f"region{i}": r for i, r in enumerate(pull.regions)}}
    where = "provider = :provider"
    if pull.regions:
        where += f" AND region IN ({', '.join(f':region{i}' for i in range(len(pull.regions)))})"
    if pull.instance_types:
        params |= {f"type{i}": t for i, t in enumerate(pull.instance_types)}
        where += (" AND instance_type IN "
                  f"({', '.join(f':type{i}' for i in range(len(pull.instance_types)))})")
    con.execute(f"DELETE FROM block_offers WHERE {where}", params)
    con.executemany(f"INSERT INTO block_offers ({', '.join(BLOCK_COLUMNS)}) "
                    f"VALUES ({', '.join(':' + c for c in BLOCK_COLUMNS)})",
                    [row_of(o) for o in pull.offers])


def read_rows(con: sqlite3.Connection) -> list[sqlite3.Row]:
    """The stored rows in key order; none in a cache written before the table existed."""
    exists = con.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND "
                         "name = 'block_offers'").fetchone()
    if exists is None:
        return []
    return con.execute(f"SELECT {', '.join(BLOCK_COLUMNS)} FROM block_offers ORDER BY provider, "
                       "region, zone, instance_type, capacity_type").fetchall()


def offer_of(data: dict[str, Any]) -> Offer:
    counts = tuple(int(n) for n in str(data.get("block_counts") or "").split())
    return Offer(**{**data, "block_counts": counts})


def merge(cached: list[Offer], embedded: tuple[Offer, ...]) -> tuple[Offer, ...]:
    """Cached live prices over the embedded published rates of the same (provider, region,
    instance type, capacity type); the embedded rows without a live price are kept."""
    live = {(o.provider, o.region, o.instance_type, o.capacity_type) for o in cached}
    kept = [o for o in embedded
            if (o.provider, o.region, o.instance_type, o.capacity_type) not in live]
    return tuple(sorted([*cached, *kept], key=lambda o: o.order))
