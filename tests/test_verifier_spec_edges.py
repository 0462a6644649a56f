"""``spec_match`` (``verify_against_spec``) lines no other test reached (docs/testing.md,
mutation testing of ``optimizer/planfile/verify.py``, 2026-12-05): a recorded replica size, the
throughput of a phase recorded with no busy time, and which plan schemas record a parallel
layout.

Each test starts from the pinned SFT example plan (``tests/golden/cli``), which matches its
spec, and edits one figure; the expected line follows from the edit alone.
"""

from __future__ import annotations

import copy

import pytest
from test_verifier_spec import _example, _match, _phase

pytestmark = pytest.mark.shipped_framework
"""The golden plans are the examples as a user plans them (framework verl==0.9 by default)."""


def test_a_recorded_replica_size_is_the_models() -> None:
    """The update runs one GPU per replica in the model; recorded as 3 it is named, with both
    sizes, and nothing else moves."""
    plan, spec = _example("sft-8b")
    assert _phase(plan, "update")["replica_gpus"] == 1
    bad = copy.deepcopy(plan)
    _phase(bad, "update")["replica_gpus"] = 3
    assert _match(bad, spec) == ["spec_match: phase update replica of 3 GPUs != model 1"]


def test_no_busy_time_gives_a_throughput_of_zero() -> None:
    """A work phase recorded with 0 busy hours has a recomputed throughput of 0 tokens per
    node-hour, so a recorded 1 token per node-hour is named next to the busy mismatch."""
    plan, spec = _example("sft-8b")
    bad = copy.deepcopy(plan)
    _phase(bad, "update")["busy_hours"] = 0.0
    _phase(bad, "update")["tokens_per_node_hour"] = 1.0
    got = _match(bad, spec)
    assert "spec_match: phase update throughput 1 tokens/node-hour != 0 (tokens / busy / " \
        "effective nodes)" in got, got
    assert [x.split(" ")[3] for x in got] == ["busy", "throughput"], got


def test_plans_from_schema_3_on_record_the_layout() -> None:
    """Schema 3 introduced the recorded parallel layout: a schema-3 plan without the update's
    layout differs from the model's; a schema-2 plan is not asked for one."""
    plan, spec = _example("sft-8b")
    for version, want_layout_line in ((3, True), (2, False)):
        bad = copy.deepcopy(plan)
        bad["schema_version"] = version
        _phase(bad, "update")["parallel_layout"] = None
        got = _match(bad, spec)
        assert any(x.startswith("spec_match: phase update layout None != model {'tp': 1")
                   for x in got) is want_layout_line, (version, got)
        assert len(got) == int(want_layout_line), (version, got)
