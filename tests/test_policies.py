"""Policy files: validation, compilation into the planner, and `check --policy` by rule."""

from __future__ import annotations

from pathlib import Path

import pytest
from planner_fixtures import scale_prices, small_catalog, small_spec
from typer.testing import CliRunner

from ptplan.cli.app import app
from ptplan.core.errors import InputError
from ptplan.core.hardware import gpus
from ptplan.demand.model import build_demand
from ptplan.demand.rates import phase_rates
from ptplan.planfile.verify import verify_plan
from ptplan.planner.api import plan
from ptplan.policies.check import check_plan
from ptplan.policies.model import default_policy, load_policy, parse_policy

ROOT = Path(__file__).resolve().parents[1]


def policy(text: str):
    return parse_policy(text, "test.yaml")


def spot_nodes(p) -> int:
    return sum(a.nodes for pool in p.pools for a in pool.allocations
               if a.capacity_type == "spot")


def test_default_policy_keeps_update_off_spot_and_at_bf16_or_better():
    pol = default_policy()
    # capacity booked for the run (blocks, flex-start) too: policy block_phases, default update
    assert pol.capacity_types("update") == {"on_demand", "reserved", "block", "flex_start"}
    assert pol.precisions("update") == {"bf16", "fp16", "fp32"}
    assert "spot" in pol.capacity_types("rollout")
    assert pol.high_precision_fallback == {"teacher": 0.1, "reward": 0.1}
    assert load_policy(str(ROOT / "policies/default.yaml")) == pol


@pytest.mark.parametrize("text,match", [
    ("name: x\nphase: {}\n", r"unknown key 'phase' \(did you mean: phases\?\)"),
    ("name: x\nsplit_regions: maybe\n", "split_regions"),
    ("name: x\nphases: {update: {precisions: [int8]}}\n", "int8, an inference format"),
    ("name: x\nbudget: {warn_at: 0.9, stop_at: 0.5}\n", "warn_at 0.9 is above stop_at 0.5"),
    ("name: x\nphases: {rollout: {capacity_types: []}}\n", "capacity_types is empty"),
    ("name: x\nphases: {rollout: {capacity_types: [spotty]}}\n", "did you mean: spot"),
    ("name: x\nmax_spot_share: 1.5\n", r"max_spot_share = 1\.5"),
    ("name: x\nhigh_precision_fallback: {judge: 0.1}\n", "judge"),
])
def test_bad_policy_files_get_one_line(text, match):
    with pytest.raises(InputError, match=match) as err:
        policy(text)
    assert "\n" not in str(err.value)


def test_bad_policy_on_the_cli_exits_2(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\nmax_spot_shar: 0.5\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["plan", str(ROOT / "examples/sft-8b.yaml"), "--policy",
                                      str(path)])
    assert result.exit_code == 2
    assert "max_spot_shar" in result.stderr and "Traceback" not in result.stderr


def test_forbidding_spot_gives_a_plan_without_spot():
    spec, catalog = small_spec(), small_catalog()
    assert spot_nodes(plan(spec, catalog, explain=False)) > 0
    no_spot = policy("name: no-spot\nphases:\n" + "".join(
        f"  {ph}: {{capacity_types: [on_demand, reserved]}}\n"
        for ph in ("rollout", "scoring", "update", "eval")))
    p = plan(spec, catalog, explain=False, policy=no_spot)
    assert spot_nodes(p) == 0
    assert verify_plan(p) == [] and check_plan(p, no_spot) == []
    assert check_plan(plan(spec, catalog, explain=False), no_spot)[0].startswith(
        "phases.rollout.capacity_types")


def test_requiring_bf16_scoring_gives_bf16_scoring():
    spec, catalog = small_spec(), small_catalog()
    base = plan(spec, catalog, explain=False)
    assert {ph.precision for ph in base.phases if ph.name == "scoring"} == {"fp8"}
    bf16 = policy("name: bf16-scoring\nphases: {scoring: {precisions: [bf16]}}\n")
    p = plan(spec, catalog, explain=False, policy=bf16)
    assert {ph.precision for ph in p.phases if ph.name == "scoring"} == {"bf16"}
    assert check_plan(base, bf16) == ["phases.scoring.precisions: scoring runs at fp8; "
                                      "allowed: bf16"]


