"""Plans a framework can run (issue #40): every example × both pinned releases plans,
verifies, renders every target and passes ``render --check``, with none of the launch notes that
say the run would not match the plan; the abstract plan (``framework: any``) is never dearer; a
method a release cannot run is one line (exit 2); each ``framework.*`` verifier rule fires on
the plan that breaks it; ``render`` and ``check --spec`` follow the plan's framework.
"""

from __future__ import annotations

import copy
import functools
import json
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import assert_one_line
from typer.testing import CliRunner

from ptplan.cli.app import app
from ptplan.core.errors import InputError
from ptplan.planfile.rules_framework import check_framework
from ptplan.planfile.schema import Plan
from ptplan.planfile.verify import verify_against_spec, verify_plan
from ptplan.planner.api import framework_price, plan
from ptplan.providers.registry import load_catalog
from ptplan.rendering.checks.cluster import check_render
from ptplan.rendering.targets import render_plan
from ptplan.spec import frameworks
from ptplan.spec.project import ProjectSpec, parse_spec

pytestmark = pytest.mark.shipped_framework

ROOT = Path(__file__).resolve().parent.parent
EX = ROOT / "examples"
EXAMPLES = ("grpo-7b", "opd-8b-from-32b", "sft-8b", "generate-32b", "agentic-swe-rl")
RELEASES = ("verl==0.9", "openrlhf==0.11")
MISMATCH = ("gets no work", "cannot run", "needs another build", "runs slower than planned",
            "not rendered as planned")
"""Launch notes that say the launched job is not the planned one (issue #40, deliverable 4)."""
runner = CliRunner()


def raw(example: str) -> dict[str, Any]:
    return yaml.safe_load((EX / f"{example}.yaml").read_text(encoding="utf-8"))


def spec_for(example: str, framework: str) -> ProjectSpec:
    return parse_spec({**raw(example), "framework": framework}, example)


@functools.cache
def catalog() -> Any:
    return load_catalog("embedded")


@functools.cache
def planned(example: str, framework: str) -> Plan | str:
    """The plan, or the one-line error of a release that cannot run the example."""
    try:
        s = spec_for(example, framework)
    except InputError as e:
        return str(e)
    return plan(s, catalog(), explain=False, timings=False)


CASES = [(e, f) for e in EXAMPLES for f in RELEASES]


@pytest.mark.parametrize(("example", "framework"), CASES)
def test_every_example_plans_verifies_and_renders_for_each_release(example: str,
                                                                   framework: str) -> None:
    p = planned(example, framework)
    rel = frameworks.RELEASES[framework]
    method = raw(example)["method"]
    if method not in rel.methods:
        assert isinstance(p, str)
        assert_one_line(p)
        assert framework in p and ("verl==0.9" in p or "any" in p), p
        return
    assert isinstance(p, Plan), p
    assert p.framework == framework and p.schema_version == 9
    assert verify_plan(p) == []
    assert check_framework(p) == []
    assert verify_against_spec(p, spec_for(example, framework)) == []
    for pool in p.pools:
        assert pool.gpu.startswith(("H", "A", "B", "L", "T4")) and "Trainium" not in pool.gpu
    files, notes = render_plan(p, "all", spec_for(example, framework), None, "ptplan", None)
    if method == "generate":
        return  # no launch (ptplan renders none for generation-only jobs), deploy files only
    assert check_render(p, files) == []
    bad = [n for n in notes if any(m in n for m in MISMATCH)]
    assert bad == [], bad
    launch = next(v for k, v in files.items() if k.startswith("launch/"))
    assert framework.split("==")[0] in launch
    if p.lifecycle is not None and p.lifecycle.archive_every:
        # the checkpoints priced as archived are copied before the framework prunes them
        sky = "".join(v for k, v in files.items() if k.startswith("skypilot/"))
        assert "ptplan-archive" in launch and "ptplan-archive" in sky
        assert any("archive: every " in n for n in notes)


