"""GPUDirect-TCPX / TCPXO for a multi-node trainer on GKE A3 (issue 24): rendered as GKE documents
it, only where the plan has such a trainer, and checked by ``render --check`` (rule
``gpudirect``).

Upstream followed (read 2026-12-03): Google Cloud, "Maximize GPU network bandwidth in Standard mode
clusters" (https://cloud.google.com/kubernetes-engine/docs/how-to/gpu-bandwidth-gpudirect-tcpx):
VPC + subnet per GPU NIC (MTU 8244), node pool additional node networks with gVNIC, GKE
``Network`` (type Device) + ``GKENetworkParamSet`` (deviceMode NetDevice), pod annotations
``networking.gke.io/default-interface`` / ``networking.gke.io/interfaces``;
GoogleCloudPlatform/container-engine-accelerators ``gpudirect-tcpx/nccl-test-latest.yaml`` and
``gpudirect-tcpxo/nccl-test-latest.yaml`` (daemon sidecar, device annotation, library mount,
``LD_LIBRARY_PATH``), ``gpudirect-tcpx(o)/nccl-tcpx(o)-installer.yaml`` (the plugin copied to the
host's ``/home/kubernetes/bin/nvidia/lib64``), ``gpudirect-tcpx/README.md`` (Jun 22, 2026) and
``gpudirect-tcpxo/README.md`` (Jan 9, 2026) NCCL configs; SkyPilot 0.14.1
``sky/provision/gcp/constants.py`` (``GPU_DIRECT_TCPX_INSTANCE_TYPES``: a3-highgpu-8g,
a3-edgegpu-8g) for ``network_tier: best``.
"""

from __future__ import annotations

import copy
import functools
import json
from typing import Any

import pytest
import yaml
from test_deploy import FIXTURES, files_of, plan_of, spec_of

from ptplan.planfile.identity import plan_prefix
from ptplan.planfile.schema import Plan
from ptplan.rendering.checks.cluster import check_render
from ptplan.rendering.gpudirect import LIB, LIB_HOST, STACKS
from ptplan.rendering.targets import TARGETS, render_plan

NICS = {"a3-highgpu-8g": 4, "a3-megagpu-8g": 8}


@functools.cache
def a3_plan(machine: str, nodes: int = 2) -> Plan:
    """The GCP GRPO fixture with its trainer on ``nodes`` x ``machine`` (same GPUs per node)."""
    d = plan_of("grpo-gcp").model_dump(mode="json")
    d = copy.deepcopy(d)
    upd = next(p for p in d["pools"] if p["name"] == "update")
    upd["nodes"] = nodes
    upd["allocations"][0].update(nodes=nodes, instance_type=machine)
    return Plan.model_validate(d)


def nic_network(machine: str, i: int) -> str:
    """The name of GPU NIC ``i``'s Network: after the plan's prefix (cluster-scoped objects)."""
    return f"{plan_prefix(a3_plan(machine))}-gpunic-{i}"


@functools.cache
def a3_files(machine: str, target: str = "all", nodes: int = 2) -> dict[str, str]:
    return render_plan(a3_plan(machine, nodes), target, spec_of("grpo-gcp"))[0]


def _hcl(text: str) -> dict[str, Any]:
    from ptplan.rendering.checks.readers import _hcl as parse

    return parse(text)


def _one(v: Any) -> Any:
    return v[0] if isinstance(v, list) else v


def _worker(files: dict[str, str], group: str) -> dict[str, Any]:
    job = next(d for d in yaml.safe_load_all(files["kuberay/rayjob.yaml"])
               if d and d["kind"] == "RayJob")
    return next(g for g in job["spec"]["rayClusterSpec"]["workerGroupSpecs"]
                if g["groupName"] == group)


