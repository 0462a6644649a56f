"""The demand model: what each phase of a post-training job needs, per GPU type and precision.

Pure functions, no I/O, no solver. Notation: N = parameters (``active`` for FLOPs, total for
memory), D = tokens, L layers, H query heads, Q head dim, T sequence length.

Phases and their parts (a *step* is one rollout→update cycle; SFT steps are optimizer steps):

===========  =================================================================================
rollout      policy (student) generation: ``prefill`` 2N per prompt token, ``decode`` via the
             memory-bandwidth roofline (below), prompts × samples × oversample_factor sequences
scoring      forward passes of other models over prompt + response: ``reference`` (2N_policy),
             ``reward`` (2N_rm), ``teacher`` (2N_teacher, OPD: every token)
update       ``actor`` training 6N per token (4N LoRA), ``old_logprob`` forward 2N, PPO
             ``critic`` training and ``critic_values`` forward; training × update_epochs
eval         generation with the policy every ``eval.every_steps`` steps (same roofline)
checkpoint   write stalls: bytes = N × (2 + (adam_bytes_per_param − 4) with optimizer state)
             / write bandwidth
===========  =================================================================================

Formulas (sources in ``docs/demand-model.md``):

* Training FLOPs/token = 6N + 12·L·H·Q·T (PaLM App. B attention term; off with
  ``efficiency.attention_flops: false``), T the mean sequence; LoRA 4N + 12LHQT.
  Throughput/GPU = peak(precision) × MFU / model FLOPs per token. MFU is model-FLOPs
  utilisation as published (the recompute forward of full activation recomputation is one of
  the things that keep it below 1, so it is not counted again).
* Forward (scoring, prefill): 2N + 4LHQT per token at ``prefill_efficiency`` of peak.
* Decode, per replica of g GPUs with batch B and mean context S = prompt + response/2::

      t_step = max((W + B·S·kv) / (g·BW·MBU), 2·N_active·B / (g·peak·eff)),  tokens/s = B / t_step
      kv = 2·L·kv_heads·head_dim·bytes,  B ≤ (g·HBM·util − W) / (S·kv),  B ≤ max_batch_per_replica

  g is the smallest power of two whose HBM leaves ≥ 20 % for KV after weights. Synchronous
  pipelines wait for the longest response: decode time × ``tail_factor`` (not for async).
* Training memory: N × adam_bytes_per_param (16: bf16 weights + grads, fp32 master + Adam m, v)
  sharded over the replica (FSDP/ZeRO-3) plus activations per GPU (Korthikanti et al.): full
  recompute 2·s·b·h·L, selective s·b·h·L·34, none s·b·h·L·(34 + 5·a·s/h) bytes. LoRA: 2 bytes
  per frozen param + 16 per adapter param, adapter params ≈ 20·r·h·L (q,k,v,o,gate,up,down).
* Measured numbers beat formulas: a ``calibration`` entry (phase, GPU, precision) replaces the
  whole phase's throughput with the measured tokens/s per GPU (rollout/eval: generated tokens;
  scoring: scored tokens; update: trained tokens); memory fit still comes from the model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from optimizer.core.hardware import BYTES_PER_PARAM, GPU, HIGH_PRECISIONS, KV_BYTES, PRECISIONS
from optimizer.spec.project import ModelBlock, ProjectSpec

GB = 1e9
KV_HEADROOM = 0.2
"""Fraction of usable HBM that must stay free for the KV cache when sizing a decode replica."""
MAX_REPLICA_GPUS = 64
TRAIN_PRECISIONS = ("fp32", "bf16", "fp16", "fp8")
"""int8 is an inference format: no int8 training."""

PHASES: tuple[str, ...] = ("rollout", "scoring", "update", "eval", "checkpoint")


@dataclass(frozen=True)
class Part:
    """One piece of work inside a phase."""

    phase: str
    name: str
    role: str  # policy | reference | reward | teacher | critic
    kind: str  # train | forward | prefill | decode
    tokens: float
    model: ModelBlock
    seq_tokens: int
    """Mean sequence length (attention FLOPs term)."""
    context_tokens: float = 0.0
    """Decode: mean resident context per sequence S."""
    lora_rank: int | None = None
    attention: bool = True
    """Count the attention FLOPs term (``efficiency.attention_flops``)."""
    max_seq_tokens: int = 0
    """Longest sequence (activation memory, per-step latency); 0 means ``seq_tokens``."""

    @property
    def longest(self) -> int:
        return self.max_seq_tokens or self.seq_tokens

    @property
    def flops_per_token(self) -> float:
        """Model FLOPs per token (no recompute)."""
        n = self.model.active_b * 1e9
        att = self._attention(self.seq_tokens if self.kind != "decode" else self.context_tokens)
        if self.kind == "train":
            return (4.0 if self.lora_rank else 6.0) * n + 12.0 * att
        return 2.0 * n + 4.0 * att

    def _attention(self, seq: float) -> float:
        if not self.attention:
            return 0.0
        m = self.model
        return m.layers * m.query_heads * m.head_dim * seq

    @property
    def flops(self) -> float:
        return self.flops_per_token * self.tokens


@dataclass(frozen=True)
class Cell:
    """Throughput and memory of one part on one (GPU, precision)."""

    fits: bool
    tokens_per_second_per_gpu: float = 0.0
    replica_gpus: int = 0
    memory_gb_per_gpu: float = 0.0
    batch: int = 0
    bound: str = ""  # compute | memory-bandwidth | calibrated
    reason: str = ""

    @property
    def gpu_seconds(self) -> float:  # per token
        return 1.0 / self.tokens_per_second_per_gpu if self.tokens_per_second_per_gpu else math.inf


@dataclass(frozen=True)
class Demand:
    spec: ProjectSpec
    parts: tuple[Part, ...]
    checkpoints: int
    checkpoint_gb: float
    weight_sync_gb_per_step: float
    steps: int
    notes: tuple[str, ...] = field(default=())
    eval_runs: int = 0

    def phase_parts(self, phase: str) -> tuple[Part, ...]:
        return tuple(p for p in self.parts if p.phase == phase)

    @property
    def phases(self) -> tuple[str, ...]:
        present = {p.phase for p in self.parts}
        return tuple(p for p in PHASES if p in present)

    def primary_tokens(self, phase: str) -> float:
        """The phase's own token count (what calibration figures are per)."""
        parts = self.phase_parts(phase)
        if phase in ("rollout", "eval"):
            return sum(p.tokens for p in parts if p.kind == "decode")
        if phase == "update":
            return sum(p.tokens for p in parts if p.role == "policy" and p.kind == "train")
        return sum(p.tokens for p in parts)

    @property
    def checkpoint_stall_hours(self) -> float:
        bw = self.spec.efficiency.checkpoint_write_gb_per_s
        return self.checkpoints * self.checkpoint_gb / bw / 3600.0


