"""``guard --act`` on the clouds' own node groups (:mod:`ptplan.spend.act` has the whole
story): AWS Auto Scaling groups (boto3) and GKE node pools (``google-cloud-container``), each
read first and changed only when it carries the plan's ``ptplan-plan`` tag or label."""

from __future__ import annotations

import shlex
import time
from typing import Any
from urllib.parse import urlparse

from ptplan.core.errors import InputError, PlannerError, ProviderError
from ptplan.planfile.identity import PLAN_LABEL
from ptplan.spend.act_report import (
    ASG_PERMISSIONS,
    CALL_CHANGED_NOTHING,
    LOCAL_HOSTS,
    ActReport,
    Targets,
    not_ours,
)

OPERATION_WAIT_SECONDS = 600
POLL_SECONDS = 2.0


# ---- AWS Auto Scaling --------------------------------------------------------------------------
def _asg_client(t: Targets, endpoint: str | None) -> tuple[Any, int]:
    from ptplan.providers.aws import max_attempts, sdk

    attempts = max_attempts()
    session, config = sdk("guard --act on AWS needs", attempts)
    return session.client("autoscaling", region_name=t.region, endpoint_url=endpoint,
                          config=config), attempts


def act_aws(t: Targets, asg: Any, attempts: int, report: ActReport) -> None:
    """Every Auto Scaling group the run's tag filter finds, whose own tags hold the plan's
    ``ptplan-plan`` value, to zero instances."""
    from ptplan.providers.aws import _guarded

    filters = [{"Name": f"tag:{k}", "Values": [v]} for k, v in sorted(t.tags.items())]

    def pages() -> Any:
        token = None
        while True:
            page = asg.describe_auto_scaling_groups(
                Filters=filters, **({"NextToken": token} if token else {}))
            yield page
            token = page.get("NextToken")
            if not token:
                return

    try:
        groups = [g for p in _guarded(pages(), "Auto Scaling group listing", attempts,
                                      permissions=ASG_PERMISSIONS,
                                      unchanged=CALL_CHANGED_NOTHING)
                  for g in p.get("AutoScalingGroups", [])]
    except PlannerError as exc:
        report.fail(f"find the Auto Scaling groups tagged {PLAN_LABEL}={t.prefix}", exc)
        return
    if not groups:
        report.unchanged.append(f"no Auto Scaling group carries {PLAN_LABEL}={t.prefix} and the "
                                "run's tags (Karpenter nodes go with the NodePool limits)")
    for g in sorted(groups, key=lambda g: str(g.get("AutoScalingGroupName"))):
        name = str(g.get("AutoScalingGroupName"))
        what = f"scale Auto Scaling group {name} to 0"
        tags = {x.get("Key"): x.get("Value") for x in g.get("Tags", []) or []
                if isinstance(x, dict)}
        if tags.get(PLAN_LABEL) != t.prefix:
            report.fail(what, not_ours(tags.get(PLAN_LABEL), t.prefix))
            continue
        before = (g.get("MinSize"), g.get("MaxSize"), g.get("DesiredCapacity"))
        if before == (0, 0, 0):
            report.unchanged.append(f"Auto Scaling group {name} was already at 0 instances")
            continue

        def update(name: str = name) -> Any:
            yield asg.update_auto_scaling_group(AutoScalingGroupName=name, MinSize=0,
                                                MaxSize=0, DesiredCapacity=0)
        try:
            list(_guarded(update(), f"Auto Scaling group update of {name}", attempts,
                          permissions=ASG_PERMISSIONS, unchanged=CALL_CHANGED_NOTHING))
        except PlannerError as exc:
            report.fail(what, exc)
            continue
        lo, hi, want = before
        report.changed(
            f"Auto Scaling group {name}: 0 instances (was min {lo}, max {hi}, desired {want})",
            shlex.join(["aws", "autoscaling", "update-auto-scaling-group", "--region", t.region,
                        "--auto-scaling-group-name", name, "--min-size", str(lo),
                        "--max-size", str(hi), "--desired-capacity", str(want)]))


