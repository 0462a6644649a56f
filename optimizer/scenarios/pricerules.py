"""Price rules: what-if edits of a catalog's prices (``ptplan whatif --price RULE``).

Grammar (whitespace separates the three parts; the operator must stand alone)::

    RULE      := SELECTOR  OP  VALUE
    SELECTOR  := "*"  |  TERM ("," TERM)*
    TERM      := KEY "=" GLOB
    OP        := "*="  (scale)  |  "+="  (add)  |  "="  (set)
    VALUE     := a decimal number ("1.4", "-2.5", "9.50", "1e-3")

Three kinds of price can be edited; every term of one selector names the same kind:

=========  ==========================================================  ====================
kind       keys                                                        price edited
=========  ==========================================================  ====================
offers     ``provider``, ``region``, ``zone``, ``instance_type``,      ``usd_per_hour`` of a
           ``gpu``, ``capacity_type`` (``*`` alone: every offer)       node
storage    ``storage.provider``, ``storage.region``, ``storage.tier``,  ``usd_per_gb_month``
           ``storage.access``                                          of a tier
egress     ``egress.provider``, ``egress.path``                        ``usd_per_gb``
=========  ==========================================================  ====================

A GLOB is matched with :func:`fnmatch.fnmatchcase` (``*``, ``?``, ``[seq]``) after both sides
are lower-cased. ``capacity_type`` accepts ``on-demand`` for ``on_demand``; a ``gpu`` without
glob characters is resolved through the GPU aliases (``a100-80gb`` → ``A100-80GB``). A term
repeated in one selector, a key of another kind, or an unknown key is an error.

Semantics. ``*= v`` multiplies the price by v (v ≥ 0), ``+= v`` adds v per hour (per GB-month,
per GB), ``= v`` sets the price to v. Several rules apply in the order given, each to the
result of the previous one (``"gpu=H100 *= 0.7"`` then ``"capacity_type=spot += 1"`` discounts
H100 nodes by 30 % and then adds $1/h to every spot node). A rule that matches nothing in the
catalog, or that would make a price negative, is an :class:`~ptplan.core.errors.InputError`
naming the rule and the fix (exit 2). Nothing else of an offer changes: caps, interruption
rates and reserved holdings stay as the catalog says. A reserved offer whose holdings are
declared sunk has zero marginal cost; a rule may still set a price on it, which then counts.

Every applied rule is recorded in the new catalog's ``notes`` (they reach every plan's
``catalog.notes``), so a scenario plan says which prices were edited.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ptplan.core.errors import InputError, suggest
from ptplan.providers.base import CAPACITY_TYPES, Catalog, EgressRate, Offer, StorageTier

OFFER_KEYS: tuple[str, ...] = ("provider", "region", "zone", "instance_type", "gpu",
                               "capacity_type")
STORAGE_KEYS: tuple[str, ...] = ("storage.provider", "storage.region", "storage.tier",
                                 "storage.access")
EGRESS_KEYS: tuple[str, ...] = ("egress.provider", "egress.path")
ALL_KEYS: tuple[str, ...] = OFFER_KEYS + STORAGE_KEYS + EGRESS_KEYS
OPS: tuple[str, ...] = ("*=", "+=", "=")
KIND_UNITS = {"offer": "USD per node-hour", "storage": "USD per GB-month", "egress": "USD per GB"}
KIND_NOUN = {"offer": "offers", "storage": "storage tiers", "egress": "egress rates"}
MAX_PRICE = 1e9
"""Largest price a rule may produce (the custom catalog's bound)."""

Item = Offer | StorageTier | EgressRate
_GLOB_CHARS = frozenset("*?[")


def _kind(key: str) -> str:
    if key.startswith("storage."):
        return "storage"
    if key.startswith("egress."):
        return "egress"
    return "offer"


def _field(key: str) -> str:
    return key.split(".", 1)[1] if "." in key else key


@dataclass(frozen=True)
class Selector:
    """Which offers, storage tiers or egress rates a rule edits."""

    text: str
    kind: str
    """``offer``, ``storage`` or ``egress``."""
    terms: tuple[tuple[str, str], ...]
    """(item field, lower-cased glob) pairs, all of which must match."""

    def matches(self, item: Item) -> bool:
        return all(fnmatch.fnmatchcase(str(getattr(item, f)).lower(), g) for f, g in self.terms)

    def items(self, catalog: Catalog) -> tuple[Item, ...]:
        return _items(catalog, self.kind)

    def indices(self, catalog: Catalog) -> tuple[int, ...]:
        """Positions of the matched items in the catalog's offers / tiers / rates."""
        return tuple(i for i, it in enumerate(self.items(catalog)) if self.matches(it))


@dataclass(frozen=True)
class PriceRule:
    """One ``SELECTOR OP VALUE`` edit."""

    text: str
    selector: Selector
    op: str
    value: float

    def new_price(self, price: float) -> float:
        if self.op == "*=":
            return price * self.value
        if self.op == "+=":
            return price + self.value
        return self.value


def _items(catalog: Catalog, kind: str) -> tuple[Any, ...]:
    if kind == "offer":
        return catalog.offers
    if kind == "storage":
        return catalog.storage_tiers
    return catalog.egress


def _price_field(kind: str) -> str:
    return {"offer": "usd_per_hour", "storage": "usd_per_gb_month", "egress": "usd_per_gb"}[kind]


def _bad(rule: str, what: str, fix: str) -> InputError:
    return InputError(f"price rule {rule!r}: {what}; {fix}")


def _canonical_term(key: str, glob: str) -> str:
    value = glob.strip()
    if key == "capacity_type":
        value = value.replace("-", "_")
    if key == "gpu" and not (_GLOB_CHARS & set(value)):
        from ptplan.core.hardware import canonical_gpu_name

        value = canonical_gpu_name(value) or value
    return value.lower()


def parse_selector(text: str, rule: str | None = None) -> Selector:
    """``key=glob,key=glob`` (or ``*``) → :class:`Selector`; errors name ``rule``."""
    rule = rule if rule is not None else text
    body = text.strip()
    if not body:
        raise _bad(rule, "the selector is empty", "start the rule with KEY=GLOB or *, e.g. "
                   "'gpu=H100 *= 1.4'")
    if body == "*":
        return Selector(body, "offer", ())
    terms: list[tuple[str, str]] = []
    kinds: set[str] = set()
    seen: set[str] = set()
    for raw in body.split(","):
        part = raw.strip()
        if "=" not in part:
            raise _bad(rule, f"selector term {part!r} has no '='",
                       f"write KEY=GLOB with KEY one of {', '.join(ALL_KEYS)}")
        key, glob = (s.strip() for s in part.split("=", 1))
        key = key.lower()
        if key not in ALL_KEYS:
            raise _bad(rule, f"unknown key {key!r}{suggest(key, ALL_KEYS)}",
                       f"use one of {', '.join(ALL_KEYS)}")
        if not glob:
            raise _bad(rule, f"key {key!r} has an empty glob", f"write {key}=VALUE or {key}=*")
        if key in seen:
            raise _bad(rule, f"key {key!r} appears twice", "give each key once (use a glob such "
                       "as [ab]* or [!x]* to match several values)")
        seen.add(key)
        kinds.add(_kind(key))
        terms.append((_field(key), _canonical_term(_field(key), glob)))
    if len(kinds) > 1:
        raise _bad(rule, "the selector mixes " + " and ".join(sorted(KIND_NOUN[k] for k in kinds)),
                   "write one rule per kind (offer keys, storage.* keys or egress.* keys)")
    return Selector(body, kinds.pop(), tuple(terms))


def _split_op(parts: Sequence[str], rule: str) -> None:
    glued = [p for p in parts if any(op in p for op in ("*=", "+="))]
    if glued:
        raise _bad(rule, f"cannot find the operator in {glued[0]!r}",
                   "put spaces around the operator: 'SELECTOR *= 1.4', 'SELECTOR += 2', "
                   "'SELECTOR = 9.5'")


def parse_number(text: str, rule: str) -> float:
    try:
        value = float(text.strip().removeprefix("$"))
    except ValueError:
        raise _bad(rule, f"{text!r} is not a number", "write a decimal number such as 1.4 or "
                   "9.50") from None
    if not math.isfinite(value) or abs(value) > MAX_PRICE:
        raise _bad(rule, f"{text!r} is out of range", f"use a finite number within ±{MAX_PRICE:g}")
    return value


def parse_rule(text: str) -> PriceRule:
    """``"SELECTOR OP VALUE"`` → :class:`PriceRule` (see the module docstring)."""
    rule = text.strip()
    parts = rule.rsplit(None, 2)
    if len(parts) < 3 or parts[1] not in OPS:
        _split_op(parts, rule)
        raise _bad(rule, "expected 'SELECTOR OP VALUE' with OP one of *=, +=, =",
                   "e.g. 'capacity_type=spot *= 1.4' or 'provider=gcp,gpu=H100 = 9.5'")
    sel_text, op, value_text = parts
    value = parse_number(value_text, rule)
    if op == "*=" and value < 0:
        raise _bad(rule, f"scale factor {value:g} is negative", "use a factor >= 0 (0.7 = 30 % "
                   "off, 1.4 = 40 % more)")
    return PriceRule(rule, parse_selector(sel_text, rule), op, value)


def parse_partial(text: str) -> tuple[Selector, str]:
    """``"SELECTOR OP"`` (a swept rule without its value) → (selector, op)."""
    rule = text.strip()
    parts = rule.rsplit(None, 1)
    if len(parts) < 2 or parts[1] not in OPS:
        _split_op(parts, rule)
        raise _bad(rule, "expected 'SELECTOR OP' with OP one of *=, +=, =",
                   "e.g. --sweep 'capacity_type=spot *=' --from 0.5 --to 2 --steps 7")
    return parse_selector(parts[0], rule), parts[1]


def make_rule(selector: Selector, op: str, value: float) -> PriceRule:
    """A rule from a parsed selector (a sweep point); its text is canonical."""
    if op not in OPS:
        raise InputError(f"price rule: unknown operator {op!r}; use one of {', '.join(OPS)}")
    return PriceRule(f"{selector.text} {op} {value:g}", selector, op, float(value))


def no_match_message(selector: Selector, catalog: Catalog, rule: str) -> str:
    """Why nothing matched: the first term that matches nothing alone, with close values."""
    items = _items(catalog, selector.kind)
    noun = KIND_NOUN[selector.kind]
    if not items:
        return (f"price rule {rule!r}: catalog {catalog.name} has no {noun}; use a catalog "
                f"with {noun} or drop the rule")
    prefix = "" if selector.kind == "offer" else f"{selector.kind}."
    for f, g in selector.terms:
        if not any(fnmatch.fnmatchcase(str(getattr(it, f)).lower(), g) for it in items):
            values = sorted({str(getattr(it, f)) for it in items})
            shown = ", ".join(values[:12]) + (", ..." if len(values) > 12 else "")
            return (f"price rule {rule!r}: {prefix}{f}={g} matches no {noun[:-1]} of catalog "
                    f"{catalog.name}{suggest(g, values)}; use one of: {shown}")
    return (f"price rule {rule!r}: no {noun[:-1]} of catalog {catalog.name} matches all of "
            f"{selector.text}; loosen one of the terms")


@dataclass(frozen=True)
class RuleEffect:
    """What one rule changed: how many items, and their prices before and after."""

    rule: str
    kind: str
    matched: int
    before: tuple[float, float]
    """(lowest, highest) matched price before the rule."""
    after: tuple[float, float]

    def note(self) -> str:
        lo0, hi0 = self.before
        lo1, hi1 = self.after

        def rng(lo: float, hi: float) -> str:
            return f"{lo:.6g}" if lo == hi else f"{lo:.6g}..{hi:.6g}"

        return (f"what-if price rule {self.rule!r}: {self.matched} {KIND_NOUN[self.kind]} "
                f"{rng(lo0, hi0)} -> {rng(lo1, hi1)} {KIND_UNITS[self.kind]}")

    def as_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "kind": self.kind, "matched": self.matched,
                "price_before": list(self.before), "price_after": list(self.after),
                "unit": KIND_UNITS[self.kind]}


