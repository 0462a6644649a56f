"""Independent oracles for the demand of the job shapes added after the 2026-12-03 mutation
sample of ``optimizer/demand/model.py`` (docs/testing.md, its whole-module run of
2026-12-05): a sampling-only ``generate`` job and an agent's multi-turn episodes.

Token counts are worked out by hand from the example files cited and the rules of the
module's docstrings (prefix caching re-prefills (P mod 16) + 16 tokens of each further sample;
an agent's (K − 1)·o observation tokens are in every trained sequence, prefilled once each, and
a decoding turn sees half of them on average). Everything is built inside each test.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from conftest import EXAMPLES

from ptplan.demand import lengths as ld
from ptplan.demand.model import build_demand, response_lengths
from ptplan.spec.project import load_spec, parse_spec


def _demand(name: str) -> Any:
    return build_demand(load_spec(str(EXAMPLES / f"{name}.yaml")))


def _shape(d: Any) -> list[tuple[str, str, str, str]]:
    return [(p.phase, p.name, p.role, p.kind) for p in d.parts]


def test_a_generate_job_is_one_offline_batch() -> None:
    """examples/generate-32b.yaml: 50,000 prompts × 4 samples of 512 prompt tokens, 1,536
    response tokens on average, at most 4,096. Prefill with prefix caching: 50,000 × (1 + 3 ×
    16/512) = 54,687.5 sequences × 512 = 28,000,000 tokens; decode 200,000 × 1,536 =
    307,200,000 tokens in one run of all 200,000 sequences, each at most 512 + 4,096 = 4,608
    tokens, its mean context 512 + the response lengths' mean age. Nothing trains: one step,
    no checkpoint, no weight sync, no eval."""
    d = _demand("generate-32b")
    assert _shape(d) == [("rollout", "prefill", "policy", "prefill"),
                         ("rollout", "decode", "policy", "decode")]
    pre, dec = d.parts
    assert (pre.tokens, pre.seq_tokens) == (28_000_000, 512)
    assert (dec.tokens, dec.seq_tokens, dec.run_sequences, dec.runs, dec.prompt_tokens) == (
        307_200_000, 4608, 200_000, 1, 512)
    assert dec.lengths is not None and dec.lengths.cap == 4096
    assert dec.context_tokens == pytest.approx(512 + dec.lengths.mean_age, rel=1e-15, abs=0)
    assert 0 < dec.lengths.mean_age < 4096
    assert (d.steps, d.checkpoints, d.weight_sync_gb_per_step, d.eval_runs) == (1, 0, 0.0, 0)


def test_an_agents_observations_are_in_every_sequence() -> None:
    """examples/agentic-swe-rl.yaml: 200 steps × 64 prompts × 8 samples = 102,400 episodes of
    P = 2,048 prompt tokens, K = 24 turns × 512 = 12,288 generated, (K − 1) × 768 = 17,664
    observation tokens. Prefill: 200 × 64 × (1 + 7 × 16/2,048) = 13,500 prompt sequences ×
    2,048 + 102,400 × 17,664 observations = 1,836,441,600 tokens. Decode: 102,400 × 12,288
    tokens in 200 runs of 512 sequences, each at most 2,048 + 24,576 + 17,664 = 44,288 tokens,
    its prompt 2,048 + 17,664 / 2 = 10,880 (half the observations on average), its context that
    plus the mean age. Trained sequences: 2,048 + 12,288 + 17,664 = 32,000 tokens, 102,400 of
    them = 3,276,800,000 tokens for the old log-probs and the update each."""
    d = _demand("agentic-swe-rl")
    assert _shape(d) == [("rollout", "prefill", "policy", "prefill"),
                         ("rollout", "decode", "policy", "decode"),
                         ("update", "old_logprob", "policy", "forward"),
                         ("update", "actor", "policy", "train")]
    pre, dec, old, actor = d.parts
    assert (pre.tokens, pre.seq_tokens) == (1_836_441_600, 2048)
    assert (dec.tokens, dec.seq_tokens, dec.run_sequences, dec.runs, dec.prompt_tokens) == (
        102_400 * 12_288, 44_288, 512, 200, 10_880)
    assert dec.lengths is not None
    assert dec.context_tokens == pytest.approx(10_880 + dec.lengths.mean_age, rel=1e-15, abs=0)
    for p in (old, actor):
        assert (p.tokens, p.seq_tokens, p.max_seq_tokens) == (3_276_800_000, 32_000, 44_288)
    assert d.weight_sync_gb_per_step == pytest.approx(32.7621 * 2, rel=1e-15, abs=0)


def test_a_truncated_share_is_passed_to_the_lengths() -> None:
    """``data.response_length.truncated_share`` (a share of responses cut at the cap) shapes
    the response lengths: the GRPO example with 10 % truncated is the distribution of mean
    2,048 and cap 8,192 with that share at the cap, not the one without."""
    raw = yaml.safe_load((EXAMPLES / "grpo-7b.yaml").read_text(encoding="utf-8"))
    assert (raw["data"]["response_tokens"], raw["data"]["max_response_tokens"]) == (2048, 8192)
    raw["data"]["response_length"] = {"truncated_share": 0.1}
    got = response_lengths(parse_spec(raw, "truncated"))
    want = ld.with_truncation(2048.0, 8192.0, 0.1)
    plain = ld.with_truncation(2048.0, 8192.0, 0.0)
    assert got.mean_age == want.mean_age != plain.mean_age
