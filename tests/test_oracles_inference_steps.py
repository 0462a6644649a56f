"""A rollout step's decode on one replica by hand (``optimizer/demand/steps.py`` and
``inference.py``: ``effective_batch``, ``step_model`` and :class:`StepModel`,
``single_stream_seconds``, the drain integral and the load table; docs/demand-model.md §4;
issue #27, the survivors of the whole-module mutation run, docs/testing.md).

The engine of ``tests/inference_engines.py`` is memory-bound in every case here:
t_iter(b, c) = 2e-3 + 1e-9·b·c s. Every response is 192 tokens long (or 1.5, for the floors),
so S(j) = 1 up to the end and the iterations j = 1 … 192 are whole numbers: the trapezoid
rule is exact on t_iter, linear in the context, and each integral is worked out in closed form.
"""

from __future__ import annotations

import numpy as np
import pytest
from inference_engines import engine, lengths

from ptplan.demand.inference import Rollout, effective_batch
from ptplan.demand.steps import (
    StepModel,
    _drain_seconds,
    _grid_step,
    single_stream_seconds,
    step_model,
)

P = 1000.0
"""Prompt tokens."""


def t_iter(b: float, c: float) -> float:
    """The engine's iteration by hand: 2 GB + b·c·1,000 B over 1e12 B/s."""
    return 2e-3 + 1e-9 * b * c


def fixed_rollout(length: float) -> Rollout:
    return Rollout(8.0, P, lengths([length], [1.0], int(np.ceil(length)), "fixed"))


def test_fresh_drain_saturated_iteration_residual_and_recompute() -> None:
    """Batch 1, 192-token responses after 1,000 prompt tokens.
    Fresh drain: iterations 1 … 192 at context P + j: 191 × t(1, 1,096.5) (the trapezoid of a
    line). Saturated iteration: t(1, P + E[L²]/2E[L] = 1,096). Residual drain: batch
    max(1 × (192 − j)/192, 1) = 1 at context min(P + 96 + j, P + 192): 1,096 + j up to j = 96,
    then 1,192: 191 × 2 ms + 1e-9 × (95 × 1,144.5 + 96 × 1,192). Re-prefill per preempted
    sequence: P + 96."""
    sm = step_model(engine(), fixed_rollout(192.0), 1, 1.0)
    assert list(sm.n_grid) == [1.0]
    assert sm.drain[0] == pytest.approx(191 * t_iter(1, 1096.5), rel=1e-12, abs=0)
    assert sm.saturated_iter == pytest.approx(t_iter(1, 1096.0), rel=1e-12, abs=0)
    assert sm.residual_drain == pytest.approx(191 * 2e-3 + 1e-9 * (95 * 1144.5 + 96 * 1192.0),
                                              rel=1e-12, abs=0)
    assert (sm.batch, sm.mean_len, sm.mean_age, sm.admitted) == (1, 192.0, 96.0, 1.0)
    assert sm.recompute_tokens_per_seq == pytest.approx(1096.0)


def test_fresh_drain_at_every_tabulated_load() -> None:
    """Batch 4: each tabulated load n (from 1 to 4) drains 191 iterations at batch n:
    191 × t(n, 1,096.5)."""
    sm = step_model(engine(), fixed_rollout(192.0), 4, 6.0)
    assert sm.n_grid[0] == 1.0 and sm.n_grid[-1] == 4.0
    assert list(sm.drain) == pytest.approx([191 * t_iter(n, 1096.5) for n in sm.n_grid],
                                           rel=1e-12, abs=0)


def test_single_stream_is_the_longest_response_alone() -> None:
    """Batch 1 from iteration 1 to 192 at context P + j: 191 × t(1, 1,096.5)."""
    assert single_stream_seconds(engine(), fixed_rollout(192.0)) == pytest.approx(
        191 * t_iter(1, 1096.5), rel=1e-12, abs=0)


