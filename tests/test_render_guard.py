"""``render --target guard`` (CronJob + RBAC + the plan as a ConfigMap) and ``render --target
budgets`` (AWS Budgets / Cloud Billing budget Terraform): parsed back and checked field by
field. Kubernetes objects go through the official client's models (required fields checked,
and a round trip that would drop any field the API does not know); Terraform through
python-hcl2, with the argument names of the providers' documentation:
https://registry.terraform.io/providers/hashicorp/aws/latest/docs/resources/budgets_budget,
.../budgets_budget_action, and
https://registry.terraform.io/providers/hashicorp/google/latest/docs/resources/billing_budget."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from ptplan.cli.app import app
from ptplan.core.errors import InputError
from ptplan.core.version import __version__
from ptplan.planfile.identity import plan_prefix
from ptplan.planfile.load import load_plan
from ptplan.planfile.schema import Plan
from ptplan.rendering.checks.readers import _hcl, _resources
from ptplan.rendering.targets import TARGETS, render_plan

runner = CliRunner()
PLANS = Path(__file__).parent / "data" / "plans"
MODELS = {"ServiceAccount": "V1ServiceAccount", "Role": "V1Role", "RoleBinding": "V1RoleBinding",
          "ClusterRole": "V1ClusterRole", "ClusterRoleBinding": "V1ClusterRoleBinding",
          "ConfigMap": "V1ConfigMap", "CronJob": "V1CronJob"}
BUDGET_ARGS = {"name", "budget_type", "limit_amount", "limit_unit", "time_unit",
               "time_period_start", "time_period_end", "cost_filter", "notification", "tags",
               "account_id", "cost_types", "planned_limit", "auto_adjust_data", "name_prefix",
               "billing_view_arn"}
NOTIFICATION_ARGS = {"comparison_operator", "threshold", "threshold_type", "notification_type",
                     "subscriber_email_addresses", "subscriber_sns_topic_arns"}
ACTION_ARGS = {"budget_name", "action_type", "approval_model", "notification_type",
               "execution_role_arn", "action_threshold", "definition", "subscriber",
               "account_id", "tags", "count"}
GCP_BUDGET_ARGS = {"billing_account", "display_name", "budget_filter", "amount",
                   "threshold_rules", "all_updates_rule", "ownership_scope"}
GCP_FILTER_ARGS = {"projects", "resource_ancestors", "credit_types_treatment", "services",
                   "subaccounts", "labels", "calendar_period", "custom_period", "credit_types"}


def plan(name: str) -> Plan:
    return load_plan(PLANS / f"{name}.json")


IMAGE = "registry.example/ptplan@sha256:" + "0123456789abcdef" * 4
"""The guard's image, pinned by digest (``--image``)."""


def docs(name: str) -> list[dict[str, Any]]:
    p = plan(name)
    files, notes = render_plan(p, "guard", image=IMAGE)
    assert sorted(files) == sorted(["guard/guard.yaml", "guard/iam-policy.json"
                                    if p.provider == "aws" else "guard/gcp-role.yaml"])
    assert not any(n.startswith("guard:") for n in notes)  # pinned: no note
    return [d for d in yaml.safe_load_all(files["guard/guard.yaml"]) if d]


def by_kind(objs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["kind"]: o for o in objs}


@pytest.mark.parametrize("name", ["grpo-aws", "grpo-gcp", "opd-aws-mixed"])
def test_guard_objects_validate_with_the_kubernetes_models(name: str) -> None:
    from kubernetes.client import ApiClient

    api = ApiClient()
    for obj in docs(name):
        model = api._ApiClient__deserialize(obj, MODELS[obj["kind"]])  # required fields checked
        assert api.sanitize_for_serialization(model) == obj, f"{obj['kind']}: unknown field"


def test_guard_rbac_is_limited_to_the_plans_objects() -> None:
    k = by_kind(docs("grpo-aws"))
    prefix = plan_prefix(plan("grpo-aws"))
    assert k["Role"]["rules"] == [{"apiGroups": ["ray.io"], "resources": ["rayjobs"],
                                   "resourceNames": [prefix], "verbs": ["get", "patch"]}]
    files, _ = render_plan(plan("grpo-aws"), "karpenter")
    pools = [d["metadata"]["name"] for d in yaml.safe_load_all(files["karpenter/nodepools.yaml"])
             if d and d["kind"] == "NodePool"]
    (rule,) = k["ClusterRole"]["rules"]
    assert rule["resources"] == ["nodepools"] and rule["resourceNames"] == pools
    assert rule["verbs"] == ["get", "patch"] and len(pools) == 3
    for binding in ("RoleBinding", "ClusterRoleBinding"):
        assert k[binding]["subjects"] == [{"kind": "ServiceAccount",
                                           "name": f"{prefix}-guard",
                                           "namespace": "default"}]
    assert all(o["metadata"]["labels"]["ptplan-plan"] == prefix for o in k.values())
    gcp = by_kind(docs("grpo-gcp"))
    assert "ClusterRole" not in gcp and "ClusterRoleBinding" not in gcp


