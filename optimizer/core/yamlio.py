"""Strict YAML/JSON loading and one-line rendering of pydantic validation errors.

Every user file goes through :func:`read_mapping` and :func:`validate`, so that malformed files,
unknown keys (with close-match suggestions) and bad values all become one-line
:class:`~ptplan.core.errors.InputError` messages naming the field, the value and the fix.
Every model of a file ptplan reads (spec, policy, custom catalog, portfolio, plan) derives from
:class:`StrictModel`.

Parsing is bounded, so a hostile file is refused quickly and in little memory: a file over
:data:`MAX_FILE_BYTES` is refused before it is read; YAML aliases may not expand the document
by more than :data:`MAX_ALIAS_NODES` nodes (a "billion laughs" file of a few hundred bytes is
refused after composing, before anything is constructed); non-finite numbers (``NaN``,
``Infinity``, ``.inf``, ``1e999``) and control characters in keys, names and paths are refused
with the field named; error messages show at most :data:`SHOWN_CHARS` characters of a value and
never re-serialise the input.
"""

from __future__ import annotations

import json
import math
import re
import reprlib
import unicodedata
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from ptplan.core.errors import InputError, suggest

M = TypeVar("M", bound=BaseModel)

MAX_FILE_BYTES = 2 * 1024 * 1024
"""Largest spec, policy, catalog, portfolio or plan file read (2 MiB; the largest plan of the
examples is about 30 kB, a custom catalog of 2,000 offers about 500 kB)."""
MAX_ALIAS_NODES = 10_000
"""How many nodes YAML aliases may add to a document when expanded (anchors reused for a few
blocks add tens; a "billion laughs" file adds billions)."""
MAX_DEPTH = 64
"""Deepest nesting of mappings and lists (ptplan's files nest at most 6 deep)."""
SHOWN_CHARS = 60
"""Longest rendering of a value in an error message."""
NAME_KEYS = frozenset({
    "name", "extends", "spec", "path", "provider", "region", "zone", "instance_type", "gpu",
    "source", "copy_to", "tier", "pool", "spec_name", "layout", "phase", "role", "cache",
    "catalog", "policy", "data_class", "flow", "capacity_type", "precision", "method",
    "algorithm", "pipeline_mode", "status", "objective", "as_of", "catalog_as_of"})
"""Keys whose values are names or paths: no control character at all (tabs and newlines are
allowed only in free text such as notes)."""

_repr = reprlib.Repr()
_repr.maxstring = SHOWN_CHARS
_repr.maxother = SHOWN_CHARS
_repr.maxlist = _repr.maxtuple = _repr.maxdict = _repr.maxset = 6
_repr.maxlevel = 2


def shown(value: Any) -> str:
    """A value as shown in an error message: at most :data:`SHOWN_CHARS` characters, computed
    without rendering the whole value (a huge or deeply shared structure costs nothing)."""
    text = _repr.repr(value)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS - 3] + "..."


def quoted(path: str | Path) -> str:
    """A file name as shown in messages: always quoted, control characters escaped, so that a
    name with a newline, quote or space stays on one line and unambiguous."""
    return repr(str(path))


class StrictModel(BaseModel):
    """The one base of ptplan's file models: an unknown key is an error (``extra="forbid"``,
    reported with close-match suggestions by :func:`validate`), instances are immutable
    (``frozen``) and NaN or infinite numbers are rejected (``allow_inf_nan=False``)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


FORMAT_DOCS = {"spec": "docs/spec.md", "--calibration": "docs/spec.md",
               "policy": "docs/policies.md", "catalog": "docs/spec.md §15",
               "plan": "docs/plan-json.md", "portfolio": "docs/reserve.md",
               "campaign": "docs/campaigns.md", "risk": "docs/compare.md"}
"""Where the documentation describes each kind of file (by the first word of ``what``)."""


def format_doc(what: str) -> str:
    return FORMAT_DOCS.get(what.split(" ", 1)[0], "docs/")


def read_mapping(path: str | Path, what: str) -> dict[str, Any]:
    """Parse a YAML or JSON file whose top level must be a mapping."""
    p = Path(path)
    name = quoted(path)
    if not _printable(str(path)) or "\x00" in str(path):
        raise InputError(f"{what}: file name {name} contains control characters; rename the "
                         "file or pass another path")
    try:
        with p.open("rb") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise InputError(f"{what}: file {name} not found; check the path") from None
    except IsADirectoryError:
        raise InputError(f"{what}: {name} is a directory; pass a file") from None
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or type(exc).__name__
        raise InputError(f"{what}: cannot read {name} ({reason}); pass a readable file") from None
    if len(raw) > MAX_FILE_BYTES:
        raise InputError(f"{what}: {name} is larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB; "
                         "ptplan files are far smaller: pass the right file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{what}: {name} is not UTF-8 text (byte {exc.start}); pass a UTF-8 "
                         "file") from None
    return parse_mapping(text, what, str(path))


def _printable(text: str) -> bool:
    return not any(unicodedata.category(c) == "Cc" for c in text)


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate keys instead of keeping the last one silently, and
    documents whose aliases expand them by more than :data:`MAX_ALIAS_NODES` nodes."""

    _depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _AliasBomb(f"mappings and lists nest deeper than {MAX_DEPTH} levels; "
                                 "flatten the document")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def get_single_node(self) -> Any:
        node = super().get_single_node()
        if node is not None:
            _bound_aliases(node)
        return node