def test_responses_shorter_than_two_tokens() -> None:
    """1.5-token responses: the iterations run from 1 to 1.5 (not to 2), half an iteration at
    the mean context P + 1.25, alone and as the batch-1 drain."""
    ro = fixed_rollout(1.5)
    assert single_stream_seconds(engine(), ro) == pytest.approx(0.5 * t_iter(1, P + 1.25),
                                                                 rel=1e-12, abs=0)
    sm = step_model(engine(), ro, 1, 1.0)
    assert sm.drain[0] == pytest.approx(0.5 * t_iter(1, P + 1.25), rel=1e-12, abs=0)


def test_drain_on_one_and_two_iterations() -> None:
    """One grid point: the iteration time there, per start (2 and 3 sequences at context 100:
    2 ms + 0.2 µs and 2 ms + 0.3 µs). Two points j = 1, 3 at contexts 100 and 300: the
    trapezoid 2 × (t(b, 100) + t(b, 300)) / 2."""
    e = engine()
    one = _drain_seconds(e, np.array([2.0, 3.0]), np.array([1.0]), np.array([5.0]),
                         np.array([100.0]))
    assert list(one) == pytest.approx([t_iter(2, 100), t_iter(3, 100)], rel=1e-12, abs=0)
    two = _drain_seconds(e, 2.0, np.array([1.0, 1.0]), np.array([1.0, 3.0]),
                         np.array([100.0, 300.0]))
    assert list(two) == pytest.approx([t_iter(2, 100) + t_iter(2, 300)], rel=1e-12, abs=0)
    # below one sequence still generating, the batch counts as one
    half = _drain_seconds(e, 1.0, np.array([0.5]), np.array([1.0]), np.array([100.0]))
    assert list(half) == pytest.approx([t_iter(1, 100)], rel=1e-12, abs=0)


def test_grid_step_rounds_up_to_the_next_tabulated_load() -> None:
    """Loads 1, 2, 4: 0.5 and 1 → index 0; 1.5 and 2 (and 2 by a relative 5e-14) → 1; 3 and
    4 → 2; beyond the last, the last."""
    grid = np.array([1.0, 2.0, 4.0])
    n = np.array([0.5, 1.0, 1.5, 2.0, 2.0000000000001, 3.0, 4.0, 8.0])
    assert list(_grid_step(grid, n)) == [0, 0, 1, 1, 1, 2, 2, 2]


def _table(**changes: float) -> StepModel:
    """Drains 1, 1.5, 2.5 s at 1, 2, 4 sequences; batch 4; 10 ms per saturated iteration;
    residual 2 s; mean length 100, mean age 60; 6 sequences admitted."""
    base = {"saturated_iter": 0.01, "residual_drain": 2.0, "mean_len": 100.0,
            "mean_age": 60.0, "recompute_tokens_per_seq": 0.0, "admitted": 6.0}
    return StepModel(np.array([1.0, 2.0, 4.0]), np.array([1.0, 1.5, 2.5]), 4,
                     **{**base, **changes})


def test_step_seconds_below_and_at_the_batch_cap() -> None:
    """Up to the cap a load is rounded up to the next tabulated size (an upper bound): 0.5 and
    1 → 1 s, 1.5 and 2 → 1.5 s, 3 and 4 → 2.5 s."""
    sm = _table()
    assert list(sm.seconds(np.array([0.5, 1.0, 1.5, 2.0, 3.0, 4.0]))) == pytest.approx(
        [1.0, 1.0, 1.5, 1.5, 2.5, 2.5])
    # at the cap the fresh drain holds even where the saturated formula says more (3 s)
    assert float(_table(mean_len=10.0, mean_age=20.0, residual_drain=3.0).seconds(4.0)) \
        == pytest.approx(2.5)


