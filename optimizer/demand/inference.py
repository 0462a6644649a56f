"""Generation as an inference engine runs it (vLLM/SGLang under veRL, OpenRLHF, NeMo RL).

One engine replica holds the weights on ``g`` GPUs (tensor parallel) and decodes a batch of
sequences one token per *iteration*. One iteration of batch b at mean context c costs::

    t_iter(b, c) = max(t_mem, t_cmp) + t_fixed + t_tp
    t_mem = (W + b·c·kv) / (g·BW·MBU)                    weights and KV cache read once
    t_cmp = b·2N / (g·peak_q·eff) + b·4·L·H·Q·c / (g·peak_16·eff)   GEMMs at the weight precision,
                                                           attention at 16 bit
    t_fixed = decode_step_overhead_ms (+ eager launches: L × eager_launch_us_per_layer,
              unset: EAGER_LAUNCH_US of a dense or an MoE layer)
    t_tp = 2·L·allreduce latency (tp > 1; the inter-node figure when the replica spans nodes)

How a synchronous step runs (``step_seconds``): n = sequences per replica. If the engine can
hold them all (n ≤ B, B = min(engine cap, KV capacity)), every sequence starts together and the
batch *drains*: at iteration j, b_j = max(n·S(j), 1) sequences are still generating (S the
response-length survival), until the step's longest response ends. Otherwise the engine runs
saturated at B (context: prompt + the length-biased mean age E[L²]/2E[L]) until the queue
empties, then drains the B sequences in flight, whose remaining lengths follow the equilibrium
residual distribution. When the KV cache cannot hold the batch that the prompts let in,
vLLM preempts and later re-prefills: the recomputed tokens are added as prefill work.

Asynchronous (one step off-policy) layouts overlap the drain with training: their rollout is
the saturated throughput, floored by generating the longest response at batch 1.
Sources for each term: docs/demand-model.md §4. The step arithmetic (drains, the saturated
regime, static batches, asynchronous throughput) is in :mod:`ptplan.demand.steps`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ptplan.core.hardware import GPU
from ptplan.demand.lengths import LengthDist
from ptplan.spec.efficiency import EAGER_LAUNCH_US
from ptplan.spec.project import Efficiency, ModelBlock

GB = 1e9
GRID = 192
"""Decode iterations are integrated on this many points (trapezoid) per drain."""


@dataclass(frozen=True)
class Engine:
    """One inference replica on one GPU type at one precision."""

    gpu: GPU
    precision: str
    gpus: int
    weights_bytes: float
    kv_bytes_per_token: float
    kv_capacity_tokens: float
    batch_cap: int
    """The engine's max concurrent sequences (``max_num_seqs``)."""
    spans_nodes: bool
    model: ModelBlock
    eff: Efficiency

    def iteration_seconds(self, batch: np.ndarray | float, context: np.ndarray | float
                          ) -> np.ndarray:
        b = np.asarray(batch, dtype=float)
        c = np.asarray(context, dtype=float)
        m, eff, gpu = self.model, self.eff, self.gpu
        bw = self.gpus * gpu.mem_bw_tbps * 1e12 * eff.decode_mbu
        t_mem = (self.weights_bytes + b * c * self.kv_bytes_per_token) / bw
        peak_q = gpu.peak_tflops[self.precision] * 1e12
        peak_16 = gpu.peak_tflops.get("bf16", gpu.peak_tflops.get("fp16", peak_q / 1e12)) * 1e12
        dense = b * 2.0 * m.active_b * 1e9 * moe_straggler_factor(m, eff) \
            / (self.gpus * peak_q * eff.decode_compute_efficiency)
        attn = b * 4.0 * m.layers * m.query_heads * m.head_dim * c \
            / (self.gpus * peak_16 * eff.decode_compute_efficiency) if eff.attention_flops else 0.0
        return np.maximum(t_mem, dense + attn) + self.fixed_seconds + self.tp_traffic_seconds(b)

    def tp_traffic_seconds(self, batch: np.ndarray) -> np.ndarray:
        """Tensor-parallel all-reduce bytes: two per layer of b·h·2 B, ring 2(g−1)/g of it per
        GPU, over the scale-up link, or the network when the replica spans nodes (NCCL ring
        all-reduce; Megatron-LM, Shoeybi et al. 2019 §3). Latency is in ``fixed_seconds``."""
        if self.gpus <= 1:
            return np.zeros_like(batch)
        gpu, m = self.gpu, self.model
        link = (self.eff.internode_gb_per_s_per_gpu or gpu.scaleout_gb_per_s) if self.spans_nodes \
            else (gpu.scaleup_gb_per_s or self.eff.pcie_gb_per_s)
        per_gpu = 2.0 * m.layers * batch * m.hidden_size * 2.0 * 2.0 * (self.gpus - 1) / self.gpus
        return per_gpu / (link * 1e9)

    @property
    def fixed_seconds(self) -> float:
        eff, layers = self.eff, self.model.layers
        t = eff.decode_step_overhead_ms / 1e3
        if not eff.cuda_graphs:
            per_layer = eff.eager_launch_us_per_layer
            if per_layer is None:
                per_layer = EAGER_LAUNCH_US["moe" if self.model.is_moe else "dense"]
            t += layers * per_layer / 1e6
        if self.gpus > 1:
            lat = eff.tp_allreduce_us_inter_node if self.spans_nodes \
                else eff.tp_allreduce_us_intra_node
            t += 2.0 * layers * lat / 1e6
        return t

    def bound(self, batch: float, context: float) -> str:
        m, eff, gpu = self.model, self.eff, self.gpu
        bw = self.gpus * gpu.mem_bw_tbps * 1e12 * eff.decode_mbu
        t_mem = (self.weights_bytes + batch * context * self.kv_bytes_per_token) / bw
        peak_q = gpu.peak_tflops[self.precision] * 1e12
        t_cmp = batch * 2.0 * m.active_b * 1e9 \
            / (self.gpus * peak_q * eff.decode_compute_efficiency)
        return "memory-bandwidth" if t_mem >= t_cmp else "compute"