# ---------------------------------------------------------------------------- building parts
def build_demand(spec: ProjectSpec) -> Demand:
    """All parts of the job with their token counts (pure arithmetic on the spec)."""
    parts: list[Part] = []
    policy = spec.model
    lora = spec.lora_rank if policy.finetune == "lora" else None
    d = spec.data
    eff = spec.efficiency
    notes: list[str] = []
    if spec.method == "sft":
        assert d.examples and d.tokens_per_example
        tokens = d.examples * d.tokens_per_example * spec.epochs
        parts.append(Part("update", "actor", "policy", "train", tokens, policy,
                          d.tokens_per_example, lora_rank=lora))
        steps = spec.total_steps
        prompt_default = 512
    else:
        assert d.steps and d.prompts_per_step and d.samples_per_prompt
        assert d.prompt_tokens and d.response_tokens
        steps = d.steps
        trained_seqs = d.steps * d.prompts_per_step * d.samples_per_prompt
        generated_seqs = trained_seqs * spec.oversample_factor
        seq = d.prompt_tokens + d.response_tokens
        max_seq = d.prompt_tokens + spec.max_response_tokens
        context = d.prompt_tokens + d.response_tokens / 2.0
        parts.append(Part("rollout", "prefill", "policy", "prefill",
                          generated_seqs * d.prompt_tokens, policy, d.prompt_tokens))
        parts.append(Part("rollout", "decode", "policy", "decode",
                          generated_seqs * d.response_tokens, policy, max_seq, context))
        if spec.uses_reference:
            parts.append(Part("scoring", "reference", "reference", "forward",
                              trained_seqs * seq, policy, seq, max_seq_tokens=max_seq))
        if spec.reward_model is not None:
            parts.append(Part("scoring", "reward", "reward", "forward",
                              generated_seqs * seq, spec.reward_model, seq,
                              max_seq_tokens=max_seq))
        if spec.teacher is not None:
            parts.append(Part("scoring", "teacher", "teacher", "forward",
                              trained_seqs * seq, spec.teacher, seq, max_seq_tokens=max_seq))
        epochs = spec.update_epochs
        if eff.recompute_old_logprobs:
            parts.append(Part("update", "old_logprob", "policy", "forward",
                              trained_seqs * seq, policy, seq, max_seq_tokens=max_seq))
        parts.append(Part("update", "actor", "policy", "train", trained_seqs * seq * epochs,
                          policy, seq, lora_rank=lora, max_seq_tokens=max_seq))
        critic = spec.critic_model
        if critic is not None:
            parts.append(Part("update", "critic_values", "critic", "forward",
                              trained_seqs * seq, critic, seq, max_seq_tokens=max_seq))
            parts.append(Part("update", "critic", "critic", "train", trained_seqs * seq * epochs,
                              critic, seq, max_seq_tokens=max_seq))
        prompt_default = d.prompt_tokens
    if spec.eval is not None:
        e = spec.eval
        runs = steps // e.every_steps
        if runs == 0:
            notes.append(f"eval.every_steps {e.every_steps} exceeds the {steps} steps: "
                         "no eval runs")
        else:
            seqs = runs * e.prompts * e.samples_per_prompt
            prompt = e.prompt_tokens or prompt_default
            parts.append(Part("eval", "prefill", "policy", "prefill", seqs * prompt, policy,
                              prompt))
            parts.append(Part("eval", "decode", "policy", "decode", seqs * e.response_tokens,
                              policy, prompt + e.response_tokens, prompt + e.response_tokens / 2))
    if not eff.attention_flops:
        parts = [replace(p, attention=False) for p in parts]
    n_ckpt = steps // spec.checkpoint_every_steps
    eval_runs = steps // spec.eval.every_steps if spec.eval is not None else 0
    return Demand(
        spec=spec,
        parts=tuple(parts),
        checkpoints=n_ckpt,
        checkpoint_gb=checkpoint_gb(spec),
        weight_sync_gb_per_step=policy.params_b * BYTES_PER_PARAM["bf16"],  # bf16 weights
        steps=steps,
        notes=tuple(notes),
        eval_runs=eval_runs,
    )


