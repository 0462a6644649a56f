"""Static-batch generation by hand (``efficiency.generation_batching: static``;
``optimizer/demand/steps.py``: ``static_call_seconds``, ``step_model(static=True)``,
``async_model(static=True)``; ``inference.effective_batch(static=True)``;
docs/demand-model.md §4.4).

An engine that decodes sequential static batches (HF ``generate``, DeepSpeed-Chat's hybrid
engine, NeMo-Aligner's TensorRT-LLM ``GptSession`` called per rollout micro-batch) keeps every
row of a call to its end and starts the next call only when the longest response of this one
ends. The engine of ``tests/inference_engines.py`` is memory-bound here:
t_iter(b, c) = 2e-3 + 1e-9·b·c s. Responses are 64 tokens (90 %) or 192 (10 %), a histogram:
a call of 4 rows waits for E[max of 4] = 64 + 128·(1 − 0.9⁴) = 108.03 tokens, and the step's
longest of 16 draws is 192 (quantile 16/17 > 0.9). Every integral is of a line in j, which the
trapezoid rule integrates exactly: from 1 to e, (e − 1)·t(b, P + (1 + e)/2).
"""

from __future__ import annotations

import numpy as np
import pytest
from inference_engines import engine, lengths

from ptplan.demand.inference import Rollout, effective_batch
from ptplan.demand.steps import async_model, static_call_seconds, step_model
from ptplan.spec.project import ProjectSpec

P = 1000.0


def t_iter(b: float, c: float) -> float:
    return 2e-3 + 1e-9 * b * c


def rollout(sequences: float = 16.0) -> Rollout:
    return Rollout(sequences, P, lengths([64.0, 192.0], [0.9, 0.1], 192, "histogram"))


def calls_end(rows: int) -> float:
    """E[max of ``rows`` draws] as ``expected_max`` integrates it: ∫₀¹ Q(v^(1/rows)) dv on 512
    midpoints, Q = 64 up to u = 0.9 and 192 above."""
    v = (np.arange(512) + 0.5) / 512
    return 64.0 + 128.0 * float(np.mean(v ** (1.0 / rows) > 0.9))


def run(b: float, end: float) -> float:
    """Iterations 1 … end at batch b, context P + j."""
    return (end - 1.0) * t_iter(b, P + (1.0 + end) / 2.0)


def test_the_expected_longest_of_a_call() -> None:
    """E[max of n] = 64 + 128·(1 − 0.9ⁿ): 108.03 for 4 rows, 64 for one draw's mean 76.8."""
    ro = rollout()
    assert ro.lengths.expected_max(4) == pytest.approx(64 + 128 * (1 - 0.9 ** 4), rel=1e-3)
    assert ro.lengths.expected_max(4) == pytest.approx(calls_end(4), rel=1e-12)
    assert ro.lengths.expected_max(1) == pytest.approx(76.8, rel=1e-12)
    assert ro.lengths.expected_max(64) == pytest.approx(64 + 128 * (1 - 0.9 ** 64), rel=1e-3)


def test_a_call_lasts_its_longest_response_at_its_full_batch() -> None:
    """A call of 4 rows to iteration 64: 63 × t(4, 1,032.5). Nothing drains: the finished
    rows still cost their share of every iteration."""
    ro = rollout()
    assert ro.lengths.longest(16) == 192.0
    assert static_call_seconds(engine(), ro, 4.0, 64.0) == pytest.approx(
        63 * t_iter(4, P + 32.5), rel=1e-12, abs=0)


def test_sequential_calls_then_the_last_waits_for_the_steps_longest() -> None:
    """16 sequences on one replica in static calls of 4: three calls of E[max of 4] tokens,
    then the last call, whose 4 rows run to the step's longest response (192 of 16 draws).
    12 sequences: two full calls and the last. 4 (one call) and fewer: the batch keeps its
    size n to the step's longest."""
    sm = step_model(engine(), rollout(), 4, 4.0, static=True)
    call = run(4, calls_end(4))
    last = 191 * t_iter(4, P + 96.5)
    assert sm.static_call == pytest.approx(call, rel=1e-12, abs=0)
    assert float(sm.seconds(16.0)) == pytest.approx(3 * call + last, rel=1e-12, abs=0)
    assert float(sm.seconds(12.0)) == pytest.approx(2 * call + last, rel=1e-12, abs=0)
    # 9 = two calls of 4 and a last call of 1 row, to the step's longest
    assert float(sm.seconds(9.0)) == pytest.approx(2 * call + 191 * t_iter(1, P + 96.5),
                                                   rel=1e-12, abs=0)
    assert float(sm.seconds(4.0)) == pytest.approx(last, rel=1e-12, abs=0)
    assert float(sm.seconds(1.0)) == pytest.approx(191 * t_iter(1, P + 96.5), rel=1e-12,
                                                      abs=0)
    assert list(sm.preempted(np.array([1.0, 4.0, 16.0]))) == [0.0, 0.0, 0.0]


