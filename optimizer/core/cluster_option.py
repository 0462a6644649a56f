"""The cluster a team already has, as ``ptplan estimate --cluster`` and ``ptplan.estimate(...,
cluster=...)`` take it: ``NxGPU`` (``64xH100``, ``8xA100-80GB``), GPUs per node, the pipeline
and, for sync and async runs, GPUs per pool (``rollout=N,update=M[,scoring=K]``).

One parser for both entry points, so that the command line and the Python API accept and refuse
the same values; the messages name the option as the caller spells it (``--gpus-per-node`` on
the command line, ``gpus_per_node`` in Python). Every refusal is an :class:`InputError`, one
line: the option, the value, the fix.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from ptplan.core.errors import InputError, suggest
from ptplan.core.hardware import DEFAULT_SCALEUP_DOMAIN, resolve_gpu
from ptplan.core.hardware import gpus as gpu_table

__all__ = ["CLI", "DEFAULT_GPUS_PER_NODE", "MAX_GPUS", "PIPELINES", "POOLS", "PYTHON",
           "ClusterRequest", "OptionNames", "PipelineMode", "cluster_request", "default_pipeline",
           "named", "parse_cluster", "parse_pools"]



class PipelineMode(StrEnum):
    """How the phases of a step share the cluster (``--pipeline``): ``colocated`` (every phase
    on every GPU, one after another), ``sync`` (each on its own pool, one after another, plus
    the weight sync), ``async`` (generation overlaps scoring and update)."""

    colocated = "colocated"
    sync = "sync"
    async_ = "async"


PIPELINES = tuple(m.value for m in PipelineMode)
POOLS = ("rollout", "update", "scoring")
DEFAULT_GPUS_PER_NODE = DEFAULT_SCALEUP_DOMAIN
"""Nodes of 8 GPUs (HGX/DGX and OAM systems) where the GPU table states no scale-up domain of its
own; a GB200/GB300 NVL72 part takes its NVLink domain, 72 (``core.hardware.GPU.scaleup_domain``),
so that a cluster within one rack counts as one node."""
MAX_GPUS = 100_000
"""The largest cluster taken: about the largest training clusters built (a sync or async run
searches every split of the cluster in whole nodes)."""
POOLS_FORM = "rollout=N,update=M[,scoring=K], e.g. rollout=24,update=40"
_CLUSTER = re.compile(r"^\s*(?P<n>\d+)\s*[x×]\s*(?P<gpu>\S.*?)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class OptionNames:
    """How the caller spells each option in messages."""

    cluster: str
    gpus_per_node: str
    pipeline: str
    pools: str


CLI = OptionNames("--cluster", "--gpus-per-node", "--pipeline", "--pools")
PYTHON = OptionNames("cluster", "gpus_per_node", "pipeline", "pools")


@dataclass(frozen=True)
class ClusterRequest:
    """A validated cluster: ``gpus`` x ``gpu`` (canonical name) in nodes of ``gpus_per_node``,
    run as ``pipeline``; ``pools`` (sync/async only) or ``None``: the best split."""

    gpu: str
    gpus: int
    gpus_per_node: int
    pipeline: str
    pools: dict[str, int] | None


def parse_cluster(text: str, option: str = "--cluster") -> tuple[int, str]:
    """``NxGPU`` as (N, the GPU's canonical name); GPU names resolve as ``--gpu`` does."""
    m = _CLUSTER.match(text) if isinstance(text, str) else None
    if m is None:
        shown = text.strip() if isinstance(text, str) and text.strip() else repr(text)
        raise InputError(f"{option} {shown}: use NxGPU, e.g. 64xH100")
    n = int(m["n"])
    if n < 1 or n > MAX_GPUS:
        raise InputError(f"{option} {text.strip()}: N is the number of GPUs, 1 to {MAX_GPUS:,}; "
                         "use NxGPU, e.g. 64xH100")
    return n, resolve_gpu(m["gpu"], f"{option} {text.strip()}").name


def parse_pools(pools: str | Mapping[str, int], option: str = "--pools") -> dict[str, int]:
    """GPUs per pool from ``rollout=N,update=M[,scoring=K]`` (or a mapping of the same);
    rollout and update are required, scoring defaults to the update pool."""
    shown = pools if isinstance(pools, str) else ",".join(f"{k}={v}" for k, v in pools.items())
    where = f"{option} {shown.strip()}"
    items: list[tuple[str, object]]
    if isinstance(pools, str):
        items = []
        for part in pools.split(","):
            key, eq, text = part.partition("=")
            if not eq:
                raise InputError(f"{where}: {part.strip()!r} is not POOL=N; use {POOLS_FORM}")
            items.append((key.strip().lower(), text.strip()))
    else:
        items = [(str(k).strip().lower(), v) for k, v in pools.items()]
    out: dict[str, int] = {}
    for name, value in items:
        if name not in POOLS:
            raise InputError(f"{where}: unknown pool {name!r}{suggest(name, POOLS)}; use "
                             f"{POOLS_FORM}")
        if name in out:
            raise InputError(f"{where}: {name} is given twice; use {POOLS_FORM}")
        count = _count(value)
        if count is None:
            raise InputError(f"{where}: {name}={value} is not a number of GPUs (a whole number "
                             f"≥ 1); use {POOLS_FORM}")
        out[name] = count
    missing = [p for p in ("rollout", "update") if p not in out]
    if missing:
        raise InputError(f"{where}: no {' and no '.join(missing)} pool; use {POOLS_FORM}")
    return {p: out[p] for p in POOLS if p in out}


def _count(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        n = value
    elif isinstance(value, str) and value.isascii() and value.isdigit():
        n = int(value)
    else:
        return None
    return n if 1 <= n <= MAX_GPUS else None


def default_pipeline(method: str, spec_pipeline: str) -> str:
    """The spec's ``pipeline``; colocated when it says ``auto`` and for jobs of one pool (SFT,
    offline generation)."""
    if method in ("sft", "generate") or spec_pipeline not in PIPELINES:
        return "colocated"
    return spec_pipeline


def cluster_request(cluster: str, gpus_per_node: int | None, pipeline: str | None,
                    pools: str | Mapping[str, int] | None, method: str, spec_pipeline: str,
                    names: OptionNames = CLI) -> ClusterRequest:
    """Every cluster option checked together (see the module doc)."""
    gpus, gpu = parse_cluster(cluster, names.cluster)
    where = f"{names.cluster} {cluster.strip()}"
    domain = ""
    if gpus_per_node is None:
        gpn = gpu_table()[gpu].scaleup_domain
        if gpn != DEFAULT_GPUS_PER_NODE:
            domain = f" ({gpu}'s NVLink domain)"
    elif isinstance(gpus_per_node, bool) or not isinstance(gpus_per_node, int) \
            or not 1 <= gpus_per_node <= MAX_GPUS:
        raise InputError(f"{names.gpus_per_node} {gpus_per_node}: GPUs per node is a whole "
                         f"number ≥ 1, e.g. 8")
    else:
        gpn = gpus_per_node
    if gpus > gpn and gpus % gpn:
        raise InputError(f"{where}: {gpus} GPUs are not whole nodes of {gpn}{domain}; give a "
                         f"multiple of {gpn}, or {names.gpus_per_node} for the nodes you have")
    if pipeline is None:
        mode = default_pipeline(method, spec_pipeline)
    elif pipeline not in PIPELINES:
        raise InputError(f"{names.pipeline}: unknown value {pipeline!r}"
                         f"{suggest(str(pipeline), PIPELINES)}; use one of "
                         f"{', '.join(PIPELINES)}")
    else:
        mode = pipeline
    if mode != "colocated" and method in ("sft", "generate"):
        raise InputError(f"{names.pipeline} {mode}: a {method} job runs on one pool; use "
                         "colocated")
    if pools is None:
        return ClusterRequest(gpu, gpus, gpn, mode, None)
    if mode == "colocated":
        raise InputError(f"{names.pools}: a colocated run puts every phase on all {gpus} GPUs; "
                         f"drop {names.pools}, or use {names.pipeline} sync or async")
    split = parse_pools(pools, names.pools)
    total = sum(split.values())
    if total > gpus:
        raise InputError(f"{names.pools} {','.join(f'{k}={v}' for k, v in split.items())}: "
                         f"{total} GPUs, more than the {gpus} of {where}; give pools that fit "
                         "(scoring left out runs on the update pool)")
    return ClusterRequest(gpu, gpus, gpn, mode, split)


def named(exc: InputError, cluster: str, names: OptionNames = CLI) -> InputError:
    """An error of the cluster run (``ptplan.demand.cluster.run_on_cluster``) that does not
    name an option yet, prefixed with the cluster asked for (and the fix, for a phase that does
    not fit)."""
    message = str(exc)
    options = (names.cluster, names.gpus_per_node, names.pipeline, names.pools, "--")
    if message.startswith(options):
        return exc
    fix = "; give more GPUs, or GPUs with more memory" if "does not fit" in message else ""
    return InputError(f"{names.cluster} {cluster.strip()}: {message}{fix}")