@pytest.mark.parametrize("example", EXAMPLES)
def test_the_abstract_plan_is_never_dearer(example: str) -> None:
    free = planned(example, "any")
    assert isinstance(free, Plan)
    for framework in RELEASES:
        p = planned(example, framework)
        if isinstance(p, Plan):
            assert Decimal(free.total_cost_usd) <= Decimal(p.total_cost_usd), (framework,
                                                                               example)


def test_verl_prices_reference_scoring_on_the_trainer_and_no_trainium() -> None:
    """The two gaps issue #40 opened with: the GRPO example's reference model scores on the
    update pool, in the trainer's dtype; the OPD example runs on CUDA GPUs only."""
    p = planned("grpo-7b", "verl==0.9")
    assert isinstance(p, Plan)
    scoring = next(ph for ph in p.phases if ph.name == "scoring")
    update = next(ph for ph in p.phases if ph.name == "update")
    assert scoring.pool == update.pool and scoring.precision == update.precision == "bf16"
    assert not any(ph.name == "rollout" and ph.pool == update.pool for ph in p.phases) \
        or p.pipeline_mode == "colocated"
    opd = planned("opd-8b-from-32b", "verl==0.9")
    assert isinstance(opd, Plan)
    assert {pl.gpu for pl in opd.pools}.isdisjoint({"Trainium1", "Trainium2"})
    teacher = next(ph for ph in opd.phases if ph.name == "scoring")
    assert teacher.pool not in {ph.pool for ph in opd.phases if ph.name in ("rollout",
                                                                              "update")}


def test_openrlhf_plans_no_fp8_and_no_megatron() -> None:
    p = planned("grpo-7b", "openrlhf==0.11")
    assert isinstance(p, Plan)
    assert {ph.precision for ph in p.phases if ph.precision} == {"bf16"}
    lay = next(ph for ph in p.phases if ph.name == "update").parallel_layout
    assert lay is not None and lay.tp == 1 and lay.pp == 1
    assert any("precisions.rollout: fp8 not used" in d for d in p.defaults_applied)


def test_eval_is_priced_to_the_training_cap() -> None:
    """veRL validates with data.max_response_length: the eval phase holds the same tokens
    (mean eval.response_tokens) but waits for the tail up to the training cap."""
    free, bound = planned("grpo-7b", "any"), planned("grpo-7b", "verl==0.9")
    assert isinstance(free, Plan) and isinstance(bound, Plan)
    e_free = next(ph for ph in free.phases if ph.name == "eval")
    e_bound = next(ph for ph in bound.phases if ph.name == "eval")
    assert e_free.tokens == e_bound.tokens
    assert any("validation cap, the training response cap 8192" in d
               for d in bound.defaults_applied)


# ---- the price of the framework ------------------------------------------------------------

def test_explain_states_the_price_of_the_framework() -> None:
    s = spec_for("grpo-7b", "verl==0.9")
    p = planned("grpo-7b", "verl==0.9")
    assert isinstance(p, Plan)
    price = framework_price(s, p, catalog(), "cost", "highs", None)
    assert price is not None and price.framework == "verl==0.9"
    free = planned("grpo-7b", "any")
    assert isinstance(free, Plan)
    assert price.any_total_cost_usd == free.total_cost_usd
    assert price.statement.startswith(f"veRL 0.9 can run this for ${Decimal(p.total_cost_usd):,}")
    if Decimal(p.total_cost_usd) > Decimal(free.total_cost_usd):
        assert "because:" in price.statement and price.reasons
    assert framework_price(spec_for("grpo-7b", "any"), free, catalog(), "cost", "highs",
                           None) is None


def test_explain_prints_it_and_the_report_shows_it(tmp_path: Path) -> None:
    out = runner.invoke(app, ["-q", "plan", str(EX / "grpo-7b.yaml"), "--explain",
                              "--no-timings"])
    assert out.exit_code == 0, out.output
    assert "framework:\n  veRL 0.9 can run this for $" in out.output
    assert "; framework verl==0.9" in out.output
    html = tmp_path / "p.html"
    out = runner.invoke(app, ["-q", "plan", str(EX / "grpo-7b.yaml"), "--explain", "--format",
                              "html", "-o", str(html)])
    assert out.exit_code == 0, out.output
    assert "veRL 0.9 can run this for $" in html.read_text(encoding="utf-8")


