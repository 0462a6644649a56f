"""Reading a plan file: every command and module that takes ``PLAN.json`` loads it here."""

from __future__ import annotations

from pathlib import Path

from ptplan.planfile.schema import Plan


def load_plan(path: str | Path) -> Plan:
    """The plan in ``path`` (JSON or YAML, bounded and strict), validated against the schema;
    a file that is not a plan is one :class:`~ptplan.core.errors.InputError` line."""
    from ptplan.core.yamlio import quoted, read_mapping, validate

    return validate(Plan, read_mapping(str(path), "plan"), f"plan {quoted(path)}")
