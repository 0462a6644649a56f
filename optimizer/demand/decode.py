"""Generation phases on a pool: the engines a decode part may run on and its time as a
function of the pool's GPUs (:class:`DecodeCurve`). The engine arithmetic itself is in
:mod:`ptplan.demand.inference`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ptplan.core.hardware import BYTES_PER_PARAM, GPU
from ptplan.demand import agent as ag
from ptplan.demand import inference as inf
from ptplan.demand import steps as st
from ptplan.demand.model import GB, KV_HEADROOM, MAX_REPLICA_GPUS, Cell, Part
from ptplan.spec.project import ModelBlock, ProjectSpec

KV_16BIT = {"fp32": 4.0}
"""KV-cache bytes per element by weight precision when fp8 KV is not allowed: the model's own
16-bit dtype (vLLM ``kv_cache_dtype=auto``), fp32 for fp32 models."""


@dataclass(frozen=True)
class Conditions:
    """Where a phase runs: node size, colocation with training, fp8 KV allowed."""

    gpus_per_node: int = 8
    colocated: bool = False
    kv_fp8: bool = False
    with_trainer: bool = False
    """The phase shares its pool with the update (colocated, or scoring merged into the update
    pool): the training engine's forwards there run at its efficiency (core.fit.family)."""


def kv_element_bytes(precision: str, kv_fp8: bool) -> float:
    """fp8 KV only where allowed (policy) and the weights are quantised; else 16 bit."""
    if kv_fp8 and precision in ("fp8", "int8"):
        return 1.0
    return KV_16BIT.get(precision, 2.0)


def usable_bytes(gpu: GPU, spec: ProjectSpec) -> float:
    return gpu.memory_gb * GB * spec.efficiency.gpu_memory_utilization


def rollout_of(part: Part) -> inf.Rollout:
    assert part.lengths is not None
    return inf.Rollout(part.run_sequences, part.prompt_tokens, part.lengths)


def head_split(m: ModelBlock, lo: int, hi: int, node: int = 0) -> int:
    """The smallest engine size in [lo, hi] that vLLM can shard the model over
    (``ModelBlock.splits_tp``: the query heads split evenly, the KV heads split or replicate
    evenly); with ``node``, the largest that also tiles a node of that many GPUs; 0 if none."""
    if node:
        return next((d for d in range(hi, lo - 1, -1) if m.splits_tp(d) and node % d == 0), 0)
    return next((d for d in range(lo, hi + 1) if m.splits_tp(d)), 0)


def decode_engine(part: Part, gpu: GPU, precision: str, spec: ProjectSpec, replica_gpus: int,
                  cond: Conditions) -> inf.Engine | str:
    """The replica a decode part runs on, or why none fits. Colocated engines get
    ``colocated_rollout_memory_fraction`` of HBM (vLLM's gpu_memory_utilization is a share of
    the whole device); the training state kept beside them must fit the rest (the update's
    layout is chosen under that cap)."""
    eff, m = spec.efficiency, part.model
    weights = m.params_b * 1e9 * BYTES_PER_PARAM[precision]
    per_gpu = usable_bytes(gpu, spec)
    if cond.colocated:
        per_gpu = gpu.memory_gb * GB * eff.colocated_rollout_memory_fraction
    g = replica_gpus or eff.rollout_tp \
        or inf.replica_gpus_for(weights, per_gpu, KV_HEADROOM, MAX_REPLICA_GPUS)
    if g > MAX_REPLICA_GPUS:
        return (f"weights ({weights / GB:.0f} GB) and a KV cache need more than "
                f"{MAX_REPLICA_GPUS} GPUs per inference replica")
    if not replica_gpus and not eff.rollout_tp:
        split = head_split(m, g, MAX_REPLICA_GPUS)
        if not split:
            return (f"no engine of {g} to {MAX_REPLICA_GPUS} GPUs splits the model's "
                    f"{m.query_heads} attention heads ({m.kv_heads} KV heads) evenly, as vLLM "
                    "shards them")
        g = split
    context = part.prompt_tokens + (part.lengths.mean_age if part.lengths is not None else 0.0)
    kv_tok = inf.kv_bytes_per_token(m, kv_element_bytes(precision, cond.kv_fp8), context) \
        * inf.kv_replication(m, g)
    capacity = (g * per_gpu - weights) / kv_tok
    return inf.Engine(gpu, precision, g, weights, kv_tok, max(capacity, 0.0),
                      eff.max_batch_per_replica, g > cond.gpus_per_node, m, eff)



