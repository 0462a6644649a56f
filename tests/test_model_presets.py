"""Model presets (issue #42): parameter counts against the published figures, the table
against the script that generates it, a preset against the same shape typed by hand and
against its own config.json, overrides and their provenance, the MLA and sliding-window KV
cache, and the one-line errors."""

from __future__ import annotations

import csv
import hashlib
import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml

import ptplan
from ptplan.core.errors import InputError
from ptplan.demand.inference import kv_bytes_per_token
from ptplan.spec import presets, presets_build
from ptplan.spec.hf_config import read_config
from ptplan.spec.project import load_spec, parse_spec
from ptplan.spec.sections import ModelBlock

ROOT = Path(__file__).resolve().parent.parent
PUBLISHED = ROOT / "tests" / "data" / "published_params.csv"
GRPO = yaml.safe_load((ROOT / "examples" / "grpo-7b.yaml").read_text())
CONFIGS = presets_build.CONFIGS


def published() -> dict[str, dict[str, str]]:
    with PUBLISHED.open() as f:
        return {r["name"]: r for r in csv.DictReader(f)}


def agrees(ours: float, card: str) -> bool:
    """Within 1 %, or equal at the card's own precision (a card's "1.7B" is 1.65-1.75B
    rounded, or 1.7-1.8B truncated: Qwen's "3.3B activated" is 3.35B)."""
    value = float(card)
    digits = len(card.split(".")[1]) if "." in card else 0
    unit = 10.0 ** -digits
    return (abs(ours - value) <= 0.01 * value or abs(ours - value) <= unit / 2 + 1e-12
            or value <= ours < value + unit)


def test_at_least_forty_presets_with_sources() -> None:
    table = presets.presets()
    assert len(table) >= 40
    for p in table.values():
        assert p.source and p.read_on.startswith("20")
        assert (CONFIGS / Path(p.config).name).is_file()


def test_the_table_is_what_the_script_generates() -> None:
    assert presets_build.build() == presets_build.TABLE.read_text("utf-8")
    rows = json.loads(presets_build.TABLE.read_text("utf-8"))["models"]
    for r in rows:  # the configs are the files the table was generated from
        raw = (CONFIGS / Path(r["config"]).name).read_bytes()
        assert hashlib.sha256(raw).hexdigest() == r["config_sha256"]


def test_every_preset_has_a_published_count() -> None:
    assert {p.name for p in presets.presets().values()} == set(published())


@pytest.mark.parametrize("name", sorted(published()))
def test_parameter_count_matches_the_published_figure(name: str) -> None:
    row, shape = published()[name], presets.lookup(name).shape
    total = shape.params / 1e9
    assert agrees(total, row["total_b"]), (name, total, row["total_b"])
    if row["nonembedding_b"]:
        non = (shape.params - shape.embedding_params) / 1e9
        assert agrees(non, row["nonembedding_b"]), (name, non, row["nonembedding_b"])
    if row["active_b"]:
        assert shape.is_moe
        # Mistral and Qwen count the input embedding among the activated parameters,
        # DeepSeek does not (it is a lookup): either convention must agree
        active = shape.active_params / 1e9
        lookup = shape.vocab_size * shape.hidden_size / 1e9
        assert agrees(active, row["active_b"]) or agrees(active - lookup, row["active_b"]), \
            (name, active, row["active_b"])
    else:
        assert not shape.is_moe


def test_counts_of_a_small_config_by_hand() -> None:
    """A Llama-style config small enough to count on paper."""
    cfg = {"model_type": "llama", "hidden_size": 8, "num_hidden_layers": 2,
           "num_attention_heads": 2, "num_key_value_heads": 1, "intermediate_size": 16,
           "vocab_size": 10, "tie_word_embeddings": False, "max_position_embeddings": 64}
    s = read_config(cfg, "t")
    attn = 8 * 8 + 2 * 8 * 4 + 8 * 8  # q, k and v (one head of dim 4), o
    layer = attn + 3 * 8 * 16 + 2 * 8
    assert s.params == 2 * 10 * 8 + 2 * layer + 8
    assert s.embedding_params == 160 and s.head_dim == 4 and s.kv_heads == 1
    tied = read_config({**cfg, "tie_word_embeddings": True}, "t")
    assert tied.params == s.params - 80
    qwen = read_config({**cfg, "model_type": "qwen2"}, "t")  # q, k, v biases
    assert qwen.params == s.params + 2 * (8 + 4 + 4)