# ---- spec errors: one line, exit 2 ---------------------------------------------------------

@pytest.mark.parametrize(("example", "change", "words"), [
    ("opd-8b-from-32b", {"framework": "openrlhf==0.11"}, "no on-policy distillation"),
    ("sft-8b", {"framework": "openrlhf==0.11"}, "RL under Ray only"),
    ("grpo-7b", {"framework": "verl==0.9", "pipeline": "sync"}, "pipeline sync"),
    ("opd-8b-from-32b", {"pipeline": "colocated"}, "teacher on a pool of its own"),
    ("grpo-7b", {"framework": "openrlhf==0.11", "precisions": {"rollout": ["fp8"]}},
     "precisions.rollout [fp8]"),
    ("grpo-7b", {"framework": "openrlhf==0.11",
                 "efficiency": {"train_backend": "megatron"}}, "efficiency.train_backend"),
    ("grpo-7b", {"framework": "ray==2"}, "framework"),
])
def test_what_a_release_cannot_run_is_one_line(tmp_path: Path, example: str,
                                                 change: dict[str, Any], words: str) -> None:
    data = {**raw(example), **change}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    out = runner.invoke(app, ["-q", "plan", str(path)])
    assert out.exit_code == 2, out.output
    assert_one_line(out.output)
    assert words in out.output, out.output


def test_plan_framework_option_and_its_errors() -> None:
    out = runner.invoke(app, ["-q", "plan", str(EX / "opd-8b-from-32b.yaml"), "--framework",
                              "openrlhf"])
    assert out.exit_code == 2 and "openrlhf==0.11" in out.output
    assert_one_line(out.output)
    out = runner.invoke(app, ["-q", "plan", str(EX / "grpo-7b.yaml"), "--framework", "verl==1"])
    assert out.exit_code == 2 and "--framework" in out.output
    assert_one_line(out.output)


def test_defaults_applied_name_the_framework() -> None:
    p = planned("grpo-7b", "verl==0.9")
    assert isinstance(p, Plan)
    # given explicitly here: no default line; without it, the default is listed
    assert not any(d.startswith("framework = ") for d in p.defaults_applied)
    s = parse_spec(raw("grpo-7b"), "grpo")
    from ptplan.spec.defaults import applied_defaults

    assert any(d.startswith("framework = verl==0.9") for d in applied_defaults(s))


# ---- render and check follow the plan's framework ------------------------------------------

def _write(tmp_path: Path, p: Plan) -> Path:
    path = tmp_path / "plan.json"
    path.write_text(p.to_json(), encoding="utf-8")
    return path


def test_render_follows_the_plan_and_refuses_another_framework(tmp_path: Path) -> None:
    p = planned("grpo-7b", "openrlhf==0.11")
    assert isinstance(p, Plan)
    path = _write(tmp_path, p)
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({**raw("grpo-7b"), "framework": "openrlhf==0.11"}),
                    encoding="utf-8")
    out = runner.invoke(app, ["-q", "render", str(path), "--spec", str(spec), "--target",
                              "skypilot", "-o", str(tmp_path / "r")])
    assert out.exit_code == 0, out.output
    assert (tmp_path / "r" / "launch" / "openrlhf.sh").is_file()
    out = runner.invoke(app, ["-q", "render", str(path), "--spec", str(spec), "--target",
                              "skypilot", "--framework", "verl==0.9", "-o", str(tmp_path / "s")])
    assert out.exit_code == 2, out.output
    assert_one_line(out.output)
    assert "made for openrlhf==0.11" in out.output and "Re-plan" in out.output
    assert not (tmp_path / "s").exists()


def test_an_abstract_plan_renders_with_todays_notes(tmp_path: Path) -> None:
    p = planned("grpo-7b", "any")
    assert isinstance(p, Plan)
    files, notes = render_plan(p, "skypilot", spec_for("grpo-7b", "any"), None, "ptplan",
                               "openrlhf==0.11")
    assert "launch/openrlhf.sh" in files
    files, notes = render_plan(p, "skypilot", spec_for("grpo-7b", "any"), None, "ptplan", None)
    assert "launch/verl.sh" in files
    assert any("gets no work" in n for n in notes) or p.layout != "async:rollout|scoring|update"


