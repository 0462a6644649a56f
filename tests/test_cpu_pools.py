"""CPU pools (issue #25 item 2): agent sandboxes and the CPU reward, sized, placed in the plan's
region, priced on CPU instance types, in the total and re-checked by the verifier.

Expected figures are derived by hand from docs/demand-model.md §4.9 and the embedded CPU rows
(providers/data/cpu_vms.csv): c7i.16xlarge 64 vCPU / 128 GiB at $2.856/h on-demand, spot
$2.856 × 0.4 = $1.1424/h; m7i.16xlarge 64 vCPU / 256 GiB at $3.2256/h, spot $1.29024/h.
"""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import assert_one_line, example_dict
from typer.testing import CliRunner

from ptplan.cli.app import app
from ptplan.core.errors import InfeasibleError, InputError, ProviderError
from ptplan.costs.cpu import cpu_needs
from ptplan.demand.model import build_demand
from ptplan.planfile.rules_cpu import check_cpu_against_catalog, check_cpu_pools
from ptplan.planfile.schema import SCHEMA_VERSION, Plan
from ptplan.planfile.verify import verify_against_spec, verify_plan
from ptplan.planner.api import plan
from ptplan.policies.model import parse_policy
from ptplan.providers.custom import load_custom_catalog
from ptplan.providers.embedded import embedded_catalog
from ptplan.spec.project import ProjectSpec, parse_spec

runner = CliRunner()
N_STEP = 64 * 8  # prompts_per_step x samples_per_prompt of the agentic example
STEPS = 200


def _cents(x: float) -> str:
    return str(Decimal(repr(x)).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))


EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "agentic-swe-rl.yaml"
_AGENT = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))


def agentic() -> dict[str, Any]:
    return copy.deepcopy(_AGENT)


def agent_spec(**edits: Any) -> ProjectSpec:
    d = agentic()
    for key, value in edits.items():
        section, _, field = key.partition("__")
        if field:
            sub = d.setdefault(section, {})
            if value is None:
                sub.pop(field, None)
            else:
                sub[field] = value
        elif value is None:
            d.pop(section, None)
        else:
            d[section] = value
    return parse_spec(d)


def planned(edits: str = "{}", policy: str | None = None) -> Plan:
    """Planned in the test that asks (not cached: a plan built once in mutmut's parent process
    would hide every mutant of the costing code, docs/testing.md)."""
    pol = parse_policy(policy) if policy else None
    return plan(agent_spec(**json.loads(edits)), embedded_catalog(), timings=False, policy=pol)


def test_sandbox_and_reward_pools_by_hand() -> None:
    p = planned()
    assert p.schema_version == SCHEMA_VERSION and p.cpu_pools is not None
    pools = {c.name: c for c in p.cpu_pools}
    sb, rw = pools["sandbox"], pools["reward"]
    # sandbox: 512 episodes in flight x (2 vCPU, 4 GiB) = 1024 vCPU, 2048 GiB, held for the run;
    # c7i: 1024/64 = 16 nodes (memory 2048/128 = 16 too) at $1.1424/h spot (rollout may use spot)
    assert (sb.vcpus_needed, sb.memory_gib_needed, sb.basis) == (1024.0, 2048.0, "held")
    assert (sb.nodes, sb.instance_type, sb.capacity_type) == (16, "c7i.16xlarge", "spot")
    assert sb.usd_per_hour == pytest.approx(1.1424)
    assert sb.node_hours == pytest.approx(16 * p.makespan_hours)
    assert sb.cost_usd == _cents(16 * 1.1424 * p.makespan_hours)
    # reward: 200 steps x 512 samples x 30 s = 853.33 vCPU-hours = 13.33 node-hours of 64 vCPUs
    assert rw.basis == "work" and rw.vcpu_hours == pytest.approx(STEPS * N_STEP * 30 / 3600)
    assert rw.node_hours == pytest.approx(STEPS * N_STEP * 30 / 3600 / 64)
    assert rw.nodes == N_STEP // 64  # one vCPU per sample of a step at the peak
    assert rw.cost_usd == _cents(STEPS * N_STEP * 30 / 3600 / 64 * 1.1424)
    assert (sb.provider, sb.region, rw.region) == (p.provider, p.region, p.region)
    cpu = Decimal(sb.cost_usd) + Decimal(rw.cost_usd)
    assert Decimal(p.cpu_cost_usd or "0") == cpu
    assert verify_plan(p) == []
    assert verify_against_spec(p, agent_spec()) == []