def test_moe_and_mla_counts_by_hand() -> None:
    """DeepSeek-V3's layer counted on paper from its published dimensions."""
    s = presets.lookup("deepseek-ai/DeepSeek-V3").shape
    h, nq = 7168, 128
    q = h * 1536 + 1536 + 1536 * nq * 192
    kv = h * (512 + 64) + 512 + 512 * nq * (128 + 128)
    attn = q + kv + nq * 128 * h
    expert = 3 * h * 2048
    moe = h * 256 + 256 + 257 * expert
    dense = 3 * h * 18432
    total = 2 * 129280 * h + h + 61 * (attn + 2 * h) + 3 * dense + 58 * moe
    assert s.params == total
    assert s.active_params == total - 58 * 248 * expert
    assert s.kv_latent_dim == 576 and s.experts == 256 and s.experts_per_token == 8


def _estimate(data: dict[str, Any]) -> dict[str, Any]:
    out = ptplan.estimate(parse_spec(data))
    out.pop("defaults_applied", None)
    return out


@pytest.mark.parametrize("name", ["Qwen/Qwen2.5-7B", "deepseek-ai/DeepSeek-V3",
                                  "google/gemma-3-1b-it", "Qwen/Qwen3-30B-A3B",
                                  "meta-llama/Llama-3.2-1B"])
def test_preset_estimate_equals_the_shape_typed_by_hand(name: str) -> None:
    fields = ptplan.model_preset(name)["spec_fields"]
    by_preset = _estimate({**GRPO, "model": {"preset": name}})
    by_hand = _estimate({**GRPO, "model": dict(fields)})
    assert by_preset == by_hand


@pytest.mark.parametrize("name", ["Qwen/Qwen3-8B", "mistralai/Mixtral-8x7B-v0.1",
                                  "google/gemma-3-1b-it"])
def test_config_json_gives_the_estimate_of_its_preset(name: str, tmp_path: Path) -> None:
    src = CONFIGS / Path(presets.lookup(name).config).name
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "config.json").write_bytes(src.read_bytes())
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(yaml.safe_dump({**GRPO, "model": {"hf_config": "models/config.json"}}))
    from_file = ptplan.estimate(load_spec(str(spec_file)))
    from_preset = ptplan.estimate(parse_spec({**GRPO, "model": {"preset": name}}))
    from_file.pop("defaults_applied")
    from_preset.pop("defaults_applied")
    assert from_file == from_preset


def test_explicit_fields_override_and_the_defaults_say_where_each_came_from() -> None:
    spec = parse_spec({**GRPO, "model": {"preset": "qwen/qwen2.5-7b", "kv_heads": 8}})
    assert spec.model.kv_heads == 8 and spec.model.layers == 28
    assert spec.model.preset == "qwen/qwen2.5-7b"  # as the user gave it
    lines = ptplan.estimate(spec)["defaults_applied"]
    took = next(x for x in lines if x.startswith("model: "))
    assert "layers 28" in took and "kv_heads" not in took and "Qwen/Qwen2.5-7B" in took
    assert "model.kv_heads = 8 given in the spec (preset Qwen/Qwen2.5-7B says 4)" in lines
    more = ptplan.estimate(spec)["phases"]
    base = ptplan.estimate(parse_spec({**GRPO, "model": {"preset": "Qwen/Qwen2.5-7B"}}))
    assert more != base["phases"]  # twice the KV heads: a different generation


