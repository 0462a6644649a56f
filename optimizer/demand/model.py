"""The demand model's parts: what each phase of a post-training job must process.

Pure arithmetic on the spec, no I/O. How fast each part runs on a GPU type at a precision is in
:mod:`ptplan.demand.cells` (inference engines: :mod:`ptplan.demand.inference`; training
layouts: :mod:`ptplan.demand.training`; response lengths: :mod:`ptplan.demand.lengths`).
Notation: N = parameters (``active`` for FLOPs, total for memory), D = tokens, L layers,
H query heads, Q head dim, T sequence length.

===========  =================================================================================
rollout      policy (student) generation: ``prefill`` 2N per prompt token (once per prompt with
             prefix caching, else once per sample), ``decode`` of prompts × samples ×
             oversample_factor sequences with the response-length distribution
scoring      forward passes of other models over prompt + response: ``reference`` (2N_policy),
             ``reward`` (2N_rm), ``teacher`` (2N_teacher, OPD: every token)
update       ``actor`` training 6N per token (4N LoRA), ``old_logprob`` forward 2N, PPO
             ``critic`` training and ``critic_values`` forward; training × update_epochs
eval         generation with the policy every ``eval.every_steps`` steps (fixed length)
checkpoint   write stalls: bytes = N × (2 + (adam_bytes_per_param − 4) with optimizer state)
             / write bandwidth
===========  =================================================================================

Training FLOPs/token = 6N + 12·L·H·Q·T (PaLM App. B); forward 2N + 4·L·H·Q·T. Sources for
every term: ``docs/demand-model.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from ptplan.core.hardware import BYTES_PER_PARAM
from ptplan.demand import agent as ag
from ptplan.demand import lengths as ld
from ptplan.demand.lengths import LengthDist
from ptplan.spec.frameworks import training_cap_eval
from ptplan.spec.project import ModelBlock, ProjectSpec, quantile_knots

GB = 1e9
KV_HEADROOM = 0.2
"""Fraction of usable HBM that must stay free for the KV cache when sizing a decode replica."""
MAX_REPLICA_GPUS = 64
"""Largest inference replica (vLLM TP64 is the largest published RL rollout replica: NeMo RL
DeepSeek-V3 DAPO); training replicas are bounded by ptplan.demand.training.MAX_TRAIN_GPUS."""
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
    lengths: LengthDist | None = None
    """Decode: the response-length distribution of one generation run."""
    run_sequences: float = 0.0
    """Decode: sequences generated together in one run (a rollout step, an eval run)."""
    runs: int = 0
    """Decode: synchronous runs (rollout steps, eval runs)."""
    prompt_tokens: float = 0.0
    """Decode: prompt tokens per sequence (context before the first generated token)."""

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


TRAINING_ENGINE_FORWARDS = frozenset({"reference", "old_logprob", "critic_values", "reward"})
"""Forward passes the RL frameworks run in the training engine (veRL's FSDP/Megatron workers,
OpenRLHF's DeepSpeed models), not in the inference server: they run at training efficiency."""


def scoring_on_trainer(phase: str, parts: tuple[Part, ...] | list[Part],
                       with_trainer: bool) -> bool:
    """Scoring is the training engine's forwards (reference, reward) on the trainer's own GPUs,
    so it runs at that engine's efficiency and takes the update's fitted factor; a teacher in an
    inference server keeps the scoring factor (evidence: docs/demand-model.md §3.12)."""
    return (with_trainer and phase == "scoring" and bool(parts)
            and all(p.name in TRAINING_ENGINE_FORWARDS for p in parts))


@dataclass(frozen=True)
class Cell:
    """Throughput and memory of one part on one (GPU, precision)."""

    fits: bool
    tokens_per_second_per_gpu: float = 0.0
    replica_gpus: int = 0
    memory_gb_per_gpu: float = 0.0
    batch: int = 0
    bound: str = ""  # compute | memory-bandwidth
    reason: str = ""
    layout: Any = None
    """Training parts: the :class:`ptplan.demand.training.Layout` chosen."""
    single_seconds: float = 0.0
    """Training parts: one longest micro-batch's forward + backward through the layout."""
    engine: Any = None
    """Decode parts: the :class:`ptplan.demand.inference.Engine` replica."""
    curve: Any = None
    """Training parts: the :class:`ptplan.demand.training.LayoutCurve` (the fastest layout
    at each pool size)."""

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
    memo: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False, hash=False)
    """Phase rates already computed for this demand (:func:`ptplan.demand.rates.phase_rates`
    is pure in its arguments; the planner asks for the same cells from several layouts)."""

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
    def weight_sync_streams(self) -> int:
        """Parallel streams of the weight sync: the nodes that together hold one copy of the
        trained state (N_tot × adam_bytes_per_param over nodes of 8 × 80 GB × 0.9) each send
        their own shard to the engines over their own NICs (NeMo RL and veRL's Megatron
        refit gather per model-parallel rank; a one-node trainer is one stream). OpenRLHF's
        broadcast from rank 0 is one stream: set ``weight_sync_gb_per_s`` for it."""
        state = self.spec.model.params_b * 1e9 * self.spec.efficiency.adam_bytes_per_param
        return max(1, math.ceil(state / (8 * 80e9 * 0.9) - 1e-9))

    @property
    def weight_sync_seconds(self) -> float:
        """Seconds per step to send the trained weights to separate rollout engines."""
        return self.weight_sync_gb_per_step / (self.spec.efficiency.weight_sync_gb_per_s
                                               * self.weight_sync_streams)

    @property
    def refit_seconds(self) -> float:
        """Seconds per step to refit the trained weights into engines on the trainer's own GPUs
        (colocated): the same bf16 volume at ``colocated_refit_gb_per_s``, one stream."""
        return self.weight_sync_gb_per_step / self.spec.efficiency.colocated_refit_gb_per_s

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
    elif spec.method == "generate":  # one offline batch: every prompt submitted at once
        assert d.prompts and d.samples_per_prompt and d.prompt_tokens and d.response_tokens
        steps = 1
        seqs = d.prompts * d.samples_per_prompt
        lengths = response_lengths(spec)
        parts.append(Part("rollout", "prefill", "policy", "prefill",
                          prefill_sequences(spec) * d.prompt_tokens, policy, d.prompt_tokens))
        parts.append(Part("rollout", "decode", "policy", "decode", seqs * d.response_tokens,
                          policy, d.prompt_tokens + spec.max_response_tokens,
                          d.prompt_tokens + lengths.mean_age, lengths=lengths,
                          run_sequences=seqs, runs=1, prompt_tokens=d.prompt_tokens))
        prompt_default = d.prompt_tokens
    else:
        assert d.steps and d.prompts_per_step and d.samples_per_prompt
        assert d.prompt_tokens and d.response_tokens
        steps = d.steps
        trained_seqs = d.steps * d.prompts_per_step * d.samples_per_prompt
        generated_seqs = trained_seqs * spec.oversample_factor
        # agent: the (K − 1)·o observation tokens are in every trained sequence; a decoding
        # turn sees half of them on average (§4.8)
        obs = spec.agent.observation_tokens if spec.agent is not None else 0
        max_seq = d.prompt_tokens + spec.max_response_tokens + obs
        # the sequence the scoring and training passes see: its own length, or the cap when the
        # framework pads every response to it (efficiency.pad_responses_to_cap)
        seq = max_seq if eff.pad_responses_to_cap else d.prompt_tokens + d.response_tokens + obs
        lengths = response_lengths(spec)
        prompt = d.prompt_tokens + obs / 2.0 if obs else d.prompt_tokens
        context = prompt + lengths.mean_age
        per_step = d.prompts_per_step * d.samples_per_prompt * spec.oversample_factor
        prefill = d.steps * prefill_sequences(spec) * d.prompt_tokens
        if obs:  # each observation is prefilled once when appended (re-prefill: decode.py)
            prefill += generated_seqs * obs
        parts.append(Part("rollout", "prefill", "policy", "prefill", prefill, policy,
                          d.prompt_tokens))
        parts.append(Part("rollout", "decode", "policy", "decode",
                          generated_seqs * d.response_tokens, policy, max_seq, context,
                          lengths=lengths, run_sequences=per_step, runs=d.steps,
                          prompt_tokens=prompt))
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
            mean, lengths, longest = eval_lengths(spec)
            parts.append(Part("eval", "decode", "policy", "decode", seqs * mean,
                              policy, prompt + mean, prompt + mean / 2,
                              max_seq_tokens=prompt + longest if longest > mean else 0,
                              lengths=lengths, run_sequences=e.prompts * e.samples_per_prompt,
                              runs=runs, prompt_tokens=prompt))
    if not eff.attention_flops:
        parts = [replace(p, attention=False) for p in parts]
    n_ckpt = steps // spec.checkpoint_every_steps if spec.trains else 0
    eval_runs = steps // spec.eval.every_steps if spec.eval is not None else 0
    return Demand(
        spec=spec,
        parts=tuple(parts),
        checkpoints=n_ckpt,
        checkpoint_gb=checkpoint_gb(spec),
        # bf16 weights to the rollout engines after each update (none when nothing trains)
        weight_sync_gb_per_step=policy.params_b * BYTES_PER_PARAM["bf16"] if spec.trains else 0.0,
        steps=steps,
        notes=tuple(notes),
        eval_runs=eval_runs,
    )