def test_static_is_never_faster_than_continuous_and_grows_with_the_load() -> None:
    """Continuous batching refills a finished row at once (the saturated regime) and drains a
    batch as responses end; a static batch does neither, so at every load it is at least as
    slow, and more sequences never take less time."""
    ro = rollout(64.0)
    cont = step_model(engine(), ro, 4, 4.0)
    stat = step_model(engine(), ro, 4, 4.0, static=True)
    n = np.arange(1.0, 65.0)
    s, c = stat.seconds(n), cont.seconds(n)
    assert np.all(s >= c - 1e-12)
    assert np.all(np.diff(s) >= -1e-12)
    # 64 rows: 15 calls of E[max of 4] and the last to 192, about 1,805 iterations of batch 4,
    # against ~64 × 76.8 / 4 = 1,229 of a refilled batch and its residual drain
    assert float(s[-1]) == pytest.approx(15 * run(4, calls_end(4)) + run(4, 192.0), rel=1e-12)
    assert float(s[-1]) > 1.25 * float(c[-1])


def test_a_continuous_batch_drains_where_a_static_one_does_not() -> None:
    """4 rows of the two-point lengths on the integer grid j = 1 … 192: continuous batching
    runs b_j = max(4·S(j), 1) rows, 4 up to j = 64 and max(0.4, 1) = 1 after; the static call
    keeps all 4 to the end. The trapezoid sums by hand."""
    ro = rollout()
    j = np.arange(1.0, 193.0)
    b = np.where(j <= 64, 4.0, 1.0)
    t = 2e-3 + 1e-9 * b * (P + j)
    drained = float(np.sum((t[1:] + t[:-1]) / 2))
    cont = step_model(engine(), ro, 4, 4.0)
    stat = step_model(engine(), ro, 4, 4.0, static=True)
    assert float(cont.seconds(4.0)) == pytest.approx(drained, rel=1e-12, abs=0)
    assert float(stat.seconds(4.0)) == pytest.approx(191 * t_iter(4, P + 96.5), rel=1e-12,
                                                     abs=0)


def test_fixed_lengths_decode_alike_in_one_call() -> None:
    """Every response 192 tokens: a batch that starts together ends together, so one static
    call and the continuous fresh drain are the same integral."""
    ro = Rollout(4.0, P, lengths([192.0], [1.0], 192, "fixed"))
    stat = step_model(engine(), ro, 4, 4.0, static=True)
    cont = step_model(engine(), ro, 4, 4.0)
    assert list(stat.drain) == pytest.approx(list(cont.drain), rel=1e-12, abs=0)


def test_a_static_batch_reserves_every_rows_cache_to_the_cap() -> None:
    """Capacity 5,000 tokens: a static batch holds ⌊5,000 / (P + 192)⌋ = 4 rows (none frees
    its cache before the call ends); continuous batching sustains ⌊5,000 / max(peak fresh
    1,064, saturated P + E[L²]/2E[L])⌋ rows."""
    ro = rollout()
    e = engine(capacity=5000.0)
    assert effective_batch(e, ro, static=True) == (4, 4.0)
    mean = 0.9 * 64 + 0.1 * 192
    age = (0.9 * 64 ** 2 + 0.1 * 192 ** 2) / (2 * mean)
    assert effective_batch(e, ro)[0] == int(5000.0 / max(1064.0, P + age))


def test_asynchronous_static_throughput_is_one_full_call_per_batch() -> None:
    """One step off policy with static calls: B sequences per call of E[max of B], so 32
    sequences take 8 calls of 4; below the cap a call of n lasts E[max of n], floored by the
    step's longest response generated alone (192 tokens at batch 1)."""
    am = async_model(engine(), rollout(32.0), 4, static=True)
    call = run(4, calls_end(4))
    assert am.per_sequence_saturated == pytest.approx(call / 4, rel=1e-12, abs=0)
    assert float(am.seconds(32.0)) == pytest.approx(8 * call, rel=1e-12, abs=0)
    assert am.work[0] == pytest.approx(run(1, 76.8), rel=1e-12, abs=0)  # one row: its mean
    # fewer rows than a call holds: never below the step's longest response alone
    assert float(am.seconds(2.0)) == pytest.approx(run(1, 192.0), rel=1e-12, abs=0)


