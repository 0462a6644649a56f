"""Bytes that do not depend on the CPU: every float ptplan writes is rounded to 12 significant
digits.

Vectorised arithmetic (numpy's SIMD kernels, BLAS, the order of a parallel sum) may differ in
the last unit in the last place from one CPU to another: two machines computed the same campaign
cost as 0.060475558692875686 and 0.060475558692875690. Printed with Python's shortest round-trip
repr, such a float has 16–17 significant digits, and so the same inputs would give different
bytes on different machines. Every output (plan JSON, command JSON, the data embedded in the
HTML reports, CSV and the ledger's export) therefore goes through :func:`round_floats`, which
keeps :data:`SIGNIFICANT_DIGITS` significant digits: far coarser than that noise (about 1e-16
relative), far finer than any figure a plan reports (cents, seconds, tokens). The precision is
stated in the plan JSON Schema and in docs/plan-json.md; ``ptplan check`` compares with
tolerances that suit it (a relative 1e-9 and a cent).
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["SIGNIFICANT_DIGITS", "round_float", "round_floats"]

SIGNIFICANT_DIGITS = 12
"""Significant digits of every float in ptplan's outputs."""


def round_float(x: float, digits: int = SIGNIFICANT_DIGITS) -> float:
    """``x`` rounded to ``digits`` significant digits (non-finite values pass through; the
    writers that cannot hold them refuse them)."""
    if x == 0 or not math.isfinite(x):
        return x
    r = float(f"{x:.{digits}g}")
    return 0.0 if r == 0 else r


def round_floats(obj: Any, digits: int = SIGNIFICANT_DIGITS) -> Any:
    """A copy of a JSON-like value (dicts, lists, tuples, scalars) with every float rounded by
    :func:`round_float`; ints, bools and strings are kept as they are."""
    if isinstance(obj, float):
        return round_float(obj, digits)
    if isinstance(obj, dict):
        return {k: round_floats(v, digits) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [round_floats(v, digits) for v in obj]
    return obj
