"""Independent oracles for the plan's costs: compute per phase and pool, spot overhead (stateless
and gang), storage per data class and tier, network egress and weight sync.

Expected values are worked out here from the documented formula and cited inputs, or by the
reference implementations in ``tests/oracles.py`` (which import only data types). Nothing here
compares the package with itself.
"""

from __future__ import annotations

import math
from dataclasses import replace
from decimal import Decimal

import numpy as np
import pytest
from conftest import EXAMPLES
from hypothesis import example, given, settings
from hypothesis import strategies as st
from oracles import (
    RefClass,
    cents,
    cheapest_tier,
    checkpoint_classes,
    class_on_tier,
    gang_effective,
    path,
    rate,
    stateless_effective,
    weight_sync_usd,
)
from planner_fixtures import offer, small_catalog, small_spec

from ptplan.costs.network import path_between
from ptplan.costs.storage import DataClass, ObjectGroup, StorageModel
from ptplan.planfile.schema import Plan
from ptplan.planner.api import plan
from ptplan.policies.model import Policy, default_policy
from ptplan.providers.base import EgressRate, StorageTier
from ptplan.providers.embedded import embedded_catalog
from ptplan.spec.project import load_spec


def _money(x: str) -> float:
    return float(x)


# Module fixtures, not module-level caches: each test session (and each mutant's run under
# mutmut, which forks after a clean run) plans afresh.
@pytest.fixture(scope="module")
def small() -> Plan:
    return plan(small_spec(), small_catalog(), explain=False)


@pytest.fixture(scope="module")
def grpo() -> Plan:
    return plan(load_spec(str(EXAMPLES / "grpo-7b.yaml")), embedded_catalog(), explain=False)


# ---- compute per phase and pool ----------------------------------------------------------------

def test_small_plan_compute_by_hand(small: Plan) -> None:
    """small_catalog (planner_fixtures): H100x8 spot $9/h (λ = 0.002/h, zone a), on-demand
    $20/h. The plan holds 1 spot rollout node and 2 on-demand update nodes for the whole run:
    $/h = 9 + 2 × 20 = 49; compute = 49 × makespan; each phase costs its busy hours × its
    pool's $/h; idle = Σ $/h × (makespan − busy); the async run lasts the longest pool's busy time
    plus one step of fill (rollout busy / 200 steps)."""
    p = small
    got = {(pool.name, a.instance_type, str(a.capacity_type.value), a.nodes)
           for pool in p.pools for a in pool.allocations}
    assert got == {("rollout", "h100x8", "spot", 1), ("update", "h100x8", "on_demand", 2)}
    hourly = {"rollout": 9.0, "update": 40.0}
    busy = {pool.name: pool.busy_hours for pool in p.pools}
    m = max(busy.values()) + busy["rollout"] / 200
    assert p.pipeline_mode == "async"
    assert p.makespan_hours == pytest.approx(m, rel=1e-11)  # each figure to 12 digits
    assert p.compute_cost_usd == cents(49.0 * m)
    assert p.idle_cost_usd == cents(sum(hourly[k] * (m - b) for k, b in busy.items()))
    for pool in p.pools:
        assert pool.usd_per_hour == hourly[pool.name]
        assert pool.cost_usd == cents(hourly[pool.name] * m)
        assert pool.busy_hours == pytest.approx(
            sum(ph.busy_hours for ph in p.phases if ph.pool == pool.name), rel=1e-11)
    for ph in p.phases:
        pool = next(x for x in p.pools if x.name == ph.pool)
        assert ph.cost_usd == cents(ph.busy_hours * hourly[ph.pool])
        assert ph.gpu_hours == pytest.approx(ph.busy_hours * pool.nodes * 8, rel=1e-11)
    assert _money(p.total_cost_usd) == pytest.approx(
        _money(p.compute_cost_usd) + _money(p.storage_cost_usd) + _money(p.network_cost_usd)
        + _money(p.disk_cost_usd), abs=0.011)


