"""A model's shape read from its Hugging Face ``config.json``: the fields of a spec's model
block, the parameter counts (embeddings and tied heads, MoE routed and shared experts, MLA
projections) and the architectural facts the demand model uses (GQA, MLA's compressed KV,
sliding-window layers, experts per token). No network access: the file is read as it is.

Parameter counts follow the modules ``transformers`` builds for each ``model_type`` (the
weights a checkpoint stores, biases and norms included); docs/models.md lists the formulas.
Multimodal configs (``text_config``) are counted for their language model: post-training
text jobs load the vision tower but it is a few hundred million parameters the card lists
apart."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ptplan.core.errors import InputError

DENSE = ("llama", "mistral", "qwen2", "qwen3", "phi3", "olmo2", "gemma", "gemma2",
         "gemma3_text", "internlm2", "granite", "smollm3")
MOE = ("mixtral", "qwen3_moe", "qwen2_moe", "deepseek_v2", "deepseek_v3", "phimoe")
KNOWN = (*DENSE, *MOE, "chatglm", "gemma3")
TIED_BY_DEFAULT = ("gemma", "gemma2", "gemma3_text", "gemma3")
"""``tie_word_embeddings`` when the file does not say: each ``transformers`` config class has
its own default (Gemma's is true; Llama's, Qwen's, Mistral's, Phi-3's, DeepSeek's false)."""


@dataclass(frozen=True)
class Shape:
    """What a ``config.json`` says about a model, in the units of a spec's model block."""

    architecture: str
    params: int
    active_params: int
    embedding_params: int
    layers: int
    hidden_size: int
    heads: int
    kv_heads: int
    head_dim: int
    experts: int | None
    experts_per_token: int | None
    kv_latent_dim: int | None
    sliding_window: int | None
    sliding_window_layers: int | None
    context_length: int | None
    vocab_size: int

    @property
    def is_moe(self) -> bool:
        return self.active_params < self.params

    def kv_elements_per_token(self) -> int:
        """K and V elements one token keeps in every layer's cache (full-attention layers;
        MLA: the compressed latent and the shared rope key)."""
        per_layer = self.kv_latent_dim if self.kv_latent_dim is not None \
            else 2 * self.kv_heads * self.head_dim
        return self.layers * per_layer

    @property
    def kv_bytes_per_token(self) -> int:
        """bf16 K and V of every layer at full context."""
        return self.kv_elements_per_token() * 2

    def block(self) -> dict[str, Any]:
        """The spec's model-block fields this shape sets (billions to 4 decimals)."""
        out: dict[str, Any] = {
            "params_b": round(self.params / 1e9, 4),
            "layers": self.layers, "hidden_size": self.hidden_size, "heads": self.heads,
            "kv_heads": self.kv_heads, "head_dim": self.head_dim}
        if self.is_moe:
            out["active_params_b"] = round(self.active_params / 1e9, 4)
            out["experts_per_token"] = self.experts_per_token
        if self.kv_latent_dim is not None:
            out["kv_latent_dim"] = self.kv_latent_dim
        if self.sliding_window is not None and self.sliding_window_layers:
            out["sliding_window"] = self.sliding_window
            out["sliding_window_layers"] = self.sliding_window_layers
        return out


GEMMA3_TEXT_DEFAULTS = {
    "vocab_size": 262_208, "hidden_size": 2304, "intermediate_size": 9216,
    "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
    "max_position_embeddings": 131_072, "tie_word_embeddings": True, "sliding_window": 4096,
    "sliding_window_pattern": 6}
"""``Gemma3TextConfig.__init__`` defaults (transformers 4.50.0,
``models/gemma3/configuration_gemma3.py``): a multimodal Gemma 3 ``config.json`` stores only
the ``text_config`` fields that differ from them."""


