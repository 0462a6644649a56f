"""``render --target guard`` and ``render --target budgets`` (docs/spend.md).

* ``guard``: the budget guard in the cluster: a ConfigMap holding the plan, a ServiceAccount, a
  Role and RoleBinding that may only get and patch the plan's RayJob (and, on AWS, a ClusterRole
  and ClusterRoleBinding that may only get and patch the plan's Karpenter NodePools), and a
  CronJob that runs ``ptplan guard PLAN --spend-from aws|gcp --act`` every hour.
* ``budgets``: Terraform for the provider's own budget, so the provider warns and acts even if
  nothing of ptplan runs: AWS ``aws_budgets_budget`` (COST, the plan's budget, filtered by the
  ``ptplan-project`` cost allocation tag, ACTUAL and FORECASTED notifications at ``warn_at`` and
  ``stop_at``) and ``aws_budgets_budget_action`` at ``stop_at`` (a deny-launch IAM policy on
  the Karpenter controller role; STOP_EC2_INSTANCES on the run's tagged instances); GCP
  ``google_billing_budget`` (filtered by the ``ptplan-project`` label, threshold rules on
  current and forecasted spend, a Pub/Sub topic). Argument names: the Terraform AWS provider 6
  (``budgets_budget``, ``budgets_budget_action``) and Google provider 7 (``billing_budget``)
  documentation. A plan without a budget is budgeted at its own total cost.
"""

from __future__ import annotations

from typing import Any

from ptplan.core.version import __version__
from ptplan.planfile.schema import Plan

SCHEDULE = "17 * * * *"
"""Hourly, off the hour: Cost Explorer and the billing export update a few times a day, hourly
data at most hourly."""
GUARD_IMAGE = "python:3.12-slim"


def budget_figures(plan: Plan) -> dict[str, Any]:
    shares = plan.policy.get("budget", {}) if isinstance(plan.policy, dict) else {}
    warn_at, stop_at = float(shares.get("warn_at", 0.8)), float(shares.get("stop_at", 1.0))
    if plan.budget_usd is not None:
        limit, source = float(plan.budget_usd), "the plan's budget"
    else:
        limit, source = float(plan.total_cost_usd), "the plan's total cost (no budget set)"
    cents = round(limit * 100)
    return {"usd": f"{limit:.2f}", "units": str(cents // 100), "nanos": (cents % 100) * 10**7,
            "source": source, "warn_pct": round(warn_at * 100, 4),
            "stop_pct": round(stop_at * 100, 4), "warn_at": warn_at, "stop_at": stop_at}


def extra_context(plan: Plan) -> dict[str, Any]:
    return {"budget": budget_figures(plan), "plan_json": plan.model_dump_json(indent=1),
            "guard": {"schedule": SCHEDULE, "image": GUARD_IMAGE,
                      "install": f"ptplan[{plan.provider},k8s]=={__version__}"}}


def guard_files(ctx: dict[str, Any]) -> dict[str, str]:
    from ptplan.templates import render

    return {"guard/guard.yaml": render("guard/cronjob.yaml.j2", **ctx)}


def budget_files(ctx: dict[str, Any]) -> dict[str, str]:
    from ptplan.templates import render

    provider = ctx["project"]["provider"]
    if provider == "aws":
        return {"budgets-aws/budgets.tf": render("terraform/aws_budgets.tf.j2", **ctx)}
    return {"budgets-gcp/budgets.tf": render("terraform/gcp_budgets.tf.j2", **ctx)}
