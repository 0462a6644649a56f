"""The demand model's fitted efficiency factors and its 80 % intervals, from the validation suite.

Physics (``cells``, ``decode``, ``training``, ``inference``) gives each phase's time from FLOPs,
bytes and memory. What physics leaves open is fitted on the published runs of ``validation/``
as a few physically meaningful factors, never per case:

* ``generation``, ``scoring``, ``update_rl``, ``update_sft``, ``update_sft_megatron``: achieved
  ÷ modelled throughput of that phase family (a phase's time is divided by its factor); an SFT
  update takes ``update_sft_megatron`` when its spec says ``train_backend: megatron``
  (Megatron-core's fused, overlapped training engine: NeMo, Megatron-Bridge) and ``update_sft``
  otherwise (the fine-tuning tools' trainers: HF Trainer, TRL, LLaMA-Factory on FSDP or
  DeepSpeed); the reference and reward forwards of the training engine on the trainer's own
  GPUs take the update's factor, so
  ``scoring`` is scoring on a pool of its own and teacher scoring in an inference server;
* ``step_overhead_seconds``: per RL/OPD step, the framework's own time outside the modelled
  phases (dispatch, data loading, reward execution in the driver, logging).

The fit and its leave-one-out errors are computed by ``benchmarks/validation.py --fit``, which
writes ``optimizer/core/data/demand_fit.json``; ``tests/test_validation.py`` re-computes it and
fails if the stored file is stale. Intervals are split-conformal order statistics of the
leave-one-out ratios (reported ÷ predicted with the case left out of the fit), per family
(``rl`` for generation-led jobs: rl, opd, generate; ``sft``) where the family has enough cases,
pooled otherwise. Sources and method: docs/demand-model.md §7."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

LEVEL = 0.8
"""Coverage of every interval ptplan prints: the 10th to the 90th percentile."""

PHASE_FAMILY = {"rollout": "generation", "eval": "generation", "scoring": "scoring"}
"""Which fitted factor a phase's time takes (``update`` takes ``update_rl``, ``update_sft`` or
``update_sft_megatron``)."""

UPDATE_FAMILY = {"sft": "update_sft", "sft_megatron": "update_sft_megatron"}
"""The update's family by :func:`fit_method` (every other method: ``update_rl``)."""


def fit_method(method: str, train_backend: str = "auto") -> str:
    """The method as the fit tells jobs apart: an SFT job whose spec states ``train_backend:
    megatron`` is ``sft_megatron`` (its update takes ``update_sft_megatron``); ``auto`` and
    ``fsdp`` keep the fine-tuning tools' ``update_sft``, the conservative figure when the spec
    does not say which trainer runs (docs/demand-model.md §7)."""
    return "sft_megatron" if method == "sft" and train_backend == "megatron" else method


@dataclass(frozen=True)
class Interval:
    """Multipliers on a predicted figure: the truth lies in [low × x, high × x] with ``level``
    probability, judged by the leave-one-out errors of ``cases`` published runs."""

    level: float
    low: float
    high: float
    family: str
    cases: int
    basis: str

    def of(self, x: float) -> tuple[float, float]:
        return x * self.low, x * self.high


@dataclass(frozen=True)
class Fit:
    factors: dict[str, float]
    step_overhead_seconds: float
    intervals: dict[str, Interval]
    cases: int
    in_sample: dict[str, float]
    leave_one_out: dict[str, float]

    def overhead(self, method: str) -> float:
        return self.step_overhead_seconds if method in ("rl", "opd") else 0.0

    def interval(self, method: str) -> Interval:
        fam = family_of(method)
        return self.intervals.get(fam) or self.intervals["all"]


def family_of(method: str) -> str:
    return "sft" if method == "sft" else "rl"


def _interval(raw: dict[str, Any], family: str) -> Interval:
    return Interval(LEVEL, float(raw["low"]), float(raw["high"]), family, int(raw["cases"]),
                    str(raw["basis"]))


@lru_cache(maxsize=1)
def _stored() -> bytes:
    return resources.files("ptplan.core").joinpath("data/demand_fit.json").read_bytes()