def test_check_spec_compares_the_framework(tmp_path: Path) -> None:
    p = planned("grpo-7b", "openrlhf==0.11")
    assert isinstance(p, Plan)
    path = _write(tmp_path, p)
    out = runner.invoke(app, ["-q", "check", str(path), "--spec", str(EX / "grpo-7b.yaml")])
    assert out.exit_code == 1
    assert "spec_match: the plan was made for framework openrlhf==0.11, the spec asks " \
           "verl==0.9" in out.output
    out = runner.invoke(app, ["-q", "check", str(path), "--spec", str(EX / "grpo-7b.yaml"),
                              "--framework", "openrlhf==0.11"])
    assert out.exit_code == 0, out.output
    out = runner.invoke(app, ["-q", "check", str(path), "--framework", "openrlhf==0.11"])
    assert out.exit_code == 2


# ---- every framework.* rule fires ----------------------------------------------------------

def _dict(example: str, framework: str) -> dict[str, Any]:
    p = planned(example, framework)
    assert isinstance(p, Plan)
    return copy.deepcopy(json.loads(p.to_json()))


def _fire(d: dict[str, Any]) -> list[str]:
    return check_framework(Plan.model_validate(d))


def _phase(d: dict[str, Any], name: str) -> dict[str, Any]:
    return next(ph for ph in d["phases"] if ph["name"] == name)


def test_the_plans_pass_the_rules() -> None:
    for e, f in CASES:
        p = planned(e, f)
        if isinstance(p, Plan):
            assert check_framework(p) == []


def test_rule_known() -> None:
    d = _dict("grpo-7b", "verl==0.9")
    d["framework"] = "ray==2"
    assert _fire(d)[0].startswith("framework.known: 'ray==2'")
    d = _dict("grpo-7b", "verl==0.9")
    d["schema_version"] = 8
    assert _fire(d) == ["framework.known: the framework needs schema 9, the plan says 8"]


def test_rule_method() -> None:
    d = _dict("opd-8b-from-32b", "verl==0.9")
    d["framework"] = "openrlhf==0.11"
    assert any(v.startswith("framework.method: OpenRLHF 0.11 does not run method opd")
               for v in _fire(d))


def test_rule_accelerator() -> None:
    d = _dict("grpo-7b", "verl==0.9")
    d["pools"][0]["gpu"] = "Trainium1"
    got = _fire(d)
    assert any(v.startswith("framework.accelerator: pool") and "Trainium1 (AWS)" in v
               and "platform_cuda.py:28" in v for v in got), got


def test_rule_pipeline() -> None:
    """veRL's plan for the GRPO example has its rollout pool apart (async, separate_async);
    the same pools in a sync pipeline are what veRL 0.9 cannot run."""
    d = _dict("grpo-7b", "verl==0.9")
    assert _phase(d, "rollout")["pool"] != _phase(d, "update")["pool"]
    d["pipeline_mode"] = "sync"
    got = _fire(d)
    assert any(v.startswith("framework.pipeline: rollout on pool") for v in got), got


def test_rule_roles_reference_apart() -> None:
    d = _dict("grpo-7b", "verl==0.9")
    pools = {p["name"] for p in d["pools"]}
    other = next(n for n in pools if n != _phase(d, "update")["pool"])
    _phase(d, "scoring")["pool"] = other
    got = _fire(d)
    assert any(v.startswith("framework.roles: reference scored on pool") and
               "trainer_base.py:809" in v for v in got), got


def test_rule_roles_teacher_on_the_trainer() -> None:
    d = _dict("opd-8b-from-32b", "verl==0.9")
    _phase(d, "scoring")["pool"] = _phase(d, "update")["pool"]
    got = _fire(d)
    assert any(v.startswith("framework.roles: the OPD teacher shares pool") for v in got), got


