"""``guard --act``: stop what ``render`` deployed, through the official clients.

* the RayJob (``ray.io/v1``, ``rayjobs``): merge-patch ``spec.suspend: true`` with the
  ``kubernetes`` client (``CustomObjectsApi.patch_namespaced_custom_object``). KubeRay deletes
  the Ray cluster of a suspended job and Kueue releases its quota
  (https://docs.ray.io/en/latest/cluster/kubernetes/examples/rayjob-kueue-priority-scheduling.html,
  https://kueue.sigs.k8s.io/docs/tasks/run/rayjobs/);
* AWS: each Karpenter NodePool of the plan (``karpenter.sh/v1``, cluster-scoped) gets
  ``spec.limits`` of zero GPUs and nodes, so Karpenter launches nothing more and consolidates
  the emptied nodes; and every Auto Scaling group carrying the plan's cost tags
  (``autoscaling.describe_auto_scaling_groups`` with ``tag:`` filters) is set to
  min = max = desired = 0 (``update_auto_scaling_group``, boto3);
* GCP: each GKE node pool of the plan gets autoscaling off and size 0
  (``google-cloud-container`` ``ClusterManagerClient``, REST transport:
  ``SetNodePoolAutoscaling`` then ``SetNodePoolSize``), waiting for each operation, since GKE
  runs one operation on a cluster at a time.

``--dry-run`` lists the calls and makes none. Every failure is a one-line ProviderError.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from ptplan.core.errors import InputError, ProviderError
from ptplan.planfile.deployment import group_cells, project_slug, site_zone
from ptplan.planfile.names import gpu_resource
from ptplan.planfile.schema import Plan
from ptplan.planfile.tags import run_cost_tags

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
OPERATION_WAIT_SECONDS = 600
POLL_SECONDS = 2.0


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


def targets_for(plan: Plan, namespace: str, cluster: str, gcp_project: str | None) -> Targets:
    """The objects ``render`` deployed for ``plan`` into ``cluster`` (its names from
    :mod:`ptplan.planfile.deployment`, as :mod:`ptplan.rendering.context` gives them), and the run's
    cost tags on the platform's spelling."""
    slug = project_slug(plan)
    cells = group_cells(plan, slug, site_zone(plan)[0])
    return Targets(provider=plan.provider, region=plan.region, rayjob=slug, namespace=namespace,
                   karpenter_nodepools=tuple((c.full_name, gpu_resource(c.pool.gpu))
                                             for c in cells),
                   gke_node_pools=tuple(c.name for c in cells), cluster=cluster,
                   gcp_project=gcp_project,
                   tags=run_cost_tags(plan, plan.provider if plan.provider in ("aws", "gcp")
                                      else "k8s"))


ASG_PERMISSIONS = "autoscaling:DescribeAutoScalingGroups, autoscaling:UpdateAutoScalingGroup"
NOTHING_DONE = "nothing was changed"
NOTHING_AFTER = "nothing after it was done"

def calls(t: Targets) -> list[str]:
    """The calls ``--act`` makes, one line each (what ``--dry-run`` prints)."""
    out = [f"kubernetes: PATCH rayjobs.ray.io/v1 {t.namespace}/{t.rayjob} "
           '{"spec": {"suspend": true}}']
    if t.provider == "aws":
        out += [f"kubernetes: PATCH nodepools.karpenter.sh/v1 {name} "
                f'{{"spec": {{"limits": {{"{res}": "0", "nodes": "0"}}}}}}'
                for name, res in t.karpenter_nodepools]
        filters = " ".join(f"tag:{k}={v}" for k, v in sorted(t.tags.items()))
        out.append(f"aws autoscaling: DescribeAutoScalingGroups {filters} (region {t.region}); "
                   "UpdateAutoScalingGroup MinSize=0 MaxSize=0 DesiredCapacity=0 on each")
    if t.provider == "gcp":
        base = f"projects/{t.gcp_project or '<--gcp-project>'}/locations/{t.region}/" \
               f"clusters/{t.cluster}/nodePools"
        for pool in t.gke_node_pools:
            out += [f"gke: SetNodePoolAutoscaling {base}/{pool} enabled=false",
                    f"gke: SetNodePoolSize {base}/{pool} nodeCount=0"]
    return out


def _k8s(kubeconfig: str | None) -> Any:
    try:
        from kubernetes import client, config
    except ImportError:
        raise ProviderError("guard --act needs the Kubernetes client: pip install "
                            "'ptplan[k8s]'") from None
    try:
        if kubeconfig:
            return client.CustomObjectsApi(config.new_client_from_config(
                config_file=kubeconfig))
        try:
            config.load_incluster_config()
        except config.ConfigException:
            config.load_kube_config()
        return client.CustomObjectsApi()
    except (config.ConfigException, OSError) as exc:
        raise ProviderError(f"guard --act: no Kubernetes configuration ({exc}); pass "
                            "--kubeconfig or run in the cluster") from None