def kv_bytes_per_token(model: ModelBlock, kv_precision_bytes: float,
                       context: float | None = None) -> float:
    """K and V for every layer: 2·L·kv_heads·head_dim·bytes (kipply, Transformer Inference
    Arithmetic). MLA caches ``kv_latent_dim`` elements per layer instead (DeepSeek-V2 paper
    §2.1.2: d_c + d_h^R). A sliding-window layer keeps at most ``sliding_window`` tokens, so
    at a mean ``context`` longer than the window it costs window/context of a full layer per
    token (vLLM's hybrid KV cache manager allocates windowed layers that way)."""
    per_layer = model.kv_latent_dim if model.kv_latent_dim is not None \
        else 2.0 * model.kv_heads * model.head_dim
    layers = float(model.layers)
    if model.sliding_window is not None and model.sliding_window_layers and context:
        share = min(1.0, model.sliding_window / max(context, 1.0))
        layers -= model.sliding_window_layers * (1.0 - share)
    return layers * per_layer * kv_precision_bytes


def kv_replication(model: ModelBlock, tp: int) -> float:
    """Copies of each token's KV a tensor-parallel replica of ``tp`` GPUs stores (and reads).
    vLLM gives each rank max(1, kv_heads // tp) KV heads, so beyond tp = kv_heads every rank
    keeps a copy of a head (``ModelConfig.get_num_kv_heads``); MLA's latent is shared by all
    heads, so every rank keeps all of it (the KV duplication SGLang's DP attention removes:
    LMSYS, "SGLang v0.4", 2024-12-04)."""
    if tp <= 1:
        return 1.0
    if model.kv_latent_dim is not None:
        return float(tp)
    return max(1.0, tp / model.kv_heads)


@dataclass(frozen=True)
class Rollout:
    """One synchronous generation step's shape: sequences, prompt, lengths."""

    sequences: float
    """Generated sequences per step (prompts × samples × oversample)."""
    prompt_tokens: float
    lengths: LengthDist

    @property
    def longest(self) -> float:
        return self.lengths.longest(self.sequences)


def effective_batch(engine: Engine, ro: Rollout, static: bool = False) -> tuple[int, float]:
    """(concurrent sequences the replica sustains, sequences the prompts let in at once).

    vLLM admits a request while its prompt fits in free KV blocks; the cache then fills as the
    admitted sequences grow. The sustainable batch is the one whose peak KV demand fits:
    b · max_j S(j)·(P + j) ≤ capacity. In a saturated engine every slot holds a sequence of
    mean context P + E[L²]/2E[L]. ``static``: a static batch frees nothing before the call
    ends, and its engine reserves every row's cache to the cap: b · (P + cap) ≤ capacity."""
    cap = engine.kv_capacity_tokens
    if cap <= 0:
        return 0, 0.0
    L = ro.lengths
    if static:
        b = int(min(engine.batch_cap, cap / max(ro.prompt_tokens + L.cap, 1.0)))
        return b, float(b)
    j, surv, _ = L.decode_grid(0.0, float(L.cap), GRID)
    peak_fresh = float(np.max(surv * (ro.prompt_tokens + j)))
    sat_context = ro.prompt_tokens + L.mean_age
    by_kv = cap / max(peak_fresh, sat_context, 1.0)
    admitted = min(engine.batch_cap, cap / max(ro.prompt_tokens, 1.0))
    return int(min(engine.batch_cap, by_kv)), admitted