def test_cpu_pools_do_not_move_the_gpu_plan() -> None:
    """Sandboxes that start at once (startup_s 0, so the rollout floor is that of no sandbox)
    and a CPU reward, against neither: same GPU pools and makespan; the total differs by
    exactly the CPU pools."""
    with_cpu = planned(json.dumps({"agent__sandbox": {"vcpus": 2, "memory_gib": 4}}))
    without = planned(json.dumps({"reward": None, "agent__sandbox": None}))
    assert without.cpu_pools is None and without.cpu_cost_usd is None
    assert without.makespan_hours == pytest.approx(with_cpu.makespan_hours)
    assert [x.allocations for x in without.pools] == [x.allocations for x in with_cpu.pools]
    assert Decimal(with_cpu.total_cost_usd) - Decimal(without.total_cost_usd) == \
        Decimal(with_cpu.cpu_cost_usd or "0")
    assert without.schema_version == SCHEMA_VERSION  # 8: every plan (6 before the interval)
    assert '"cpu_pools"' not in without.to_json()


def test_reward_cost_scales_with_samples_times_seconds() -> None:
    a = {c.name: c for c in planned(json.dumps({"reward": {"cpu_seconds_per_sample": 30}}))
         .cpu_pools or []}["reward"]
    b = {c.name: c for c in planned(json.dumps({"reward": {"cpu_seconds_per_sample": 90}}))
         .cpu_pools or []}["reward"]
    assert b.vcpu_hours == pytest.approx(3 * a.vcpu_hours)
    assert b.node_hours * b.usd_per_hour == pytest.approx(3 * a.node_hours * a.usd_per_hour)


def test_tool_workers_cap_the_sandboxes_and_memory_picks_the_type() -> None:
    """W = 100 tool workers: 100 sandboxes of 1 vCPU and 8 GiB = 100 vCPU, 800 GiB (spot
    $/h): c7i.2xlarge max(13, 50) = 50 nodes ($7.14), c7i.16xlarge max(2, 7) = 7 ($7.9968),
    m7i.8xlarge max(4, 7) = 7 ($4.51584), m7i.16xlarge max(2, 4) = 4 ($5.16096), m7i.2xlarge
    max(13, 25) = 25 ($4.032): m7i.2xlarge, the cheapest."""
    d = {"agent__tool_workers": 100, "agent__sandbox": {"vcpus": 1, "memory_gib": 8}}
    need = next(n for n in cpu_needs(build_demand(agent_spec(**d))) if n.name == "sandbox")
    assert (need.vcpus, need.memory_gib) == (100.0, 800.0)
    sb = {c.name: c for c in planned(json.dumps(d)).cpu_pools or []}["sandbox"]
    assert (sb.instance_type, sb.nodes) == ("m7i.2xlarge", 25)
    assert sb.usd_per_hour == pytest.approx(0.4032 * 0.4)


def test_policy_without_spot_puts_the_pools_on_demand() -> None:
    pol = ("name: no-spot\nextends: default\nphases:\n  rollout: {capacity_types: [on_demand]}\n"
           "  scoring: {capacity_types: [on_demand]}\n")
    p = planned("{}", pol)
    assert {c.capacity_type for c in p.cpu_pools or []} == {"on_demand"}
    sb = {c.name: c for c in p.cpu_pools or []}["sandbox"]
    assert sb.usd_per_hour == pytest.approx(2.856)
    assert verify_plan(p) == []


def test_no_cpu_offer_in_the_region_is_infeasible() -> None:
    d = agentic()
    d["placement"] = {**d["placement"], "providers": ["gcp"], "regions": ["europe-west4"]}
    with pytest.raises(InfeasibleError) as e:
        plan(parse_spec(d), embedded_catalog(), timings=False)
    assert_one_line(str(e.value))
    assert "no CPU offers" in str(e.value) and "sandbox, reward" in str(e.value)


def test_specs_without_cpu_work_stay_schema_5() -> None:
    p = plan(parse_spec(example_dict("grpo-7b.yaml")), embedded_catalog(), timings=False)
    assert p.schema_version == SCHEMA_VERSION and p.cpu_pools is None  # 5 before schema 8
    assert '"cpu_pools"' not in p.to_json() and '"cpu_cost_usd"' not in p.to_json()