def _k8s_error(exc: Exception, what: str) -> ProviderError:
    status = getattr(exc, "status", None)
    reason = getattr(exc, "reason", type(exc).__name__)
    return ProviderError(f"guard --act: {what} failed ({status or ''} {reason}); nothing "
                         "after it was done")


def act_kubernetes(t: Targets, kubeconfig: str | None) -> list[str]:
    api = _k8s(kubeconfig)
    done = []
    try:
        api.patch_namespaced_custom_object("ray.io", "v1", t.namespace, "rayjobs", t.rayjob,
                                           {"spec": {"suspend": True}})
    except Exception as exc:  # kubernetes ApiException, urllib3 errors
        raise _k8s_error(exc, f"suspending RayJob {t.namespace}/{t.rayjob}") from None
    done.append(f"suspended RayJob {t.namespace}/{t.rayjob}")
    for name, res in t.karpenter_nodepools:
        try:
            api.patch_cluster_custom_object("karpenter.sh", "v1", "nodepools", name,
                                            {"spec": {"limits": {res: "0", "nodes": "0"}}})
        except Exception as exc:
            raise _k8s_error(exc, f"zeroing the limits of NodePool {name}") from None
        done.append(f"NodePool {name}: limits 0")
    return done


def act_aws(t: Targets, endpoint: str | None) -> list[str]:
    from ptplan.providers.aws import _guarded, max_attempts, sdk

    attempts = max_attempts()
    session, config = sdk("guard --act on AWS needs", attempts)
    asg = session.client("autoscaling", region_name=t.region, endpoint_url=endpoint,
                         config=config)
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

    names = sorted(g["AutoScalingGroupName"]
                   for p in _guarded(pages(), "Auto Scaling group listing", attempts,
                                     permissions=ASG_PERMISSIONS, unchanged=NOTHING_DONE)
                   for g in p.get("AutoScalingGroups", []))
    done = []
    for name in names:
        def update(name: str = name) -> Any:
            yield asg.update_auto_scaling_group(AutoScalingGroupName=name, MinSize=0,
                                                MaxSize=0, DesiredCapacity=0)
        list(_guarded(update(), f"Auto Scaling group update of {name}", attempts,
                      permissions=ASG_PERMISSIONS, unchanged=NOTHING_AFTER))
        done.append(f"Auto Scaling group {name}: 0 instances")
    if not names:
        done.append("no Auto Scaling group carries the plan's cost tags (Karpenter nodes go "
                    "with the NodePool limits)")
    return done


def act_gke(t: Targets, endpoint: str | None) -> list[str]:
    if not t.gcp_project:
        raise InputError("--gcp-project: guard --act on a GKE plan needs the cluster's project "
                         "id, e.g. --gcp-project my-proj")
    try:
        from google.cloud import container_v1
    except ImportError:
        raise ProviderError("guard --act on GKE needs google-cloud-container: pip install "
                            "'ptplan[gcp]'") from None
    kwargs: dict[str, Any] = {"transport": "rest"}
    if endpoint:
        from google.api_core.client_options import ClientOptions

        kwargs["client_options"] = ClientOptions(api_endpoint=endpoint)
        if urlparse(endpoint).hostname in LOCAL_HOSTS:
            from google.auth.credentials import AnonymousCredentials

            kwargs["credentials"] = AnonymousCredentials()
    from ptplan.providers.gcp import _translate

    done = []
    try:
        client = container_v1.ClusterManagerClient(**kwargs)
        loc = f"projects/{t.gcp_project}/locations/{t.region}"
        for pool in t.gke_node_pools:
            name = f"{loc}/clusters/{t.cluster}/nodePools/{pool}"
            op = client.set_node_pool_autoscaling(request={
                "name": name, "autoscaling": {"enabled": False}})
            _wait(client, f"{loc}/operations/{op.name}", op)
            op = client.set_node_pool_size(request={"name": name, "node_count": 0})
            _wait(client, f"{loc}/operations/{op.name}", op)
            done.append(f"GKE node pool {pool}: autoscaling off, 0 nodes")
    except (InputError, ProviderError):
        raise
    except Exception as exc:  # google.api_core / google.auth errors
        raise _translate(exc, "GKE node pool update", api="Kubernetes Engine API",
                         unchanged=NOTHING_AFTER) from None
    return done


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


def carry_out(t: Targets, kubeconfig: str | None = None, aws_endpoint: str | None = None,
              gke_endpoint: str | None = None) -> list[str]:
    done = act_kubernetes(t, kubeconfig)
    if t.provider == "aws":
        done += act_aws(t, aws_endpoint)
    elif t.provider == "gcp":
        done += act_gke(t, gke_endpoint)
    return done
