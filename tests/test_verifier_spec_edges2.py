"""``spec_match`` rules on what a plan records of its spec (``optimizer/planfile/rules_spec.py``:
the job, the lifecycle, the weight-sync size, the bookings' start, calibration records) at
their edges, with the exact line (docs/testing.md, mutation testing of ``rules_spec.py``,
issue #27). Storage, network and other costs: ``test_verifier_spec_edges3.py``.

Each test takes the pinned GRPO example plan (``tests/golden/cli/plan-grpo-7b.json``) and its
spec (``examples/grpo-7b.yaml``: rl/grpo, 300 steps, budget $25,000, pipeline auto, bf16
weights of 7.6156 B parameters, 15.2312 GB synced per rollout node and step; checkpoints every 25
steps, 3 hot, every 4th archived, 30 days; the default policy's 14-day rollout logs and
365-day metrics; spot model 5 / 10 / 3 minutes), edits the plan or the spec in one place and
calls ``check_spec_record`` as ``verify_against_spec`` does.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from ptplan.demand.model import build_demand
from ptplan.planfile.rules_spec import check_spec_record
from ptplan.planfile.schema import Plan
from ptplan.policies.model import Policy
from ptplan.spec.project import load_spec

pytestmark = pytest.mark.shipped_framework
"""The golden plans are the examples as a user plans them (framework verl==0.9 by default)."""

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden" / "cli"


def _raw(name: str = "plan-grpo-7b.json") -> dict[str, Any]:
    raw: dict[str, Any] = json.loads((GOLDEN / name).read_text(encoding="utf-8"))
    return raw


def _spec(example: str = "grpo-7b", edit: str = "", tmp: Path | None = None) -> Any:
    """The example spec, with ``edit`` (YAML lines) appended when given."""
    path = ROOT / "examples" / f"{example}.yaml"
    if edit:
        assert tmp is not None
        text = path.read_text(encoding="utf-8") + edit
        path = tmp / f"{example}.yaml"
        path.write_text(text, encoding="utf-8")
    return load_spec(str(path))


def _check(raw: dict[str, Any], spec: Any = None, policy: bool = True) -> list[str]:
    plan = Plan.model_validate(raw)
    spec = spec if spec is not None else _spec()
    return check_spec_record(
        plan, spec, build_demand(spec), Policy.model_validate(plan.policy) if policy else None
    )


def test_the_example_plans_match_their_specs() -> None:
    assert _check(_raw()) == []
    assert _check(_raw("plan-sft-8b.json"), _spec("sft-8b")) == []


# ---- the job -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "field,value,line",
    [
        ("method", "opd", "method opd != spec rl"),
        ("algorithm", "ppo", "algorithm ppo != spec grpo"),
        ("steps", 301, "steps 301 != spec 300"),
        ("max_nodes_per_pool", 32, "max_nodes_per_pool 32 != spec 64"),
        (
            "multi_node_training_min_gpus_per_node",
            4,
            "multi_node_training_min_gpus_per_node 4 != spec 8",
        ),
        ("budget_usd", "25000.01", "budget_usd 25000.01 != spec 25000.00"),
        ("budget_usd", None, "budget_usd None != spec 25000.00"),
    ],
)
def test_each_job_field_is_the_specs(field: str, value: object, line: str) -> None:
    raw = _raw()
    raw[field] = value
    assert _check(raw) == [f"spec_match: {line}"]


def test_a_spec_without_a_budget_wants_none(tmp_path: Path) -> None:
    """``budget: {max_usd: null}``: the plan's $25,000 is named against None."""
    spec = _spec(edit="", tmp=tmp_path)
    spec = spec.model_copy(update={"budget": spec.budget.model_copy(update={"max_usd": None})})
    assert _check(_raw(), spec) == ["spec_match: budget_usd 25000.00 != spec None"]
    raw = _raw()
    raw["budget_usd"] = None
    assert _check(raw, spec) == []


@pytest.mark.parametrize("name", ["lost_work_minutes", "restart_minutes", "checkpoint_minutes"])
def test_the_spot_model_is_the_specs_efficiency_within_1e_6(name: str) -> None:
    """5 / 10 / 3 minutes: × (1 + 5e-7) passes (both floats, close), × 1.01 is named."""
    raw = _raw()
    base = raw["spot_model"][name]
    raw["spot_model"][name] = base * (1 + 5e-7)
    assert _check(raw) == []
    raw["spot_model"][name] = base * 1.01
    assert _check(raw) == [f"spec_match: spot_model.{name} {base * 1.01} != spec {base}"]


@pytest.mark.parametrize(
    "key,value,want",
    [
        ("every_steps", 26, 25),
        ("keep_hot", 2, 3),
        ("archive_every", 5, 4),
        ("retention_days", 31, 30),
        ("rollout_log_days", 7, 14),
        ("metrics_days", 30, 365),
    ],
)
def test_the_lifecycle_is_the_specs_where_set_else_the_policys(
    key: str, value: int, want: int
) -> None:
    raw = _raw()
    raw["lifecycle"][key] = value
    assert _check(raw) == [f"spec_match: lifecycle.{key} {value} != spec {want}"]


def test_no_policy_or_no_recorded_lifecycle_skips_the_lifecycle() -> None:
    """Under no valid policy (reported by ``verify_against_spec``) neither the lifecycle nor
    storage or network are compared; a plan without a lifecycle record compares none."""
    raw = _raw()
    raw["lifecycle"]["keep_hot"] = 9
    raw["storage"][0]["gb"] *= 2
    raw["network"][1]["gb"] *= 2
    assert _check(raw, policy=False) == []
    raw = _raw()
    raw["schema_version"], raw["lifecycle"] = 1, None  # schema 1 plans record none
    assert _check(raw) == []


