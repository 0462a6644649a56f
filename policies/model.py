"""Policy files: declarative cost rules compiled into the planner's constraints.

A policy says, per phase, which capacity types and precisions may be used, which share of
teacher / reward scoring must run at bf16 or better (to calibrate the low-precision signal),
which providers and regions are allowed, how large a pool's spot share may be, whether phases
may be split across regions, the storage lifecycle, and the budget thresholds that warn and stop.
Policies never touch PuLP: :mod:`ptplan.planner.candidates` reads them when it builds pool
options, and :mod:`ptplan.policies.check` checks a plan against them rule by rule.
"""

from __future__ import annotations

import fnmatch
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from ptplan.core.errors import InputError
from ptplan.core.kinds import CapacityType
from ptplan.core.yamlio import (
    StrictModel,
    parse_mapping,
    quoted,
    read_mapping,
    shown,
    validate,
)

Precision = Literal["fp32", "bf16", "fp16", "fp8", "int8"]
PhaseName = Literal["rollout", "scoring", "update", "eval"]
Share = Annotated[float, Field(ge=0, le=1, strict=True)]


DEFAULT_BLOCK_PHASES: tuple[PhaseName, ...] = ("update",)


class PhaseRule(StrictModel):
    capacity_types: list[CapacityType] | None = None
    """Allowed capacity types (absent: all)."""
    precisions: list[Precision] | None = None
    """Allowed precisions (absent: all the phase supports)."""

    @model_validator(mode="after")
    def _not_empty(self) -> PhaseRule:
        for name in ("capacity_types", "precisions"):
            value = getattr(self, name)
            if value is not None and not value:
                raise ValueError(f"{name} is empty: list at least one, or remove the key")
        return self


class StorageLifecycle(StrictModel):
    keep_hot: Annotated[int, Field(gt=0, le=10_000, strict=True)] = 3
    archive_every: Annotated[int, Field(gt=0, le=10_000, strict=True)] = 5
    retention_days: Annotated[int, Field(gt=0, le=36_500, strict=True)] = 30
    rollout_log_days: Annotated[int, Field(gt=0, le=36_500, strict=True)] = 14
    metrics_days: Annotated[int, Field(gt=0, le=36_500, strict=True)] = 365


class BudgetThresholds(StrictModel):
    warn_at: Share = 0.8
    """Fraction of the budget at which spending should be flagged."""
    stop_at: Share = 1.0
    """Fraction of the budget at which the run must stop."""

    @model_validator(mode="after")
    def _order(self) -> BudgetThresholds:
        if self.warn_at > self.stop_at:
            raise ValueError(f"warn_at {self.warn_at} is above stop_at {self.stop_at}; warn "
                             "before stopping")
        return self


class Policy(StrictModel):
    name: str = Field(min_length=1, max_length=200)
    extends: str | None = Field(default=None, min_length=1, max_length=1000)
    """``default`` (``policies/default.yaml``) or the path of another policy file, relative to
    this one: start from that policy; keys given here replace its keys, and mappings (phases,
    storage, budget, ...) merge key by key. Kept in the plan for provenance."""
    phases: dict[PhaseName, PhaseRule] = {}
    high_precision_fallback: dict[Literal["teacher", "reward"], Share] = {}
    """Share of that scoring model's work run at bf16 or better (fp16 where no bf16)."""
    providers: list[str] | None = None
    regions: list[str] | None = None
    """Region names or globs."""
    max_spot_share: Share = 1.0
    """Largest share of any pool's nodes that may be spot."""
    split_regions: bool = False
    """Whether the rollout pool may sit in another region (or provider) than the trainer's,
    paying inter-region egress for every weight sync, the experience data and the dataset
    staging. The update and scoring pools always stay in the trainer's zone."""
    allow_opt_in_zones: bool = False
    """Whether pools may sit in locations that need an account opt-in and their own subnet
    (AWS Local Zones and Wavelength zones; :func:`ptplan.providers.buyability.opt_in`). Off by
    default: a plan on such a zone cannot be deployed until someone opts the account in."""
    kv_cache_fp8: bool = False
    """Whether generation with fp8 or int8 weights may also keep its KV cache in fp8 (vLLM
    ``kv_cache_dtype=fp8``). Off by default: the frameworks keep the KV cache at the model's
    16-bit dtype unless it is asked for, and fp8 KV changes the sampled log-probabilities."""
    boot_disk_gb: int = Field(default=200, ge=10, le=16384, strict=True)
    """Boot disk of every node (GB, billed as provisioned GiB): the image (veRL's base image
    with CUDA, torch and vLLM: tens of GB unpacked, beside its compressed layers) and the model
    cache (the examples' largest pool loads a 32B teacher, 64 GB in bf16, and an 8B student).
    The plan prices it at the catalog's block-storage rate for every held node-hour, and
    ``render`` writes this size (Karpenter ``volumeSize``, GKE ``disk_size_gb``, SkyPilot
    ``disk_size``). Up to 16,384 GB (the EBS gp3 maximum)."""
    storage: StorageLifecycle = StorageLifecycle()
    budget: BudgetThresholds = BudgetThresholds()
    block_phases: list[PhaseName] = list(DEFAULT_BLOCK_PHASES)
    """Phases that may also run on capacity booked for the run: capacity blocks (AWS Capacity
    Blocks for ML, GCP calendar reservations) and GCP DWS flex-start (default: the update,
    which holds the run's state and is never on spot). A pool may use them only if every phase
    it runs may; ``[]`` forbids them. A phase whose ``capacity_types`` lists ``block`` or
    ``flex_start`` may use that type whatever this says."""

    def recorded(self) -> dict[str, Any]:
        """The policy as a plan records it: ``block_phases`` (added with plan schema 6) only
        when it differs from the default, so plans without bookings stay as they were."""
        out = self.model_dump(mode="json")
        if out.get("block_phases") == list(DEFAULT_BLOCK_PHASES):
            del out["block_phases"]
        return out

    @model_validator(mode="after")
    def _supported(self) -> Policy:
        update = self.phases.get("update")
        if update and update.precisions and "int8" in update.precisions:
            raise ValueError("phases.update.precisions lists int8, an inference format; train "
                             "in fp32, bf16, fp16 or fp8")
        return self

    def capacity_types(self, phase: str) -> set[str]:
        rule = self.phases.get(phase)  # type: ignore[call-overload]
        if rule is None or rule.capacity_types is None:
            return set(CapacityType)
        booked = {"block", "flex_start"} if phase in self.block_phases else set()
        return set(rule.capacity_types) | booked

    def precisions(self, phase: str) -> set[str] | None:
        rule = self.phases.get(phase)  # type: ignore[call-overload]
        return set(rule.precisions) if rule is not None and rule.precisions else None

    def allows_region(self, provider: str, region: str) -> bool:
        if self.providers is not None and provider.lower() not in \
                {p.lower() for p in self.providers}:
            return False
        return self.regions is None or any(fnmatch.fnmatchcase(region, g) for g in self.regions)