BLOCK_TIER = {"aws": (0.08, "ebs_gp3"), "gcp": (0.10, "pd_balanced")}
"""The cheapest block tier ($/GB-month, name) per provider in the embedded catalog."""


def test_example_pools_priced_from_the_catalog(grpo: Plan) -> None:
    """Each allocation's $/h is the catalog offer's price (looked up by place, type and
    capacity), each pool holds its nodes for the whole run, compute = Σ pools, and each pool's
    boot disks cost nodes x GB x the block tier's $/GB-month / 730 for the run."""
    p = grpo
    prices = {(o.provider, o.region, o.zone, o.instance_type, o.capacity_type): o.usd_per_hour
              for o in embedded_catalog().offers}
    total = disks = 0.0
    for pool in p.pools:
        hourly = 0.0
        for a in pool.allocations:
            key = (a.provider, a.region, a.zone, a.instance_type, a.capacity_type.value)
            assert a.usd_per_hour == prices[key]
            hourly += a.nodes * prices[key]
            assert a.hours == p.makespan_hours
        assert pool.cost_usd == cents(hourly * p.makespan_hours)
        total += hourly * p.makespan_hours
        # its boot disks: 200 GB (default policy) x the catalog's block tier of the pool's
        # provider (EBS gp3 $0.08/GB-month on AWS, pd-balanced $0.10 on GCP) / 730 h, for every
        # held hour. Since the roofline of compute-bound work (docs/demand-model.md §3.12) this
        # plan holds AWS nodes (A100 p4d for rollout and scoring, B200 for the update).
        block = min(t.usd_per_gb_month for t in embedded_catalog().storage_tiers
                    if t.provider == pool.provider and t.access == "block")
        assert (block, pool.disk_tier) == BLOCK_TIER[pool.provider]
        assert pool.disk_cost_usd == cents(pool.nodes * 200 * block / 730.0 * p.makespan_hours)
        disks += float(pool.disk_cost_usd)
    assert abs(float(p.disk_cost_usd) - disks) <= 0.005 * len(p.pools)
    # compute is printed as the rounded total less the rounded disks, storage and network (so
    # the parts add up): within 2 cents of the exact Σ pools, and exactly the balance
    assert abs(float(p.compute_cost_usd) - total) <= 0.0201
    assert p.compute_cost_usd == str(Decimal(p.total_cost_usd) - Decimal(p.disk_cost_usd)
                                     - Decimal(p.storage_cost_usd)
                                     - Decimal(p.network_cost_usd))


# ---- spot overhead -----------------------------------------------------------------------------

def test_stateless_spot_overhead_by_hand(small: Plan) -> None:
    """Rollout on spot, λ = 0.002/h, lost work 5 min + restart 10 min (spec defaults):
    1 − 0.002 × 15/60 = 0.9995."""
    a = next(pool for pool in small.pools if pool.name == "rollout").allocations[0]
    assert a.effective_fraction == pytest.approx(0.9995, abs=1e-12)
    assert stateless_effective(0.002, 5, 10) == pytest.approx(0.9995, abs=1e-15)


def _spot_update_policy() -> Policy:
    data = default_policy().model_dump(mode="json")
    data["name"] = "spot-update"
    data["phases"]["update"]["capacity_types"] = ["spot", "on_demand"]
    return Policy.model_validate(data)


def test_gang_spot_overhead_by_hand() -> None:
    """The update pool on spot is a gang: n nodes at λ = 0.002/h give Λ = 0.002·n/h; checkpoint
    C = 3 min = 0.05 h, restart R = 10 min: 1 − √(2 × 0.05 × Λ) − Λ/6 (1 node: 0.9855245)."""
    cat = small_catalog(h100_od=60.0, h100_spot=9.0, caps=(3, 2))
    p = plan(small_spec(pipeline="sync"), cat, explain=False, policy=_spot_update_policy())
    upd = next(pool for pool in p.pools if pool.name == "update")
    spot = [a for a in upd.allocations if a.capacity_type == "spot"]
    assert spot, "the dear on-demand H100 should push the update pool onto spot"
    n = sum(a.nodes for a in spot)
    want = gang_effective([0.002] * n, 3, 10)
    lam = 0.002 * n  # by hand: 1 node 1 − √0.0002 − 0.002/6; 2 nodes 1 − 0.02 − 0.004/6
    assert want == pytest.approx(1 - math.sqrt(2 * 0.05 * lam) - lam / 6, abs=1e-12)
    assert gang_effective([0.002] * 2, 3, 10) == pytest.approx(1 - 0.02 - 0.004 / 6, abs=1e-12)
    for a in upd.allocations:  # every node of the gang shares the overhead
        assert a.effective_fraction == pytest.approx(want, abs=1e-9)