@dataclass(frozen=True)
class DecodeOption:
    """One engine size (tensor-parallel degree) for a phase's decode."""

    engine: inf.Engine
    batch: int
    step: st.StepModel | None
    recompute_seconds_per_token: float
    """Prefill seconds per token on one replica (preempted sequences are re-prefilled)."""
    asynchronous: st.AsyncModel | None = None
    floor: float = 0.0
    """The longest response generated alone on this engine (with ``agent:``, plus the
    slowest episode's tool waits and sandbox start-up)."""
    agent: ag.AgentEngine | None = None
    """Multi-turn rollouts: the agent loop on this engine (§4.8)."""

    def run_seconds(self, n: np.ndarray, rollout: inf.Rollout, synchronous: bool
                    ) -> np.ndarray:
        if synchronous and self.step is not None:
            t = self.step.seconds(n) + self.step.preempted(n) \
                * self.step.recompute_tokens_per_seq * self.recompute_seconds_per_token
        else:
            assert self.asynchronous is not None
            t = self.asynchronous.seconds(n)
        if self.agent is None:
            return t
        # fewer than one episode decoding on average: the engine idles between them
        stretch = 1.0 / self.agent.batch if self.agent.batch < 1.0 else 1.0
        t = t * stretch + np.asarray(n, dtype=float) * self.agent.reprefill_tokens \
            * self.recompute_seconds_per_token
        return np.maximum(t, self.floor) if not synchronous else t


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


def rollout_batch(engine: inf.Engine, part: Part, spec: ProjectSpec
                  ) -> tuple[int, float, ag.AgentEngine | None]:
    """(batch, admitted, agent loop): the engine's sustained batch, or with ``agent:`` the
    sequences its episodes keep decoding while their tools run (§4.8)."""
    ro = rollout_of(part)
    batch, admitted = inf.effective_batch(engine, ro,
                                          spec.efficiency.generation_batching == "static")
    if spec.agent is None or part.phase != "rollout" or batch < 1:
        return batch, admitted, None
    a = ag.agent_engine(engine, ro, spec.agent, batch, float(spec.data.prompt_tokens or 0),
                        spec.efficiency.prefix_caching)
    return max(1, int(a.batch)), admitted, a


def decode_curve(part: Part, c: Cell, spec: ProjectSpec, synchronous: bool,
                 gpu: GPU, precision: str, cond: Conditions) -> DecodeCurve:
    assert c.engine is not None
    ro = rollout_of(part)
    engines = [c.engine]
    # the smallest engine (most throughput per GPU) and the widest in the node (least latency per
    # token: what a drain-bound step needs). Sizes between are not tried: on the validation runs
    # they would shorten the AReaL 1.5B step by 11 % and DeepScaleR by 5 % (others <= 0.3 %), at
    # twice the planning cost; the model is conservative there
    # the largest engine within the node that splits the heads and tiles the node (28 heads on
    # 8 GPUs: 4; 12 heads: 4; 40 heads: 8)
    whole = head_split(part.model, c.engine.gpus + 1, min(cond.gpus_per_node, MAX_REPLICA_GPUS),
                       node=cond.gpus_per_node)
    pinned = spec.efficiency.rollout_tp is not None  # the spec's engine size, and only it
    if whole > c.engine.gpus and not pinned:
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
        batch, admitted, agent = rollout_batch(engine, part, spec)
        if batch < 1:
            continue
        static = spec.efficiency.generation_batching == "static"
        step = st.step_model(engine, ro, batch, admitted, static) if synchronous else None
        recompute = inf.prefill_seconds_per_token(part.model, engine.gpu, engine.precision,
                                                  engine.gpus, spec.efficiency,
                                                  ro.prompt_tokens + ro.lengths.mean_age)
        lag = spec.max_staleness_steps if part.phase == "rollout" else 1
        asyn = None if synchronous else st.async_model(engine, ro, batch, static, lag)
        # a response may span ``lag`` steps of an asynchronous rollout (max_staleness_steps)
        floor = (st.single_stream_seconds(engine, ro) + (agent.floor_seconds if agent else 0.0)) \
            / (1 if synchronous else lag)
        memo[key] = option = DecodeOption(engine, batch, step, recompute, asyn, floor, agent)
        options.append(option)
    return DecodeCurve(part.runs, part.run_sequences, synchronous, ro, tuple(options))
