"""The spec loader: examples load, every kind of bad input is a one-line InputError naming the
field and the bad value, and nothing else ever escapes (hypothesis)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from conftest import EXAMPLE_FILES, EXAMPLES, assert_one_line, example_dict
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ptplan.core.errors import InputError
from ptplan.core.yamlio import parse_mapping
from ptplan.spec.defaults import applied_defaults
from ptplan.spec.project import ProjectSpec, load_spec, parse_spec

# ------------------------------------------------------------------------------ examples


@pytest.mark.parametrize("name", EXAMPLE_FILES)
def test_examples_load(name: str) -> None:
    spec = load_spec(str(EXAMPLES / name))
    assert isinstance(spec, ProjectSpec)
    assert spec.name
    assert spec.method in ("sft", "rl", "opd")


def test_example_values_survive_loading() -> None:
    grpo = load_spec(str(EXAMPLES / "grpo-7b.yaml"))
    assert (grpo.method, grpo.algorithm) == ("rl", "grpo")
    assert grpo.model.params_b == 7.6156
    assert grpo.data.steps == 300
    assert grpo.uses_reference is True
    opd = load_spec(str(EXAMPLES / "opd-8b-from-32b.yaml"))
    assert opd.teacher is not None and opd.teacher.params_b == 32.7621
    assert opd.uses_reference is False
    sft = load_spec(str(EXAMPLES / "sft-8b.yaml"))
    assert sft.epochs == 3
    # 200,000 examples x 3 epochs / 256 per step = 2343.75 -> 2344 optimizer steps
    assert sft.total_steps == 2344


def test_resolved_defaults() -> None:
    d = example_dict("grpo-7b.yaml")
    del d["data"]["max_response_tokens"]
    d["algorithm"] = "dapo"
    del d["reference_model"]
    spec = parse_spec(d)
    assert spec.max_response_tokens == 2 * 2048
    assert spec.oversample_factor == 2.0  # DAPO dynamic sampling default
    assert spec.uses_reference is False  # DAPO drops the KL reference
    assert spec.update_epochs == 1
    defaults = applied_defaults(spec)
    assert "data.max_response_tokens = 4096 (2 x mean)" in defaults
    assert any(line.startswith("data.oversample_factor = 2.0") for line in defaults)
    assert any(line.startswith("efficiency.rl_train_mfu = ") for line in defaults)
    assert not any(line.startswith("efficiency.train_mfu = ") for line in defaults)  # SFT only


def test_ppo_gets_a_critic_shaped_like_the_model() -> None:
    d = example_dict("grpo-7b.yaml")
    d["algorithm"] = "ppo"
    spec = parse_spec(d)
    critic = spec.critic_model
    assert critic is not None
    assert critic.params_b == 7.6156 and critic.layers == 28
    assert "critic = same shape as model (PPO)" in applied_defaults(spec)


def test_gpu_aliases_are_canonicalised_in_placement_and_calibration() -> None:
    d = example_dict("grpo-7b.yaml")
    d["placement"] = {"gpus": ["h100", "H100-MEGA", "a100"]}
    d["calibration"] = [
        {
            "phase": "rollout",
            "gpu": "H100-80GB",
            "precision": "bf16",
            "tokens_per_second_per_gpu": 5000,
        }
    ]
    spec = parse_spec(d)
    assert spec.placement.gpus == ["H100", "H100", "A100-40GB"]
    assert spec.calibration[0].gpu == "H100"


# ------------------------------------------------------------------------------ bad specs

Mutation = Callable[[dict[str, Any]], None]


def _set(path: str, value: Any) -> Mutation:
    def apply(d: dict[str, Any]) -> None:
        *head, last = path.split(".")
        node = d
        for key in head:
            node = node.setdefault(key, {})
        node[last] = value

    return apply


def _rename(path: str, new: str) -> Mutation:
    def apply(d: dict[str, Any]) -> None:
        *head, last = path.split(".")
        node = d
        for key in head:
            node = node[key]
        node[new] = node.pop(last)

    return apply


def _delete(path: str) -> Mutation:
    def apply(d: dict[str, Any]) -> None:
        *head, last = path.split(".")
        node = d
        for key in head:
            node = node[key]
        del node[last]

    return apply


# (example, mutation, substrings the one-line message must contain)
BAD_SPECS: list[tuple[str, str, Mutation, tuple[str, ...]]] = [
    (
        "typo-method",
        "grpo-7b.yaml",
        _rename("method", "methd"),
        ("methd", "unknown key", "did you mean: method"),
    ),
    (
        "typo-data-steps",
        "grpo-7b.yaml",
        _rename("data.steps", "stepz"),
        ("data.stepz", "unknown key", "did you mean: steps"),
    ),
    (
        "typo-model-key",
        "sft-8b.yaml",
        _rename("model.finetune", "finetun"),
        ("model.finetun", "did you mean: finetune"),
    ),
    (
        "negative-steps",
        "grpo-7b.yaml",
        _set("data.steps", -3),
        ("data.steps", "-3", "greater than 0"),
    ),
    (
        "zero-prompts",
        "grpo-7b.yaml",
        _set("data.prompts_per_step", 0),
        ("data.prompts_per_step", "= 0"),
    ),
    ("zero-examples", "sft-8b.yaml", _set("data.examples", 0), ("data.examples", "= 0")),
    ("negative-params", "sft-8b.yaml", _set("model.params_b", -8.0), ("model.params_b", "-8.0")),
    (
        "negative-teacher-layers",
        "opd-8b-from-32b.yaml",
        _set("teacher.layers", -64),
        ("teacher.layers", "-64"),
    ),
    ("fractional-steps", "grpo-7b.yaml", _set("data.steps", 1.5), ("data.steps", "1.5")),
    (
        "unknown-method",
        "grpo-7b.yaml",
        _set("method", "rlhf"),
        ("method", "'rlhf'", "did you mean: rl"),
    ),
    (
        "unknown-algorithm",
        "grpo-7b.yaml",
        _set("algorithm", "grpoo"),
        ("algorithm", "'grpoo'", "grpo"),
    ),
    ("rl-without-algorithm", "grpo-7b.yaml", _delete("algorithm"), ("algorithm", "rl")),
    ("algorithm-on-sft", "sft-8b.yaml", _set("algorithm", "ppo"), ("algorithm", "sft")),
    ("opd-without-teacher", "opd-8b-from-32b.yaml", _delete("teacher"), ("teacher", "opd")),
    (
        "teacher-on-rl",
        "grpo-7b.yaml",
        _set(
            "teacher",
            {"params_b": 1, "layers": 1, "hidden_size": 64, "kv_heads": 1, "head_dim": 64},
        ),
        ("teacher", "rl"),
    ),
    (
        "critic-on-grpo",
        "grpo-7b.yaml",
        _set(
            "critic", {"params_b": 1, "layers": 1, "hidden_size": 64, "kv_heads": 1, "head_dim": 64}
        ),
        ("critic", "ppo"),
    ),
    (
        "unknown-gpu-placement",
        "grpo-7b.yaml",
        _set("placement.gpus", ["H100", "H1000"]),
        ("placement.gpus", "'H1000'", "did you mean"),
    ),
    (
        "unknown-gpu-calibration",
        "grpo-7b.yaml",
        _set(
            "calibration",
            [
                {
                    "phase": "rollout",
                    "gpu": "Z100",
                    "precision": "bf16",
                    "tokens_per_second_per_gpu": 100,
                }
            ],
        ),
        ("calibration[0].gpu", "'Z100'", "known GPUs"),
    ),
    (
        "unknown-calibration-phase",
        "grpo-7b.yaml",
        _set(
            "calibration",
            [
                {
                    "phase": "rolout",
                    "gpu": "H100",
                    "precision": "bf16",
                    "tokens_per_second_per_gpu": 100,
                }
            ],
        ),
        ("calibration[0].phase", "'rolout'", "did you mean: rollout"),
    ),
    (
        "sft-field-on-rl",
        "grpo-7b.yaml",
        _set("data.examples", 1000),
        ("data.examples", "method rl"),
    ),
    ("rl-field-on-sft", "sft-8b.yaml", _set("data.steps", 10), ("data.steps", "method sft")),
    (
        "sft-missing-tokens",
        "sft-8b.yaml",
        _delete("data.tokens_per_example"),
        ("data.tokens_per_example", "required"),
    ),
    (
        "rl-missing-response",
        "grpo-7b.yaml",
        _delete("data.response_tokens"),
        ("data.response_tokens", "required"),
    ),
    (
        "max-below-mean",
        "grpo-7b.yaml",
        _set("data.max_response_tokens", 100),
        ("max_response_tokens", "100", "2048"),
    ),
    (
        "oversample-below-one",
        "grpo-7b.yaml",
        _set("data.oversample_factor", 0.5),
        ("data.oversample_factor", "0.5"),
    ),
    (
        "mfu-above-one",
        "sft-8b.yaml",
        _set("efficiency.train_mfu", 1.5),
        ("efficiency.train_mfu", "1.5"),
    ),
    (
        "unknown-efficiency-key",
        "sft-8b.yaml",
        _set("efficiency.mfu", 0.4),
        ("efficiency.mfu", "unknown key"),
    ),
    ("wrong-type", "sft-8b.yaml", _set("model.layers", "many"), ("model.layers", "'many'")),
    ("block-is-a-list", "sft-8b.yaml", _set("model", [1, 2]), ("model", "[1, 2]")),
    (
        "empty-precision-list",
        "grpo-7b.yaml",
        _set("precisions.rollout", []),
        ("precisions.rollout", "empty"),
    ),
    (
        "unknown-precision",
        "grpo-7b.yaml",
        _set("precisions.rollout", ["fp4"]),
        ("precisions.rollout[0]", "'fp4'"),
    ),
    (
        "unknown-phase-in-precisions",
        "grpo-7b.yaml",
        _set("precisions.rolout", ["bf16"]),
        ("precisions", "'rolout'", "did you mean: rollout"),
    ),
    (
        "active-above-total",
        "sft-8b.yaml",
        _set("model.active_params_b", 9.0),
        ("model", "active_params_b 9.0", "params_b 8.0303"),
    ),
    ("lora-rank-on-full", "sft-8b.yaml", _set("model.lora_rank", 8), ("lora_rank", "finetune")),
    (
        "infinite-epochs",
        "sft-8b.yaml",
        _set("data.epochs", float("inf")),
        ("data.epochs", "inf", "finite"),
    ),
    (
        "nan-mbu",
        "sft-8b.yaml",
        _set("efficiency.decode_mbu", float("nan")),
        ("efficiency.decode_mbu", "nan"),
    ),
    ("empty-name", "sft-8b.yaml", _set("name", ""), ("name", "''")),
    ("newline-in-unknown-key", "sft-8b.yaml", _set("data.a\nb", 1), ("unknown key",)),
]


@pytest.mark.parametrize(
    ("example", "mutate", "expected"),
    [case[1:] for case in BAD_SPECS],
    ids=[case[0] for case in BAD_SPECS],
)
def test_bad_spec_is_one_line_input_error(
    example: str, mutate: Mutation, expected: tuple[str, ...]
) -> None:
    d = example_dict(example)
    mutate(d)
    with pytest.raises(InputError) as info:
        parse_spec(d)
    message = str(info.value)
    assert_one_line(message)
    assert message.startswith("spec: ")
    for text in expected:
        assert text in message, f"{text!r} not in {message!r}"
    assert info.value.exit_code == 2


def test_valid_mutation_control() -> None:
    """The mutation helpers themselves change nothing unless asked (guards the table above)."""
    d = example_dict("grpo-7b.yaml")
    _set("data.steps", 10)(d)
    assert parse_spec(d).data.steps == 10


# ------------------------------------------------------------------------------ files


def _load_error(path: Any) -> str:
    with pytest.raises(InputError) as info:
        load_spec(str(path))
    message = str(info.value)
    assert_one_line(message)
    return message


def test_missing_file(tmp_path: Any) -> None:
    path = tmp_path / "nope.yaml"
    message = _load_error(path)
    assert "not found" in message and "nope.yaml" in message


def test_malformed_yaml(tmp_path: Any) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\nmethod: [sft\nmodel: {\n", encoding="utf-8")
    message = _load_error(path)
    assert "bad.yaml" in message and "not valid YAML" in message and "line" in message


def test_tab_indentation(tmp_path: Any) -> None:
    path = tmp_path / "tabs.yaml"
    path.write_text("name: x\n\tmethod: sft\n", encoding="utf-8")
    message = _load_error(path)
    assert "tabs.yaml" in message and "line 2" in message


def test_top_level_list(tmp_path: Any) -> None:
    path = tmp_path / "list.yaml"
    path.write_text("- name: x\n- method: sft\n", encoding="utf-8")
    message = _load_error(path)
    assert "list.yaml" in message and "mapping" in message and "list" in message


def test_empty_file(tmp_path: Any) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("", encoding="utf-8")
    message = _load_error(path)
    assert "mapping" in message and "NoneType" in message


def test_impossible_date_is_input_error(tmp_path: Any) -> None:
    # well-formed YAML whose timestamp cannot be constructed (ValueError inside PyYAML)
    path = tmp_path / "date.yaml"
    path.write_text("name: 2020-02-30\nmethod: sft\n", encoding="utf-8")
    message = _load_error(path)
    assert "date.yaml" in message and "day is out of range" in message


def test_not_utf8(tmp_path: Any) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes("name: caf\u00e9\n".encode("latin-1"))
    message = _load_error(path)
    assert "latin1.yaml" in message and "UTF-8" in message


def test_directory_instead_of_file(tmp_path: Any) -> None:
    message = _load_error(tmp_path)
    assert "is a directory; pass a file" in message and repr(str(tmp_path)) in message


def test_json_spec_file(tmp_path: Any) -> None:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(example_dict("sft-8b.yaml")), encoding="utf-8")
    assert load_spec(str(path)).name == "sft-8b-chat"
    bad = tmp_path / "bad.json"
    bad.write_text('{"name": "x",', encoding="utf-8")
    message = _load_error(bad)
    assert "bad.json" in message and "line 1" in message


def test_yaml_from_file_with_unknown_key(tmp_path: Any) -> None:
    text = (EXAMPLES / "grpo-7b.yaml").read_text(encoding="utf-8")
    path = tmp_path / "typo.yaml"
    path.write_text(text.replace("  steps: 300", "  stepz: 300"), encoding="utf-8")
    message = _load_error(path)
    assert "typo.yaml" in message and "data.stepz" in message and "steps?" in message


def test_recursive_yaml_anchor_is_input_error(tmp_path: Any) -> None:
    path = tmp_path / "loop.yaml"
    path.write_text("name: &x [*x]\nmethod: sft\n", encoding="utf-8")
    message = _load_error(path)
    assert "name" in message


# ------------------------------------------------------------------------------ properties

_FIELD_NAMES = sorted(
    {
        *ProjectSpec.model_fields,
        *example_dict("grpo-7b.yaml")["data"],
        *example_dict("sft-8b.yaml")["data"],
        *example_dict("grpo-7b.yaml")["model"],
        "phase",
        "gpu",
        "precision",
        "tokens_per_second_per_gpu",
        "gpus",
        "train_mfu",
    }
)

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**6), max_value=10**6)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
    | st.sampled_from(["sft", "rl", "opd", "grpo", "ppo", "dapo", "H100", "bf16", "fp8"])
)
_keys = st.sampled_from(_FIELD_NAMES) | st.text(max_size=8)
junk = st.recursive(
    _scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_keys, children, max_size=4),
    max_leaves=12,
)


def _check_parse(data: Any) -> None:
    try:
        result = parse_spec(data)
    except InputError as exc:
        assert_one_line(str(exc))
    else:
        assert isinstance(result, ProjectSpec)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(_keys, junk, max_size=6))
def test_parse_spec_on_junk_dicts(data: dict[str, Any]) -> None:
    _check_parse(data)


@settings(max_examples=50, deadline=None)
@given(junk)
def test_parse_spec_on_junk_of_any_type(data: Any) -> None:
    _check_parse(data)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    if isinstance(node, dict):
        for key, value in node.items():
            out.append((*prefix, key))
            out.extend(_paths(value, (*prefix, key)))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out.append((*prefix, i))
            out.extend(_paths(value, (*prefix, i)))
    return out


_ACTIONS = ("delete", "junk", "negate", "zero", "rename", "wrap")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_parse_spec_on_mutated_valid_specs(data: st.DataObject) -> None:
    d = example_dict(data.draw(st.sampled_from(EXAMPLE_FILES), label="example"))
    for _ in range(data.draw(st.integers(min_value=1, max_value=4), label="n_mutations")):
        paths = _paths(d)
        if not paths:
            break
        path = data.draw(st.sampled_from(paths), label="path")
        parent: Any = d
        for key in path[:-1]:
            parent = parent[key]
        last = path[-1]
        action = data.draw(st.sampled_from(_ACTIONS), label="action")
        value = parent[last]
        if action == "delete":
            del parent[last]
        elif action == "junk":
            parent[last] = data.draw(junk, label="junk")
        elif action == "negate":
            parent[last] = -value if isinstance(value, int | float) else -1
        elif action == "zero":
            parent[last] = 0
        elif action == "rename" and isinstance(parent, dict):
            parent[data.draw(_keys, label="new_key")] = parent.pop(last)
        elif action == "wrap":
            parent[last] = [value]
    _check_parse(copy.deepcopy(d))


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_parse_mapping_on_random_text(text: str) -> None:
    try:
        result = parse_mapping(text, "spec")
    except InputError as exc:
        assert_one_line(str(exc))
    else:
        assert isinstance(result, dict)


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("{}[]:,-&*!|>'\"#?\n\t 019ab.")), max_size=40))
def test_parse_mapping_on_yaml_punctuation(text: str) -> None:
    try:
        result = parse_mapping(text, "spec")
    except InputError as exc:
        assert_one_line(str(exc))
    else:
        assert isinstance(result, dict)


@pytest.mark.parametrize(
    "text",
    [
        "2020-02-30",
        "a: 2020-02-30",
        "a: !!int x",
        "a: !!float abc",
        "a: !!timestamp 2020-13-01",
        "[" * 600,
        "{a: " * 600,
        "a: !!python/object:os.system x",
        "? [a, b]\n: 1",
    ],
)
def test_parse_mapping_edge_texts(text: str) -> None:
    with pytest.raises(InputError) as info:
        parse_mapping(text, "spec")
    assert_one_line(str(info.value))


def test_parse_mapping_json_origin() -> None:
    assert parse_mapping('{"a": 1}', "spec", "x.json") == {"a": 1}
    with pytest.raises(InputError) as info:
        parse_mapping("[1, 2]", "spec", "x.json")
    assert "x.json" in str(info.value) and "list" in str(info.value)


def test_duplicate_yaml_keys_are_rejected(tmp_path) -> None:
    path = tmp_path / "dup.yaml"
    path.write_text("name: a\nmethod: sft\nname: b\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"line 3.*duplicate key 'name'"):
        load_spec(str(path))


def test_booleans_are_not_counts() -> None:
    d = example_dict("grpo-7b.yaml")
    d["data"]["steps"] = True
    with pytest.raises(InputError, match=r"data\.steps = True"):
        parse_spec(d)


def test_sft_rejects_rl_pipelines() -> None:
    d = example_dict("sft-8b.yaml")
    d["pipeline"] = "async"
    with pytest.raises(InputError, match="pipeline async applies to rl/opd"):
        parse_spec(d)


def test_every_file_model_derives_from_the_one_strict_base() -> None:
    """Spec, policy, custom catalog, portfolio and plan share one pydantic base: unknown keys
    rejected, frozen, no NaN/inf; no module keeps its own copy of that config."""
    import inspect
    import math
    import pathlib
    import re

    import pydantic

    import ptplan.planfile.schema as plan_schema
    import ptplan.policies.model as policy
    import ptplan.providers.custom as custom
    import ptplan.reservations.portfolio as portfolio
    import ptplan.spec.project as project
    from ptplan.core.yamlio import StrictModel

    assert StrictModel.model_config == {"extra": "forbid", "frozen": True,
                                        "allow_inf_nan": False}
    for module in (project, policy, custom, portfolio, plan_schema):
        models = [c for _, c in inspect.getmembers(module, inspect.isclass)
                  if issubclass(c, pydantic.BaseModel) and c.__module__ == module.__name__]
        assert models, module.__name__
        for model in models:
            assert issubclass(model, StrictModel), model
            for key in ("extra", "frozen", "allow_inf_nan"):
                assert model.model_config[key] == StrictModel.model_config[key], (model, key)
        source = pathlib.Path(inspect.getfile(module)).read_text(encoding="utf-8")
        assert not re.search(r"ConfigDict\([^)]*\b(extra|frozen)=", source), module.__name__
    data = example_dict("grpo-7b.yaml")
    data["model"]["params_b"] = math.nan
    with pytest.raises(InputError, match="params_b"):
        parse_spec(data)
    spec = parse_spec(example_dict("grpo-7b.yaml"))
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        spec.name = "x"  # type: ignore[misc]
