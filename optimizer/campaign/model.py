"""The campaign file: a name, one deadline and budget, stages (each a spec path relative to the
campaign file, and the stages it runs after). Strict YAML; a bad file is one line, exit 2."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, model_validator

from ptplan.core.errors import InputError
from ptplan.core.yamlio import StrictModel, quoted, validate

STAGE_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$"
"""A stage name: also the directory ``render`` writes the stage into, so never a path."""
Name = Annotated[str, Field(pattern=STAGE_NAME)]


class Stage(StrictModel):
    name: Name
    spec: Annotated[str, Field(min_length=1, max_length=500)]
    after: list[Name] = []
    """Stages whose output this one reads (it starts when they have all finished)."""


class Campaign(StrictModel):
    name: Annotated[str, Field(min_length=1, max_length=200)]
    deadline_hours: Annotated[float, Field(gt=0, le=1e6)]
    budget_usd: Annotated[float, Field(gt=0, le=1e12)] | None = None
    points: Annotated[int, Field(ge=2, le=30)] = 6
    """Frontier points per stage (``pareto``'s geometric grid of deadlines)."""
    stages: Annotated[list[Stage], Field(min_length=1, max_length=50)]

    @model_validator(mode="after")
    def _dag(self) -> Campaign:
        names = [s.name for s in self.stages]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"stage {dup[0]!r} is named twice; give each stage its own name")
        for s in self.stages:
            for dep in s.after:
                if dep not in names:
                    raise ValueError(f"stage {s.name!r} runs after {dep!r}, which is not a "
                                     f"stage (stages: {', '.join(names)})")
                if dep == s.name:
                    raise ValueError(f"stage {s.name!r} runs after itself")
        order(self)  # raises on a cycle
        return self


def order(c: Campaign) -> list[str]:
    """Stage names in dependency order (Kahn; ties in file order, so deterministic)."""
    left = {s.name: set(s.after) for s in c.stages}
    out: list[str] = []
    while left:
        ready = [s.name for s in c.stages if s.name in left and not left[s.name]]
        if not ready:
            raise ValueError("the stages' dependencies form a cycle ("
                             + ", ".join(sorted(left)) + "); remove one 'after'")
        for n in ready:
            out.append(n)
            del left[n]
        for deps in left.values():
            deps.difference_update(ready)
    return out


def is_campaign(data: dict[str, Any]) -> bool:
    return "stages" in data


def parse_campaign(data: dict[str, Any], path: str | Path) -> Campaign:
    c = validate(Campaign, data, f"campaign {quoted(path)}")
    for s in c.stages:
        p = stage_path(path, s)
        if not p.is_file():
            raise InputError(f"campaign {quoted(path)}: stage {s.name!r} spec {quoted(s.spec)} "
                             f"not found (looked at {quoted(p)}); give a path relative to the "
                             "campaign file")
    return c


def stage_path(campaign_path: str | Path, stage: Stage) -> Path:
    import os

    return Path(os.path.normpath(Path(campaign_path).parent / stage.spec))
