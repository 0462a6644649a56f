"""The demand model's token counts, sizes and stalls worked out by hand from the example specs
and the documented formulas (``optimizer/demand/model.py``, ``docs/demand-model.md``): what
each phase must process before any rate is applied."""

from __future__ import annotations

import math

import pytest
from conftest import EXAMPLES

from ptplan.demand.model import build_demand
from ptplan.planner.candidates import layouts
from ptplan.spec.project import load_spec


@pytest.fixture(scope="module")
def grpo():
    return build_demand(load_spec(str(EXAMPLES / "grpo-7b.yaml")))


def _tokens(demand, phase: str, kind: str, role: str = "policy") -> float:
    return sum(p.tokens for p in demand.parts if (p.phase, p.kind, p.role) == (phase, kind, role))


def test_grpo_tokens_by_hand(grpo) -> None:
    """examples/grpo-7b.yaml: 300 steps × 256 prompts × 8 samples; prompts 512 tokens,
    responses 2,048 on average; eval every 25 steps on 500 prompts × 4 samples × 2,048."""
    seqs = 300 * 256 * 8
    assert _tokens(grpo, "rollout", "decode") == seqs * 2048
    # prefix caching: one full prefill per prompt, each further sample re-prefills the last
    # partial 16-token block plus one block: 512 + 7 × (512 mod 16 + 16) = 624 per prompt
    assert _tokens(grpo, "rollout", "prefill") == 300 * 256 * (512 + 7 * 16)
    # the reference model scores, and the update trains on, every sampled sequence
    assert _tokens(grpo, "scoring", "forward", "reference") == seqs * (512 + 2048)
    assert _tokens(grpo, "update", "train") == seqs * (512 + 2048)
    assert _tokens(grpo, "update", "forward") == seqs * (512 + 2048)  # old log-probs
    assert grpo.eval_runs == 300 // 25
    assert _tokens(grpo, "eval", "decode") == 12 * 500 * 4 * 2048
    assert grpo.primary_tokens("rollout") == seqs * 2048
    assert grpo.primary_tokens("update") == seqs * (512 + 2048)


def test_grpo_sizes_and_stalls_by_hand(grpo) -> None:
    """7.6156 B params: weights in bf16 = 15.2312 GB sent to each rollout node per step; a
    checkpoint with optimizer state = 7.6156 × (2 + 16 − 4) = 106.6184 GB, 300 / 25 = 12 of
    them written at 2 GB/s: 12 × 106.6184 / 2 / 3,600 = 0.178 h of stall; the weight sync at
    10 GB/s stalls the rollout pool 300 × 15.2312 / 10 / 3,600 = 0.127 h; colocated, the refit
    at 17.8 GB/s stalls the one pool 300 × 15.2312 / 17.8 / 3,600 = 0.0713 h besides."""
    assert grpo.weight_sync_gb_per_step == pytest.approx(15.2312, rel=1e-12)
    assert grpo.checkpoint_gb == pytest.approx(106.6184, rel=1e-12)
    assert grpo.checkpoints == 12
    assert grpo.checkpoint_stall_hours == pytest.approx(12 * 106.6184 / 2 / 3600, rel=1e-12)
    lay = next(x for x in layouts(grpo) if x.mode == "sync")
    rollout = next(p for p in lay.pools if p.name == "rollout")
    update = next(p for p in lay.pools if p.name == "update")
    assert rollout.stall_hours == pytest.approx(300 * 15.2312 / 10 / 3600, rel=1e-12)
    assert update.stall_hours == pytest.approx(12 * 106.6184 / 2 / 3600, rel=1e-12)
    colo = next(x for x in layouts(grpo) if x.mode == "colocated").pools[0]
    refit = 300 * 15.2312 / 17.8 / 3600
    assert colo.stall_hours == pytest.approx(12 * 106.6184 / 2 / 3600 + refit, rel=1e-12)
    assert dict(colo.stall_parts)["weight_sync"] == pytest.approx(refit, rel=1e-12)
    asyn = next(x for x in layouts(grpo) if x.mode == "async")
    assert asyn.fill_fraction == pytest.approx(1 / 300)


def test_sft_tokens_by_hand() -> None:
    """examples/sft-8b.yaml: 200,000 examples × 2,048 tokens × 3 epochs; 600,000 / 256 =
    2,343.75 → 2,344 steps; eval every 500 steps (4 runs) on 1,000 prompts × 512 tokens;
    a checkpoint every 500 steps (4) of 8.0303 × 14 GB."""
    d = build_demand(load_spec(str(EXAMPLES / "sft-8b.yaml")))
    assert _tokens(d, "update", "train") == 200_000 * 2048 * 3
    assert d.steps == math.ceil(200_000 * 3 / 256)
    assert d.eval_runs == d.steps // 500 == 4
    assert _tokens(d, "eval", "decode") == 4 * 1000 * 512
    assert d.checkpoints == 4
    assert d.checkpoint_gb == pytest.approx(8.0303 * 14, rel=1e-12)
