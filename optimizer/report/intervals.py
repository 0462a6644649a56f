"""The 80 % interval beside each expected figure: ``$910.01 (80 %: $820–$2,088)``,
``7.21 h (80 %: 6.48–16.7 h)``. The intervals are the plan JSON's ``uncertainty`` (schema 8,
:mod:`ptplan.planfile.uncertainty`), and ``pareto``'s and ``compare``'s copies of it; a figure
without one (a plan of schema ≤ 7) prints as before."""

from __future__ import annotations

from decimal import Decimal
from typing import Any


def _level(u: Any) -> str:
    level = u.get("level", 0.8) if isinstance(u, dict) else getattr(u, "level", 0.8)
    return f"{100 * level:.0f} %"


def _get(u: Any, key: str) -> Any:
    return u.get(key) if isinstance(u, dict) else getattr(u, key, None)


def dollars(x: str | float) -> str:
    """Whole dollars with thousands separators (``$2,088``): an interval's ends."""
    return f"${Decimal(str(x)):,.0f}"


def hours_text(x: float) -> str:
    return f"{x:,.3g}" if x < 100 else f"{x:,.0f}"


def usd_range(u: Any) -> str:
    """``80 %: $820–$2,088`` of an interval with ``total_cost_usd`` (empty without one)."""
    pair = _get(u, "total_cost_usd") if u is not None else None
    return f"{_level(u)}: {dollars(pair[0])}–{dollars(pair[1])}" if pair else ""


def hours_range(u: Any) -> str:
    pair = _get(u, "makespan_hours") if u is not None else None
    return f"{_level(u)}: {hours_text(pair[0])}–{hours_text(pair[1])} h" if pair else ""


def with_usd(text: str, u: Any) -> str:
    """``text (80 %: $820–$2,088)``, or ``text`` without an interval."""
    r = usd_range(u)
    return f"{text} ({r})" if r else text


def with_hours(text: str, u: Any) -> str:
    r = hours_range(u)
    return f"{text} ({r})" if r else text


def pair_usd(pair: list[float] | None, level: float = 0.8) -> str:
    """``80 %: $820–$2,088`` of a [low, high] pair of dollars (compare), empty for None."""
    return f"{100 * level:.0f} %: {dollars(pair[0])}–{dollars(pair[1])}" if pair else ""


def plan_lines(plan: Any, explain: bool) -> list[str]:
    """The plan table's interval line, and with ``--explain`` how it was derived."""
    u = getattr(plan, "uncertainty", None)
    if u is None:
        return []
    lines = [f"interval: total {with_usd('$' + plan.total_cost_usd, u)}; makespan "
             f"{with_hours(f'{plan.makespan_hours:,.2f} h', u)}; demand model ×"
             f"{_n(u.factor[0])}–{_n(u.factor[1])} ({u.family}, {u.cases} published runs"
             + (f"; {100 * u.calibrated_share:.0f} % of the GPU-hours calibrated from "
                f"{u.calibration_runs} ledger runs" if u.calibration_runs else "") + ")"]
    if explain:
        lines += ["uncertainty:", f"  {u.basis}"]
    return lines


def _n(x: float) -> str:
    return f"{x:.3f}".rstrip("0").rstrip(".")
