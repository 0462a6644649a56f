"""GCP accelerator-optimized machine shapes: the one table the embedded snapshot and the live
adapter share; and the general-purpose N2/C3 shapes of CPU pools (:data:`CPU_MACHINES`).

Shapes (vCPUs, memory GiB, GPU, GPU count) are from Google's accelerator-optimized machine
documentation (cloud.google.com/compute/docs/accelerator-optimized-machines, .../gpus) and match
the embedded snapshot (``providers/data/gcp_gpu_vms.csv``, checked by a test). A ``-nolssd``
machine (no bundled local SSD) has the shape of the machine it is named after.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Machine:
    series: str | None
    """Key into :data:`SERIES_LABELS` for the vCPU/RAM SKUs; None: the GPU SKU is a slice
    that includes vCPU and memory."""
    vcpus: float
    memory_gib: float
    accelerator: str
    """SkyPilot accelerator name (resolved through ptplan.core.hardware)."""
    gpus: int


SERIES_LABELS: dict[str, tuple[str, ...]] = {
    # series key -> labels as they appear in SKU descriptions (first label found wins)
    "A2": ("A2",),
    "A3": ("A3",),
    "A3-MEGA": ("A3Plus", "A3 Mega"),
    "A3-ULTRA": ("A3 Ultra", "A3Ultra"),
    "G2": ("G2",),
    "N2": ("N2",),
    "C3": ("C3",),
}

MACHINES: dict[str, Machine] = {
    "a2-highgpu-1g": Machine("A2", 12, 85, "A100", 1),
    "a2-highgpu-2g": Machine("A2", 24, 170, "A100", 2),
    "a2-highgpu-4g": Machine("A2", 48, 340, "A100", 4),
    "a2-highgpu-8g": Machine("A2", 96, 680, "A100", 8),
    "a2-megagpu-16g": Machine("A2", 96, 1360, "A100", 16),
    "a2-ultragpu-1g": Machine("A2", 12, 170, "A100-80GB", 1),
    "a2-ultragpu-2g": Machine("A2", 24, 340, "A100-80GB", 2),
    "a2-ultragpu-4g": Machine("A2", 48, 680, "A100-80GB", 4),
    "a2-ultragpu-8g": Machine("A2", 96, 1360, "A100-80GB", 8),
    "a3-highgpu-1g": Machine("A3", 26, 234, "H100", 1),
    "a3-highgpu-2g": Machine("A3", 52, 468, "H100", 2),
    "a3-highgpu-4g": Machine("A3", 104, 936, "H100", 4),
    "a3-highgpu-8g": Machine("A3", 208, 1872, "H100", 8),
    "a3-edgegpu-8g": Machine("A3", 208, 1872, "H100", 8),
    "a3-megagpu-8g": Machine("A3-MEGA", 208, 1872, "H100-MEGA", 8),
    "a3-ultragpu-8g": Machine("A3-ULTRA", 224, 2952, "H200", 8),
    "a4-highgpu-8g": Machine(None, 224, 3968, "B200", 8),
    "g2-standard-4": Machine("G2", 4, 16, "L4", 1),
    "g2-standard-8": Machine("G2", 8, 32, "L4", 1),
    "g2-standard-12": Machine("G2", 12, 48, "L4", 1),
    "g2-standard-16": Machine("G2", 16, 64, "L4", 1),
    "g2-standard-24": Machine("G2", 24, 96, "L4", 2),
    "g2-standard-32": Machine("G2", 32, 128, "L4", 1),
    "g2-standard-48": Machine("G2", 48, 192, "L4", 4),
    "g2-standard-96": Machine("G2", 96, 384, "L4", 8),
}


@dataclass(frozen=True, slots=True)
class CpuMachine:
    """A general-purpose machine type for the plan's CPU pools (issue #25): no GPU; priced as
    vCPUs × the series' core SKU + GiB × its RAM SKU."""

    series: str
    vcpus: float
    memory_gib: float


CPU_MACHINES: dict[str, CpuMachine] = {
    # cloud.google.com/compute/docs/general-purpose-machines: N2 standard 4 GiB per vCPU,
    # highcpu 1 GiB per vCPU; C3 standard 4 GiB per vCPU, highcpu 2 GiB per vCPU
    **{f"n2-standard-{n}": CpuMachine("N2", n, 4 * n) for n in (8, 16, 32, 64)},
    **{f"n2-highcpu-{n}": CpuMachine("N2", n, n) for n in (16, 32, 64)},
    **{f"c3-standard-{n}": CpuMachine("C3", n, 4 * n) for n in (8, 22, 44, 88)},
    **{f"c3-highcpu-{n}": CpuMachine("C3", n, 2 * n) for n in (22, 44, 88)},
}
"""The CPU machine types ``prices refresh --provider gcp`` prices (those of the embedded
``providers/data/cpu_vms.csv`` among them)."""


def machine(instance_type: str) -> Machine:
    """The shape of a machine type (``-nolssd`` variants included); KeyError when unknown."""
    return MACHINES[instance_type.removesuffix("-nolssd")]