@pytest.mark.parametrize(("framework", "phase", "precision"), [
    ("verl==0.9", "rollout", "int8"), ("openrlhf==0.11", "rollout", "fp8"),
    ("verl==0.9", "scoring", "fp8"), ("verl==0.9", "update", "fp16")])
def test_rule_precision(framework: str, phase: str, precision: str) -> None:
    d = _dict("grpo-7b", framework)
    _phase(d, phase)["precision"] = precision
    got = _fire(d)
    assert any(v.startswith(f"framework.precision: phase {phase} at {precision}")
               for v in got), got


def test_rule_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """Neither pinned release keeps engines within a node (both span nodes by tensor parallel),
    so the rule is exercised on a release that would."""
    d = _dict("grpo-7b", "verl==0.9")
    within = replace(frameworks.VERL_0_9, engine_spans_nodes=False)
    monkeypatch.setitem(frameworks.RELEASES, "verl==0.9", within)
    ph = _phase(d, "rollout")
    pool = next(p for p in d["pools"] if p["name"] == ph["pool"])
    ph["replica_gpus"] = pool["gpus_per_node"] * 2
    got = _fire(d)
    assert any(v.startswith("framework.engine: phase rollout's engine of") for v in got), got


@pytest.mark.parametrize(("axis", "says"), [("tp", "tp 2"), ("pp", "tp 1, pp 2")])
def test_rule_layout(axis: str, says: str) -> None:
    """Tensor or pipeline parallel alone (the pipeline case: a mutation run's survivor)."""
    d = _dict("grpo-7b", "openrlhf==0.11")
    lay = _phase(d, "update")["parallel_layout"]
    lay[axis], lay["dp"] = 2, max(1, lay["dp"] // 2)
    got = _fire(d)
    assert any(v.startswith(f"framework.layout: the update uses {says}") for v in got), got


def test_rule_roles_teacher_on_the_rollout_pool() -> None:
    """Apart from the trainer is not enough: veRL's teacher pool is its own, not the rollout's
    (a mutant that checked only the trainer survived the sample of docs/testing.md)."""
    d = _dict("opd-8b-from-32b", "verl==0.9")
    _phase(d, "scoring")["pool"] = _phase(d, "rollout")["pool"]
    got = _fire(d)
    assert any(v.startswith("framework.roles: the OPD teacher shares pool") for v in got), got


def test_rule_engine_fills_a_node_without_spanning(monkeypatch: pytest.MonkeyPatch) -> None:
    """An engine of exactly one node's GPUs stays within the node."""
    d = _dict("grpo-7b", "verl==0.9")
    monkeypatch.setitem(frameworks.RELEASES, "verl==0.9",
                        replace(frameworks.VERL_0_9, engine_spans_nodes=False))
    ph = _phase(d, "rollout")
    ph["replica_gpus"] = next(p for p in d["pools"] if p["name"] == ph["pool"])["gpus_per_node"]
    assert not any(v.startswith("framework.engine") for v in _fire(d))


# ---- the spec's rules, branch by branch (survivors of the mutation run, docs/testing.md) ----

@pytest.mark.parametrize(("example", "framework", "precisions", "words"), [
    ("grpo-7b", "verl==0.9", {"update": ["fp16"]},
     ("precisions.update [fp16]", "runs update in bf16", "engine/fsdp.yaml:82")),
    ("grpo-7b", "verl==0.9", {"scoring": ["fp8"]},
     ("precisions.scoring [fp8]", "runs scoring in bf16", "ref/dp_ref.yaml:8")),
    ("grpo-7b", "openrlhf==0.11", {"eval": ["fp8"]},
     ("precisions.eval [fp8]", "runs eval in bf16", "vllm_engine.py:273")),
])
def test_each_precision_rule_names_its_phase_and_source(example: str, framework: str,
                                                         precisions: dict[str, list[str]],
                                                         words: tuple[str, ...]) -> None:
    with pytest.raises(InputError) as e:
        parse_spec({**raw(example), "framework": framework, "precisions": precisions}, example)
    assert_one_line(str(e.value))
    for w in words:
        assert w in str(e.value), str(e.value)


def test_sft_eval_precisions_are_not_the_rollouts() -> None:
    """SFT's eval is no rollout: a precision veRL's engines do not take is not refused there."""
    s = parse_spec({**raw("sft-8b"), "framework": "verl==0.9",
                    "precisions": {"update": ["bf16"], "eval": ["fp16"]}}, "sft")
    assert s.framework == "verl==0.9"


def test_scoring_in_the_trainers_dtype_follows_the_spec_update() -> None:
    from ptplan.spec.frameworks import framework_precisions

    s = parse_spec({**raw("grpo-7b"), "framework": "openrlhf==0.11",
                    "precisions": {"update": ["fp16"]}}, "grpo")
    assert framework_precisions(s, "scoring") == {"fp16"}
    assert framework_precisions(spec_for("grpo-7b", "openrlhf==0.11"), "scoring") == {"bf16"}


def test_backend_and_pipeline_messages_name_the_fix_and_the_source() -> None:
    with pytest.raises(InputError) as e:
        parse_spec({**raw("grpo-7b"), "framework": "openrlhf==0.11",
                    "efficiency": {"train_backend": "megatron"}}, "grpo")
    assert "with fsdp only" in str(e.value) and "train_ppo_ray.py:372" in str(e.value)
    assert "set efficiency.train_backend: fsdp or framework: any" in str(e.value)
    with pytest.raises(InputError) as e:
        parse_spec({**raw("grpo-7b"), "pipeline": "sync"}, "grpo")
    assert "only async (verl 0.9.1 verl/trainer/ppo/v1/trainer_separate_async.py:64)" \
        in str(e.value) and "use pipeline: async, colocated or auto" in str(e.value)


@pytest.mark.parametrize(("text", "key"), [
    ("verl==0.9.1", "verl==0.9"), ("VERL", "verl==0.9"), (" openrlhf==0.11.2 ", "openrlhf==0.11"),
    ("any", "any")])
def test_release_names_are_read_by_line(text: str, key: str) -> None:
    assert frameworks.normalise(text) == key


@pytest.mark.parametrize("text", ["verl==0.91", "verl==0.8", "openrlhf==0.1", "ray"])
def test_other_releases_are_refused_with_the_choices(text: str) -> None:
    with pytest.raises(InputError) as e:
        frameworks.normalise(text)
    assert "use one of verl==0.9, openrlhf==0.11, any (default verl==0.9)" in str(e.value)


def test_rule_accelerator_names_each_pool_and_an_unknown_gpu() -> None:
    """One pool off the release's GPUs reads in the singular; a GPU the table does not know (a
    hand-edited plan) is named as unknown, not a crash."""
    d = _dict("grpo-7b", "verl==0.9")
    d["pools"][0]["gpu"] = "V100"
    got = [v for v in _fire(d) if v.startswith("framework.accelerator")]
    assert got == [f"framework.accelerator: pool {d['pools'][0]['name']} runs on V100 "
                   "(unknown); veRL 0.9 runs on NVIDIA GPUs (verl 0.9.1 "
                   "verl/plugin/platform/platform_cuda.py:28)"], got
    d["pools"][0]["gpu"] = "MI300X"  # in the GPU table since 2026-12-08: an AMD part
    got = [v for v in _fire(d) if v.startswith("framework.accelerator")]
    assert got == [f"framework.accelerator: pool {d['pools'][0]['name']} runs on MI300X "
                   "(AMD); veRL 0.9 runs on NVIDIA GPUs (verl 0.9.1 "
                   "verl/plugin/platform/platform_cuda.py:28)"], got
    d = _dict("grpo-7b", "verl==0.9")
    for pool in d["pools"]:
        pool["gpu"] = "Trainium1"
    got = [v for v in _fire(d) if v.startswith("framework.accelerator")]
    names = ", ".join(p["name"] for p in d["pools"])
    assert got == [f"framework.accelerator: pools {names} run on Trainium1 (AWS); veRL 0.9 "
                   "runs on NVIDIA GPUs (verl 0.9.1 verl/plugin/platform/platform_cuda.py:28)"]
