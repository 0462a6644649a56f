"""``run_on_cluster`` (``ptplan estimate --cluster``): per-step seconds on a cluster you have,
composed from the demand model's phase rates by the layout rules of ``docs/architecture.md``,
restated here: each phase on its pool at its fastest allowed precision (busy hours × 3,600 /
steps); sync and colocated steps are the sum of their phases + the weight sync (sync: 15.2312 GB
at 10 GB/s = 1.52312 s for the GRPO example; colocated: the refit of the same 15.2312 GB into the
engines on the same GPUs at 17.8 GB/s = 0.855685 s); an async step is the longer of generation
(+ weight sync) and scoring + update; checkpoint stalls are 12 × 106.6184 GB / 2 GB/s = 639.7104 s
for the run. The test shares only ``phase_rates`` with the code under test."""

from __future__ import annotations

import pytest
from conftest import EXAMPLES

from ptplan.core.errors import InputError
from ptplan.core.fit import active_fit
from ptplan.core.hardware import gpus
from ptplan.demand.cluster import run_on_cluster
from ptplan.demand.model import build_demand
from ptplan.demand.rates import phase_rates
from ptplan.policies.model import default_policy
from ptplan.spec.project import load_spec

POOL = {"rollout": "rollout", "eval": "rollout", "scoring": "scoring", "update": "update"}


@pytest.fixture(scope="module")
def spec():
    return load_spec(str(EXAMPLES / "grpo-7b.yaml"))


def _expected(spec, mode: str, pool_gpus: dict[str, int], scoring_apart: bool = False):
    """Scoring (the reference forward of the training engine) on the update's GPUs takes the
    update's fitted factor instead of its own: its time apart × scoring factor ÷ update factor
    (docs/demand-model.md §3.12), the rates here always priced as apart."""
    demand = build_demand(spec)
    h100 = gpus()["H100"]
    factors = active_fit().factors  # physics tests run unfitted: the tie is then 1
    secs, prec, lay = {}, {}, {}
    reference = 0.0
    for phase in ("rollout", "eval", "scoring", "update"):
        g = pool_gpus[POOL[phase]]
        gpn = min(8, g)
        rates = phase_rates(demand, phase, h100, gpn, mode != "async", default_policy())
        if mode == "colocated" and phase != "scoring":
            rates = phase_rates(demand, phase, h100, gpn, mode != "async", default_policy(),
                                colocated=True)
        best = min(rates, key=lambda r: (r.busy(g / gpn), r.precision))
        tie = factors["scoring"] / factors["update_rl"] \
            if phase == "scoring" and not scoring_apart else 1.0
        secs[phase] = best.busy(g / gpn) * 3600.0 / 300 * tie
        prec[phase] = best.precision
        lay[phase] = best.layout_for(g / gpn)
        reference += best.gpu_hours * tie  # the phase at its most efficient pool size
    ws = 15.2312 / 17.8 if mode == "colocated" else 15.2312 / 10.0
    if mode == "async":
        step = max(secs["rollout"] + secs["eval"] + ws, secs["scoring"] + secs["update"])
    else:
        step = sum(secs.values()) + ws
    return secs, prec, lay, ws, step, reference


@pytest.mark.parametrize(("mode", "pools", "pool_gpus"), [
    ("colocated", None, {"rollout": 16, "scoring": 16, "update": 16}),
    ("sync", {"rollout": 8, "update": 8}, {"rollout": 8, "scoring": 8, "update": 8}),
    ("async", {"rollout": 8, "scoring": 4, "update": 4}, {"rollout": 8, "scoring": 4,
                                                          "update": 4}),
    # generation the longer side: 1 rollout GPU against 8 + 7 for scoring and update
    ("async", {"rollout": 1, "scoring": 7, "update": 8}, {"rollout": 1, "scoring": 7,
                                                          "update": 8}),
])
def test_grpo_on_16_h100(spec, mode: str, pools, pool_gpus) -> None:
    r = run_on_cluster(spec, "H100", 16, 8, mode, pools)
    secs, prec, lay, ws, step, reference = _expected(spec, mode, pool_gpus,
                                                     "scoring" in (pools or {}))
    assert r.phases == pytest.approx(secs, rel=1e-12)
    assert (r.precision, r.layout) == (prec, lay)
    assert r.weight_sync_seconds == pytest.approx(ws, rel=1e-12)
    assert r.step_seconds == pytest.approx(step, rel=1e-12)
    assert r.reference_gpu_hours == pytest.approx(reference, rel=1e-12)
    assert r.checkpoint_seconds == pytest.approx(639.7104, rel=1e-12)
    assert (r.gpus, r.steps, r.notes) == (16, 300, [])
    if pool_gpus["rollout"] == 1:  # the case is there to make generation the longer side
        assert secs["rollout"] + secs["eval"] + ws > secs["scoring"] + secs["update"]
    assert r.gpu_hours == pytest.approx((step * 300 + 639.7104) * 16 / 3600, rel=1e-12)