@pytest.mark.parametrize("bad, word", [
    ({"reward": {"cpu_seconds_per_sample": -1}}, "cpu_seconds_per_sample"),
    ({"reward": {"cpu_seconds_per_sample": 0}}, "cpu_seconds_per_sample"),
    ({"reward": {"cpu_s": 3}}, "cpu_s"),
])
def test_bad_reward_sections_are_one_line(bad: dict[str, Any], word: str) -> None:
    d = agentic()
    d.update(bad)
    with pytest.raises(InputError) as e:
        parse_spec(d)
    assert_one_line(str(e.value))
    assert word in str(e.value)


def test_reward_with_a_reward_model_or_sft_is_an_input_error() -> None:
    d = example_dict("sft-8b.yaml")
    d["reward"] = {"cpu_seconds_per_sample": 5}
    with pytest.raises(InputError) as e:
        parse_spec(d)
    assert_one_line(str(e.value))
    assert "reward" in str(e.value)


# ---- the verifier ----------------------------------------------------------------------------

def _broken(change) -> Plan:  # type: ignore[no-untyped-def]
    data = json.loads(planned().to_json())
    change(data)
    return Plan.model_validate(data)


def _pool(data: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in data["cpu_pools"] if c["name"] == name)


def test_rule_fires_on_too_few_nodes() -> None:
    def change(d):  # type: ignore[no-untyped-def]
        sb = _pool(d, "sandbox")
        sb["nodes"] = 15
        sb["node_hours"] = 15 * d["makespan_hours"]
        sb["cost_usd"] = _cents(sb["node_hours"] * sb["usd_per_hour"])
    out = check_cpu_pools(_broken(change))
    assert any("has 15 nodes" in x and "need 16" in x for x in out), out


def test_rule_fires_on_too_many_nodes() -> None:
    """The reward pool's peak is one vCPU per sample of a step: 512 / 64 = 8 nodes, not 9."""
    out = check_cpu_pools(_broken(lambda d: _pool(d, "reward").update(nodes=9)))
    assert any("reward has 9 nodes" in x and "need 8" in x for x in out), out


def test_rule_fires_on_another_region_and_on_cost() -> None:
    def change(d):  # type: ignore[no-untyped-def]
        _pool(d, "reward")["region"] = "us-west-2"
        _pool(d, "sandbox")["cost_usd"] = "1.00"
    out = check_cpu_pools(_broken(change))
    assert any("reward is in aws/us-west-2" in x for x in out), out
    assert any("sandbox 1.00 != node-hours x $/h" in x for x in out), out
    assert any(x.startswith("totals: CPU pools") for x in out), out


def test_rule_fires_on_spot_the_policy_forbids() -> None:
    def change(d):  # type: ignore[no-untyped-def]
        d["policy"]["phases"]["rollout"]["capacity_types"] = ["on_demand"]
    out = check_cpu_pools(_broken(change))
    assert any("sandbox is on spot" in x for x in out), out


def test_spec_and_catalog_rules_fire() -> None:
    def vcpus(d):  # type: ignore[no-untyped-def]
        _pool(d, "sandbox")["vcpus_needed"] = 512.0
    out = verify_against_spec(_broken(vcpus), agent_spec())
    assert any("CPU pool sandbox vcpus_needed 512.0 != spec 1024.0" in x for x in out), out

    def price(d):  # type: ignore[no-untyped-def]
        _pool(d, "sandbox")["usd_per_hour"] = 0.5
    out = check_cpu_against_catalog(_broken(price), embedded_catalog())
    assert any("catalog_match: CPU c7i.16xlarge spot" in x for x in out), out

    def dearer(d):  # type: ignore[no-untyped-def]
        sb = _pool(d, "sandbox")
        sb.update(instance_type="m7i.16xlarge", usd_per_hour=1.29024, memory_gib_per_node=256.0)
    out = check_cpu_against_catalog(_broken(dearer), embedded_catalog())
    assert any("c7i.16xlarge spot would cost" in x for x in out), out


