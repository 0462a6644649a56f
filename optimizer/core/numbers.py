"""Bytes that do not depend on the CPU: every float ptplan writes is rounded to 12 significant
digits.

Vectorised arithmetic (numpy's SIMD kernels, BLAS, the order of a parallel sum) may differ in
the last unit in the last place from one CPU to another: two machines computed the same campaign
cost as 0.060475558692875686 and 0.060475558692875690. Printed with Python's shortest round-trip
repr, such a float has 16–17 significant digits, and so the same inputs would give different
bytes on different machines. Every computed output therefore goes through :func:`round_floats`,
which keeps :data:`SIGNIFICANT_DIGITS` significant digits: far coarser than that noise (about
1e-16 relative), far finer than any figure a plan reports (cents, seconds, tokens). Where:

* the plan: :meth:`ptplan.planfile.schema.Plan.to_json`, and the planner's plan in memory
  (:meth:`~ptplan.planfile.schema.Plan.rounded`, before it is verified), so that a plan read
  back from its JSON is the plan that was verified and printed; the spec digest hashes the spec
  with its floats rounded (:mod:`ptplan.planfile.digest`), so a derived spec (a campaign stage's
  deadline) has the same digest on any CPU;
* every command's JSON (``ptplan.cli.common.dumps``: pareto, whatif, reserve, compare,
  simulate, campaigns, estimate, runs review, spend, guard, prices) and the Python API's
  return values (:mod:`ptplan.api`), which equal it;
* the HTML reports: the data a page is built from and the charts' JSON
  (``ptplan.cli.report.build_doc``, :func:`ptplan.report.html.script_json`).

Tables, Markdown and ``simulate``'s CSV print fixed decimals. The ledger's export is not
rounded: it prints the records as stored (Python's repr of a stored float is the same on every
CPU), and an export must read back as the records it came from.

A value within the noise of a rounding boundary can still come out one unit apart in its 12th
digit (about one float in 10^4 that differs at all); money, rounded to cents, is that far from a
boundary about 10^7 times less often. The precision is stated in the plan JSON Schema
(:data:`ptplan.planfile.fields.PRECISION_STATEMENT`) and in docs/plan-json.md; ``ptplan check``
compares with tolerances far wider (relative 1e-6 for most figures, 1e-9 for the deadline
against the spec; money within a cent per line).
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
