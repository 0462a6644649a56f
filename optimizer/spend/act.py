"""``guard --act``: stop what ``render`` deployed for this plan, and only that, through the
official clients.

Every object is read first and touched only if it carries the plan's ``ptplan-plan`` label (tag)
with the plan's prefix (:mod:`ptplan.planfile.identity`); one that does not, or cannot be read,
is left alone and reported as a failure:

* the RayJob (``ray.io/v1``, ``rayjobs``): ``get_namespaced_custom_object``, then merge-patch
  ``spec.suspend: true`` (``patch_namespaced_custom_object``, the ``kubernetes`` client). KubeRay
  deletes the Ray cluster of a suspended job and Kueue releases its quota
  (https://docs.ray.io/en/latest/cluster/kubernetes/examples/rayjob-kueue-priority-scheduling.html,
  https://kueue.sigs.k8s.io/docs/tasks/run/rayjobs/);
* AWS: each Karpenter NodePool of the plan (``karpenter.sh/v1``, cluster-scoped): read, then
  ``spec.limits`` of zero GPUs and nodes, so Karpenter launches nothing more and consolidates
  the emptied nodes; and every Auto Scaling group carrying the plan's run tags
  (``autoscaling.describe_auto_scaling_groups`` with ``tag:`` filters; each group's own
  ``Tags`` checked again) set to min = max = desired = 0 (``update_auto_scaling_group``, boto3);
* GCP: each GKE node pool of the plan (``google-cloud-container`` ``ClusterManagerClient``, REST
  transport): ``GetNodePool`` (its ``config.resource_labels``), then ``SetNodePoolAutoscaling``
  off (when it was on) and ``SetNodePoolSize`` 0, waiting for each operation, since GKE runs one
  operation on a cluster at a time.

The clients are made first (``--kubeconfig``, the SDKs, ``--gcp-project``): a failure there is one
line and nothing was changed. After that every object is tried in turn whatever happened to the
one before (a breaker stops what it can), and the :class:`ActReport` says what was changed with
the command that undoes it (the reverse call, with the values read before), what was left as it
was, and what failed with the error (credentials redacted, :func:`ptplan.core.redact.redact`).
``--dry-run`` lists the calls and makes none.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from ptplan.core.errors import ProviderError
from ptplan.core.redact import redact
from ptplan.planfile.deployment import group_cells, site_zone
from ptplan.planfile.identity import PLAN_LABEL, plan_digest, plan_prefix, project_slug
from ptplan.planfile.names import gpu_resource
from ptplan.planfile.schema import Plan
from ptplan.planfile.tags import run_cost_tags
from ptplan.spend.act_report import (
    ASG_PERMISSIONS,
    CALL_CHANGED_NOTHING,
    INCOMPLETE_EXIT,
    LOCAL_HOSTS,
    ActReport,
    Targets,
    not_ours,
)

__all__ = ["ASG_PERMISSIONS", "CALL_CHANGED_NOTHING", "INCOMPLETE_EXIT", "LOCAL_HOSTS",
           "ActReport", "Targets", "act_kubernetes", "calls", "carry_out", "targets_for"]


def targets_for(plan: Plan, namespace: str, cluster: str, gcp_project: str | None) -> Targets:
    """The objects ``render`` deployed for ``plan`` into ``cluster`` (its names from
    :mod:`ptplan.planfile.deployment`, as :mod:`ptplan.rendering.context` gives them), the run's
    tags on the platform's spelling and the plan's prefix."""
    slug, digest = project_slug(plan), plan_digest(plan)
    prefix = plan_prefix(plan)
    cells = group_cells(plan, slug, site_zone(plan)[0], digest)
    return Targets(provider=plan.provider, region=plan.region, rayjob=prefix,
                   namespace=namespace,
                   karpenter_nodepools=tuple((c.full_name, gpu_resource(c.pool.gpu))
                                             for c in cells),
                   gke_node_pools=tuple(c.full_name for c in cells), cluster=cluster,
                   gcp_project=gcp_project,
                   tags=run_cost_tags(plan, plan.provider if plan.provider in ("aws", "gcp")
                                      else "k8s"), prefix=prefix)


def calls(t: Targets) -> list[str]:
    """The calls ``--act`` makes, one line each (what ``--dry-run`` prints)."""
    must = f"(must carry {PLAN_LABEL}={t.prefix})"
    out = [f"kubernetes: GET rayjobs.ray.io/v1 {t.namespace}/{t.rayjob} {must}",
           f"kubernetes: PATCH rayjobs.ray.io/v1 {t.namespace}/{t.rayjob} "
           '{"spec": {"suspend": true}}']
    if t.provider == "aws":
        for name, res in t.karpenter_nodepools:
            out += [f"kubernetes: GET nodepools.karpenter.sh/v1 {name} {must}",
                    f"kubernetes: PATCH nodepools.karpenter.sh/v1 {name} "
                    f'{{"spec": {{"limits": {{"{res}": "0", "nodes": "0"}}}}}}']
        filters = " ".join(f"tag:{k}={v}" for k, v in sorted(t.tags.items()))
        out.append(f"aws autoscaling: DescribeAutoScalingGroups {filters} (region {t.region}); "
                   f"UpdateAutoScalingGroup MinSize=0 MaxSize=0 DesiredCapacity=0 on each whose "
                   f"Tags hold {PLAN_LABEL}={t.prefix}")
    if t.provider == "gcp":
        base = f"projects/{t.gcp_project or '<--gcp-project>'}/locations/{t.region}/" \
               f"clusters/{t.cluster}/nodePools"
        for pool in t.gke_node_pools:
            out += [f"gke: GetNodePool {base}/{pool} (config.resourceLabels {must[1:-1]})",
                    f"gke: SetNodePoolAutoscaling {base}/{pool} enabled=false",
                    f"gke: SetNodePoolSize {base}/{pool} nodeCount=0"]
    return out


# ---- Kubernetes ------------------------------------------------------------------------------
def _k8s(kubeconfig: str | None) -> Any:
    try:
        from kubernetes import client, config
    except ImportError:
        raise ProviderError("guard --act needs the Kubernetes client: pip install "
                            "'ptplan[k8s]'; nothing was changed") from None
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
        raise ProviderError(redact(f"guard --act: no Kubernetes configuration ({exc}); pass "
                                   "--kubeconfig or run in the cluster; nothing was changed")
                            ) from None


def _k8s_error(exc: Exception, call: str) -> str:
    why = " ".join(str(x) for x in (getattr(exc, "status", None),
                                    getattr(exc, "reason", None) or type(exc).__name__) if x)
    return f"{call} failed ({why}); {CALL_CHANGED_NOTHING}"


def _kubectl(kubeconfig: str | None, *words: str) -> str:
    return shlex.join(["kubectl", *(["--kubeconfig", kubeconfig] if kubeconfig else []), *words])


def _merge_patch(doc: dict[str, Any]) -> str:
    return json.dumps(doc, separators=(",", ":"), sort_keys=True)


def _labels(obj: Any) -> dict[str, Any]:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    labels = meta.get("labels") if isinstance(meta, dict) else None
    return labels if isinstance(labels, dict) else {}


def _spec(obj: Any) -> dict[str, Any]:
    spec = obj.get("spec") if isinstance(obj, dict) else None
    return spec if isinstance(spec, dict) else {}


def act_kubernetes(t: Targets, api: Any, report: ActReport, kubeconfig: str | None) -> None:
    """Suspend the RayJob, then (AWS) zero each Karpenter NodePool's limits, each after its
    ``ptplan-plan`` label was read and found to be the plan's."""
    job = f"{t.namespace}/{t.rayjob}"
    what = f"suspend RayJob {job}"
    try:
        obj = api.get_namespaced_custom_object("ray.io", "v1", t.namespace, "rayjobs", t.rayjob)
    except Exception as exc:  # kubernetes ApiException, urllib3 errors
        report.fail(what, _k8s_error(exc, f"reading RayJob {job}"))
    else:
        label = _labels(obj).get(PLAN_LABEL)
        if label != t.prefix:
            report.fail(what, not_ours(label, t.prefix))
        elif _spec(obj).get("suspend") is True:
            report.unchanged.append(f"RayJob {job} was already suspended")
        else:
            try:
                api.patch_namespaced_custom_object("ray.io", "v1", t.namespace, "rayjobs",
                                                   t.rayjob, {"spec": {"suspend": True}})
            except Exception as exc:
                report.fail(what, _k8s_error(exc, f"suspending RayJob {job}"))
            else:
                report.changed(f"suspended RayJob {job}", _kubectl(
                    kubeconfig, "patch", "rayjobs.ray.io", t.rayjob, "-n", t.namespace,
                    "--type", "merge", "-p", _merge_patch({"spec": {"suspend": False}})))
    if t.provider != "aws":
        return
    for name, res in t.karpenter_nodepools:
        what = f"zero the limits of NodePool {name}"
        try:
            obj = api.get_cluster_custom_object("karpenter.sh", "v1", "nodepools", name)
        except Exception as exc:
            report.fail(what, _k8s_error(exc, f"reading NodePool {name}"))
            continue
        label = _labels(obj).get(PLAN_LABEL)
        if label != t.prefix:
            report.fail(what, not_ours(label, t.prefix))
            continue
        limits = _spec(obj).get("limits")
        before = limits if isinstance(limits, dict) else {}
        if str(before.get(res)) == "0" and str(before.get("nodes")) == "0":
            report.unchanged.append(f"NodePool {name} was already limited to 0")
            continue
        try:
            api.patch_cluster_custom_object("karpenter.sh", "v1", "nodepools", name,
                                            {"spec": {"limits": {res: "0", "nodes": "0"}}})
        except Exception as exc:
            report.fail(what, _k8s_error(exc, f"zeroing the limits of NodePool {name}"))
            continue
        # a key the NodePool did not have is removed again (null in a merge patch)
        undo = {"spec": {"limits": {k: before.get(k) for k in (res, "nodes")}}}
        report.changed(f"NodePool {name}: limits 0 (were {_merge_patch(before)})", _kubectl(
            kubeconfig, "patch", "nodepools.karpenter.sh", name, "--type", "merge", "-p",
            _merge_patch(undo)))


def carry_out(t: Targets, kubeconfig: str | None = None, aws_endpoint: str | None = None,
              gke_endpoint: str | None = None) -> ActReport:
    """Make the clients (a failure: one line, nothing changed), then stop every object of the
    plan that carries its label, each whatever became of the others."""
    from ptplan.spend.act_clouds import _asg_client, _gke_client, act_aws, act_gke

    api = _k8s(kubeconfig)
    asg = gke = None
    attempts = 0
    if t.provider == "aws":
        asg, attempts = _asg_client(t, aws_endpoint)
    elif t.provider == "gcp":
        gke = _gke_client(t, gke_endpoint)
    report = ActReport()
    act_kubernetes(t, api, report, kubeconfig)
    if asg is not None:
        act_aws(t, asg, attempts, report)
    if gke is not None:
        act_gke(t, gke, report)
    return report
