"""Tolerances of the plan verifier's rules: plan figures are rounded (floats to 12 significant
digits, :mod:`ptplan.core.numbers`; money to cents), so recomputed figures match them within
these bounds: a relative :data:`REL` (a million times the rounding) or a small absolute one,
money within a cent per line."""

from __future__ import annotations

import math
from decimal import Decimal

REL = 1e-6


def close(a: float, b: float, rel: float = REL, abs_: float = 1e-6) -> bool:
    """Within ``abs_`` or ``rel`` of the larger. Never for a non-finite value: the relative
    bound of an infinite one is infinite, so every number would pass (a CPU pool's work
    node-hours on a 0-vCPU node are infinite, and any recorded figure matched them)."""
    if not (math.isfinite(a) and math.isfinite(b)):
        return False
    return abs(a - b) <= max(abs_, rel * max(abs(a), abs(b)))


def money(s: str) -> float:
    return float(Decimal(s))
