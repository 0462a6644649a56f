"""Scoring on the trainer's GPUs (issue #39, docs/demand-model.md §3.12): the training engine's
reference and reward forwards on the pool that runs the update take the update's fitted factor;
on a scoring pool of their own, and for a teacher in an inference server wherever it runs, the
scoring factor. Expectations are restated from the stored fit's factors, never hard-coded: the
fit moves with the suite."""

from __future__ import annotations

from pathlib import Path

import pytest

import ptplan
from ptplan.core.fit import active_fit, applies, family, fit_method
from ptplan.core.hardware import gpus
from ptplan.demand.cells import scoring_on_trainer
from ptplan.demand.model import build_demand
from ptplan.demand.rates import phase_rates
from ptplan.planfile.verify import verify_against_spec
from ptplan.spec.project import load_spec

pytestmark = pytest.mark.fitted  # the model as shipped
EX = Path(__file__).resolve().parents[1] / "examples"


def test_the_family_of_scoring_follows_where_it_runs() -> None:
    assert family("scoring", "rl") == "scoring"
    assert family("scoring", "rl", on_trainer=True) == "update_rl"
    assert family("scoring", "opd", on_trainer=True) == "update_rl"
    # the update's family, offload included: the same engine
    assert family("scoring", "rl", param_offload=True, on_trainer=True) == "update_offload"
    assert family("scoring", "rl", param_offload=True) == "scoring"
    assert family("update", "rl", on_trainer=True) == "update_rl"
    assert (family("update", "sft"), family("update", "rl")) == ("update_sft", "update_rl")
    assert family("rollout", "rl", on_trainer=True) == "generation"
    # a spec that states the training engine's MFU keeps it on the trainer's GPUs
    assert not applies("scoring", "rl", {"rl_train_mfu"}, on_trainer=True)
    assert applies("scoring", "rl", {"prefill_efficiency"}, on_trainer=True)


def test_only_training_engine_forwards_on_the_trainer_are_tied() -> None:
    grpo = build_demand(load_spec(str(EX / "grpo-7b.yaml")))
    opd = build_demand(load_spec(str(EX / "opd-8b-from-32b.yaml")))
    ref = grpo.phase_parts("scoring")
    teacher = opd.phase_parts("scoring")
    assert [p.name for p in ref] == ["reference"]
    assert "teacher" in [p.name for p in teacher]
    assert scoring_on_trainer("scoring", ref, True)
    assert not scoring_on_trainer("scoring", ref, False)
    assert not scoring_on_trainer("scoring", teacher, True)
    assert not scoring_on_trainer("update", grpo.phase_parts("update"), True)
    assert not scoring_on_trainer("scoring", (), True)


@pytest.mark.parametrize(("example", "tied"), [("grpo-7b", True), ("opd-8b-from-32b", False)])
def test_the_scoring_rate_on_the_trainer(example: str, tied: bool) -> None:
    factors = active_fit().factors
    demand = build_demand(load_spec(str(EX / f"{example}.yaml")))
    h100 = gpus()["H100"]
    apart = {r.precision: r for r in phase_rates(demand, "scoring", h100, 8, True)}
    merged = {r.precision: r for r in phase_rates(demand, "scoring", h100, 8, True,
                                                  with_trainer=True)}
    colocated = {r.precision: r for r in phase_rates(demand, "scoring", h100, 8, True,
                                                     colocated=True)}
    ratio = factors["scoring"] / factors["update_rl"] if tied else 1.0
    assert apart.keys() == merged.keys() == colocated.keys()
    for q, r in apart.items():
        assert merged[q].busy(2.0) == pytest.approx(r.busy(2.0) * ratio, rel=1e-12)
        assert colocated[q].busy(2.0) == pytest.approx(merged[q].busy(2.0), rel=1e-12)
        assert merged[q].gpu_hours == pytest.approx(r.gpu_hours * ratio, rel=1e-12)
    # the other phases do not move with the flag
    for phase in ("rollout", "update"):
        a = phase_rates(demand, phase, h100, 8, True)
        b = phase_rates(demand, phase, h100, 8, True, with_trainer=True)
        assert [x.busy(2.0) for x in a] == [x.busy(2.0) for x in b]


