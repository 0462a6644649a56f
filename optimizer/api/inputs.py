"""The public API's inputs (:mod:`ptplan.api`): the loaders ``load_spec``, ``load_catalog``,
``load_policy`` and ``load_plan``, and the conversions every entry point applies to what it is
given (an object, or a path to load it from).

Each loader reads a file exactly as the ``ptplan`` command reads it, so an object loaded here and
the same file named on the command line give the same results. Errors are
:class:`~ptplan.core.errors.InputError`, one line: what is wrong, where, how to fix it.
"""

from __future__ import annotations

import datetime as dt
import os

from ptplan.core.errors import InputError
from ptplan.planfile.schema import Plan
from ptplan.policies.model import Policy
from ptplan.providers.base import Catalog
from ptplan.spec.project import ProjectSpec

__all__ = ["as_catalog", "as_plan", "as_policy", "as_spec", "load_catalog", "load_plan",
           "load_policy", "load_spec", "with_start_after"]


def load_spec(path: str | os.PathLike[str],
              calibration: str | os.PathLike[str] | None = None) -> ProjectSpec:
    """Load and validate a project spec YAML, as ``ptplan plan SPEC`` reads it.

    Args:
        path: The spec file (YAML or JSON).
        calibration: A calibration file (a ``calibration:`` list, as ``ptplan runs calibrate``
            writes it) whose entries are added to the spec's own, as ``ptplan plan
            --calibration FILE`` does; an entry for a cell the spec also measures replaces it.

    Returns:
        The validated spec (an immutable pydantic model).

    Raises:
        InputError: The file is missing, unreadable or not a valid spec.
    """
    if calibration is not None:
        from ptplan.spec.calibration import load_spec_calibrated

        return load_spec_calibrated(os.fspath(path), os.fspath(calibration))
    from ptplan.spec.project import load_spec as load

    return load(os.fspath(path))


def load_catalog(ref: str | os.PathLike[str] = "embedded") -> Catalog:
    """Load a price catalog, as ``--catalog`` names it.

    Args:
        ref: ``"embedded"`` (the offline snapshot shipped with ptplan), ``"cache"`` (the local
            price cache filled by ``ptplan prices refresh``), or the path of a price-cache file
            (``*.sqlite``) or of a custom catalog YAML.

    Returns:
        The catalog: offers, storage tiers, egress and reserved rates.

    Raises:
        InputError: An unknown name, or a file that is missing or malformed.
        ProviderError: The price cache cannot be read.
    """
    from ptplan.providers.registry import load_catalog as load

    return load(os.fspath(ref))


def load_policy(path: str | os.PathLike[str] | None = None) -> Policy:
    """Load a policy YAML (with its ``extends`` chain), or the default policy.

    Args:
        path: The policy file; ``None`` gives ptplan's default policy
            (``policies/default.yaml``), which every command uses without ``--policy``.

    Returns:
        The validated policy.

    Raises:
        InputError: The file is missing, malformed, or its ``extends`` chain is broken.
    """
    from ptplan.policies.model import load_policy as load

    return load(None if path is None else os.fspath(path))


def load_plan(path: str | os.PathLike[str]) -> Plan:
    """Load a plan JSON written by ``ptplan plan --format json``, as ``ptplan check``,
    ``render`` and ``simulate`` read it (validated against the plan schema, not yet re-verified:
    ``ptplan.verify`` does that).

    Args:
        path: The plan file.

    Returns:
        The plan (an immutable pydantic model).

    Raises:
        InputError: The file is missing, unreadable or not a plan.
    """
    from ptplan.core.yamlio import quoted, read_mapping, validate

    name = os.fspath(path)
    return validate(Plan, read_mapping(name, "plan"), f"plan {quoted(name)}")


def as_spec(spec: ProjectSpec | str | os.PathLike[str]) -> ProjectSpec:
    """``spec`` itself, or the spec loaded from the path."""
    return spec if isinstance(spec, ProjectSpec) else load_spec(spec)


def as_catalog(catalog: Catalog | str | os.PathLike[str] | None) -> Catalog:
    """``catalog`` itself, the catalog it names, or the embedded catalog for ``None``."""
    if isinstance(catalog, Catalog):
        return catalog
    return load_catalog("embedded" if catalog is None else catalog)


def as_policy(policy: Policy | str | os.PathLike[str] | None) -> Policy:
    """``policy`` itself, the policy at the path, or the default policy for ``None``."""
    return policy if isinstance(policy, Policy) else load_policy(policy)


def as_plan(plan: Plan | str | os.PathLike[str]) -> Plan:
    """``plan`` itself, or the plan loaded from the path."""
    return plan if isinstance(plan, Plan) else load_plan(plan)


def with_start_after(spec: ProjectSpec, start_after: dt.date | str | None) -> ProjectSpec:
    """``spec`` with ``start_after`` as its ``sla.start_after``, re-validated (a date deadline
    counts from it), as ``--start-after`` sets it; ``spec`` unchanged for ``None``."""
    if start_after is None:
        return spec
    if isinstance(start_after, str):
        try:
            start_after = dt.date.fromisoformat(start_after)
        except ValueError:
            raise InputError(f"start_after: {start_after!r} is not a date; use YYYY-MM-DD, "
                             "e.g. 2027-01-15") from None
    from ptplan.core.yamlio import validate

    raw = spec.sla.model_dump(exclude={"deadline_hours"} if spec.sla.deadline else set())
    sla = validate(type(spec.sla), {**raw, "start_after": start_after}, "start_after")
    return spec.model_copy(update={"sla": sla})
