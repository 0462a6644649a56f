"""The demand model's uncertainty in ``plan --risk`` (ptplan.risk.uncertainty): the lognormal
matched to the interval, the time-rescaled simulation (exact against a run whose every busy
time is scaled), monotonicity in the interval's width, determinism, the attribution."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from statistics import NormalDist
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_simulate import L, R, run_model

from ptplan.core.errors import InputError
from ptplan.core.fit import model_interval
from ptplan.risk.model import PoolModel, RunModel, scaled
from ptplan.risk.runner import run_trials
from ptplan.risk.tighten import Candidate, RiskOptions, sources
from ptplan.risk.uncertainty import (
    attribution,
    attribution_sentence,
    lognormal_of,
    model_only,
    plan_time_interval,
)

ROOT = Path(__file__).resolve().parents[1]


def _with(model: RunModel, low: float, high: float) -> RunModel:
    mu, sigma = lognormal_of(low, high)
    return replace(model, time_mu=mu, time_sigma=sigma, time_interval=(0.8, low, high, "t"))


def _spotty(mode: str = "sync", ckpt: str = "young") -> RunModel:
    pools = (PoolModel("rollout", 2, 5.0, False, 1, 2 * 0.08),
             PoolModel("scoring", 4, 4.5, False, 1, 4 * 0.05),
             PoolModel("update", 2, 5.2, True, 1, 2 * 0.04))
    return run_model(pools, mode=mode, steps=50, checkpoint_mode=ckpt)


def test_lognormal_matches_the_interval_quantiles() -> None:
    iv = model_interval("rl")
    mu, sigma = lognormal_of(iv.low, iv.high, iv.level)
    dist = NormalDist(mu, sigma)
    assert math.exp(dist.inv_cdf(0.1)) == pytest.approx(iv.low, rel=1e-9)
    assert math.exp(dist.inv_cdf(0.9)) == pytest.approx(iv.high, rel=1e-9)
    res = run_trials(_with(_spotty(), iv.low, iv.high), 40_000, 1)
    assert np.quantile(res.time_multiplier, 0.1) == pytest.approx(iv.low, rel=0.03)
    assert np.quantile(res.time_multiplier, 0.9) == pytest.approx(iv.high, rel=0.03)


@pytest.mark.parametrize("low,high", [(0.0, 1.0), (2.0, 1.0), (0.5, math.inf),
                                      (math.nan, 1.0)])
def test_lognormal_of_refuses_a_non_interval(low: float, high: float) -> None:
    with pytest.raises(InputError):
        lognormal_of(low, high)


def _time_scaled(model: RunModel, c: float) -> RunModel:
    """The same run with every busy time × c: what a job c times as long is."""
    pools = tuple(replace(p, base_busy_hours=p.base_busy_hours * c) for p in model.pools)
    m0 = model.base_makespan_hours * c
    return replace(model, pools=pools, base_makespan_hours=m0, plan_makespan_hours=m0,
                   plan_total_usd=model.usd_per_hour * m0)


@pytest.mark.parametrize("mode,ckpt", [("sync", "young"), ("sync", "lifecycle"),
                                       ("colocated", "young"), ("async", "lifecycle")])
@pytest.mark.parametrize("c", [0.6, 1.7, 3.0])
def test_a_constant_multiplier_is_the_time_scaled_run(mode: str, ckpt: str, c: float) -> None:
    """σ = 0, μ = ln c: every trial's job takes c × as long, exposed c × as long to the same
    interruptions (the same seed): the simulation in base progress units gives exactly the run
    whose busy times are all × c."""
    base = _spotty(mode, ckpt)
    got = run_trials(replace(base, time_mu=math.log(c)), 3000, 7)
    want = run_trials(_time_scaled(base, c), 3000, 7)
    assert np.allclose(got.makespan_hours, want.makespan_hours, rtol=1e-9, atol=1e-9)
    assert np.allclose(got.cost_usd, want.cost_usd, rtol=1e-9, atol=1e-6)
    assert np.array_equal(got.interruptions, want.interruptions)
    assert (got.interruptions > 0).any()


def test_no_uncertainty_is_the_spot_simulation_bit_for_bit() -> None:
    base = scaled(_spotty(), 3.0)
    a = run_trials(base, 4000, 11)
    b = run_trials(replace(base, time_mu=0.0, time_sigma=0.0, time_interval=None), 4000, 11)
    assert a.makespan_hours.tobytes() == b.makespan_hours.tobytes()
    assert a.cost_usd.tobytes() == b.cost_usd.tobytes()
    assert np.all(a.time_multiplier == 1.0)


def test_seeded_and_independent_of_workers() -> None:
    model = _with(_spotty("async", "lifecycle"), 0.7, 1.9)
    a = run_trials(model, 5000, 3)
    b = run_trials(model, 5000, 3, workers=2)
    assert a.makespan_hours.tobytes() == b.makespan_hours.tobytes()
    assert a.cost_usd.tobytes() == b.cost_usd.tobytes()
    c = run_trials(model, 5000, 4)
    assert a.makespan_hours.tobytes() != c.makespan_hours.tobytes()


@settings(max_examples=40, deadline=None)
@given(low=st.floats(0.3, 1.2), high=st.floats(1.0, 3.0), widen=st.floats(1.0, 2.0),
       seed=st.integers(0, 2**32 - 1), q=st.floats(0.6, 0.995))
def test_a_wider_interval_never_lowers_the_model_quantile(low: float, high: float,
                                                          widen: float, seed: int,
                                                          q: float) -> None:
    """Widening the interval about its centre (same μ, σ × w ≥ σ, the same seed) raises every
    multiplier above the median; the job's cost and time rise with its multiplier, so their
    pNN (NN ≥ 60: a sample quantile above the sample median) never fall."""
    high = max(high, low * 1.01)
    base = _spotty()
    mu, sigma = lognormal_of(low, high)
    a = run_trials(replace(base, time_mu=mu, time_sigma=sigma), 500, seed)
    b = run_trials(replace(base, time_mu=mu, time_sigma=sigma * widen), 500, seed)
    for x, y in zip(model_only(base, a.time_multiplier), model_only(base, b.time_multiplier),
                    strict=True):
        assert np.quantile(y, q) >= np.quantile(x, q) - 1e-9


@pytest.mark.parametrize("kind", ["sync", "async", "colocated"])
@pytest.mark.parametrize("q", [0.9, 0.99])
def test_a_wider_interval_never_lowers_the_pnn_cost(kind: str, q: float) -> None:
    """With spot interruptions as well: a wider interval (the same seed) never lowers the pNN
    of cost or makespan, from the plan's own interval to 1.5 times its spread (at twice the
    spread of the suite's RL interval, ×0.61–2.01, a trial's job runs ×30 and more, past the
    simulator's cap of 4,096 interruptions of one stream: an error by design, not a pNN)."""
    base = _spotty(kind, "lifecycle" if kind == "async" else "young")
    iv = model_interval("rl")
    mu, sigma = lognormal_of(iv.low, iv.high)
    last = None
    for w in (0.0, 0.5, 1.0, 1.25, 1.5):
        res = run_trials(replace(base, time_mu=mu, time_sigma=sigma * w), 4000, 5)
        now = (float(np.quantile(res.cost_usd, q)), float(np.quantile(res.makespan_hours, q)))
        if last is not None:
            assert now[0] >= last[0] - 1e-6 and now[1] >= last[1] - 1e-9
        last = now


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), c=st.floats(1.0, 3.0), d=st.floats(1.0, 2.0))
def test_a_longer_job_never_finishes_earlier_per_trial(seed: int, c: float, d: float) -> None:
    """Stateless pools under a sync barrier: a job × c·d is never shorter, trial by trial,
    than the job × c with the same interruptions."""
    pools = (PoolModel("rollout", 2, 5.0, False, 1, 2 * 0.08),
             PoolModel("scoring", 4, 4.5, False, 1, 4 * 0.05))
    base = run_model(pools, steps=50)
    a = run_trials(replace(base, time_mu=math.log(c)), 500, seed)
    b = run_trials(replace(base, time_mu=math.log(c * d)), 500, seed)
    assert np.all(b.makespan_hours >= a.makespan_hours - 1e-9)
    assert np.all(b.cost_usd >= a.cost_usd - 1e-6)