# ---- storage -----------------------------------------------------------------------------------

def _tier(name: str, price: float, min_days: float, fee: float = 0.0, access: str = "ms"
          ) -> StorageTier:
    return StorageTier("lab", "*", name, price, min_days, fee, access, "test", "U")


TIERS = (_tier("standard", 0.023, 0), _tier("ia", 0.0125, 30, 0.01),
         _tier("coldline", 0.004, 90, 0.02), _tier("archive", 0.0012, 365, 0.05, "hours"))


def test_minimum_duration_and_retrieval_by_hand() -> None:
    """100 GB kept 10 days (240 h) with one retrieval of 100 GB: standard bills 240 h,
    100 × 240/730 × 0.023 = $0.7562; coldline bills its 90-day minimum plus the fee,
    100 × 2160/730 × 0.004 + 100 × 0.02 = $3.1836; standard is chosen."""
    c = DataClass("logs", "ms", (ObjectGroup(1, 100.0, 240.0, 0.0),), retrieval_gb=100.0)
    cat = replace(small_catalog(), storage_tiers=TIERS)
    model = StorageModel((c,), cat)
    [(_, tier, gbm, usd)] = model.choose("lab", "r1", 0.0)
    assert tier.tier == "standard"
    assert gbm == pytest.approx(100 * 240 / 730, rel=1e-12)
    assert usd == pytest.approx(100 * 240 / 730 * 0.023, rel=1e-12)
    assert float(model.cost("lab", "r1", 0.0)) == pytest.approx(0.756164, abs=1e-6)
    ref = RefClass("logs", "ms", ((100.0, 240.0),), 100.0)
    assert class_on_tier(ref, TIERS[2])[1] == pytest.approx(100 * 2160 / 730 * 0.004 + 2.0)


groups = st.lists(st.tuples(st.integers(1, 5), st.floats(0.5, 500), st.floats(0, 3000),
                            st.one_of(st.just(0.0), st.floats(1e-3, 3))), min_size=1, max_size=3)


@settings(max_examples=60, deadline=None)
@given(classes=st.lists(st.tuples(st.sampled_from(["ms", "hours"]), groups,
                                  st.floats(0, 50)), min_size=1, max_size=3),
       d=st.floats(0, 20000))
@example(classes=[("ms", [(1, 100.0, 0.0, 1.0)], 0.0)], d=2160.0)  # exactly at a minimum
@example(classes=[("ms", [(2, 10.0, 100.0, 1.0)], 5.0)], d=620.0)  # 720 h: crossing near 30 d
@example(classes=[("hours", [(1, 1.0, 8760.0, 0.0)], 1.0)], d=0.0)  # archive at its minimum
def test_storage_cost_equals_reference_at_any_run_time(classes, d) -> None:
    """The interpolated least-cost storage function equals the reference (each class on its
    cheapest eligible tier, each object billed max(lifetime, minimum) plus retrievals)."""
    cat = replace(small_catalog(), storage_tiers=TIERS)
    dcs, refs = [], []
    for i, (access, gs, retr) in enumerate(classes):
        dcs.append(DataClass(f"c{i}", access, tuple(ObjectGroup(n, gb, a, b)
                                                    for n, gb, a, b in gs), retr))
        refs.append(RefClass(f"c{i}", access, tuple((gb, a + b * d) for n, gb, a, b in gs
                                                     for _ in range(n)), retr))
    model = StorageModel(tuple(dcs), cat)
    want = sum(cheapest_tier(r, TIERS)[2] for r in refs)
    assert float(model.cost("lab", "r1", d)) == pytest.approx(want, rel=1e-9, abs=1e-9)
    chosen = model.choose("lab", "r1", d)
    for (c, tier, gbm, usd), r in zip(chosen, refs, strict=True):
        name, _rgbm, rusd = cheapest_tier(r, TIERS)
        assert usd == pytest.approx(rusd, rel=1e-9, abs=1e-9), (c.name, tier.tier, name)
        assert gbm == pytest.approx(class_on_tier(r, tier)[0], rel=1e-9, abs=1e-9)