def lora_params(model: ModelBlock, rank: int) -> float:
    """Adapter parameters ≈ 20·r·h·L (r·(d_in+d_out) over q,k,v,o and gate,up,down)."""
    return 20.0 * rank * model.hidden_size * model.layers


def checkpoint_gb(spec: ProjectSpec) -> float:
    """One checkpoint's size in GB: bf16 weights plus, with ``with_optimizer``, the optimizer
    state (adam_bytes_per_param − 4: the fp32 master copy and Adam m, v; gradients are not
    saved). LoRA saves only the adapter; a PPO critic is always fully trained and saved."""
    per_param = 2.0
    if spec.checkpoints.with_optimizer:
        per_param += max(0.0, spec.efficiency.adam_bytes_per_param - 4.0)
    m = spec.model
    if m.finetune == "lora":
        total = lora_params(m, spec.lora_rank) * per_param
    else:
        total = m.params_b * 1e9 * per_param
    critic = spec.critic_model
    if critic is not None:
        total += critic.params_b * 1e9 * per_param
    return total / GB


# ---------------------------------------------------------------------------- per-cell model
def precision_options(phase: str) -> tuple[str, ...]:
    return TRAIN_PRECISIONS if phase == "update" else PRECISIONS


def _usable_bytes(gpu: GPU, spec: ProjectSpec) -> float:
    return gpu.memory_gb * GB * spec.efficiency.gpu_memory_utilization