def test_model_only_and_the_attribution() -> None:
    model = _with(_spotty(), 0.9, 2.3)
    res = run_trials(model, 8000, 0)
    spot = run_trials(replace(model, time_mu=0.0, time_sigma=0.0), 8000, 0)
    mk, cost = model_only(model, res.time_multiplier)
    m0 = model.base_makespan_hours
    assert np.allclose(mk, res.time_multiplier * m0)
    assert np.allclose(cost, model.base_cost_usd + model.usd_per_hour * (mk - m0))
    assert np.all(res.makespan_hours >= mk - 1e-9)  # interruptions only add
    a = attribution(model, 0.9, (res.makespan_hours, res.cost_usd),
                    (spot.makespan_hours, spot.cost_usd), res.time_multiplier)
    want = float(np.quantile(cost, 0.9)) - model.base_cost_usd
    assert a["model"]["cost_usd"] == pytest.approx(want, abs=0.01)
    assert a["model"]["cost_usd"] == pytest.approx(
        model.usd_per_hour * m0 * (2.3 - 1.0), rel=0.05)
    assert a["dominant"] == "model" and a["log_cost_variance_share"]["model"] > 0.5
    line = attribution_sentence(a, "p90")
    assert line.startswith(f"at P90 the model's uncertainty adds ${a['model']['cost_usd']:,.2f}")
    assert "the model dominates" in line and "×0.9–×2.3 at 80 %" in line
    # hazards × 10, a tight interval: spot interruptions dominate
    loud = _with(scaled(_spotty(), 10.0), 0.99, 1.01)
    res = run_trials(loud, 4000, 0)
    spot = run_trials(replace(loud, time_mu=0.0, time_sigma=0.0), 4000, 0)
    a = attribution(loud, 0.9, (res.makespan_hours, res.cost_usd),
                    (spot.makespan_hours, spot.cost_usd), res.time_multiplier)
    assert a["dominant"] == "spot"
    assert "spot interruptions dominate" in attribution_sentence(a, "p90")


