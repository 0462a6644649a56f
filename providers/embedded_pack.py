"""The embedded catalog in a pre-built compact form: what :mod:`ptplan.providers.embedded` derives
from
its CSV files (offers, exclusions, reserved rates, GCP machines' VM shares), packed as
gzipped JSON (``providers/data/embedded_catalog.json.gz``, about 30 kB, shipped in the wheel).

A plan then loads the catalog without parsing the CSVs and normalising their rows (about 25 ms
at every start; the packed form loads in about 13 ms, most of it constructing the 2,759
offers). The packed file records the SHA-256 of
the CSV files it was built from; when they differ (a snapshot updated without repacking) the
catalog is parsed from the CSVs as before, so an out-of-date pack is never used.
``tests/test_embedded_packed.py`` fails when the pack differs from what the CSVs and the
normalisation code give, so a change to either must be followed by a rebuild::

    python -m ptplan.providers.embedded      # rewrites providers/data/embedded_catalog.json.gz

The output is deterministic (sorted as the catalog is, gzip header without a time stamp).
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import json
from importlib import resources
from pathlib import Path
from typing import Any

from ptplan.providers.base import Offer, ReservedRate

PACKED = "embedded_catalog.json.gz"
SOURCES = ("aws_gpu_vms.csv", "gcp_gpu_vms.csv", "gcp_accelerators.csv")
"""The CSV files (in ``providers/data/``) the packed offers are derived from."""
SCHEMA = 2

Normalised = tuple[list[Offer], list[str], list[ReservedRate], dict[tuple[str, str], float]]
"""(offers, exclusions, reserved rates, GCP VM share per (region, machine))."""

_OFFER_FIELDS = tuple(f.name for f in dataclasses.fields(Offer))
_RATE_FIELDS = tuple(f.name for f in dataclasses.fields(ReservedRate))
_TEXT = tuple(n for n, f in enumerate(dataclasses.fields(Offer)) if f.type in ("str", str))
"""Positions of the offers' string fields (stored as indices into the string table)."""


def _data(name: str) -> Any:
    return resources.files("ptplan.providers").joinpath(f"data/{name}")


def sources_digest() -> str:
    """SHA-256 over the source CSVs (name and bytes of each, in :data:`SOURCES` order)."""
    h = hashlib.sha256()
    for name in SOURCES:
        h.update(name.encode())
        h.update(_data(name).read_bytes())
    return h.hexdigest()


def pack(normalised: Normalised) -> bytes:
    """The gzipped JSON of a normalised catalog (columns named once, rows as lists, each
    distinct string once in a table that the rows' string fields index)."""
    offers, exclusions, rates, vm_share = normalised
    strings: dict[str, int] = {}  # each distinct string once; offers hold its index

    rows = []
    for o in offers:
        row = [getattr(o, f) for f in _OFFER_FIELDS]
        for n in _TEXT:
            row[n] = strings.setdefault(row[n], len(strings))
        rows.append(row)
    doc = {
        "schema": SCHEMA,
        "sources_sha256": sources_digest(),
        "offer_fields": list(_OFFER_FIELDS),
        "strings": list(strings),
        "offers": rows,
        "exclusions": list(exclusions),
        "rate_fields": list(_RATE_FIELDS),
        "reserved_rates": [[getattr(r, f) for f in _RATE_FIELDS] for r in rates],
        "gcp_vm_share": [[region, machine, share]
                         for (region, machine), share in sorted(vm_share.items())],
    }
    text = json.dumps(doc, separators=(",", ":"), ensure_ascii=False)
    return gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0)


def unpack(blob: bytes) -> Normalised | None:
    """The normalised catalog of a packed file, or None when it was built from other source
    files or with another layout (then the CSVs are parsed)."""
    doc = json.loads(gzip.decompress(blob))
    if doc.get("schema") != SCHEMA or doc.get("sources_sha256") != sources_digest() or \
            tuple(doc["offer_fields"]) != _OFFER_FIELDS or \
            tuple(doc["rate_fields"]) != _RATE_FIELDS:
        return None
    counts = _OFFER_FIELDS.index("block_counts")
    strings = doc["strings"]
    offers = []
    for row in doc["offers"]:
        for n in _TEXT:
            row[n] = strings[row[n]]
        row[counts] = tuple(row[counts])  # JSON has lists; the field is a tuple
        offers.append(Offer(*row))
    rates = [ReservedRate(*row) for row in doc["reserved_rates"]]
    share = {(region, machine): value for region, machine, value in doc["gcp_vm_share"]}
    return offers, list(doc["exclusions"]), rates, share


def load_packed() -> Normalised | None:
    """The shipped pack, or None when it is missing or out of date."""
    path = _data(PACKED)
    if not path.is_file():
        return None
    return unpack(path.read_bytes())


def write_pack(normalised: Normalised) -> Path:
    """Write the pack of ``normalised`` into the package data; its path."""
    out = Path(__file__).resolve().parent / "data" / PACKED
    out.write_bytes(pack(normalised))
    return out