@pytest.mark.shipped_framework
def test_a_plan_prices_its_trainer_pool_scoring_tied_and_verifies() -> None:
    """veRL runs the reference on the trainer's pool (the example read with the shipped
    framework, veRL 0.9): the plan's scoring phase is on a pool that also runs the update,
    priced at the tied rate, and the independent verifier (which recomputes it from the plan's
    own pools) agrees."""
    spec = load_spec(str(EX / "grpo-7b.yaml"))
    plan = ptplan.plan(spec, ptplan.load_catalog("embedded"), timings=False)
    phases = {p.name: p for p in plan.phases}
    scoring = phases["scoring"]
    assert scoring.pool == phases["update"].pool
    pool = next(p for p in plan.pools if p.name == scoring.pool)
    demand = build_demand(spec)
    gpu = gpus()[pool.gpu]
    tail = plan.pipeline_mode != "async"
    tied = {r.precision: r for r in phase_rates(demand, "scoring", gpu, pool.gpus_per_node, tail,
                                                with_trainer=True)}
    apart = {r.precision: r for r in phase_rates(demand, "scoring", gpu, pool.gpus_per_node,
                                                 tail)}
    effective = sum(a.nodes * a.effective_fraction for a in pool.allocations) \
        * scoring.usable_node_fraction
    q = scoring.precision
    assert scoring.busy_hours == pytest.approx(tied[q].busy(effective), rel=1e-9)
    assert scoring.busy_hours < apart[q].busy(effective)
    assert verify_against_spec(plan, spec) == []


def test_a_forked_frontier_prices_scoring_as_this_process_does(tmp_path: Path) -> None:
    """The pool frontiers a forked worker builds come back with their rates recomputed here
    (frontier.frontiers' lazy rates): the merged pool's scoring must be tied there too. The
    shipped model in a fresh interpreter, with and without the worker: the same plan bytes."""
    import os
    import subprocess
    import sys

    out = {}
    for workers in ("1", "2"):
        env = {**os.environ, "PTPLAN_WORKERS": workers, "PTPLAN_TODAY": "2026-12-07"}
        path = tmp_path / f"plan-{workers}.json"
        subprocess.run([sys.executable, "-m", "ptplan", "-q", "plan", str(EX / "grpo-7b.yaml"),
                        "--format", "json", "--no-timings", "-o", str(path)],
                       check=True, env=env, capture_output=True, timeout=300)
        out[workers] = path.read_text(encoding="utf-8")
    assert out["1"] == out["2"]


def test_the_reference_pool_estimate_scores_on_the_trainer() -> None:
    """``ptplan estimate`` (no cluster) reports scoring on the trainer's GPUs, the placement
    every pipeline offers: the tied rate, not a scoring pool's."""
    from ptplan.demand.cells import phase_cell
    from ptplan.demand.decode import Conditions
    from ptplan.demand.estimate import estimate

    spec = load_spec(str(EX / "grpo-7b.yaml"))
    demand = build_demand(spec)
    got = next(p for p in estimate(spec, ["H100"])["phases"] if p["name"] == "scoring")
    h100 = gpus()["H100"]
    q = got["by_gpu"]["H100"]["precision"]
    tied = phase_cell(demand, "scoring", h100, q, cond=Conditions(with_trainer=True))
    apart = phase_cell(demand, "scoring", h100, q)
    assert got["gpu_hours"]["H100"] == pytest.approx(tied.gpu_hours, rel=1e-3)
    assert apart.gpu_hours > 1.5 * tied.gpu_hours


def _fitted_line(spec) -> str:
    from ptplan.spec.defaults import applied_defaults

    (line,) = [d for d in applied_defaults(spec) if d.startswith("efficiency fitted on")]
    return line


def test_the_explained_factors_are_the_jobs_own() -> None:
    """The defaults line names the fitted factor of each phase the job has, and where the
    scoring factor applies: a job without a reference, reward model or teacher has no scoring
    phase; a teacher keeps the scoring factor wherever it runs; a spec that states the training
    MFU takes no update factor."""
    fit = active_fit()
    f, o, n = fit.factors, fit.step_overhead_seconds, fit.cases
    head = f"efficiency fitted on {n} published runs (achieved ÷ modelled throughput): "
    tail = f", framework overhead {o:g} s per step (docs/demand-model.md §7)"
    grpo = load_spec(str(EX / "grpo-7b.yaml"))
    assert _fitted_line(grpo) == (
        head + f"generation x{f['generation']:g}, scoring x{f['scoring']:g} on a scoring pool of "
        f"its own (on the trainer's GPUs the update's), update_rl x{f['update_rl']:g}" + tail)
    agentic = load_spec(str(EX / "agentic-swe-rl.yaml"))
    assert agentic.scoring_roles == ()
    assert _fitted_line(agentic) == (
        head + f"generation x{f['generation']:g}, update_rl x{f['update_rl']:g}" + tail)
    opd = load_spec(str(EX / "opd-8b-from-32b.yaml"))
    assert _fitted_line(opd) == (
        head + f"generation x{f['generation']:g}, scoring x{f['scoring']:g}, "
        f"update_rl x{f['update_rl']:g}" + tail)
    sft = load_spec(str(EX / "sft-8b.yaml"))
    want = f"update_sft x{f['update_sft']:g}"
    if sft.eval is not None:
        want += f", generation x{f['generation']:g}"
    assert _fitted_line(sft) == head + want + " (docs/demand-model.md §7)"
    stated = grpo.model_copy(update={"efficiency": grpo.efficiency.model_copy(
        update={"rl_train_mfu": 0.3})})
    stated.efficiency.model_fields_set.add("rl_train_mfu")
    assert _fitted_line(stated) == head + f"generation x{f['generation']:g}" + tail
    offload = grpo.model_copy(update={"efficiency": grpo.efficiency.model_copy(
        update={"param_offload": True})})
    assert f"update_offload x{f['update_offload']:g}" in _fitted_line(offload)