@pytest.mark.parametrize("pipeline,ok", [("auto", True), ("async", True), ("sync", False)])
def test_the_pipeline_is_the_specs_unless_auto(pipeline: str, ok: bool) -> None:
    spec = _spec()
    spec = spec.model_copy(update={"pipeline": pipeline})
    want = [] if ok else ["spec_match: pipeline async but the spec asks sync"]
    assert _check(_raw(), spec) == want


def test_the_weight_sync_size_is_the_policys_bf16_weights() -> None:
    """7.6156 B parameters × 2 bytes = 15.2312 GB per rollout node and step; SFT syncs none."""
    raw = _raw()
    assert raw["weight_sync_gb_per_node_step"] == 15.2312
    raw["weight_sync_gb_per_node_step"] = 15.3
    assert _check(raw) == [
        "spec_match: weight_sync_gb_per_node_step 15.3 != 15.2312 (the policy's weights in bf16)"
    ]
    raw = _raw("plan-sft-8b.json")
    raw["weight_sync_gb_per_node_step"] = 1e-5
    assert _check(raw, _spec("sft-8b")) == [
        "spec_match: weight_sync_gb_per_node_step 1e-05 != 0 (the policy's weights in bf16)"
    ]


# ---- the bookings' start -----------------------------------------------------------------------


def _booked(start: str) -> dict[str, Any]:
    """The rollout pool's allocation booked flex-start from ``start`` (only the date matters
    here)."""
    raw = _raw()
    raw["schema_version"] = 6
    raw["bookings"] = [
        {
            "pool": "rollout",
            "capacity_type": "flex_start",
            "provider": "gcp",
            "region": "us-west4",
            "instance_type": "a3-highgpu-2g",
            "nodes": 1,
            "usd_per_hour": 5.65474,
            "unit_hours": 0.0,
            "units": 0,
            "duration_hours": 16.517242694771394,
            "held_hours": 16.517242694771394,
            "rounding_hours": 0.0,
            "cost_usd": "93.40",
            "upfront": False,
            "earliest_start": start,
        }
    ]
    return raw


def _starting(day: dt.date | None) -> Any:
    spec = _spec()
    return spec.model_copy(update={"sla": spec.sla.model_copy(update={"start_after": day})})


def test_bookings_start_on_the_specs_start_date() -> None:
    day = dt.date(2026, 12, 4)
    assert _check(_booked("2026-12-04"), _starting(day)) == []
    assert _check(_booked("2026-12-05"), _starting(day)) == [
        "spec_match: booking for pool rollout starts 2026-12-05, the spec's sla.start_after is "
        "2026-12-04"
    ]
    assert _check(_booked("2026-12-05"), _starting(None)) == []


# ---- calibration records -----------------------------------------------------------------------


def _calibrated(tmp: Path, measured: float = 2000.0, factor: float = 0.8) -> tuple[Any, Any]:
    """The spec measured the update at 2,000 tokens/s/GPU in bf16 on H100; the plan records
    ``measured`` against a modelled 2,500 with ``factor`` (2,000 / 2,500 = 0.8)."""
    spec = _spec(
        edit="calibration:\n  - phase: update\n    gpu: H100\n    precision: bf16\n"
        "    tokens_per_second_per_gpu: 2000\n",
        tmp=tmp,
    )
    raw = _raw()
    raw["calibration"] = [
        {
            "phase": "update",
            "gpu": "H100",
            "measured_precision": "bf16",
            "measured_tokens_per_second_per_gpu": measured,
            "modelled_tokens_per_second_per_gpu": 2500.0,
            "factor": factor,
            "applied_to": ["bf16"],
        }
    ]
    return raw, spec


def _calibration_lines(raw: dict[str, Any], spec: Any) -> list[str]:
    return [x for x in _check(raw, spec) if "calibration" in x]


def test_a_calibration_record_is_the_specs_measurement(tmp_path: Path) -> None:
    raw, spec = _calibrated(tmp_path)
    assert _calibration_lines(raw, spec) == []
    raw, spec = _calibrated(tmp_path, measured=2000.0 * (1 + 5e-7), factor=0.8 * (1 + 5e-7))
    assert _calibration_lines(raw, spec) == []
    raw, spec = _calibrated(tmp_path, measured=2100.0, factor=0.84)
    assert _calibration_lines(raw, spec) == [
        "spec_match: calibration update/H100/bf16 2100.0 is not the spec's (2000.0)"
    ]
    raw, spec = _calibrated(tmp_path)
    raw["calibration"][0]["phase"] = "rollout"
    assert _calibration_lines(raw, spec) == [
        "spec_match: calibration rollout/H100/bf16 2000.0 is not the spec's (None)"
    ]


def test_a_calibration_factor_is_measured_over_modelled(tmp_path: Path) -> None:
    """2,000 / 2,500 = 0.8: 0.81 is named; a modelled rate of 0 is named, not divided by."""
    raw, spec = _calibrated(tmp_path, factor=0.81)
    assert _calibration_lines(raw, spec) == [
        "spec_match: calibration update/H100 factor 0.81 != measured / modelled"
    ]
    raw, spec = _calibrated(tmp_path, factor=0.8 + 9e-7)  # over 1e-6 × 0.8 = 8e-7
    assert _calibration_lines(raw, spec) == [
        f"spec_match: calibration update/H100 factor {0.8 + 9e-7} != measured / modelled"
    ]
    raw, spec = _calibrated(tmp_path)
    raw["calibration"][0]["modelled_tokens_per_second_per_gpu"] = 0.0
    assert _calibration_lines(raw, spec) == [
        "spec_match: calibration update/H100 factor 0.8 != measured / modelled"
    ]