def test_example_storage_items_equal_the_reference(grpo: Plan) -> None:
    """The GRPO example: 300 steps, a checkpoint every 25 (12 checkpoints) of 7.6156 B params ×
    (2 B weights + 12 B optimizer state, adam_bytes_per_param 16 − 4) = 106.6184 GB, weights-only
    15.2312 GB; keep 3 hot, archive every 4th, retention 30 days, metrics 365 days, rollout logs
    14 days (policy); dataset 300 × 256 prompts × 512 tokens × 4 B; rollout logs 8 B per
    generated token; eval outputs 4 B per token. Each class on the cheapest GCS tier fast
    enough for it (embedded catalog)."""
    p = grpo
    life = p.lifecycle
    assert life is not None
    d = p.makespan_hours
    tiers = [t for t in embedded_catalog().storage_tiers if t.provider == p.provider
             and t.region in (p.region, "*")]
    tokens = {ph.name: ph.tokens for ph in p.phases}
    refs = [RefClass("dataset", "ms", ((300 * 256 * 512 * 4 / 1e9, d),))]
    refs += checkpoint_classes(steps=300, every=25, run_hours=d, full_gb=7.6156 * 14,
                               weights_gb=7.6156 * 2, keep_hot=life.keep_hot,
                               archive_every=life.archive_every,
                               retention_days=life.retention_days,
                               metrics_days=life.metrics_days)
    refs.append(RefClass("rollout_logs", "hours",
                         ((tokens["rollout"] * 8 / 1e9, life.rollout_log_days * 24.0),)))
    refs.append(RefClass("eval_outputs", "hours",
                         ((tokens["eval"] * 4 / 1e9, life.metrics_days * 24.0),)))
    items = {i.data_class: i for i in p.storage}
    assert set(items) == {r.name for r in refs}
    total = 0.0
    for r in refs:
        name, gbm, usd = cheapest_tier(r, tiers)
        item = items[r.name]
        assert (r.name, item.tier) == (r.name, name)
        assert item.gb == pytest.approx(sum(gb for gb, _ in r.objects), rel=1e-9)
        assert item.gb_months == pytest.approx(gbm, rel=1e-9), r.name
        assert item.cost_usd == cents(usd), r.name
        total += usd
    assert _money(p.storage_cost_usd) == pytest.approx(total, abs=0.006 * (len(refs) + 1))


@pytest.mark.parametrize(("steps", "every", "keep", "arch"),
                         [(300, 25, 3, 4), (310, 25, 3, 4), (100, 10, 2, 3), (40, 10, 5, 2),
                          (30, 20, 3, 1)])
