"""``efficiency.rollout_tp``: the rollout engine the job runs (veRL
``rollout.tensor_model_parallel_size``, OpenRLHF ``--vllm.tensor_parallel_size``) instead of the
faster of the smallest engine and one spanning the node (docs/demand-model.md §4.6,
docs/spec.md §11)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from ptplan.cli.app import app
from ptplan.demand.cluster import run_on_cluster
from ptplan.planfile.digest import spec_digest
from ptplan.spec.defaults import applied_defaults
from ptplan.spec.project import ProjectSpec

ROOT = Path(__file__).resolve().parents[1]


def _spec(**eff: object) -> dict:
    d = yaml.safe_load((ROOT / "examples" / "grpo-7b.yaml").read_text())
    d["efficiency"] = {**(d.get("efficiency") or {}), **eff}
    return d


def _job(tmp_path: Path, params_b: float, layers: int, hidden: int, heads: int,
         **eff: object) -> Path:
    """The example with a larger Llama-shaped model (8 KV heads of 128) and ``eff``, written."""
    d = _spec(**eff)
    d["model"] = {"params_b": params_b, "layers": layers, "hidden_size": hidden, "heads": heads,
                  "kv_heads": 8, "head_dim": 128}
    f = tmp_path / "job.yaml"
    f.write_text(yaml.safe_dump(d))
    return f


def _run(**eff: object):  # type: ignore[no-untyped-def]
    return run_on_cluster(ProjectSpec.model_validate(_spec(**eff)), "H100", 16, 8, "sync",
                          {"rollout": 8, "update": 8})


@pytest.mark.parametrize("tp", [1, 2, 4, 7])
def test_the_rollout_runs_on_the_engine_the_spec_names(tp: int) -> None:
    """8 rollout GPUs: engines of tp GPUs (each dividing the 28 heads), ⌊8 / tp⌋ of them; unset,
    the model's choice is one of its two candidates (the smallest that holds the 7.6B weights,
    or the node)."""
    run = _run(rollout_tp=tp)
    assert run.layout["rollout"] == {"tp": tp, "dp": 8 // tp}
    free = _run().layout["rollout"]
    assert free is not None and free["tp"] in (1, 8)


def test_each_engine_size_is_its_own_prediction() -> None:
    """Stating the job's engine is a different prediction per size, never the same one
    relabelled; unset, the model takes the faster of its candidates, the smallest engine (one
    GPU for 7.6B on H100) among them."""
    times = {tp: _run(rollout_tp=tp).phases["rollout"] for tp in (1, 2, 4)}
    assert len({round(t, 6) for t in times.values()}) == 3
    assert _run().phases["rollout"] <= times[1] + 1e-9


def test_an_engine_too_small_for_the_weights_is_named(tmp_path: Path) -> None:
    f = _job(tmp_path, 70.6, 80, 8192, 64, rollout_tp=1)
    r = CliRunner().invoke(app, ["estimate", str(f), "--cluster", "16xA100-40GB"])
    assert r.exit_code == 2
    line = r.output.strip()
    assert "\n" not in line
    assert "efficiency.rollout_tp 1" in line and "raise rollout_tp or remove it" in line


def test_out_of_range_values_are_refused() -> None:
    for bad in (0, 65, 2.0, "2"):
        with pytest.raises(ValueError, match="rollout_tp"):
            ProjectSpec.model_validate(_spec(rollout_tp=bad))


def test_unset_keeps_a_specs_digest_and_is_listed_as_chosen_per_pool() -> None:
    plain = ProjectSpec.model_validate(_spec())
    dump = plain.model_dump(mode="json")
    eff = {k: v for k, v in dump["efficiency"].items() if k != "rollout_tp"}
    assert spec_digest(dump) == spec_digest({**dump, "efficiency": eff})
    two = ProjectSpec.model_validate(_spec(rollout_tp=2)).model_dump(mode="json")
    assert spec_digest(two) != spec_digest(dump)
    line = ("efficiency.rollout_tp = per pool (the faster of the smallest engine that holds "
            "the weights and one spanning the node)")
    assert line in applied_defaults(plain)
    assert line not in applied_defaults(ProjectSpec.model_validate(_spec(rollout_tp=2)))


def test_a_plan_buys_and_renders_the_engine_the_spec_names(tmp_path: Path) -> None:
    """The planner prices rollout engines of 2 GPUs, the verifier re-checks them (the plan is
    written), and `render` writes 2 where veRL reads it."""
    f = tmp_path / "job.yaml"
    f.write_text(yaml.safe_dump(_spec(rollout_tp=2)))
    out = tmp_path / "plan.json"
    r = CliRunner().invoke(app, ["plan", str(f), "--format", "json", "-o", str(out)])
    assert r.exit_code == 0, r.output
    import json

    plan = json.loads(out.read_text())
    rollout = next(p for p in plan["phases"] if p["name"] == "rollout")
    assert rollout["replica_gpus"] == 2
    r = CliRunner().invoke(app, ["render", str(out), "--spec", str(f), "--target", "skypilot",
                                 "-o", str(tmp_path / "deploy")])
    assert r.exit_code == 0, r.output
    text = "\n".join(p.read_text() for p in (tmp_path / "deploy").rglob("*") if p.is_file())
    assert "actor_rollout_ref.rollout.tensor_model_parallel_size=2" in text


def test_an_engine_must_split_the_attention_heads(tmp_path: Path) -> None:
    """vLLM shards the query heads over the engine's GPUs: the example's 28 heads take 1, 2, 4,
    7, 14 or 28; 3 is refused in one line naming the field, the value and the choices."""
    with pytest.raises(ValueError, match=r"efficiency.rollout_tp 3: .* 28 attention heads .* "
                                         r"use one of 1, 2, 4, 7, 14, 28"):
        ProjectSpec.model_validate(_spec(rollout_tp=3))
    f = tmp_path / "job.yaml"
    f.write_text(yaml.safe_dump(_spec(rollout_tp=3)))
    r = CliRunner().invoke(app, ["estimate", str(f)])
    assert r.exit_code == 2 and "\n" not in r.output.strip()
    assert "rollout_tp 3" in r.output



def test_a_pinned_engine_too_small_is_named_in_the_reference_estimate(tmp_path: Path) -> None:
    """`estimate` without a cluster reports, per GPU, why the rollout does not fit: the stated
    engine (405B on one GPU) is named."""
    f = _job(tmp_path, 405.0, 126, 16384, 128, rollout_tp=1)
    r = CliRunner().invoke(app, ["estimate", str(f), "--format", "json"])
    assert r.exit_code == 0, r.output
    assert "efficiency.rollout_tp 1: 405B weights at bf16 leave no KV cache on 1 x H100" \
        in r.output
