"""Independent oracles for the storage model's edges (``optimizer/costs/storage.py``): the
dataset class of every method, the SFT example's checkpoints, a region's own tier rows, block
tiers, a class no tier is fast enough for, runs shorter than an hour, ties between tiers.

Expected values are worked out by hand from the module's documented rules and the cited inputs
(the examples under ``examples/``, the tiers written here) or by ``tests/oracles.py``; nothing
here compares the package with itself. Written for the surviving mutants of the 2026-12-03
mutation run (docs/testing.md).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from conftest import EXAMPLES
from oracles import checkpoint_classes, class_on_tier
from planner_fixtures import small_catalog

from ptplan.costs.storage import DataClass, ObjectGroup, StorageModel, data_classes
from ptplan.demand.model import build_demand
from ptplan.policies.model import default_policy
from ptplan.providers.base import StorageTier
from ptplan.spec.project import load_spec


def _tier(name: str, price: float, min_days: float = 0.0, fee: float = 0.0,
          access: str = "ms", region: str = "*", provider: str = "lab") -> StorageTier:
    return StorageTier(provider, region, name, price, min_days, fee, access, "test", "U")


def _classes(example: str) -> dict[str, DataClass]:
    demand = build_demand(load_spec(str(EXAMPLES / f"{example}.yaml")))
    return {c.name: c for c in data_classes(demand, default_policy())}


# ---- the dataset class ---------------------------------------------------------------------------

@pytest.mark.parametrize(("example", "gb"), [
    ("sft-8b", 200_000 * 2048 * 4 / 1e9),  # examples × tokens_per_example × 4 B (not × epochs)
    ("grpo-7b", 300 * 256 * 512 * 4 / 1e9),  # steps × prompts_per_step × prompt_tokens × 4 B
    ("opd-8b-from-32b", 150 * 256 * 1024 * 4 / 1e9),
])
def test_dataset_is_stored_once_for_the_whole_run(example: str, gb: float) -> None:
    """The dataset: one object of tokens × 4 B (int32 ids), online (``ms``), alive for the run
    (lifetime 0 + 1·D)."""
    c = _classes(example)["dataset"]
    assert c.access == "ms" and c.retrieval_gb == 0.0
    assert c.groups == (ObjectGroup(1, pytest.approx(gb, rel=1e-12), 0, 1),)
    assert c.gb == pytest.approx(gb, rel=1e-12)


def test_sft_example_checkpoints_equal_the_reference() -> None:
    """SFT example: 200,000 examples × 3 epochs / batch 256 = 2,344 steps (the last one
    partial), a checkpoint every 500 steps (4, the run ending 344 steps after the last), keep 2
    hot, archive every 2nd, retention 60 days (the spec's block), metrics 365 days (policy);
    full checkpoint 8.0303 B × (2 + 12) B = 112.42 GB, weights only 8.0303 × 2 = 16.06 GB. Each
    class on each tier against the reference, at a 40 h run."""
    got = _classes("sft-8b")
    refs = checkpoint_classes(steps=2344, every=500, run_hours=40.0, full_gb=8.0303 * 14,
                              weights_gb=8.0303 * 2, keep_hot=2, archive_every=2,
                              retention_days=60, metrics_days=365)
    assert {r.name for r in refs} == {"hot_checkpoints", "retained_checkpoints",
                                      "archived_checkpoints"}
    assert set(got) == {r.name for r in refs} | {"dataset", "eval_outputs"}  # SFT: no rollouts
    tiers = (_tier("standard", 0.023), _tier("ia", 0.0125, 30, 0.01),
             _tier("archive", 0.0012, 365, 0.05, "hours"))
    for r in refs:
        c = got[r.name]
        assert c.access == r.access and c.retrieval_gb == pytest.approx(r.retrieval_gb)
        for t in tiers:
            if t.access == "hours" and c.access == "ms":
                continue
            cat = replace(small_catalog(), storage_tiers=(t,))
            [(_, _, gbm, usd)] = StorageModel((c,), cat).choose("lab", "r1", 40.0)
            want_gbm, want_usd = class_on_tier(r, t)
            assert gbm == pytest.approx(want_gbm, rel=1e-9), (r.name, t.tier)
            assert usd == pytest.approx(want_usd, rel=1e-9), (r.name, t.tier)
    # eval outputs: 4 B per generated eval token (1,000 prompts × 512 tokens × 4 evals at steps
    # 500 … 2,000), kept metrics_days, retrieval-free
    ev = got["eval_outputs"]
    assert ev.access == "hours"
    assert ev.groups == (ObjectGroup(1, pytest.approx(4 * 1000 * 512 * 4 / 1e9), 365 * 24.0, 0),)


def test_rl_rollout_logs_and_eval_outputs_by_hand() -> None:
    """GRPO example: rollout logs of 300 steps × 256 prompts × 8 samples × 2,048 generated
    tokens × 8 B (token id + log-prob) = 10.0663296 GB, kept rollout_log_days (policy: 14 d =
    336 h); eval outputs of 300/25 = 12 evals × 500 prompts × 4 samples × 2,048 tokens × 4 B =
    0.196608 GB, kept metrics_days (365 d). Both ``hours`` access, no retrieval, independent
    of the run time."""
    got = _classes("grpo-7b")
    logs, ev = got["rollout_logs"], got["eval_outputs"]
    assert (logs.access, ev.access) == ("hours", "hours")
    assert logs.retrieval_gb == ev.retrieval_gb == 0.0
    assert logs.groups == (ObjectGroup(1, pytest.approx(300 * 256 * 8 * 2048 * 8 / 1e9,
                                                        rel=1e-12), 14 * 24.0, 0),)
    assert ev.groups == (ObjectGroup(1, pytest.approx(12 * 500 * 4 * 2048 * 4 / 1e9, rel=1e-12),
                                     365 * 24.0, 0),)


# ---- archived weights --------------------------------------------------------------------------

def _grpo(**edits: dict) -> dict:
    import yaml

    data = yaml.safe_load((EXAMPLES / "grpo-7b.yaml").read_text(encoding="utf-8"))
    for block, values in edits.items():
        data.setdefault(block, {}).update(values)
    return data


LORA_PARAMS = 20 * 16 * 3584 * 28
"""The GRPO example's rank-16 adapter: ≈ 20 · r · h · L = 32,112,640 parameters
(``test_lora_adapter_sizes_by_hand``)."""


@pytest.mark.parametrize(("with_optimizer", "adam", "per_param"), [
    (True, 16.0, 14.0),  # bf16 weights + fp32 master and Adam m, v: 2 + 16 − 4
    (False, 16.0, 2.0),  # the checkpoint holds the weights alone
    (True, 4.5, 2.5),  # 2 + 0.5 bytes of state
    (True, 4.0, 2.0),  # no state beyond the weights
])
def test_archived_lora_weights_are_the_adapter_in_bf16(with_optimizer: bool, adam: float,
                                                       per_param: float) -> None:
    """An archived checkpoint holds the weights only, 2 bytes per adapter parameter
    (32,112,640 × 2 B = 0.06422528 GB), whatever the full checkpoint holds besides.
    Regression: with ``checkpoints.with_optimizer: false`` the checkpoint already is the
    weights, and the archive was taken as 2/14 of it (0.0091750 GB)."""
    from ptplan.costs.storage import weights_gb
    from ptplan.spec.project import parse_spec

    spec = parse_spec(_grpo(model={"finetune": "lora", "lora_rank": 16},
                            checkpoints={"with_optimizer": with_optimizer},
                            efficiency={"adam_bytes_per_param": adam}))
    demand = build_demand(spec)
    assert demand.checkpoint_gb == pytest.approx(LORA_PARAMS * per_param / 1e9, rel=1e-12)
    assert weights_gb(demand) == pytest.approx(LORA_PARAMS * 2 / 1e9, rel=1e-12)
    archived = {c.name: c for c in data_classes(demand, default_policy())}["archived_checkpoints"]
    # 12 checkpoints, every 4th archived (the example's block): 3 copies of the weights
    assert archived.groups == (ObjectGroup(3, pytest.approx(LORA_PARAMS * 2 / 1e9, rel=1e-12),
                                           365 * 24.0, 0),)
    assert archived.retrieval_gb == pytest.approx(LORA_PARAMS * 2 / 1e9, rel=1e-12)


@pytest.mark.parametrize("with_optimizer", [True, False])
def test_archived_full_weights_are_the_policy_in_bf16(with_optimizer: bool) -> None:
    """Full fine-tuning: the archive is the policy's bf16 weights, 7.6156 B × 2 B = 15.2312 GB,
    with or without optimizer state in the checkpoint, and without a PPO critic's weights
    (its checkpoint holds the critic too: (7.6156 + 7.6156) × 14 = 213.2368 GB with state, × 2 =
    30.4 GB without)."""
    from ptplan.costs.storage import weights_gb
    from ptplan.spec.project import parse_spec

    grpo = build_demand(parse_spec(_grpo(checkpoints={"with_optimizer": with_optimizer})))
    assert weights_gb(grpo) == pytest.approx(15.2312, rel=1e-12)
    data = _grpo(checkpoints={"with_optimizer": with_optimizer})
    data["algorithm"] = "ppo"
    data["reward_model"] = {"params_b": 1.5, "layers": 28, "hidden_size": 1536, "heads": 12,
                            "kv_heads": 2, "head_dim": 128}
    ppo = build_demand(parse_spec(data))
    assert ppo.checkpoint_gb == pytest.approx(15.2312 * (14 if with_optimizer else 2),
                                              rel=1e-12)
    assert weights_gb(ppo) == pytest.approx(15.2312, rel=1e-12)


# ---- which tiers price a class -------------------------------------------------------------------

ONE_HUNDRED_GB_FOR_THE_RUN = DataClass("x", "ms", (ObjectGroup(1, 100.0, 0.0, 1.0),))


def test_a_regions_own_rows_replace_the_provider_wide_rows() -> None:
    """Tier rows of the plan's region price its classes; a region without rows of its own uses
    the provider's ``region: "*"`` rows (docs/spec.md ``storage_tiers[].region``); another
    provider's rows never do. 100 GB for a run of D = 100 h: in r1 only r1's rows, standard
    at $0.05: 100 × 100/730 × 0.05 = $0.684932 (r1-ia bills its 30 days, 720 h, at $0.02:
    $1.972603, the cheaper one from D = 288 h); in r2 the cheapest ``*`` row, standard at
    $0.023 (100 × 100/730 × 0.023 = $0.315068; cold bills its 90 days: 100 × 2160/730 ×
    0.004 = $1.1836)."""
    tiers = (_tier("standard", 0.023), _tier("cold", 0.004, 90),
             _tier("r1-standard", 0.05, region="r1"), _tier("r1-ia", 0.02, 30, region="r1"),
             _tier("cheap", 0.0001, provider="other"),
             _tier("cheap-r1", 0.0001, provider="other", region="r1"))
    model = StorageModel((ONE_HUNDRED_GB_FOR_THE_RUN,), replace(small_catalog(),
                                                                 storage_tiers=tiers))
    r1, r2 = 100 * 100 / 730 * 0.05, 100 * 100 / 730 * 0.023
    # the same model asked for both regions, in both orders (no cached answer leaks across)
    assert float(model.cost("lab", "r1", 100.0)) == pytest.approx(r1, rel=1e-12)
    assert float(model.cost("lab", "r2", 100.0)) == pytest.approx(r2, rel=1e-12)
    assert float(model.cost("lab", "r1", 100.0)) == pytest.approx(r1, rel=1e-12)
    assert np.allclose(model.cost("lab", "r2", np.array([100.0, 200.0])), [r2, 2 * r2],
                       rtol=1e-12)
    assert float(model._exact("lab", "r1", np.array([100.0]))[0]) == pytest.approx(r1)
    # the breakpoints are r1's own (r1-ia's minimum, the crossing at 288 h), not the * rows'
    for d in (200.0, 288.0, 500.0, 720.0, 1000.0):
        want = min(100 * d / 730 * 0.05, 100 * max(d, 720.0) / 730 * 0.02)
        assert float(model.cost("lab", "r1", d)) == pytest.approx(want, rel=1e-12), d
    # beyond the interpolation's far end (1e7 h) the cost is evaluated term by term, in the
    # same rows: 100 × 2e7/730 × 0.02 (r1-ia)
    assert float(model.cost("lab", "r1", 2e7)) == pytest.approx(100 * 2e7 / 730 * 0.02)
    [(_, t1, gbm1, usd1)] = model.choose("lab", "r1", 100.0)
    [(_, t2, _, usd2)] = model.choose("lab", "r2", 100.0)
    assert (t1.tier, t2.tier) == ("r1-standard", "standard")
    assert gbm1 == pytest.approx(100 * 100 / 730) and usd1 == pytest.approx(r1)
    assert usd2 == pytest.approx(r2)
    other = StorageModel((ONE_HUNDRED_GB_FOR_THE_RUN,), replace(small_catalog(),
                                                                 storage_tiers=tiers))
    assert float(other.cost("lab", "r2", 100.0)) == pytest.approx(r2, rel=1e-12)
    assert float(other.cost("lab", "r1", 100.0)) == pytest.approx(r1, rel=1e-12)
    assert float(other.cost("none", "r1", 100.0)) == 0.0  # no rows: no storage priced
    assert other.choose("none", "r1", 100.0) == []


def test_block_tiers_never_hold_a_data_class() -> None:
    """``block`` tiers (boot disks) are not object storage: never eligible for a data class,
    however cheap (docs/spec.md ``storage_tiers[].access``)."""
    tiers = (_tier("disk", 0.0001, access="block"), _tier("standard", 0.023),
             _tier("glacier", 0.004, 90, 0.02, access="hours"))
    online = DataClass("online", "ms", (ObjectGroup(1, 100.0, 240.0, 0.0),))
    logs = DataClass("logs", "hours", (ObjectGroup(1, 100.0, 24.0 * 365, 0.0),), 10.0)
    model = StorageModel((online, logs), replace(small_catalog(), storage_tiers=tiers))
    chosen = {c.name: t.tier for c, t, _, _ in model.choose("lab", "r1", 0.0)}
    assert chosen == {"online": "standard", "logs": "glacier"}
    # 100 × 240/730 × 0.023 + (100 × 8760/730 × 0.004 + 10 × 0.02)
    want = 100 * 240 / 730 * 0.023 + 100 * 8760 / 730 * 0.004 + 10 * 0.02
    assert float(model.cost("lab", "r1", 0.0)) == pytest.approx(want, rel=1e-12)


def test_a_class_without_a_fast_enough_tier_is_left_out_not_the_rest() -> None:
    """With only an ``hours`` tier, an online class (listed first) has no tier: it is left out
    of the cost and the choice, and the classes after it are still priced: 100 GB of logs
    kept 400 days on glacier = 100 × 9600/730 × 0.004 = $5.260274."""
    online = DataClass("online", "ms", (ObjectGroup(1, 100.0, 240.0, 0.0),))
    logs = DataClass("logs", "hours", (ObjectGroup(1, 100.0, 24.0 * 400, 0.0),))
    glacier = _tier("glacier", 0.004, 90, access="hours")
    model = StorageModel((online, logs), replace(small_catalog(), storage_tiers=(glacier,)))
    want = 100 * 9600 / 730 * 0.004
    assert float(model.cost("lab", "r1", 5.0)) == pytest.approx(want, rel=1e-12)
    [(c, t, gbm, usd)] = model.choose("lab", "r1", 5.0)
    assert (c.name, t.tier) == ("logs", "glacier")
    assert gbm == pytest.approx(100 * 9600 / 730) and usd == pytest.approx(want)


# ---- run time, ties ------------------------------------------------------------------------------

@pytest.mark.parametrize("d", [0.0, 0.25, 0.5, 0.999, 1.0, 1.5])
def test_runs_shorter_than_an_hour(d: float) -> None:
    """The cost at run times under an hour is exact too: 100 GB for the run on standard
    ($0.023) = 100 × D/730 × 0.023; a second class (``hours`` access) kept 30 min past the
    run on an ``hours`` tier with a one-hour minimum (1/24 day, $0.01, cheaper than standard
    for it at every D: 0.01 × max(0.5 + D, 1) < 0.023 × (0.5 + D)): 10 × max(0.5 + D, 1)/730
    × 0.01 (its kink at D = 0.5 h)."""
    short = DataClass("short", "hours", (ObjectGroup(1, 10.0, 0.5, 1.0),))
    tiers = (_tier("standard", 0.023), _tier("hourly", 0.01, 1 / 24, access="hours"))
    model = StorageModel((ONE_HUNDRED_GB_FOR_THE_RUN, short),
                         replace(small_catalog(), storage_tiers=tiers))
    want = 100 * d / 730 * 0.023 + 10 * max(0.5 + d, 1.0) / 730 * 0.01
    assert float(model.cost("lab", "r1", d)) == pytest.approx(want, rel=1e-12, abs=1e-15)
    got = model.cost("lab", "r1", np.array([d, d]))
    assert got.shape == (2,) and np.allclose(got, want, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("d", [0.25, 0.5, 0.695, 0.9, 1.0, 3.0])
def test_tiers_crossing_within_the_first_hour(d: float) -> None:
    """Two tiers whose costs cross under an hour of run time: 100 GB for the run with one
    1 GB retrieval; standard (0.023, no fee) costs 100 × D/730 × 0.023 = 0.0031507·D, the
    cheaper tier with a $0.001/GB fee 100 × D/730 × 0.0125 + 0.001 = 0.0017123·D + 0.001;
    they cross at D = 0.001 / (0.0031507 − 0.0017123) = 0.695 h. The least of the two at
    every D (the interpolation must not miss the crossing)."""
    c = DataClass("x", "ms", (ObjectGroup(1, 100.0, 0.0, 1.0),), retrieval_gb=1.0)
    tiers = (_tier("standard", 0.023), _tier("cheaper", 0.0125, 0, 0.001))
    model = StorageModel((c,), replace(small_catalog(), storage_tiers=tiers))
    want = min(100 * d / 730 * 0.023, 100 * d / 730 * 0.0125 + 0.001)
    assert float(model.cost("lab", "r1", d)) == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("d", [0.0, 620.0, 1000.0, 1240.0, 1440.0, 1640.0, 3000.0])
def test_a_lifetime_crosses_the_minimum_duration(d: float) -> None:
    """40 GB alive 100 h + 0.5·D on a tier with a 30-day minimum (720 h, $0.0125): billed
    max(100 + 0.5·D, 720) h, flat until the lifetime reaches 720 h at D = (720 − 100)/0.5 =
    1,240 h: 40 × max(100 + 0.5·D, 720)/730 × 0.0125."""
    c = DataClass("x", "ms", (ObjectGroup(1, 40.0, 100.0, 0.5),))
    model = StorageModel((c,), replace(small_catalog(),
                                       storage_tiers=(_tier("ia", 0.0125, 30),)))
    want = 40 * max(100 + 0.5 * d, 720.0) / 730 * 0.0125
    assert float(model.cost("lab", "r1", d)) == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("order", [("b-standard", "a-standard"), ("a-standard", "b-standard")])
def test_equal_cost_tiers_tie_by_name(order: tuple[str, str]) -> None:
    """Two tiers of the same price and rules cost the same: the choice is the first by name,
    whatever the catalog order (the plan is reproducible). 50 GB kept 10 days: 50 × 240/730
    × 0.02 = $0.328767, 50 × 240/730 = 16.438 GB-months."""
    c = DataClass("x", "ms", (ObjectGroup(1, 50.0, 240.0, 0.0),))
    tiers = tuple(_tier(name, 0.02) for name in order)
    [(got, t, gbm, usd)] = StorageModel((c,), replace(small_catalog(), storage_tiers=tiers)
                                        ).choose("lab", "r1", 3.0)
    assert got is c and t.tier == "a-standard"
    model = StorageModel((c,), replace(small_catalog(), storage_tiers=tiers))
    assert float(model.cost("lab", "r1", 3.0)) == pytest.approx(50 * 240 / 730 * 0.02)
    # and for a class alive for the run, beyond the far end too: 100 × 2e7/730 × 0.02
    run = StorageModel((ONE_HUNDRED_GB_FOR_THE_RUN,), replace(small_catalog(),
                                                               storage_tiers=tiers))
    assert float(run.cost("lab", "r1", 2e7)) == pytest.approx(100 * 2e7 / 730 * 0.02)
    assert isinstance(gbm, float) and isinstance(usd, float)
    assert gbm == pytest.approx(50 * 240 / 730, rel=1e-12)
    assert usd == pytest.approx(50 * 240 / 730 * 0.02, rel=1e-12)
