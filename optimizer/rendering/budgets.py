"""``render --target guard`` and ``render --target budgets`` (docs/spend.md).

* ``guard``: the budget guard in the cluster: a ConfigMap holding the plan, a ServiceAccount, a
  Role and RoleBinding that may only get and patch the plan's RayJob (and, on AWS, a ClusterRole
  and ClusterRoleBinding that may only get and patch the plan's Karpenter NodePools), and a
  CronJob that runs ``ptplan guard PLAN --spend-from aws|gcp --act`` every hour from the image
  given with ``--image`` (ptplan installed in it; pinned by digest, else a note says so: nothing
  is installed at run time); and the cloud permissions it needs, least privilege:
  ``guard/iam-policy.json`` (AWS: ``ce:GetCostAndUsage``, ``autoscaling:DescribeAutoScalingGroups``
  and ``autoscaling:UpdateAutoScalingGroup`` only on groups tagged ``ptplan-plan`` = the plan's
  prefix) or ``guard/gcp-role.yaml`` (a GCP custom role: the three GKE permissions its node pool
  calls are authorised by).
* ``budgets``: Terraform for the provider's own budget, so the provider warns and acts even if
  nothing of ptplan runs: AWS ``aws_budgets_budget`` (COST, the plan's budget, filtered by the
  ``ptplan-plan`` cost allocation tag, ACTUAL and FORECASTED notifications at ``warn_at`` and
  ``stop_at``) and ``aws_budgets_budget_action`` at ``stop_at`` (a deny-launch IAM policy on
  the Karpenter controller role for instances tagged with the plan; STOP_EC2_INSTANCES on the
  plan's tagged instances); GCP
  ``google_billing_budget`` (filtered by the ``ptplan-plan`` label, threshold rules on
  current and forecasted spend, a Pub/Sub topic). Argument names: the Terraform AWS provider 6
  (``budgets_budget``, ``budgets_budget_action``) and Google provider 7 (``billing_budget``)
  documentation. A plan without a budget is budgeted at its own total cost.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ptplan.core.version import __version__
from ptplan.planfile.identity import PLAN_LABEL
from ptplan.planfile.schema import Plan

SCHEDULE = "17 * * * *"
"""Hourly, off the hour: Cost Explorer and the billing export update a few times a day, hourly
data at most hourly."""
DIGEST_PINNED = re.compile(r"@sha256:[0-9a-f]{64}$")
"""An image reference pinned by its content digest (``REPO[:TAG]@sha256:<64 hex>``)."""
GKE_PERMISSIONS = ("container.clusters.get", "container.clusters.update",
                   "container.operations.get")
"""What ``guard --act`` calls on GKE is authorised by (Google Cloud, "GKE API permissions",
https://cloud.google.com/kubernetes-engine/docs/reference/api-permissions):
``nodePools.get`` by ``container.clusters.get`` (the label check), ``nodePools.setAutoscaling``
and ``nodePools.setSize`` by ``container.clusters.update`` (GKE has no node-pool-level
permission to narrow it to), ``operations.get`` by ``container.operations.get`` (the wait)."""


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
            "guard": {"schedule": SCHEDULE, "version": __version__,
                      "extras": f"ptplan[{plan.provider},k8s]=={__version__}",
                      "gke_permissions": list(GKE_PERMISSIONS)}}


def guard_context(ctx: dict[str, Any], image: str | None, name: str) -> dict[str, Any]:
    """The guard's image (``--image``; None when not given), the name of its objects and the
    ``ptplan guard`` arguments of its CronJob: no shell, Kubernetes substitutes ``$(VAR)``."""
    p = ctx["project"]
    args = ["guard", "/plan/plan.json", "--spend-from", p["provider"], "--by", "hour", "--act",
            "--namespace", "$(POD_NAMESPACE)", "--cluster", p["cluster"], "--cache",
            "/tmp/spend.sqlite"]
    if p["provider"] == "gcp":
        args += ["--bq-table", "$(PTPLAN_BQ_TABLE)", "--gcp-project", "$(PTPLAN_GCP_PROJECT)"]
    return {**ctx["guard"], "image": image, "name": name, "args": args,
            "pinned": bool(image and DIGEST_PINNED.search(image))}


def guard_notes(ctx: dict[str, Any]) -> list[str]:
    """Render's notes on the guard target: an image not pinned by digest."""
    g = ctx["guard"]
    if g["pinned"]:
        return []
    return [f"guard: the image {g['image']} is not pinned by digest: a tag can be moved to "
            "another build; give --image REPO@sha256:<digest> (e.g. from `docker buildx "
            f"imagetools inspect`), an image with {g['extras']} installed"]


def aws_guard_policy(ctx: dict[str, Any]) -> dict[str, Any]:
    """The IAM policy of the guard's role (IRSA): read the bill, list Auto Scaling groups (no
    resource-level permission exists for either) and update only the groups tagged with the
    plan's ``ptplan-plan`` value."""
    prefix = ctx["labels"]["aws"][PLAN_LABEL]
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "ReadTheRunsBill", "Effect": "Allow", "Action": ["ce:GetCostAndUsage"],
         "Resource": "*"},
        {"Sid": "FindAutoScalingGroups", "Effect": "Allow",
         "Action": ["autoscaling:DescribeAutoScalingGroups"], "Resource": "*"},
        {"Sid": "ScaleOnlyThisPlansGroups", "Effect": "Allow",
         "Action": ["autoscaling:UpdateAutoScalingGroup"], "Resource": "*",
         "Condition": {"StringEquals": {f"aws:ResourceTag/{PLAN_LABEL}": prefix}}}]}


def guard_files(ctx: dict[str, Any]) -> dict[str, str]:
    from ptplan.templates import render

    out = {"guard/guard.yaml": render("guard/cronjob.yaml.j2", **ctx)}
    if ctx["project"]["provider"] == "aws":
        out["guard/iam-policy.json"] = json.dumps(aws_guard_policy(ctx), indent=2,
                                                  sort_keys=False) + "\n"
    else:
        out["guard/gcp-role.yaml"] = render("guard/gcp_role.yaml.j2", **ctx)
    return out


def budget_files(ctx: dict[str, Any]) -> dict[str, str]:
    from ptplan.templates import render

    provider = ctx["project"]["provider"]
    if provider == "aws":
        return {"budgets-aws/budgets.tf": render("terraform/aws_budgets.tf.j2", **ctx)}
    return {"budgets-gcp/budgets.tf": render("terraform/gcp_budgets.tf.j2", **ctx)}