def test_teacher_reward_and_critic_take_presets() -> None:
    opd = yaml.safe_load((ROOT / "examples" / "opd-8b-from-32b.yaml").read_text())
    spec = parse_spec({**opd, "model": {"preset": "Qwen/Qwen3-8B"},
                       "teacher": {"preset": "Qwen/Qwen3-32B"}})
    assert spec.teacher is not None and spec.teacher.layers == 64
    ppo = parse_spec({**GRPO, "algorithm": "ppo",
                      "critic": {"preset": "Qwen/Qwen2.5-1.5B-Instruct"},
                      "reward_model": {"preset": "Qwen/Qwen2.5-7B-Instruct"}})
    assert ppo.critic is not None and ppo.critic.layers == 28
    assert ppo.reward_model is not None and ppo.reward_model.kv_heads == 4
    lines = ptplan.estimate(ppo)["defaults_applied"]
    assert any(x.startswith("critic: ") for x in lines)
    assert any(x.startswith("reward_model: ") for x in lines)


def test_a_spec_with_a_preset_round_trips_through_framework_revalidation(tmp_path: Path) -> None:
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "config.json").write_bytes((CONFIGS / "Qwen__Qwen3-8B.json").read_bytes())
    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump({**GRPO, "model": {"hf_config": "c/config.json"}}))
    spec = load_spec(str(f))
    from ptplan.spec.project import with_framework

    again = with_framework(spec, "openrlhf==0.11")  # re-read relative to the spec's folder
    assert again.model == spec.model
    assert again.model.origin_lines("model") == spec.model.origin_lines("model")


def test_unknown_preset_is_one_line_with_the_nearest() -> None:
    with pytest.raises(InputError) as err:
        parse_spec({**GRPO, "model": {"preset": "Qwen/Qwen2.5-7"}})
    text = str(err.value)
    assert "\n" not in text and "Qwen/Qwen2.5-7B" in text and "preset" in text


def test_config_missing_a_field_names_it(tmp_path: Path) -> None:
    cfg = json.loads((CONFIGS / "Qwen__Qwen3-8B.json").read_text())
    del cfg["num_key_value_heads"]
    del cfg["num_attention_heads"]
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump({**GRPO, "model": {"hf_config": "config.json"}}))
    with pytest.raises(InputError) as err:
        load_spec(str(f))
    assert "num_attention_heads" in str(err.value) and "\n" not in str(err.value)
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "model_type": "mamba"}))
    with pytest.raises(InputError, match=r"model_type 'mamba' is not one ptplan can count"):
        load_spec(str(f))
    with pytest.raises(InputError, match="not both"):
        parse_spec({**GRPO, "model": {"preset": "Qwen/Qwen3-8B", "hf_config": "x.json"}})
    with pytest.raises(InputError, match="not found"):
        parse_spec({**GRPO, "model": {"hf_config": str(tmp_path / "missing.json")}})


def test_mla_kv_cache_is_the_latent() -> None:
    v3 = ModelBlock(**presets.lookup("deepseek-ai/DeepSeek-V3").shape.block())
    assert kv_bytes_per_token(v3, 2.0) == 61 * 576 * 2
    assert ptplan.model_preset("deepseek-ai/DeepSeek-V3")["kv_bytes_per_token"] == 61 * 576 * 2


def test_sliding_window_layers_keep_at_most_the_window() -> None:
    g = ModelBlock(**presets.lookup("google/gemma-3-1b-it").shape.block())
    assert g.sliding_window == 512 and g.sliding_window_layers == 22  # 5 of every 6 of 26
    full = 2 * 26 * 1 * 256 * 2
    assert kv_bytes_per_token(g, 2.0) == full
    assert kv_bytes_per_token(g, 2.0, 512) == full
    at_4k = kv_bytes_per_token(g, 2.0, 4096)
    assert math.isclose(at_4k, (4 + 22 * 512 / 4096) * 2 * 256 * 2)
    assert kv_bytes_per_token(g, 2.0, 8192) < at_4k  # a longer context: windows matter more


def test_a_sliding_window_needs_its_layer_count() -> None:
    with pytest.raises(InputError, match="go together"):
        parse_spec({**GRPO, "model": {**GRPO["model"], "sliding_window": 4096}})


def test_hand_typed_spec_keeps_its_digest() -> None:
    from ptplan.planfile.digest import spec_digest

    typed = {**GRPO, "model": {"params_b": 7.6, "layers": 28, "hidden_size": 3584, "heads": 28,
                               "kv_heads": 4, "head_dim": 128}}
    dump = parse_spec(typed).model_dump(mode="json")
    assert "preset" in dump["model"] and dump["model"]["preset"] is None
    trimmed = {**dump, "model": {k: v for k, v in dump["model"].items()
                                 if k not in ("preset", "hf_config", "kv_latent_dim",
                                              "sliding_window", "sliding_window_layers")}}
    assert spec_digest(dump) == spec_digest(trimmed)


