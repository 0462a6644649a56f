"""Tamperings generated from the plan schema (issue #21): every numeric leaf of a plan is
scaled, zeroed, negated and made non-finite, every string enum is swapped for each other value
of its vocabulary, and each tampered plan goes through ``ptplan check``'s own steps (parse,
schema, :func:`verify_plan`, and with the spec :func:`verify_against_spec`).

Leaves are found by walking the plan JSON against the schema (``Plan.model_json_schema()``):
integers, numbers and money (decimal strings) are numeric; a string whose schema has an
``enum`` (directly or through a ``$ref``) is an enum. How ``check`` treats each field is
declared in the schema (``x-check``, :mod:`ptplan.planfile.schema`): ``informational`` fields
are not re-derived (text, timings, versions, the solver's statistics) and are only counted.
Nothing here is hand-listed, so a field added to the schema is tampered the day it is added.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from ptplan.core.errors import InputError
from ptplan.core.yamlio import parse_mapping, validate
from ptplan.planfile.rules_catalog import check_against_catalog, packaged_catalog
from ptplan.planfile.schema import Plan, check_kind
from ptplan.planfile.verify import verify_against_spec, verify_plan

Path_ = tuple[str | int, ...]
KINDS = ("scale", "zero", "negate", "non_finite")


@dataclass(frozen=True)
class Tamper:
    example: str
    path: Path_
    kind: str
    value: Any
    check: str
    """``derived``, ``spec`` (re-derived with ``--spec``) or ``informational``."""

    @property
    def field(self) -> str:
        return ".".join(f"[{p}]" if isinstance(p, int) else p for p in self.path)

    @property
    def generic_field(self) -> str:
        return ".".join("[]" if isinstance(p, int) else p for p in self.path)

    def __str__(self) -> str:
        return f"{self.example}:{self.field}:{self.kind}={self.value!r}"


def _resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = {**schema["$defs"][node["$ref"].split("/")[-1]],
                **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def _options(schema: dict[str, Any], node: dict[str, Any]) -> list[dict[str, Any]]:
    node = _resolve(schema, node)
    if "anyOf" in node:
        extra = {k: v for k, v in node.items() if k != "anyOf"}
        return [{**_resolve(schema, o), **extra} for o in node["anyOf"]]
    return [node]


def _child(schema: dict[str, Any], node: dict[str, Any], key: str | int
           ) -> dict[str, Any] | None:
    for option in _options(schema, node):
        if isinstance(key, int) and option.get("type") == "array":
            return option.get("items", {})
        if isinstance(key, str) and option.get("type") == "object":
            props = option.get("properties", {})
            if key in props:
                found: dict[str, Any] = props[key]
                if "x-check" in option and "x-check" not in found:
                    found = {**found, "x-check": option["x-check"]}
                return found
            extra = option.get("additionalProperties")
            if isinstance(extra, dict):
                return {**extra, **({"x-check": option["x-check"]} if "x-check" in option
                                    else {})}
    return None


def leaves(plan: dict[str, Any]) -> Iterator[tuple[Path_, Any, dict[str, Any], str]]:
    """Every leaf of a plan with its schema node and its ``x-check`` (inherited from the
    nearest ancestor that declares one; default ``derived``)."""
    schema = Plan.model_json_schema()

    def walk(value: Any, node: dict[str, Any], path: Path_, check: str
             ) -> Iterator[tuple[Path_, Any, dict[str, Any], str]]:
        node_check = next((c for o in [node, *_options(schema, node)]
                           if (c := check_kind(o))), check)
        if isinstance(value, dict):
            for k, v in value.items():
                child = _child(schema, node, k) or {}
                yield from walk(v, child, (*path, k), node_check)
        elif isinstance(value, list):
            for i, v in enumerate(value):
                child = _child(schema, node, i) or {}
                yield from walk(v, child, (*path, i), node_check)
        else:
            yield path, value, node, node_check

    yield from walk(plan, schema, (), "derived")


def _is_money(options: list[dict[str, Any]]) -> bool:
    return any(o.get("type") == "string" and "[0-9]{2}" in o.get("pattern", "")
               for o in options)


def _enum(options: list[dict[str, Any]]) -> list[str] | None:
    for o in options:
        if o.get("type") == "string" and "enum" in o:
            return [str(v) for v in o["enum"]]
        if "enum" in o and all(isinstance(v, str) for v in o["enum"]):
            return [str(v) for v in o["enum"]]
    return None


def _numeric_mutations(value: Any, money: bool) -> Iterator[tuple[str, Any]]:
    x = float(Decimal(value)) if money else value
    is_int = isinstance(value, int) and not isinstance(value, bool)
    out = {
        "scale": (x * 2 if is_int else x * 1.5) if x != 0 else (1 if is_int else 0.5),
        "zero": 0,
        "negate": -x if x != 0 else -1,
        "non_finite": math.nan,
    }
    for kind in KINDS:
        new = out[kind]
        if new == x and kind != "non_finite":
            continue  # not a change
        if money and kind != "non_finite":
            new = f"{Decimal(repr(float(new))).quantize(Decimal('0.01'))}"
            if new == value:
                continue
        elif is_int and kind != "non_finite":
            new = int(new)
        yield kind, new


def tampers(example: str, plan: dict[str, Any]) -> Iterator[Tamper]:
    """Every single-field tampering of ``plan``."""
    schema = Plan.model_json_schema()
    for path, value, node, check in leaves(plan):
        options = _options(schema, node)
        if isinstance(value, bool) or value is None:
            if isinstance(value, bool):
                yield Tamper(example, path, "flip", not value, check)
            continue
        if isinstance(value, int | float):
            for kind, new in _numeric_mutations(value, False):
                yield Tamper(example, path, kind, new, check)
        elif isinstance(value, str) and _is_money(options):
            for kind, new in _numeric_mutations(value, True):
                yield Tamper(example, path, kind, new, check)
        elif isinstance(value, str):
            choices = _enum(options)
            for other in choices or ():
                if other != value:
                    yield Tamper(example, path, "swap", other, check)


def apply(plan: dict[str, Any], t: Tamper) -> str:
    """The tampered plan as JSON text (non-finite numbers written as JSON's NaN)."""
    out = copy.deepcopy(plan)
    target: Any = out
    for p in t.path[:-1]:
        target = target[p]
    target[t.path[-1]] = t.value
    return json.dumps(out)


def check_text(text: str, spec: Any = None) -> tuple[int, list[str]]:
    """``ptplan check`` on a plan's text, in process: (exit code, violations or the error)."""
    try:
        plan = validate(Plan, parse_mapping(text, "plan", "plan.json"), "plan")
    except InputError as exc:
        return 2, [str(exc)]
    problems = verify_plan(plan)
    made_on = packaged_catalog(plan)
    if made_on is not None:
        problems += check_against_catalog(plan, made_on)
    if spec is not None:
        problems += verify_against_spec(plan, spec)
    return (1 if problems else 0), problems