MAX_EXTENDS = 8


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` on top of ``base``: mappings merge key by key, anything else is replaced."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _default_text() -> str:
    return resources.files("ptplan.policies").joinpath("default.yaml").read_text(encoding="utf-8")


def _resolve(data: dict[str, Any], origin: str, base_dir: Path, chain: tuple[str, ...]
             ) -> dict[str, Any]:
    """Apply ``extends`` (recursively, cycles and runaway chains rejected)."""
    parent_ref = data.get("extends")
    if parent_ref is None:
        return data
    where = quoted(origin)
    if not isinstance(parent_ref, str) or not parent_ref.strip():
        raise InputError(f"policy {where}: extends = {shown(parent_ref)}; use 'default' or the "
                         "path of another policy file")
    if any(not c.isprintable() for c in parent_ref):
        raise InputError(f"policy {where}: extends = {shown(parent_ref)} contains control "
                         "characters; use 'default' or the path of another policy file")
    if len(chain) >= MAX_EXTENDS:
        raise InputError(f"policy {where}: extends chain longer than {MAX_EXTENDS} "
                         f"({' -> '.join(quoted(c) for c in chain)}); shorten it")
    if parent_ref == "default":
        key, parent = "default", parse_mapping(_default_text(), "policy",
                                               "policies/default.yaml")
        parent_dir = base_dir
    else:
        try:
            path = (base_dir / parent_ref).resolve()
        except (OSError, RuntimeError, ValueError) as exc:  # symlink loops, odd names
            raise InputError(f"policy {where}: extends = {shown(parent_ref)} cannot be resolved "
                             f"({type(exc).__name__}); use 'default' or the path of another "
                             "policy file") from None
        key = str(path)
        parent = read_mapping(path, f"policy {where}: extends")
        parent_dir = path.parent
    if key in chain:
        raise InputError(f"policy {where}: extends {parent_ref!r} forms a cycle "
                         f"({' -> '.join(quoted(c) for c in (*chain, key))}); remove one "
                         "extends")
    parent = _resolve(parent, parent_ref, parent_dir, (*chain, key))
    merged = _merge({k: v for k, v in parent.items() if k != "extends"}, data)
    return merged


def parse_policy(text: str, origin: str = "policy", base_dir: Path | None = None) -> Policy:
    data = parse_mapping(text, "policy", origin)
    data = _resolve(data, origin, base_dir or Path.cwd(), (origin,))
    return validate(Policy, data, f"policy {quoted(origin)}")


def load_policy(path: str | None) -> Policy:
    """The policy at ``path``, or the default policy (``policies/default.yaml``)."""
    if path is None:
        return default_policy()
    data = read_mapping(path, "policy")
    data = _resolve(data, path, Path(path).resolve().parent, (str(Path(path).resolve()),))
    return validate(Policy, data, f"policy {quoted(path)}")


@cache
def default_policy() -> Policy:
    return parse_policy(_default_text(), "policies/default.yaml")
