"""The verifier's rules on what a plan records of itself (``optimizer/planfile/rules_record.py``),
second part: each phase's rate, replicas and stall record, the plan's fill fraction, layout,
status, calibration flags and network items, and the policy's record (docs/testing.md,
mutation testing of ``rules_record.py``, issue #27).

The plan is the pinned GRPO example (``tests/data/plans/grpo-7b-gcp-catalog-edges.json``, the
GRPO example's plan frozen before issue #39; see ``test_verifier_record_edges.py``): async, 300
steps, layout ``async:rollout|scoring|update``, status optimal; phases rollout (1 node of 2
H100, spot 0.99995427, 1,258,291,200 tokens in 15.5469899915 h, fp8), eval, weight_sync (a
stall), scoring (12 one-GPU nodes), update (1 node of 8 H100, bf16), checkpoint (a stall);
budget $25,000, warned at 0.8, stopped at 1.0."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_verifier_record_edges import _phase, _pool, _raw

from ptplan.planfile.rules_record import check_record_phases, check_record_plan, check_record_policy
from ptplan.planfile.schema import Plan

SFT = Path(__file__).resolve().parent / "data" / "plans" / "sft-8b-frozen.json"
TOKENS = 1_258_291_200.0
BUSY = 15.5469899915
FRACTION = 0.99995427


def _phases(raw: dict[str, Any]) -> list[str]:
    return check_record_phases(Plan.model_validate(raw))


def _plan(raw: dict[str, Any]) -> list[str]:
    return check_record_plan(Plan.model_validate(raw))


def _policy(raw: dict[str, Any]) -> list[str]:
    return check_record_policy(Plan.model_validate(raw))


def test_the_example_plan_passes() -> None:
    raw = _raw()
    assert _phases(raw) == [] and _plan(raw) == [] and _policy(raw) == []


# ---- stall phases ------------------------------------------------------------------------------

STALL = "coverage: stall phase checkpoint records tokens, replicas, a precision or a layout"


@pytest.mark.parametrize(
    "field,value",
    [
        ("precision", "bf16"),
        ("tokens", 1.0),
        ("replica_gpus", 1),
        ("nodes_per_replica", 1),
        ("usable_node_fraction", 0.5),
        ("parallel_layout", {"tp": 1, "cp": 1, "pp": 1, "dp": 1, "zero_stage": None}),
        ("calibrated", True),
    ],
)
def test_a_stall_phase_records_no_work(field: str, value: object) -> None:
    """Each field alone (the checkpoint write is a stall: no tokens_per_node_hour)."""
    raw = _raw()
    assert _phase(raw, "checkpoint")["tokens_per_node_hour"] is None
    _phase(raw, "checkpoint")[field] = value
    assert _phases(raw) == [STALL]


def test_a_stall_phase_lasts_its_floor_and_does_not_stop_the_check() -> None:
    """weight_sync's floor 0.1 h against its busy 0.12666667 h is named; the scoring phase after
    it is still checked (a replica of 1 GPU recorded on 2 nodes)."""
    raw = _raw()
    _phase(raw, "weight_sync")["latency_floor_hours"] = 0.1
    _phase(raw, "scoring")["nodes_per_replica"] = 2
    assert _phases(raw) == [
        "coverage: stall phase weight_sync floor 0.1 h != its busy 0.126666666667 h",
        "memory: phase scoring replica of 1 GPUs spans 2 node(s); on 1-GPU nodes it spans 1",
    ]


# ---- work phases -------------------------------------------------------------------------------


def _rate(raw: dict[str, Any], rate: float) -> list[str]:
    _phase(raw, "rollout")["tokens_per_node_hour"] = rate
    return _phases(raw)


def test_a_phases_rate_is_tokens_per_busy_effective_node_hour() -> None:
    """Rollout: 1,258,291,200 / (15.54698999 h × 1 node × 0.99995427 × usable 1.0) = 80,938,416
    tokens per node-hour; 1 % more is named. At a usable fraction of 0.5 the rate doubles."""
    want = TOKENS / (BUSY * 1 * FRACTION * 1.0)
    assert _rate(_raw(), want) == []
    assert _rate(_raw(), want * 1.01) == [
        f"coverage: phase rollout rate {want * 1.01:.6g} tokens/node-hour != tokens / busy / "
        f"effective nodes = {want:.6g}"
    ]
    raw = _raw()
    _phase(raw, "rollout")["usable_node_fraction"] = 0.5
    assert _rate(raw, 2 * want) == []


def test_a_rate_is_over_all_the_pools_effective_nodes() -> None:
    """Scoring: 1,572,864,000 tokens / (16.07947513 h × (8 + 4) × 0.99995427) = 8,151,883."""
    raw = _raw()
    want = 1_572_864_000.0 / (16.0794751315 * 12 * FRACTION)
    assert _phase(raw, "scoring")["tokens_per_node_hour"] == pytest.approx(want, rel=1e-9, abs=0)
    _phase(raw, "scoring")["tokens_per_node_hour"] = want / 12 * 8
    assert len(_phases(raw)) == 1


def test_a_phase_shorter_than_one_node_hour_is_checked_too() -> None:
    """eval: 49,152,000 tokens in 0.45333520 h on 1 node × 0.99995427 (0.4533 node-hours):
    108,428,041 tokens per node-hour; 1 % more is named."""
    raw = _raw()
    want = 49_152_000.0 / (0.453335202681 * FRACTION)
    _phase(raw, "eval")["tokens_per_node_hour"] = want * 1.01
    assert _phases(raw) == [
        f"coverage: phase eval rate {want * 1.01:.6g} tokens/node-hour != tokens / busy / "
        f"effective nodes = {want:.6g}"
    ]


def test_no_usable_nodes_records_the_models_rate() -> None:
    """A usable fraction of 0: no effective nodes, the rate is not derived (no division)."""
    raw = _raw()
    _phase(raw, "rollout")["usable_node_fraction"] = 0.0
    assert _rate(raw, 1.0) == []


def test_no_busy_time_records_the_models_rate() -> None:
    """0 busy hours: the rate cannot be derived and is not checked (no division by zero)."""
    raw = _raw()
    _phase(raw, "rollout")["busy_hours"] = 0.0
    assert _rate(raw, 1.0) == []


def test_a_phase_of_an_unknown_or_empty_pool_is_skipped_and_the_next_checked() -> None:
    raw = _raw()
    _phase(raw, "rollout")["pool"] = "nowhere"
    _phase(raw, "rollout")["tokens_per_node_hour"] = 1.0
    _phase(raw, "update")["precision"] = None
    assert _phases(raw) == ["coverage: phase update processes tokens but has no precision"]
    raw = _raw()
    _pool(raw, "rollout")["nodes"] = 0
    _phase(raw, "rollout")["tokens_per_node_hour"] = 1.0
    assert _phases(raw) == []


@pytest.mark.parametrize(
    "replica,spans,want_spans",
    [(8, 1, 1), (9, 2, 2), (16, 2, 2), (16, 1, 2), (9, 1, 2), (0, 1, 1)],
)
def test_a_replica_spans_whole_nodes(replica: int, spans: int, want_spans: int) -> None:
    """On the update pool's 8-GPU nodes a replica of 8 GPUs spans 1 node, of 9 or 16 ⌈/8⌉ = 2;
    a replica of 0 GPUs is named even though ⌈0/8⌉ is floored to 1."""
    raw = _raw()
    _phase(raw, "update")["replica_gpus"] = replica
    _phase(raw, "update")["nodes_per_replica"] = spans
    ok = replica >= 1 and spans == want_spans
    want = (
        []
        if ok
        else [
            f"memory: phase update replica of {replica} GPUs spans {spans} node(s); on 8-GPU nodes "
            f"it spans {want_spans}"
        ]
    )
    assert _phases(raw) == want


# ---- plan fields -------------------------------------------------------------------------------


def test_an_async_plans_fill_is_one_step() -> None:
    """1 / 300 = 0.00333…: 0.0034 is named, 1/300 × (1 + 5e-7) passes."""
    raw = _raw()
    raw["fill_fraction"] = 0.0034
    assert _plan(raw) == [
        "makespan: fill_fraction 0.0034 != 0.00333333333 (one step of 300 for async, else 0)"
    ]
    raw["fill_fraction"] = 1 / 300 * (1 + 5e-7)
    assert _plan(raw) == []


def test_a_colocated_plan_has_no_fill() -> None:
    """The SFT plan is colocated: its fill is 0, within 1e-12."""
    raw: dict[str, Any] = json.loads(SFT.read_text(encoding="utf-8"))
    assert raw["pipeline_mode"] == "colocated" and raw["fill_fraction"] == 0.0
    raw["fill_fraction"] = 5e-13
    assert _plan(raw) == []
    raw["fill_fraction"] = 2e-12
    assert _plan(raw) == [
        f"makespan: fill_fraction 2e-12 != 0 (one step of {raw['steps']} for async, else 0)"
    ]


def test_the_layout_names_the_pipeline_mode() -> None:
    raw = _raw()
    raw["layout"] = "sync:rollout|scoring|update"
    assert _plan(raw) == [
        "makespan: pipeline_mode async but the layout is sync:rollout|scoring|update"
    ]


@pytest.mark.parametrize(
    "plan_status,solver_status,ok",
    [
        ("time_limit", "time_limit", True),
        ("feasible", "feasible", True),
        ("time_limit", "optimal", False),
        ("infeasible", "infeasible", False),
    ],
)
def test_the_status_is_the_solvers_and_carries_a_plan(
    plan_status: str, solver_status: str, ok: bool
) -> None:
    raw = _raw()
    raw["status"], raw["solver"]["status"] = plan_status, solver_status
    want = (
        []
        if ok
        else [
            f"status: the plan says {plan_status}, the solver {solver_status}; a plan is optimal, "
            "feasible, time_limit"
        ]
    )
    assert _plan(raw) == want


# ---- calibration flags -------------------------------------------------------------------------


def _calibrated(applied_to: list[str], gpu: str = "H100") -> dict[str, Any]:
    """A calibration record of the update phase (measured 2,000 tokens/s/GPU in bf16 against a
    modelled 2,500: factor 0.8) applied to ``applied_to`` on ``gpu``; the phase says it is
    calibrated."""
    raw = _raw()
    raw["calibration"] = [
        {
            "phase": "update",
            "gpu": gpu,
            "measured_precision": "bf16",
            "measured_tokens_per_second_per_gpu": 2000.0,
            "modelled_tokens_per_second_per_gpu": 2500.0,
            "factor": 0.8,
            "applied_to": applied_to,
        }
    ]
    _phase(raw, "update")["calibrated"] = True
    return raw


def test_a_phase_is_calibrated_when_a_record_applied_to_its_gpu_and_precision() -> None:
    """The update runs bf16 on H100: a record applied to bf16 on H100 makes it calibrated; one
    applied to fp16 only, or measured on A100, does not."""
    assert _plan(_calibrated(["bf16"])) == []
    want = ["calibration: phase update says calibrated=True, the calibration records say False"]
    assert _plan(_calibrated(["fp16"])) == want
    assert _plan(_calibrated(["bf16"], gpu="A100")) == want
    raw = _calibrated(["bf16"])
    _phase(raw, "update")["calibrated"] = False
    assert _plan(raw) == [
        "calibration: phase update says calibrated=False, the calibration records say True"
    ]


def test_a_phase_of_an_unknown_pool_has_no_calibration_check() -> None:
    """rollout names no pool (its GPU is unknown): skipped; update after it is still checked."""
    raw = _calibrated(["fp16"])
    _phase(raw, "rollout")["pool"] = "nowhere"
    _phase(raw, "rollout")["calibrated"] = True
    assert _plan(raw) == [
        "calibration: phase update says calibrated=True, the calibration records say False"
    ]


# ---- network items -----------------------------------------------------------------------------


def _item(raw: dict[str, Any], flow: str) -> dict[str, Any]:
    return next(x for x in raw["network"] if x["flow"] == flow)


def test_only_weight_sync_names_nodes() -> None:
    raw = _raw()
    _item(raw, "weight_sync")["nodes"] = None
    _item(raw, "experience")["nodes"] = 2
    assert _plan(raw) == [
        "network: a weight_sync item names no rollout nodes",
        "network: experience names 2 node(s); only weight sync does",
    ]


def test_a_flow_appears_once_but_weight_sync_once_per_path() -> None:
    """A second weight_sync item (another path) is fine; a second dataset_staging is named."""
    raw = _raw()
    raw["network"].append(dict(_item(raw, "weight_sync"), path="cross_zone"))
    assert _plan(raw) == []
    raw["network"].append(dict(_item(raw, "dataset_staging")))
    assert _plan(raw) == ["network: dataset_staging appears twice"]


# ---- the policy record -------------------------------------------------------------------------


def test_an_invalid_policy_record_is_left_to_the_policy_rule() -> None:
    raw = _raw()
    raw["policy"]["max_spot_share"] = "lots"
    raw["split_regions"] = True  # would be named against a valid record
    assert _policy(raw) == []


def test_a_pool_may_use_spot_only_when_every_phase_of_it_may() -> None:
    """The rollout pool runs rollout, eval and weight_sync; eval on demand only makes its
    spot_ok False (all phases, not any); the scoring pool is unaffected."""
    raw = _raw()
    raw["policy"]["phases"]["eval"]["capacity_types"] = ["on_demand"]
    assert _policy(raw) == [
        "policy: pool rollout spot_ok=True, the policy says False for its "
        "phases rollout, eval, weight_sync"
    ]
    _pool(raw, "rollout")["spot_ok"] = False
    assert _policy(raw) == []


def test_split_regions_follows_the_policy() -> None:
    raw = _raw()
    raw["split_regions"] = True
    assert _policy(raw) == ["policy: split_regions=True, the plan's policy says False"]


def _budget(budget: str | None, warn: str | None, stop: str | None) -> list[str]:
    raw = _raw()
    raw["budget_usd"], raw["budget_warn_usd"], raw["budget_stop_usd"] = budget, warn, stop
    return _policy(raw)


def test_the_budget_thresholds_are_the_budget_times_the_policys_shares() -> None:
    """Budget $10, warn at 0.8, stop at 1.0: $8.00 and $10.00, within $0.0101 (8.01 passes,
    8.02 is named; 10.02 too); $25,000 × 0.8 = $20,000.00."""
    assert _budget("25000.00", "20000.00", "25000.00") == []
    assert _budget("10.00", "8.01", "10.00") == []
    assert _budget("10.00", "8.02", "10.02") == [
        "budget: budget_warn_usd 8.02 != budget x warn threshold (0.8) = 8.00",
        "budget: budget_stop_usd 10.02 != budget x stop threshold (1) = 10.00",
    ]


def test_no_budget_no_thresholds() -> None:
    assert _budget(None, None, None) == []
    assert _budget(None, "8.00", None) == [
        "budget: budget_warn_usd 8.00 != budget x warn threshold (0.8) = none"
    ]
    assert _budget("10.00", "8.00", None) == [
        "budget: budget_stop_usd None != budget x stop threshold (1) = 10.00"
    ]