# ---- GKE ---------------------------------------------------------------------------------------
def _gke_client(t: Targets, endpoint: str | None) -> Any:
    if not t.gcp_project:
        raise InputError("--gcp-project: guard --act on a GKE plan needs the cluster's project "
                         "id, e.g. --gcp-project my-proj")
    try:
        from google.cloud import container_v1
    except ImportError:
        raise ProviderError("guard --act on GKE needs google-cloud-container: pip install "
                            "'ptplan[gcp]'; nothing was changed") from None
    kwargs: dict[str, Any] = {"transport": "rest"}
    if endpoint:
        from google.api_core.client_options import ClientOptions

        kwargs["client_options"] = ClientOptions(api_endpoint=endpoint)
        if urlparse(endpoint).hostname in LOCAL_HOSTS:
            from google.auth.credentials import AnonymousCredentials

            kwargs["credentials"] = AnonymousCredentials()
    from ptplan.providers.gcp import _translate

    try:
        return container_v1.ClusterManagerClient(**kwargs)
    except Exception as exc:  # google.auth errors (no credentials)
        raise _translate(exc, "GKE client", api="Kubernetes Engine API",
                         unchanged="nothing was changed") from None


def _gke_error(exc: Exception, call: str) -> str:
    from ptplan.providers.gcp import _translate

    if isinstance(exc, PlannerError):
        return str(exc)
    return str(_translate(exc, call, api="Kubernetes Engine API",
                          unchanged=CALL_CHANGED_NOTHING))


def _autoscaling_undo(t: Targets, pool: str, auto: Any) -> str:
    words = ["gcloud", "container", "node-pools", "update", pool, "--cluster", t.cluster,
             "--region", t.region, "--project", str(t.gcp_project), "--enable-autoscaling"]
    if auto.total_max_node_count:
        words += ["--total-min-nodes", str(auto.total_min_node_count),
                  "--total-max-nodes", str(auto.total_max_node_count)]
    else:
        words += ["--min-nodes", str(auto.min_node_count), "--max-nodes",
                  str(auto.max_node_count)]
    policy = getattr(auto.location_policy, "name", "")
    if policy in ("BALANCED", "ANY"):
        words += ["--location-policy", policy]
    return shlex.join(words)


def act_gke(t: Targets, client: Any, report: ActReport) -> None:
    """Each GKE node pool of the plan whose ``ptplan-plan`` resource label is the plan's:
    autoscaling off (when it was on), then size 0."""
    loc = f"projects/{t.gcp_project}/locations/{t.region}"
    for pool in t.gke_node_pools:
        name = f"{loc}/clusters/{t.cluster}/nodePools/{pool}"
        what = f"scale GKE node pool {pool} to 0"
        try:
            np = client.get_node_pool(request={"name": name})
        except Exception as exc:  # google.api_core / google.auth errors
            report.fail(what, _gke_error(exc, f"reading GKE node pool {pool}"))
            continue
        label = dict(np.config.resource_labels).get(PLAN_LABEL)
        if label != t.prefix:
            report.fail(what, not_ours(label, t.prefix))
            continue
        auto = np.autoscaling
        undo = ""
        resize_undo = shlex.join(["gcloud", "container", "clusters", "resize", t.cluster,
                                  "--node-pool", pool, "--region", t.region, "--project",
                                  str(t.gcp_project), "--num-nodes", "N"]) + \
            "  # N: its size before (GKE's node pool API does not report it)"
        if auto.enabled:
            undo = _autoscaling_undo(t, pool, auto)
            try:
                op = client.set_node_pool_autoscaling(request={
                    "name": name, "autoscaling": {"enabled": False}})
                _wait(client, f"{loc}/operations/{op.name}", op)
            except Exception as exc:
                report.fail(what, _gke_error(exc, f"turning autoscaling off on {pool}"))
                continue
        try:
            op = client.set_node_pool_size(request={"name": name, "node_count": 0})
            _wait(client, f"{loc}/operations/{op.name}", op)
        except Exception as exc:
            if auto.enabled:
                report.changed(f"GKE node pool {pool}: autoscaling off", undo)
            report.fail(what, _gke_error(exc, f"resizing {pool} to 0 nodes"))
            continue
        if auto.enabled:
            report.changed(f"GKE node pool {pool}: autoscaling off, 0 nodes", undo +
                           "  # the autoscaler grows it again as pods wait")
        else:
            report.changed(f"GKE node pool {pool}: 0 nodes (autoscaling was off)", resize_undo)


def _wait(client: Any, name: str, op: Any) -> None:
    from google.cloud import container_v1

    deadline = time.monotonic() + OPERATION_WAIT_SECONDS
    while op.status != container_v1.Operation.Status.DONE:
        if time.monotonic() > deadline:
            raise ProviderError(f"GKE operation {name} still running after "
                                f"{OPERATION_WAIT_SECONDS} s; check it in the console")
        time.sleep(POLL_SECONDS)
        op = client.get_operation(request={"name": name})
    if op.error and op.error.message:
        raise ProviderError(f"GKE operation {name} failed ({op.error.message[:160]})")
