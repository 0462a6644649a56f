"""The embedded catalog's pre-built pack (``providers/data/embedded_catalog.json.gz``): current
with the CSV files and the normalisation code, loaded by ``embedded_catalog()``, and never
used when it is out of date."""

from __future__ import annotations

import gzip
import json

import ptplan.providers.embedded_pack as packmod
from ptplan.providers.embedded import embedded_catalog, gcp_vm_share, parse_sources


def _shipped() -> bytes:
    return packmod._data(packmod.PACKED).read_bytes()


def test_the_shipped_pack_is_what_the_csv_files_give():
    """Rebuild with ``python -m ptplan.providers.embedded`` when this fails (the CSVs or the
    normalisation in providers/embedded.py changed)."""
    assert _shipped() == packmod.pack(parse_sources()), \
        "providers/data/embedded_catalog.json.gz is out of date: " \
        "python -m ptplan.providers.embedded"


def test_the_pack_round_trips_exactly():
    parsed = parse_sources()
    unpacked = packmod.unpack(packmod.pack(parsed))
    assert unpacked is not None
    offers, exclusions, rates, share = unpacked
    assert offers == parsed[0] and exclusions == parsed[1] and rates == parsed[2]
    assert share == parsed[3]
    assert len(offers) == 2759
    assert all(isinstance(o.block_counts, tuple) for o in offers)


def test_embedded_catalog_loads_the_pack(monkeypatch):
    """With the pack in place the CSVs are not parsed, and the catalog equals the parsed one
    (and the VM shares that flexible CUDs use are set)."""
    embedded_catalog.cache_clear()
    monkeypatch.setattr("ptplan.providers.embedded.parse_sources",
                        lambda: (_ for _ in ()).throw(AssertionError("CSV parsed")))
    try:
        cat = embedded_catalog()
        share = gcp_vm_share("us-central1", "a3-highgpu-8g")
    finally:
        embedded_catalog.cache_clear()
    offers, exclusions, rates, shares = parse_sources()  # this module's name: the original
    assert list(cat.offers) == offers and list(cat.exclusions) == exclusions
    assert list(cat.reserved_rates) == rates
    assert share == shares[("us-central1", "a3-highgpu-8g")] and 0 < share < 1


def test_an_out_of_date_pack_is_not_used(monkeypatch):
    """A pack built from other CSV bytes (its recorded digest differs) gives None, and the
    catalog is then parsed from the CSVs."""
    doc = json.loads(gzip.decompress(_shipped()))
    doc["sources_sha256"] = "0" * 64
    stale = gzip.compress(json.dumps(doc).encode(), mtime=0)
    assert packmod.unpack(stale) is None
    doc["sources_sha256"] = packmod.sources_digest()
    doc["offers"][0][doc["offer_fields"].index("usd_per_hour")] = 123.0
    assert packmod.unpack(gzip.compress(json.dumps(doc).encode(), mtime=0))[0][0] \
        .usd_per_hour == 123.0  # the digest is what decides, so the shipped pack is tested above
    parsed = []

    def counted():
        parsed.append(1)
        return parse_sources()

    monkeypatch.setattr("ptplan.providers.embedded.load_packed", lambda: packmod.unpack(stale))
    monkeypatch.setattr("ptplan.providers.embedded.parse_sources", counted)
    embedded_catalog.cache_clear()
    try:
        assert list(embedded_catalog().offers) == parse_sources()[0]
    finally:
        embedded_catalog.cache_clear()
    assert parsed == [1]
