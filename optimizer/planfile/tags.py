"""The cost tags of a plan's deployment: the ``ptplan-*`` labels every rendered resource
carries (:mod:`ptplan.rendering`), by which ``ptplan spend`` selects the bill and splits it and
``ptplan guard`` forecasts it, without rendering anything.

Keys: ``ptplan-project``, ``ptplan-pool``, ``ptplan-phase``, ``ptplan-method``,
``ptplan-capacity-type``; values sanitised per platform (Kubernetes label values, GCP labels,
AWS tags; :mod:`ptplan.planfile.names`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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
                sanitize: Callable[[str], str]) -> dict[str, str]:
    """The five cost tags with their values, as ``sanitize`` spells them."""
    return {"ptplan-project": sanitize(project), "ptplan-pool": sanitize(pool),
            "ptplan-phase": sanitize(phase), "ptplan-method": sanitize(method),
            "ptplan-capacity-type": sanitize(capacity)}


def label_sets(plan: Plan, pool: str, phase: str, capacity: str) -> dict[str, dict[str, str]]:
    """The cost tags of one resource of ``plan``, per platform (``k8s``, ``gcp``, ``aws``)."""
    return {name: cost_labels(plan.spec_name, pool, phase, plan.method, capacity, f)
            for name, f in (("k8s", k8s_label), ("gcp", gcp_label), ("aws", aws_tag))}


def run_cost_tags(plan: Plan, platform: str) -> dict[str, str]:
    """The run-level cost tags on every rendered resource, as ``platform`` spells them: what
    ``ptplan spend`` filters the bill by and ``render --target budgets`` filters budgets by."""
    f = SANITIZE[platform]
    return {"ptplan-project": f(plan.spec_name), "ptplan-method": f(plan.method)}


def group_tag_value(pool: Any, capacity_type: str, group: str, platform: str) -> str:
    """The value of the ``GROUP_TAGS[group]`` tag on a pool's nodes of one capacity type."""
    value = {"phase": "-".join(pool.phases), "pool": pool.name,
             "capacity_type": CAPACITY_LABEL.get(capacity_type, capacity_type)}[group]
    return SANITIZE[platform](value)
