"""``runs import-metrics``: veRL and OpenRLHF metric dicts from JSONL, TensorBoard event files
written with tensorboardX, and a real MLflow tracking store (SQLite) read with the mlflow
client; names mapped to the plan's phases; names that map to nothing refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ptplan.core.errors import InputError
from ptplan.ledger import metrics as mx

VERL_STEP = {  # a veRL 0.9 PPO step as its file logger writes it (verl/utils/tracking.py)
    "timing_s/gen": 41.5, "timing_s/reward": 2.0, "timing_s/old_log_prob": 6.0,
    "timing_s/ref": 5.5, "timing_s/adv": 0.5, "timing_s/update_actor": 30.0,
    "timing_s/update_weights": 1.25, "timing_s/step": 87.0, "timing_s/save_checkpoint": 0.0,
    "perf/throughput": 1520.5, "perf/total_num_tokens": 1058000, "perf/time_per_step": 87.0,
    "response_length/mean": 612.25, "actor/pg_loss": -0.01, "critic/score/mean": 0.4,
    "val-core/openai/gsm8k/acc/mean@1": 0.71,
}


def write_verl(path: Path, steps: int = 3) -> Path:
    with path.open("w", encoding="utf-8") as f:
        for s in range(1, steps + 1):
            f.write(json.dumps({"step": s, "data": {k: v * s if k == "timing_s/gen" else v
                                                    for k, v in VERL_STEP.items()}}) + "\n")
    return path


def test_verl_jsonl_maps_to_phases(tmp_path: Path) -> None:
    ms = mx.read_jsonl(write_verl(tmp_path / "verl.jsonl"))
    names = {m.name for m in ms}
    assert "actor/pg_loss" not in names and "critic/score/mean" not in names
    by = {(m.name, m.step): m for m in ms}
    assert by[("timing_s/gen", 2)].phase == "rollout" and by[("timing_s/gen", 2)].value == 83.0
    assert by[("timing_s/ref", 1)].phase == "scoring"
    assert by[("timing_s/update_weights", 1)].phase == "weight_sync"
    assert by[("perf/throughput", 3)].kind == "throughput"
    assert by[("val-core/openai/gsm8k/acc/mean@1", 1)].kind == "eval"
    secs = mx.phase_seconds_per_step(ms)
    assert secs["rollout"] == (41.5 * 2, 3)  # mean of 41.5, 83, 124.5
    assert secs["scoring"] == (2.0 + 6.0 + 5.5, 3)  # reward + old_log_prob + ref, per step
    assert secs["update"] == (30.5, 3)  # adv + update_actor


def test_openrlhf_flat_dicts(tmp_path: Path) -> None:
    path = tmp_path / "orlhf.jsonl"
    rows = [{"train/global_step": s, "train/timing/generation": 20.0, "train/timing/"
             "make_experience": 8.0, "train/timing/ppo_train": 12.0, "train/timing/broadcast":
             1.0, "train/rollout/response_length_mean": 400.0, "train/policy_loss": 0.1,
             "eval_reward_mean": 0.3} for s in (1, 2)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    ms = mx.read_jsonl(path)
    secs = mx.phase_seconds_per_step(ms)
    assert secs == {"rollout": (20.0, 2), "scoring": (8.0, 2), "update": (12.0, 2),
                    "weight_sync": (1.0, 2)}
    assert {m.name for m in ms if m.kind == "eval"} == {"eval_reward_mean"}


def test_names_that_map_to_nothing_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.jsonl"
    path.write_text('{"step": 1, "data": {"loss": 1.0, "lr": 0.1}}\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"no metric maps to a phase or an eval \(loss, lr\)"):
        mx.read_jsonl(path)
    path.write_text('{"data": {"timing_s/gen": 1.0}}\n', encoding="utf-8")
    with pytest.raises(InputError, match="line 1 has no step"):
        mx.read_jsonl(path)
    path.write_text('{"step": 1,\n', encoding="utf-8")
    with pytest.raises(InputError, match="line 1 is not JSON"):
        mx.read_jsonl(path)


def test_tensorboard_event_files(tmp_path: Path) -> None:
    from tensorboardX import SummaryWriter

    w = SummaryWriter(logdir=str(tmp_path / "tb"))
    for s in range(1, 5):
        w.add_scalar("timing_s/gen", 10.0 * s, s)
        w.add_scalar("timing_s/update_actor", 4.0, s)
        w.add_scalar("actor/entropy", 0.5, s)
    w.add_scalar("val-core/gsm8k/acc/mean@1", 0.5, 4)
    w.close()
    ms = mx.read_tensorboard(tmp_path / "tb")
    assert mx.phase_seconds_per_step(ms) == {"rollout": (25.0, 4), "update": (4.0, 4)}
    # tensorboardX cleans tags as TensorBoard does ('@' -> '_')
    assert {m.name for m in ms} == {"timing_s/gen", "timing_s/update_actor",
                                    "val-core/gsm8k/acc/mean_1"}
    bad = tmp_path / "events.out.tfevents.1.bad"
    bad.write_bytes(b"\x05\x00\x00")
    with pytest.raises(InputError, match="truncated event file"):
        mx.read_tensorboard(bad)
    with pytest.raises(InputError, match="no event files"):
        mx.read_tensorboard(tmp_path / "nothing-here")


def test_mlflow_tracking_store(tmp_path: Path) -> None:
    from mlflow.entities import Metric as MlflowMetric
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    exp = client.create_experiment("grpo")
    run = client.create_run(exp)
    client.log_batch(run.info.run_id, metrics=[
        MlflowMetric(k, v, 0, s) for s in (1, 2, 3)
        for k, v in (("timing_s/gen", 30.0 + s), ("timing_s/update_actor", 9.0),
                     ("actor/kl_loss", 0.01))])
    client.set_terminated(run.info.run_id)
    ms = mx.read_mlflow(uri, run.info.run_id)
    assert mx.phase_seconds_per_step(ms) == {"rollout": (32.0, 3), "update": (9.0, 3)}
    assert all(m.source == "mlflow" for m in ms)
    with pytest.raises(InputError, match="--mlflow"):
        mx.read_mlflow(uri, "0" * 32)