SMALL = {"hidden_size": 8, "num_hidden_layers": 2, "num_attention_heads": 2,
         "num_key_value_heads": 1, "intermediate_size": 16, "vocab_size": 10,
         "tie_word_embeddings": False, "max_position_embeddings": 64}
"""h 8, 2 layers, 2 query heads of dim 4, 1 KV head, MLP 16, vocabulary 10: embeddings 80, an
untied head 80, the final norm 8; a layer's GQA attention 8·8 + 2·8·4 + 8·8 = 192, MLP
3·8·16 = 384, norms 2·8 = 16."""


def _small(**kw: Any) -> dict[str, Any]:
    return {**SMALL, **kw}


@pytest.mark.parametrize(("cfg", "total", "active"), [
    # no num_key_value_heads: as many KV heads as query heads (attention 64 + 128 + 64)
    ({k: v for k, v in _small(model_type="llama").items() if k != "num_key_value_heads"},
     168 + 2 * (256 + 384 + 16), None),
    # attention_bias: q, k, v and o biases 8 + 4 + 4 + 8 per layer
    (_small(model_type="llama", attention_bias=True), 1352 + 2 * 24, None),
    # OLMo 2: q_norm and k_norm over all heads, 8 + 4 per layer
    (_small(model_type="olmo2"), 1352 + 2 * 12, None),
    # Gemma 2: tied head, four norms per layer (32)
    (_small(model_type="gemma2", tie_word_embeddings=True), 80 + 8 + 2 * (192 + 384 + 32), None),
    # Mixtral: 4 experts of 384, top 2, router 8·4 per layer
    (_small(model_type="mixtral", num_local_experts=4, num_experts_per_tok=2),
     168 + 2 * (192 + 16 + 32 + 4 * 384), 168 + 2 * (192 + 16 + 32 + 2 * 384)),
    (_small(model_type="phimoe", num_local_experts=4, num_experts_per_tok=2),
     168 + 2 * (192 + 16 + 32 + 4 * 384), 168 + 2 * (192 + 16 + 32 + 2 * 384)),
    # Qwen2-MoE: qkv biases (16), layer 1 dense (mlp_only_layers), layer 0: router 32, 4
    # experts of 3·8·8 = 192, a shared expert 3·8·16 and its gate 8
    (_small(model_type="qwen2_moe", num_experts=4, num_experts_per_tok=2,
            moe_intermediate_size=8, shared_expert_intermediate_size=16, mlp_only_layers=[1]),
     168 + (208 + 16 + 32 + 768 + 392) + (208 + 16 + 384),
     168 + (208 + 16 + 32 + 384 + 392) + (208 + 16 + 384)),
    # Qwen3-MoE every 2nd layer sparse: layer 0 dense, layer 1 MoE; q/k norms 2·4
    (_small(model_type="qwen3_moe", num_experts=4, num_experts_per_tok=2,
            moe_intermediate_size=8, decoder_sparse_step=2),
     168 + (200 + 16 + 384) + (200 + 16 + 32 + 768),
     168 + (200 + 16 + 384) + (200 + 16 + 32 + 384)),
])
def test_small_configs_counted_by_hand(cfg: dict[str, Any], total: int,
                                       active: int | None) -> None:
    s = read_config(cfg, "t")
    assert s.params == total
    assert s.active_params == (total if active is None else active)
    assert s.is_moe == (active is not None)