@pytest.mark.parametrize("machine", sorted(NICS))
def test_multi_node_a3_trainer_gets_gpudirect(machine: str) -> None:
    files = a3_files(machine)
    nics, st = NICS[machine], STACKS[machine]
    from ptplan.rendering.checks.readers import _resources

    tf = _hcl(files["terraform-gcp/node_pools.tf"])
    res = {kind: dict(_resources(tf, kind)) for kind in (
        "google_compute_network", "google_compute_subnetwork", "google_compute_firewall",
        "google_container_node_pool")}
    nets = res["google_compute_network"]
    assert len(nets) == nics and all(n["mtu"] == 8244 and n["auto_create_subnetworks"] is False
                                     for n in nets.values())
    subs = res["google_compute_subnetwork"]
    assert sorted(s["ip_cidr_range"] for s in subs.values()) == sorted(
        f"192.168.{i}.0/24" for i in range(1, nics + 1))
    assert all(f["source_ranges"] == ["192.168.0.0/16"] for f in
               res["google_compute_firewall"].values())
    pools = res["google_container_node_pool"]
    trainer = next(p for p in pools.values() if _one(p["node_config"])["machine_type"] == machine)
    attached = _one(trainer["network_config"])["additional_node_network_configs"]
    assert len(attached) == nics and _one(_one(trainer["node_config"])["gvnic"])["enabled"]
    assert all("network_config" not in p for p in pools.values() if p is not trainer)

    k8s = [d for d in yaml.safe_load_all(files["kuberay/gke-networks.yaml"]) if d]
    params = {d["metadata"]["name"]: d["spec"] for d in k8s if d["kind"] == "GKENetworkParamSet"}
    networks = {d["metadata"]["name"]: d["spec"] for d in k8s if d["kind"] == "Network"}
    assert len(params) == len(networks) == nics
    assert all(p["deviceMode"] == "NetDevice" for p in params.values())
    assert {p["vpc"] for p in params.values()} == {n["name"] for n in nets.values()}
    assert all(n["type"] == "Device" and n["parametersRef"]["name"] in params
               for n in networks.values())

    g = _worker(files, "update-on-demand")
    ann = g["template"]["metadata"]["annotations"]
    assert ann["networking.gke.io/default-interface"] == "eth0"
    ifaces = json.loads(ann["networking.gke.io/interfaces"])
    assert ifaces[0] == {"interfaceName": "eth0", "network": "default"}
    assert [i["interfaceName"] for i in ifaces[1:]] == [f"eth{i}" for i in range(1, nics + 1)]
    assert {i["network"] for i in ifaces[1:]} == set(networks)
    daemon = st.daemon["name"]
    devices = yaml.safe_load(ann[f"devices.gke.io/container.{daemon}"])
    assert {d["path"] for d in devices} >= {f"/dev/nvidia{i}" for i in range(8)}
    spec = g["template"]["spec"]
    worker, sidecar = spec["containers"]
    assert worker["name"] == "ray-worker" and sidecar["name"] == daemon
    assert sidecar["image"].startswith("us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx")
    env = {e["name"]: e["value"] for e in worker["env"]}
    assert env["LD_LIBRARY_PATH"] == LIB and env["NCCL_SOCKET_IFNAME"] == "eth0"
    key = "NCCL_GPUDIRECTTCPX_SOCKET_IFNAME" if nics == 4 else "NCCL_FASTRAK_IFNAME"
    assert env[key] == ",".join(f"eth{i}" for i in range(1, nics + 1))
    vols = {v["name"]: v for v in spec["volumes"]}
    lib = next(m for m in worker["volumeMounts"] if m["mountPath"] == LIB)
    assert vols[lib["name"]]["hostPath"]["path"] == LIB_HOST
    # other pools' pods are untouched
    others = [_worker(files, n) for n in ("rollout-spot",)]
    assert all(len(o["template"]["spec"]["containers"]) == 1 and "annotations" not in
               o["template"]["metadata"] for o in others)
    sky = [d for d in yaml.safe_load_all(files["skypilot/grpo-7b-math.yaml"]) if d][1:]
    tiers = {t["name"]: t["resources"].get("network_tier") for t in sky}
    assert tiers["update-on-demand"] == ("best" if machine == "a3-highgpu-8g" else None)
    assert {v for k, v in tiers.items() if k != "update-on-demand"} == {None}
    assert check_render(a3_plan(machine), files) == []


@pytest.mark.parametrize("target", [*TARGETS, "all"])
@pytest.mark.parametrize("machine", sorted(NICS))
def test_render_check_passes_on_a3_trainers(machine: str, target: str) -> None:
    try:
        files = a3_files(machine, target)
    except Exception as exc:  # a target that does not apply (terraform-aws on GCP)
        assert "\n" not in str(exc)
        return
    assert check_render(a3_plan(machine), files) == []


def test_single_node_trainers_and_other_clouds_get_none() -> None:
    """One A3 node trains over NVLink; a non-A3 or AWS trainer has no GPUDirect: nothing of it
    is rendered, and the check does not ask for it."""
    one = a3_files("a3-highgpu-8g", nodes=1)
    assert "kuberay/gke-networks.yaml" not in one
    assert "google_compute_network" not in one["terraform-gcp/node_pools.tf"]
    assert "networking.gke.io" not in one["kuberay/rayjob.yaml"]
    for name in FIXTURES:
        files = files_of(name)
        assert "kuberay/gke-networks.yaml" not in files and not any(
            "network_tier" in t or "additional_node_network_configs" in t
            for t in files.values()), name