def test_cli_plan_check_and_table(tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    spec = str(EXAMPLE)
    r = runner.invoke(app, ["plan", spec, "--format", "json", "--no-timings", "-o", str(out)])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["check", str(out), "--spec", spec])
    assert r.exit_code == 0 and r.output.startswith("ok:"), r.output
    bad = json.loads(out.read_text())
    _pool(bad, "sandbox")["nodes"] = 3
    bad_path = tmp_path / "bad.json"
    bad_path.write_text(json.dumps(bad))
    r = runner.invoke(app, ["check", str(bad_path)])
    assert r.exit_code == 1 and "violation: cpu_pools: sandbox has 3 nodes" in r.output
    r = runner.invoke(app, ["plan", spec, "--explain"])
    assert r.exit_code == 0
    assert "cpu:sandbox" in r.output and "CPU pool sandbox (1024 vCPUs" in r.output


# ---- catalogs -------------------------------------------------------------------------------

def test_embedded_cpu_offers_never_reach_gpu_pools() -> None:
    cat = embedded_catalog()
    assert cat.cpu_offers and all(o.gpus_per_node == 0 for o in cat.cpu_offers)
    assert all(o.gpus_per_node > 0 for o in cat.offers)
    od = {(o.region, o.instance_type): o for o in cat.cpu_offers if o.capacity_type == "on_demand"}
    assert od[("us-east-1", "c7i.8xlarge")].usd_per_hour == 1.428
    # GCP n2-standard-8: 8 x $0.031611 + 32 x $0.004237 per hour
    assert od[("us-central1", "n2-standard-8")].usd_per_hour == pytest.approx(
        8 * 0.031611 + 32 * 0.004237, abs=1e-6)


CUSTOM = """
as_of: 2026-11-01
offers:
  - {provider: lab, region: local, instance_type: h100x8, gpu: H100, gpus_per_node: 8,
     on_demand_usd_per_hour: 20.0}
  - {provider: lab, region: local, instance_type: cpu64, gpu: none, gpus_per_node: 0,
     vcpus: 64, memory_gib: 256, on_demand_usd_per_hour: 2.0}
"""


def test_custom_catalog_cpu_rows(tmp_path: Path) -> None:
    path = tmp_path / "cat.yaml"
    path.write_text(CUSTOM)
    cat = load_custom_catalog(str(path))
    assert [o.instance_type for o in cat.offers] == ["h100x8"]
    assert [(o.instance_type, o.vcpus, o.gpus_per_node) for o in cat.cpu_offers] == \
        [("cpu64", 64.0, 0)]
    d = agentic()
    d["placement"] = {"providers": ["lab"], "gpus": ["H100"]}
    p = plan(parse_spec(d), cat, timings=False)
    sb = {c.name: c for c in p.cpu_pools or []}["sandbox"]
    # 1024 vCPU / 64 = 16 nodes, 2048 GiB / 256 = 8: 16 nodes x $2/h for the run
    assert (sb.instance_type, sb.nodes, sb.capacity_type) == ("cpu64", 16, "on_demand")
    assert sb.cost_usd == _cents(16 * 2.0 * p.makespan_hours)
    assert verify_plan(p) == []


@pytest.mark.parametrize("row, word", [
    ("{provider: lab, region: local, instance_type: c, gpu: none, gpus_per_node: 2, vcpus: 8, "
     "memory_gib: 8, on_demand_usd_per_hour: 1.0}", "both or neither"),
    ("{provider: lab, region: local, instance_type: c, gpu: none, gpus_per_node: 0, "
     "on_demand_usd_per_hour: 1.0}", "needs vcpus and memory_gib"),
])
def test_bad_custom_cpu_rows_are_one_line(tmp_path: Path, row: str, word: str) -> None:
    path = tmp_path / "cat.yaml"
    path.write_text(f"as_of: 2026-11-01\noffers:\n  - {row}\n")
    with pytest.raises(InputError) as e:
        load_custom_catalog(str(path))
    assert_one_line(str(e.value))
    assert word in str(e.value)


def test_copy_is_independent() -> None:
    """The cached plan is not edited by the breaking helpers."""
    before = planned().to_json()
    _broken(lambda d: _pool(d, "sandbox").update(nodes=1))
    assert planned().to_json() == before
    assert copy.deepcopy(before) == before


