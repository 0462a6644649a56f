"""What ``guard --act`` works on and what it reports (:mod:`ptplan.spend.act` tells the whole
story): the plan's deployed objects by name (:class:`Targets`) and the record of each change
with its undo, what was left as it was and each failure (:class:`ActReport`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ptplan.core.redact import redact
from ptplan.planfile.identity import PLAN_LABEL

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
INCOMPLETE_EXIT = 12
"""``ptplan guard`` exit code when the decision is stop and ``--act`` could not do all of it
(a call failed, an object is not the plan's): the report lists what was done and what failed."""
ASG_PERMISSIONS = ("autoscaling:DescribeAutoScalingGroups, and autoscaling:UpdateAutoScalingGroup "
                   f"on groups tagged {PLAN_LABEL}")
CALL_CHANGED_NOTHING = "that call changed nothing"


@dataclass(frozen=True)
class Targets:
    """What render deployed for a plan, by the names it gave it (:func:`targets_for`)."""

    provider: str
    region: str
    rayjob: str
    namespace: str = "default"
    karpenter_nodepools: tuple[tuple[str, str], ...] = ()  # (name, GPU resource)
    gke_node_pools: tuple[str, ...] = ()
    cluster: str = "ptplan"
    gcp_project: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    prefix: str = ""
    """The plan's prefix: the value of the ``ptplan-plan`` label every object must carry."""


@dataclass
class ActReport:
    """What ``--act`` did: each change with the command that undoes it, what it left as it was
    (already stopped, nothing to find), and each failure with its error."""

    done: list[dict[str, str]] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    failed: list[dict[str, str]] = field(default_factory=list)

    def changed(self, change: str, undo: str) -> None:
        self.done.append({"change": change, "undo": undo})

    def fail(self, what: str, error: object) -> None:
        self.failed.append({"what": what, "error": redact(error)})

    @property
    def complete(self) -> bool:
        return not self.failed

    def as_dict(self) -> dict[str, Any]:
        return {"done": self.done, "unchanged": self.unchanged, "failed": self.failed,
                "complete": self.complete}


def not_ours(label: object, prefix: str) -> str:
    found = "no ptplan-plan label" if label is None else f"{PLAN_LABEL}={label!r}"
    return (f"refused: it carries {found}, not {PLAN_LABEL}={prefix!r}: not this plan's, left "
            "untouched")