def _describe(item: Item) -> str:
    if isinstance(item, Offer):
        where = item.zone or item.region
        return f"{item.provider} {where} {item.instance_type} {item.capacity_type}"
    if isinstance(item, StorageTier):
        return f"{item.provider} {item.region} {item.tier}"
    return f"{item.provider} {item.path}"


def apply_rule(catalog: Catalog, rule: PriceRule, indices: Sequence[int] | None = None
               ) -> tuple[Catalog, RuleEffect]:
    """The catalog with ``rule`` applied. ``indices`` (from :meth:`Selector.indices` on this
    catalog's item list, which rules never reorder) skips matching, e.g. in a sweep."""
    kind = rule.selector.kind
    items = list(_items(catalog, kind))
    idx = rule.selector.indices(catalog) if indices is None else tuple(indices)
    if not idx:
        raise InputError(no_match_message(rule.selector, catalog, rule.text))
    field = _price_field(kind)
    old = [float(getattr(items[i], field)) for i in idx]
    new = [rule.new_price(p) for p in old]
    for i, p in zip(idx, new, strict=True):
        if p < 0:
            fix = "set a price >= 0"
            if rule.op == "+=":
                fix = (f"use += {-min(old):.6g} or more (the lowest matched price is "
                       f"{min(old):.6g})")
            raise _bad(rule.text, f"makes the price of {_describe(items[i])} negative "
                       f"({p:.6g} {KIND_UNITS[kind]})", fix + " or narrow the selector")
        if not math.isfinite(p) or p > MAX_PRICE:
            raise _bad(rule.text, f"makes the price of {_describe(items[i])} {p:.6g}",
                       f"keep prices below {MAX_PRICE:g}")
        items[i] = replace(items[i], **{field: p})  # type: ignore[arg-type]
    effect = RuleEffect(rule.text, kind, len(idx), (min(old), max(old)), (min(new), max(new)))
    attr = {"offer": "offers", "storage": "storage_tiers", "egress": "egress"}[kind]
    changes: dict[str, Any] = {attr: tuple(items), "notes": (*catalog.notes, effect.note())}
    out = replace(catalog, **changes)
    return out, effect


