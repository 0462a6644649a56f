"""GPUDirect on GKE for multi-node trainers on A3 (H100): what the render writes, from GKE's own
documents (read 2026-12-03):

* Google Cloud, "Maximize GPU network bandwidth in Standard mode clusters"
  (https://cloud.google.com/kubernetes-engine/docs/how-to/gpu-bandwidth-gpudirect-tcpx): A3 High
  (``a3-highgpu-8g``) reaches its scale-out bandwidth with GPUDirect-TCPX over 4 extra GPU
  NICs, A3 Mega (``a3-megagpu-8g``) with GPUDirect-TCPXO over 8; each extra NIC is a VPC with
  one subnet (MTU 8244, a firewall rule admitting the subnets' range), attached to the node pool
  as an additional node network with gVNIC, and to the pod as a GKE ``Network`` (type
  ``Device``) with its ``GKENetworkParamSet`` (``deviceMode: NetDevice``) through the
  ``networking.gke.io/default-interface`` / ``networking.gke.io/interfaces`` annotations; the
  NCCL plugin is installed on the nodes by Google's installer DaemonSet.
* GoogleCloudPlatform/container-engine-accelerators (https://github.com/GoogleCloudPlatform/
  container-engine-accelerators): ``gpudirect-tcpx/nccl-tcpx-installer.yaml`` and
  ``gpudirect-tcpxo/nccl-tcpxo-installer.yaml`` (the installers: they copy the plugin into the
  host's ``/home/kubernetes/bin/nvidia/lib64``), ``gpudirect-tcpx/nccl-test-latest.yaml`` and
  ``gpudirect-tcpxo/nccl-test-latest.yaml`` (the workload pod: the receive-datapath daemon
  sidecar ``tcpx-daemon`` / ``tcpxo-daemon`` with its command, capabilities and mounts, the
  ``devices.gke.io/container.<daemon>`` device list, the library mount at
  ``/usr/local/nvidia/lib64`` and ``LD_LIBRARY_PATH``), and the release notes
  ``gpudirect-tcpx/README.md`` (release of Jun 22, 2026: daemon ``tcpgpudmarxd-dev:v2.0.15``,
  its NCCL configs) and ``gpudirect-tcpxo/README.md`` (release of Jan 9, 2026: daemon
  ``tcpgpudmarxd-dev:v1.0.21``, its NCCL configs; RxDM arguments ``--num_hops=2 --num_nics=8``
  since Aug 21, 2025; config file paths under the library directory mounted in the container).

Not rendered (see docs/render.md, "GPUDirect on GKE"): the cluster-level switches (GKE Dataplane
V2 and multi-networking are set when the cluster is created, and ptplan does not own the
cluster) and the installer DaemonSet itself (applied from Google's URL, which tracks the plugin
release; the daemon image here must be the one paired with that release).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ptplan.planfile.names import dns_name, tf_name

LIB_HOST = "/home/kubernetes/bin/nvidia/lib64"
LIB = "/usr/local/nvidia/lib64"
MTU = 8244
SOURCE_RANGE = "192.168.0.0/16"
GKE_DOC = "https://cloud.google.com/kubernetes-engine/docs/how-to/gpu-bandwidth-gpudirect-tcpx"
_REPO = "https://raw.githubusercontent.com/GoogleCloudPlatform/container-engine-accelerators/master"


@dataclass(frozen=True)
class Stack:
    name: str
    nics: int
    daemon: dict[str, Any]
    devices: tuple[str, ...]
    env: dict[str, str]
    installer: str
    volumes: tuple[dict[str, Any], ...] = field(default=())
    mounts: tuple[dict[str, Any], ...] = field(default=())


_GPUS = (*(f"/dev/nvidia{i}" for i in range(8)), "/dev/nvidiactl", "/dev/nvidia-uvm")
_IF = ",".join(f"eth{i}" for i in range(1, 5))
TCPX = Stack(
    name="GPUDirect-TCPX", nics=4, installer=f"{_REPO}/gpudirect-tcpx/nccl-tcpx-installer.yaml",
    daemon={"name": "tcpx-daemon",
            "image": "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/tcpgpudmarxd-dev:v2.0.15",
            "command": ["/tcpgpudmarxd/build/app/tcpgpudmarxd", "--gpu_nic_preset", "a3vm",
                        "--gpu_shmem_type", "fd", "--uds_path", "/run/tcpx", "--setup_param",
                        r'\"--verbose 128 2 0 \"'],  # as upstream: a plain YAML scalar
            "securityContext": {"capabilities": {"add": ["NET_ADMIN"]}},
            "volumeMounts": [{"name": "gpudirect-libraries", "mountPath": LIB},
                             {"name": "tcpx-socket", "mountPath": "/run/tcpx"},
                             {"name": "gpudirect-sys", "mountPath": "/hostsysfs"},
                             {"name": "gpudirect-proc-sys", "mountPath": "/hostprocsysfs"}],
            "env": [{"name": "LD_LIBRARY_PATH", "value": LIB}]},
    devices=_GPUS,
    env={"LD_LIBRARY_PATH": LIB, "NCCL_SOCKET_IFNAME": "eth0", "NCCL_ALGO": "Ring,Tree",
         "NCCL_PROTO": "Simple", "NCCL_CROSS_NIC": "0", "NCCL_NET_GDR_LEVEL": "PIX",
         "NCCL_P2P_PXN_LEVEL": "0", "NCCL_GPUDIRECTTCPX_SOCKET_IFNAME": _IF,
         "NCCL_GPUDIRECTTCPX_CTRL_DEV": "eth0", "NCCL_DYNAMIC_CHUNK_SIZE": "524288",
         "NCCL_P2P_NET_CHUNKSIZE": "524288", "NCCL_P2P_PCI_CHUNKSIZE": "524288",
         "NCCL_P2P_NVL_CHUNKSIZE": "1048576", "NCCL_BUFFSIZE": "4194304",
         "NCCL_NSOCKS_PERTHREAD": "4", "NCCL_SOCKET_NTHREADS": "1",
         "NCCL_GPUDIRECTTCPX_TX_BINDINGS": "eth1:8-21,112-125;eth2:8-21,112-125;"
                                           "eth3:60-73,164-177;eth4:60-73,164-177",
         "NCCL_GPUDIRECTTCPX_RX_BINDINGS": "eth1:22-35,126-139;eth2:22-35,126-139;"
                                           "eth3:74-87,178-191;eth4:74-87,178-191",
         "NCCL_GPUDIRECTTCPX_PROGRAM_FLOW_STEERING_WAIT_MICROS": "500000",
         "NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX": "/run/tcpx"},
    # Google's test pod mounts the daemon's socket directory at /tmp (the plugin's default
    # prefix); Ray keeps its session under /tmp/ray, so the worker mounts it at /run/tcpx and
    # names it with the plugin's NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX
    volumes=({"name": "tcpx-socket", "hostPath": {"path": "/run/tcpx"}},),
    mounts=({"name": "tcpx-socket", "mountPath": "/run/tcpx"},))
TCPXO = Stack(
    name="GPUDirect-TCPXO", nics=8,
    installer=f"{_REPO}/gpudirect-tcpxo/nccl-tcpxo-installer.yaml",
    daemon={"name": "tcpxo-daemon",
            "image": "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/tcpgpudmarxd-dev:v1.0.21",
            "command": ["/bin/sh", "-c"],
            "args": ["set -ex\nchmod 755 /fts/entrypoint_rxdm_container.sh\n"
                     "/fts/entrypoint_rxdm_container.sh --num_hops=2 --num_nics=8\n"],
            "securityContext": {"capabilities": {"add": ["NET_ADMIN", "NET_BIND_SERVICE"]}},
            "volumeMounts": [{"name": "gpudirect-libraries", "mountPath": LIB},
                             {"name": "gpudirect-sys", "mountPath": "/hostsysfs"},
                             {"name": "gpudirect-proc-sys", "mountPath": "/hostprocsysfs"}],
            "env": [{"name": "LD_LIBRARY_PATH", "value": LIB}]},
    devices=(*_GPUS, "/dev/dmabuf_import_helper"),
    env={"LD_LIBRARY_PATH": LIB, "NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY": "/dev/aperture_devices",
         "NCCL_FASTRAK_CTRL_DEV": "eth0",
         "NCCL_FASTRAK_IFNAME": ",".join(f"eth{i}" for i in range(1, 9)),
         "NCCL_SOCKET_IFNAME": "eth0", "NCCL_CROSS_NIC": "0", "NCCL_PROTO": "Simple,LL128",
         "NCCL_MIN_NCHANNELS": "4", "NCCL_TUNER_PLUGIN": "libnccl-tuner.so",
         "NCCL_TUNER_CONFIG_PATH": f"{LIB}/a3plus_tuner_config.textproto",
         "NCCL_SHIMNET_GUEST_CONFIG_CHECKER_CONFIG_FILE": f"{LIB}/a3plus_guest_config.textproto",
         "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7", "NCCL_NVLSTREE_MAX_CHUNKSIZE": "131072",
         "NCCL_P2P_NET_CHUNKSIZE": "524288", "NCCL_P2P_PCI_CHUNKSIZE": "524288",
         "NCCL_P2P_NVL_CHUNKSIZE": "1048576", "NCCL_FASTRAK_NUM_FLOWS": "2",
         "NCCL_FASTRAK_USE_SNAP": "1", "NCCL_FASTRAK_PLUGIN_ACCEPT_TIMEOUT_MS": "600000",
         "NCCL_FASTRAK_ENABLE_CONTROL_CHANNEL": "0", "NCCL_BUFFSIZE": "8388608",
         "NCCL_NET_GDR_LEVEL": "PIX", "NCCL_FASTRAK_ENABLE_HOTPATH_LOGGING": "0",
         "NCCL_FASTRAK_USE_LLCM": "1", "NCCL_NVLS_ENABLE": "1", "NCCL_DEBUG": "WARN"},
    volumes=({"name": "aperture-devices", "hostPath": {"path": "/dev/aperture_devices"}},
             {"name": "gpudirect-shm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}}),
    mounts=({"name": "aperture-devices", "mountPath": "/dev/aperture_devices"},
            {"name": "gpudirect-shm", "mountPath": "/dev/shm"}))
STACKS = {"a3-highgpu-8g": TCPX, "a3-megagpu-8g": TCPXO}
"""GKE machine types whose scale-out bandwidth needs GPUDirect, and its stack."""
SKY_TCPX_TYPES = ("a3-edgegpu-8g", "a3-highgpu-8g")
"""Machine types SkyPilot 0.14.1 provisions with GPUDirect-TCPX for ``network_tier: best``
(``sky/provision/gcp/constants.py`` ``GPU_DIRECT_TCPX_INSTANCE_TYPES``; ``sky/provision/gcp/
config.py`` raises for any other type)."""


def stack(plan: Any, pool: Any, instance_type: str) -> Stack | None:
    """The GPUDirect stack a pool's nodes of ``instance_type`` need: a GKE trainer (the update
    runs there) across two or more A3 High / Mega nodes."""
    if plan.provider != "gcp" or "update" not in pool.phases or pool.nodes < 2:
        return None
    return STACKS.get(instance_type)


def networks(prefix: str, nics: int) -> list[dict[str, Any]]:
    """The extra GPU NIC networks: one VPC + subnet (192.168.<i>.0/24) + firewall rule each,
    and the Kubernetes ``Network`` / ``GKENetworkParamSet`` (cluster-scoped) named after it,
    every name after the plan's ``prefix`` (:func:`ptplan.planfile.identity.plan_prefix`)."""
    out = []
    for i in range(1, nics + 1):
        name = dns_name(f"{prefix}-gpunic-{i}", 63)
        out.append({"index": i, "name": name, "tf": tf_name(f"gpunic_{i}"),
                    "subnet": dns_name(f"{prefix}-gpunic-sub-{i}", 63),
                    "firewall": dns_name(f"{prefix}-gpunic-internal-{i}", 63),
                    "cidr": f"192.168.{i}.0/24", "k8s": name})
    return out