def test_price_cache_stores_and_loads_cpu_offers(tmp_path: Path) -> None:
    """A pull holding a CPU offer round-trips through the SQLite cache into ``cpu_offers``; a
    CPU row without its shape is a bad row (the pull is refused, the cache unchanged)."""
    from ptplan.providers.base import Offer
    from ptplan.providers.cache import Pull, load_cache_catalog, store_pull

    as_of = "2026-12-01T00:00:00Z"
    gpu = Offer(provider="aws", region="us-east-1", zone="", instance_type="p5.48xlarge",
                gpu="H100", gpus_per_node=8, capacity_type="on_demand", usd_per_hour=55.04,
                vcpus=192.0, memory_gib=2048.0, as_of=as_of, source="t", note="n")
    cpu = Offer(provider="aws", region="us-east-1", zone="", instance_type="c7i.8xlarge",
                gpu="none", gpus_per_node=0, capacity_type="on_demand", usd_per_hour=1.428,
                vcpus=32.0, memory_gib=64.0, as_of=as_of, source="t", note="n")
    db = tmp_path / "prices.sqlite"
    store_pull(Pull(provider="aws", as_of=as_of, source="aws api", regions=(),
                    offers=(gpu, cpu), reserved_rates=(), exclusions=(), notes=()), db)
    cat = load_cache_catalog(db)
    assert [o.instance_type for o in cat.offers] == ["p5.48xlarge"]
    assert [(o.instance_type, o.vcpus, o.memory_gib) for o in cat.cpu_offers] == \
        [("c7i.8xlarge", 32.0, 64.0)]
    shapeless = replace(cpu, vcpus=None)
    with pytest.raises((InputError, ProviderError)) as e:
        store_pull(Pull(provider="aws", as_of=as_of, source="aws api", regions=(),
                        offers=(gpu, shapeless), reserved_rates=(), exclusions=(), notes=()), db)
    assert_one_line(str(e.value))
    assert "vcpus and memory_gib" in str(e.value)
    assert len(load_cache_catalog(db).cpu_offers) == 1


# ---- agent trajectories: a storage data class with its own lifecycle ---------------------------

def test_agent_trajectories_by_hand() -> None:
    """102,400 episodes (200 steps x 64 prompts x 8) of 2,048 + 24 x 512 + 23 x 768 = 32,000
    tokens x 4 B = 13.1072 GB, kept 30 days (retention_days): S3 Standard-IA would bill 30 days
    x $0.0125 = $0.1616, Glacier Instant Retrieval its 90-day minimum x $0.004 = $0.1551:
    Glacier IR, $0.16."""
    p = planned()
    t = next(s for s in p.storage if s.data_class == "agent_trajectories")
    assert t.gb == pytest.approx(102_400 * 32_000 * 4 / 1e9)
    assert (t.tier, t.access, t.min_days) == ("s3_glacier_instant", "ms", 90.0)
    assert t.gb_months == pytest.approx(t.gb * 90 * 24 / 730)
    assert t.cost_usd == "0.16"
    # a specs without agent has no such class
    grpo = plan(parse_spec(example_dict("grpo-7b.yaml")), embedded_catalog(), timings=False)
    assert all(s.data_class != "agent_trajectories" for s in grpo.storage)


def test_trajectory_days_and_replay_state() -> None:
    """7 days and 50 MB of replay state per episode: 102,400 x (128 kB + 50 MB) = 5,133.1 GB;
    7 days on S3 Standard (the cheapest tier without a longer minimum): GB x 7 x 24/730 x
    $0.023."""
    agent = dict(_AGENT["agent"], trajectory_days=7, replay_state_mb=50.0)
    p = planned(json.dumps({"agent": agent}))
    t = next(s for s in p.storage if s.data_class == "agent_trajectories")
    gb = 102_400 * (32_000 * 4 + 50e6) / 1e9
    assert t.gb == pytest.approx(gb)
    assert t.tier == "s3_standard"
    assert t.cost_usd == _cents(gb * 7 * 24 / 730 * 0.023)
    assert verify_against_spec(p, agent_spec(agent=agent)) == []


def test_trajectories_get_their_own_bucket_rule(tmp_path: Path) -> None:
    """The lifecycle target writes a rule for the trajectories' prefix that expires them after
    the days they were priced for (the tier's 90-day minimum binds here)."""
    out = tmp_path / "plan.json"
    out.write_text(planned().to_json())
    r = runner.invoke(app, ["render", str(out), "--target", "lifecycle", "-o",
                            str(tmp_path / "r"), "--spec", str(EXAMPLE)])
    assert r.exit_code == 0, r.output
    rules = json.loads((tmp_path / "r" / "lifecycle" / "s3-lifecycle.json").read_text())
    rule = next(x for x in rules["Rules"] if x["ID"] == "agent-trajectories")
    assert rule["Filter"]["Prefix"] == "agentic-swe-rl/trajectories/"
    assert rule["Expiration"]["Days"] == 90
    assert rule["Transitions"] == [{"Days": 0, "StorageClass": "GLACIER_IR"}]


