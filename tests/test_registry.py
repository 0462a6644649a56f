"""Which reader a ``--catalog`` reference reaches (``providers/registry.py``), by bare file
name (no ``/``: only the suffix decides) as well as by path, and the one-line refusal of
anything else (mutation-testing gaps, docs/testing.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_price_cache import _pull

from ptplan.core.errors import InputError
from ptplan.providers.cache import store_pull
from ptplan.providers.registry import CACHE_SUFFIXES, load_catalog

CUSTOM = {"as_of": "2026-11-01", "offers": [
    {"provider": "lab", "region": "west", "instance_type": "h100x8", "gpu": "H100",
     "gpus_per_node": 8, "on_demand_usd_per_hour": 20.0}]}


@pytest.mark.parametrize("name", ["lab.yaml", "lab.yml", "lab.json"])
def test_a_bare_custom_catalog_name_is_read_by_its_suffix(name, tmp_path: Path, monkeypatch):
    (tmp_path / name).write_text(json.dumps(CUSTOM))  # JSON is YAML too
    monkeypatch.chdir(tmp_path)
    cat = load_catalog(name)
    assert [(o.instance_type, o.usd_per_hour) for o in cat.offers] == [("h100x8", 20.0)]


def test_a_path_without_a_known_suffix_is_read_as_a_custom_catalog(tmp_path: Path):
    path = tmp_path / "lab.catalog"
    path.write_text(json.dumps(CUSTOM))
    assert load_catalog(str(path)).name == "lab"


@pytest.mark.parametrize("suffix", CACHE_SUFFIXES)
def test_a_bare_cache_file_name_is_read_as_a_price_cache(suffix, tmp_path: Path, monkeypatch):
    store_pull(_pull("aws", (), "2026-11-30T10:00:00Z", 55.04), tmp_path / f"prices{suffix}")
    monkeypatch.chdir(tmp_path)
    cat = load_catalog(f"prices{suffix}")
    assert cat.name == f"cache:prices{suffix}" and len(cat.offers) == 4


def test_anything_else_is_refused_naming_the_kinds():
    with pytest.raises(InputError) as err:
        load_catalog("embeded")
    assert str(err.value) == ("--catalog: unknown catalog 'embeded' (did you mean: embedded?); "
                              "use one of cache, embedded or a path to a catalog YAML file")