_DEEP_FLOW = re.compile(r"(?:[\[{][^\[\]{}]*+){" + str(MAX_DEPTH + 1) + "}")
"""More than MAX_DEPTH flow openers with no closer between them: refused before PyYAML scans
them (its scanner's look-ahead is quadratic in the depth of flow collections)."""


class _AliasBomb(ValueError):
    """A document refused for its shape (alias expansion, nesting), not its syntax."""


def _bound_aliases(root: yaml.Node) -> None:
    """Refuse a composed document whose expanded size exceeds its own by more than
    :data:`MAX_ALIAS_NODES` (sizes memoised per node: linear in the composed graph)."""
    seen: set[int] = set()
    walk: list[yaml.Node] = [root]
    shared = False
    while walk:  # a first, cheap pass: most documents share no node (no aliases)
        node = walk.pop()
        if id(node) in seen:
            shared = True
            break
        seen.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            walk.extend(node.value)
        elif isinstance(node, yaml.MappingNode):
            for pair in node.value:
                walk.extend(pair)
    if not shared:
        return
    sizes: dict[int, int] = {}
    unique = 0
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if key in sizes and not done:
            continue
        children: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        if not done:
            sizes[key] = -1  # in progress
            unique += 1
            stack.append((node, True))
            stack.extend((c, False) for c in children if id(c) not in sizes)
            continue
        total = 1 + sum(max(sizes.get(id(c), 1), 1) for c in children)
        sizes[key] = total
        if total - unique > MAX_ALIAS_NODES:
            raise _AliasBomb(f"YAML aliases expand the document beyond {MAX_ALIAS_NODES:,} "
                             "extra nodes (an alias bomb?); write the blocks out or use fewer "
                             "aliases")


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

_Loader: type = _UniqueKeyLoader
if getattr(yaml, "__with_libyaml__", False):  # libyaml's scanner and parser: ~10x faster
    class _CUniqueKeyLoader(yaml.CSafeLoader):  # type: ignore[name-defined, misc]
        """The same loader on libyaml: duplicate keys refused, aliases bounded (nesting is
        bounded by the flow pre-scan and by the size cap)."""

        def get_single_node(self) -> Any:
            node = super().get_single_node()
            if node is not None:
                _bound_aliases(node)
            return node

    _CUniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
                                      _unique_mapping)
    _Loader = _CUniqueKeyLoader


