"""``render --check`` rule ``gpudirect``: a multi-node trainer on GKE A3 High / Mega has the
GPUDirect set-up its priced bandwidth needs (:mod:`ptplan.rendering.gpudirect`; Google Cloud,
"Maximize GPU network bandwidth in Standard mode clusters", and GoogleCloudPlatform/
container-engine-accelerators ``gpudirect-tcpx(o)/nccl-test-latest.yaml``), and no other pool
gets it:

* its GKE node pools attach one additional node network per GPU NIC (4 for TCPX, 8 for TCPXO),
  each a VPC and subnet declared in the same file, with gVNIC;
* its RayJob worker group's pods name eth0 the default interface and put eth1 … ethN on GKE
  ``Network`` objects that ``kuberay/gke-networks.yaml`` declares (type ``Device``, with a
  ``GKENetworkParamSet`` in ``NetDevice`` mode on one of those VPCs); they run the receive
  daemon sidecar and the worker finds the NCCL plugin (``LD_LIBRARY_PATH`` on the mounted
  library directory) and its NICs (``NCCL_GPUDIRECTTCPX_SOCKET_IFNAME`` / ``NCCL_FASTRAK_IFNAME``
  = eth1 … ethN);
* its SkyPilot task asks for ``network_tier: best`` where SkyPilot 0.14.1 provisions TCPX
  (``a3-highgpu-8g``; ``sky/provision/gcp/constants.py``).
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from ptplan.planfile.names import gcp_label, k8s_label
from ptplan.planfile.schema import Plan
from ptplan.rendering.checks.readers import _hcl, _rayjob, _resources
from ptplan.rendering.gpudirect import LIB, SKY_TCPX_TYPES, stack

IFNAME = {"GPUDirect-TCPX": "NCCL_GPUDIRECTTCPX_SOCKET_IFNAME",
          "GPUDirect-TCPXO": "NCCL_FASTRAK_IFNAME"}


def _expected(plan: Plan) -> dict[tuple[str, str], Any]:
    """(pool label, machine type) → stack of every planned cell that needs GPUDirect."""
    return {(k8s_label(p.name), a.instance_type): st for p in plan.pools for a in p.allocations
            if a.nodes and (st := stack(plan, p, a.instance_type)) is not None}


def _one(v: Any) -> Any:
    return v[0] if isinstance(v, list) and len(v) == 1 and isinstance(v[0], dict) else v


def _node_pools(plan: Plan, files: dict[str, str], want: dict[Any, Any],
                out: list[str]) -> set[str]:
    vpcs: set[str] = set()
    for path in ("terraform-gcp/node_pools.tf", "gke/node_pools.tf"):
        if path not in files:
            continue
        doc = _hcl(files[path])
        nets = {f"google_compute_network.{n}.name": b.get("name")
                for n, b in _resources(doc, "google_compute_network")}
        subs = {f"google_compute_subnetwork.{n}.name": b.get("name")
                for n, b in _resources(doc, "google_compute_subnetwork")}
        vpcs |= {v for v in nets.values() if v}
        for name, body in _resources(doc, "google_container_node_pool"):
            cfg = _one(body["node_config"])
            key = (cfg.get("labels", {}).get("ptplan.io/pool", ""), cfg["machine_type"])
            extra = _one(body.get("network_config", {})) or {}
            attached = extra.get("additional_node_network_configs", []) if isinstance(
                extra, dict) else []
            attached = attached if isinstance(attached, list) else [attached]
            st = want.get(key)
            where = f"gpudirect: {path} {name}"
            if st is None:
                if attached:
                    out.append(f"{where} attaches GPU NIC networks but the plan gives it no "
                               "multi-node A3 trainer")
                continue
            if len(attached) != st.nics:
                out.append(f"{where} ({key[1]}, a multi-node trainer) attaches {len(attached)} "
                           f"additional node networks; {st.name} needs {st.nics}")
            for a in attached:
                net = str(a.get("network", "")).strip("${}")
                sub = str(a.get("subnetwork", "")).strip("${}")
                if net not in nets or sub not in subs:
                    out.append(f"{where}: additional network {net} / {sub} is not declared "
                               f"in {path}")
            if not (_one(cfg.get("gvnic", {})) or {}).get("enabled"):
                out.append(f"{where}: gVNIC is off; {st.name} needs it")
    return vpcs


def _networks(files: dict[str, str]) -> dict[str, str]:
    """Kubernetes Network name → the VPC of its GKENetworkParamSet (NetDevice, type Device)."""
    text = files.get("kuberay/gke-networks.yaml", "")
    docs = [d for d in yaml.safe_load_all(text) if isinstance(d, dict)] if text else []
    params = {d["metadata"]["name"]: d["spec"] for d in docs
              if d.get("kind") == "GKENetworkParamSet"
              and d["spec"].get("deviceMode") == "NetDevice"}
    out = {}
    for d in docs:
        if d.get("kind") == "Network" and d["spec"].get("type") == "Device":
            ref = d["spec"].get("parametersRef", {}).get("name", "")
            if ref in params:
                out[d["metadata"]["name"]] = params[ref].get("vpc", "")
    return out


def _pods(files: dict[str, str], want: dict[Any, Any], vpcs: set[str],
          out: list[str]) -> None:
    job = _rayjob(files)
    if job is None:
        return
    nets = _networks(files)
    for g in job["spec"]["rayClusterSpec"]["workerGroupSpecs"]:
        spec = g["template"]["spec"]
        pool = spec.get("nodeSelector", {}).get("ptplan.io/pool", "")
        types = {t for (p, t) in want if p == pool}
        st = next((want[(pool, t)] for t in sorted(types)), None)
        ann = g["template"].get("metadata", {}).get("annotations", {}) or {}
        where = f"gpudirect: worker group {g['groupName']}"
        if st is None:
            if "networking.gke.io/interfaces" in ann:
                out.append(f"{where} asks for GPU NIC interfaces but the plan gives it no "
                           "multi-node A3 trainer")
            continue
        ifaces = json.loads(ann.get("networking.gke.io/interfaces", "[]"))
        if ann.get("networking.gke.io/default-interface") != "eth0" or ifaces[:1] != [
                {"interfaceName": "eth0", "network": "default"}]:
            out.append(f"{where}: eth0 on the default network is not the pod's default "
                       "interface")
        extra = ifaces[1:]
        if [i.get("interfaceName") for i in extra] != [f"eth{n}" for n in
                                                        range(1, st.nics + 1)]:
            out.append(f"{where}: the pod gets {len(extra)} GPU NIC interfaces; {st.name} "
                       f"needs eth1 … eth{st.nics}")
        for i in extra:
            vpc = nets.get(i.get("network", ""))
            if vpc is None and "kuberay/gke-networks.yaml" in files:
                out.append(f"{where}: interface {i.get('interfaceName')} names Network "
                           f"{i.get('network')!r}, which kuberay/gke-networks.yaml does not "
                           "declare (type Device, NetDevice parameters)")
            elif vpc is not None and vpcs and vpc not in vpcs:
                out.append(f"{where}: Network {i.get('network')} is on VPC {vpc}, which the "
                           "node pools file does not create")
        names = [c["name"] for c in spec["containers"]]
        if st.daemon["name"] not in names:
            out.append(f"{where}: no {st.daemon['name']} sidecar ({st.name} receive daemon)")
        env = {e["name"]: e.get("value") for e in spec["containers"][0].get("env", [])}
        mounts = {m["mountPath"] for m in spec["containers"][0].get("volumeMounts", [])}
        if env.get("LD_LIBRARY_PATH") != LIB or LIB not in mounts:
            out.append(f"{where}: the worker does not load the NCCL plugin from {LIB}")
        want_if = ",".join(f"eth{n}" for n in range(1, st.nics + 1))
        if env.get(IFNAME[st.name]) != want_if:
            out.append(f"{where}: {IFNAME[st.name]} is {env.get(IFNAME[st.name])!r}, not "
                       f"{want_if}")


def _sky(plan: Plan, files: dict[str, str], want: dict[Any, Any], out: list[str]) -> None:
    for rel, body in sorted(files.items()):
        if not rel.startswith("skypilot/"):
            continue
        for t in [d for d in yaml.safe_load_all(body) if isinstance(d, dict)][1:]:
            res = t.get("resources", {})
            pool = res.get("labels", {}).get("ptplan-pool", "")
            it = res.get("instance_type", "")
            needs = any(gcp_label(p) == pool and t2 == it and t2 in SKY_TCPX_TYPES
                        for (p, t2) in want)
            if needs and res.get("network_tier") != "best":
                out.append(f"gpudirect: {rel} task {t.get('name')} ({it}, a multi-node "
                           "trainer) lacks network_tier: best (SkyPilot's GPUDirect-TCPX)")


def check_gpudirect(plan: Plan, files: dict[str, str], out: list[str]) -> None:
    want = _expected(plan)
    vpcs = _node_pools(plan, files, want, out)
    if want or "kuberay/gke-networks.yaml" in files:
        _pods(files, want, vpcs, out)
    _sky(plan, files, want, out)