def test_checkpoint_classes_equal_the_reference(steps, every, keep, arch) -> None:
    """Checkpoint lifetimes and counts (including a run that does not end on a checkpoint, an
    archived checkpoint among the last hot ones and a run with a single checkpoint) against
    the reference, on every tier."""
    from ptplan.costs.storage import data_classes
    from ptplan.demand.model import build_demand

    spec = small_spec(data={"steps": steps}, checkpoints={
        "every_steps": every, "keep_hot": keep, "archive_every": arch, "retention_days": 7})
    demand = build_demand(spec)
    got = {c.name: c for c in data_classes(demand, default_policy())}
    full = demand.checkpoint_gb
    d = 50.0
    refs = checkpoint_classes(steps=steps, every=every, run_hours=d, full_gb=full,
                              weights_gb=1.54 * 2, keep_hot=keep, archive_every=arch,
                              retention_days=7, metrics_days=default_policy().storage.metrics_days)
    kinds = {"hot_checkpoints", "retained_checkpoints", "archived_checkpoints"}
    assert {r.name for r in refs} == set(got) & kinds
    for r in refs:
        c = got[r.name]
        for t in TIERS:
            if t.access == "hours" and c.access == "ms":
                continue  # too slow for restores: never eligible
            want = class_on_tier(r, t)
            cat = replace(small_catalog(), storage_tiers=(t,))
            [(_, _, gbm, usd)] = StorageModel((c,), cat).choose("lab", "r1", d)
            assert gbm == pytest.approx(want[0], rel=1e-9), (r.name, t.tier)
            assert usd == pytest.approx(want[1], rel=1e-9), (r.name, t.tier)


# ---- network -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("src", "dst"), [
    (("gcp", "us-central1", "us-central1-a"), ("gcp", "us-central1", "us-central1-b")),
    (("gcp", "us-central1", "us-central1-a"), ("gcp", "us-central1", "")),
    (("gcp", "us-central1", ""), ("gcp", "us-east4", "")),
    (("gcp", "us-central1", ""), ("gcp", "europe-west4", "")),
    (("aws", "us-east-1", ""), ("aws", "eu-west-1", "")),
    (("aws", "us-east-1", "use1-az1"), ("gcp", "us-east4", "us-east4-a")),
    (("gcp", "asia-east1", ""), ("gcp", "asia-northeast1", "")),
])
def test_paths_by_hand(src, dst) -> None:
    assert path_between(src, dst) == path(src, dst)


def test_example_network_items_equal_the_reference(grpo: Plan) -> None:
    """Weight sync: each rollout node receives 7.6156 B × 2 B per step for 300 steps; experience:
    12 B per token of every sampled sequence, 300 × 256 × 8 × (512 + 2,048) tokens (the
    network module's docstring); every item costs GB × the catalog's rate for the path its ends
    imply."""
    p = grpo
    rows = embedded_catalog().egress
    rollout = next(pool for pool in p.pools if pool.name == "rollout")
    sync = [i for i in p.network if i.flow == "weight_sync"]
    assert sum(i.nodes or 0 for i in sync) == rollout.nodes
    for i in p.network:
        src = (i.src.provider, i.src.region, i.src.zone)
        dst = (i.dst.provider, i.dst.region, i.dst.zone)
        if i.flow == "weight_sync":
            assert i.gb == pytest.approx((i.nodes or 0) * 300 * 15.2312, rel=1e-12)
            assert i.cost_usd == cents(weight_sync_usd(i.nodes or 0, 300, 7.6156,
                                                       rate(rows, src[0], path(src, dst))))
        if i.flow == "experience":  # regression: prompts were counted once per prompt group
            assert i.gb == pytest.approx(300 * 256 * 8 * (512 + 2048) * 12 / 1e9, rel=1e-12)
        if i.flow != "experience":  # listed, unpriced within a region
            assert i.usd_per_gb == rate(rows, src[0], path(src, dst))
            assert i.cost_usd == cents(i.gb * i.usd_per_gb)


def _zoned_catalog():
    """Two zones with one spot H100x8 each ($9/h, λ = 0.002/h); lab's cross-zone egress is
    $0.01/GB."""
    base = small_catalog(caps=(3, 1))
    extra = (offer("r1", "h100x8", "H100", 8, "spot", 9.0, 1, 0.002, "b"),)
    egress = (EgressRate("lab", "same_zone", 0.0, "test", "U"),
              EgressRate("lab", "cross_zone", 0.01, "test", "U"))
    return replace(base, offers=(*base.offers, *extra), egress=egress)


