"""``efficiency.rollout_tp``: the rollout engine the job runs (veRL
``rollout.tensor_model_parallel_size``, OpenRLHF ``--vllm.tensor_parallel_size``) instead of the
faster of the smallest engine and the widest within the node (docs/demand-model.md §4.6,
docs/spec.md §11)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from later_fields import assert_left_out_at_default
from typer.testing import CliRunner

from ptplan.cli.app import app
from ptplan.demand.cluster import run_on_cluster
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


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_the_rollout_runs_on_the_engine_the_spec_names(tp: int) -> None:
    """8 rollout GPUs: engines of tp GPUs (each splitting the 28 heads and 4 KV heads), ⌊8 / tp⌋
    of them; unset, the model's choice is one of its two candidates (the smallest that holds the
    7.6B weights, or the largest that splits the heads and tiles the node: 4)."""
    run = _run(rollout_tp=tp)
    assert run.layout["rollout"] == {"tp": tp, "dp": 8 // tp}
    free = _run().layout["rollout"]
    assert free is not None and free["tp"] in (1, 4)


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
    assert_left_out_at_default(plain, ProjectSpec.model_validate(_spec(rollout_tp=2)),
                               "efficiency", "rollout_tp")
    line = ("efficiency.rollout_tp = per pool (the faster of the smallest engine that holds "
            "the weights and the widest within the node, each splitting the attention heads)")
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
    """vLLM shards the query heads over the engine's GPUs and splits or replicates the KV heads
    evenly: the example's 28 heads and 4 KV heads take 1, 2, 4 or 28; 3 (28 % 3) and 7 (7 % 4)
    are refused in one line naming the field, the value and the choices."""
    for tp in (3, 7):
        with pytest.raises(ValueError, match=rf"efficiency.rollout_tp {tp}: .* 28 attention heads "
                                             r"\(4 KV heads\) .* use one of 1, 2, 4, 28 "):
            ProjectSpec.model_validate(_spec(rollout_tp=tp))
    f = tmp_path / "job.yaml"
    f.write_text(yaml.safe_dump(_spec(rollout_tp=3)))
    r = CliRunner().invoke(app, ["estimate", str(f)])
    assert r.exit_code == 2 and "\n" not in r.output.strip()
    assert "rollout_tp 3" in r.output


def test_the_models_own_engines_split_the_heads() -> None:
    """Unset, the engines the model chooses between must be ones vLLM starts: a size that splits
    the attention heads and the KV heads (and, for the node-wide one, tiles the node).
    Qwen2.5-7B's 28 heads (4 KV) on 8-GPU nodes: 1 and 4, never 8 (vLLM refuses TP8: 28 % 8);
    12 heads: 4; 40: 8; a model needing 8 GPUs: 28 (14 splits the heads, not the 4 KV heads)."""
    from ptplan.demand.decode import head_split
    from ptplan.spec.project import ModelBlock

    def m(heads: int, kv: int = 4) -> ModelBlock:
        return ModelBlock(params_b=7.0, layers=28, hidden_size=128 * heads, heads=heads,
                          kv_heads=kv, head_dim=128)

    assert head_split(m(28), 2, 8, node=8) == 4
    assert head_split(m(12), 2, 8, node=8) == 4
    assert head_split(m(40), 2, 8, node=8) == 8
    assert head_split(m(28), 8, 64) == 28
    assert head_split(m(28, kv=28), 8, 64) == 14
    assert head_split(m(28), 1, 64) == 1
    assert head_split(m(7, kv=7), 2, 8, node=8) == 0
    assert head_split(m(40, kv=8), 9, 40) == 40  # 20 splits the heads, 20 % 8 does not
    # the bounds are inclusive, every size between is tried, and none found is 0
    assert head_split(m(28), 3, 4, node=8) == 4
    assert head_split(m(28, kv=28), 2, 8, node=14) == 7
    assert head_split(m(28, kv=28), 5, 6) == 0
    assert head_split(m(7, kv=7), 2, 6) == 0
    layout = _run().layout["rollout"]  # the example's rollout on 8 H100, unpinned
    assert layout is not None and 28 % layout["tp"] == 0, layout


def test_an_mla_model_counts_its_query_heads_only() -> None:
    """An MLA model (DeepSeek-V3: 128 heads, a latent KV) has no KV heads to split; its kv_heads
    field does not restrict the engine."""
    from ptplan.spec.project import ModelBlock
    mla = ModelBlock(params_b=671.0, active_params_b=37.0, layers=61, hidden_size=7168,
                     heads=128, kv_heads=3, head_dim=128, kv_latent_dim=576)
    assert [t for t in (1, 2, 3, 8, 16, 32, 48, 64) if mla.splits_tp(t)] == [1, 2, 8, 16, 32, 64]
    assert not mla.model_copy(update={"kv_latent_dim": None}).splits_tp(2)  # 3 KV heads
    gqa = mla.model_copy(update={"kv_latent_dim": None, "kv_heads": 8})
    assert gqa.splits_tp(16) and not gqa.splits_tp(12)


def test_a_teacher_engine_splits_its_own_heads() -> None:
    """The teacher scores in a vLLM server: its engine must split the teacher's heads, not the
    student's. Qwen2.5-32B's 40 heads (8 KV) on L4: 4 GPUs per engine within an 8-GPU node;
    on 3-GPU nodes the engine would span two nodes, TP6, which 40 heads refuse, so scoring
    has no rate there; the student's reference forwards (training engine) are not held to it."""
    from ptplan.core.hardware import resolve_gpu
    from ptplan.demand.model import build_demand
    from ptplan.demand.rates import engine_models, phase_rates

    d = yaml.safe_load((ROOT / "examples" / "opd-8b-from-32b.yaml").read_text())
    d["teacher"] = {"params_b": 32.8, "layers": 64, "hidden_size": 5120, "heads": 40,
                    "kv_heads": 8, "head_dim": 128}
    d["framework"] = "any"
    demand = build_demand(ProjectSpec.model_validate(d))
    assert [m.query_heads for m in engine_models(demand, "scoring")] == [40]
    assert [m.query_heads for m in engine_models(demand, "rollout")] == [32]
    l4 = resolve_gpu("L4", "gpu")
    assert {r.replica_gpus for r in phase_rates(demand, "scoring", l4, 8, True)} == {4}
    assert phase_rates(demand, "scoring", l4, 3, True) == []
    grpo = build_demand(ProjectSpec.model_validate(_spec()))
    assert engine_models(grpo, "scoring") == ()  # the reference runs in the training engine


