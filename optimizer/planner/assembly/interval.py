"""The plan's 80 % interval (schema 8): each calibration record given the run rates of its
spec entry (``calibration[].run_rates``, ``ptplan runs calibrate``), then
:func:`ptplan.planfile.uncertainty.with_uncertainty` (the arithmetic ``check`` repeats)."""

from __future__ import annotations

from ptplan.planfile.schema import Plan
from ptplan.planfile.uncertainty import with_uncertainty
from ptplan.spec.project import ProjectSpec


def with_interval(plan: Plan, spec: ProjectSpec) -> Plan:
    """``plan`` with its calibration records' run rates and its interval."""
    rates: dict[tuple[str, str, str], list[float] | None] = {
        (c.phase, c.gpu, c.precision): c.run_rates for c in spec.calibration}
    records = [rec.model_copy(update={"run_rates": list(
        rates.get((rec.phase, rec.gpu, rec.measured_precision)) or [])})
        for rec in plan.calibration]
    return with_uncertainty(plan.model_copy(update={"calibration": records}))