def test_mla_without_q_lora_and_defaults_by_hand() -> None:
    """DeepSeek-V2 style, no q_lora_rank: q 8·2·(4 + 2) = 96; kv 8·(4 + 2) + 4 + 4·2·(4 + 4)
    = 116; o 2·4·8 = 64. Layer 0 dense (first_k_dense_replace 1); layer 1 MoE (moe_layer_freq
    and n_shared_experts absent: every layer, no shared expert): router 32, 4 experts of 192."""
    cfg = _small(model_type="deepseek_v2", qk_nope_head_dim=4, qk_rope_head_dim=2,
                 v_head_dim=4, kv_lora_rank=4, n_routed_experts=4, num_experts_per_tok=2,
                 moe_intermediate_size=8, first_k_dense_replace=1)
    s = read_config(cfg, "t")
    attn = 96 + 116 + 64
    assert s.params == 168 + (attn + 16 + 384) + (attn + 16 + 32 + 4 * 192)
    assert s.active_params == 168 + (attn + 16 + 384) + (attn + 16 + 32 + 2 * 192)
    assert (s.kv_latent_dim, s.head_dim, s.kv_heads) == (6, 5, 2)
    shared = read_config({**cfg, "n_shared_experts": 1, "moe_layer_freq": 1}, "t")
    assert shared.params == s.params + 192


def test_glm4_counted_by_hand() -> None:
    """GLM-4 (chatglm): fused QKV 8·(8 + 2·4) + biases 16, dense 8·8, MLP 2·8·16 + 16·8,
    norms 16; untied output layer; 1 KV group."""
    cfg = {"model_type": "chatglm", "hidden_size": 8, "num_layers": 2,
           "num_attention_heads": 2, "kv_channels": 4, "multi_query_attention": True,
           "multi_query_group_num": 1, "padded_vocab_size": 10, "ffn_hidden_size": 16,
           "add_qkv_bias": True, "seq_length": 64}
    s = read_config(cfg, "t")
    assert s.params == 160 + 2 * (144 + 64 + 384 + 16) + 8
    assert (s.kv_heads, s.head_dim, s.context_length) == (1, 4, 64)


@pytest.mark.parametrize(("cfg", "window", "layers"), [
    (_small(model_type="mistral", sliding_window=4), 4, 2),
    (_small(model_type="gemma2", sliding_window=4), 4, 1),  # even layers
    (_small(model_type="qwen2", sliding_window=4), None, None),  # use_sliding_window unset
    (_small(model_type="qwen2", sliding_window=4, use_sliding_window=True,
            max_window_layers=1), 4, 1),
    (_small(model_type="mistral", sliding_window=64), None, None),  # the whole context
    (_small(model_type="mistral", sliding_window=4,
            layer_types=["sliding_attention", "full_attention"]), 4, 1),
])
def test_sliding_window_layers_from_the_config(cfg: dict[str, Any], window: int | None,
                                               layers: int | None) -> None:
    s = read_config(cfg, "t")
    assert (s.sliding_window, s.sliding_window_layers) == (window, layers)


def test_multimodal_gemma3_takes_the_text_defaults() -> None:
    """A Gemma 3 config stores only the text fields that differ from Gemma3TextConfig's."""
    s = read_config({"model_type": "gemma3", "text_config": {"hidden_size": 16,
                     "intermediate_size": 32, "num_hidden_layers": 6}}, "t")
    assert (s.heads, s.kv_heads, s.head_dim, s.vocab_size) == (8, 4, 256, 262_208)
    assert (s.sliding_window, s.sliding_window_layers) == (4096, 5)
    assert s.embedding_params == 262_208 * 16  # tied


def test_a_dense_override_of_a_moe_preset_drops_its_experts() -> None:
    spec = parse_spec({**GRPO, "model": {"preset": "Qwen/Qwen3-30B-A3B", "params_b": 3.0}})
    assert spec.model.active_params_b is None and spec.model.experts_per_token is None
    assert not spec.model.is_moe and spec.model.layers == 48
    took = spec.model.origin_lines("model")[0]  # the dropped fields are not claimed taken
    assert "layers 48" in took and "active_params_b" not in took
    assert "experts_per_token" not in took
    both = parse_spec({**GRPO, "model": {"preset": "Qwen/Qwen3-30B-A3B", "params_b": 31.0,
                                         "active_params_b": 3.5}})
    assert both.model.is_moe and both.model.experts_per_token == 8


