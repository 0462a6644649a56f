"""Which catalog a ``--catalog`` reference names: the explicit registry of catalog kinds.

Kinds by name (``embedded``: the offline snapshot, the default; ``cache``: the local price
cache filled by ``ptplan prices refresh``), then by file: a price-cache file (``*.sqlite``) or a
custom catalog YAML. This module sits above every catalog kind and nothing below imports it.
"""

from __future__ import annotations

from collections.abc import Callable

from ptplan.core.errors import InputError, suggest
from ptplan.providers.base import CACHE_SUFFIXES, Catalog
from ptplan.providers.embedded import embedded_catalog

# The price cache (SQLite, pydantic row models) and custom catalogs (YAML) are imported when a
# reference names them, so that a plan on the embedded catalog does not pay for them at start.


def _cache_catalog() -> Catalog:
    from ptplan.providers.cache import cache_catalog

    return cache_catalog()


KINDS: dict[str, Callable[[], Catalog]] = {
    "embedded": embedded_catalog,
    "cache": _cache_catalog,
}
"""Catalogs named by a word; anything else is a file."""


def load_catalog(ref: str) -> Catalog:
    """``embedded`` (default), ``cache``, a price-cache file or a custom catalog YAML."""
    if ref in KINDS:
        return KINDS[ref]()
    if ref.endswith(CACHE_SUFFIXES):
        from ptplan.providers.cache import load_cache_catalog

        return load_cache_catalog(ref)
    if ref.endswith((".yaml", ".yml", ".json")) or "/" in ref:
        from ptplan.providers.custom import load_custom_catalog

        return load_custom_catalog(ref)
    raise InputError(
        f"--catalog: unknown catalog {ref!r}{suggest(ref, KINDS)}; use one of "
        f"{', '.join(sorted(KINDS))} or a path to a catalog YAML file"
    )
