"""The priors of ``ptplan compare``: the risk file (``--risk FILE``) the user writes, and the
shape of a prior observed in the run ledger (``--ledger URL``, :class:`LedgerPrior`).

A prior is never invented: the file gives, per method (``methods``) or per candidate spec name
(``specs``, which wins), the probability that the run forgets (``p_forgetting``), what the
rework costs (``rework``: a ``fraction_of_run`` of the planned run, or a recovery ``spec``
planned for real) and where the numbers come from (``source``, shown beside them). Strict YAML:
unknown keys, missing fields and out-of-range numbers are one-line input errors (exit 2).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, model_validator

from ptplan.core.errors import InputError
from ptplan.core.yamlio import StrictModel, quoted, read_mapping, validate
from ptplan.spec.project import ProjectSpec
from ptplan.spec.types import Method

Probability = Annotated[float, Field(ge=0, le=1, strict=False)]


class Rework(StrictModel):
    fraction_of_run: Annotated[float, Field(gt=0, le=10)] | None = None
    """The rework costs this fraction of the planned run (1 = the whole run again)."""
    spec: Annotated[str, Field(min_length=1, max_length=500)] | None = None
    """A recovery job's spec (path relative to the risk file), planned for real."""

    @model_validator(mode="after")
    def _one(self) -> Rework:
        if (self.fraction_of_run is None) == (self.spec is None):
            raise ValueError("rework: give exactly one of fraction_of_run or spec")
        return self


class Prior(StrictModel):
    p_forgetting: Probability
    """Probability that a run forgets (regresses on held-out skills) and needs the rework."""
    rework: Rework
    source: Annotated[str, Field(min_length=1, max_length=300)]
    """Where the numbers come from (a ledger query, a paper, the team's history)."""


class RiskFile(StrictModel):
    methods: dict[Method, Prior] = {}
    specs: dict[Annotated[str, Field(min_length=1, max_length=200)], Prior] = {}

    @model_validator(mode="after")
    def _some(self) -> RiskFile:
        if not self.methods and not self.specs:
            raise ValueError("the risk file gives no prior; add methods: {sft: {p_forgetting: "
                             "…, rework: {fraction_of_run: …}, source: …}} or specs: {…}")
        return self


def load_risk(path: str | Path) -> RiskFile:
    """Read and validate a risk file (one-line :class:`InputError`, exit 2, on any problem)."""
    return validate(RiskFile, read_mapping(path, "risk file"), f"risk file {quoted(path)}")


def prior_for(risk: RiskFile, spec_name: str, method: str) -> tuple[Prior | None, str]:
    """The candidate's prior and where it was found (``specs.NAME`` or ``methods.METHOD``)."""
    if spec_name in risk.specs:
        return risk.specs[spec_name], f"specs.{spec_name}"
    if method in risk.methods:
        return risk.methods[method], f"methods.{method}"  # type: ignore[index]
    return None, ""


def rework_spec_path(risk_path: str | Path, rework: Rework) -> Path:
    assert rework.spec is not None
    p = Path(os.path.normpath(Path(risk_path).parent / rework.spec))
    if not p.is_file():
        raise InputError(f"risk file {quoted(risk_path)}: rework.spec {quoted(rework.spec)} "
                         f"not found (looked at {quoted(p)}); give a spec path relative to "
                         "the risk file")
    return p


@dataclass(frozen=True)
class LedgerPrior:
    """A prior observed in the run ledger (built by the CLI from :mod:`ptplan.ledger.priors`,
    a sibling this package never imports): numbers, their counts and where they come from."""

    p_forgetting: float
    rework_fraction: float | None
    """Rework of the runs that forgot ÷ their own cost (None: no run forgot, none observed)."""
    found: str
    """Which runs: ``ledger family F`` or ``ledger method M (every family)``."""
    source: str
    """The counts in words (shown beside the numbers)."""
    counts: dict[str, Any]
    """The JSON of the observation (n, forgot, runs, fallback, family resolution)."""


LedgerLookup = Callable[[ProjectSpec], tuple[LedgerPrior | None, list[str]]]
"""A candidate's ledger prior and the notes that explain it (family resolution, fallback)."""
