"""How fast each part runs on one GPU type at one precision, and a phase's time as a function
of the pool that runs it.

* decode parts run on an inference engine (:mod:`optimizer.demand.inference`): their step time
  depends on how many sequences each replica serves, so a phase with decode work carries a
  :class:`DecodeCurve` (seconds per run as a function of replicas) besides its linear work;
* prefill and forward (scoring) parts are compute-bound and linear in tokens;
* training parts run in the fastest parallel layout that fits
  (:mod:`optimizer.demand.training`).

Calibration binds (:func:`calibration_factor`): a measured (phase, GPU, precision) throughput
rescales the model of that phase on that GPU at *every* precision by measured ÷ modelled, so no
uncalibrated precision can look faster than the measurement allows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from optimizer.core.hardware import BYTES_PER_PARAM, GPU, HIGH_PRECISIONS, PRECISIONS
from optimizer.demand import inference as inf
from optimizer.demand import training as tr
from optimizer.demand.model import (
    GB,
    KV_HEADROOM,
    MAX_REPLICA_GPUS,
    TRAIN_PRECISIONS,
    Cell,
    Demand,
    Part,
    lora_params,
)
from optimizer.spec.project import ProjectSpec

KV_16BIT = {"fp32": 4.0}
"""KV-cache bytes per element by weight precision when fp8 KV is not allowed: the model's own
16-bit dtype (vLLM ``kv_cache_dtype=auto``), fp32 for fp32 models."""


def precision_options(phase: str) -> tuple[str, ...]:
    return TRAIN_PRECISIONS if phase == "update" else PRECISIONS


def kv_element_bytes(precision: str, kv_fp8: bool) -> float:
    """fp8 KV only where allowed (policy) and the weights are quantised; else 16 bit."""
    if kv_fp8 and precision in ("fp8", "int8"):
        return 1.0
    return KV_16BIT.get(precision, 2.0)


@dataclass(frozen=True)
class Conditions:
    """Where a phase runs: node size, colocation with training, fp8 KV allowed."""

    gpus_per_node: int = 8
    colocated: bool = False
    kv_fp8: bool = False


def _usable(gpu: GPU, spec: ProjectSpec) -> float:
    return gpu.memory_gb * GB * spec.efficiency.gpu_memory_utilization


def train_job(part: Part, spec: ProjectSpec) -> tr.TrainJob:
    m, eff = part.model, spec.efficiency
    n = m.params_b * 1e9
    if part.lora_rank:
        adapter = lora_params(m, part.lora_rank)
        wg, opt = n * 2.0 + adapter * 4.0, adapter * max(0.0, eff.adam_bytes_per_param - 4.0)
    else:
        wg, opt = n * 4.0, n * max(0.0, eff.adam_bytes_per_param - 4.0)
    d = spec.data
    per_opt: float
    if spec.method == "sft":
        per_opt = float(spec.sft_batch_size * (d.tokens_per_example or 1))
    else:
        per_opt = part.tokens / max(1, spec.total_steps) / spec.update_epochs \
            / (d.mini_batches_per_step or 1)
    mfu = eff.train_mfu if spec.method == "sft" else eff.rl_train_mfu
    return tr.TrainJob(m, part.flops_per_token, wg, opt, part.longest, per_opt, mfu)


def cell(part: Part, gpu: GPU, precision: str, spec: ProjectSpec, replica_gpus: int = 0,
         cond: Conditions = Conditions()) -> Cell:
    """Throughput per GPU and memory fit of ``part`` on ``gpu`` at ``precision``.

    Decode cells report the saturated throughput; their step time comes from
    :func:`decode_curve`. ``replica_gpus`` > 0 forces the replica size."""
    if not gpu.supports(precision):
        return Cell(False, reason=f"{gpu.name} has no {precision} support")
    if part.kind == "train" and precision not in TRAIN_PRECISIONS:
        return Cell(False, reason=f"{precision} is an inference format; train in "
                                  f"{', '.join(TRAIN_PRECISIONS)}")
    eff = spec.efficiency
    usable = _usable(gpu, spec)
    if part.kind == "train":
        job = train_job(part, spec)
        cap = _colocated_state_cap(gpu, spec) if cond.colocated else None
        curve = tr.choose_layout(job, gpu, precision, eff, usable, cond.gpus_per_node,
                                 replica_gpus, state_cap=cap)
        if isinstance(curve, str):
            reason = curve
            if cap is not None and not isinstance(tr.choose_layout(
                    job, gpu, precision, eff, usable, cond.gpus_per_node, replica_gpus), str):
                reason = (f"colocated: training state resident beside the rollout engine must "
                          f"fit {cap / GB:.0f} GB per GPU (gpu_memory_utilization − "
                          f"colocated_rollout_memory_fraction) and does not in any layout")
            return Cell(False, reason=reason)
        tc = curve.smallest
        assert tc.layout is not None
        return Cell(True, 1.0 / tc.seconds_per_token_per_gpu, tc.layout.gpus,
                    tc.memory_gb_per_gpu, eff.micro_batch_size, "compute",
                    layout=tc.layout, single_seconds=tc.single_sequence_seconds, curve=curve)
    weights = part.model.params_b * 1e9 * BYTES_PER_PARAM[precision]
    if part.kind in ("forward", "prefill"):
        need = inf.replica_gpus_for(weights, usable, KV_HEADROOM, MAX_REPLICA_GPUS)
        if replica_gpus and replica_gpus * usable * (1 - KV_HEADROOM) < weights:
            shown = need if need <= MAX_REPLICA_GPUS else f"more than {MAX_REPLICA_GPUS}"
            return Cell(False, reason=f"weights need {shown} GPUs per replica; "
                                      f"{replica_gpus} given")
        g = replica_gpus or need
        if g > MAX_REPLICA_GPUS:
            return Cell(False, reason=f"weights ({weights / GB:.0f} GB) need more than "
                                      f"{MAX_REPLICA_GPUS} GPUs per inference replica")
        spt = inf.prefill_seconds_per_token(part.model, gpu, precision, 1, eff, part.seq_tokens,
                                            _forward_efficiency(part, spec))
        return Cell(True, 1.0 / spt, g, weights / g / GB, 0, "compute")
    engine = decode_engine(part, gpu, precision, spec, replica_gpus, cond)
    if isinstance(engine, str):
        return Cell(False, reason=engine)
    ro = rollout_of(part)
    batch, _ = inf.effective_batch(engine, ro)
    if batch < 1:
        return Cell(False, reason=f"no room for one {ro.prompt_tokens + part.lengths.cap:.0f}"  # type: ignore[union-attr]
                                  f"-token sequence's KV cache on {engine.gpus} x {gpu.name}")
    ctx = ro.prompt_tokens + ro.lengths.mean_age
    t = float(engine.iteration_seconds(batch, ctx))
    mem = (weights + batch * ctx * engine.kv_bytes_per_token) / engine.gpus / GB
    return Cell(True, batch / t / engine.gpus, engine.gpus, mem, batch,
                engine.bound(batch, ctx), engine=engine)


TRAINING_ENGINE_FORWARDS = frozenset({"reference", "old_logprob", "critic_values", "reward"})
"""Forward passes the RL frameworks run in the training engine (veRL's FSDP/Megatron workers,
OpenRLHF's DeepSpeed models), not in the inference server: they run at training efficiency."""


def _forward_efficiency(part: Part, spec: ProjectSpec) -> float | None:
    """Log-probs and values computed by the training engine run at its model-FLOPs utilisation
    (veRL's 7B DAPO table: old_log_prob 108 s against update_actor 270 s for 2N against 6N FLOPs
    per token, i.e. forward efficiency ≈ 0.8 x the update's); rollout prefill and teacher
    scoring in an inference server run at ``prefill_efficiency``."""
    if part.name in TRAINING_ENGINE_FORWARDS:
        return spec.efficiency.train_mfu if spec.method == "sft" else spec.efficiency.rl_train_mfu
    return None


def rollout_of(part: Part) -> inf.Rollout:
    assert part.lengths is not None
    return inf.Rollout(part.run_sequences, part.prompt_tokens, part.lengths)


def _colocated_state_cap(gpu: GPU, spec: ProjectSpec) -> float:
    """Bytes per GPU left for training state while the rollout engine holds its share."""
    eff = spec.efficiency
    return gpu.memory_gb * GB * max(0.0, eff.gpu_memory_utilization
                                    - eff.colocated_rollout_memory_fraction)


def decode_engine(part: Part, gpu: GPU, precision: str, spec: ProjectSpec, replica_gpus: int,
                  cond: Conditions) -> inf.Engine | str:
    """The replica a decode part runs on, or why none fits. Colocated engines get
    ``colocated_rollout_memory_fraction`` of HBM (vLLM's gpu_memory_utilization is a share of
    the whole device); the training state kept beside them must fit the rest (the update's
    layout is chosen under that cap)."""
    eff, m = spec.efficiency, part.model
    weights = m.params_b * 1e9 * BYTES_PER_PARAM[precision]
    per_gpu = _usable(gpu, spec)
    if cond.colocated:
        per_gpu = gpu.memory_gb * GB * eff.colocated_rollout_memory_fraction
    g = replica_gpus or inf.replica_gpus_for(weights, per_gpu, KV_HEADROOM, MAX_REPLICA_GPUS)
    if g > MAX_REPLICA_GPUS:
        return (f"weights ({weights / GB:.0f} GB) and a KV cache need more than "
                f"{MAX_REPLICA_GPUS} GPUs per inference replica")
    kv_tok = inf.kv_bytes_per_token(m, kv_element_bytes(precision, cond.kv_fp8))
    capacity = (g * per_gpu - weights) / kv_tok
    return inf.Engine(gpu, precision, g, weights, kv_tok, max(capacity, 0.0),
                      eff.max_batch_per_replica, g > cond.gpus_per_node, m, eff)


@dataclass(frozen=True)
class DecodeOption:
    """One engine size (tensor-parallel degree) for a phase's decode."""

    engine: inf.Engine
    batch: int
    step: inf.StepModel | None
    recompute_seconds_per_token: float
    """Prefill seconds per token on one replica (preempted sequences are re-prefilled)."""
    asynchronous: inf.AsyncModel | None = None
    floor: float = 0.0
    """The longest response generated alone on this engine."""

    def run_seconds(self, n: np.ndarray, rollout: inf.Rollout, synchronous: bool
                    ) -> np.ndarray:
        if synchronous and self.step is not None:
            return self.step.seconds(n) + self.step.preempted(n) \
                * self.step.recompute_tokens_per_seq * self.recompute_seconds_per_token
        assert self.asynchronous is not None
        return self.asynchronous.seconds(n)


@dataclass(frozen=True)
class DecodeCurve:
    """Seconds of a phase's decode on a pool, as a function of the pool's GPUs. Engines of
    every power-of-two size from the smallest that holds the weights up to a node are
    considered, and a pool runs the fastest: a larger tensor-parallel degree reads the weights
    faster per token, which is what a drain-bound (latency-bound) step needs."""

    runs: int
    sequences: float
    """Sequences per run."""
    synchronous: bool
    rollout: inf.Rollout
    options: tuple[DecodeOption, ...]

    @property
    def engine(self) -> inf.Engine:
        """The smallest engine (the replica the pool must at least hold)."""
        return self.options[0].engine

    @property
    def batch(self) -> int:
        return self.options[0].batch

    def seconds(self, gpus: np.ndarray | float) -> np.ndarray:
        g = np.maximum(np.asarray(gpus, dtype=float), 1e-9)
        best: np.ndarray | None = None
        for o in self.options:
            replicas = g / o.engine.gpus
            t = self.runs * o.run_seconds(self.sequences / np.maximum(replicas, 1e-9),
                                          self.rollout, self.synchronous)
            t = np.where(replicas >= 1.0 - 1e-9, t, np.inf) if o is not self.options[0] else t
            best = t if best is None else np.minimum(best, t)
        assert best is not None
        return best

    def option_at(self, gpus: float) -> DecodeOption:
        """The engine size a pool of ``gpus`` GPUs runs (the fastest that fits the pool)."""
        best, best_t = self.options[0], math.inf
        for o in self.options:
            replicas = gpus / o.engine.gpus
            if replicas < 1.0 - 1e-9 and o is not self.options[0]:
                continue
            t = float(o.run_seconds(np.asarray([self.sequences / max(replicas, 1e-9)]),
                                    self.rollout, self.synchronous)[0])
            if t < best_t:
                best, best_t = o, t
        return best

    @property
    def floor_seconds(self) -> float:
        """However many GPUs: each run's longest response, generated alone on the fastest
        engine."""
        return self.runs * min(o.floor for o in self.options)

    def reference_replicas(self) -> float:
        """Replicas of the smallest engine at which each is just full (n = B)."""
        return max(1.0, math.ceil(self.sequences / max(self.batch, 1)))


_PART_MEMO: dict[int, tuple[Part, dict[Any, DecodeOption]]] = {}


def part_memo(part: Part) -> dict[Any, DecodeOption]:
    """Decode engines already built for this part (a GPU type's smallest engine is the same
    whatever the node size, so shapes of one GPU share it)."""
    held = _PART_MEMO.get(id(part))
    if held is None or held[0] is not part:
        if len(_PART_MEMO) > 256:
            _PART_MEMO.clear()
        held = _PART_MEMO[id(part)] = (part, {})
    return held[1]


def decode_curve(part: Part, c: Cell, spec: ProjectSpec, synchronous: bool,
                 gpu: GPU, precision: str, cond: Conditions) -> DecodeCurve:
    assert c.engine is not None
    ro = rollout_of(part)
    engines = [c.engine]
    # the smallest engine (most throughput per GPU) and one spanning the node (least latency per
    # token: what a drain-bound step needs); sizes between are dominated by one or the other
    # within a few per cent on the validation runs
    whole = max(cond.gpus_per_node, c.engine.gpus)
    if whole > c.engine.gpus and whole <= MAX_REPLICA_GPUS:
        e = decode_engine(part, gpu, precision, spec, whole, cond)
        if not isinstance(e, str):
            engines.append(e)
    options = []
    memo = part_memo(part)
    for engine in engines:
        key = (engine.gpu.name, engine.precision, engine.gpus, engine.spans_nodes,
               engine.kv_bytes_per_token, engine.kv_capacity_tokens, synchronous)
        hit = memo.get(key)
        if hit is not None:
            if hit.batch >= 1:
                options.append(hit)
            continue
        batch, admitted = inf.effective_batch(engine, ro)
        if batch < 1:
            continue
        step = inf.step_model(engine, ro, batch, admitted) if synchronous else None
        recompute = inf.prefill_seconds_per_token(part.model, engine.gpu, engine.precision,
                                                  engine.gpus, spec.efficiency,
                                                  ro.prompt_tokens + ro.lengths.mean_age)
        asyn = None if synchronous else inf.async_model(engine, ro, batch)
        memo[key] = option = DecodeOption(engine, batch, step, recompute, asyn,
                                          inf.single_stream_seconds(engine, ro))
        options.append(option)
    return DecodeCurve(part.runs, part.run_sequences, synchronous, ro, tuple(options))


def is_high_precision(precision: str) -> bool:
    return precision in HIGH_PRECISIONS


@dataclass(frozen=True)
class CalibrationUse:
    phase: str
    gpu: str
    precision: str
    measured: float
    modelled: float

    @property
    def factor(self) -> float:
        return self.measured / self.modelled if self.modelled > 0 else 1.0


@dataclass(frozen=True)
class Timing:
    """A phase on one (GPU, precision) as a function of its pool."""

    linear_gpu_seconds: float
    """Work that scales with GPUs: prefill, scoring, training, plus fallback shares."""
    curves: tuple[DecodeCurve, ...]
    floor_seconds: float
    replica_gpus: int
    scale: float = 1.0
    train: tuple[tuple[float, tr.LayoutCurve], ...] = ()
    """Training work: (tokens, the layout curve that runs them at each pool size)."""
    gpus_per_node: int = 8
    prefill_gpu_seconds: float = 0.0
    """Prompt prefill of generation phases: chunked prefill (on in vLLM V1 and veRL) runs it
    inside the decode iterations, whose compute is idle while they are bound by memory, so a
    step takes the longer of its decode and its prefill, not their sum."""
    """Time multiplier from calibration (modelled ÷ measured throughput)."""

    def busy_seconds(self, gpus: np.ndarray | float, replica_gpus: int | None = None
                     ) -> np.ndarray:
        """Busy seconds on ``gpus`` GPUs (whole replicas of ``replica_gpus``)."""
        g = np.maximum(np.asarray(gpus, dtype=float), 1e-9)
        t = self.linear_gpu_seconds / g
        for tokens, curve in self.train:
            t = t + tokens * curve.seconds_per_token(g) / g
        decode = np.zeros_like(g)
        for c in self.curves:
            decode = decode + c.seconds(g)
        t = t + np.maximum(decode, self.prefill_gpu_seconds / g)
        return np.maximum(t, self.floor_seconds) * self.scale

    def reference_gpus(self) -> float:
        """GPUs at which the phase is reported by ``estimate``: every decode replica full; a
        training phase on at least one whole node (its smallest replica may be an offloaded
        layout no one would run on a larger pool); else the smallest replica."""
        ref = float(self.replica_gpus)
        if self.train:
            ref = max(ref, float(self.gpus_per_node))
        for c in self.curves:
            ref = max(ref, c.reference_replicas() * c.engine.gpus)
        return ref

    def gpu_hours_at(self, gpus: float) -> float:
        return float(self.busy_seconds(gpus)) * gpus / 3600.0


@dataclass(frozen=True)
class PhaseCell:
    """A phase on one (GPU, precision): fit, replica, memory, and its :class:`Timing`."""

    phase: str
    gpu: str
    precision: str
    fits: bool
    gpu_hours: float
    """Busy GPU-hours at the reference pool (every decode replica full)."""
    replica_gpus: int
    memory_gb_per_gpu: float
    calibrated: bool
    reason: str = ""
    cells: tuple[tuple[str, Cell], ...] = ()
    timing: Timing | None = None
    calibration: CalibrationUse | None = None
    layout: dict[str, int | bool] | None = None
    layout_multinode: dict[str, int | bool] | None = None
    notes: tuple[str, ...] = field(default=())


def _fallback_cell(part: Part, gpu: GPU, spec: ProjectSpec, replica_gpus: int,
                   cond: Conditions) -> tuple[str, Cell] | None:
    """The fastest fitting cell of ``part`` at bf16 or better (fp16/fp32 where no bf16)."""
    best: tuple[str, Cell] | None = None
    for q in ("bf16", "fp16", "fp32"):
        if gpu.supports(q):
            c = cell(part, gpu, q, spec, replica_gpus, cond)
            if c.fits and (best is None or
                           c.tokens_per_second_per_gpu > best[1].tokens_per_second_per_gpu):
                best = (q, c)
    return best


def _uncalibrated(demand: Demand, phase: str, gpu: GPU, precision: str, replica_gpus: int,
                  fallback: dict[str, float] | None, cond: Conditions, synchronous: bool
                  ) -> PhaseCell:
    spec = demand.spec
    parts = demand.phase_parts(phase)
    cells: list[tuple[str, Cell]] = []
    linear = 0.0
    overlapped = 0.0
    train: list[tuple[float, tr.LayoutCurve]] = []
    floor = 0.0
    curves: list[DecodeCurve] = []
    layout = layout_multi = None
    for part in parts:
        c = cell(part, gpu, precision, spec, replica_gpus, cond)
        cells.append((part.name, c))
        if not c.fits:
            return PhaseCell(phase, gpu.name, precision, False, math.inf, 0, 0.0, False,
                             f"{phase}.{part.name}: {c.reason}", tuple(cells))
        if c.curve is not None and part.role == "policy":
            layout = c.layout.as_dict()
            big = c.curve.multi_node[-1][1].layout if c.curve.multi_node else None
            layout_multi = big.as_dict() if big is not None else None
        f = (fallback or {}).get(part.role, 0.0)
        if part.kind == "decode":
            curve = decode_curve(part, c, spec, synchronous, gpu, precision, cond)
            curves.append(curve)
            floor += curve.floor_seconds
            continue
        share = 1.0
        if f > 0 and not is_high_precision(precision):
            hp = _fallback_cell(part, gpu, spec, replica_gpus, cond)
            if hp is None:
                return PhaseCell(phase, gpu.name, precision, False, math.inf, 0, 0.0, False,
                                 f"{phase}.{part.name}: its high-precision fallback share needs "
                                 f"bf16 or better, which does not fit {gpu.name}", tuple(cells))
            cells.append((f"{part.name}@fallback", hp[1]))
            linear += f * part.tokens / hp[1].tokens_per_second_per_gpu
            share = 1.0 - f
        if c.curve is not None:
            train.append((share * part.tokens, c.curve))
        elif part.kind == "prefill":
            overlapped += share * part.tokens / c.tokens_per_second_per_gpu
        else:
            linear += share * part.tokens / c.tokens_per_second_per_gpu
        floor += _part_floor(demand, part, c)
    replica = max((c.replica_gpus for _, c in cells), default=1)
    memory = max((c.memory_gb_per_gpu for _, c in cells), default=0.0)
    timing = Timing(linear, tuple(curves), floor, replica, 1.0, tuple(train),
                    cond.gpus_per_node, overlapped)
    ref = timing.reference_gpus()
    return PhaseCell(phase, gpu.name, precision, True, timing.gpu_hours_at(ref), replica,
                     memory, False, cells=tuple(cells), timing=timing, layout=layout,
                     layout_multinode=layout_multi)


def _part_floor(demand: Demand, part: Part, c: Cell) -> float:
    """Sequential work inside each step: one longest sequence's forward (scoring) or, for each
    optimizer step, one longest micro-batch's forward + backward through the layout."""
    spec = demand.spec
    if part.kind == "train":
        inner = spec.update_epochs * (spec.data.mini_batches_per_step or 1) \
            if spec.method != "sft" else 1
        return demand.steps * inner * c.single_seconds
    if part.kind == "prefill":  # a run's prefill is spread over its batch: no floor
        return 0.0
    runs = demand.eval_runs if part.phase == "eval" else demand.steps
    return runs * part.longest / (c.tokens_per_second_per_gpu * c.replica_gpus)


def phase_cell(demand: Demand, phase: str, gpu: GPU, precision: str, replica_gpus: int = 0,
               fallback: dict[str, float] | None = None, cond: Conditions = Conditions(),
               synchronous: bool = True) -> PhaseCell:
    """Combine a phase's parts on one (GPU, precision), calibrated where measured.

    ``fallback`` maps a model role (``teacher``, ``reward``) to the share of its work that must
    run at bf16 or better."""
    pc = _uncalibrated(demand, phase, gpu, precision, replica_gpus, fallback, cond, synchronous)
    if not pc.fits or pc.timing is None:
        return pc
    entries = [c for c in demand.spec.calibration if c.phase == phase and c.gpu == gpu.name]
    if not entries:
        return pc
    tokens = demand.primary_tokens(phase)

    def modelled_tps(cell_: PhaseCell) -> float:
        return tokens / (cell_.gpu_hours * 3600.0) if cell_.gpu_hours > 0 else 0.0

    factors: list[tuple[float, CalibrationUse]] = []
    for e in entries:
        other = pc if e.precision == precision else _uncalibrated(
            demand, phase, gpu, e.precision, replica_gpus, fallback, cond, synchronous)
        if not other.fits:
            continue
        use = CalibrationUse(phase, gpu.name, e.precision, e.tokens_per_second_per_gpu,
                             modelled_tps(other))
        factors.append((use.factor, use))
    if not factors:
        return pc
    exact = [u for _, u in factors if u.precision == precision]
    use = exact[0] if exact else min(factors, key=lambda x: x[0])[1]
    timing = replace(pc.timing, scale=1.0 / use.factor)
    return PhaseCell(pc.phase, pc.gpu, pc.precision, True,
                     timing.gpu_hours_at(timing.reference_gpus()), pc.replica_gpus,
                     pc.memory_gb_per_gpu, True, cells=pc.cells, timing=timing,
                     calibration=use, layout=pc.layout, layout_multinode=pc.layout_multinode)


def default_precision(gpu: GPU, phase: str) -> str | None:
    """bf16 where supported, else fp16, else fp32 (the estimate's default)."""
    for p in ("bf16", "fp16", "fp32"):
        if gpu.supports(p) and p in precision_options(phase):
            return p
    return None