def test_high_precision_fallback_blends_teacher_scoring():
    spec = small_spec(method="opd", algorithm=None, reference_model=False,
                      teacher={"params_b": 7.6, "layers": 28, "hidden_size": 3584, "heads": 28,
                               "kv_heads": 4, "head_dim": 128})
    demand = build_demand(spec)
    h100 = gpus()["H100"]
    none = policy("name: none\n")
    half = policy("name: half\nhigh_precision_fallback: {teacher: 0.5}\n")

    def hours(pol, q):
        return next(r.node_hours for r in phase_rates(demand, "scoring", h100, 8, True, pol)
                    if r.precision == q)

    fp8, bf16 = hours(none, "fp8"), hours(none, "bf16")
    assert bf16 > fp8
    assert hours(half, "fp8") == pytest.approx(0.5 * fp8 + 0.5 * bf16, rel=1e-9)
    assert hours(half, "bf16") == pytest.approx(bf16, rel=1e-12)  # already high precision
    p = plan(spec, small_catalog(), explain=False, policy=half)
    scoring = next(ph for ph in p.phases if ph.name == "scoring")
    if scoring.precision in ("fp8", "int8"):
        assert scoring.fallback == {"teacher": 0.5}
    more = policy("name: more\nhigh_precision_fallback: {teacher: 0.9}\n")
    low = plan(spec, small_catalog(), explain=False, policy=none)
    low_scoring = next(ph for ph in low.phases if ph.name == "scoring")
    assert low_scoring.precision == "fp8" and low_scoring.fallback == {}
    assert check_plan(low, more) == ["high_precision_fallback.teacher: 0% of teacher scoring "
                                     "at bf16 or better; the policy asks 90%"]


def test_max_spot_share_caps_each_pool():
    spec = small_spec(sla={"deadline_hours": 2.0})
    catalog = small_catalog(caps=(3, 3))
    half = policy("name: half-spot\nmax_spot_share: 0.5\n")
    p = plan(spec, catalog, explain=False, policy=half)
    for pool in p.pools:
        spot = sum(a.nodes for a in pool.allocations if a.capacity_type == "spot")
        assert spot <= 0.5 * pool.nodes
    assert check_plan(p, half) == []
    unrestricted = plan(spec, catalog, explain=False)
    if any(sum(a.nodes for a in pool.allocations if a.capacity_type == "spot") > pool.nodes / 2
           for pool in unrestricted.pools):
        assert any(v.startswith("max_spot_share") for v in check_plan(unrestricted, half))


def test_providers_and_regions_rule():
    r2 = policy("name: r2-only\nregions: [r2]\n")
    p = plan(small_spec(), small_catalog(), explain=False, policy=r2)
    assert p.region == "r2"
    r1 = plan(small_spec(), small_catalog(), explain=False)
    assert r1.region == "r1"
    assert check_plan(r1, r2)[0].startswith("providers/regions")


def test_budget_thresholds_are_carried_and_checked():
    spec = small_spec(budget={"max_usd": 200.0})
    p = plan(spec, small_catalog(), explain=False)
    assert p.budget_warn_usd == "160.00" and p.budget_stop_usd == "200.00"
    strict = policy("name: strict\nbudget: {warn_at: 0.05, stop_at: 0.1}\n")
    assert any(v.startswith("budget.stop_at") for v in check_plan(p, strict))


def test_a_policy_may_allow_the_update_on_spot_with_gang_overhead():
    spot_ok = policy("name: update-spot\nphases: {update: {capacity_types: [spot, on_demand]}}\n")
    cheap_spot = scale_prices(small_catalog(caps=(3, 3)), 0.2, "spot")
    p = plan(small_spec(pipeline="sync"), cheap_spot, explain=False, policy=spot_ok)
    update = next(pool for pool in p.pools if "update" in pool.phases)
    assert any(a.capacity_type == "spot" for a in update.allocations)
    assert 0 < update.gang_overhead_fraction < 0.1
    assert verify_plan(p) == []  # effective fractions follow Young's model for the gang
    assert check_plan(p, default_policy())[0].startswith("phases.update.capacity_types")


def test_check_cli_names_policy_rules(tmp_path):
    runner = CliRunner()
    out = tmp_path / "plan.json"
    result = runner.invoke(app, ["plan", str(ROOT / "examples/grpo-7b.yaml"), "--format", "json",
                                 "--no-timings", "-o", str(out)])
    assert result.exit_code == 0, result.stderr
    pol = tmp_path / "nospot.yaml"
    pol.write_text("name: nospot\nphases: {rollout: {capacity_types: [on_demand]}}\n",
                   encoding="utf-8")
    result = runner.invoke(app, ["check", str(out), "--policy", str(pol)])
    assert result.exit_code == 1
    assert "violation: policy nospot: phases.rollout.capacity_types" in result.stdout
    assert runner.invoke(app, ["check", str(out), "--policy",
                               str(ROOT / "policies/default.yaml")]).exit_code == 0


