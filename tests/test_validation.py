"""Published runs (validation/*.yaml) against the calibrated demand model.

Each case is written from a paper, a framework's docs or an issue thread (source and every
assumption in the file). Its band is set by the record's confidence before any prediction and is
never widened: High [0.75, 1.33] (first-party timing, and batch, lengths and GPUs stated),
Medium [0.67, 1.5] (one important input assumed), Low [0.5, 2.0] (approximate timing or several
inputs assumed). The model's efficiency factors are fitted on the suite (ptplan.demand.fitting);
the stored fit must be the one the suite gives. A case outside its band is an expected failure
(strict: it fails the suite when the model comes to fit it) that names the mechanism the model
lacks, so the known gaps stay visible (docs/demand-model.md §7).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.fitted

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import validation as v  # noqa: E402
from ptplan.demand import fitting  # noqa: E402

CASES = v.load_cases()
BANDS = {"High": (0.75, 1.33), "Medium": (0.67, 1.5), "Low": (0.5, 2.0)}

GAPS = {
    "alpaca-7b-sft-fsdp-8xa100": "2023 HF Trainer + FSDP at ~250-token sequences ran at ~6 % "
                                 "MFU; two re-runs of the same command with transformers main "
                                 "took 4.5x less (issue170 and issue168 cases fit): software "
                                 "state",
    "alpaca-llama2-7b-sft-fsdp-4xa100": "as the Alpaca case: 4.2x the issue #168 re-run on the "
                                        "same 4 A100-80GB",
    "alpaca-native-7b-sft-fsdp-4xa100": "as the Alpaca case; its own thread (issue #32) traced a "
                                        "24-h ETA to GPUs linked over PCIe via the CPU (PHB)",
    "verl-grpo-deepseek-v3-96xh20": "its generation is modelled within 5 % of the reported "
                                    "1,050 s since eager MoE launches cost what vLLM issue "
                                    "#45709 measures (docs/demand-model.md §4.2), but the rest "
                                    "of its step, 650 s, is modelled at ~240 s: the 671B state "
                                    "swapped to and from the host around each phase (param/grad "
                                    "offload, CPU Adam over 12 nodes) is not modelled",
    "openrlhf-ppo-llama2-7b-8xa800": "OpenRLHF's DeepSpeed MFU is above veRL's; one update "
                                     "factor for every framework",
    "openrlhf-ppo-codellama-34b-8xa800": "its reference and reward forwards on 2 A800 of their "
                                         "own take the pools-apart scoring factor, which the "
                                         "table's 70B row (its vLLM engines of 2 GPUs, stated "
                                         "in its launcher) now sets higher; the 34B row's "
                                         "engine size and lengths are not in the record",
    "nemorl-async-grpo-qwen3-30b-a3b-16xgb200": "the one-step-off row takes 1.36x its on-policy "
                                                "sibling on the same 16 GB200 (301 vs 221 s), "
                                                "ptplan's overlap 0.6x; the table's EP16 cannot "
                                                "hold on the recipe's 8 training GPUs",
    "nemo-24.07-llama2-70b-sft-fp8-16xh100": "the table's 70B full SFT on 16 H100 at TP4 PP4 (no "
                                             "data parallel) fits 80 GB only with activation "
                                             "recompute, which the table does not give; the case "
                                             "assumes none, as the 26.06 FP8 recipes set, so "
                                             "ptplan offloads the optimizer (2.3x); with recompute "
                                             "full it picks the table's TP4 PP4 and lands at 1.09",
    "nemorl-grpo-qwen3-30b-a3b-16xgb200": "planned on GB200's own 2,500 dense TFLOPS since "
                                          "2026-12-08 (0.68 on B200's 2,250): the MoE rows of "
                                          "this recipe take 1.5x their modelled step on GB200 "
                                          "but fit on H100 (0.99, 0.88); likely the 768-wide "
                                          "expert GEMMs not keeping pace with the faster GPU, "
                                          "which one update factor for every GPU cannot express",
    "sky-t1-mini-7b-grpo-8k-8xh100": "the 8K stage's mean response is not in the record "
                                     "(4,500 assumed); the 16K stage of the same recipe (0.74) "
                                     "takes only 1.27x its seconds per step at twice the cap, "
                                     "so the 8K responses run longer than assumed",
    "tulu3-405b-rlvr-ppo-256xh100": "its unpacked ZeRO-3 update over 30 nodes, which the "
                                    "physics alone puts at 1,570 s per step against the blog's "
                                    "~1,500 s of training, is sped up by the one RL update "
                                    "factor (x1.64) that packed FSDP and Megatron updates set",
}


@pytest.fixture(scope="module")
def suite():
    return v.fit_suite()


def test_there_are_enough_cases_of_every_kind() -> None:
    assert len(CASES) >= 30
    methods = {c.raw["spec"]["method"] for c in CASES}
    assert methods == {"rl", "opd", "sft"}
    algos = {c.raw["spec"].get("algorithm") for c in CASES}
    assert {"grpo", "ppo", "dapo"} <= algos
    sizes = sorted(float(c.raw["spec"]["model"]["params_b"]) for c in CASES)
    assert sizes[0] < 3 and sizes[-1] > 600  # 1.5B long-CoT to 671B MoE
    assert any(c.raw["spec"]["model"].get("active_params_b") for c in CASES)
    gpus = {c.raw["cluster"]["gpu"] for c in CASES}
    assert {"H100", "H800", "H20", "A800"} <= gpus
    assert {c.raw["cluster"]["mode"] for c in CASES} >= {"colocated", "async"}


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case_is_documented_and_banded_by_its_confidence(case: v.Case) -> None:
    raw = case.raw
    for key in ("source", "reported", "cluster", "band", "band_reason", "confidence",
                "assumptions", "spec"):
        assert raw.get(key), f"{case.id}: missing {key}"
    assert case.band == BANDS[raw["confidence"]], (
        f"{case.id}: band {case.band} is not the {raw['confidence']} band "
        f"{BANDS[raw['confidence']]}")


def test_stored_fit_is_the_suites_fit(suite) -> None:
    """``optimizer/core/data/demand_fit.json`` is what ``validation.py --fit`` writes now."""
    res, _ = suite
    stored = json.loads(v.FIT_FILE.read_text(encoding="utf-8"))
    assert stored == json.loads(json.dumps(v.stored_fit(res), sort_keys=True)), (
        "the stored fit is stale: run python benchmarks/validation.py --fit")


@pytest.mark.parametrize("case_id", ["deepscaler-1.5b-grpo-8k-8xa100",
                                     "nemorl-async-grpo-qwen3-235b-256xh100",
                                     "s1-32b-sft-16xh100",
                                     "openthinker-7b-sft-offload-32xh100"])
def test_closed_form_equals_the_model_under_the_stored_fit(suite, case_id: str) -> None:
    """The fit's closed form is the demand model's own arithmetic with the factors applied."""
    res, parts = suite
    case, d, _ = next(p for p in parts if p[0].id == case_id)
    exact = v.predicted(case, v.run(case))
    closed = fitting.predict(d, res.factors, res.overhead)
    assert math.isclose(exact, closed, rel_tol=1e-6), (exact, closed)


def _gm(xs) -> float:
    xs = list(xs)
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def test_the_fit_reduces_the_bias(suite) -> None:
    """Unfitted, the model is biased by trainer: fast for the fine-tuning tools' SFT (geometric
    mean 0.39 of predicted ÷ reported on their 13 runs, ZeRO-3 offload the most), slow for
    Megatron-core SFT (1.96 on its 12 runs, two NVIDIA tables), near 1 on the RL runs once the
    2026-12-07 audit and the eager launch costs were in (0.98); over the 77 runs before the
    Megatron tables joined it was 0.84, on the first 14 0.70. Fitted, the suite's mean squared
    log error is at most half the unfitted one, each trainer's geometric mean is nearer 1, and
    the in-sample and leave-one-out geometric means are within 0.85–1.15 (a regression guard:
    the issue's target 0.9–1.1 is the test below)."""
    res, parts = suite
    by: dict[str, list[tuple[float, float]]] = {}
    unfitted, fitted = [], []
    for case, d, _ in parts:
        u, f = fitting.predict(d, {}, 0.0) / d.reported, res.ratio[case.id]
        unfitted.append(u)
        fitted.append(f)
        fams = {fam for fam, _, _ in d.family_seconds}
        key = "sft_megatron" if "update_sft_megatron" in fams else d.job_family
        by.setdefault(key, []).append((u, f))
    msle = [sum(math.log(x) ** 2 for x in xs) / len(xs) for xs in (unfitted, fitted)]
    assert msle[1] <= 0.5 * msle[0], msle
    assert _gm(u for u, _ in by["sft"]) < 0.6 and _gm(u for u, _ in by["sft_megatron"]) > 1.5
    for key in ("sft", "sft_megatron"):
        u, f = _gm(x for x, _ in by[key]), _gm(x for _, x in by[key])
        assert abs(math.log(f)) < abs(math.log(u)), (key, u, f)
    assert 0.85 <= _gm(res.ratio.values()) <= 1.15
    assert 0.85 <= _gm(res.loo_ratio.values()) <= 1.15


def test_the_fit_meets_the_issues_bias_target(suite) -> None:
    """The issue's target: geometric mean 0.9-1.1, in-sample and left out."""
    res, _ = suite
    assert 0.9 <= _gm(res.ratio.values()) <= 1.1
    assert 0.9 <= _gm(res.loo_ratio.values()) <= 1.1


def test_the_fit_meets_the_issues_leave_one_out_target(suite) -> None:
    """The issue's target: at least 80 % of the cases within 1.5× (0.67–1.5) with the case
    left out of the fit (62 of 77 at the 2026-12-07 fit; 73 of 89 at the 2026-12-08 fit)."""
    res, _ = suite
    within = sum(1 for x in res.loo_ratio.values() if 2 / 3 <= x <= 1.5)
    assert within >= 0.8 * len(res.loo_ratio), f"{within} of {len(res.loo_ratio)}"


def test_leave_one_out_intervals_cover_about_their_level(suite) -> None:
    """Each case's interval built without it covers it for 75–90 % of the cases (the issue's
    target for an 80 % interval)."""
    res, _ = suite
    share = sum(res.loo_covered.values()) / len(res.loo_covered)
    assert 0.75 <= share <= 0.90, share


def test_interval_levels_are_split_conformal() -> None:
    """Order statistics k_lo = ⌊(n + 1)·0.1⌋ and k_hi = ⌈(n + 1)·0.9⌉: of 99 residuals 1..99
    the 10th and 90th smallest; of 25 (the RL cases) the 2nd and 24th; of 9 the extremes."""
    assert fitting.interval_of([float(x) for x in range(1, 100)]) == (10.0, 90.0)
    assert fitting.interval_of([float(x) for x in range(1, 26)]) == (2.0, 24.0)
    assert fitting.interval_of([float(x) for x in range(9, 0, -1)]) == (1.0, 9.0)


def test_a_left_out_case_changes_the_fit() -> None:
    """Leave-one-out is real: dropping a case moves the factors (the prediction of a case is
    never made with itself in the fit)."""
    parts = [v.decompose(c)[0] for c in CASES]
    full = fitting.fit(parts)
    dropped = fitting.fit(parts[1:])
    assert full != dropped


@pytest.mark.parametrize("case", [
    pytest.param(c, marks=pytest.mark.xfail(strict=True, reason=GAPS[c.id]))
    if c.id in GAPS else c for c in CASES], ids=[c.id for c in CASES])
def test_prediction_within_band(suite, case: v.Case) -> None:
    res, _ = suite
    ratio = res.ratio[case.id]
    lo, hi = case.band
    assert lo <= ratio <= hi, f"{case.id}: ratio {ratio:.2f} outside [{lo}, {hi}]"


def test_readme_states_the_stored_fit() -> None:
    """README's figures are the stored fit's (rewrite them with the fit)."""
    fit = json.loads(v.FIT_FILE.read_text(encoding="utf-8"))
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    iv = fit["intervals"]
    for fragment in (f"{fit['in_sample']['geomean_ratio']:.2f} fitted",
                     f"{fit['in_sample']['within_1_5x']} of {fit['cases']} runs within 1.5×",
                     f"RL ×{iv['rl']['low']:.2f}–{iv['rl']['high']:.2f}",
                     f"SFT ×{iv['sft']['low']:.2f}–{iv['sft']['high']:.2f}"):
        assert fragment in text, fragment
