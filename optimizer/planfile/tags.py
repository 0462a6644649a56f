"""The cost tags of a plan's deployment: the ``ptplan-*`` labels every rendered resource
carries (:mod:`ptplan.rendering`), by which ``ptplan spend`` selects the bill and splits it and
``ptplan guard`` forecasts it, without rendering anything.

Keys: ``ptplan-plan`` (the plan's prefix ``<slug>-<digest>``, :mod:`ptplan.planfile.identity`:
which deployment an object belongs to), ``ptplan-project``, ``ptplan-pool``, ``ptplan-phase``,
``ptplan-method``, ``ptplan-capacity-type``; values sanitised per platform (Kubernetes label
values, GCP labels, AWS tags; :mod:`ptplan.planfile.names`), a value that had to change
carrying a hash of the original, so that two names never share a tag value.

The run-level tags (:func:`run_cost_tags`: plan, project, method) select the run's bill
(``ptplan spend``, ``ptplan guard``) and its Auto Scaling groups (``guard --act``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ptplan.planfile.identity import PLAN_LABEL, plan_prefix
from ptplan.planfile.names import aws_tag, gcp_label, k8s_label
from ptplan.planfile.schema import Plan

CAPACITY_LABEL = {"on_demand": "on-demand", "spot": "spot", "reserved": "reserved",
                  "block": "block", "flex_start": "flex-start"}
"""The ``ptplan-capacity-type`` value (and node label) of each capacity type."""
SANITIZE: dict[str, Callable[[str], str]] = {"k8s": k8s_label, "gcp": gcp_label, "aws": aws_tag}
GROUP_TAGS = {"phase": "ptplan-phase", "pool": "ptplan-pool",
              "capacity_type": "ptplan-capacity-type"}
"""``ptplan spend --group``: the cost tag that splits the bill."""


def cost_labels(project: str, pool: str, phase: str, method: str, capacity: str,
                sanitize: Callable[[str], str], prefix: str | None = None) -> dict[str, str]:
    """The cost tags with their values, as ``sanitize`` spells them; ``ptplan-plan`` first
    when the plan's ``prefix`` is given."""
    return {**({PLAN_LABEL: sanitize(prefix)} if prefix is not None else {}),
            "ptplan-project": sanitize(project), "ptplan-pool": sanitize(pool),
            "ptplan-phase": sanitize(phase), "ptplan-method": sanitize(method),
            "ptplan-capacity-type": sanitize(capacity)}


def label_sets(plan: Plan, pool: str, phase: str, capacity: str,
               prefix: str | None = None) -> dict[str, dict[str, str]]:
    """The labels of one resource of ``plan`` (its ``ptplan-plan`` and cost tags), per platform
    (``k8s``, ``gcp``, ``aws``); ``prefix``: :func:`ptplan.planfile.identity.plan_prefix`
    (computed when not given)."""
    prefix = prefix or plan_prefix(plan)
    return {name: cost_labels(plan.spec_name, pool, phase, plan.method, capacity, f, prefix)
            for name, f in (("k8s", k8s_label), ("gcp", gcp_label), ("aws", aws_tag))}


def run_cost_tags(plan: Plan, platform: str) -> dict[str, str]:
    """The run-level tags on every rendered resource, as ``platform`` spells them: what
    ``ptplan spend`` and ``ptplan guard`` filter the bill by and ``guard --act`` finds Auto
    Scaling groups by (``render --target budgets`` filters budgets by ``ptplan-project``)."""
    f = SANITIZE[platform]
    return {PLAN_LABEL: f(plan_prefix(plan)), "ptplan-project": f(plan.spec_name),
            "ptplan-method": f(plan.method)}


def group_tag_value(pool: Any, capacity_type: str, group: str, platform: str) -> str:
    """The value of the ``GROUP_TAGS[group]`` tag on a pool's nodes of one capacity type."""
    value = {"phase": "-".join(pool.phases), "pool": pool.name,
             "capacity_type": CAPACITY_LABEL.get(capacity_type, capacity_type)}[group]
    return SANITIZE[platform](value)
