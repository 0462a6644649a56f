"""The plan's field vocabulary: how ``ptplan check`` treats each field (``x-check``), money and
hours as written, and the constrained number types the plan models share
(:mod:`ptplan.planfile.schema`, :mod:`ptplan.planfile.schema_items`)."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal
from typing import Annotated, Any

from pydantic import Field, StringConstraints

from ptplan.core.numbers import SIGNIFICANT_DIGITS

CHECK_KINDS = ("derived", "spec", "catalog", "informational")
"""How ``ptplan check`` treats a field (``x-check`` in the JSON Schema; absent: inherited from
the enclosing object, ``derived`` at the top): ``derived`` fields are re-derived from the rest
of the plan and compared; ``spec`` fields only from the spec (``check --spec``); ``catalog``
fields (prices, minimum durations, fees) from the catalog the plan names, when ``check`` has it
(the embedded snapshot; :mod:`ptplan.planfile.rules_catalog`);
``informational`` fields (text, timings, versions, solver statistics, the planner's notes) are
not checked. The tamper suite (``tests/test_tamper.py``) holds the schema to this: a
tampered ``derived`` field fails ``check``, a ``spec`` field fails ``check --spec``."""


PRECISION_STATEMENT = (
    f"Every float (hours, rates, prices, fractions, GB, tokens) is written rounded to "
    f"{SIGNIFICANT_DIGITS} significant digits; integers are exact and money is a decimal "
    "string with cents. CPUs may differ in the last bit of a float (about 1e-16 relative): "
    "rounded, the same inputs give the same bytes on any CPU, except for a value that falls "
    "within that noise of a rounding boundary (its last digit may then differ by one). "
    "`ptplan check` compares re-derived figures within tolerances far wider than this "
    "precision (relative 1e-6, money a cent per line). Plans written before with up to 17 "
    "digits read and check as before: the rounding changes no field, type or meaning, so "
    "the schema version is unchanged.")
"""The plan JSON Schema's statement of its numbers' precision (its ``description`` and
``x-significant-digits``; ``ptplan schema plan``; :mod:`ptplan.core.numbers`)."""


def check_kind(node: dict[str, Any]) -> str | None:
    """The ``x-check`` of a JSON Schema node, if it declares one."""
    kind = node.get("x-check")
    return kind if isinstance(kind, str) else None


def check_as(kind: str, **extra: Any) -> dict[str, Any]:
    assert kind in CHECK_KINDS
    return {"x-check": kind, **extra}


def usd(x: float) -> str:
    """Money as a decimal string with cents."""
    return str(Decimal(repr(float(x))).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))


def hours(x: float) -> float:
    """Hours as a float (written to 12 significant digits, :meth:`Plan.to_json`; tables round
    for display)."""
    return float(x)


Money = Annotated[str, StringConstraints(pattern=r"^[0-9]+\.[0-9]{2}$")]
"""USD with cents, as a decimal string ("1234.50"); never negative in a plan."""
Hours = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Count = Annotated[int, Field(ge=0)]
Positive = Annotated[int, Field(ge=1)]
NonNegative = Annotated[float, Field(ge=0)]
Fraction = Annotated[float, Field(ge=0, le=1)]
INFO = check_as("informational")
SPEC = check_as("spec")