# ---- data preparation ------------------------------------------------------------------------

def sft_prep(prep: float, hours: float | None = None) -> Plan:
    d = example_dict("sft-8b.yaml")
    d["data"]["prep_cpu_hours"] = prep
    if hours is not None:
        d["data"]["prep_hours"] = hours
    d["placement"] = {**(d.get("placement") or {}), "providers": ["gcp"],
                      "regions": ["us-central1"]}
    return plan(parse_spec(d), embedded_catalog(), timings=False)


def test_data_preparation_pool_by_hand() -> None:
    """500 vCPU-hours in 1 h (the default) in us-central1: the least $/vCPU-hour is
    n2-highcpu-32 ($1.147136/h / 32 = $0.035848, spot x 0.4 = $0.4588544/h); 500/32 = 15.625
    node-hours = $7.17, on ceil(500/32) = 16 nodes; in 4 h, ceil(500/128) = 4 nodes, same
    cost. The GPU plan and its makespan do not move."""
    p = sft_prep(500.0)
    prep = {c.name: c for c in p.cpu_pools or []}["prep"]
    assert (prep.instance_type, prep.capacity_type, prep.nodes) == ("n2-highcpu-32", "spot", 16)
    assert prep.node_hours == pytest.approx(500 / 32)
    assert prep.cost_usd == _cents(500 / 32 * 1.147136 * 0.4) == "7.17"
    assert "data.prep_hours = 1 (the preparation stage's wall time; sizes its CPU pool)" \
        in p.defaults_applied
    slow = {c.name: c for c in sft_prep(500.0, 4.0).cpu_pools or []}["prep"]
    assert slow.nodes == 4 and slow.cost_usd == prep.cost_usd
    base = plan(parse_spec({**example_dict("sft-8b.yaml"), "placement": {
        **(example_dict("sft-8b.yaml").get("placement") or {}), "providers": ["gcp"],
        "regions": ["us-central1"]}}), embedded_catalog(), timings=False)
    assert base.makespan_hours == pytest.approx(p.makespan_hours)
    assert Decimal(p.total_cost_usd) - Decimal(base.total_cost_usd) == Decimal("7.17")
    assert verify_plan(p) == []


@pytest.mark.parametrize("field, value", [("prep_cpu_hours", -5), ("prep_cpu_hours", "lots"),
                                          ("prep_hours", 0)])
def test_bad_preparation_fields_are_one_line(field: str, value: Any) -> None:
    d = example_dict("sft-8b.yaml")
    d["data"] = {**d["data"], "prep_cpu_hours": 10, field: value}
    with pytest.raises(InputError) as e:
        parse_spec(d)
    assert_one_line(str(e.value))
    assert f"data.{field}" in str(e.value)


# ---- render: the CPU pools as Karpenter NodePools -----------------------------------------------

def _rendered_cpu() -> dict[str, str]:
    from ptplan.rendering.targets import render_plan

    return render_plan(planned(), "karpenter")[0]