def test_a_teacher_replica_moves_up_to_a_size_that_splits_its_heads() -> None:
    """A 60B teacher with 28 heads (4 KV) on A100-40GB needs 8 GPUs for its weights; 8 does not
    split 28 heads and 14 does not split 4 KV heads, so its replica is 28 GPUs. The student's
    reference (training engine) keeps the power of two its weights need."""
    from ptplan.core.hardware import resolve_gpu
    from ptplan.demand.cells import Conditions, cell
    from ptplan.demand.model import build_demand

    d = yaml.safe_load((ROOT / "examples" / "opd-8b-from-32b.yaml").read_text())
    d["teacher"] = {"params_b": 60.0, "layers": 48, "hidden_size": 3584, "heads": 28,
                    "kv_heads": 4, "head_dim": 128}
    d["framework"] = "any"
    spec = ProjectSpec.model_validate(d)
    demand = build_demand(spec)
    a100 = resolve_gpu("A100-40GB", "gpu")
    teacher = next(p for p in demand.phase_parts("scoring") if p.role == "teacher")
    c = cell(teacher, a100, "bf16", spec, 0, Conditions(gpus_per_node=8))
    assert c.fits and c.replica_gpus == 28, c
    student = teacher.model_copy(update={"role": "reference"}) \
        if hasattr(teacher, "model_copy") else __import__("dataclasses").replace(
            teacher, role="reference")
    assert cell(student, a100, "bf16", spec, 0, Conditions(gpus_per_node=8)).replica_gpus == 8


def test_the_smallest_engine_is_the_first_that_splits_the_heads() -> None:
    """A 60B model with 12 heads on A100-40GB needs 8 GPUs for its weights; 8 does not divide
    12, so its smallest engine is 12 (on 16-GPU nodes). On 8-GPU nodes an engine spans whole
    nodes (16 GPUs), which cannot shard 12 heads either: the rollout does not fit there."""
    from ptplan.core.errors import InputError
    from ptplan.core.hardware import gpus
    from ptplan.demand.cells import Conditions
    from ptplan.demand.decode import decode_engine
    from ptplan.demand.model import build_demand

    d = _spec()
    d["model"] = {"params_b": 60.0, "layers": 40, "hidden_size": 1536, "heads": 12,
                  "kv_heads": 4, "head_dim": 128}
    d["framework"] = "any"
    spec = ProjectSpec.model_validate(d)
    demand = build_demand(spec)
    part = next(p for p in demand.parts if p.phase == "rollout" and p.kind == "decode")
    gpu = gpus()["A100-40GB"]
    engine = decode_engine(part, gpu, "bf16", spec, 0, Conditions(gpus_per_node=16))
    assert not isinstance(engine, str) and engine.gpus == 12
    with pytest.raises(InputError, match="rollout does not fit"):
        run_on_cluster(spec, "A100-40GB", 32, 8, "sync", {"rollout": 16, "update": 16})



def test_a_pinned_engine_too_small_is_named_in_the_reference_estimate(tmp_path: Path) -> None:
    """`estimate` without a cluster reports, per GPU, why the rollout does not fit: the stated
    engine (405B on one GPU) is named."""
    f = _job(tmp_path, 405.0, 126, 16384, 128, rollout_tp=1)
    r = CliRunner().invoke(app, ["estimate", str(f), "--format", "json"])
    assert r.exit_code == 0, r.output
    assert "efficiency.rollout_tp 1: 405B weights at bf16 leave no KV cache on 1 x H100" \
        in r.output