@lru_cache(maxsize=1)
def fit_digest() -> str:
    """``sha256:`` and 16 hex digits of the stored fit (what a plan records it was made with)."""
    return "sha256:" + hashlib.sha256(_stored()).hexdigest()[:16]


@lru_cache(maxsize=1)
def load_fit() -> Fit:
    """The stored fit (package data ``core/data/demand_fit.json``)."""
    raw = json.loads(_stored().decode("utf-8"))
    return Fit({k: float(v) for k, v in raw["factors"].items()},
               float(raw["step_overhead_seconds"]),
               {k: _interval(v, k) for k, v in raw["intervals"].items()},
               int(raw["cases"]), dict(raw["in_sample"]), dict(raw["leave_one_out"]))


def model_interval(method: str) -> Interval:
    """The 80 % interval of a job of this method (rl, opd, generate, sft)."""
    return load_fit().interval(method)


GOVERNED_BY = {
    "generation": ("decode_mbu", "decode_compute_efficiency"),
    "scoring": ("rl_train_mfu", "prefill_efficiency"),
    "update_rl": ("rl_train_mfu",),
    "update_sft": ("train_mfu",),
    "update_sft_megatron": ("train_mfu",),
    "update_offload": ("cpu_adam_b_params_per_s", "pcie_gb_per_s"),
}
"""A family's fitted factor is the suite's correction of these efficiency defaults: a spec that
sets one of them states its own efficiency, and the factor is not applied on top."""

_OVERRIDE: list[Fit] = []


class using:
    """Run the demand model under another fit (``benchmarks/validation.py`` fits from the
    unfitted model: ``with using(IDENTITY): …``)."""

    def __init__(self, fit: Fit) -> None:
        self.fit = fit

    def __enter__(self) -> Fit:
        _OVERRIDE.append(self.fit)
        return self.fit

    def __exit__(self, *exc: object) -> None:
        _OVERRIDE.pop()


def active_fit() -> Fit:
    return _OVERRIDE[-1] if _OVERRIDE else load_fit()


def identity_fit() -> Fit:
    """No correction: every factor 1, no overhead (the model as physics alone gives it)."""
    base = load_fit()
    return Fit({k: 1.0 for k in GOVERNED_BY}, 0.0, base.intervals, 0, {}, {})


def family(phase: str, method: str, param_offload: bool = False,
           on_trainer: bool = False) -> str:
    """The factor family of a phase: ``update_offload`` for ZeRO-3 parameter offload (every
    pass streams the weights from host memory: DeepSpeed ZeRO-Infinity), whatever the method.

    ``on_trainer``: the scoring phase is forwards of the training engine (reference, reward)
    on the trainer's own GPUs, so it runs at the training engine's efficiency and takes the
    update's family; ``scoring`` is left to forwards on a pool of their own and to teacher
    scoring in an inference server (docs/demand-model.md §3.12, "Scoring on the trainer's
    GPUs")."""
    if phase == "scoring" and on_trainer:
        phase = "update"
    if phase == "update" and param_offload:
        return "update_offload"
    return PHASE_FAMILY.get(phase) or UPDATE_FAMILY.get(method, "update_rl")


def applies(phase: str, method: str, efficiency_set: set[str] | frozenset[str],
            param_offload: bool = False, on_trainer: bool = False) -> bool:
    """Whether the fitted factor corrects this phase (no: the spec states the efficiency)."""
    fam = family(phase, method, param_offload, on_trainer)
    return not any(k in efficiency_set for k in GOVERNED_BY.get(fam, ()))


def phase_factor(phase: str, method: str, efficiency_set: set[str] | frozenset[str],
                 param_offload: bool = False, on_trainer: bool = False) -> float:
    """The fitted factor a phase's time is divided by (1 where the spec sets the efficiency
    that the factor corrects)."""
    fam = family(phase, method, param_offload, on_trainer)
    if any(k in efficiency_set for k in GOVERNED_BY.get(fam, ())):
        return 1.0
    return active_fit().factors.get(fam, 1.0)


def step_overhead(method: str) -> float:
    """Seconds per RL/OPD step of framework time outside the modelled phases."""
    return active_fit().overhead(method)
