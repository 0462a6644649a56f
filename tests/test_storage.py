"""Storage in the plan: sizes from the spec, tier choice with minimum durations, lifecycle."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from conftest import example_dict
from planner_fixtures import small_catalog, small_spec

from ptplan.costs.storage import DataClass, ObjectGroup, StorageModel, class_cost, data_classes
from ptplan.demand.model import build_demand
from ptplan.planfile.verify import verify_plan
from ptplan.planner.api import plan
from ptplan.policies.model import default_policy, parse_policy
from ptplan.providers.base import StorageTier
from ptplan.providers.embedded import embedded_catalog
from ptplan.spec.project import load_spec, parse_spec

ROOT = Path(__file__).resolve().parents[1]


def tier(name, price, min_days, fee=0.0, access="ms"):
    return StorageTier("lab", "*", name, price, min_days, fee, access, "test", "custom")


def test_checkpoint_classes_follow_the_lifecycle():
    spec = load_spec(str(ROOT / "examples/grpo-7b.yaml"))
    demand = build_demand(spec)
    classes = {c.name: c for c in data_classes(demand, default_policy())}
    full = 7.6156 * (2 + 12)  # GB: bf16 weights + fp32 master and Adam m, v
    n = 300 // 25  # checkpoints
    hot, archive_every = 3, 4  # the spec's checkpoints block overrides the policy's 3 / 5
    assert classes["hot_checkpoints"].gb == pytest.approx(n * full)
    n_arch = n // archive_every
    assert classes["archived_checkpoints"].gb == pytest.approx(n_arch * 7.6156 * 2)  # weights only
    assert classes["archived_checkpoints"].access == "hours"
    # retained: the 9 earlier checkpoints less the 2 of them archived (4th, 8th; the 12th,
    # archived too, is one of the last 3 hot ones)
    earlier = n - hot
    assert classes["retained_checkpoints"].gb == pytest.approx(
        (earlier - earlier // archive_every) * full)
    assert classes["dataset"].gb == pytest.approx(300 * 256 * 512 * 4 / 1e9)
    assert classes["rollout_logs"].gb == pytest.approx(300 * 256 * 8 * 2048 * 8 / 1e9)


def test_minimum_duration_is_billed_and_never_makes_a_colder_tier_win():
    short = DataClass("logs", "hours", (ObjectGroup(1, 100.0, 24.0 * 10, 0.0),))  # 10 days
    standard, ia = tier("standard", 0.023, 0), tier("ia", 0.0125, 30, 0.01)
    gbm_std, usd_std = class_cost(short, standard, 0.0)
    gbm_ia, usd_ia = class_cost(short, ia, 0.0)
    assert gbm_std == pytest.approx(100 * 240 / 730)
    assert gbm_ia == pytest.approx(100 * 720 / 730)  # billed for its 30-day minimum
    assert usd_std < usd_ia  # 10 days on IA cost more than on standard
    catalog = replace(small_catalog(), storage_tiers=(standard, ia))
    model = StorageModel((short,), catalog)
    [(_, chosen, _, cost)] = model.choose("lab", "r1", 0.0)
    assert chosen.tier == "standard" and cost == pytest.approx(usd_std)
    long = DataClass("archive", "hours", (ObjectGroup(1, 100.0, 24.0 * 365, 0.0),))
    [(_, chosen, _, _)] = StorageModel((long,), catalog).choose("lab", "r1", 0.0)
    assert chosen.tier == "ia"


def test_access_latency_excludes_slow_tiers():
    restore = DataClass("hot", "ms", (ObjectGroup(1, 100.0, 24.0 * 400, 0.0),))
    glacier = tier("glacier", 0.001, 90, 0.02, access="hours")
    catalog = replace(small_catalog(), storage_tiers=(tier("standard", 0.023, 0), glacier))
    [(_, chosen, _, _)] = StorageModel((restore,), catalog).choose("lab", "r1", 0.0)
    assert chosen.tier == "standard"


def test_rl_example_archives_cold_and_restores_fast():
    p = plan(load_spec(str(ROOT / "examples/grpo-7b.yaml")), embedded_catalog(), explain=False)
    items = {i.data_class: i for i in p.storage}
    assert items["hot_checkpoints"].tier.endswith("standard")
    assert items["archived_checkpoints"].tier in ("gcs_archive", "s3_glacier_deep_archive")
    total = float(p.compute_cost_usd) + float(p.disk_cost_usd) + float(p.storage_cost_usd) + \
        float(p.network_cost_usd)
    assert float(p.total_cost_usd) == pytest.approx(total, abs=0.011)
    assert verify_plan(p) == []


def test_policy_lifecycle_applies_where_the_spec_is_silent():
    d = example_dict("grpo-7b.yaml")
    d["checkpoints"] = {"every_steps": 25}
    spec = parse_spec(d)
    keep_all = parse_policy("name: keep\nstorage: {keep_hot: 12, archive_every: 100}\n")
    classes = {c.name: c for c in data_classes(build_demand(spec), keep_all)}
    assert "retained_checkpoints" not in classes and "archived_checkpoints" not in classes


def test_storage_is_part_of_the_optimum():
    spec = small_spec(sla={"deadline_hours": None})
    base = plan(spec, small_catalog(), explain=False)
    assert base.storage == []  # the test catalog has no storage tiers
    priced = replace(small_catalog(), storage_tiers=(tier("standard", 50.0, 0),))
    p = plan(spec, priced, explain=False)
    assert float(p.storage_cost_usd) > 0
    # storage billed per hour of the run pushes the plan to finish sooner
    assert p.makespan_hours <= base.makespan_hours + 1e-9
    # regression: the layouts were compared on compute + egress only, so a layout with a
    # cheaper MILP but a longer run (more storage) won: "feasible", cross-check "differ"
    assert p.status == "optimal" and p.solver.cross_check == "agree"
    assert verify_plan(p) == []


def test_a_budget_equal_to_the_optimum_with_storage_is_feasible():
    priced = replace(small_catalog(), storage_tiers=(tier("standard", 50.0, 0),))
    spec = small_spec(sla={"deadline_hours": None})
    best = plan(spec, priced, explain=False)
    tight = small_spec(sla={"deadline_hours": None},
                       budget={"max_usd": float(best.total_cost_usd) + 0.01})
    p = plan(tight, priced, explain=False)
    assert p.total_cost_usd == best.total_cost_usd
    assert float(p.storage_cost_usd) > 0


def test_piecewise_linear_storage_cost_equals_term_by_term_evaluation():
    """The planner evaluates storage cost by interpolating on exact breakpoints (kinks where a
    lifetime crosses a tier's minimum duration, and crossings of tiers); it must equal the
    term-by-term least cost everywhere, including at and around every breakpoint."""
    import numpy as np

    from ptplan.costs.storage import StorageModel, data_classes
    from ptplan.demand.model import build_demand
    from ptplan.policies.model import default_policy
    from ptplan.providers.registry import load_catalog
    from ptplan.spec.project import load_spec

    catalog = load_catalog("embedded")
    rng = np.random.default_rng(7)
    for example in ("grpo-7b", "sft-8b", "opd-8b-from-32b"):
        demand = build_demand(load_spec(f"examples/{example}.yaml"))
        model = StorageModel(tuple(data_classes(demand, default_policy())), catalog)
        for provider, region in (("aws", "us-east-1"), ("gcp", "us-central1")):
            xs, _ = model._breakpoints(provider, region)
            probes = np.concatenate([rng.uniform(0, 3000, 5000), xs[xs < 1e6],
                                     xs[xs < 1e6] * (1 + 1e-7), xs[xs < 1e6] + 0.5, [2e7]])
            got = model.cost(provider, region, probes)
            want = model._exact(provider, region, probes)
            assert np.allclose(got, want, rtol=1e-12, atol=1e-9)


def test_defaults_applied_names_the_lifecycle_storage_was_priced_with():
    """Where the spec omits keep_hot / archive_every / retention_days the policy's values price
    the storage; ``defaults_applied`` lists those values (and the policy), not the spec's own
    defaults, in the same place of the list."""
    from ptplan.spec.defaults import applied_defaults

    long = parse_policy("name: long\nextends: default\nstorage: {retention_days: 90, "
                        "keep_hot: 2}\n")
    spec = small_spec()  # sets only checkpoints.every_steps
    p = plan(spec, small_catalog(), explain=False, policy=long)
    assert (p.lifecycle.keep_hot, p.lifecycle.archive_every, p.lifecycle.retention_days) == \
        (2, 5, 90)
    lines = [d for d in p.defaults_applied if d.startswith("checkpoints.")]
    assert lines == ["checkpoints.keep_hot = 2 (policy long)",
                     "checkpoints.archive_every = 5 (policy long)",
                     "checkpoints.retention_days = 90 (policy long)"]
    spec_lines = applied_defaults(spec)
    assert len(p.defaults_applied) == len(spec_lines)
    assert [d for d in p.defaults_applied if not d.startswith("checkpoints.")] == \
        [d for d in spec_lines if not d.startswith("checkpoints.")]
    assert [i for i, d in enumerate(p.defaults_applied) if d.startswith("checkpoints.")] == \
        [i for i, d in enumerate(spec_lines) if d.startswith("checkpoints.")]
    # a value the spec sets is not a default: not listed, and it prices the storage
    own = small_spec(checkpoints={"retention_days": 7})
    q = plan(own, small_catalog(), explain=False, policy=long)
    assert q.lifecycle.retention_days == 7
    assert not any(d.startswith("checkpoints.retention_days") for d in q.defaults_applied)
    assert "checkpoints.keep_hot = 2 (policy long)" in q.defaults_applied


def test_regions_with_the_same_tiers_share_one_compilation_and_own_tiers_win():
    """What is compiled from a set of tiers is kept per set: the provider's ``*`` tiers are
    compiled once for all its regions, and a region with its own tiers gets its own prices."""
    from ptplan.providers.base import Catalog

    data = DataClass("ckpt", "ms", (ObjectGroup(2, 50.0, 100.0, 1.0),))
    shared = tier("standard", 0.02, 0)
    own = replace(tier("standard", 0.05, 0), region="r-own")
    cat = replace(small_catalog(), storage_tiers=(shared, own))
    assert isinstance(cat, Catalog)
    model = StorageModel((data,), cat)
    d = [0.0, 10.0, 1000.0]
    a, b, c = (model.cost("lab", r, d) for r in ("r-a", "r-b", "r-own"))
    assert list(a) == list(b)
    assert model._compile("lab", "r-a") is model._compile("lab", "r-b")
    assert model._compile("lab", "r-own") is not model._compile("lab", "r-a")
    # term by term: 2 objects × 50 GB for 100 + D hours at $/GB-month
    for k, hours in enumerate(d):
        gbm = 2 * 50.0 * (100.0 + hours) / 730.0
        assert a[k] == pytest.approx(gbm * 0.02)
        assert c[k] == pytest.approx(gbm * 0.05)