class _Cfg:
    """Typed reads of a config mapping; a missing or malformed field is a one-line error."""

    def __init__(self, data: dict[str, Any], where: str) -> None:
        self.data, self.where = data, where

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def num(self, key: str, default: int | None = None) -> int:
        v = self.data.get(key, default)
        if v is None:
            raise InputError(f"{self.where}: field {key!r} is missing; the demand model needs "
                             "it (give it in the model block, or use the model's own "
                             "config.json)")
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise InputError(f"{self.where}: field {key!r} = {v!r} is not a non-negative "
                             "integer; fix the file")
        return v

    def opt(self, key: str) -> int | None:
        return self.num(key) if self.has(key) else None

    def flag(self, key: str, default: bool) -> bool:
        v = self.data.get(key, default)
        if not isinstance(v, bool):
            raise InputError(f"{self.where}: field {key!r} = {v!r} is not true or false")
        return v


def read_config(data: Any, where: str) -> Shape:
    """The shape of the model a ``config.json`` mapping describes."""
    if not isinstance(data, dict):
        raise InputError(f"{where}: not a JSON object; give a Hugging Face config.json")
    kind = data.get("model_type")
    if kind == "gemma3" and isinstance(data.get("text_config"), dict):
        text = {**GEMMA3_TEXT_DEFAULTS, "model_type": "gemma3_text", **data["text_config"]}
        return read_config(text, where)
    if kind not in KNOWN:
        raise InputError(f"{where}: model_type {kind!r} is not one ptplan can count (known: "
                         f"{', '.join(sorted(set(KNOWN)))}); type the shape fields in the "
                         "model block instead")
    c = _Cfg(data, where)
    if kind == "chatglm":
        return _chatglm(c, "chatglm")
    return _decoder(c, str(kind))


def _decoder(c: _Cfg, kind: str) -> Shape:
    h, n_layers = c.num("hidden_size"), c.num("num_hidden_layers")
    nq = c.num("num_attention_heads")
    nkv = c.num("num_key_value_heads", nq)
    hd = c.num("head_dim") if c.has("head_dim") else h // nq
    vocab = c.num("vocab_size")
    tied = c.flag("tie_word_embeddings", kind in TIED_BY_DEFAULT)
    embed = vocab * h
    head = 0 if tied else vocab * h
    attn, latent = _attention(c, kind, h, nq, nkv, hd)
    norms = (4 if kind in ("gemma2", "gemma3_text") else 2) * h
    dense_mlp = 3 * h * c.num("intermediate_size")
    total = active = embed + head + h  # embeddings, output head, final norm
    experts = per_token = None
    for i in range(n_layers):
        moe = _moe_layer(c, kind, h, i)
        total += attn + norms + (moe[0] if moe else dense_mlp)
        active += attn + norms + (moe[1] if moe else dense_mlp)
        if moe:
            experts, per_token = moe[2], moe[3]
    window, windowed = _sliding(c, kind, n_layers)
    heads, kv_heads, head_dim = nq, nkv, hd
    if latent is not None:  # MLA: attention FLOPs per head over (q·k + v) / 2
        head_dim = (c.num("qk_nope_head_dim") + c.num("qk_rope_head_dim")
                    + c.num("v_head_dim")) // 2
        kv_heads = nq
    return Shape(kind, total, active, embed + head, n_layers, h, heads, kv_heads, head_dim,
                 experts, per_token, latent, window, windowed,
                 c.opt("max_position_embeddings"), vocab)


def _attention(c: _Cfg, kind: str, h: int, nq: int, nkv: int, hd: int
               ) -> tuple[int, int | None]:
    """Parameters of one attention block, and MLA's cached latent per token (else None)."""
    if kind in ("deepseek_v2", "deepseek_v3"):
        nope, rope, v = c.num("qk_nope_head_dim"), c.num("qk_rope_head_dim"), \
            c.num("v_head_dim")
        kv_rank = c.num("kv_lora_rank")
        q_rank = c.opt("q_lora_rank")
        q = h * q_rank + q_rank + q_rank * nq * (nope + rope) if q_rank \
            else h * nq * (nope + rope)
        kv = h * (kv_rank + rope) + kv_rank + kv_rank * nq * (nope + v)
        return q + kv + nq * v * h, kv_rank + rope
    proj = h * nq * hd + 2 * h * nkv * hd + nq * hd * h
    bias = 0
    if kind == "qwen2" or kind == "qwen2_moe" or c.flag("attention_bias", False):
        bias = nq * hd + 2 * nkv * hd  # q, k, v biases (Qwen2 always has them)
        if c.flag("attention_bias", False) and kind not in ("qwen2", "qwen2_moe"):
            bias += h  # o_proj bias with attention_bias
    if kind in ("qwen3", "qwen3_moe", "gemma3_text"):
        bias += 2 * hd  # q_norm and k_norm over one head
    if kind == "olmo2":
        bias += nq * hd + nkv * hd  # q_norm and k_norm over all heads
    return proj + bias, None


