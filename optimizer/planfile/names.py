"""Label, tag and resource-name syntax of the deployment platforms (Kubernetes, GCP, AWS,
DNS-1123, Terraform) and the accelerator names each platform uses. Every value rendered from a
plan (:mod:`ptplan.rendering`), every cost tag (:mod:`ptplan.planfile.tags`) and every deployed name
(:mod:`ptplan.planfile.deployment`) passes through one of these, so a plan's names (spec name, pool
names) can never break a file's syntax."""

from __future__ import annotations

import hashlib
import re

SKY_ACCELERATOR = {"A100-40GB": "A100", "Trainium1": "Trainium"}
"""ptplan GPU ids whose SkyPilot catalog name differs (SkyPilot calls the 40 GB A100 'A100')."""


def _trim(s: str, n: int, ok_end: str) -> str:
    s = s[:n]
    while s and s[0] not in ok_end:
        s = s[1:]
    while s and s[-1] not in ok_end:
        s = s[:-1]
    return s


_ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def k8s_label(value: str) -> str:
    """A Kubernetes label value: ≤ 63 of [A-Za-z0-9._-], alphanumeric at both ends."""
    return _trim(re.sub(r"[^A-Za-z0-9._-]+", "-", value), 63, _ALNUM)


def gcp_label(value: str) -> str:
    """A GCP label value: ≤ 63 of [a-z0-9_-] (lowercase)."""
    return re.sub(r"[^a-z0-9_-]+", "-", value.lower())[:63]


def aws_tag(value: str) -> str:
    """An AWS tag value: ≤ 256 of letters, digits, spaces and ``_ . : / = + - @``."""
    return re.sub(r"[^A-Za-z0-9 _.:/=+\-@]+", "-", value)[:256]


def dns_name(value: str, n: int = 40) -> str:
    """A DNS-1123 label (lowercase alphanumerics and '-'); a hash keeps cut names distinct."""
    s = re.sub(r"[^a-z0-9-]+", "-", value.lower()).strip("-")
    if len(s) > n or s != value:
        digest = hashlib.sha256(value.encode()).hexdigest()[:6]
        s = _trim(s, n - 7, "abcdefghijklmnopqrstuvwxyz0123456789")
        s = f"{s}-{digest}" if s else f"p-{digest}"
    return s or "p"


def tf_name(value: str) -> str:
    """A Terraform identifier from a DNS name."""
    return "r_" + value.replace("-", "_")


def gpu_resource(gpu: str) -> str:
    """Kubernetes extended resource of an accelerator (device plugins' names)."""
    g = gpu.lower()
    if g.startswith(("trainium", "inferentia")):
        return "aws.amazon.com/neuron"
    if g.startswith("mi") or g.startswith("amd"):
        return "amd.com/gpu"
    if g.startswith("tpu"):
        return "google.com/tpu"
    return "nvidia.com/gpu"


GKE_ACCELERATOR = {"H100": "nvidia-h100-80gb", "H200": "nvidia-h200-141gb",
                   "A100-40GB": "nvidia-tesla-a100", "A100-80GB": "nvidia-a100-80gb",
                   "L4": "nvidia-l4", "B200": "nvidia-b200", "T4": "nvidia-tesla-t4"}


def gke_accelerator(gpu: str, machine_type: str) -> str:
    if machine_type.startswith("a3-megagpu"):
        return "nvidia-h100-mega-80gb"
    return GKE_ACCELERATOR.get(gpu, "nvidia-" + re.sub(r"[^a-z0-9]+", "-", gpu.lower()))