def parse_mapping(text: str, what: str, origin: str = "<text>") -> dict[str, Any]:
    name = quoted(origin)
    if len(text) > MAX_FILE_BYTES:
        raise InputError(f"{what}: {name} is larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB; "
                         "ptplan files are far smaller: pass the right file")
    try:
        if origin.endswith(".json"):
            data = json.loads(text)
        else:  # a SafeLoader subclass: no arbitrary objects
            if _DEEP_FLOW.search(text):
                raise _AliasBomb(f"mappings and lists nest deeper than {MAX_DEPTH} levels; "
                                 "flatten the document")
            data = yaml.load(text, Loader=_Loader)
    except _AliasBomb as exc:
        raise InputError(f"{what}: {name}: {exc}") from None
    except (yaml.YAMLError, ValueError, RecursionError, OverflowError) as exc:
        # ValueError covers json.JSONDecodeError and YAML constructor failures on well-formed
        # syntax (``2020-02-30``, ``!!int x``); RecursionError covers very deep nesting.
        where = ""
        mark = getattr(exc, "problem_mark", None)
        if mark is not None:
            where = f" at line {mark.line + 1}, column {mark.column + 1}"
        elif isinstance(exc, json.JSONDecodeError):
            where = f" at line {exc.lineno}, column {exc.colno}"
        if isinstance(exc, RecursionError):
            problem = "nested too deeply"
        else:
            lines = str(exc).splitlines() or [type(exc).__name__]
            problem = getattr(exc, "problem", None) or lines[0]
        problem = shown(problem)[1:-1] if not _printable(str(problem)) else str(problem)
        raise InputError(
            f"{what}: {name} is not valid YAML/JSON{where} ({problem[:200]}); fix the syntax"
        ) from None
    if not isinstance(data, dict):
        raise InputError(
            f"{what}: {name} must hold a mapping of keys (got {type(data).__name__}); "
            f"see {format_doc(what)} for the file format"
        )
    _check_values(data, f"{what} {name}")
    return data


def _check_values(root: dict[str, Any], what: str) -> None:
    """Refuse non-finite numbers anywhere and control characters in keys and in names and
    paths (NUL and other control characters anywhere), naming the field. Iterative: a deep
    document cannot exhaust the stack, and a shared (aliased) node is checked once."""
    seen: set[int] = set()
    stack: list[tuple[Any, tuple[Any, ...]]] = [(root, ())]
    while stack:
        value, loc = stack.pop()
        if isinstance(value, dict | list):
            if id(value) in seen:
                continue
            seen.add(id(value))
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, child in items:
                if isinstance(key, str) and not _printable(key):
                    raise InputError(f"{what}: {_loc(loc)}: key {shown(key)} contains control "
                                     "characters; remove them")
                stack.append((child, (*loc, key)))
        elif isinstance(value, float) and not math.isfinite(value):
            raise InputError(f"{what}: {_loc(loc)} = {value}: numbers must be finite (no NaN "
                             "or infinity); give a finite number")
        elif isinstance(value, str):
            bad = [c for c in value if unicodedata.category(c) == "Cc"]
            key = next((p for p in reversed(loc) if isinstance(p, str)), "")
            if bad and (key in NAME_KEYS or any(c not in "\t\n\r" for c in bad)):
                kind = "name or path" if key in NAME_KEYS else "value"
                raise InputError(f"{what}: {_loc(loc)} = {shown(value)}: control character "
                                 f"{bad[0]!r} in a {kind}; remove it")


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
    value_text = shown(value) if not isinstance(value, dict) else "{...}"
    if kind == "extra_forbidden":
        key = str(loc[-1])
        allowed = _allowed_keys(model, loc[:-1])
        hint = suggest(key, allowed) if allowed else ""
        options = f"; allowed keys: {', '.join(allowed)}" if allowed else ""
        return f"{what}: {_loc(loc)}: unknown key {key!r}{hint}{options}"
    if kind == "missing":
        return f"{what}: {_loc(loc)}: required field is missing; add it (see {format_doc(what)})"
    message = err.get("msg", "invalid value")
    message = message.removeprefix("Value error, ")
    ctx = err.get("ctx", {}) or {}
    fix = ""
    if kind in {"literal_error", "enum"}:
        expected = str(ctx.get("expected", ""))
        choices = [s.strip(" '") for s in expected.replace(" or ", ",").split(",")]
        fix = suggest(shown(value).strip("'\""), [o for o in choices if o])
    elif kind in {"greater_than", "greater_than_equal", "less_than", "less_than_equal"}:
        fix = "; change the value to be within range"
    elif kind.endswith("_type") or kind.endswith("_parsing"):
        fix = "; give a value of the right type"
    elif kind in {"too_short", "too_long"}:
        fix = "; change the number of entries"
    if not loc:
        return f"{what}: {message}"
    message = " ".join(str(message).split())  # one line whatever pydantic's message holds
    return f"{what}: {_loc(loc)} = {value_text}: {message}{fix}"


def validate(model: type[M], data: dict[str, Any], what: str) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise InputError(format_validation_error(exc, model, what)) from None