def _moe_layer(c: _Cfg, kind: str, h: int, i: int) -> tuple[int, int, int, int] | None:
    """One layer's MoE block: (total, active, experts, experts per token); None if dense."""
    if kind == "mixtral" or kind == "phimoe":
        e, k, inter = c.num("num_local_experts"), c.num("num_experts_per_tok"), \
            c.num("intermediate_size")
        expert = 3 * h * inter
        return h * e + e * expert, h * e + k * expert, e, k
    if kind in ("qwen3_moe", "qwen2_moe"):
        sparse = c.num("decoder_sparse_step", 1)
        only = c.data.get("mlp_only_layers") or []
        if i in only or sparse == 0 or (i + 1) % sparse != 0:
            return None
        e, k, inter = c.num("num_experts"), c.num("num_experts_per_tok"), \
            c.num("moe_intermediate_size")
        shared = 0
        if kind == "qwen2_moe":
            shared = 3 * h * c.num("shared_expert_intermediate_size") + h
        expert = 3 * h * inter
        return h * e + e * expert + shared, h * e + k * expert + shared, e, k
    if kind in ("deepseek_v2", "deepseek_v3"):
        freq = c.num("moe_layer_freq", 1)
        if i < c.num("first_k_dense_replace", 0) or freq == 0 or i % freq != 0:
            return None
        e, k, inter = c.num("n_routed_experts"), c.num("num_experts_per_tok"), \
            c.num("moe_intermediate_size")
        expert = 3 * h * inter
        shared = c.num("n_shared_experts", 0) * expert
        router = h * e + (e if kind == "deepseek_v3" else 0)  # V3: e_score_correction_bias
        return router + e * expert + shared, router + k * expert + shared, e, k
    return None


def _sliding(c: _Cfg, kind: str, n_layers: int) -> tuple[int | None, int | None]:
    """The sliding window and how many layers use it (None, None: every layer is global)."""
    window = c.opt("sliding_window")
    if window is None:
        return None, None
    types = c.data.get("layer_types")
    if isinstance(types, list) and types:
        n = sum(1 for t in types if t == "sliding_attention")
    elif kind == "gemma2":
        n = (n_layers + 1) // 2  # even layers slide (transformers Gemma2DecoderLayer)
    elif kind == "gemma3_text":
        n = n_layers - n_layers // c.num("sliding_window_pattern", 6)
    elif kind in ("qwen2", "qwen3", "qwen2_moe", "qwen3_moe"):
        if not c.flag("use_sliding_window", False):
            return None, None
        n = max(0, n_layers - c.num("max_window_layers", n_layers))
    else:
        n = n_layers  # Mistral v0.1, Phi-3: every layer
    if n == 0 or window >= (c.opt("max_position_embeddings") or window + 1):
        return None, None
    return window, n


def _chatglm(c: _Cfg, kind: str) -> Shape:
    """GLM-4 (``chatglm``): fused QKV with multi-query groups, untied output layer."""
    h, n_layers = c.num("hidden_size"), c.num("num_layers")
    nq, kvc = c.num("num_attention_heads"), c.num("kv_channels")
    groups = c.num("multi_query_group_num") if c.flag("multi_query_attention", False) else nq
    vocab = c.num("padded_vocab_size")
    ffn = c.num("ffn_hidden_size")
    qkv = h * (nq * kvc + 2 * groups * kvc)
    if c.flag("add_qkv_bias", False):
        qkv += nq * kvc + 2 * groups * kvc
    layer = qkv + nq * kvc * h + 2 * h * ffn + ffn * h + 2 * h
    embed = 2 * vocab * h
    total = embed + n_layers * layer + h
    return Shape(kind, total, total, embed, n_layers, h, nq, groups, kvc, None, None, None,
                 None, None, c.opt("seq_length"), vocab)