def test_policy_narrowing_providers_does_not_blame_the_spec():
    """A spec that names aws and gcp, under a policy that allows only aws, plans on aws; a
    provider name the catalog lacks is still reported as the spec's typo."""
    from ptplan.core.errors import InputError
    from ptplan.planner.api import plan
    from ptplan.providers.registry import load_catalog
    from ptplan.spec.project import load_spec

    spec = load_spec("examples/grpo-7b.yaml")
    assert {"aws", "gcp"} <= set(spec.placement.providers or [])
    policy = parse_policy("name: aws-only\nproviders: [aws]\n")
    p = plan(spec, load_catalog("embedded"), explain=False, policy=policy)
    assert {a.provider for q in p.pools for a in q.allocations} == {"aws"}
    bad = spec.model_copy(update={"placement": spec.placement.model_copy(
        update={"providers": ["aws", "azure"]})})
    with pytest.raises(InputError, match=r"placement\.providers: 'azure'"):
        plan(bad, load_catalog("embedded"), explain=False, policy=policy)


def test_extends_default_keeps_its_rules_and_overrides_what_it_gives(tmp_path):
    p = tmp_path / "aws.yaml"
    p.write_text("name: aws-only\nextends: default\nproviders: [aws]\n"
                 "phases: {rollout: {precisions: [bf16]}}\n")
    policy = load_policy(str(p))
    base = default_policy()
    assert policy.name == "aws-only" and policy.extends == "default"
    assert policy.providers == ["aws"]
    assert policy.capacity_types("update") == base.capacity_types("update") == \
        {"on_demand", "reserved", "block", "flex_start"}
    # mappings merge key by key: rollout keeps the default capacity types, gets bf16 only
    assert policy.precisions("rollout") == {"bf16"}
    assert policy.capacity_types("rollout") == base.capacity_types("rollout")
    assert policy.storage == base.storage and policy.budget == base.budget


def test_extends_a_file_relative_to_the_policy_and_chains(tmp_path):
    (tmp_path / "team").mkdir()
    (tmp_path / "team" / "base.yaml").write_text(
        "name: team\nextends: default\nmax_spot_share: 0.5\nbudget: {warn_at: 0.7}\n")
    child = tmp_path / "team" / "proj.yaml"
    child.write_text("name: proj\nextends: base.yaml\nbudget: {stop_at: 0.9}\n")
    policy = load_policy(str(child))
    assert policy.max_spot_share == 0.5
    assert (policy.budget.warn_at, policy.budget.stop_at) == (0.7, 0.9)
    assert policy.capacity_types("update") == {"on_demand", "reserved", "block", "flex_start"}


@pytest.mark.parametrize("files,match", [
    ({"a.yaml": "name: a\nextends: b.yaml\n", "b.yaml": "name: b\nextends: a.yaml\n"},
     "forms a cycle"),
    ({"a.yaml": "name: a\nextends: missing.yaml\n"}, "not found"),
    ({"a.yaml": "name: a\nextends: 3\n"}, "extends = 3"),
    ({"a.yaml": "name: a\nextends: default\nmax_spot_share: 2\n"}, "max_spot_share"),
])
def test_bad_extends_get_one_line(tmp_path, files, match):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(InputError, match=match) as err:
        load_policy(str(tmp_path / "a.yaml"))
    assert "\n" not in str(err.value)


REWARD = {"params_b": 1.54, "layers": 28, "hidden_size": 1536, "heads": 12, "kv_heads": 2,
          "head_dim": 128}


@pytest.mark.parametrize("spec_kw,policy_text", [
    # a policy that lets the update train at fp8 (the default policy forbids it), for a spec
    # that opts in to fp8 updates (without precisions.update the update trains in bf16)
    ({"precisions": {"update": ["bf16", "fp8"]}},
     "name: fp8-update\nextends: default\nphases: {update: {precisions: [fp8]}}\n"),
    # a policy whose reward calibration share differs from the default's 10 %
    ({"reward_model": REWARD},
     "name: calib\nextends: default\nhigh_precision_fallback: {reward: 0.6}\n"),
])
def test_check_against_spec_uses_the_plans_policy(tmp_path, spec_kw, policy_text):
    """``ptplan check PLAN --spec SPEC`` recomputes demand under the policy the plan was made
    under: a plan made under a non-default policy has no false precision or throughput
    violations (it had both: the recomputation used the default policy)."""
    import yaml

    from ptplan.planfile.verify import verify_against_spec

    spec = small_spec(**spec_kw)
    pol = policy(policy_text)
    p = plan(spec, small_catalog(), explain=False, policy=pol)
    assert p.policy["name"] == pol.name
    assert verify_against_spec(p, spec) == []
    plan_file, spec_file = tmp_path / "plan.json", tmp_path / "spec.yaml"
    plan_file.write_text(p.to_json(), encoding="utf-8")
    spec_file.write_text(yaml.safe_dump(spec.model_dump(mode="json", exclude_unset=True)),
                         encoding="utf-8")
    result = CliRunner().invoke(app, ["check", str(plan_file), "--spec", str(spec_file)])
    assert result.exit_code == 0, result.output
    # the same plan re-labelled with the default policy is caught by the recomputation
    relabelled = p.model_copy(update={"policy": default_policy().model_dump(mode="json")})
    assert any(line.startswith("spec_match: phase") for line in
               verify_against_spec(relabelled, spec))
