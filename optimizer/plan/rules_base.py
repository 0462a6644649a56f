"""Tolerances of the plan verifier's rules: plan figures are rounded (hours to 6 places, money
to cents), so recomputed figures match them within these bounds."""

from __future__ import annotations

from decimal import Decimal

REL = 1e-6


def close(a: float, b: float, rel: float = REL, abs_: float = 1e-6) -> bool:
    return abs(a - b) <= max(abs_, rel * max(abs(a), abs(b)))


def money(s: str) -> float:
    return float(Decimal(s))
