"""Network egress: paths, the zone model, split regions, staging and copies, and the verifier.

Expected figures are recomputed here from the model's definition in
:mod:`ptplan.costs.network`: weight sync moves steps × W GB into every rollout node, W = params ×
2 B (bf16); nodes outside the trainer's zone pay the catalog's cross-zone rate on it.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from planner_fixtures import brute_force, offer, small_spec

from ptplan.core.errors import InfeasibleError
from ptplan.costs.network import continent, path_between
from ptplan.planfile.schema import Plan
from ptplan.planfile.verify import verify_plan
from ptplan.planner.api import plan
from ptplan.policies.check import check_plan
from ptplan.policies.model import Policy, default_policy, parse_policy
from ptplan.providers.base import Catalog, EgressRate, StorageTier

W_GB = 1.54 * 2.0  # small_spec: 1.54 B parameters in bf16
STEPS = 200


def rates(cross_zone: float = 0.01, inter_region: float = 0.02, inter_continent: float = 0.05,
          internet: float = 0.09, provider: str = "lab") -> tuple[EgressRate, ...]:
    paths = {"same_zone": 0.0, "cross_zone": cross_zone, "inter_region": inter_region,
             "inter_continent": inter_continent, "internet": internet}
    return tuple(EgressRate(provider, p, r, "test", "U") for p, r in paths.items())


def zoned_catalog(l4_spot_a: float = 0.35, l4_spot_b: float = 0.30, l4_od: float = 0.8,
                  h100_od: float = 20.0, spot_cap: int = 2, cross_zone: float = 0.01
                  ) -> Catalog:
    """One region, two zones: the trainer's H100 on-demand (region-level), L4 on demand, and L4
    spot in zones a and b (capped per zone, as spot capacity is)."""
    r = "us-r1"
    offers = (
        offer(r, "h100x8", "H100", 8, "on_demand", h100_od, 1),  # the trainer only
        offer(r, "l4x1", "L4", 1, "on_demand", l4_od, 4),
        offer(r, "l4x1", "L4", 1, "spot", l4_spot_a, spot_cap, 0.004, "us-r1a"),
        offer(r, "l4x1", "L4", 1, "spot", l4_spot_b, spot_cap, 0.004, "us-r1b"),
    )
    return Catalog(name="zoned", as_of="2026-11-01", offers=offers,
                   egress=rates(cross_zone=cross_zone))


def two_region_catalog(inter_region: float, cheap_l4: float = 0.10) -> Catalog:
    """Region us-a has the trainer's H100 and dear L4s; region us-b has only cheap L4s (one
    continent)."""
    offers = (
        offer("us-a", "h100x8", "H100", 8, "on_demand", 20.0, 1),
        offer("us-a", "l4x1", "L4", 1, "on_demand", 1.20, 16),
        offer("us-b", "l4x1", "L4", 1, "on_demand", cheap_l4, 16),
    )
    return Catalog(name="two-region", as_of="2026-11-01", offers=offers,
                   egress=rates(inter_region=inter_region))


def split_spec():
    return rollout_spec(placement={"max_nodes_per_pool": 16})


def split_policy() -> Policy:
    return parse_policy("name: split\nsplit_regions: true\n")


def rollout_spec(**kw):
    """The trainer needs the H100: its optimizer state stays on the GPU (no CPU offload), and
    1.54 B × 16 B = 24.6 GB of training state exceeds an L4's usable 24 × 0.9 = 21.6 GB (the
    1-GPU L4 nodes cannot train data-parallel across nodes)."""
    base = {"pipeline": "async", "sla": {"deadline_hours": None},
            "placement": {"max_nodes_per_pool": 4},
            "efficiency": {"optimizer_offload": "never"}}
    base.update(kw)
    return small_spec(**base)


# -- paths ----------------------------------------------------------------------------------


@pytest.mark.parametrize("region,want", [
    ("us-east-1", "north_america"), ("northamerica-northeast1", "north_america"),
    ("europe-west4", "europe"), ("eu-central-1", "europe"), ("asia-east1", "asia"),
    ("ap-northeast-1", "asia"), ("ap-southeast-2", "oceania"), ("australia-southeast1", "oceania"),
    ("me-central1", "middle_east"), ("sa-east-1", "south_america"), ("lab-room-2", "unknown"),
])
def test_continent_of_region_names(region, want):
    assert continent(region) == want


@pytest.mark.parametrize("src,dst,want", [
    (("aws", "us-east-1", "us-east-1a"), ("aws", "us-east-1", "us-east-1a"), "same_zone"),
    (("aws", "us-east-1", "us-east-1a"), ("aws", "us-east-1", ""), "same_zone"),
    (("aws", "us-east-1", "us-east-1a"), ("aws", "us-east-1", "us-east-1b"), "cross_zone"),
    (("aws", "us-east-1", ""), ("aws", "us-west-2", ""), "inter_region"),
    (("aws", "us-east-1", ""), ("aws", "eu-west-1", ""), "inter_continent"),
    (("aws", "us-east-1", ""), ("gcp", "us-east1", ""), "internet"),
    (("lab", "room-1", ""), ("lab", "room-2", ""), "inter_continent"),
])
def test_path_between(src, dst, want):
    assert path_between(src, dst) == want


# -- zones ----------------------------------------------------------------------------------


def test_rollout_stays_in_the_trainer_zone_when_cross_zone_egress_is_dear():
    spec = rollout_spec()
    p = plan(spec, zoned_catalog(cross_zone=0.05), explain=False)
    assert verify_plan(p) == []
    rollout = next(q for q in p.pools if q.name == "rollout")
    zones = {a.zone for a in rollout.allocations if a.zone}
    assert zones <= {p.zone}
    assert p.network_cost_usd == "0.00"
    sync = [i for i in p.network if i.flow == "weight_sync"]
    assert sum(i.nodes or 0 for i in sync) == rollout.nodes
    assert all(i.path == "same_zone" for i in sync)


def test_cross_zone_nodes_pay_weight_sync_egress():
    """Free cross-zone traffic would let the rollout spread over both zones' cheap spot; at
    a small rate it still does, and pays steps × W × rate per remote node."""
    rate = 0.0005
    spec = rollout_spec()
    p = plan(spec, zoned_catalog(l4_od=3.0, cross_zone=rate), explain=False)
    assert verify_plan(p) == []
    rollout = next(q for q in p.pools if q.name == "rollout")
    remote = sum(a.nodes for a in rollout.allocations if a.zone and a.zone != p.zone)
    assert remote >= 1, "the fixture should make cross-zone spot worth its egress"
    cross = [i for i in p.network if i.flow == "weight_sync" and i.path == "cross_zone"]
    assert len(cross) == 1 and cross[0].nodes == remote
    assert cross[0].gb == pytest.approx(remote * STEPS * W_GB)
    assert float(cross[0].cost_usd) == pytest.approx(remote * STEPS * W_GB * rate, abs=0.006)
    total = float(p.compute_cost_usd) + float(p.storage_cost_usd) + float(p.network_cost_usd)
    assert float(p.total_cost_usd) == pytest.approx(total, abs=0.011)


def test_dear_cross_zone_rate_changes_the_plan_and_costs_more():
    """The rollout is drain-bound for ~20 h on L4s, so trading its two remote spot nodes for
    on-demand ones costs about 2 × (3.00 − 0.30) $/h × 20 h ≈ $108, against their weight-sync
    egress of 2 × 200 steps × 3.08 GB × rate: at $0.2/GB (≈ $246) staying in the zone wins."""
    spec = rollout_spec()
    cheap = plan(spec, zoned_catalog(l4_od=3.0, cross_zone=0.0005), explain=False)
    dear = plan(spec, zoned_catalog(l4_od=3.0, cross_zone=0.2), explain=False)
    assert [a for q in cheap.pools for a in q.allocations if a.zone and a.zone != cheap.zone]
    assert float(dear.total_cost_usd) >= float(cheap.total_cost_usd)
    remote = [a for q in dear.pools for a in q.allocations if a.zone and a.zone != dear.zone]
    assert remote == []


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    l4_spot_a=st.floats(0.05, 1.5), l4_spot_b=st.floats(0.05, 1.5), l4_od=st.floats(0.3, 3.0),
    h100_od=st.floats(8, 40), cross_zone=st.sampled_from([0.0, 0.0002, 0.002, 0.02]),
    deadline=st.sampled_from([0.8, 1.5, 3.0, None]),
    pipeline=st.sampled_from(["auto", "sync", "async"]),
)
def test_zoned_instances_match_brute_force(l4_spot_a, l4_spot_b, l4_od, h100_od, cross_zone,
                                          deadline, pipeline):
    spec = small_spec(sla={"deadline_hours": deadline}, pipeline=pipeline,
                      placement={"max_nodes_per_pool": 3})
    catalog = zoned_catalog(l4_spot_a, l4_spot_b, l4_od, h100_od, spot_cap=2,
                            cross_zone=cross_zone)
    expected = brute_force(spec, catalog)
    if expected is None:
        with pytest.raises(InfeasibleError):
            plan(spec, catalog, explain=False)
        return
    p = plan(spec, catalog, explain=False)
    assert verify_plan(p) == []
    got = float(p.total_cost_usd)
    assert got >= expected[0] - 0.011
    if p.status == "optimal":
        assert got == pytest.approx(expected[0], rel=1e-6, abs=0.011)


# -- split regions --------------------------------------------------------------------------


def test_split_is_cheaper_in_compute_but_dearer_overall_so_one_region_is_kept():
    spec = split_spec()
    dear = two_region_catalog(inter_region=0.08)
    kept = plan(spec, dear, policy=split_policy(), explain=False)
    assert verify_plan(kept) == []
    assert {(q.provider, q.region) for q in kept.pools} == {("lab", "us-a")}
    # the same split plan with free inter-region traffic: cheaper compute, so it splits ...
    free = plan(spec, two_region_catalog(inter_region=0.0), policy=split_policy(),
                explain=False)
    rollout = next(q for q in free.pools if q.name == "rollout")
    assert (rollout.provider, rollout.region) == ("lab", "us-b")
    assert float(free.compute_cost_usd) < float(kept.compute_cost_usd)
    # ... but priced at the dear rate its egress outweighs the compute saved
    egress = rollout.nodes * STEPS * W_GB * 0.08
    assert float(free.compute_cost_usd) + egress > float(kept.total_cost_usd)


def test_split_plan_pays_inter_region_egress_and_passes_the_checks():
    spec = split_spec()
    rate = 0.001
    p = plan(spec, two_region_catalog(inter_region=rate), policy=split_policy(),
             explain=False)
    assert verify_plan(p) == []
    rollout = next(q for q in p.pools if q.name == "rollout")
    assert (rollout.provider, rollout.region) == ("lab", "us-b")
    assert p.region == "us-a" and p.split_regions
    sync = [i for i in p.network if i.flow == "weight_sync"]
    assert [i.path for i in sync] == ["inter_region"]
    assert sync[0].nodes == rollout.nodes
    assert float(sync[0].cost_usd) == pytest.approx(rollout.nodes * STEPS * W_GB * rate,
                                                    abs=0.006)
    experience = next(i for i in p.network if i.flow == "experience")
    assert experience.path == "inter_region" and float(experience.cost_usd) >= 0
    # under a policy that keeps plans in one region, the same plan is a violation
    problems = check_plan(p, default_policy())
    assert any(line.startswith("split_regions:") for line in problems)


def test_without_split_policy_pools_stay_in_one_region():
    spec = split_spec()
    p = plan(spec, two_region_catalog(inter_region=0.0), explain=False)
    assert {(q.provider, q.region) for q in p.pools} == {(p.provider, p.region)}


# -- staging and copies ---------------------------------------------------------------------


def staged_catalog() -> Catalog:
    offers = (
        offer("us-a", "h100x8", "H100", 8, "on_demand", 20.0, 2),
        offer("us-a", "l4x1", "L4", 1, "on_demand", 0.8, 4),
    )
    tiers = (StorageTier("lab", "*", "hot", 0.02, 0, 0.0, "ms", "test", "U"),
             StorageTier("lab", "*", "cold", 0.004, 90, 0.02, "hours", "test", "U"))
    return Catalog(name="staged", as_of="2026-11-01", offers=offers, storage_tiers=tiers,
                   egress=rates(inter_region=0.02, inter_continent=0.05))


def test_dataset_staging_and_checkpoint_copies_are_priced():
    spec = rollout_spec(data={"source": "lab:eu-home"},
                        checkpoints={"copy_to": "lab:eu-home", "archive_every": 2})
    p = plan(spec, staged_catalog(), explain=False)
    assert verify_plan(p) == []
    flows = {i.flow: i for i in p.network}
    staging = flows["dataset_staging"]
    dataset = next(s for s in p.storage if s.data_class == "dataset")
    assert staging.path == "inter_continent" and staging.gb == pytest.approx(dataset.gb)
    assert float(staging.cost_usd) == pytest.approx(dataset.gb * 0.05, abs=0.006)
    copies = flows["checkpoint_copies"]
    archived = STEPS // 20 // 2  # checkpoints every 20 steps, every 2nd archived
    assert copies.gb == pytest.approx((archived + 1) * W_GB)
    assert copies.src.region == "us-a" and copies.dst.region == "eu-home"
    unset = plan(rollout_spec(), staged_catalog(), explain=False)
    assert "checkpoint_copies" not in {i.flow for i in unset.network}
    assert next(i for i in unset.network if i.flow == "dataset_staging").cost_usd == "0.00"


@pytest.mark.parametrize("bad", ["us-east-1", "aws:", ":x", "a:b:c d"])
def test_bad_place_refs_are_rejected(bad):
    from ptplan.core.errors import InputError
    from ptplan.spec.project import parse_spec

    data = small_spec().model_dump(mode="json", exclude_none=True)
    data["data"]["source"] = bad
    with pytest.raises(InputError, match=r"data\.source"):
        parse_spec(data)


# -- verifier -------------------------------------------------------------------------------


def _tamper(p: Plan, **update) -> Plan:
    return p.model_copy(update=update)


def test_verifier_catches_network_tampering():
    spec = rollout_spec()
    p = plan(spec, zoned_catalog(l4_od=3.0, cross_zone=0.0005), explain=False)
    assert verify_plan(p) == []
    items = list(p.network)
    k = next(n for n, i in enumerate(items) if i.flow == "weight_sync" and i.path == "cross_zone")
    cheaper = [*items[:k], replace_item(items[k], cost_usd="0.00"), *items[k + 1:]]
    assert any(v.startswith("network:") for v in verify_plan(_tamper(p, network=cheaper)))
    relabel = [*items[:k], replace_item(items[k], path="same_zone"), *items[k + 1:]]
    assert any("labelled" in v for v in verify_plan(_tamper(p, network=relabel)))
    assert any(v.startswith("totals:") for v in verify_plan(_tamper(p, network_cost_usd="0.00")))
    dropped = [i for i in items if not (i.flow == "weight_sync" and i.path == "cross_zone")]
    found = verify_plan(_tamper(p, network=dropped, network_cost_usd="0.00",
                                total_cost_usd=p.total_cost_usd))
    assert any("weight sync reaches" in v for v in found)


def replace_item(item, **update):
    return item.model_copy(update=update)


def test_verifier_rejects_a_trainer_pool_outside_the_trainer_zone():
    spec = small_spec(pipeline="async", sla={"deadline_hours": None})
    catalog = zoned_catalog()
    p = plan(spec, catalog, explain=False)
    update = next(q for q in p.pools if q.name == "update")
    moved = update.model_copy(update={"allocations": [
        a.model_copy(update={"zone": "us-r1z"}) for a in update.allocations]})
    pools = [moved if q.name == "update" else q for q in p.pools]
    assert any(v.startswith("zones:") for v in verify_plan(_tamper(p, pools=pools)))


def test_plan_json_lists_network_and_zone():
    p = plan(rollout_spec(), zoned_catalog(), explain=False)
    data = p.model_dump(mode="json")
    assert {"network", "network_cost_usd", "zone", "split_regions"} <= set(data)
    assert data["zone"] in ("us-r1a", "us-r1b")
    again = plan(rollout_spec(), zoned_catalog(), explain=False, timings=False)
    assert again.to_json() == plan(rollout_spec(), zoned_catalog(), explain=False,
                                   timings=False).to_json()


def test_catalog_without_egress_rates_prices_zero_and_says_so():
    catalog = replace(two_region_catalog(0.0), egress=())
    p = plan(split_spec(), catalog, policy=split_policy(), explain=False)
    assert p.network_cost_usd == "0.00"
    assert any("no egress rate for lab inter_region" in w for w in p.warnings)


@pytest.mark.parametrize("cross_zone", [0.0, 0.0005, 0.01])
def test_option_bounds_never_exceed_a_plan_using_the_option(cross_zone):
    """Options are pruned before the MILP by a lower bound on any plan using them; with egress
    the rollout list is not a 2D Pareto front, and the bound must stay below every plan built
    from the options (checked on every combination of a small instance)."""
    import itertools

    import numpy as np

    from ptplan.planner.search.engine import prepare
    from ptplan.planner.search.option_bounds import option_bounds

    spec = small_spec(pipeline="async", sla={"deadline_hours": None},
                      placement={"max_nodes_per_pool": 3})
    ctx = prepare(spec, zoned_catalog(l4_od=1.5, cross_zone=cross_zone))
    for c in ctx.runs:
        bounds = option_bounds(c, None, None, "cost")
        names = list(c.frontiers)
        for site in range(len(c.regions)):
            idx = {n: np.nonzero(c.frontiers[n].region == site)[0] for n in names}
            for combo in itertools.product(*(idx[n] for n in names)):
                opts = {n: c.frontiers[n].option(int(k), c.regions) for n, k in
                        zip(names, combo, strict=True)}
                busy = {n: o.busy_hours for n, o in opts.items()}
                run = max(busy.values()) + c.layout.fill_fraction * busy["rollout"]
                cost = run * sum(o.usd_per_hour for o in opts.values()) + sum(
                    o.egress_usd for o in opts.values()) + float(c.extra_cost(site, run))
                for n, k in zip(names, combo, strict=True):
                    assert bounds[n][k] <= cost * (1 + 1e-9) + 1e-9