def test_step_seconds_beyond_the_batch_cap() -> None:
    """(n·μ − B·age) tokens at full batch, then the residual drain: n = 10 → (1,000 − 240) / 4
    × 10 ms + 2 s = 3.9 s; n = 5 → 260 / 4 × 10 ms + 2 s = 2.65 s. Below 2B = 8 the step is
    at most the line from the fresh drain at B (2.5 s) to the saturated figure at 2B
    ((800 − 240) / 4 × 10 ms + 2 s = 3.4 s): at n = 5, 2.5 + 0.9 / 4 = 2.725 s, above 2.65 s.
    With μ = 10, age 20 the saturated tokens are 0 up to n = 8 (80 = 80): the residual alone,
    3 s, and the line from 2.5 s to 3 s gives n = 5 2.625 s; with a residual of 0.5 s the fresh
    drain at the cap (2.5 s) floors it."""
    assert list(_table().seconds(np.array([10.0, 5.0]))) == pytest.approx([3.9, 2.65])
    assert float(_table(mean_len=10.0, mean_age=20.0, residual_drain=3.0).seconds(5.0)) \
        == pytest.approx(2.625, rel=1e-12, abs=0)
    assert float(_table(mean_len=10.0, mean_age=20.0, residual_drain=3.0).seconds(8.0)) \
        == pytest.approx(3.0, rel=1e-12, abs=0)
    assert float(_table(mean_len=10.0, mean_age=20.0, residual_drain=0.5).seconds(5.0)) \
        == pytest.approx(2.5)


def test_step_seconds_have_no_jump_at_the_batch_cap() -> None:
    """One sequence more than the batch is not a saturated engine: the step rises from the
    fresh drain at B continuously (a heavier tail that lowers B by one sequence cannot make a
    step 26 % longer, as the mode switch did before issue #39's property run found it)."""
    sm = _table(mean_len=10.0, mean_age=20.0, residual_drain=3.0)
    at_cap = float(sm.seconds(4.0))
    assert float(sm.seconds(4.0 + 1e-6)) == pytest.approx(at_cap, abs=1e-6)
    ns = np.linspace(4.0, 12.0, 81)
    t = sm.seconds(ns)
    assert np.all(np.diff(t) >= -1e-12)


def test_preempted_sequences() -> None:
    """Admitted 6 against a batch of 4: none preempted up to 4 sequences, n − 4 up to 6, then
    2."""
    assert list(_table().preempted(np.array([2.0, 4.0, 5.0, 10.0]))) == [0.0, 0.0, 1.0, 2.0]


def test_effective_batch_at_an_interior_kv_peak() -> None:
    """90 % of responses are 100 tokens, 10 % 191 (the cap): S(j)·(P + j) peaks at j = 100 with
    1,100 tokens (then 0.1 × 1,191). The saturated context P + E[L²]/2E[L] = 1,000 +
    12,648.1 / 218.2 = 1,057.97 is lower. 549,999 tokens of KV hold ⌊549,999 / 1,100⌋ = 499
    sequences; the prompts let in 549,999 / 1,000 = 549.999 at once."""
    dist = lengths([100.0, 191.0], [0.9, 0.1], 191, "histogram")
    e = engine(capacity=549_999.0, batch_cap=1000)
    b, admitted = effective_batch(e, Rollout(64.0, P, dist))
    assert b == 499
    assert admitted == pytest.approx(549.999, rel=1e-12, abs=0)
    # the engine's cap binds both
    assert effective_batch(engine(capacity=549_999.0, batch_cap=256),
                           Rollout(64.0, P, dist)) == (256, 256)


def test_effective_batch_floors_contexts_at_one_token() -> None:
    """No prompt and responses of 1 or 2 tokens: S(j)·j ≤ 1 and the saturated context 2.2 / 2.8
    are below one token, so 199 tokens hold 199 sequences and the prompts (floored at one
    token) let in 199."""
    dist = lengths([1.0, 2.0], [0.6, 0.4], 2, "histogram")
    assert effective_batch(engine(capacity=199.0, batch_cap=1000),
                           Rollout(4.0, 0.0, dist)) == (199, 199.0)


def test_effective_batch_with_one_token_of_kv() -> None:
    """One token of KV: no sequence fits, but a one-token prompt is let in (1 / 1); none at
    all with no KV."""
    dist = lengths([4.0], [1.0], 4, "fixed")
    assert effective_batch(engine(capacity=1.0), Rollout(4.0, 1.0, dist)) == (0, 1.0)
    assert effective_batch(engine(capacity=0.0), Rollout(4.0, 1.0, dist)) == (0, 0.0)
