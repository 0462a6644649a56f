"""How fast each part runs on one GPU type at one precision, and a phase's time as a function
of the pool that runs it.

* decode parts run on an inference engine (:mod:`ptplan.demand.inference`): their step time
  depends on how many sequences each replica serves, so a phase with decode work carries a
  :class:`DecodeCurve` (seconds per run as a function of replicas) besides its linear work;
* prefill and forward (scoring) parts are compute-bound and linear in tokens;
* training parts run in the fastest parallel layout that fits
  (:mod:`ptplan.demand.training`).

Calibration binds (:func:`calibration_factor`): a measured (phase, GPU, precision) throughput
rescales the model of that phase on that GPU at *every* precision by measured ÷ modelled, so no
uncalibrated precision can look faster than the measurement allows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from ptplan.core import fit
from ptplan.core.hardware import BYTES_PER_PARAM, GPU, HIGH_PRECISIONS, PRECISIONS
from ptplan.demand import inference as inf
from ptplan.demand import training as tr
from ptplan.demand.decode import (
    Conditions,
    DecodeCurve,
    decode_curve,
    decode_engine,
    head_split,
    rollout_batch,
    rollout_of,
    usable_bytes,
)
from ptplan.demand.model import (
    GB,
    KV_HEADROOM,
    MAX_REPLICA_GPUS,
    TRAIN_PRECISIONS,
    TRAINING_ENGINE_FORWARDS,
    Cell,
    Demand,
    Part,
    lora_params,
    scoring_on_trainer,
)
from ptplan.spec.project import ProjectSpec


def precision_options(phase: str) -> tuple[str, ...]:
    return TRAIN_PRECISIONS if phase == "update" else PRECISIONS


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
    params = (4.0 if part.lora_rank else 6.0) * m.active_b * 1e9
    slot = float(part.longest if eff.sequence_packing else part.seq_tokens)
    return tr.TrainJob(m, part.flops_per_token, wg, opt, part.longest, per_opt, mfu,
                       micro_sequence_tokens=slot, param_flops_per_token=params)


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
    eff = tr.train_efficiency(spec)
    usable = usable_bytes(gpu, spec)
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
        if part.role == "teacher" and not replica_gpus and not (  # a vLLM server (§4.6)
                g := head_split(part.model, need, MAX_REPLICA_GPUS)):
            return Cell(False, reason=f"no teacher engine of {need} to {MAX_REPLICA_GPUS} GPUs "
                                      "splits its attention heads evenly")
        spt = inf.prefill_seconds_per_token(part.model, gpu, precision, 1, eff, part.seq_tokens,
                                            _forward_efficiency(part, spec))
        return Cell(True, 1.0 / spt, g, weights / g / GB, 0, "compute")
    engine = decode_engine(part, gpu, precision, spec, replica_gpus, cond)
    if isinstance(engine, str):
        return Cell(False, reason=engine)
    pinned = spec.efficiency.rollout_tp
    if pinned and not replica_gpus and engine.kv_capacity_tokens <= 0:
        return Cell(False, reason=f"efficiency.rollout_tp {pinned}: {part.model.params_b:g}B "
                                  f"weights at {precision} leave no KV cache on {pinned} x "
                                  f"{gpu.name}; raise rollout_tp or remove it")
    ro = rollout_of(part)
    batch, _, _ = rollout_batch(engine, part, spec)
    if batch < 1:
        return Cell(False, reason=f"no room for one {ro.prompt_tokens + part.lengths.cap:.0f}"  # type: ignore[union-attr]
                                  f"-token sequence's KV cache on {engine.gpus} x {gpu.name}")
    ctx = ro.prompt_tokens + ro.lengths.mean_age
    t = float(engine.iteration_seconds(batch, ctx))
    mem = (weights + batch * ctx * engine.kv_bytes_per_token) / engine.gpus / GB
    return Cell(True, batch / t / engine.gpus, engine.gpus, mem, batch,
                engine.bound(batch, ctx), engine=engine)


def _forward_efficiency(part: Part, spec: ProjectSpec) -> float | None:
    """Log-probs and values computed by the training engine run at its model-FLOPs utilisation
    (veRL's 7B DAPO table: old_log_prob 108 s against update_actor 270 s for 2N against 6N FLOPs
    per token, i.e. forward efficiency ≈ 0.8 x the update's); rollout prefill and teacher
    scoring in an inference server run at ``prefill_efficiency``."""
    if part.name in TRAINING_ENGINE_FORWARDS:
        return spec.efficiency.train_mfu if spec.method == "sft" else spec.efficiency.rl_train_mfu
    return None


def _colocated_state_cap(gpu: GPU, spec: ProjectSpec) -> float:
    """Bytes per GPU left for training state while the rollout engine holds its share."""
    eff = spec.efficiency
    return gpu.memory_gb * GB * max(0.0, eff.gpu_memory_utilization
                                    - eff.colocated_rollout_memory_fraction)


@dataclass(frozen=True)
class CalibrationUse:
    phase: str
    gpu: str
    precision: str
    measured: float
    modelled: float
    runs: tuple[str, ...] = ()
    """Ledger runs the measurement comes from (``calibration[].runs``)."""

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
    """Time multiplier from calibration (modelled ÷ measured throughput)."""
    train: tuple[tuple[float, tr.LayoutCurve], ...] = ()
    """Training work: (tokens, the layout curve that runs them at each pool size)."""
    gpus_per_node: int = 8
    prefill_gpu_seconds: float = 0.0
    """Prompt prefill of generation phases: chunked prefill (on in vLLM V1 and veRL) runs it
    inside the decode iterations, whose compute is idle while they are bound by memory, so a
    step takes the longer of its decode and its prefill, not their sum."""
    fixed_seconds: float = 0.0
    """Wall seconds whatever the pool: the framework's per-step time outside the modelled
    phases (:func:`ptplan.core.fit.step_overhead`), carried by the update."""

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
        return np.maximum(t, self.floor_seconds) * self.scale + self.fixed_seconds

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
        if f > 0 and precision not in HIGH_PRECISIONS:
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
    fitted = fit.phase_factor(phase, fit.fit_method(spec.method, spec.efficiency.train_backend),
                              spec.efficiency.model_fields_set,
                              spec.efficiency.param_offload,
                              scoring_on_trainer(phase, parts, cond.with_trainer))
    fixed = demand.steps * fit.step_overhead(spec.method) if phase == "update" else 0.0
    timing = Timing(linear, tuple(curves), floor, replica, 1.0 / fitted, tuple(train),
                    cond.gpus_per_node, overlapped, fixed)
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
        return demand.steps * inner * c.single_seconds / _sequence_parallel(part, c, spec)
    if part.kind == "prefill":  # a run's prefill is spread over its batch: no floor
        return 0.0
    runs = demand.eval_runs if part.phase == "eval" else demand.steps
    return runs * part.longest / (c.tokens_per_second_per_gpu * c.replica_gpus)


def _sequence_parallel(part: Part, c: Cell, spec: ProjectSpec) -> int:
    """Ranks a longest sequence is split over in the update's floor. RL frameworks shard long
    sequences over sequence-parallel ranks of a node (veRL ``ulysses_sequence_parallel_size``,
    Megatron context parallel; veRL's 28K DAPO recipes run SP 4): the largest power of two
    ≤ 8 (one node), ≤ sequence ÷ 4,096 tokens, dividing the query heads, and at least the
    layout's own cp (its single-sequence time already counts that)."""
    layout_cp = c.layout.cp if c.layout is not None else 1
    sp = 1
    while (sp * 2 <= 8 and part.longest / (sp * 2) >= 4096
           and part.model.query_heads % (sp * 2) == 0):
        sp *= 2
    return max(1, sp // layout_cp) if sp > layout_cp else 1


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
        # a measurement covers the whole phase, the framework's per-step time included
        assert cell_.timing is not None
        bare = replace(cell_.timing, fixed_seconds=0.0)
        hours = bare.gpu_hours_at(bare.reference_gpus())
        return tokens / (hours * 3600.0) if hours > 0 else 0.0

    factors: list[tuple[float, CalibrationUse]] = []
    for e in entries:
        other = pc if e.precision == precision else _uncalibrated(
            demand, phase, gpu, e.precision, replica_gpus, fallback, cond, synchronous)
        if not other.fits:
            continue
        use = CalibrationUse(phase, gpu.name, e.precision, e.tokens_per_second_per_gpu,
                             modelled_tps(other), tuple(e.runs))
        factors.append((use.factor, use))
    if not factors:
        return pc
    exact = [u for _, u in factors if u.precision == precision]
    use = exact[0] if exact else min(factors, key=lambda x: x[0])[1]
    timing = replace(pc.timing, scale=pc.timing.scale / use.factor, fixed_seconds=0.0)
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
