"""Model presets and Hugging Face configs: the shape a spec's model block takes from
``preset: ORG/NAME`` (the embedded table, ``data/model_presets.json``, generated from each
model's own ``config.json`` by :mod:`ptplan.spec.presets_build`) or from
``hf_config: path/to/config.json`` (read locally, no network). Fields typed in the block
override the preset's; :func:`origin_lines` says which field came from where."""

from __future__ import annotations

import contextvars
import difflib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from ptplan.core.errors import InputError
from ptplan.core.yamlio import quoted, read_mapping
from ptplan.spec.hf_config import Shape, read_config

SHAPE_FIELDS = ("params_b", "active_params_b", "layers", "hidden_size", "heads", "kv_heads",
                "head_dim", "experts_per_token", "kv_latent_dim", "sliding_window",
                "sliding_window_layers")
"""The model-block fields a preset or a config sets."""

_SPEC_DIR: contextvars.ContextVar[Path | None] = contextvars.ContextVar("ptplan_spec_dir",
                                                                        default=None)


@contextmanager
def spec_dir(path: Path | None) -> Iterator[None]:
    """Resolve ``hf_config`` paths against ``path`` (the spec file's folder) while validating."""
    token = _SPEC_DIR.set(path)
    try:
        yield
    finally:
        _SPEC_DIR.reset(token)


def current_dir() -> Path | None:
    """The folder ``hf_config`` paths resolve against now (see :func:`spec_dir`)."""
    return _SPEC_DIR.get()


@dataclass(frozen=True)
class Preset:
    """One row of the embedded table."""

    name: str
    shape: Shape
    config: str
    """The ``config.json`` it was generated from (``data/hf_configs/``)."""
    source: str
    """Where that file was copied from (repository, path, commit)."""
    read_on: str
    """The date the file was read (ISO)."""

    def summary(self) -> dict[str, Any]:
        """``ptplan models show --format json``."""
        s = self.shape
        return {
            "name": self.name, "architecture": s.architecture,
            "params": s.params, "params_b": round(s.params / 1e9, 4),
            "active_params": s.active_params, "active_params_b": round(s.active_params / 1e9, 4),
            "embedding_params": s.embedding_params, "layers": s.layers,
            "hidden_size": s.hidden_size, "heads": s.heads, "kv_heads": s.kv_heads,
            "head_dim": s.head_dim, "experts": s.experts,
            "experts_per_token": s.experts_per_token, "kv_latent_dim": s.kv_latent_dim,
            "sliding_window": s.sliding_window, "sliding_window_layers": s.sliding_window_layers,
            "kv_bytes_per_token": s.kv_bytes_per_token, "kv_bytes_per_token_note":
                "bf16 K and V of every layer at full context (sliding-window layers keep at "
                "most sliding_window tokens)",
            "context_length": s.context_length, "vocab_size": s.vocab_size,
            "spec_fields": s.block(), "config": self.config, "source": self.source,
            "read_on": self.read_on}


def _table_text() -> str:
    return (resources.files("ptplan.spec") / "data" / "model_presets.json").read_text("utf-8")


@cache
def presets() -> dict[str, Preset]:
    """The embedded presets by lower-cased name."""
    rows = json.loads(_table_text())["models"]
    out: dict[str, Preset] = {}
    for r in rows:
        shape = Shape(**r["shape"])
        out[r["name"].lower()] = Preset(r["name"], shape, r["config"], r["source"],
                                        r["read_on"])
    return out


def nearest(name: str, n: int = 3) -> list[str]:
    """The presets' names closest to ``name`` (for the one-line error)."""
    table = presets()
    low = name.strip().lower()
    tail = low.rsplit("/", 1)[-1]
    by_name = {k.rsplit("/", 1)[-1]: k for k in table}
    hits = difflib.get_close_matches(low, list(table), n=n, cutoff=0.5)
    hits += [by_name[k] for k in difflib.get_close_matches(tail, list(by_name), n=n,
                                                           cutoff=0.5)]
    hits += [k for k in table if tail and tail in k]
    seen: list[str] = []
    for k in hits:
        if table[k].name not in seen:
            seen.append(table[k].name)
    return seen[:n]


