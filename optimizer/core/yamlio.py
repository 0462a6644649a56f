"""Strict YAML/JSON loading and one-line rendering of pydantic validation errors.

Every user file goes through :func:`read_mapping` and :func:`validate`, so that malformed files,
unknown keys (with close-match suggestions) and bad values all become one-line
:class:`~optimizer.core.errors.InputError` messages naming the field, the value and the fix.
Every model of a file ptplan reads (spec, policy, custom catalog, portfolio, plan) derives from
:class:`StrictModel`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from optimizer.core.errors import InputError, suggest

M = TypeVar("M", bound=BaseModel)


class StrictModel(BaseModel):
    """The one base of ptplan's file models: an unknown key is an error (``extra="forbid"``,
    reported with close-match suggestions by :func:`validate`), instances are immutable
    (``frozen``) and NaN or infinite numbers are rejected (``allow_inf_nan=False``)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def read_mapping(path: str | Path, what: str) -> dict[str, Any]:
    """Parse a YAML or JSON file whose top level must be a mapping."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{what}: file {str(path)!r} not found; check the path") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{what}: cannot read {str(path)!r} ({exc}); pass a UTF-8 file") from None
    return parse_mapping(text, what, str(path))


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate keys instead of keeping the last one silently."""


def _unique_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False
                    ) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        try:
            duplicate = key in seen
        except TypeError:  # unhashable key: the mapping constructor reports it
            continue
        if duplicate:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (only one value per key is allowed)",
                key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)


def parse_mapping(text: str, what: str, origin: str = "<text>") -> dict[str, Any]:
    try:
        if origin.endswith(".json"):
            data = json.loads(text)
        else:  # a SafeLoader subclass: no arbitrary objects
            data = yaml.load(text, Loader=_UniqueKeyLoader)
    except (yaml.YAMLError, ValueError, RecursionError) as exc:
        # ValueError covers json.JSONDecodeError and YAML constructor failures on well-formed
        # syntax (``2020-02-30``, ``!!int x``); RecursionError covers very deep nesting.
        where = ""
        mark = getattr(exc, "problem_mark", None)
        if mark is not None:
            where = f" at line {mark.line + 1}, column {mark.column + 1}"
        elif isinstance(exc, json.JSONDecodeError):
            where = f" at line {exc.lineno}, column {exc.colno}"
        lines = str(exc).splitlines() or [type(exc).__name__]
        problem = getattr(exc, "problem", None) or lines[0]
        raise InputError(
            f"{what}: {origin} is not valid YAML/JSON{where} ({problem}); fix the syntax"
        ) from None
    if not isinstance(data, dict):
        raise InputError(
            f"{what}: {origin} must hold a mapping of keys (got {type(data).__name__}); "
            "see README for the file format"
        )
    return data


def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            text = str(part)
            if not text.isprintable():  # keys with newlines etc.: keep the message one line
                text = repr(text)
            out += ("." if out else "") + text
    return out or "(top level)"


def _allowed_keys(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """Field names of the model found at ``loc`` (best effort, for suggestions)."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue
        fields = getattr(current, "model_fields", None)
        if not fields or part not in fields:
            break
        annotation = fields[part].annotation
        current = _inner_model(annotation)
        if current is None:
            return []
    fields = getattr(current, "model_fields", None)
    return list(fields) if fields else []


def _inner_model(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _inner_model(arg)
        if found is not None:
            return found
    return None


def format_validation_error(exc: ValidationError, model: type[BaseModel], what: str) -> str:
    errors = exc.errors()
    # An unknown key usually explains a "missing" one (a typo such as ``methd``): report it first.
    err = next((e for e in errors if e.get("type") == "extra_forbidden"), errors[0])
    loc = tuple(err.get("loc", ()))
    kind = err.get("type", "")
    value = err.get("input")
    shown = repr(value) if not isinstance(value, dict) else "{...}"
    if len(shown) > 60:
        shown = shown[:57] + "..."
    if kind == "extra_forbidden":
        key = str(loc[-1])
        allowed = _allowed_keys(model, loc[:-1])
        hint = suggest(key, allowed) if allowed else ""
        options = f"; allowed keys: {', '.join(allowed)}" if allowed else ""
        return f"{what}: {_loc(loc)}: unknown key {key!r}{hint}{options}"
    if kind == "missing":
        return f"{what}: {_loc(loc)}: required field is missing; add it (see README)"
    message = err.get("msg", "invalid value")
    message = message.removeprefix("Value error, ")
    ctx = err.get("ctx", {}) or {}
    fix = ""
    if kind in {"literal_error", "enum"}:
        expected = str(ctx.get("expected", ""))
        choices = [s.strip(" '") for s in expected.replace(" or ", ",").split(",")]
        fix = suggest(str(value), [o for o in choices if o])
    elif kind in {"greater_than", "greater_than_equal", "less_than", "less_than_equal"}:
        fix = "; change the value to be within range"
    elif kind.endswith("_type") or kind.endswith("_parsing"):
        fix = "; give a value of the right type"
    elif kind in {"too_short", "too_long"}:
        fix = "; change the number of entries"
    if not loc:
        return f"{what}: {message}"
    return f"{what}: {_loc(loc)} = {shown}: {message}{fix}"


def validate(model: type[M], data: dict[str, Any], what: str) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise InputError(format_validation_error(exc, model, what)) from None