def _spec(batching: str) -> ProjectSpec:
    return ProjectSpec.model_validate({
        "name": "static", "method": "rl", "algorithm": "ppo",
        "model": {"params_b": 70.6, "layers": 80, "hidden_size": 8192, "heads": 64,
                  "kv_heads": 8, "head_dim": 128},
        "reference_model": True,
        "data": {"steps": 10, "prompts_per_step": 1024, "samples_per_prompt": 1,
                 "prompt_tokens": 400, "response_tokens": 351, "max_response_tokens": 2048},
        "pipeline": "sync",
        "efficiency": {"max_batch_per_replica": 8, "generation_batching": batching}})


def test_the_setting_reaches_the_cluster_estimate() -> None:
    """NeMo-Aligner's 70B PPO shape on 64 + 32 H100 with rollout micro-batches of 8: static
    calls wait for the longest of each 8 responses, so the rollout takes longer than with
    in-flight batching at the same cap (the validation case
    ``nemo-aligner-ppo-llama3-70b-trtllm-64-32xh100`` runs this mechanism)."""
    from ptplan.demand.cluster import run_on_cluster

    def rollout_seconds(batching: str) -> float:
        run = run_on_cluster(_spec(batching), "H100", 96, 8, "sync",
                             {"rollout": 64, "update": 64})
        return run.phases["rollout"]

    assert rollout_seconds("static") > 1.5 * rollout_seconds("continuous")


def test_an_unknown_batching_is_refused() -> None:
    with pytest.raises(ValueError, match="generation_batching"):
        _spec("inflight")


def test_the_expected_longest_of_two_and_of_a_fixed_length() -> None:
    """Two draws: 64 + 128·(1 − 0.9²) = 88.32. A fixed length (here 100.5, whose cap rounds up
    to 101) is its own longest whatever the count."""
    from ptplan.demand.lengths import fixed

    assert rollout().lengths.expected_max(2) == pytest.approx(64 + 128 * (1 - 0.81), rel=2e-3)
    assert fixed(100.5).expected_max(8) == 100.5


def test_the_expected_longest_of_the_default_shape_against_its_closed_form() -> None:
    """The maximum-entropy shape (mean 351, cap 2,048: a truncated exponential) against
    E[max of n] = ∫₀^cap 1 − F(x)ⁿ dx with F's closed form, integrated finely here: within
    1 % for 2 and 8 rows, 2 % for 64 (the 64 quantile points flatten the far tail a little,
    upwards: a static call is never shortened by it)."""
    import math

    from ptplan.demand.lengths import _maxent_lambda, max_entropy

    d, lam = max_entropy(351.0, 2048.0), _maxent_lambda(351.0, 2048.0)
    x = np.linspace(0.0, 2048.0, 200_001)
    cdf = (1 - np.exp(-lam * x)) / (1 - math.exp(-lam * 2048.0))
    for n, tol in ((2, 0.01), (8, 0.01), (64, 0.02)):
        exact = float(np.trapezoid(1 - cdf ** n, x))
        assert exact <= d.expected_max(n) <= exact * (1 + tol), n


def test_a_share_truncated_at_the_cap_reaches_the_cap() -> None:
    """5 % of 16K-capped responses cut at the cap: the longest of n rows is the cap with
    probability 1 − 0.95ⁿ, so E[max] ≥ 16,000·(1 − 0.95ⁿ) and tends to the cap."""
    import math

    from ptplan.demand.lengths import _maxent_lambda, with_truncation

    d = with_truncation(5000.0, 16000.0, 0.05)
    for n in (2, 8, 64):
        assert 16000.0 * (1 - 0.95 ** n) <= d.expected_max(n) <= 16000.0
    assert d.expected_max(256) == pytest.approx(16000.0, rel=1e-3)
    # the mixture's closed form: F(x) = 0.95·F_body(x) below the cap, the body a truncated
    # exponential of mean (5,000 − 0.05·16,000) / 0.95 = 4,421
    lam = _maxent_lambda((5000.0 - 800.0) / 0.95, 16000.0)
    x = np.linspace(0.0, 16000.0, 400_001)
    cdf = 0.95 * (1 - np.exp(-lam * x)) / (1 - math.exp(-lam * 16000.0))
    for n in (2, 8):
        exact = float(np.trapezoid(1 - cdf ** n, x))
        assert d.expected_max(n) == pytest.approx(exact, rel=0.01), n


def test_a_call_shorter_than_two_tokens() -> None:
    """A call that ends at 1.5 tokens: half an iteration at the mean context P + 1.25."""
    assert static_call_seconds(engine(), rollout(), 4.0, 1.5) == pytest.approx(
        0.5 * t_iter(4, P + 1.25), rel=1e-12, abs=0)
