"""What ``render`` needs beyond pools: the checkpoint cadence and storage lifecycle the planner
priced, read from the plan's ``lifecycle`` record.

Plans of schema 1 written before ``lifecycle`` was recorded do not carry it: for those the
values come from the spec given with ``--spec`` (the spec's ``checkpoints`` where it set them,
otherwise the plan's policy, as :func:`ptplan.costs.storage.lifecycle` priced them). Without
``--spec`` they are unknown, and a target that needs one fails in one line saying to pass the
spec or regenerate the plan. The human text of ``defaults_applied`` is never parsed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ptplan.core.errors import InputError
from ptplan.planfile.schema import REGENERATE, Plan, spec_digest
from ptplan.rendering.frameworks import DEFAULT, Framework, Run, run_of

SPEC_KEYS = ("keep_hot", "archive_every", "retention_days")
"""Lifecycle values a spec may set (``checkpoints``); the others are the policy's alone."""


@dataclass(frozen=True)
class Facts:
    """Checkpoint cadence and lifecycle as the plan priced them.

    ``None`` = unknown: a schema-1 plan without its ``lifecycle`` record, rendered without
    ``--spec``.
    """

    every_steps: int | None
    keep_hot: int | None
    archive_every: int | None
    retention_days: int | None
    rollout_log_days: int
    metrics_days: int
    notes: tuple[str, ...] = ()
    run: Run | None = None
    """Run settings from ``--spec`` (batch, samples, lengths, eval, checkpoint contents): the
    plan does not record them; ``None`` without the spec (launches then refuse to start)."""
    framework: Framework = DEFAULT
    """The framework and release line the launch commands target (``--framework``)."""

    def need(self, key: str) -> int:
        value = getattr(self, key)
        if value is None:
            raise InputError(f"render: checkpoints.{key} is not recorded in this plan (schema "
                             "1, written before plans recorded their lifecycle); pass --spec "
                             f"SPEC (the spec the plan was made from), or {REGENERATE}")
        return int(value)


def facts_for(plan: Plan, spec: Any = None) -> Facts:
    """The plan's ``lifecycle``; for a schema-1 plan without it, the spec's ``checkpoints``
    where set, else the plan's policy (``None`` where unknown without the spec)."""
    if spec is not None:
        _same_spec(plan, spec)
    run = run_of(spec) if spec is not None else None
    life = plan.lifecycle
    if life is not None:
        return Facts(life.every_steps, life.keep_hot, life.archive_every, life.retention_days,
                     life.rollout_log_days, life.metrics_days, run=run)
    storage = dict(plan.policy.get("storage") or {})
    policy_days = (int(storage.get("rollout_log_days", 14)), int(storage.get("metrics_days", 365)))
    if spec is None:
        return Facts(None, None, None, None, *policy_days)
    given = spec.checkpoints.model_fields_set
    values = {k: getattr(spec.checkpoints, k) if k in given else storage.get(k)
              for k in SPEC_KEYS}
    notes = []
    if spec_digest(spec.model_dump(mode="json")) != plan.spec_digest:
        notes.append("--spec: the spec's digest differs from the plan's (spec edited since, "
                     "or another ptplan version); checkpoint cadence and lifecycle taken "
                     "from the spec")
    return Facts(spec.checkpoint_every_steps, values["keep_hot"], values["archive_every"],
                 values["retention_days"], *policy_days, notes=tuple(notes), run=run)


def _same_spec(plan: Plan, spec: Any) -> None:
    if spec.name != plan.spec_name:
        raise InputError(f"--spec: spec {spec.name!r} is not the spec of this plan "
                         f"({plan.spec_name!r}); pass the plan's own spec")