def test_guard_cronjob_runs_the_guard_on_the_plan(tmp_path: Path) -> None:
    k = by_kind(docs("grpo-aws"))
    prefix = plan_prefix(plan("grpo-aws"))
    job = k["CronJob"]["spec"]
    assert job["schedule"] == "17 * * * *" and job["concurrencyPolicy"] == "Forbid"
    pod = job["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == f"{prefix}-guard"
    (c,) = pod["containers"]
    # the pinned image's own ptplan, no shell and nothing installed when it runs
    assert c["image"] == IMAGE and c["command"] == ["ptplan"]
    assert c["args"] == ["guard", "/plan/plan.json", "--spend-from", "aws", "--by", "hour",
                         "--act", "--namespace", "$(POD_NAMESPACE)", "--cluster", "ptplan",
                         "--cache", "/tmp/spend.sqlite"]
    text = render_plan(plan("grpo-aws"), "guard", image=IMAGE)[0]["guard/guard.yaml"]
    assert "pip install" not in text and f"ptplan[aws,k8s]=={__version__}" in text
    # the ConfigMap holds the plan itself, whose prefix is the one the names carry
    held = Plan.model_validate_json(k["ConfigMap"]["data"]["plan.json"])
    assert held == plan("grpo-aws")
    (tmp_path / "held.json").write_text(k["ConfigMap"]["data"]["plan.json"])
    assert plan_prefix(load_plan(tmp_path / "held.json")) == prefix
    g = by_kind(docs("grpo-gcp"))
    gp = plan_prefix(plan("grpo-gcp"))
    (c,) = g["CronJob"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    assert c["args"][-4:] == ["--bq-table", "$(PTPLAN_BQ_TABLE)", "--gcp-project",
                              "$(PTPLAN_GCP_PROJECT)"]
    refs = {e["name"]: e["valueFrom"] for e in c["env"]}
    assert refs["PTPLAN_BQ_TABLE"] == {"configMapKeyRef": {"name": f"{gp}-guard",
                                                           "key": "bq_table"}}


def test_guard_needs_an_image_and_notes_one_not_pinned_by_digest() -> None:
    with pytest.raises(InputError, match="guard: give --image, the image the guard's CronJob "
                                         "runs: one with ptplan\\[aws,k8s\\]=="):
        render_plan(plan("grpo-aws"), "guard")
    files, notes = render_plan(plan("grpo-aws"), "guard", image="registry.example/ptplan:0.2")
    assert [n for n in notes if n.startswith("guard:")] == [
        "guard: the image registry.example/ptplan:0.2 is not pinned by digest: a tag can be "
        "moved to another build; give --image REPO@sha256:<digest> (e.g. from `docker buildx "
        f"imagetools inspect`), an image with ptplan[aws,k8s]=={__version__} installed"]
    assert "NOT pinned by digest" in files["guard/guard.yaml"]


def test_guard_permissions_are_least_privilege() -> None:
    """AWS: the bill, the listing, and updates only of groups tagged with this plan; GCP: a
    custom role of the three permissions GKE authorises the guard's calls by, no predefined
    admin role."""
    import json

    p = plan("grpo-aws")
    files, _ = render_plan(p, "guard", image=IMAGE)
    policy = json.loads(files["guard/iam-policy.json"])
    by_action = {a: st for st in policy["Statement"] for a in st["Action"]}
    assert set(by_action) == {"ce:GetCostAndUsage", "autoscaling:DescribeAutoScalingGroups",
                              "autoscaling:UpdateAutoScalingGroup"}
    assert all(st["Effect"] == "Allow" for st in policy["Statement"])
    assert by_action["autoscaling:UpdateAutoScalingGroup"]["Condition"] == {
        "StringEquals": {"aws:ResourceTag/ptplan-plan": plan_prefix(p)}}
    assert "Condition" not in by_action["ce:GetCostAndUsage"]
    assert "guard/iam-policy.json" in files["guard/guard.yaml"]
    g = plan("grpo-gcp")
    files, _ = render_plan(g, "guard", image=IMAGE)
    role = yaml.safe_load(files["guard/gcp-role.yaml"])
    assert role["includedPermissions"] == ["container.clusters.get",
                                           "container.clusters.update",
                                           "container.operations.get"]
    assert role["stage"] == "GA" and plan_prefix(g) in role["title"]
    assert "Cluster Admin" not in files["guard/guard.yaml"]
    assert "guard/gcp-role.yaml" in files["guard/guard.yaml"]


def test_guard_and_budgets_are_not_part_of_all() -> None:
    assert "guard" not in TARGETS and "budgets" not in TARGETS
    files, _ = render_plan(plan("grpo-aws"), "all")
    assert not any(p.startswith(("guard/", "budgets-")) for p in files)


def tf(name: str, p: Plan | None = None) -> tuple[str, dict[str, Any]]:
    files, _ = render_plan(p or plan(name), "budgets")
    ((path, text),) = files.items()
    return path, _hcl(text)


def test_aws_budget_fields() -> None:
    path, doc = tf("grpo-aws")
    assert path == "budgets-aws/budgets.tf"
    ((_, b),) = _resources(doc, "aws_budgets_budget")
    assert set(b) <= BUDGET_ARGS
    assert (b["budget_type"], b["limit_amount"], b["limit_unit"]) == ("COST", "25000.00", "USD")
    prefix = plan_prefix(plan("grpo-aws"))
    assert b["name"] == f"ptplan-{prefix}"
    assert b["cost_filter"] == [{"name": "TagKeyValue", "values": [f"user:ptplan-plan${prefix}"]}]
    # grpo-aws: budget 25000, warn 20000 (policy warn_at 0.8), stop 25000 (stop_at 1.0)
    got = sorted((n["notification_type"], n["threshold"]) for n in b["notification"])
    assert got == [("ACTUAL", 80.0), ("ACTUAL", 100.0), ("FORECASTED", 80.0),
                   ("FORECASTED", 100.0)]
    assert all(set(n) <= NOTIFICATION_ARGS and n["threshold_type"] == "PERCENTAGE"
               and n["comparison_operator"] == "GREATER_THAN" for n in b["notification"])
    actions = dict(_resources(doc, "aws_budgets_budget_action"))
    assert set(actions) == {"deny_launch", "stop_instances"}
    for a in actions.values():
        assert set(a) - {"dynamic"} <= ACTION_ARGS
        assert [list(d) for d in a["dynamic"]] == [["subscriber"]]
        assert a["action_threshold"] == [{"action_threshold_type": "PERCENTAGE",
                                          "action_threshold_value": 100.0}]
        assert a["notification_type"] == "ACTUAL" and a["approval_model"] == "AUTOMATIC"
    ssm = actions["stop_instances"]["definition"][0]["ssm_action_definition"][0]
    assert ssm["action_sub_type"] == "STOP_EC2_INSTANCES" and ssm["region"] == "us-east-1"
    iam = actions["deny_launch"]["definition"][0]["iam_action_definition"][0]
    assert set(iam) == {"policy_arn", "roles"}
    ((_, tag),) = _resources(doc, "aws_ce_cost_allocation_tag")
    assert tag["tag_key"] == "ptplan-plan" and tag["status"] == "Active"
    data = {(t, n): b for d in doc["data"] for t, bs in d.items() for n, b in bs.items()}
    (cond,) = data[("aws_iam_policy_document", "deny_launch")]["statement"][0]["condition"]
    assert (cond["variable"], cond["values"]) == ("aws:RequestTag/ptplan-plan", [prefix])
    assert data[("aws_instances", "run")]["instance_tags"]["ptplan-plan"] == prefix


def test_gcp_budget_fields_and_a_plan_without_budget() -> None:
    path, doc = tf("grpo-gcp")
    assert path == "budgets-gcp/budgets.tf"
    ((_, b),) = _resources(doc, "google_billing_budget")
    assert set(b) <= GCP_BUDGET_ARGS
    (f,) = b["budget_filter"]
    assert set(f) <= GCP_FILTER_ARGS and f["labels"] == {
        "ptplan-plan": plan_prefix(plan("grpo-gcp"))}
    assert b["amount"] == [{"specified_amount": [{"currency_code": "USD", "units": "25000",
                                                   "nanos": 0}]}]
    rules = sorted((r["spend_basis"], r["threshold_percent"]) for r in b["threshold_rules"])
    assert rules == [("CURRENT_SPEND", 0.8), ("CURRENT_SPEND", 1.0),
                     ("FORECASTED_SPEND", 0.8), ("FORECASTED_SPEND", 1.0)]
    assert b["all_updates_rule"][0]["pubsub_topic"] == "${google_pubsub_topic.budget.id}"
    # no budget: the plan's own total (grpo-gcp.json since issue #39), 917.58 -> 917 units and
    # 58 cents = 580,000,000 nanos; the premise: a total with cents, so nanos are not 0
    assert plan("grpo-gcp").total_cost_usd == "917.58"
    _, doc = tf("", plan("grpo-gcp").model_copy(update={
        "budget_usd": None, "budget_warn_usd": None, "budget_stop_usd": None}))
    ((_, b),) = _resources(doc, "google_billing_budget")
    assert b["amount"][0]["specified_amount"][0]["units"] == "917"
    assert b["amount"][0]["specified_amount"][0]["nanos"] == 580_000_000


def test_cli_renders_the_opt_in_targets(tmp_path: Path) -> None:
    for target, rel in (("guard", "guard/guard.yaml"), ("budgets", "budgets-aws/budgets.tf")):
        res = runner.invoke(app, ["render", str(PLANS / "grpo-aws.json"), "--target", target,
                                  "-o", str(tmp_path), "--image", IMAGE])
        assert res.exit_code == 0, res.output
        assert (tmp_path / rel).is_file()
    kinds = [d["kind"] for d in yaml.safe_load_all((tmp_path / "guard/guard.yaml").read_text())]
    assert kinds == ["ServiceAccount", "Role", "RoleBinding", "ClusterRole",
                     "ClusterRoleBinding", "ConfigMap", "CronJob"]
