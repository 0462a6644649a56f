"""The SQLite price cache: round trip, per-provider and per-region replacement, atomicity,
location rules and errors."""

from __future__ import annotations

import datetime as dt
import sqlite3
import sys
from pathlib import Path

import pytest

import ptplan.providers.cache as cache
from ptplan.core.errors import InputError, ProviderError
from ptplan.providers.base import Offer, ReservedRate
from ptplan.providers.cache import Pull, load_cache_catalog, resolve_cache_path, store_pull
from ptplan.providers.registry import load_catalog


def _offer(provider: str, region: str, itype: str, capacity: str, price: float, as_of: str,
           zone: str = "") -> Offer:
    return Offer(provider=provider, region=region, zone=zone, instance_type=itype, gpu="H100",
                 gpus_per_node=8, capacity_type=capacity, usd_per_hour=price, vcpus=192.0,
                 memory_gib=2048.0, interruptions_per_hour=0.0002 if capacity == "spot" else None,
                 max_nodes=8 if capacity == "spot" else None, as_of=as_of,
                 source=f"{provider} test source", note="n")


def _pull(provider: str, regions: tuple[str, ...], as_of: str, price: float,
          all_regions: tuple[str, ...] = ("r-east-1", "r-west-2")) -> Pull:
    covered = regions or all_regions
    offers = tuple(o for r in covered for o in (
        _offer(provider, r, "p5.48xlarge", "on_demand", price, as_of),
        _offer(provider, r, "p5.48xlarge", "spot", price / 3, as_of, zone=f"{r}-az1")))
    rates = tuple(ReservedRate(provider, r, "p5.48xlarge", 1, price * 0.65, "src", False,
                               "standard", "All Upfront", round(price * 0.65 * 8760, 2), 0.0,
                               as_of) for r in covered)
    return Pull(provider=provider, as_of=as_of, source=f"{provider} api", regions=regions,
                offers=offers, reserved_rates=rates,
                exclusions=(f"{provider} x9 {covered[0]}: no price",), notes=(f"{provider} note",))