def test_cpu_nodepools_match_the_crds_and_the_plan() -> None:
    import jsonschema
    from test_render import crd_schemas

    from ptplan.rendering.checks.cluster import check_render

    files = _rendered_cpu()
    docs = [d for d in yaml.safe_load_all(files["karpenter/cpu-nodepools.yaml"]) if d]
    schemas = crd_schemas()
    for d in docs:
        errors = list(jsonschema.Draft7Validator(schemas[(d["apiVersion"], d["kind"])])
                      .iter_errors(d))
        assert not errors, f"{d['kind']} {d['metadata']['name']}: {errors[0].message}"
    pools = {d["spec"]["template"]["metadata"]["labels"]["ptplan.io/cpu-pool"]: d
             for d in docs if d["kind"] == "NodePool"}
    assert sorted(pools) == ["reward", "sandbox"]
    assert pools["sandbox"]["spec"]["limits"] == {"cpu": "1024", "nodes": "16"}
    assert pools["sandbox"]["spec"]["disruption"]["consolidationPolicy"] == "WhenEmpty"
    assert pools["reward"]["spec"]["limits"] == {"cpu": "512", "nodes": "8"}
    assert pools["reward"]["spec"]["disruption"]["consolidationPolicy"] == \
        "WhenEmptyOrUnderutilized"
    # pinned to the zone of the GPU pools: the plan prices sandbox traffic as same-zone
    gpu = [d for d in yaml.safe_load_all(files["karpenter/nodepools.yaml"]) if d
           and d["kind"] == "NodePool"]
    gpu_zones = {tuple(r["values"]) for d in gpu for r in d["spec"]["template"]["spec"]
                 ["requirements"] if r["key"] == "topology.k8s.aws/zone-id"}
    for d in pools.values():
        zones = [r["values"] for r in d["spec"]["template"]["spec"]["requirements"]
                 if r["key"] == "topology.k8s.aws/zone-id"]
        assert len(zones) == 1 and {tuple(zones[0])} == gpu_zones, (zones, gpu_zones)
    assert check_render(planned(), files) == []


@pytest.mark.parametrize("edit, word", [
    (lambda t: t.replace('{"cpu": "1024", "nodes": "16"}', '{"cpu": "2048", "nodes": "32"}'),
     "limits"),
    (lambda t: t.replace('"value": "sandbox"', '"value": "other"'), "lacks the taint"),
    (lambda t: t.replace('"ptplan.io/cpu-pool": "reward"', '"ptplan.io/cpu-pool": "extra"'),
     "which the plan does not have"),
    (lambda t: t.replace('- key: "topology.k8s.aws/zone-id"', '- key: "example.com/unused"'),
     "may run in zones any"),
])
def test_render_check_catches_edited_cpu_nodepools(edit, word: str) -> None:  # type: ignore[no-untyped-def]
    from ptplan.rendering.checks.cluster import check_render

    files = dict(_rendered_cpu())
    files["karpenter/cpu-nodepools.yaml"] = edit(files["karpenter/cpu-nodepools.yaml"])
    out = check_render(planned(), files)
    assert any(x.startswith("cpu_pools:") and word in x for x in out), out


def test_plans_without_cpu_pools_render_no_cpu_file() -> None:
    from ptplan.rendering.targets import render_plan

    grpo = plan(parse_spec(example_dict("grpo-7b.yaml")), embedded_catalog(), timings=False)
    if grpo.provider == "aws":
        assert "karpenter/cpu-nodepools.yaml" not in render_plan(grpo, "karpenter")[0]
    assert grpo.cpu_pools is None
    _, notes = render_plan(planned(), "lifecycle")
    assert any(n.startswith("cpu pools: sandbox 16 x c7i.16xlarge, reward 8 x c7i.16xlarge "
                            "are rendered only as Karpenter NodePools") for n in notes), notes


# ---- live AWS pulls of CPU types (boto3 against the local Price List / EC2 server) ------------

def _c7i_item(**attrs: Any) -> dict[str, Any]:
    """The recorded g6e.xlarge on-demand item made into c7i.8xlarge (32 vCPU, 64 GiB, $1.428/h):
    no gpu or gpuMemory attribute, as the Price List has for CPU types."""
    from test_aws import PRICE_LIST

    item = json.loads(json.dumps(next(i for i in PRICE_LIST if i["product"]["attributes"]
                                      ["instanceType"] == "g6e.xlarge"
                                      and i["product"]["attributes"]["regionCode"]
                                      == "us-east-1")))
    a = item["product"]["attributes"]
    for k in ("gpu", "gpuMemory"):
        a.pop(k, None)
    a.update({"instanceType": "c7i.8xlarge", "vcpu": "32", "memory": "64 GiB", **attrs})
    for term in item["terms"]["OnDemand"].values():
        for dim in term["priceDimensions"].values():
            dim["pricePerUnit"]["USD"] = "1.4280000000"
    return item


