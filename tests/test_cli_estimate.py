"""``ptplan estimate`` and ``ptplan schema spec`` through Typer's CliRunner."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import EXAMPLES, example_dict
from typer.testing import CliRunner

from ptplan.cli.app import app

runner = CliRunner()
GRPO = str(EXAMPLES / "grpo-7b.yaml")


def _invoke(*args: str) -> Any:
    return runner.invoke(app, list(args))


def _assert_user_error(result: Any, *expected: str) -> str:
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert result.stdout == ""
    err = result.stderr
    assert "Traceback" not in result.output and "Traceback" not in err
    assert len(err.splitlines()) == 1, err
    assert err.startswith("error: ")
    for text in expected:
        assert text in err, (text, err)
    return err


def _json(result: Any) -> dict[str, Any]:
    assert result.exit_code == 0, (result.exit_code, result.output)
    return json.loads(result.stdout)


def test_estimate_json() -> None:
    report = _json(_invoke("estimate", GRPO, "--format", "json", "--gpu", "H100"))
    assert report["spec_name"] == "grpo-7b-math"
    assert report["method"] == "rl" and report["algorithm"] == "grpo"
    assert report["steps"] == 300
    names = [p["name"] for p in report["phases"]]
    assert names == ["rollout", "scoring", "update", "eval"]
    for phase in report["phases"]:
        assert phase["flops"] > 0 and phase["tokens"] > 0
        assert phase["gpu_hours"]["H100"] > 0
        assert phase["by_gpu"]["H100"]["fits"] is True
    rollout = report["phases"][0]
    # 300 steps x 256 prompts x 8 samples x 2048 response tokens (6 significant digits)
    assert rollout["tokens"] == pytest.approx(300 * 256 * 8 * 2048, rel=1e-5)
    assert report["schema_version"] == 2
    assert "tail_factor_applied" not in rollout  # the drain model replaced the tail factor
    assert rollout["synchronous_drain"] is True  # pipeline auto: each step waits for its longest
    assert report["phases"][1]["synchronous_drain"] is None  # scoring has no decode
    for phase in report["phases"]:
        cell = phase["by_gpu"]["H100"]
        ref = cell["reference_gpus"]
        assert ref >= cell["replica_gpus"] >= 1
        assert cell["busy_hours_at_reference"] * ref == pytest.approx(cell["gpu_hours"], rel=2e-3)
        assert 0 < cell["latency_floor_hours"] <= cell["busy_hours_at_reference"] * (1 + 1e-3)
        assert cell["tokens_per_second_per_gpu"] == pytest.approx(
            phase["tokens"] / (cell["gpu_hours"] * 3600), rel=2e-3)
        assert cell["calibrated"] is False and "calibration" not in cell
    decode = rollout["by_gpu"]["H100"]["decode"]
    # the reference pool keeps every replica's batch full: 256 x 8 sequences per step
    assert decode["replicas"] * decode["replica_gpus"] == rollout["by_gpu"]["H100"][
        "reference_gpus"]
    assert decode["sequences_per_replica"] * decode["replicas"] == pytest.approx(256 * 8)
    assert decode["sequences_per_replica"] <= decode["batch_cap"]
    assert decode["length_shape"] == "max-entropy"  # only the mean and the cap are given
    assert 2048 < decode["longest_response_tokens"] <= 8192  # above the mean, at most the cap
    # the batch drains as responses finish: the run takes longer than at a full batch
    run, full = decode["seconds_per_run"], decode["seconds_per_run_if_batch_stayed_full"]
    assert run > full > 0
    assert decode["drain_share"] == pytest.approx(1 - full / run, abs=2e-3)
    layout = report["phases"][2]["by_gpu"]["H100"]["layout"]  # update: the layout at reference
    assert layout["tp"] * layout["cp"] * layout["pp"] * layout["dp"] == \
        report["phases"][2]["by_gpu"]["H100"]["reference_gpus"]
    totals = report["totals"]
    assert totals["flops"] == pytest.approx(sum(p["flops"] for p in report["phases"]), rel=1e-3)
    phase_hours = sum(p["gpu_hours"]["H100"] for p in report["phases"])
    ckpt = report["checkpoint"]["gpu_hours"]["H100"]
    assert totals["gpu_hours"]["H100"] == pytest.approx(phase_hours + ckpt, rel=1e-3)
    assert report["checkpoint"]["count"] == 300 // 25
    assert any(d.startswith("efficiency.") for d in report["defaults_applied"])


def test_estimate_async_pipeline_overlaps_the_drain(tmp_path: Path) -> None:
    """With ``pipeline: async`` the drain overlaps training: generation is reported without it
    and never takes longer than the synchronous step."""
    d = example_dict("grpo-7b.yaml")
    d["pipeline"] = "async"
    path = tmp_path / "async.yaml"
    path.write_text(yaml.safe_dump(d), encoding="utf-8")
    asyn = _json(_invoke("estimate", str(path), "--format", "json", "--gpu", "H100"))
    sync = _json(_invoke("estimate", GRPO, "--format", "json", "--gpu", "H100"))
    assert asyn["pipeline_assumed"] == "async"
    for a, s in zip(asyn["phases"], sync["phases"], strict=True):
        if a["name"] in ("rollout", "eval"):
            assert a["synchronous_drain"] is False and s["synchronous_drain"] is True
            assert a["gpu_hours"]["H100"] <= s["gpu_hours"]["H100"] * (1 + 1e-3)
        else:
            assert a["gpu_hours"] == s["gpu_hours"]  # training and scoring do not drain


def test_estimate_gpu_options_limit_keys() -> None:
    report = _json(_invoke("estimate", GRPO, "--format", "json", "--gpu", "H100", "--gpu", "L40S"))
    assert set(report["totals"]["gpu_hours"]) == {"H100", "L40S"}
    for phase in report["phases"]:
        assert set(phase["gpu_hours"]) == {"H100", "L40S"}
        assert set(phase["by_gpu"]) == {"H100", "L40S"}
    # the faster, higher-bandwidth GPU needs fewer GPU-hours
    assert report["totals"]["gpu_hours"]["H100"] < report["totals"]["gpu_hours"]["L40S"]


def test_estimate_gpu_alias_option() -> None:
    report = _json(_invoke("estimate", GRPO, "--format", "json", "--gpu", "h100-mega"))
    assert set(report["totals"]["gpu_hours"]) == {"H100"}


def test_estimate_defaults_to_catalog_gpus() -> None:
    from ptplan.providers.embedded import embedded_catalog

    report = _json(_invoke("estimate", GRPO, "--format", "json"))
    assert set(report["totals"]["gpu_hours"]) == set(embedded_catalog().gpus())


def test_estimate_gpu_that_lacks_precision_is_reported_not_failed() -> None:
    report = _json(
        _invoke("estimate", GRPO, "--format", "json", "--gpu", "A100-80GB", "--precision", "fp8")
    )
    cell = report["phases"][0]["by_gpu"]["A100-80GB"]
    assert cell["fits"] is False and "fp8" in cell["reason"]
    assert report["totals"]["gpu_hours"]["A100-80GB"] is None


def test_estimate_fp8_precision_is_faster_for_rollout() -> None:
    bf16 = _json(_invoke("estimate", GRPO, "--format", "json", "--gpu", "H100"))
    fp8 = _json(
        _invoke("estimate", GRPO, "--format", "json", "--gpu", "H100", "--precision", "fp8")
    )
    assert fp8["phases"][0]["gpu_hours"]["H100"] < bf16["phases"][0]["gpu_hours"]["H100"]


def test_estimate_sft_has_no_rollout() -> None:
    report = _json(
        _invoke("estimate", str(EXAMPLES / "sft-8b.yaml"), "--format", "json", "--gpu", "H100")
    )
    assert [p["name"] for p in report["phases"]] == ["update", "eval"]
    assert report["step_unit"] == "optimizer step"
    update = report["phases"][0]
    assert update["tokens"] == pytest.approx(200_000 * 2048 * 3, rel=1e-5)


def test_estimate_opd_with_custom_catalog(tmp_path: Path) -> None:
    catalog = {
        "as_of": dt.date.today().isoformat(),
        "offers": [
            {
                "provider": "lab",
                "region": "local",
                "instance_type": "l40sx4",
                "gpu": "L40S",
                "gpus_per_node": 4,
                "on_demand_usd_per_hour": 6.0,
            },
            {
                "provider": "lab",
                "region": "local",
                "instance_type": "h200x8",
                "gpu": "H200",
                "gpus_per_node": 8,
                "on_demand_usd_per_hour": 30.0,
            },
        ],
    }
    path = tmp_path / "lab.yaml"
    path.write_text(yaml.safe_dump(catalog), encoding="utf-8")
    report = _json(
        _invoke(
            "estimate",
            str(EXAMPLES / "opd-8b-from-32b.yaml"),
            "--format",
            "json",
            "--catalog",
            str(path),
        )
    )
    assert set(report["totals"]["gpu_hours"]) == {"H200", "L40S"}
    assert [p["name"] for p in report["phases"]] == ["rollout", "scoring", "update", "eval"]
    teacher = report["phases"][1]["parts"]
    assert [p["name"] for p in teacher] == ["teacher"]


def test_estimate_writes_output_file(tmp_path: Path) -> None:
    out = tmp_path / "sub" / "report.json"
    result = _invoke("estimate", GRPO, "--format", "json", "--gpu", "H100", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    assert json.loads(out.read_text(encoding="utf-8"))["spec_name"] == "grpo-7b-math"
    assert "wrote" in result.stderr


@pytest.mark.parametrize("fmt", ["table", "markdown"])
def test_estimate_text_formats(fmt: str) -> None:
    result = _invoke("estimate", GRPO, "--format", fmt, "--gpu", "H100")
    assert result.exit_code == 0, result.output
    assert "rollout" in result.stdout and "H100" in result.stdout


def test_estimate_bad_spec(tmp_path: Path) -> None:
    d = example_dict("grpo-7b.yaml")
    d["data"]["stepz"] = d["data"].pop("steps")
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(d), encoding="utf-8")
    _assert_user_error(
        _invoke("estimate", str(path), "--gpu", "H100"), "bad.yaml", "data.stepz", "steps?"
    )


def test_estimate_malformed_yaml(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("name: [x\n", encoding="utf-8")
    _assert_user_error(
        _invoke("estimate", str(path), "--format", "json"), "broken.yaml", "not valid YAML"
    )


def test_estimate_infinite_value(tmp_path: Path) -> None:
    text = (EXAMPLES / "sft-8b.yaml").read_text(encoding="utf-8")
    path = tmp_path / "inf.yaml"
    path.write_text(text.replace("epochs: 3", "epochs: .inf"), encoding="utf-8")
    _assert_user_error(_invoke("estimate", str(path), "--gpu", "H100"), "data.epochs")


def test_estimate_missing_spec_file(tmp_path: Path) -> None:
    _assert_user_error(_invoke("estimate", str(tmp_path / "nope.yaml")), "nope.yaml", "not found")


def test_estimate_unknown_gpu() -> None:
    _assert_user_error(
        _invoke("estimate", GRPO, "--gpu", "H1000"), "--gpu", "'H1000'", "did you mean"
    )


def test_estimate_unknown_precision() -> None:
    _assert_user_error(
        _invoke("estimate", GRPO, "--gpu", "H100", "--precision", "fp4"), "--precision", "'fp4'"
    )


def test_estimate_unknown_catalog() -> None:
    _assert_user_error(
        _invoke("estimate", GRPO, "--catalog", "embeded"), "--catalog", "did you mean: embedded"
    )


def test_schema_spec() -> None:
    result = _invoke("schema", "spec")
    assert result.exit_code == 0, result.output
    schema = json.loads(result.stdout)
    assert "properties" in schema
    assert {"name", "method", "model", "data"} <= set(schema["properties"])
    assert set(schema["required"]) >= {"name", "method", "model", "data"}
    assert schema["additionalProperties"] is False
