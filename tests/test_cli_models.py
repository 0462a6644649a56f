"""`ptplan models`, `ptplan models show` and `ptplan init` (issue #42) from the command line:
what they print, their one-line errors (exit 2), and that every starter spec plans."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

import ptplan
from ptplan.cli.app import app
from ptplan.spec import presets

runner = CliRunner()
KEYS = {"params_b", "active_params_b", "layers", "hidden_size", "heads", "kv_heads", "head_dim",
        "kv_bytes_per_token", "context_length", "source", "read_on", "spec_fields"}


def test_models_lists_every_preset() -> None:
    r = runner.invoke(app, ["models"], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    for p in presets.presets().values():
        assert p.name in r.output
    assert "KV KiB/token" in r.output and "context" in r.output


def test_models_json_and_search() -> None:
    r = runner.invoke(app, ["models", "--search", "qwen3 moe", "--format", "json"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.output)
    names = {x["name"] for x in rows}
    assert "Qwen/Qwen3-30B-A3B" in names and "Qwen/Qwen3-8B" not in names
    assert all(x["active_params_b"] < x["params_b"] for x in rows)
    assert rows == ptplan.models("qwen3 moe")


def test_models_search_without_a_match_is_one_line() -> None:
    r = runner.invoke(app, ["models", "--search", "no-such-model-xyz"])
    assert r.exit_code == 2
    assert r.output.count("\n") == 1 and "--search" in r.output


def test_show_json_has_the_documented_keys() -> None:
    r = runner.invoke(app, ["models", "show", "qwen/qwen2.5-7b", "--format", "json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert set(d) >= KEYS
    assert d["name"] == "Qwen/Qwen2.5-7B" and d["kv_heads"] == 4 and d["head_dim"] == 128
    assert d["kv_bytes_per_token"] == 2 * 28 * 4 * 128 * 2
    assert d == ptplan.model_preset("Qwen/Qwen2.5-7B")


def test_show_table() -> None:
    r = runner.invoke(app, ["models", "show", "mistralai/Mixtral-8x7B-v0.1"],
                      env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "kv_bytes_per_token" in r.output and "experts_per_token" in r.output
    assert "46,702,792,704" in r.output


def test_unknown_name_is_one_line_with_the_nearest() -> None:
    r = runner.invoke(app, ["models", "show", "Qwen/Qwen2.5-7"])
    assert r.exit_code == 2
    assert r.output.count("\n") == 1
    assert "Qwen/Qwen2.5-7B" in r.output and "nearest" in r.output


def test_unknown_preset_in_a_spec_exits_2(tmp_path: Path) -> None:
    spec = yaml.safe_load(Path("examples/grpo-7b.yaml").read_text())
    spec["model"] = {"preset": "meta-llama/Llama-3.1-8", "finetune": "full"}
    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump(spec))
    r = runner.invoke(app, ["plan", str(f)])
    assert r.exit_code == 2 and r.output.count("\n") == 1
    assert "meta-llama/Llama-3.1-8B" in r.output


@pytest.mark.parametrize("method", ["sft", "rl", "opd"])
def test_init_writes_a_spec_that_plans_as_written(method: str, tmp_path: Path) -> None:
    out = tmp_path / f"{method}.yaml"
    r = runner.invoke(app, ["init", "--method", method, "-o", str(out)])
    assert r.exit_code == 0, r.output
    text = out.read_text()
    assert text.startswith("# Written by `ptplan init`") and "preset: " in text
    assert text == ptplan.init_spec(method)  # type: ignore[arg-type]
    r = runner.invoke(app, ["plan", str(out), "--format", "json", "-o", str(tmp_path / "p.json")])
    assert r.exit_code == 0, r.output
    plan = json.loads((tmp_path / "p.json").read_text())
    assert any(line.startswith("model: ") and "from preset" in line
               for line in plan["defaults_applied"])


@pytest.mark.parametrize(("method", "model"), [("rl", "meta-llama/Llama-3.1-70B"),
                                               ("rl", "Qwen/Qwen3-30B-A3B"),
                                               ("sft", "Qwen/Qwen2.5-0.5B")])
def test_init_plans_for_other_models(method: str, model: str, tmp_path: Path) -> None:
    out = tmp_path / "s.yaml"
    r = runner.invoke(app, ["init", "--method", method, "--model", model, "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert f"preset: {model}" in out.read_text()
    r = runner.invoke(app, ["plan", str(out), "--format", "json", "-o", str(tmp_path / "p.json")])
    assert r.exit_code == 0, r.output


def test_init_opd_teacher_and_errors() -> None:
    r = runner.invoke(app, ["init", "--method", "opd", "--model", "Qwen/Qwen3-4B",
                            "--teacher", "Qwen/Qwen3-14B"])
    assert r.exit_code == 0, r.output
    assert "preset: Qwen/Qwen3-4B" in r.output and "preset: Qwen/Qwen3-14B" in r.output
    r = runner.invoke(app, ["init", "--method", "rl", "--teacher", "Qwen/Qwen3-14B"])
    assert r.exit_code == 2 and "--teacher" in r.output and r.output.count("\n") == 1
    r = runner.invoke(app, ["init", "--method", "dpo"])
    assert r.exit_code == 2 and "--method" in r.output
    r = runner.invoke(app, ["init", "--model", "Qwen/Qwen3-9B"])
    assert r.exit_code == 2 and "--model" in r.output and "Qwen/Qwen3-8B" in r.output


def test_init_does_not_overwrite_without_force(tmp_path: Path) -> None:
    out = tmp_path / "s.yaml"
    out.write_text("mine\n")
    r = runner.invoke(app, ["init", "-o", str(out)])
    assert r.exit_code == 2 and out.read_text() == "mine\n"
    r = runner.invoke(app, ["init", "-o", str(out), "--force"])
    assert r.exit_code == 0 and out.read_text().startswith("# Written by")


def test_show_json_keys_and_values_are_the_presets() -> None:
    d = ptplan.model_preset("mistralai/Mixtral-8x7B-v0.1")
    assert list(d) == [
        "name", "architecture", "params", "params_b", "active_params", "active_params_b",
        "embedding_params", "layers", "hidden_size", "heads", "kv_heads", "head_dim", "experts",
        "experts_per_token", "kv_latent_dim", "sliding_window", "sliding_window_layers",
        "kv_bytes_per_token", "kv_bytes_per_token_note", "context_length", "vocab_size",
        "spec_fields", "config", "source", "read_on"]
    assert (d["architecture"], d["params"], d["active_params"]) == \
        ("mixtral", 46_702_792_704, 12_879_925_248)
    assert (d["params_b"], d["active_params_b"]) == (46.7028, 12.8799)
    assert (d["embedding_params"], d["vocab_size"]) == (2 * 32000 * 4096, 32000)
    assert (d["layers"], d["hidden_size"], d["heads"], d["kv_heads"], d["head_dim"]) == \
        (32, 4096, 32, 8, 128)
    assert (d["experts"], d["experts_per_token"], d["kv_latent_dim"]) == (8, 2, None)
    assert (d["sliding_window"], d["sliding_window_layers"]) == (None, None)
    assert d["kv_bytes_per_token"] == 2 * 32 * 8 * 128 * 2 and d["context_length"] == 32768
    assert d["config"] == "hf_configs/mistralai__Mixtral-8x7B-v0.1.json"
    assert d["source"].startswith("github:ai-dynamo/aiconfigurator")
    assert d["read_on"] == "2026-12-07"
    assert "sliding_window" in d["kv_bytes_per_token_note"]
    assert d["spec_fields"] == {"params_b": 46.7028, "layers": 32, "hidden_size": 4096,
                                "heads": 32, "kv_heads": 8, "head_dim": 128,
                                "active_params_b": 12.8799, "experts_per_token": 2}
    g = ptplan.model_preset("google/gemma-3-1b-it")
    assert (g["sliding_window"], g["sliding_window_layers"]) == (512, 22)
    assert g["spec_fields"]["sliding_window_layers"] == 22


@pytest.mark.parametrize(("method", "model", "teacher", "name", "hours", "usd"), [
    # about 8B active: the examples' deadlines and budgets
    ("rl", None, None, "grpo-qwen2-5-7b", 72, 25000),
    # 8.03B: x1.004 -> just over the example's 48 h and $10,000, rounded up to the next
    # half-day and $5,000
    ("sft", None, None, "sft-llama-3-1-8b", 60, 15000),
    # 8.19B student, 32.76B teacher counted at a quarter (it scores, it is not trained):
    # x1.024 -> ceil(96 x sqrt(1.024) / 12) x 12 = 108 h, ceil(40,000 x 1.024 / 5,000) x 5,000
    ("opd", None, None, "opd-qwen3-8b", 108, 45000),
    # 70.55B: x8.82 -> ceil(72 x 2.97 / 12) x 12 = 216 h, ceil(25,000 x 8.82 / 5,000) x 5,000
    ("rl", "meta-llama/Llama-3.1-70B", None, "grpo-llama-3-1-70b", 216, 225000),
    # a small teacher does not shrink the student's figures below the examples'
    ("opd", "Qwen/Qwen3-4B", "Qwen/Qwen3-8B", "opd-qwen3-4b", 96, 40000),
])
def test_init_sizes_the_deadline_and_budget_by_active_parameters(
        method: str, model: str | None, teacher: str | None, name: str, hours: int,
        usd: int) -> None:
    text = ptplan.init_spec(method, model, teacher)  # type: ignore[arg-type]
    spec = yaml.safe_load(text)
    assert spec["name"] == name and spec["method"] == method
    assert spec["sla"]["deadline_hours"] == hours and spec["budget"]["max_usd"] == usd
    assert (spec["model"].get("finetune") == "full") == (method != "opd")
    assert ("pipeline" in spec) == (method != "sft")


def test_init_comments_say_what_each_model_is() -> None:
    text = ptplan.init_spec("rl", "Qwen/Qwen3-30B-A3B")
    assert ("model:  # MoE, 3.4B of 30.5B active, 8 of 128 experts per token; 48 layers, 4 KV "
            "heads of dim 128 (`ptplan models show Qwen/Qwen3-30B-A3B`)") in text
    text = ptplan.init_spec("sft")
    assert ("model:  # 8.03B dense; 32 layers, 8 KV heads of dim 128 (`ptplan models show "
            "meta-llama/Llama-3.1-8B`)") in text
    assert text.startswith("# Written by `ptplan init`. Plan it with `ptplan plan THIS.yaml`; "
                           "change any figure to your job's.\n# The spec reference: "
                           "docs/spec.md. Fields typed beside a preset override it.\n")