def test_aws_refresh_pulls_cpu_types_into_the_cache(monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    from test_aws import FakeAWS, aws_env

    from ptplan.providers.aws import fetch_aws
    from ptplan.providers.cache import load_cache_catalog, store_pull

    aws_env(monkeypatch, tmp_path)
    fake = FakeAWS()
    try:
        fake.items = [_c7i_item()]
        pull = fetch_aws(["us-east-1"], ["c7i.8xlarge"], endpoint=fake.url)
    finally:
        fake.close()
    od = [o for o in pull.offers if o.capacity_type == "on_demand"]
    assert [(o.instance_type, o.gpu, o.gpus_per_node, o.vcpus, o.memory_gib, o.usd_per_hour)
            for o in od] == [("c7i.8xlarge", "none", 0, 32.0, 64.0, 1.428)]
    db = tmp_path / "prices.sqlite"
    store_pull(pull, db)
    cat = load_cache_catalog(db)
    assert cat.offers == () or all(o.gpus_per_node > 0 for o in cat.offers)
    assert [o.instance_type for o in cat.cpu_offers if o.capacity_type == "on_demand"] == \
        ["c7i.8xlarge"]


def test_aws_cpu_item_without_shape_is_excluded_and_unknown_family_refused() -> None:
    from ptplan.providers.aws import validate_instance_types
    from ptplan.providers.aws_prices import parse_price_item

    exclusions: list[str] = []
    offer, _, info = parse_price_item(json.dumps(_c7i_item(vcpu="")), "2026-12-01", exclusions)
    assert offer is None and info is None
    assert exclusions == ["aws c7i.8xlarge us-east-1: a CPU type without vcpu and memory "
                          "attributes cannot size a CPU pool"]
    assert validate_instance_types(["c7i.8xlarge", "p5.48xlarge"]) == \
        ("c7i.8xlarge", "p5.48xlarge")
    with pytest.raises(InputError) as e:
        validate_instance_types(["m5.large"])
    assert_one_line(str(e.value))
    assert "CPU families" in str(e.value)


def test_cpu_pools_count_against_the_budget() -> None:
    """The cheapest plan costs $35,017.00 of which $1,965.23 are CPU pools: a budget of $34,000
    (above the plan without them) is infeasible, exit 1 naming the budget and the cheapest
    total with the CPU pools in it."""
    total = Decimal(planned().total_cost_usd)
    without = total - Decimal(planned().cpu_cost_usd or "0")
    assert without < Decimal("34000") < total
    with pytest.raises(InfeasibleError) as e:
        planned(json.dumps({"budget": {"max_usd": 34000}}))
    assert_one_line(str(e.value))
    assert "budget" in str(e.value) and f"costs ${total:,}" in str(e.value)


def test_gke_cpu_node_pools_render_and_check() -> None:
    """A GCP plan (us-central1): the CPU pools as GKE node pools in terraform-gcp/ and gke/,
    parsed back by the check (HCL through python-hcl2); an edited node cap or a lost taint is
    caught. Sandbox: 1,024 vCPU / 2,048 GiB on n2-standard-32 (32 vCPU, 128 GiB) = 32 nodes."""
    from ptplan.planfile.deployment import site_zone
    from ptplan.rendering.checks.cluster import check_render
    from ptplan.rendering.targets import render_plan

    agent = agentic()
    agent["placement"] = {**agent["placement"], "providers": ["gcp"], "regions": ["us-central1"]}
    p = plan(parse_spec(agent), embedded_catalog(), timings=False)
    sb = {c.name: c for c in p.cpu_pools or []}["sandbox"]
    assert (sb.instance_type, sb.nodes) == ("n2-standard-32", 32)
    for target, path in (("terraform-gcp", "terraform-gcp/cpu_node_pools.tf"),
                         ("karpenter", "gke/cpu_node_pools.tf")):
        files, _ = render_plan(p, target)
        assert path in files
        assert [x for x in check_render(p, files) if x.startswith("cpu_pools")] == []
        bad = dict(files)
        bad[path] = files[path].replace("total_max_node_count = 32", "total_max_node_count = 64")
        out = check_render(p, bad)
        assert any(x.startswith("cpu_pools:") and "limits {'nodes': '64'}" in x for x in out), out
        bad[path] = files[path].replace('effect = "NO_SCHEDULE"', 'effect = "PREFER_NO_SCHEDULE"')
        out = check_render(p, bad)
        assert any("lacks the taint" in x for x in out), out
        assert f'node_locations = ["{p.zone or site_zone(p)[0]}"]' in files[path]
        bad[path] = files[path].replace("node_locations", "# node_locations")
        out = check_render(p, bad)
        assert any("may run in zones any" in x for x in out), out
