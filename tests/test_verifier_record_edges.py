"""The verifier's rules on what a plan records of itself (``optimizer/planfile/rules_record.py``):
allocations, holds, idle costs and gang overheads at their edges (docs/testing.md, mutation
testing of ``rules_record.py``, issue #27). Phases, plan fields and policy records:
``test_verifier_record_edges2.py``.

Each test starts from the pinned GRPO example plan
(``tests/data/plans/grpo-7b-gcp-catalog-edges.json``, the GRPO example's plan frozen before
issue #39: run 16.5172426948 h; pool ``rollout`` 1 × a3-highgpu-2g spot at $5.65474/h, 2 GPUs
per node, busy 16.1269918609 h, phases rollout, eval, weight_sync; pool ``scoring`` 8 ×
g2-standard-4 at $0.26155/h + 4 × g2-standard-8 at $0.3128/h = $3.3436/h, 1 GPU per node, busy
16.0794751315 h; pool ``update`` 1 × a3-edgegpu-8g-nolssd on demand at $44.26095/h, 8 GPUs, busy
16.4634860552 h, phases update, checkpoint), edits one figure and calls the rule function: the
expected line follows from the edit and the rule."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ptplan.planfile.rules_record import _gang, check_allocations, check_record_pools
from ptplan.planfile.schema import Plan

PLAN = Path(__file__).resolve().parent / "data" / "plans" / "grpo-7b-gcp-catalog-edges.json"
RUN = 16.5172426948
ROLLOUT_BUSY = 15.5469899915  # the rollout phase
SCORING_BUSY = 16.0794751315  # the scoring phase and pool


def _raw() -> dict[str, Any]:
    raw: dict[str, Any] = json.loads(PLAN.read_text(encoding="utf-8"))
    assert raw["makespan_hours"] == RUN
    assert _phase(raw, "rollout")["busy_hours"] == ROLLOUT_BUSY
    assert _phase(raw, "scoring")["busy_hours"] == SCORING_BUSY
    return raw


def _phase(raw: dict[str, Any], name: str) -> dict[str, Any]:
    return next(x for x in raw["phases"] if x["name"] == name)


def _pool(raw: dict[str, Any], name: str) -> dict[str, Any]:
    return next(x for x in raw["pools"] if x["name"] == name)


def _allocs(raw: dict[str, Any]) -> list[str]:
    return check_allocations(Plan.model_validate(raw))


def _pools(raw: dict[str, Any]) -> list[str]:
    return check_record_pools(Plan.model_validate(raw))


def test_the_example_plan_passes() -> None:
    assert _allocs(_raw()) == []
    assert _pools(_raw()) == []


# ---- allocations -----------------------------------------------------------------------------


@pytest.mark.parametrize("field,value", [("note", "edited"), ("zone", "us-west4-b")])
def test_a_phase_allocation_is_a_copy_of_its_pools(field: str, value: str) -> None:
    raw = _raw()
    _phase(raw, "rollout")["allocations"][0][field] = value
    assert _allocs(raw) == ["allocations: phase rollout's allocations differ from pool rollout's"]


def test_a_phase_allocation_is_billed_the_phases_busy_hours() -> None:
    """0.001 h over is named (the tolerance is 1e-6 × 15.547 h = 1.6e-5 h); 5e-7 relative
    over passes."""
    raw = _raw()
    _phase(raw, "rollout")["allocations"][0]["hours"] = ROLLOUT_BUSY + 0.001
    assert _allocs(raw) == [
        f"allocations: phase rollout bills a3-highgpu-2g for {ROLLOUT_BUSY + 0.001} h, the "
        f"phase is busy {ROLLOUT_BUSY} h"
    ]
    _phase(raw, "rollout")["allocations"][0]["hours"] = ROLLOUT_BUSY * (1 + 5e-7)
    assert _allocs(raw) == []


def test_a_phase_allocation_costs_nodes_times_price_times_busy_to_the_cent() -> None:
    """1 × $5.65474/h × 15.54698999 h = $87.91418618: recorded 87.92 (0.58 ¢ off) passes the
    0.6-cent tolerance, 87.90 (1.42 ¢) is named."""
    raw = _raw()
    assert _phase(raw, "rollout")["allocations"][0]["cost_usd"] == "87.91"
    _phase(raw, "rollout")["allocations"][0]["cost_usd"] = "87.92"
    assert _allocs(raw) == []
    _phase(raw, "rollout")["allocations"][0]["cost_usd"] = "87.90"
    assert _allocs(raw) == [
        "allocations: phase rollout a3-highgpu-2g cost 87.90 != nodes x price x busy hours"
    ]


def test_a_phases_cost_is_its_pools_price_times_its_busy_hours() -> None:
    """Scoring: (8 × 0.26155 + 4 × 0.3128) $/h = $3.3436/h × 16.07947513 h = $53.7634: 53.76
    passes, 53.77 (0.66 ¢ off) is named with the recomputed 53.76."""
    raw = _raw()
    assert _phase(raw, "scoring")["cost_usd"] == "53.76"
    _phase(raw, "scoring")["cost_usd"] = "53.77"
    assert _allocs(raw) == ["allocations: phase scoring cost 53.77 != pool $/h x busy = 53.76"]


def test_a_phases_gpu_hours_are_busy_times_gpus() -> None:
    """Scoring: 16.07947513 h × 1 GPU × 12 nodes = 192.954 GPU-hours; rollout: 15.54698999 h ×
    2 GPUs × 1 node = 31.094. Recorded as one node's (16.0795) or one GPU's (15.547), named."""
    raw = _raw()
    assert _phase(raw, "scoring")["gpu_hours"] == pytest.approx(192.954, rel=1e-5, abs=0)
    _phase(raw, "scoring")["gpu_hours"] = SCORING_BUSY
    _phase(raw, "rollout")["gpu_hours"] = ROLLOUT_BUSY
    assert _allocs(raw) == [
        "allocations: phase rollout 15.547 GPU-hours != busy x GPUs = 31.094",
        "allocations: phase scoring 16.0795 GPU-hours != busy x GPUs = 192.954",
    ]


def test_a_pool_lists_exactly_the_phases_that_name_it() -> None:
    """In any order; one left out is named with both lists, sorted."""
    raw = _raw()
    _pool(raw, "update")["phases"] = ["checkpoint", "update"]
    assert _allocs(raw) == []
    _pool(raw, "update")["phases"] = ["update"]
    assert _allocs(raw) == [
        "allocations: pool update lists phases ['update'], the phases name it for "
        "['checkpoint', 'update']"
    ]


def test_a_phase_of_an_unknown_pool_does_not_stop_the_check() -> None:
    """eval names no pool of the plan: it is skipped (its pool no longer lists it rightly),
    and the update phase after it is still checked."""
    raw = _raw()
    _phase(raw, "eval")["pool"] = "nowhere"
    _phase(raw, "update")["gpu_hours"] = 1.0
    update_gpu_hours = 16.2861527219 * 8 * 1
    assert _allocs(raw) == [
        f"allocations: phase update 1 GPU-hours != busy x GPUs = {update_gpu_hours:.6g}",
        "allocations: pool rollout lists phases ['eval', 'rollout', 'weight_sync'], the phases "
        "name it for ['rollout', 'weight_sync']",
    ]


# ---- holds and idle costs ----------------------------------------------------------------------


def test_every_pool_is_held_for_the_run() -> None:
    raw = _raw()
    _pool(raw, "scoring")["held_hours"] = RUN + 0.01
    assert _pools(raw) == [f"hold: pool scoring held {RUN + 0.01} h, the run lasts {RUN} h"]


def test_a_pools_idle_cost_is_its_price_times_held_minus_busy() -> None:
    """Scoring: $3.3436/h × (16.51724269 − 16.07947513) h = $1.46372: 1.46 passes, 1.47 is
    named with the recomputed 1.46 (the two allocations' prices summed)."""
    raw = _raw()
    assert _pool(raw, "scoring")["idle_cost_usd"] == "1.46"
    _pool(raw, "scoring")["idle_cost_usd"] = "1.47"
    assert _pools(raw) == ["totals: pool scoring idle cost 1.47 != $/h x (held - busy) = 1.46"]


def test_a_pool_busy_past_the_run_is_not_idle() -> None:
    """Busy 17.517 h in a 16.517-h run: idle max(0, −1) = 0 h, $0.00 (not −$44.26)."""
    raw = _raw()
    _pool(raw, "update")["busy_hours"] = RUN + 1.0
    _pool(raw, "update")["idle_cost_usd"] = "0.00"
    assert _pools(raw) == []
    _pool(raw, "update")["idle_cost_usd"] = "0.01"
    assert _pools(raw) == ["totals: pool update idle cost 0.01 != $/h x (held - busy) = 0.00"]


def test_a_blocks_whole_units_past_the_run_are_idle() -> None:
    """The update pool's allocation a block billed 17 h (schema 6): idle = $44.26095/h ×
    (16.51724269 − 16.46348606) h + 44.26095 × (17 − 16.51724269) h = 2.37932 + 21.36730 =
    $23.74662 → 23.75; the 2.38 of the held hours alone is named."""
    raw = _raw()
    raw["schema_version"] = 6
    alloc = _pool(raw, "update")["allocations"][0]
    alloc["capacity_type"], alloc["billed_hours"] = "block", 17.0
    assert _pools(raw) == ["totals: pool update idle cost 2.38 != $/h x (held - busy) = 23.75"]
    _pool(raw, "update")["idle_cost_usd"] = "23.75"
    assert _pools(raw) == []


# ---- gang overheads ----------------------------------------------------------------------------


def _pool_model(raw: dict[str, Any], name: str) -> Any:
    return next(p for p in Plan.model_validate(raw).pools if p.name == name)


def test_a_training_pools_gang_overhead_is_one_minus_its_least_effective_node() -> None:
    """The update pool on two spot allocations of effective fractions 0.95 and 0.9: the gang
    waits for the slowest, 1 − 0.9 = 0.1 (not 1 − 0.95 = 0.05); 0.1 passes, 0.05 is named."""
    raw = _raw()
    pool = _pool(raw, "update")
    second = dict(pool["allocations"][0], effective_fraction=0.9, instance_type="a3-other")
    pool["allocations"][0]["effective_fraction"] = 0.95
    pool["allocations"].append(second)
    pool["gang_overhead_fraction"] = 0.1
    assert _gang(_pool_model(raw, "update")) == []
    pool["gang_overhead_fraction"] = 0.05
    assert _gang(_pool_model(raw, "update")) == [
        "spot_overhead: pool update gang overhead 0.05 != 0.100000000 (1 - its nodes' "
        "effective fraction)"
    ]


def test_a_pool_without_the_update_has_no_gang_overhead() -> None:
    """Scoring runs on spot (effective fraction 0.99995427) but is no gang: its overhead is 0,
    within 1e-8 (5e-9 passes; 2e-8, or the spot loss 4.573e-5, is named)."""
    raw = _raw()
    for value, ok in ((5e-9, True), (2e-8, False), (4.573e-5, False)):
        _pool(raw, "scoring")["gang_overhead_fraction"] = value
        want = (
            []
            if ok
            else [
                f"spot_overhead: pool scoring gang overhead {value} != 0.000000000 (1 - its "
                "nodes' effective fraction)"
            ]
        )
        assert _gang(_pool_model(raw, "scoring")) == want, value


def test_an_update_pool_without_allocations_has_no_gang_overhead() -> None:
    raw = _raw()
    _pool(raw, "update")["allocations"] = []
    assert _gang(_pool_model(raw, "update")) == []