def _rows(path: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as con:
        return sorted(con.execute("SELECT provider, region, zone, capacity_type, usd_per_hour, "
                                  "as_of FROM offers").fetchall())


def test_round_trip_two_providers(tmp_path: Path) -> None:
    db = tmp_path / "prices.sqlite"
    store_pull(_pull("aws", (), "2026-11-30T10:00:00Z", 55.04), db)
    store_pull(_pull("gcp", (), "2026-12-01T09:00:00Z", 88.0), db)
    cat = load_cache_catalog(db)
    assert cat.name == "cache:prices.sqlite"
    assert cat.as_of == "2026-11-30T10:00:00Z"  # the oldest pull: the age of the stalest price
    assert len(cat.offers) == 8 and len(cat.reserved_rates) == 4
    assert {o.provider for o in cat.offers} == {"aws", "gcp"}
    o = next(o for o in cat.offers if o.provider == "aws" and o.capacity_type == "spot")
    assert (o.zone, o.usd_per_hour, o.max_nodes, o.as_of, o.source) == (
        "r-east-1-az1", pytest.approx(55.04 / 3), 8, "2026-11-30T10:00:00Z", "aws test source")
    r = cat.reserved_rates[0]
    assert (r.offering_class, r.purchase_option, r.upfront_usd, r.recurring_usd_per_hour) == (
        "standard", "All Upfront", round(55.04 * 0.65 * 8760, 2), 0.0)
    assert any(n.startswith("aws prices pulled 2026-11-30T10:00:00Z (all regions) from aws api")
               for n in cat.notes)
    assert "aws note" in cat.notes and "gcp note" in cat.notes
    assert {t.provider for t in cat.storage_tiers} == {"aws", "gcp"} and cat.egress
    assert cat.exclusions == ("aws x9 r-east-1: no price", "gcp x9 r-east-1: no price")
    assert load_catalog(str(db)).offers == cat.offers  # *.sqlite is a catalog reference


def test_refresh_replaces_only_its_provider_and_regions(tmp_path: Path) -> None:
    db = tmp_path / "c.sqlite"
    store_pull(_pull("aws", (), "2026-11-01T00:00:00Z", 50.0), db)
    store_pull(_pull("gcp", (), "2026-11-01T00:00:00Z", 80.0), db)
    gcp_before = [r for r in _rows(db) if r[0] == "gcp"]
    store_pull(_pull("aws", ("r-west-2",), "2026-12-01T00:00:00Z", 40.0), db)
    rows = _rows(db)
    assert [r for r in rows if r[0] == "gcp"] == gcp_before
    aws = {(r[1], r[3]): (r[4], r[5]) for r in rows if r[0] == "aws"}
    assert aws[("r-east-1", "on_demand")] == (50.0, "2026-11-01T00:00:00Z")  # kept
    assert aws[("r-west-2", "on_demand")] == (40.0, "2026-12-01T00:00:00Z")  # replaced
    cat = load_cache_catalog(db)
    assert cat.as_of == "2026-11-01T00:00:00Z"
    assert any("(r-west-2)" in n for n in cat.notes)
    # a whole-provider pull replaces every region of that provider
    store_pull(_pull("aws", (), "2026-12-02T00:00:00Z", 45.0, all_regions=("r-east-1",)), db)
    assert {r[1] for r in _rows(db) if r[0] == "aws"} == {"r-east-1"}


def test_failed_write_leaves_the_cache_whole(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "c.sqlite"
    store_pull(_pull("aws", (), "2026-11-01T00:00:00Z", 50.0), db)
    store_pull(_pull("gcp", (), "2026-11-01T00:00:00Z", 80.0), db)
    before = _rows(db)
    before_rates = load_cache_catalog(db).reserved_rates

    def boom(con: sqlite3.Connection, rates: object) -> None:
        raise KeyboardInterrupt  # interrupted after the old rows were deleted, offers written

    monkeypatch.setattr(cache, "_insert_rates", boom)
    with pytest.raises(KeyboardInterrupt):
        store_pull(_pull("aws", (), "2026-12-01T00:00:00Z", 10.0), db)
    assert _rows(db) == before
    assert load_cache_catalog(db).reserved_rates == before_rates


def test_invalid_rows_roll_back(tmp_path: Path) -> None:
    db = tmp_path / "c.sqlite"
    store_pull(_pull("aws", (), "2026-11-01T00:00:00Z", 50.0), db)
    before = _rows(db)
    bad = _pull("aws", (), "2026-12-01T00:00:00Z", 50.0)
    bad = Pull(**{**bad.__dict__, "offers": (*bad.offers, _offer(
        "aws", "r-east-1", "p4d.24xlarge", "on_demand", -1.0, "2026-12-01T00:00:00Z"))})
    with pytest.raises(ProviderError, match=r"could not be stored .*cache is unchanged"):
        store_pull(bad, db)  # CHECK (usd_per_hour >= 0) fails on the last row
    assert _rows(db) == before


def test_cache_location(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PTPLAN_CACHE", str(tmp_path / "env.sqlite"))
    assert resolve_cache_path(None) == tmp_path / "env.sqlite"
    assert resolve_cache_path(tmp_path / "flag.sqlite") == tmp_path / "flag.sqlite"
    monkeypatch.delenv("PTPLAN_CACHE")
    default = resolve_cache_path(None)
    assert default.name == "prices.sqlite" and "ptplan" in default.parts
    if sys.platform.startswith("linux"):  # platformdirs follows XDG on Linux
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
        assert resolve_cache_path(None) == tmp_path / "xdg" / "ptplan" / "prices.sqlite"


def test_missing_empty_and_foreign_caches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                          ) -> None:
    monkeypatch.setenv("PTPLAN_CACHE", str(tmp_path / "none.sqlite"))
    with pytest.raises(InputError, match=r"does not exist: run `ptplan prices refresh"):
        load_catalog("cache")
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(InputError, match="not a SQLite database"):
        load_cache_catalog(junk)
    empty = tmp_path / "empty.sqlite"
    sqlite3.connect(empty).close()
    with pytest.raises(InputError, match="not a ptplan price cache"):
        load_cache_catalog(empty)


def test_old_cache_is_warned_about(tmp_path: Path) -> None:
    db = tmp_path / "c.sqlite"
    store_pull(_pull("aws", (), "2026-01-01T00:00:00Z", 50.0), db)
    cat = load_cache_catalog(db)
    assert cat.age_days(dt.date(2026, 1, 31)) == 30
    assert cat.staleness_warning(dt.date(2026, 1, 31)) is None
    warning = cat.staleness_warning(dt.date(2026, 6, 1))
    assert warning is not None and "151 days old" in warning
