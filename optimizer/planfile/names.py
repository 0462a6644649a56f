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


_LOWER = "abcdefghijklmnopqrstuvwxyz0123456789"
HASH_CHARS = 6
"""Hex digits of the sha256 that keeps a sanitised or cut value distinct (:func:`short_hash`)."""


def short_hash(value: str) -> str:
    """The first :data:`HASH_CHARS` hex digits of the sha256 of ``value`` (UTF-8)."""
    return hashlib.sha256(value.encode()).hexdigest()[:HASH_CHARS]


def _distinct(value: str, clean: str, n: int, ok_end: str) -> str:
    """``clean`` when it spells ``value`` unchanged; else ``clean`` cut to leave room for
    ``-<short_hash(value)>``, so that two values that sanitise alike (``grpo#7b#math`` and
    ``grpo-7b-math``, ``Rollout`` and ``rollout`` as a GCP label, two long names cut at the
    same place) never share a tag."""
    if clean == value:
        return clean
    head = _trim(clean, n - HASH_CHARS - 1, ok_end)
    return f"{head}-{short_hash(value)}" if head else short_hash(value)


def k8s_label(value: str) -> str:
    """A Kubernetes label value: ≤ 63 of [A-Za-z0-9._-], alphanumeric at both ends; a value
    that had to change carries a hash of the original (:func:`_distinct`)."""
    return _distinct(value, _trim(re.sub(r"[^A-Za-z0-9._-]+", "-", value), 63, _ALNUM), 63,
                     _ALNUM)


def gcp_label(value: str) -> str:
    """A GCP label value: ≤ 63 of [a-z0-9_-] (lowercase); a value that had to change carries
    a hash of the original (:func:`_distinct`)."""
    return _distinct(value, re.sub(r"[^a-z0-9_-]+", "-", value.lower())[:63], 63, _LOWER)


def aws_tag(value: str) -> str:
    """An AWS tag value: ≤ 256 of letters, digits, spaces and ``_ . : / = + - @``; a value that
    had to change carries a hash of the original (:func:`_distinct`)."""
    return _distinct(value, re.sub(r"[^A-Za-z0-9 _.:/=+\-@]+", "-", value)[:256], 256, _ALNUM)


def dns_name(value: str, n: int = 40) -> str:
    """A DNS-1123 label (lowercase alphanumerics and '-'); a hash keeps cut names distinct."""
    s = re.sub(r"[^a-z0-9-]+", "-", value.lower()).strip("-")
    if len(s) > n or s != value:
        digest = hashlib.sha256(value.encode()).hexdigest()[:6]
        s = _trim(s, n - 7, "abcdefghijklmnopqrstuvwxyz0123456789")
        s = f"{s}-{digest}" if s else f"p-{digest}"
    return s or "p"


def prefixed(slug: str, digest: str, rest: str = "", n: int = 63) -> str:
    """``<slug>-<digest>[-<rest>]``: a DNS-1123 label of at most ``n`` characters that starts
    with a letter (GKE node pools, GCP networks, RFC 1035 names), for a DNS-label ``slug``,
    ``digest`` and ``rest``. The slug is cut to fit (``p`` put before a slug that does not start
    with a letter); the digest and ``rest`` never are, so ``n`` must exceed their length + 3."""
    tail = f"-{digest}" + (f"-{rest}" if rest else "")
    room = n - len(tail)
    if room < 1:
        raise ValueError(f"{rest!r}: too long for a name of {n} characters after the prefix")
    head = _trim(slug, room, _LOWER)
    if not head[:1].isalpha():
        head = _trim("p" + head, room, _LOWER) or "p"
    return head + tail


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