def unknown_message(name: str) -> str:
    near = nearest(name)
    hint = f"; nearest: {', '.join(near)}" if near else ""
    return (f"{name!r} is not a known model preset{hint} (`ptplan models --search TEXT` lists "
            "them; or give hf_config: path/to/config.json)")


def lookup(name: str) -> Preset:
    """The preset called ``name`` (any case); :class:`InputError` naming the nearest."""
    found = presets().get(name.strip().lower())
    if found is None:
        raise InputError(unknown_message(name))
    return found


def search(text: str | None) -> list[Preset]:
    """Presets whose name, architecture or kind (``moe``, ``dense``) holds every word of
    ``text`` (any case)."""
    words = (text or "").lower().split()
    rows = sorted(presets().values(), key=lambda p: p.name.lower())

    def words_of(p: Preset) -> str:
        return f"{p.name} {p.shape.architecture} {'moe' if p.shape.is_moe else 'dense'}".lower()

    return [p for p in rows if all(w in words_of(p) for w in words)]


def config_shape(path: str) -> Shape:
    """The shape in a local ``config.json`` (relative paths: to the spec file's folder)."""
    p = Path(path)
    base = _SPEC_DIR.get()
    if not p.is_absolute() and base is not None:
        p = base / p
    data = read_mapping(p, f"hf_config {quoted(path)}")
    return read_config(data, f"hf_config {quoted(path)}")


@dataclass(frozen=True)
class Origin:
    """Where a model block's shape came from: ``label`` (``preset NAME`` or ``hf_config
    PATH``), ``detail`` (the config's source and date, for a preset) and ``fields``, the shape
    fields the source set under the block's own."""

    label: str
    detail: str
    fields: dict[str, Any]


def fill(data: dict[str, Any]) -> tuple[dict[str, Any], Origin | None]:
    """``data`` (a model block as given) with the shape of its ``preset`` or ``hf_config``
    filled in under the fields it gives, and where that shape came from (``None`` without
    either). ``ValueError`` (one line) for an unknown preset, both sources at once, or an
    unreadable config."""
    preset, config = data.get("preset"), data.get("hf_config")
    if preset is not None and config is not None:
        raise ValueError("give preset or hf_config, not both (explicit fields override either)")
    try:
        if isinstance(preset, str):
            row = lookup(preset)
            shape, label = row.shape, f"preset {row.name}"
            detail = f" (its config.json from {row.source}, read {row.read_on})"
        elif isinstance(config, str):
            shape, label, detail = config_shape(config), f"hf_config {config}", ""
        else:
            return data, None
    except InputError as exc:
        raise ValueError(str(exc)) from None
    source = shape.block()
    if "params_b" in data and "active_params_b" not in data and shape.is_moe:
        source.pop("active_params_b", None)  # a dense override of a MoE preset
        source.pop("experts_per_token", None)
    return {**source, **data}, Origin(label, detail, source)


def origin_lines(role: str, block: Any, origin: Origin | None) -> list[str]:
    """``defaults_applied`` lines of one model block: the fields taken from its preset or
    config, and each field typed in the spec that overrides the value there."""
    if origin is None:
        return []
    given, shape = block.model_fields_set, origin.fields
    taken = [f"{k} {shape[k]}" for k in SHAPE_FIELDS if k in shape and k not in given]
    out = [f"{role}: {', '.join(taken)} from {origin.label}{origin.detail}"] if taken else []
    for k in SHAPE_FIELDS:
        if k in given and getattr(block, k) != shape.get(k):
            was = f"{origin.label} says {shape[k]}" if k in shape else f"not in {origin.label}"
            out.append(f"{role}.{k} = {getattr(block, k)} given in the spec ({was})")
    return out
