"""``ptplan render --check``: what a cluster would do with the rendered objects, checked
against the plan. Each rule models the upstream behaviour it names; a violation is one line.

* **pools** — each Ray worker group (pod group) schedules onto exactly one node pool, and that
  pool is a planned (instance type, zone, capacity type) cell with the planned node count. A
  pod fits a pool when its ``nodeSelector`` is a subset of the pool's node labels and it
  tolerates every taint of the pool (kubernetes ``pkg/scheduler/framework/plugins/
  nodeaffinity`` and ``tainttoleration``; node labels: those the pool template sets plus the
  well-known ones Karpenter (``karpenter.sh/nodepool``, ``karpenter.sh/capacity-type``,
  ``node.kubernetes.io/instance-type``, ``topology.k8s.aws/zone-id``) and GKE
  (``cloud.google.com/gke-nodepool``, ``cloud.google.com/gke-spot``,
  ``topology.kubernetes.io/zone``) put on the node). SkyPilot tasks and node pools without pod
  groups are matched to the plan's cells one to one.
* **admission** — Kueue admits the RayJob: its pod sets are the head, the submitter (in
  ``K8sJobMode``, the default; kueue ``pkg/controller/jobs/rayjob/rayjob_controller.go``) and
  one per worker group; each pod set takes, per resource group, the first flavor in order whose
  ``nodeLabels`` agree with its ``nodeSelector`` and that still has quota (kueue
  ``pkg/scheduler/flavorassigner``); a requested resource no group covers is inadmissible.
  Quotas must equal what the job uses: a quota that admits more is a violation.
* **taints** — every taint of a GPU node pool is tolerated by the device plugin that runs on
  it, with its upstream tolerations: on EKS the NVIDIA device plugin (NVIDIA k8s-device-plugin
  Helm chart ``deployments/helm/nvidia-device-plugin/values.yaml``: ``CriticalAddonsOnly``
  Exists, ``nvidia.com/gpu`` Exists NoSchedule) or, on Trainium/Inferentia pools (those whose
  limits name ``aws.amazon.com/neuron``), the Neuron device plugin (aws-neuron-sdk
  ``src/k8/k8s-neuron-device-plugin.yml``: ``CriticalAddonsOnly`` Exists,
  ``aws.amazon.com/neuron`` Exists NoSchedule); on GKE, GKE's own managed device plugin
  (GoogleCloudPlatform/container-engine-accelerators ``cmd/nvidia_gpu/device-plugin.yaml``:
  every NoSchedule and NoExecute taint tolerated, ``operator: Exists`` without a key), on nodes
  that carry the ``nvidia.com/gpu=present:NoSchedule`` taint GKE adds to GPU pools itself.
  Toleration semantics: ``k8s.io/api/core/v1`` ``Toleration.ToleratesTaint``.
* **disks** — every node pool and SkyPilot task writes the boot disk the plan priced: its
  pool's ``boot_disk_gb`` on the volume type of its block tier (``ebs_gp3`` → Karpenter
  ``volumeType: gp3``; ``pd_balanced`` → GKE ``disk_type = "pd-balanced"``; SkyPilot
  ``disk_tier: medium``, which SkyPilot maps to gp3 on AWS and pd-balanced on GCP:
  ``sky/clouds/aws.py`` ``_get_disk_type``, ``sky/clouds/gcp.py`` ``tier2name``).
* **tags** — every node pool (EC2NodeClass ``tags``, GKE ``resource_labels``, SkyPilot
  ``labels``) and the bucket carry the ``ptplan-*`` cost keys with the pool's values and the
  plan's own ``ptplan-plan`` value (:mod:`ptplan.planfile.identity`; what ``guard --act``
  checks before it touches a pool), and on AWS every key is activated as a cost allocation tag
  (``aws_ce_cost_allocation_tag``).
* **cpu_pools** — every CPU pool of the plan has one node pool of its type, capacity, limits,
  zone and taint (:mod:`ptplan.rendering.checks.cpu_pools`).
* **roles** — each framework role asks Ray for its planned pool's resource, offered by that
  pool's nodes only, one unit per GPU (:mod:`ptplan.rendering.checks.roles`).
* **gpudirect** — a multi-node GKE A3 trainer has its GPUDirect-TCPX(O) networks, interfaces,
  daemon and NCCL settings; no other pool has them (:mod:`ptplan.rendering.checks.gpudirect`).
* **paths** — every ``/checkpoints/…`` path the launch writes maps, through the mount (KubeRay
  ``subPath``, SkyPilot ``file_mounts`` ``source``), to a bucket key under a lifecycle rule.
"""