def replica_gpus_for(weights: float, usable_per_gpu: float, headroom: float,
                     max_gpus: int) -> int:
    """Smallest power of two whose HBM holds the weights with ``headroom`` left for KV."""
    g = 1
    while g * usable_per_gpu * (1 - headroom) < weights and g <= max_gpus:
        g *= 2
    return g


def prefill_seconds_per_token(model: ModelBlock, gpu: GPU, precision: str, gpus: int,
                              eff: Efficiency, seq: float, efficiency: float | None = None
                              ) -> float:
    """Prefill (and forward scoring) is compute-bound: (2N + 4·L·H·Q·T) per token at
    ``prefill_efficiency`` of peak, low precision speeding up only the GEMM share."""
    flops = 2.0 * model.active_b * 1e9
    attn = 4.0 * model.layers * model.query_heads * model.head_dim * seq \
        if eff.attention_flops else 0.0
    return (flops * moe_straggler_factor(model, eff) + attn) \
        * precision_time_factor(gpu, precision, eff) \
        / (gpus * reference_peak(gpu) * (efficiency or eff.prefill_efficiency))


def routed_share(model: ModelBlock) -> float:
    """Share of an MoE model's active parameters outside attention (the routed and shared
    experts, plus embeddings: an upper bound on the routed share). Attention per layer:
    q and o projections h·H·Q each, k and v h·K·Q each."""
    if not model.is_moe:
        return 0.0
    attn = model.layers * model.hidden_size * model.head_dim \
        * (2.0 * model.query_heads + 2.0 * model.kv_heads)
    return max(0.0, min(1.0, 1.0 - attn / (model.active_b * 1e9)))


def moe_straggler_factor(model: ModelBlock, eff: Efficiency) -> float:
    """Expert-parallel straggler: each MoE layer waits for the rank with the most routed tokens,
    so the expert share of compute takes ``moe_load_imbalance`` (max ÷ mean tokens per rank)
    times its balanced time (docs/demand-model.md §3.12). 1 for dense models."""
    share = routed_share(model)
    return 1.0 + share * (eff.moe_load_imbalance - 1.0) if share else 1.0


def reference_precision(gpu: GPU) -> str:
    """The 16-bit format efficiencies are quoted at: bf16, else fp16, else fp32."""
    for q in ("bf16", "fp16", "fp32"):
        if gpu.supports(q):
            return q
    return next(iter(gpu.peak_tflops))


def reference_peak(gpu: GPU) -> float:
    return gpu.peak_tflops[reference_precision(gpu)] * 1e12


REFERENCE_OPS_PER_BYTE = 989.4e12 / 3.35e12
"""H100 SXM: dense bf16 FLOP/s per byte/s of HBM (gpu_specs.csv). The efficiencies of compute-bound
work (``train_mfu``, ``rl_train_mfu``, ``prefill_efficiency``) are quoted on H100-class GPUs."""


def roofline_ratio(gpu: GPU) -> float:
    """The GPU's ops:byte ratio against the H100 reference: < 1 on bandwidth-rich, compute-poor
    parts (H20 0.13, A100 0.52, H200 0.70), > 1 on bandwidth-poor ones (L4 1.36)."""
    return reference_peak(gpu) / (gpu.mem_bw_tbps * 1e12) / REFERENCE_OPS_PER_BYTE


def precision_time_factor(gpu: GPU, precision: str, eff: Efficiency) -> float:
    """Compute-bound time at ``precision`` on ``gpu``, relative to FLOPs / (16-bit peak × the
    quoted efficiency), by the roofline of each share (docs/demand-model.md §3.6, §3.12):

    * the GEMM share ``gemm_time_share`` runs at the precision's peak (Amdahl: norms, softmax,
      element-wise ops, quantisation and communication do not; fp8 measured ~1.4× not 2×:
      Megatron-LM #396);
    * the rest is memory-bound (element-wise kernels, norms, optimizer and attention softmax
      read and write activations): its time scales with HBM bandwidth, not with peak FLOP/s,
      so it is ``roofline_ratio`` times its H100 share of the FLOPs-based time."""
    ratio = reference_peak(gpu) / (gpu.peak_tflops[precision] * 1e12)
    s = eff.gemm_time_share
    return s * ratio + (1.0 - s) * roofline_ratio(gpu)


def ceil_div(a: float, b: float) -> int:
    return math.ceil(a / b - 1e-9)