def test_cross_zone_weight_sync_by_hand() -> None:
    """A 1-hour deadline needs two spot rollout nodes, one per zone: the one outside the
    trainer's zone receives W = 1.54 B × 2 B = 3.08 GB per step over 200 steps at $0.01/GB:
    $6.16, the plan's whole network cost (same-zone traffic is free, experience unpriced)."""
    p = plan(small_spec(sla={"deadline_hours": 1.0}), _zoned_catalog(), explain=False)
    rollout = next(pool for pool in p.pools if pool.name == "rollout")
    remote = sum(a.nodes for a in rollout.allocations if a.zone and a.zone != p.zone)
    assert remote == 1, rollout.allocations
    sync = {i.path.value: i for i in p.network if i.flow == "weight_sync"}
    assert sync["cross_zone"].nodes == 1
    assert sync["cross_zone"].gb == pytest.approx(616.0, rel=1e-12)
    assert sync["cross_zone"].cost_usd == "6.16"
    assert p.network_cost_usd == "6.16"
    assert _money(p.total_cost_usd) == pytest.approx(
        _money(p.compute_cost_usd) + _money(p.storage_cost_usd) + 6.16
        + _money(p.disk_cost_usd), abs=0.011)


def test_cross_region_flows_by_hand() -> None:
    """``data.source`` on another provider and ``checkpoints.copy_to`` in another region: the
    dataset (200 × 256 × 512 × 4 B = 0.1048576 GB) pays the source provider's internet rate once;
    every archived checkpoint (2 given) and the final one (weights-only, 3.08 GB) are copied
    once to r2, a region of no known continent: ``inter_continent``, priced at the
    ``inter_region`` row where the catalog has no ``inter_continent`` row."""
    from ptplan.costs.network import network_model
    from ptplan.demand.model import build_demand

    spec = small_spec(data={"source": "other:far"}, checkpoints={"copy_to": "lab:r2"})
    demand = build_demand(spec)
    egress = (EgressRate("lab", "inter_region", 0.02, "t", "U"),
              EgressRate("other", "internet", 0.09, "t", "U"))
    cat = replace(small_catalog(), egress=egress)
    net = network_model(demand, cat, archived=2, archived_gb=3.08, dataset_gb=0.1048576)
    flows = {f.name: f for f in net.fixed_flows(("lab", "r1", "a"))}
    assert flows["dataset_staging"].path == "internet"
    assert flows["dataset_staging"].cost == pytest.approx(0.1048576 * 0.09, rel=1e-12)
    assert flows["checkpoint_copies"].path == "inter_continent"
    assert flows["checkpoint_copies"].cost == pytest.approx(3 * 3.08 * 0.02, rel=1e-12)
    assert net.cross_zone_per_node("lab") == 0.0  # no cross-zone row: priced 0 and recorded
    assert "lab cross_zone" in net.missing
    per_node = net.sync_rates(("lab", "r1", "a"), ("lab", "r2", ""))[1]
    assert per_node == pytest.approx(200 * 3.08 * 0.02, rel=1e-12)


def test_storage_model_is_non_decreasing_in_run_time() -> None:
    """A longer run never stores for less (the planner relies on it)."""
    c = DataClass("x", "ms", (ObjectGroup(3, 50.0, 10.0, 1.0), ObjectGroup(1, 5.0, 500.0, 0.5)))
    model = StorageModel((c,), replace(small_catalog(), storage_tiers=TIERS))
    ys = np.asarray(model.cost("lab", "r1", np.linspace(0, 20000, 401)))
    assert (np.diff(ys) >= -1e-9).all()


def test_storage_decides_between_layouts() -> None:
    """Regression: the layout was chosen on compute + egress alone, so with dear storage
    ($50/GB-month) a longer run won although a shorter layout cost less in total (13,494.51 vs
    13,494.21). The plan is now no dearer than any alternative layout it lists."""
    tiers = (StorageTier("lab", "*", "standard", 50.0, 0, 0.0, "ms", "test", "U"),)
    p = plan(small_spec(sla={"deadline_hours": None}),
             replace(small_catalog(), storage_tiers=tiers))
    alts = [float(a.total_cost_usd) for a in p.explain.alternatives if a.total_cost_usd]
    assert alts and _money(p.total_cost_usd) <= min(alts)
    assert p.status == "optimal" and p.solver.cross_check == "agree"