from __future__ import annotations

from typing import Any

from ptplan.planfile.deployment import site_zone
from ptplan.planfile.names import k8s_label
from ptplan.planfile.schema import Plan
from ptplan.rendering.checks.cpu_pools import check_cpu_node_pools
from ptplan.rendering.checks.paths import check_paths, entry_words
from ptplan.rendering.checks.readers import _docs, _hcl, _rayjob, _resources
from ptplan.rendering.deploy import boot_disk_gb

COST_KEYS = ("ptplan-plan", "ptplan-project", "ptplan-pool", "ptplan-phase", "ptplan-method",
             "ptplan-capacity-type")
DEVICE_PLUGIN_TOLERATIONS = {
    "nvidia.com/gpu": [{"key": "CriticalAddonsOnly", "operator": "Exists"},
                       {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    "aws.amazon.com/neuron": [{"key": "CriticalAddonsOnly", "operator": "Exists"},
                              {"key": "aws.amazon.com/neuron", "operator": "Exists",
                               "effect": "NoSchedule"}],
    "gke": [{"operator": "Exists", "effect": "NoExecute"},
            {"operator": "Exists", "effect": "NoSchedule"}],
}
"""Tolerations of the device plugin on each kind of node (module doc, rule ``taints``)."""
VOLUME_TYPE = {"ebs_gp3": "gp3", "pd_balanced": "pd-balanced"}
"""The volume type a plan's block tier is written as (Karpenter, GKE)."""
SKY_DISK_TIER = "medium"
GKE_GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
KUBERAY_SUBMITTER = {"cpu": "500m", "memory": "200Mi"}
LABEL = {"on_demand": "on-demand", "spot": "spot", "reserved": "reserved", "block": "reserved",
         "flex_start": "flex-start"}
"""How the cluster runs each planned capacity type: a capacity block is a reservation to
Karpenter and GKE; flex-start is a GKE queued-provisioning (DWS) node pool."""


def tolerates(tolerations: list[dict[str, Any]], taint: dict[str, Any]) -> bool:
    """``Toleration.ToleratesTaint`` (k8s.io/api/core/v1/toleration.go)."""
    for t in tolerations:
        if t.get("effect") and t["effect"] != taint.get("effect"):
            continue
        if t.get("key") and t["key"] != taint.get("key"):
            continue
        if not t.get("key") and t.get("operator") != "Exists":
            continue
        if t.get("operator", "Equal") == "Exists" or t.get("value", "") == taint.get("value", ""):
            return True
    return False


def _cells(plan: Plan) -> dict[tuple[str, str, str, str], int]:
    """Planned (pool, instance type, zone, capacity label) → nodes."""
    site, _ = site_zone(plan)
    out: dict[tuple[str, str, str, str], int] = {}
    for p in plan.pools:
        for a in p.allocations:
            if a.nodes:
                key = (k8s_label(p.name), a.instance_type, a.zone or site,
                       LABEL[a.capacity_type])
                out[key] = out.get(key, 0) + a.nodes
    return out


def _node_pools(files: dict[str, str]) -> list[dict[str, Any]]:
    pools: list[dict[str, Any]] = []
    if "karpenter/nodepools.yaml" in files:
        docs = _docs(files["karpenter/nodepools.yaml"])
        classes = {d["metadata"]["name"]: d for d in docs if d["kind"] == "EC2NodeClass"}
        for d in docs:
            if d["kind"] != "NodePool":
                continue
            spec = d["spec"]["template"]["spec"]
            req = {r["key"]: r["values"] for r in spec["requirements"] if r["operator"] == "In"}
            one = {k: v[0] for k, v in req.items() if len(v) == 1}
            labels = {**d["spec"]["template"]["metadata"].get("labels", {}), **one,
                      "karpenter.sh/nodepool": d["metadata"]["name"]}
            cls = classes.get(spec["nodeClassRef"]["name"], {})
            limits = d["spec"].get("limits", {})
            ebs: dict[str, Any] = next((m.get("ebs", {}) for m in cls.get("spec", {}).get(
                "blockDeviceMappings", []) if m.get("deviceName") == "/dev/xvda"), {})
            pools.append({"where": f"NodePool {d['metadata']['name']}", "labels": labels,
                          "plugin": "aws.amazon.com/neuron" if "aws.amazon.com/neuron" in limits
                          else "nvidia.com/gpu",
                          "disk_gb": int(_qty(ebs.get("volumeSize", "0")) / 1024**3),
                          "disk_type": ebs.get("volumeType", ""),
                          "instance_type": one.get("node.kubernetes.io/instance-type", "*"),
                          "zone": one.get("topology.k8s.aws/zone-id", ""),
                          "capacity": one.get("karpenter.sh/capacity-type", "*"),
                          "taints": spec.get("taints", []),
                          "nodes": int(d["spec"].get("limits", {}).get("nodes", -1)),
                          "tags": cls.get("spec", {}).get("tags", {})})
    for path in ("terraform-gcp/node_pools.tf", "gke/node_pools.tf"):
        if path not in files:
            continue
        for name, body in _resources(_hcl(files[path]), "google_container_node_pool"):
            cfg = body["node_config"][0] if isinstance(body["node_config"], list) \
                else body["node_config"]
            auto = body["autoscaling"][0] if isinstance(body["autoscaling"], list) \
                else body["autoscaling"]
            zones = body.get("node_locations", [])
            spot = bool(cfg.get("spot"))
            labels = {**cfg.get("labels", {}), "cloud.google.com/gke-nodepool": body["name"],
                      "node.kubernetes.io/instance-type": cfg["machine_type"]}
            if len(zones) == 1:
                labels["topology.kubernetes.io/zone"] = zones[0]
            if spot:
                labels["cloud.google.com/gke-spot"] = "true"
            taints = [{"key": t["key"], "value": t.get("value", ""),
                       "effect": {"NO_SCHEDULE": "NoSchedule", "NO_EXECUTE": "NoExecute",
                                  "PREFER_NO_SCHEDULE": "PreferNoSchedule"}[t["effect"]]}
                      for t in cfg.get("taint", [])] + [GKE_GPU_TAINT]
            pools.append({"where": f"{path} {name}", "labels": labels, "plugin": "gke",
                          "disk_gb": int(cfg.get("disk_size_gb", 0)),
                          "disk_type": cfg.get("disk_type", ""),
                          "instance_type": cfg["machine_type"],
                          "zone": zones[0] if len(zones) == 1 else "",
                          "capacity": "spot" if spot else "flex-start" if _queued(body)
                          else "reserved" if cfg.get("reservation_affinity") else "on-demand",
                          "taints": taints, "nodes": int(auto["total_max_node_count"]),
                          "tags": cfg.get("resource_labels", {})})
    return pools


def _queued(body: dict[str, Any]) -> bool:
    """A GKE node pool with DWS queued provisioning (flex-start) enabled."""
    q = body.get("queued_provisioning") or {}
    q = q[0] if isinstance(q, list) and q else q
    return isinstance(q, dict) and bool(q.get("enabled"))


def _pod_request(pod: dict[str, Any]) -> dict[str, str]:
    res = pod["containers"][0].get("resources", {})
    return {**res.get("limits", {}), **res.get("requests", {})}


def _qty(v: Any) -> float:
    s = str(v)
    for suffix, f in (("Gi", 1024.0**3), ("Mi", 1024.0**2), ("Ki", 1024.0), ("m", 1e-3)):
        if s.endswith(suffix):
            return float(s[: -len(suffix)]) * f
    return float(s)


def _check_pools(plan: Plan, files: dict[str, str], out: list[str]) -> None:
    cells = _cells(plan)
    pools = _node_pools(files)
    job = _rayjob(files)
    matched: dict[tuple[str, str, str, str], int] = {}

    if job is not None and pools:
        for w in job["spec"]["rayClusterSpec"]["workerGroupSpecs"]:
            pod = w["template"]["spec"]
            sel, tol = pod.get("nodeSelector", {}), pod.get("tolerations", [])
            fits = [p for p in pools if all(p["labels"].get(k) == v for k, v in sel.items())
                    and all(tolerates(tol, t) for t in p["taints"])]
            where = f"worker group {w['groupName']}"
            if len(fits) != 1:
                out.append(f"pools: {where} fits {len(fits)} node pools "
                           f"({', '.join(p['where'] for p in fits) or 'none'}); needs exactly 1")
                continue
            p = fits[0]
            pool_name = p["labels"].get("ptplan.io/pool", "")
            key = (pool_name, p["instance_type"], p["zone"], p["capacity"])
            if key not in cells:
                out.append(f"pools: {where} lands on {p['where']} = {key[1:]} of pool "
                           f"{pool_name!r}, which the plan does not have")
                continue
            if not (w["replicas"] == w.get("minReplicas") == w.get("maxReplicas")
                    == p["nodes"] == cells[key]):
                out.append(f"pools: {where}: {w['replicas']} pods, node pool {p['nodes']} "
                           f"nodes, plan {cells[key]} nodes of {key}")
            matched[key] = matched.get(key, 0) + w["replicas"]
        for key, n in cells.items():
            if matched.get(key, 0) != n:
                out.append(f"pools: plan cell {key} ({n} nodes) has {matched.get(key, 0)} "
                           "Ray workers")
    elif pools:
        got: dict[tuple[str, str, str, str], int] = {}
        for p in pools:
            key = (p["labels"].get("ptplan.io/pool", ""), p["instance_type"], p["zone"],
                          p["capacity"])
            got[key] = got.get(key, 0) + p["nodes"]
        if got != cells:
            out.append(f"pools: node pools {sorted(got.items())} != plan {sorted(cells.items())}")
    for rel, text in files.items():
        if not rel.startswith("skypilot/"):
            continue
        docs = _docs(text)
        got = {}
        for t in docs[1:]:
            r, env = t["resources"], t.get("envs", {})
            infra = r["infra"].split("/")
            zone = infra[2] if len(infra) > 2 else env.get("PTPLAN_ZONE", "")
            cap = env.get("PTPLAN_CAPACITY_TYPE", "")
            cap = {"block": "reserved"}.get(cap, cap)  # the block is a reservation to AWS
            if (cap == "spot") != bool(r["use_spot"]):
                out.append(f"pools: {rel} task {t['name']}: use_spot {r['use_spot']} for {cap}")
            key = (k8s_label(str(env.get("PTPLAN_POOL", ""))), r["instance_type"], zone, cap)
            got[key] = got.get(key, 0) + int(t["num_nodes"])
        if got != cells:
            out.append(f"pools: {rel} tasks {sorted(got.items())} != plan {sorted(cells.items())}")


def _check_admission(files: dict[str, str], out: list[str]) -> None:
    job = _rayjob(files)
    if job is None or "kueue/queues.yaml" not in files:
        return
    docs = _docs(files["kueue/queues.yaml"])
    cq = next(d for d in docs if d["kind"] == "ClusterQueue")
    flavors = {d["metadata"]["name"]: d["spec"].get("nodeLabels", {}) for d in docs
               if d["kind"] == "ResourceFlavor"}
    spec = job["spec"]
    podsets = [("head", 1, spec["rayClusterSpec"]["headGroupSpec"]["template"]["spec"])]
    if spec.get("submissionMode", "K8sJobMode") == "K8sJobMode":
        sub = spec.get("submitterPodTemplate", {}).get("spec") or {
            "containers": [{"resources": {"requests": KUBERAY_SUBMITTER}}]}
        podsets.append(("submitter", 1, sub))
    podsets += [(w["groupName"], w["replicas"], w["template"]["spec"])
                for w in spec["rayClusterSpec"]["workerGroupSpecs"]]
    quota = {(f["name"], r["name"]): _qty(r["nominalQuota"])
             for g in cq["spec"]["resourceGroups"] for f in g["flavors"] for r in f["resources"]}
    used = dict.fromkeys(quota, 0.0)
    for name, count, pod in podsets:
        req = {k: _qty(v) * count for k, v in _pod_request(pod).items() if _qty(v) > 0}
        sel = pod.get("nodeSelector", {})
        covered = set()
        for g in cq["spec"]["resourceGroups"]:
            mine = {k: v for k, v in req.items() if k in g["coveredResources"]}
            covered |= set(mine)
            if not mine:
                continue
            for f in g["flavors"]:
                labels = flavors.get(f["name"], {})
                if any(k in sel and sel[k] != v for k, v in labels.items()):
                    continue
                if all(used[(f["name"], k)] + v <= quota.get((f["name"], k), 0) + 1e-9
                       for k, v in mine.items()):
                    for k, v in mine.items():
                        used[(f["name"], k)] += v
                    break
            else:
                out.append(f"admission: pod set {name} ({mine}) fits no flavor with quota left")
        for res in sorted(set(req) - covered):
            out.append(f"admission: pod set {name} requests {res}, which no resource group "
                       "covers (inadmissible)")
    for key, q in sorted(quota.items()):
        if q > used[key] + 1e-9:
            out.append(f"admission: flavor {key[0]} quota {key[1]} = {q:g} admits more than the "
                       f"job uses ({used[key]:g})")


def _check_taints(files: dict[str, str], out: list[str]) -> None:
    for p in _node_pools(files):
        for t in p["taints"]:
            if not tolerates(DEVICE_PLUGIN_TOLERATIONS[p["plugin"]], t):
                out.append(f"taints: {p['where']} taint {t} is not tolerated by the "
                           f"{p['plugin']} device plugin (its nodes never report GPUs)")


def _check_disks(plan: Plan, files: dict[str, str], out: list[str]) -> None:
    want = {k8s_label(p.name): (boot_disk_gb(plan, p), VOLUME_TYPE.get(p.disk_tier, ""))
            for p in plan.pools}
    got: list[tuple[str, str, int, str, str | None]] = [
        (p["where"], p["labels"].get("ptplan.io/pool", ""), p["disk_gb"], p["disk_type"], None)
        for p in _node_pools(files)]
    for rel, text in files.items():
        if rel.startswith("skypilot/"):
            got += [(f"{rel} task {t['name']}",
                     k8s_label(str(t.get("envs", {}).get("PTPLAN_POOL", ""))),
                     int(t["resources"].get("disk_size", 0)),
                     str(t["resources"].get("disk_tier", "")), SKY_DISK_TIER)
                    for t in _docs(text)[1:]]
    for where, pool, gb, kind, fixed in got:
        if pool not in want:
            continue  # the pools rule reports it
        size, volume = want[pool]
        if gb != size:
            out.append(f"disks: {where} writes {gb} GB boot disks, the plan priced {size} GB")
        expected = fixed or volume
        if expected and kind != expected:
            out.append(f"disks: {where} writes boot disk type {kind or 'unset'}, the plan "
                       f"priced {expected} ({volume or 'no block tier'})")


def _check_tags(plan: Plan, files: dict[str, str], out: list[str]) -> None:
    from ptplan.planfile.identity import PLAN_LABEL, plan_prefix
    from ptplan.planfile.tags import SANITIZE

    prefix = plan_prefix(plan)
    spelled = {k8s_label(p.name): {f(p.name) for f in SANITIZE.values()} for p in plan.pools}
    for p in _node_pools(files):
        missing = [k for k in COST_KEYS if k not in p["tags"]]
        served = p["labels"].get("ptplan.io/pool")
        if missing:
            out.append(f"tags: {p['where']} bills without {', '.join(missing)}")
            continue
        if p["tags"][PLAN_LABEL] != prefix:
            out.append(f"tags: {p['where']} is labelled {PLAN_LABEL} "
                       f"{p['tags'][PLAN_LABEL]!r}, not the plan's {prefix!r}: guard --act "
                       "would refuse it")
        if served and p["tags"]["ptplan-pool"] not in spelled.get(served, {served}):
            out.append(f"tags: {p['where']} is tagged pool {p['tags']['ptplan-pool']!r} but "
                       f"serves {served!r}")
    for rel, text in files.items():
        if rel.startswith("skypilot/"):
            for t in _docs(text)[1:]:
                missing = [k for k in COST_KEYS if k not in t["resources"].get("labels", {})]
                if missing:
                    out.append(f"tags: {rel} task {t['name']} lacks {', '.join(missing)}")
    if "terraform-aws/main.tf" in files:
        active = {b["tag_key"] for _, b in _resources(_hcl(files["terraform-aws/cost_tags.tf"]),
                                                      "aws_ce_cost_allocation_tag")} \
            if "terraform-aws/cost_tags.tf" in files else set()
        for k in COST_KEYS:
            if k not in active:
                out.append(f"tags: cost allocation tag {k} is never activated (bills cannot "
                           "be split by it)")


def check_render(plan: Plan, files: dict[str, str]) -> list[str]:
    """Violations of the deployment rules (module doc) by ``files``; empty when it deploys
    as planned. Rules whose objects were not rendered are skipped."""
    out: list[str] = []
    _check_pools(plan, files, out)
    check_cpu_node_pools(plan, files, out)
    _check_admission(files, out)
    _check_taints(files, out)
    _check_disks(plan, files, out)
    _check_tags(plan, files, out)
    check_paths(files, out)
    from ptplan.rendering.checks.gpudirect import check_gpudirect
    from ptplan.rendering.checks.roles import check_roles

    check_roles(plan, files, entry_words, out)
    check_gpudirect(plan, files, out)
    return out