def test_a_field_the_preset_does_not_set_is_listed_as_given() -> None:
    spec = parse_spec({**GRPO, "model": {"preset": "Qwen/Qwen2.5-7B", "sliding_window": 4096,
                                         "sliding_window_layers": 4}})
    lines = spec.model.origin_lines("model")
    assert "model.sliding_window = 4096 given in the spec (not in preset Qwen/Qwen2.5-7B)" \
        in lines
    every = {k: v for k, v in ptplan.model_preset("Qwen/Qwen2.5-7B")["spec_fields"].items()}
    alone = parse_spec({**GRPO, "model": {"preset": "Qwen/Qwen2.5-7B", **every}})
    assert alone.model.origin_lines("model") == []  # nothing taken, nothing overridden
    assert parse_spec({**GRPO, "model": every}).model.origin_lines("model") == []


def test_search_by_kind_and_order() -> None:
    dense = {p.name for p in presets.search("dense")}
    moe = {p.name for p in presets.search("moe")}
    assert dense and moe and not dense & moe
    assert dense | moe == {p.name for p in presets.presets().values()}
    names = [p.name for p in presets.search("qwen")]
    assert names == sorted(names, key=str.lower) and "Qwen/QwQ-32B" in names
    assert presets.search("QWEN3 MOE") == presets.search("qwen3 moe")


def test_nearest_names_by_the_name_after_the_org() -> None:
    assert presets.nearest("Qwen2.5-7B")[0] == "Qwen/Qwen2.5-7B"
    assert "meta-llama/Llama-3.1-8B" in presets.nearest("llama-3.1-8b")
    assert presets.nearest("zzzz-unknown-0") == []
    assert "nearest" not in presets.unknown_message("zzzz-unknown-0")


def test_hf_config_relative_to_the_working_directory(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "config.json").write_bytes((CONFIGS / "Qwen__Qwen3-8B.json").read_bytes())
    monkeypatch.chdir(tmp_path)
    spec = parse_spec({**GRPO, "model": {"hf_config": "config.json"}})
    assert spec.model.layers == 36 and spec.model.config_dir is None
    with pytest.raises(InputError, match=r"hf_config 'nope/config.json'.*not found"):
        parse_spec({**GRPO, "model": {"hf_config": "nope/config.json"}})
    (tmp_path / "bad.json").write_text('{"model_type": "llama", "hidden_size": 8}')
    with pytest.raises(InputError, match=r"hf_config 'bad.json': field 'num_hidden_layers'"):
        parse_spec({**GRPO, "model": {"hf_config": "bad.json"}})


@pytest.mark.parametrize(("cfg", "window", "layers"), [
    (_small(model_type="mistral", sliding_window=4, num_hidden_layers=3,
            layer_types=["sliding_attention", "sliding_attention", "full_attention"]), 4, 2),
    (_small(model_type="gemma2", sliding_window=4, num_hidden_layers=4), 4, 2),
    (_small(model_type="gemma3_text", sliding_window=4, num_hidden_layers=12,
            sliding_window_pattern=4), 4, 9),  # layers 3, 7, 11 global
])
def test_sliding_window_layer_counts_on_more_layers(cfg: dict[str, Any], window: int,
                                                    layers: int) -> None:
    s = read_config(cfg, "t")
    assert (s.sliding_window, s.sliding_window_layers) == (window, layers)