def _mutate(machine: str, rel: str, old: str, new: str) -> list[str]:
    files = dict(a3_files(machine))
    assert old in files[rel], (rel, old)
    files[rel] = files[rel].replace(old, new, 1)
    return [v for v in check_render(a3_plan(machine), files) if v.startswith("gpudirect:")]


@pytest.mark.parametrize(("machine", "rel", "old", "new", "expect"), [
    ("a3-highgpu-8g", "terraform-gcp/node_pools.tf",
     "    additional_node_network_configs {\n      network    = google_compute_network.gpunic_4"
     ".name\n      subnetwork = google_compute_subnetwork.gpunic_4.name\n    }\n", "",
     "attaches 3 additional node networks; GPUDirect-TCPX needs 4"),
    ("a3-megagpu-8g", "terraform-gcp/node_pools.tf", "subnetwork = google_compute_subnetwork"
     ".gpunic_8.name", "subnetwork = google_compute_subnetwork.other.name", "is not declared"),
    ("a3-highgpu-8g", "kuberay/rayjob.yaml", '"networking.gke.io/default-interface": "eth0"',
     '"networking.gke.io/default-interface": "eth1"', "is not the pod's default interface"),
    ("a3-megagpu-8g", "kuberay/rayjob.yaml", '{\\"interfaceName\\": \\"eth8\\", \\"network\\":'
     f' \\"{nic_network("a3-megagpu-8g", 8)}\\"}}',
     '{\\"interfaceName\\": \\"eth8\\", \\"network\\": \\"vpc8\\"}',
     "names Network 'vpc8'"),
    ("a3-highgpu-8g", "kuberay/rayjob.yaml", '"name": "tcpx-daemon"', '"name": "rxdm"',
     "no tcpx-daemon sidecar"),
    ("a3-megagpu-8g", "kuberay/rayjob.yaml", '"value": "eth1,eth2,eth3,eth4,eth5,eth6,eth7,eth8"',
     '"value": "eth1,eth2"', "NCCL_FASTRAK_IFNAME is 'eth1,eth2'"),
    ("a3-highgpu-8g", "kuberay/rayjob.yaml", f'"name": "LD_LIBRARY_PATH", "value": "{LIB}"}}, '
     '{"name": "NCCL_SOCKET_IFNAME"', '"name": "LD_LIBRARY_PATH", "value": "/usr/lib"}, '
     '{"name": "NCCL_SOCKET_IFNAME"', "does not load the NCCL plugin"),
    ("a3-highgpu-8g", "skypilot/grpo-7b-math.yaml", '  network_tier: "best"\n', "",
     "lacks network_tier: best"),
    ("a3-highgpu-8g", "kuberay/gke-networks.yaml", 'deviceMode: "NetDevice"',
     'deviceMode: "DPDK-VFIO"', "which kuberay/gke-networks.yaml does not declare"),
])
def test_render_check_catches_missing_gpudirect(machine: str, rel: str, old: str, new: str,
                                                expect: str) -> None:
    out = _mutate(machine, rel, old, new)
    assert any(expect in v for v in out), out


def test_skypilot_loads_the_a3_trainer_task_with_network_tier_best() -> None:
    """SkyPilot 0.14.1 itself loads the A3 High job group, and the trainer's resources carry
    the ``best`` network tier (``sky/resources.py``: ``NetworkTier``) that its GCP provisioner
    turns into GPUDirect-TCPX (``sky/clouds/gcp.py``, ``sky/provision/gcp/config.py``)."""
    import sky
    from sky.utils import dag_utils
    from sky.utils.resources_utils import NetworkTier

    text = a3_files("a3-highgpu-8g", "skypilot")["skypilot/grpo-7b-math.yaml"]
    env = [("MODEL_PATH", "/m"), ("TRAIN_FILES", "/t"), ("VAL_FILES", "/v"),
           ("REWARD_FN", "/r.py")]
    assert dag_utils.load_job_group_from_yaml_str(text, env_overrides=env).is_job_group()
    tasks = {t["name"]: t for t in [d for d in yaml.safe_load_all(text) if d][1:]}
    task = sky.Task.from_yaml_config(copy.deepcopy(tasks["update-on-demand"]),
                                     env_overrides=env)
    (res,) = task.resources
    assert res.network_tier == NetworkTier.BEST and task.num_nodes == 2