def apply_rules(catalog: Catalog, rules: Iterable[PriceRule],
                indices: dict[str, tuple[int, ...]] | None = None
                ) -> tuple[Catalog, list[RuleEffect]]:
    """Apply ``rules`` in order. ``indices`` maps a selector's text to its matched positions
    (price-independent, so a sweep computes it once)."""
    effects: list[RuleEffect] = []
    for rule in rules:
        idx = None
        if indices is not None:
            key = rule.selector.text
            if key not in indices:
                indices[key] = rule.selector.indices(catalog)
            idx = indices[key]
        catalog, eff = apply_rule(catalog, rule, idx)
        effects.append(eff)
    return catalog, effects


def matched_offer_keys(selector: Selector, catalog: Catalog) -> frozenset[str]:
    """Keys (:attr:`Offer.key`) of the offers a selector matches."""
    if selector.kind != "offer":
        return frozenset()
    return frozenset(o.key for o in catalog.offers if selector.matches(o))


def rules_help() -> str:
    """One paragraph for ``--help``."""
    return ("RULE is 'SELECTOR OP VALUE': SELECTOR is * or comma-separated KEY=GLOB with KEY in "
            f"{', '.join(OFFER_KEYS)} (offers), {', '.join(STORAGE_KEYS)} or "
            f"{', '.join(EGRESS_KEYS)}; OP is *= (scale), += (add) or = (set). Capacity types: "
            f"{', '.join(CAPACITY_TYPES)}.")