def eval_lengths(spec: ProjectSpec) -> tuple[int, LengthDist, int]:
    """(mean response tokens, their distribution, the longest) of an eval run. Without a
    framework (``framework: any``) every eval response is ``eval.response_tokens`` long (a
    fixed budget). veRL 0.9 and OpenRLHF 0.11 validate with the training response cap
    (:attr:`ptplan.spec.frameworks.Release.eval_cap`): responses of mean
    ``eval.response_tokens`` stop at EOS or at ``data.max_response_tokens``, spread as the
    rollout's default shape (max-entropy below the cap)."""
    assert spec.eval is not None
    e = spec.eval
    if training_cap_eval(spec) is None:
        return e.response_tokens, ld.fixed(e.response_tokens), e.response_tokens
    cap = spec.max_response_tokens
    mean = min(e.response_tokens, cap)
    return mean, ld.max_entropy(mean, cap), cap


def response_lengths(spec: ProjectSpec) -> LengthDist:
    """The rollout's response-length distribution (:mod:`ptplan.demand.lengths`)."""
    d = spec.data
    mean, cap = float(d.response_tokens or 1), float(spec.max_response_tokens)
    r = d.response_length
    if r is None and spec.agent is not None:
        turns = ag.turns_dist(spec.agent)
        if turns is not None:  # an episode generates τ per turn: lengths = τ × turns
            tau = float(spec.agent.tokens_per_turn)
            return ld.scaled(turns, tau, min(cap, spec.agent.max_turns * tau))
    if r is not None and r.histogram:
        return ld.from_histogram([(float(t), float(s)) for t, s in r.histogram], cap)
    knots = quantile_knots(r, int(cap)) if r is not None else None
    if knots is not None:
        return ld.from_quantiles(knots, cap)
    return ld.with_truncation(mean, cap, r.truncated_share if r is not None else 0.0)


def prefill_sequences(spec: ProjectSpec) -> float:
    """Prompt prefills per step: with prefix caching the samples of one prompt share it (vLLM
    caches full 16-token blocks, so each further sample re-prefills at most the last partial
    block plus one block: (P mod 16) + 16 tokens); without it every sample prefills."""
    d = spec.data
    assert spec.prompts_per_run and d.samples_per_prompt and d.prompt_tokens
    groups = spec.prompts_per_run * spec.oversample_factor
    n = d.samples_per_prompt
    if not spec.efficiency.prefix_caching or n == 1:
        return groups * n
    tail = min(d.prompt_tokens, d.prompt_tokens % 16 + 16) / d.prompt_tokens
    return groups * (1.0 + (n - 1) * tail)


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