def test_pools_larger_than_the_cluster_are_noted(spec) -> None:
    r = run_on_cluster(spec, "H100", 16, 8, "sync", {"rollout": 16, "update": 8})
    assert r.notes == ["pools hold 24 GPUs, more than the 16 given"]
    # one pool's GPUs reused for two (scoring defaults to update) is not over the cluster
    r = run_on_cluster(spec, "H100", 16, 8, "sync", {"rollout": 8, "scoring": 8, "update": 8})
    assert r.notes == []


def test_colocated_refit_grows_with_the_model_not_the_cluster(spec) -> None:
    """The colocated refit is the bf16 weights at ``colocated_refit_gb_per_s``, one stream
    (NeMo RL #945: the controller serialises it): 64 H100 refit the 7.6B policy in the time 16
    do; a 671B-parameter policy takes 88 times as long (2 x 671 GB / 17.8 GB/s = 75.4 s); the
    rate is the spec's."""
    small = run_on_cluster(spec, "H100", 16, 8, "colocated")
    large = run_on_cluster(spec, "H100", 64, 8, "colocated")
    assert small.weight_sync_seconds == large.weight_sync_seconds == pytest.approx(
        spec.model.params_b * 2 / 17.8, rel=1e-12)
    assert {p["name"]: p["seconds_per_step"] for p in small.phase_list()}["weight_sync"] == \
        pytest.approx(small.weight_sync_seconds, rel=1e-12)
    big = spec.model_copy(update={"model": spec.model.model_copy(update={"params_b": 671.0})})
    assert build_demand(big).refit_seconds == pytest.approx(2 * 671 / 17.8, rel=1e-12)
    fast = spec.model_copy(update={"efficiency": spec.efficiency.model_copy(
        update={"colocated_refit_gb_per_s": 40.0})})
    assert build_demand(fast).refit_seconds == pytest.approx(spec.model.params_b * 2 / 40.0,
                                                             rel=1e-12)


def test_sft_has_no_weight_sync() -> None:
    sft = load_spec(str(EXAMPLES / "sft-8b.yaml"))
    r = run_on_cluster(sft, "H100", 8, 8, "colocated")
    assert r.weight_sync_seconds == 0.0
    assert r.step_seconds == pytest.approx(sum(r.phases.values()), rel=1e-12)


def test_a_phase_with_no_allowed_precision_is_named(spec) -> None:
    """A policy allowing only fp8 generation, on T4s (no fp8): no rate for rollout."""
    from ptplan.policies.model import Policy

    policy = Policy.model_validate({"name": "fp8-only",
                                    "phases": {"rollout": {"precisions": ["fp8"]}}})
    with pytest.raises(InputError) as exc:
        run_on_cluster(spec, "T4", 8, 4, "colocated", policy=policy)
    assert str(exc.value) == "rollout does not fit 8 x T4 (nodes of 4)"


def test_async_without_eval() -> None:
    """A spec with no eval block: generation is the rollout alone (no eval term, not even 0 s
    of one); with 1 rollout GPU against 8 + 7 it is the longer side."""
    from planner_fixtures import small_spec

    spec = small_spec()
    r = run_on_cluster(spec, "H100", 16, 8, "async", {"rollout": 1, "scoring": 7, "update": 8})
    assert "eval" not in r.phases
    gen = r.phases["rollout"] + r.weight_sync_seconds
    assert r.weight_sync_seconds == pytest.approx(1.54 * 2 / 10, rel=1e-12)
    rest = sum(v for k, v in r.phases.items() if k != "rollout")
    assert gen > rest
    assert r.step_seconds == pytest.approx(gen, rel=1e-12)


@pytest.mark.fitted
@pytest.mark.parametrize(("mode", "pools", "apart"), [
    ("colocated", None, False),
    ("sync", {"rollout": 8, "update": 8}, False),  # scoring merged into the update pool
    ("sync", {"rollout": 8, "scoring": 4, "update": 4}, True),
    ("async", {"rollout": 8, "scoring": 4, "update": 4}, True),
])
def test_the_reference_forward_on_the_trainer_takes_the_update_factor(spec, mode, pools,
                                                                       apart) -> None:
    """With the stored fit: the training engine's reference forward on the update's GPUs runs
    at the update's fitted factor, on a scoring pool of its own at the scoring factor
    (docs/demand-model.md §3.12); the rollout and the update do not move."""
    factors = active_fit().factors
    assert factors["scoring"] != pytest.approx(factors["update_rl"], rel=0.05)
    r = run_on_cluster(spec, "H100", 16, 8, mode, pools)
    g = (pools or {}).get("scoring", (pools or {}).get("update", 16))
    gpn = min(8, g)
    demand = build_demand(spec)
    own = min(phase_rates(demand, "scoring", gpus()["H100"], gpn, mode != "async",
                          default_policy()), key=lambda x: (x.busy(g / gpn), x.precision))
    alone = own.busy(g / gpn) * 3600.0 / 300
    want = alone if apart else alone * factors["scoring"] / factors["update_rl"]
    assert r.phases["scoring"] == pytest.approx(want, rel=1e-12)