def _plan(method: str, makespan: float, unc: Any = None) -> Any:
    return SimpleNamespace(method=method, makespan_hours=makespan, uncertainty=unc)


def test_the_plan_interval_comes_from_the_plan_or_the_model() -> None:
    iv = model_interval("sft")
    assert plan_time_interval(_plan("sft", 10.0)) == (iv.level, iv.low, iv.high, iv.basis)
    unc = {"level": 0.8, "makespan_hours": [8.0, 15.0], "basis": "own"}
    assert plan_time_interval(_plan("rl", 10.0, unc)) == (0.8, 0.8, 1.5, "own")
    unc["factor"] = [0.7, 1.4]
    assert plan_time_interval(_plan("rl", 10.0, unc)) == (0.8, 0.7, 1.4, "own")
    obj = SimpleNamespace(level=0.8, factor=None, makespan_hours=[5.0, 20.0], basis="b")
    assert plan_time_interval(_plan("rl", 10.0, obj))[1:3] == (0.5, 2.0)
    bad = {"level": 0.8, "makespan_hours": ["nan", 3.0]}
    assert plan_time_interval(_plan("rl", 10.0, bad))[1:3] == (model_interval("rl").low,
                                                             model_interval("rl").high)


def test_sources_are_left_out_without_the_model() -> None:
    model = _spotty()
    cand = Candidate(None, None, None, 0.0, 0.0, model, run_trials(model, 100, 0))  # type: ignore[arg-type]
    assert sources(cand, RiskOptions(0.9, "p90", trials=100, model_uncertainty=False)) is None
    assert sources(cand, RiskOptions(0.9, "p90", trials=100)) is not None


def test_lost_work_constants_are_the_default_model() -> None:
    assert (L, R) == (5 / 60, 10 / 60)