def test_biases_and_sparse_steps_on_more_kinds() -> None:
    base = read_config(_small(model_type="llama"), "t").params
    # Qwen2 always has q, k, v biases; attention_bias adds no o_proj bias there
    assert read_config(_small(model_type="qwen2", attention_bias=True), "t").params == \
        base + 2 * 16
    # Qwen3 with attention_bias: q, k, v and o biases (24) and its q/k norms (8)
    assert read_config(_small(model_type="qwen3", attention_bias=True), "t").params == \
        base + 2 * (24 + 8)
    # OLMo 2 with attention_bias: biases 24 and the all-heads q/k norms 12
    assert read_config(_small(model_type="olmo2", attention_bias=True), "t").params == \
        base + 2 * (24 + 12)
    # every 3rd layer sparse of 3: only layer 2 is MoE
    moe = read_config(_small(model_type="qwen3_moe", num_hidden_layers=3, num_experts=4,
                             num_experts_per_tok=2, moe_intermediate_size=8,
                             decoder_sparse_step=3), "t")
    assert moe.params == 168 + 2 * (200 + 16 + 384) + (200 + 16 + 32 + 768)
    # DeepSeek: every 2nd layer MoE after the first dense one (moe_layer_freq 2)
    ds = _small(model_type="deepseek_v3", num_hidden_layers=4, qk_nope_head_dim=4,
                qk_rope_head_dim=2, v_head_dim=4, kv_lora_rank=4, n_routed_experts=4,
                num_experts_per_tok=2, moe_intermediate_size=8, first_k_dense_replace=1,
                moe_layer_freq=2)
    attn = 96 + 116 + 64
    dense, sparse = attn + 16 + 384, attn + 16 + 32 + 4 + 4 * 192  # V3: correction bias
    assert read_config(ds, "t").params == 168 + 3 * dense + sparse  # layer 2 only
    no_first = {k: v for k, v in ds.items() if k != "first_k_dense_replace"}
    assert read_config(no_first, "t").params == 168 + 2 * dense + 2 * sparse  # layers 0, 2


@pytest.mark.parametrize(("field", "value"), [("hidden_size", True), ("hidden_size", -8),
                                              ("hidden_size", 8.5), ("vocab_size", "10")])
def test_a_malformed_number_is_named(field: str, value: Any) -> None:
    with pytest.raises(InputError, match=rf"t: field '{field}' = .* is not a non-negative "
                                         "integer; fix the file"):
        read_config(_small(model_type="llama", **{field: value}), "t")


def test_malformed_flags_and_files_are_named() -> None:
    with pytest.raises(InputError, match=r"t: field 'tie_word_embeddings' = 'yes' is not true "
                                         "or false"):
        read_config(_small(model_type="llama", tie_word_embeddings="yes"), "t")
    with pytest.raises(InputError, match=r"t: not a JSON object; give a Hugging Face"):
        read_config([1, 2], "t")
    with pytest.raises(InputError, match=r"model_type 'glm' is not one ptplan can count .*"
                                         r"chatglm.*type the shape fields in the model block"):
        read_config(_small(model_type="glm"), "t")
    with pytest.raises(InputError, match=r"t: field 'num_hidden_layers' is missing; the "
                                         r"demand model needs it \(give it in the model block, "
                                         r"or use the model's own config.json\)"):
        read_config({"model_type": "llama", "hidden_size": 8}, "t")
    # a text_config of another model type is not Gemma 3's
    assert read_config(_small(model_type="llama", text_config={"hidden_size": 4}),
                       "t").hidden_size == 8


def test_glm4_grouped_query_off_uses_every_head() -> None:
    cfg = {"model_type": "chatglm", "hidden_size": 8, "num_layers": 1,
           "num_attention_heads": 2, "kv_channels": 4, "multi_query_attention": False,
           "multi_query_group_num": 1, "padded_vocab_size": 10, "ffn_hidden_size": 16}
    s = read_config(cfg, "t")
    assert s.kv_heads == 2 and s.architecture == "chatglm"
    assert s.params == 160 + (8 * (8 + 2 * 8) + 64 + 384 + 16) + 8


def test_a_context_shorter_than_the_window_keeps_full_layers() -> None:
    g = ModelBlock(**presets.lookup("google/gemma-3-1b-it").shape.block())
    assert kv_bytes_per_token(g, 2.0, 256) == kv_bytes_per_token(g, 2.0)


def test_origin_lines_name_the_source_exactly(tmp_path: Path) -> None:
    row = presets.lookup("Qwen/Qwen3-8B")
    spec = parse_spec({**GRPO, "model": {"preset": "Qwen/Qwen3-8B"}})
    (line,) = spec.model.origin_lines("model")
    assert line.endswith(f" from preset Qwen/Qwen3-8B (its config.json from {row.source}, "
                         f"read {row.read_on})")
    (tmp_path / "config.json").write_bytes((CONFIGS / "Qwen__Qwen3-8B.json").read_bytes())
    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump({**GRPO, "model": {"hf_config": "config.json"}}))
    (line,) = load_spec(str(f)).model.origin_lines("model")
    assert line.endswith("head_dim 128 from hf_config config.json")