def pod(st: Stack, nets: list[dict[str, Any]]) -> dict[str, Any]:
    """What a trainer worker pod adds: annotations, the worker's env and mounts, the daemon
    sidecar and the volumes (GoogleCloudPlatform/container-engine-accelerators
    ``gpudirect-tcpx(o)/nccl-test-latest.yaml``)."""
    import json

    interfaces = [{"interfaceName": "eth0", "network": "default"}] + [
        {"interfaceName": f"eth{n['index']}", "network": n["k8s"]} for n in nets[:st.nics]]
    devices = "".join(f"- path: {d}\n" for d in st.devices)
    return {
        "stack": st.name, "nics": st.nics, "installer": st.installer,
        "annotations": {"networking.gke.io/default-interface": "eth0",
                        "networking.gke.io/interfaces": json.dumps(interfaces),
                        f"devices.gke.io/container.{st.daemon['name']}": devices},
        "env": [{"name": k, "value": v} for k, v in st.env.items()],
        "mounts": [{"name": "gpudirect-libraries", "mountPath": LIB}, *st.mounts],
        "sidecar": st.daemon,
        "volumes": [{"name": "gpudirect-libraries", "hostPath": {"path": LIB_HOST}},
                    {"name": "gpudirect-sys", "hostPath": {"path": "/sys"}},
                    {"name": "gpudirect-proc-sys", "hostPath": {"path": "/proc/sys"}},
                    *st.volumes],
    }


def notes(plan: Any, groups: list[dict[str, Any]]) -> list[str]:
    out = []
    for g in groups:
        gd = g.get("gpudirect")
        if not gd:
            continue
        sky = ("SkyPilot: network_tier: best (SkyPilot's own GPUDirect-TCPX set-up)"
               if g["instance_type"] in SKY_TCPX_TYPES else
               "SkyPilot 0.14.1 has no GPUDirect-TCPXO: its task for this pool trains over "
               "gVNIC only (use the GKE targets)")
        out.append(f"gpudirect: pool {g['pool']} trains across {g['nodes']} "
                   f"{g['instance_type']} nodes with {gd['stack']} ({gd['nics']} GPU NICs): "
                   "rendered: the VPCs, subnets and firewall rules, the node pool's additional "
                   "networks, the GKE Network objects (kuberay/gke-networks.yaml), the pods' "
                   f"interfaces, daemon sidecar and NCCL settings; {sky}. Before the first "
                   "run: a cluster with Dataplane V2 and multi-networking, and `kubectl apply "
                   f"-f {gd['installer']}` ({GKE_DOC})")
    return out
