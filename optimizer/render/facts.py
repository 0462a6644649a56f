"""What ``render`` needs beyond the plan: the checkpoint cadence and storage lifecycle the
planner priced, read from the plan's ``lifecycle`` record (or, for plans written before it was
recorded, from the spec given with ``--spec``)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from optimizer.core.errors import InputError
from optimizer.plan.schema import Plan


@dataclass(frozen=True)
class Facts:
    """Checkpoint cadence and lifecycle: from the spec, or recovered from the plan.

    ``None`` = unknown without the spec (the spec set it and the plan does not record it).
    """

    every_steps: int | None
    keep_hot: int | None
    archive_every: int | None
    retention_days: int | None
    rollout_log_days: int
    metrics_days: int
    notes: tuple[str, ...] = ()

    def need(self, key: str) -> int:
        value = getattr(self, key)
        if value is None:
            field = "checkpoints." + key
            raise InputError(f"render: {field} was set in the spec and is not recorded in the "
                             "plan; pass --spec SPEC (the spec the plan was made from)")
        return int(value)


def facts_for(plan: Plan, spec: Any = None) -> Facts:
    """Lifecycle as the planner priced it (``optimizer.costs.storage``): spec where set, else policy."""
    storage = dict(plan.policy.get("storage") or {})
    out: dict[str, int | None] = {}
    notes: list[str] = []
    if spec is None and plan.lifecycle is not None:  # recorded by the planner
        life = plan.lifecycle
        return Facts(life.every_steps, life.keep_hot, life.archive_every, life.retention_days,
                     life.rollout_log_days, life.metrics_days)
    if spec is not None:
        from optimizer.plan.schema import spec_digest

        if spec.name != plan.spec_name:
            raise InputError(f"--spec: spec {spec.name!r} is not the spec of this plan "
                             f"({plan.spec_name!r}); pass the plan's own spec")
        if spec_digest(spec.model_dump(mode="json")) != plan.spec_digest:
            notes.append("--spec: the spec's digest differs from the plan's (spec edited since, "
                         "or another ptplan version); checkpoint cadence and lifecycle taken "
                         "from the spec")
        given = spec.checkpoints.model_fields_set
        out["every_steps"] = spec.checkpoint_every_steps
        for k in ("keep_hot", "archive_every", "retention_days"):
            out[k] = getattr(spec.checkpoints, k) if k in given else storage.get(k)
    else:
        lines = set(plan.defaults_applied)
        out["every_steps"] = None
        for line in plan.defaults_applied:
            m = re.fullmatch(r"checkpoints\.every_steps = (\d+) \(10 % of steps\)", line)
            if m:
                out["every_steps"] = int(m.group(1))
        for k in ("keep_hot", "archive_every", "retention_days"):
            unset = any(x.startswith(f"checkpoints.{k} = ") for x in lines)
            out[k] = storage.get(k) if unset else None
    return Facts(out["every_steps"], out["keep_hot"], out["archive_every"],
                 out["retention_days"], int(storage.get("rollout_log_days", 14)),
                 int(storage.get("metrics_days", 365)), tuple(notes))


# ---- context ----------------------------------------------------------------------------------