def _peak(gpu: GPU, precision: str) -> float:
    return gpu.peak_tflops[precision] * 1e12


def _kv_bytes_per_token(model: ModelBlock, precision: str) -> float:
    return 2.0 * model.layers * model.kv_heads * model.head_dim * KV_BYTES[precision]


def train_memory(part: Part, precision: str, spec: ProjectSpec) -> tuple[float, float]:
    """(sharded state bytes for the whole replica, activation bytes per GPU)."""
    m = part.model
    eff = spec.efficiency
    n = m.params_b * 1e9
    if part.lora_rank:
        state = n * 2.0 + lora_params(m, part.lora_rank) * eff.adam_bytes_per_param
    else:
        state = n * eff.adam_bytes_per_param
    s, b, h, layers = part.longest, eff.micro_batch_size, m.hidden_size, m.layers
    act_scale = BYTES_PER_PARAM[precision] / 2.0  # formulas are for 16-bit activations
    if eff.activation_recompute == "full":
        act = 2.0 * s * b * h * layers
    elif eff.activation_recompute == "selective":
        act = s * b * h * layers * 34.0
    else:
        act = s * b * h * layers * (34.0 + 5.0 * m.query_heads * s / h)
    return state, act * max(act_scale, 0.5)


def cell(part: Part, gpu: GPU, precision: str, spec: ProjectSpec, replica_gpus: int = 0) -> Cell:
    """Throughput per GPU and memory fit of ``part`` on ``gpu`` at ``precision``.

    ``replica_gpus`` > 0 forces the replica size (used when a replica spans whole nodes).
    """
    if not gpu.supports(precision):
        return Cell(False, reason=f"{gpu.name} has no {precision} support")
    if part.kind == "train" and precision not in TRAIN_PRECISIONS:
        return Cell(False, reason=f"{precision} is an inference format; train in "
                                  f"{', '.join(TRAIN_PRECISIONS)}")
    eff = spec.efficiency
    usable = _usable_bytes(gpu, spec)
    peak = _peak(gpu, precision)
    if part.kind == "train":
        state, act = train_memory(part, precision, spec)
        if act >= usable:
            return Cell(False, reason=f"activations of one {part.longest}-token sequence "
                                      f"({act / GB:.1f} GB) exceed {gpu.name} usable HBM")
        need = max(1, math.ceil(state / (usable - act)))
        if replica_gpus and replica_gpus < need:
            return Cell(False, reason=f"training state needs {need} GPUs per replica; "
                                      f"{replica_gpus} given")
        g = replica_gpus or need
        # MFU counts model FLOPs (6N + attention): the recompute forward is part of what
        # lowers achieved MFU, as in the published figures the defaults come from.
        mfu = eff.train_mfu if spec.method == "sft" else eff.rl_train_mfu
        return Cell(True, peak * mfu / part.flops_per_token, g, (state / g + act) / GB,
                    eff.micro_batch_size, "compute")
    weights = part.model.params_b * 1e9 * BYTES_PER_PARAM[precision]
    if part.kind in ("forward", "prefill"):
        need = _pow2_at_least(weights / (usable * (1 - KV_HEADROOM)))
        if replica_gpus and replica_gpus * usable * (1 - KV_HEADROOM) < weights:
            shown = need if need <= MAX_REPLICA_GPUS else f"more than {MAX_REPLICA_GPUS}"
            return Cell(False, reason=f"weights need {shown} GPUs per replica; "
                                      f"{replica_gpus} given")
        g = replica_gpus or need
        if g > MAX_REPLICA_GPUS:
            return Cell(False, reason=f"weights need more than {MAX_REPLICA_GPUS} GPUs")
        tps = peak * eff.prefill_efficiency / part.flops_per_token
        return Cell(True, tps, g, weights / g / GB, 0, "compute")
    # decode
    kv_tok = _kv_bytes_per_token(part.model, precision)
    s = part.context_tokens
    g = replica_gpus or _pow2_at_least(weights / (usable * (1 - KV_HEADROOM)))
    while True:
        if g > MAX_REPLICA_GPUS:
            return Cell(False, reason=f"weights and one {s:.0f}-token KV cache need more than "
                                      f"{MAX_REPLICA_GPUS} GPUs")
        free = g * usable - weights
        batch = min(int(free // (s * kv_tok)) if free > 0 else 0, eff.max_batch_per_replica)
        if batch >= 1 or replica_gpus:
            break
        g *= 2
    if batch < 1:
        return Cell(False, reason="no room for one sequence's KV cache")
    bw = g * gpu.mem_bw_tbps * 1e12 * eff.decode_mbu
    t_mem = (weights + batch * s * kv_tok) / bw
    t_cmp = batch * part.flops_per_token / (g * peak * eff.decode_compute_efficiency)
    t_step = max(t_mem, t_cmp)
    bound = "memory-bandwidth" if t_mem >= t_cmp else "compute"
    return Cell(True, batch / t_step / g, g, (weights + batch * s * kv_tok) / g / GB, batch, bound)


def _pow2_at_least(x: float) -> int:
    """Smallest power of two >= x, capped at 2 x MAX_REPLICA_GPUS (x may be inf: no hang)."""
    g = 1
    while g < x and g <= MAX_REPLICA_GPUS:
        g *= 2
    return g


def calibrated_rate(spec: ProjectSpec, phase: str, gpu: str, precision: str) -> float | None:
    for c in spec.calibration:
        if c.phase == phase and c.gpu == gpu and c.precision == precision:
            return c.tokens_per_second_per_gpu
    return None


@dataclass(frozen=True)
class PhaseCell:
    """A phase on one (GPU, precision): GPU-seconds, memory fit and the parts' cells."""

    phase: str
    gpu: str
    precision: str
    fits: bool
    gpu_hours: float
    """Busy GPU-hours without tail factor or spot overhead."""
    decode_gpu_hours: float
    """The part of ``gpu_hours`` that a synchronous tail factor inflates."""
    replica_gpus: int
    memory_gb_per_gpu: float
    calibrated: bool
    reason: str = ""
    cells: tuple[tuple[str, Cell], ...] = ()


def _fallback_cell(part: Part, gpu: GPU, spec: ProjectSpec, replica_gpus: int) -> Cell | None:
    """The fastest fitting cell of ``part`` at bf16 or better (fp16/fp32 where no bf16)."""
    best: Cell | None = None
    for q in ("bf16", "fp16", "fp32"):
        if gpu.supports(q):
            c = cell(part, gpu, q, spec, replica_gpus)
            if c.fits and (best is None or
                           c.tokens_per_second_per_gpu > best.tokens_per_second_per_gpu):
                best = c
    return best


def phase_cell(demand: Demand, phase: str, gpu: GPU, precision: str,
               replica_gpus: int = 0, fallback: dict[str, float] | None = None) -> PhaseCell:
    """Combine a phase's parts on one (GPU, precision). Replica = the largest part replica.

    ``fallback`` maps a model role (``teacher``, ``reward``) to the share of its work that must
    run at bf16 or better: below-bf16 cells of that part take (1 − f) of the tokens at
    ``precision`` and f at the fastest high precision that fits."""
    spec = demand.spec
    parts = demand.phase_parts(phase)
    cells: list[tuple[str, Cell]] = []
    shares: list[tuple[float, Cell | None]] = []
    for part in parts:
        c = cell(part, gpu, precision, spec, replica_gpus)
        cells.append((part.name, c))
        if not c.fits:
            return PhaseCell(phase, gpu.name, precision, False, math.inf, 0.0, 0, 0.0, False,
                             f"{phase}.{part.name}: {c.reason}", tuple(cells))
        f = (fallback or {}).get(part.role, 0.0)
        if f > 0 and not is_high_precision(precision):
            hp = _fallback_cell(part, gpu, spec, replica_gpus)
            if hp is None:
                return PhaseCell(phase, gpu.name, precision, False, math.inf, 0.0, 0, 0.0,
                                 False, f"{phase}.{part.name}: its high-precision fallback "
                                 f"share needs bf16 or better, which does not fit {gpu.name}",
                                 tuple(cells))
            shares.append((f, hp))
            cells.append((f"{part.name}@fallback", hp))
        else:
            shares.append((0.0, None))
    replica = max((c.replica_gpus for _, c in cells), default=1)
    memory = max((c.memory_gb_per_gpu for _, c in cells), default=0.0)
    measured = calibrated_rate(spec, phase, gpu.name, precision)
    if measured is not None:
        hours = demand.primary_tokens(phase) / measured / 3600.0
        decode = hours if phase in ("rollout", "eval") else 0.0
        return PhaseCell(phase, gpu.name, precision, True, hours, decode, replica, memory, True,
                         cells=tuple(cells))
    hours = 0.0
    decode = 0.0
    main_cells = [c for name, c in cells if not name.endswith("@fallback")]
    for part, c, (f, hp) in zip(parts, main_cells, shares, strict=True):
        h = (1.0 - f) * part.tokens / c.tokens_per_second_per_gpu / 3600.0
        if hp is not None:
            h += f * part.tokens / hp.tokens_per_second_per_gpu / 3600.0
        hours += h
        if part.kind == "decode":
            decode += h
    return PhaseCell(phase, gpu.name, precision, True, hours, decode, replica, memory, False,
                     cells=tuple(cells))


def latency_floor_hours(demand: Demand, phase: str, gpu: GPU, precision: str,
                        replica_gpus: int = 0) -> float:
    """The least time a phase can take however many nodes it gets: work inside a step is
    sequential.

    * rollout: each step waits for its longest response, generated token by token:
      steps × max_response_tokens × t_token, t_token = (W + S·kv) / (g·BW·MBU) (batch 1);
      eval: runs × eval.response_tokens × t_token.
    * scoring and update: each step needs at least one sequence's forward (and, for the
      update, forward + backward for each of update_epochs × mini_batches_per_step optimizer
      steps) on one replica.
    """
    spec = demand.spec
    eff = spec.efficiency
    parts = demand.phase_parts(phase)
    if not parts:
        return 0.0
    if phase in ("rollout", "eval"):
        decode = next(p for p in parts if p.kind == "decode")
        c = cell(decode, gpu, precision, spec, replica_gpus)
        if not c.fits:
            return math.inf
        g = c.replica_gpus
        weights = decode.model.params_b * 1e9 * BYTES_PER_PARAM[precision]
        kv = _kv_bytes_per_token(decode.model, precision) * decode.context_tokens
        t_token = (weights + kv) / (g * gpu.mem_bw_tbps * 1e12 * eff.decode_mbu)
        if phase == "rollout":
            runs, longest = demand.steps, spec.max_response_tokens
        else:
            assert spec.eval is not None
            runs, longest = demand.eval_runs, spec.eval.response_tokens
        return runs * longest * t_token / 3600.0
    seconds = 0.0
    inner = spec.update_epochs * (spec.data.mini_batches_per_step or 1) \
        if spec.method != "sft" else 1
    for part in parts:
        c = cell(part, gpu, precision, spec, replica_gpus)
        if not c.fits:
            return math.inf
        if part.kind == "train":
            seconds += inner * part.longest / c.tokens_per_second_per_gpu
        else:
            seconds += part.longest / (c.tokens_per_second_per_gpu * c.replica_gpus)
    return demand.steps * seconds / 3600.0


def default_precision(gpu: GPU, phase: str) -> str | None:
    """bf16 where supported, else fp16, else fp32 (the estimate's default)."""
    for p in ("bf16", "fp16", "fp32"):
        if gpu.supports(p) and p in precision_options(phase):
            return p
    return None


def is_high_precision(precision: str) -> bool:
    return precision in HIGH_PRECISIONS