def _with_efficiency(spec, **fields):
    eff = spec.efficiency.model_copy(update=fields)
    eff.model_fields_set.update(fields)
    return spec.model_copy(update={"efficiency": eff})


def test_a_stated_efficiency_drops_only_its_own_factor() -> None:
    """Each factor is left out where the spec states the efficiency it corrects, and only
    there: the others are still listed (the line is walked to its end)."""
    f = active_fit().factors
    grpo = load_spec(str(EX / "grpo-7b.yaml"))
    line = _fitted_line(_with_efficiency(grpo, decode_mbu=0.5))
    assert "generation x" not in line
    assert f"scoring x{f['scoring']:g}" in line and f"update_rl x{f['update_rl']:g}" in line
    offload = _with_efficiency(grpo, param_offload=True, cpu_adam_b_params_per_s=0.5)
    line = _fitted_line(offload)
    assert "update_offload" not in line and "update_rl" not in line
    sft = load_spec(str(EX / "sft-8b.yaml"))
    plain = sft.model_copy(update={"eval": None})
    assert _fitted_line(plain).endswith(
        f"throughput): update_sft x{f['update_sft']:g} (docs/demand-model.md §7)")
    stated = _with_efficiency(plain, train_mfu=0.4)
    from ptplan.spec.defaults import applied_defaults
    assert not [d for d in applied_defaults(stated) if d.startswith("efficiency fitted on")]
    # an SFT on Megatron-core takes its own factor, which a stated train_mfu drops as well
    megatron = _with_efficiency(plain, train_backend="megatron")
    assert _fitted_line(megatron).endswith(
        f"throughput): update_sft_megatron x{f['update_sft_megatron']:g} "
        "(docs/demand-model.md §7)")
    stated = _with_efficiency(megatron, train_mfu=0.4)
    assert not [d for d in applied_defaults(stated) if d.startswith("efficiency fitted on")]


def test_an_sft_update_takes_the_factor_of_its_trainer() -> None:
    """``train_backend: megatron`` on an SFT job is Megatron-core's trainer (its own factor,
    fitted on NVIDIA's NeMo and Megatron-Bridge tables); ``auto`` and ``fsdp`` keep the fine-tuning
    tools' factor; an RL update, whatever its backend, keeps ``update_rl``; ZeRO-3 parameter
    offload is ``update_offload`` whatever the trainer."""
    assert fit_method("sft", "megatron") == "sft_megatron"
    assert fit_method("sft", "fsdp") == fit_method("sft", "auto") == "sft"
    assert fit_method("rl", "megatron") == "rl" and fit_method("opd", "megatron") == "opd"
    assert family("update", fit_method("sft", "megatron")) == "update_sft_megatron"
    assert family("update", fit_method("sft", "fsdp")) == "update_sft"
    assert family("update", fit_method("rl", "megatron")) == "update_rl"
    assert family("update", fit_method("sft", "megatron"), param_offload=True) == "update_offload"
    assert not applies("update", "sft_megatron", {"train_mfu"})
    f = active_fit().factors
    assert f["update_sft_megatron"] > 1.5 > 1.0 > f["update_sft"]  # faster; slower than physics
    sft = _with_efficiency(load_spec(str(EX / "sft-8b.yaml")).model_copy(update={"eval": None}),
                           train_backend="fsdp")
    fast = _with_efficiency(sft, train_backend="megatron")
    from ptplan.demand.cluster import run_on_cluster
    a, b = (run_on_cluster(s, "H100", 8, 8, "colocated").phases["update"] for s in (sft, fast))
    assert b < a
