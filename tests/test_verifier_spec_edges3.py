"""``spec_match`` rules on a plan's storage, network and other-cost records
(``optimizer/planfile/rules_spec.py``, ``_storage``, ``_network``, ``_other_costs``) at their
edges, with the exact line (docs/testing.md, mutation testing of ``rules_spec.py``, issue
#27). Plans and specs as in ``test_verifier_spec_edges2.py``: the pinned GRPO example
(storage dataset 0.1572864 GB, hot checkpoints 1,276.8 GB billed 320.8460089819304
GB-months; flows weight_sync, experience 18.874368 GB, dataset_staging 0.1572864 GB; 3
archived checkpoints of 7.6156 B × 2 bytes = 15.2 GB), and the SFT and generate examples.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from test_verifier_spec_edges2 import _check, _raw, _spec

from ptplan.spec.project import load_spec

pytestmark = pytest.mark.shipped_framework
"""The golden plans are the examples as a user plans them (framework verl==0.9 by default)."""

GRPO_HOT_GB_MONTHS = next(x["gb_months"] for x in _raw()["storage"]
                          if x["data_class"] == "hot_checkpoints")
"""The GRPO golden plan's hot checkpoints (the spec recomputes the same: the example plans
match their specs, tests/test_verifier_spec.py)."""


def _storage(raw: dict[str, Any], name: str) -> dict[str, Any]:
    return next(x for x in raw["storage"] if x["data_class"] == name)


def _flow(raw: dict[str, Any], name: str) -> dict[str, Any]:
    return next(x for x in raw["network"] if x["flow"] == name)


def test_the_generate_plan_without_archived_checkpoints_matches() -> None:
    """generate-32b has no checkpoints (storage: dataset and rollout logs only)."""
    raw = _raw("plan-generate-32b.json")
    assert sorted(s["data_class"] for s in raw["storage"]) == ["dataset", "rollout_logs"]
    assert _check(raw, _spec("generate-32b")) == []


# ---- storage -----------------------------------------------------------------------------------


def test_a_storage_class_the_spec_does_not_have_is_named() -> None:
    """The SFT spec keeps no rollout logs: the GRPO plan's rollout-log item added to the SFT
    plan is named, with the spec's classes, and not costed; listed first, it does not stop
    the items after it being checked (the dataset's GB doubled: 3.2768 against 1.6384)."""
    raw = _raw("plan-sft-8b.json")
    item = copy.deepcopy(_storage(_raw(), "rollout_logs"))
    item["gb_months"] = 1.0
    raw["storage"].insert(0, item)
    assert _check(raw, _spec("sft-8b")) == [
        "spec_match: storage lists ['rollout_logs'], not data classes of the spec "
        "(archived_checkpoints, dataset, eval_outputs, hot_checkpoints, retained_checkpoints)"
    ]
    _storage(raw, "dataset")["gb"] = 3.2768
    assert _check(raw, _spec("sft-8b"))[1:] == [
        "spec_match: storage dataset 3.2768 GB (retrieval 0, ms) != spec 1.6384 GB (retrieval "
        "0, ms)"
    ]


@pytest.mark.parametrize(
    "field,value,line",
    [
        ("gb", 0.3145728, "0.314573 GB (retrieval 0, ms) != spec 0.157286 GB (retrieval 0, ms)"),
        (
            "retrieval_gb",
            1.0,
            "0.157286 GB (retrieval 1, ms) != spec 0.157286 GB (retrieval 0, ms)",
        ),
        (
            "access",
            "hours",
            "0.157286 GB (retrieval 0, hours) != spec 0.157286 GB (retrieval 0, ms)",
        ),
    ],
)
def test_a_storage_item_holds_the_specs_gb(field: str, value: object, line: str) -> None:
    raw = _raw()
    _storage(raw, "dataset")[field] = value
    assert _check(raw) == [f"spec_match: storage dataset {line}"]


def test_a_storage_item_is_billed_the_gb_months_of_the_run_on_its_tier() -> None:
    """Hot checkpoints: the plan's GB-months × (1 + 5e-7) passes, × 1.01 is named (317.454
    GB-months since issue #39's plan: 320.629 is named)."""
    raw = _raw()
    _storage(raw, "hot_checkpoints")["gb_months"] = GRPO_HOT_GB_MONTHS * (1 + 5e-7)
    assert _check(raw) == []
    _storage(raw, "hot_checkpoints")["gb_months"] = GRPO_HOT_GB_MONTHS * 1.01
    assert _check(raw) == [
        f"spec_match: storage hot_checkpoints billed {GRPO_HOT_GB_MONTHS * 1.01:.6g} GB-months "
        f"!= {GRPO_HOT_GB_MONTHS:.6g} over the run on its tier's minimum duration"
    ]


# ---- network -----------------------------------------------------------------------------------


def test_each_flow_moves_the_specs_bytes() -> None:
    """Experience 18.874368 GB × 1.01 = 19.0631 GB is named; the dataset staged in two items
    of half its GB passes (a flow's items are summed)."""
    raw = _raw()
    _flow(raw, "experience")["gb"] *= 1.01
    assert _check(raw) == ["spec_match: network experience moves 19.0631 GB, the spec 18.8744"]
    raw = _raw()
    half = dict(_flow(raw, "dataset_staging"), gb=0.1572864 / 2)
    raw["network"] = [x for x in raw["network"] if x["flow"] != "dataset_staging"]
    raw["network"] += [half, dict(half)]
    assert _check(raw) == []


def test_the_flows_are_the_specs() -> None:
    """Without its dataset staging the flows are named, sorted; weight sync is not a flow
    here (it has its own rule)."""
    raw = _raw()
    raw["network"] = [x for x in raw["network"] if x["flow"] != "dataset_staging"]
    assert _check(raw) == [
        "spec_match: network flows ['experience'] != the spec's ['dataset_staging', 'experience']"
    ]


def test_experience_flows_only_with_a_rollout_pool() -> None:
    """The rollout pool renamed: no experience is expected, so the recorded one is named."""
    raw = _raw()
    next(p for p in raw["pools"] if p["name"] == "rollout")["name"] = "generation"
    assert _check(raw) == [
        "spec_match: network flows ['dataset_staging', 'experience'] != the spec's "
        "['dataset_staging']"
    ]


def test_checkpoint_copies_move_every_archived_and_the_final_checkpoint(tmp_path: Path) -> None:
    """``checkpoints.copy_to``: the 3 archived checkpoints and the final one, 4 × 15.2312 GB =
    60.9248 GB; a plan without the flow, or with 60 GB, is named."""
    spec = _spec(edit="", tmp=tmp_path)
    spec = spec.model_copy(
        update={"checkpoints": spec.checkpoints.model_copy(update={"copy_to": "gcp:us-central1"})}
    )
    raw = _raw()
    assert _check(raw, spec) == [
        "spec_match: network flows ['dataset_staging', 'experience'] != the spec's "
        "['checkpoint_copies', 'dataset_staging', 'experience']"
    ]
    raw["network"].append(dict(_flow(raw, "dataset_staging"), flow="checkpoint_copies", gb=60.9248))
    assert _check(raw, spec) == []
    _flow(raw, "checkpoint_copies")["gb"] = 60.0
    assert _check(raw, spec) == [
        "spec_match: network checkpoint_copies moves 60 GB, the spec 60.9248"]


# ---- other costs -------------------------------------------------------------------------------

OTHER = "other_costs:\n  data_collection_usd: 5000\n  ops_usd_per_hour: 25\n"


def _with_other(*lines: dict[str, Any]) -> dict[str, Any]:
    raw = _raw()
    raw["schema_version"] = 6
    raw["other_costs"] = list(lines)
    raw["other_cost_usd"] = f"{sum(float(x['cost_usd']) for x in lines):.2f}"
    return raw


def _line(name: str, basis: str, quantity: float, rate: float) -> dict[str, Any]:
    return {
        "name": name,
        "basis": basis,
        "quantity": quantity,
        "usd_per_unit": rate,
        "cost_usd": f"{quantity * rate:.2f}",
    }


COLLECTION = _line("data_collection", "fixed", 1.0, 5000.0)
OPS = _line("ops", "per_hour", 16.517242694771394, 25.0)


def test_other_costs_are_the_specs_lines(tmp_path: Path) -> None:
    """$5,000 of data collection (fixed, 1) and $25/h of ops (per hour: its quantity, the run's
    hours, is ``check_other_costs``' to compare, so 1 h passes here)."""
    spec = _spec(edit=OTHER, tmp=tmp_path)
    assert _check(_with_other(COLLECTION, OPS), spec) == []
    assert _check(_with_other(COLLECTION, dict(OPS, quantity=1.0)), spec) == []
    assert _check(_raw(), spec) == [
        "spec_match: the spec has other_costs, the plan does not list them"
    ]
    assert _check(_with_other(COLLECTION, OPS)) == [
        "spec_match: the plan lists other costs, the spec has none"
    ]


def test_an_other_cost_line_missing_or_unlike_the_specs_is_named(tmp_path: Path) -> None:
    spec = _spec(edit=OTHER, tmp=tmp_path)
    assert _check(_with_other(COLLECTION), spec) == [
        "spec_match: other costs ['data_collection'] != spec ['data_collection', 'ops']"
    ]
    assert _check(_with_other(COLLECTION, dict(OPS, usd_per_unit=26.0)), spec) == [
        "spec_match: other cost ops per_hour $26/unit != spec per_hour $25/unit"
    ]
    assert _check(_with_other(dict(COLLECTION, basis="per_sample"), OPS), spec) == [
        "spec_match: other cost data_collection per_sample $5000/unit != spec fixed $5000/unit"
    ]
    assert _check(_with_other(dict(COLLECTION, quantity=2.0), OPS), spec) == [
        "spec_match: other cost data_collection quantity 2 != spec 1"
    ]


def _network_lines(raw: dict[str, Any], spec: Any) -> list[str]:
    return [x for x in _check(raw, spec) if x.startswith("spec_match: network")]


def _copy_to(spec: Any) -> Any:
    return spec.model_copy(
        update={"checkpoints": spec.checkpoints.model_copy(update={"copy_to": "aws:us-east-1"})}
    )


def test_a_job_without_checkpoints_copies_none() -> None:
    """generate-32b writes no checkpoints (none archived, no final one): with ``copy_to`` set
    there is still no checkpoint_copies flow."""
    assert _network_lines(_raw("plan-generate-32b.json"), _copy_to(_spec("generate-32b"))) == []


def test_lora_checkpoint_copies_under_one_gb_are_a_flow(tmp_path: Path) -> None:
    """A LoRA (rank 8) adapter's 4 copies weigh well under 1 GB: still a flow the plan must
    list."""
    text = (Path(__file__).resolve().parent.parent / "examples" / "grpo-7b.yaml").read_text(
        encoding="utf-8"
    )
    assert "  finetune: full\n" in text
    path = tmp_path / "grpo-lora.yaml"
    path.write_text(
        text.replace("  finetune: full\n", "  finetune: lora\n  lora_rank: 8\n"), encoding="utf-8"
    )
    assert _network_lines(_raw(), _copy_to(load_spec(str(path)))) == [
        "spec_match: network flows ['dataset_staging', 'experience'] != the spec's "
        "['checkpoint_copies', 'dataset_staging', 'experience']"
    ]


def test_under_one_gb_of_experience_is_a_flow() -> None:
    """At 10 steps the GRPO run moves 10 × 18.874368 / 300 = 0.6291456 GB of experience (256
    prompts × 8 samples × 2,560 tokens × 12 bytes a step): still expected, so the recorded
    18.87 GB is named against it (the dataset staged shrinks too: 10 × 256 prompts × 512
    tokens × 4 bytes = 0.00524288 GB)."""
    spec = _spec()
    spec = spec.model_copy(update={"data": spec.data.model_copy(update={"steps": 10})})
    assert _network_lines(_raw(), spec) == [
        "spec_match: network dataset_staging moves 0.157286 GB, the spec 0.00524288",
        "spec_match: network experience moves 18.8744 GB, the spec 0.629146",
    ]
