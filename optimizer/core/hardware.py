"""GPU specifications (package data ``optimizer/core/data/gpu_specs.csv``) and GPU names.

The CSV is a copy of the project's reference table (dense tensor figures, with a ``source`` and a
``confidence`` column per row). Each row gets a short canonical id (``H100``, ``A100-80GB`` ...);
catalog names and user input are resolved through :data:`ALIASES`. A precision a GPU lacks (an
empty cell) is unavailable on it: it is never mapped to another precision.

Units: TFLOPS (10^12 FLOP/s, dense), HBM in GB (10^9 bytes), bandwidth in TB/s (10^12 B/s).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import cache
from importlib import resources

from ptplan.core.errors import InputError, suggest

PRECISIONS: tuple[str, ...] = ("fp32", "bf16", "fp16", "fp8", "int8")
"""Precisions ptplan models, from highest to lowest."""

HIGH_PRECISIONS: frozenset[str] = frozenset({"fp32", "bf16", "fp16"})

BYTES_PER_PARAM: dict[str, float] = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1}
"""Weight bytes per parameter at each precision."""

KV_BYTES: dict[str, float] = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 2}
"""KV-cache bytes per element: fp8 uses an fp8 KV cache (vLLM ``kv_cache_dtype=fp8``); int8 is
weight-only W8A8 quantisation with a 16-bit KV cache."""

# CSV row name -> canonical id
_CANONICAL: dict[str, str] = {
    "H100 SXM5 80GB": "H100",
    "H100 PCIe 80GB": "H100-PCIe",
    "H800 SXM5 80GB": "H800",
    "H200 SXM 141GB": "H200",
    "H20 96GB": "H20",
    "B200 (HGX 1000 W)": "B200",
    "GB200 (NVL72 1200 W)": "GB200",
    "GB300 (NVL72 1400 W)": "GB300",
    "A100 SXM4 80GB": "A100-80GB",
    "A100 SXM4 40GB": "A100-40GB",
    "A100 PCIe 80GB": "A100-PCIe-80GB",
    "A800 SXM4 80GB": "A800",
    "L40S": "L40S",
    "L4": "L4",
    "A10 (PCIe)": "A10",
    "A10G (AWS g5)": "A10G",
    "T4": "T4",
    "Trainium1 (per chip)": "Trainium1",
    "Trainium2 (per chip)": "Trainium2",
}

ALIASES: dict[str, str] = {
    # catalog names (SkyPilot convention: plain "A100" is the 40 GB part)
    "a100": "A100-40GB",
    "a100-40gb": "A100-40GB",
    "a100-80gb": "A100-80GB",
    "a100-sxm4-80gb": "A100-80GB",
    "h100": "H100",
    "h100-80gb": "H100",
    "h100-sxm": "H100",
    "h100-sxm5": "H100",
    "h100-mega": "H100",
    "h100-mega-80gb": "H100",
    "h100-pcie": "H100-PCIe",
    "h200": "H200",
    "h200-141gb": "H200",
    "b200": "B200",
    "gb200": "GB200",
    "gb200-nvl72": "GB200",
    "gb300": "GB300",
    "gb300-nvl72": "GB300",
    "mi300x": "MI300X",
    "instinct-mi300x": "MI300X",
    "mi325x": "MI325X",
    "instinct-mi325x": "MI325X",
    "mi355x": "MI355X",
    "instinct-mi355x": "MI355X",
    "l40s": "L40S",
    "l4": "L4",
    "a10g": "A10G",
    "a10": "A10",
    "t4": "T4",
    "trainium": "Trainium1",
    "trainium1": "Trainium1",
    "trn1": "Trainium1",
    "trainium2": "Trainium2",
    "trn2": "Trainium2",
    "h800": "H800",
    "h20": "H20",
    "a800": "A800",
    # the names nvidia-smi, datasheets and papers use for the same parts
    "a100-sxm4-40gb": "A100-40GB",
    "a100-pcie-80gb": "A100-PCIe-80GB",
    "a100-80gb-pcie": "A100-PCIe-80GB",
    "h100-sxm5-80gb": "H100",
    "h100-pcie-80gb": "H100-PCIe",
    "h800-sxm5": "H800",
    "h800-sxm5-80gb": "H800",
    "h200-sxm": "H200",
    "h200-sxm-141gb": "H200",
    "h20-96gb": "H20",
    "a800-80gb": "A800",
    "a800-sxm4-80gb": "A800",
    "b200-hgx": "B200",
    "hgx-b200": "B200",
}


DEFAULT_SCALEUP_DOMAIN = 8
"""GPUs of one scale-up domain where the GPU table states none: an HGX/DGX or OAM board."""


@dataclass(frozen=True)
class GPU:
    """One accelerator type. ``peak_tflops`` maps precision -> dense peak; absent = unsupported."""

    name: str
    row_name: str
    architecture: str
    peak_tflops: dict[str, float]
    memory_gb: float
    mem_bw_tbps: float
    interconnect: str
    confidence: str
    source: str
    scaleup_gb_per_s: float = 0.0
    """One direction of the GPU's scale-up link (NVLink), GB/s; 0 where there is none (the
    GPUs of a node then talk over PCIe)."""
    vendor: str = "NVIDIA"
    """Who makes it (``gpu_specs.csv`` ``vendor``): NVIDIA parts run CUDA builds, AMD parts ROCm
    builds; AWS Trainium needs Neuron builds (what a framework release runs on:
    :mod:`ptplan.spec.frameworks`)."""
    scaleup_domain: int = DEFAULT_SCALEUP_DOMAIN
    """GPUs that share one scale-up domain in the part's reference system (``gpu_specs.csv``
    ``scaleup_domain_gpus``; empty: 8): 8 on an HGX/DGX or OAM board, 72 in a GB200/GB300 NVL72
    rack, whose 18 trays of 4 GPUs all reach each other over NVLink. ``--cluster`` takes it as
    the GPUs per node when none is given (:mod:`ptplan.core.cluster_option`)."""
    scaleout_gbit: float | None = None
    """The reference system's scale-out NIC per GPU, Gb/s (``scaleout_gbit_per_gpu``); None:
    by architecture (:attr:`scaleout_gb_per_s`)."""

    @property
    def scaleout_gb_per_s(self) -> float:
        """Scale-out (inter-node) bandwidth per GPU of the GPU's reference system, GB/s: the
        CSV's NIC per GPU where it states one (GB200 NVL72 ConnectX-7 400 Gb/s, GB300 NVL72
        ConnectX-8 800 Gb/s, the AMD OAM platforms 400 Gb/s); otherwise DGX H100/H200 and HGX
        B200 carry one 400 Gb/s NIC per GPU (NVIDIA DGX H100 datasheet), DGX A100 one 200 Gb/s
        NIC per GPU (DGX A100 datasheet); PCIe parts 100 Gb/s class."""
        if self.scaleout_gbit:
            return self.scaleout_gbit / 8.0
        if self.architecture in ("Hopper", "Blackwell"):
            return 50.0
        if self.architecture == "Ampere" and self.scaleup_gb_per_s >= 200:
            return 25.0
        return 12.5

    def supports(self, precision: str) -> bool:
        return precision in self.peak_tflops

    @property
    def precisions(self) -> tuple[str, ...]:
        return tuple(p for p in PRECISIONS if p in self.peak_tflops)


def _num(cell: str) -> float | None:
    cell = (cell or "").strip()
    return float(cell) if cell else None


@cache
def gpus() -> dict[str, GPU]:
    """All GPU types by canonical id, read from package data."""
    data = resources.files("ptplan.core").joinpath("data/gpu_specs.csv")
    text = data.read_text(encoding="utf-8")
    out: dict[str, GPU] = {}
    for row in csv.DictReader(text.splitlines()):
        name = _CANONICAL.get(row["gpu"])
        if name is None:  # a new row without a canonical id: keep its own name
            name = row["gpu"]
        peaks: dict[str, float] = {}
        for precision, column in (
            ("bf16", "bf16_dense_tflops"),
            ("fp16", "fp16_dense_tflops"),
            ("fp8", "fp8_dense_tflops"),
            ("int8", "int8_dense_tops"),
            ("fp32", "fp32_nontensor_tflops"),
        ):
            value = _num(row[column])
            if value:
                peaks[precision] = value
        out[name] = GPU(
            name=name,
            row_name=row["gpu"],
            architecture=row["architecture"],
            peak_tflops=peaks,
            memory_gb=float(row["memory_gb"]),
            mem_bw_tbps=float(row["mem_bw_tbps"]),
            interconnect=row["scaleup_interconnect"],
            confidence=row["confidence"],
            source=row["source"],
            scaleup_gb_per_s=(_num(row["scaleup_bw_gbps_bidir"]) or 0.0) / 2.0,
            vendor=row["vendor"].strip() or "NVIDIA",
            scaleup_domain=int(_num(row.get("scaleup_domain_gpus", "")) or DEFAULT_SCALEUP_DOMAIN),
            scaleout_gbit=_num(row.get("scaleout_gbit_per_gpu", "")),
        )
    return out


VENDOR_PREFIXES: tuple[str, ...] = ("nvidia-", "tesla-", "amd-")
"""Leading words of the names ``nvidia-smi`` and ``rocm-smi`` print (``NVIDIA H100 80GB HBM3``,
``Tesla T4``, ``AMD Instinct MI300X``), dropped before the lookup."""
MEMORY_SUFFIXES: tuple[str, ...] = ("-hbm3e", "-hbm3", "-hbm2e", "-oam")
"""Trailing memory-type and form-factor words of the same names, dropped likewise."""


def _name_keys(name: str) -> list[str]:
    """The lookup keys of a user-given name: lower-cased with ``_`` and spaces as ``-``, then
    without a vendor prefix, then without a memory-type suffix as well."""
    key = "-".join(name.strip().lower().replace("_", "-").split())
    keys = [key]
    for prefix in VENDOR_PREFIXES:
        if key.startswith(prefix):
            key = key[len(prefix):]
            keys.append(key)
            break
    for suffix in MEMORY_SUFFIXES:
        if key.endswith(suffix):
            keys.append(key[: -len(suffix)])
            break
    return keys


def canonical_gpu_name(name: str) -> str | None:
    """The canonical id for ``name`` (case-insensitive, aliases accepted, and the names
    ``nvidia-smi``/``rocm-smi`` print: their vendor prefix and memory-type suffix dropped), or
    None."""
    table = gpus()
    if name in table:
        return name
    for key in _name_keys(name):
        if key in ALIASES:
            return ALIASES[key]
        for canon in table:
            if canon.lower() == key:
                return canon
    return None


def unknown_gpu_message(name: str) -> str:
    choices = list(gpus()) + list(ALIASES)
    return (
        f"unknown GPU {name!r}{suggest(name, choices)}; "
        f"known GPUs: {', '.join(sorted(gpus()))}"
    )


def resolve_gpu(name: str, field: str = "gpu") -> GPU:
    """The GPU for a user-given name; unknown names raise :class:`InputError` with suggestions."""
    canon = canonical_gpu_name(name)
    if canon is None:
        raise InputError(f"{field}: {unknown_gpu_message(name)}")
    return gpus()[canon]
