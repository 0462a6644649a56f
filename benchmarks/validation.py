"""Predicted vs reported for published post-training runs (``validation/*.yaml``).

Each case holds a spec written from a paper, a framework's docs or an issue thread, the cluster
it ran on, the reported figure (seconds per step or total GPU-hours) with its source, every
assumption made to fill gaps, and the band of predicted ÷ reported that
``tests/test_validation.py`` holds it to. The prediction runs the demand model on that cluster
(:func:`ptplan.demand.cluster.run_on_cluster`): nothing is fitted to these runs.

    python benchmarks/validation.py            # table
    python benchmarks/validation.py --json     # machine-readable
"""

from __future__ import annotations

import json
import math
import sys
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ptplan.core.fit import (  # noqa: E402
    LEVEL,
    applies,
    family,
    family_of,
    fit_method,
    identity_fit,
    using,
)
from ptplan.demand import fitting  # noqa: E402
from ptplan.demand.cells import scoring_on_trainer  # noqa: E402
from ptplan.demand.cluster import ClusterRun, run_on_cluster  # noqa: E402
from ptplan.demand.model import build_demand  # noqa: E402
from ptplan.policies.model import Policy, parse_policy  # noqa: E402
from ptplan.spec.project import ProjectSpec, parse_spec  # noqa: E402

CASES = ROOT / "validation"
FIT_FILE = ROOT / "optimizer" / "core" / "data" / "demand_fit.json"


@dataclass(frozen=True)
class Case:
    id: str
    path: Path
    raw: dict[str, Any]

    @property
    def reported(self) -> tuple[str, float]:
        (key, value), = self.raw["reported"].items()
        return key, float(value)

    @property
    def band(self) -> tuple[float, float]:
        lo, hi = self.raw["band"]
        return float(lo), float(hi)


def load_cases() -> list[Case]:
    out = []
    for path in sorted(CASES.glob("*.yaml")):
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        out.append(Case(raw["id"], path, raw))
    return out


def case_spec(case: Case) -> ProjectSpec:
    """The case's spec. A published run is planned as it ran, not as a pinned release ptplan
    renders would run it (framework: any, unless the case names one: docs/frameworks.md)."""
    return parse_spec({"framework": "any", **case.raw["spec"]}, f"validation {case.path.name}")


def case_policy(case: Case) -> Policy | None:
    """The run's own choices a policy governs (``policy:`` in the case, over the default
    policy): e.g. fp8 training, which the default policy does not allow but a recorded run
    used. None: the default policy."""
    over = case.raw.get("policy")
    if not over:
        return None
    text = yaml.safe_dump({"name": f"validation {case.id}", "extends": "default", **over})
    return parse_policy(text, f"validation {case.path.name} policy")


def run(case: Case) -> ClusterRun:
    c = case.raw["cluster"]
    return run_on_cluster(case_spec(case), c["gpu"], int(c["gpus"]), int(c["gpus_per_node"]),
                          c["mode"], c.get("pools"), case_policy(case))


def predicted(case: Case, r: ClusterRun) -> float:
    key, _ = case.reported
    if key == "seconds_per_step":
        return r.step_seconds
    if key == "gpu_hours_total":
        return r.gpu_hours
    raise ValueError(f"{case.id}: unknown reported metric {key}")


def decompose(case: Case) -> tuple[fitting.Decomposed, ClusterRun]:
    """The case under the unfitted model, split into factor families (ptplan.demand.fitting)."""
    with using(identity_fit()):
        r = run(case)
    spec = case_spec(case)
    eff_set = spec.efficiency.model_fields_set
    fams: list[tuple[str, str, float]] = []
    fixed = {"gen": r.weight_sync_seconds, "rest": 0.0}
    # scoring on the update's GPUs unless the case gives it a pool of its own (cluster._run)
    with_trainer = "scoring" not in (case.raw["cluster"].get("pools") or {})
    demand = build_demand(spec)
    method = fit_method(spec.method, spec.efficiency.train_backend)
    for phase, secs in r.phases.items():
        side = "gen" if phase in ("rollout", "eval") else "rest"
        on_trainer = scoring_on_trainer(phase, demand.phase_parts(phase), with_trainer)
        if applies(phase, method, eff_set, spec.efficiency.param_offload, on_trainer):
            fams.append((family(phase, method, spec.efficiency.param_offload, on_trainer),
                         side, secs))
        else:
            fixed[side] += secs
    if r.mode != "async":
        fixed = {"gen": fixed["gen"] + fixed["rest"], "rest": 0.0}
    key, value = case.reported
    d = fitting.Decomposed(case.id, tuple(fams), fixed["gen"], fixed["rest"], r.mode,
                           spec.method in ("rl", "opd"), key, value, r.steps, r.gpus,
                           r.checkpoint_seconds,
                           fitting.CONFIDENCE_WEIGHT[case.raw["confidence"]]
                           / group_size(case),
                           family_of(spec.method))
    return d, r


@lru_cache(maxsize=1)
def _group_sizes() -> dict[str, int]:
    return dict(Counter(c.raw["group"] for c in load_cases() if c.raw.get("group")))


def group_size(case: Case) -> int:
    """Cases of one recipe or table (``group:``) share one vote in the fit."""
    g = case.raw.get("group")
    return _group_sizes()[g] if g else 1


def fit_suite() -> tuple[fitting.Result, list[tuple[Case, fitting.Decomposed, ClusterRun]]]:
    parts = [(c, *decompose(c)) for c in load_cases()]
    return fitting.run([d for _, d, _ in parts], LEVEL), parts


def stored_fit(res: fitting.Result) -> dict[str, Any]:
    """The file ``optimizer/core/data/demand_fit.json`` holds (written by ``--fit``)."""
    n = len(res.ratio)
    gm = math.exp(sum(math.log(x) for x in res.ratio.values()) / n)
    gm_loo = math.exp(sum(math.log(x) for x in res.loo_ratio.values()) / n)
    intervals = {}
    for fam, (lo, hi, k) in res.intervals.items():
        what = "every job" if fam == "all" else f"{fam} jobs"
        intervals[fam] = {
            "low": round(lo, 4), "high": round(hi, 4), "cases": k,
            "basis": (f"80 % interval from the leave-one-out errors of {k} published runs "
                      f"({what}; benchmarks/validation.py, docs/demand-model.md §7)")}
    return {
        "factors": res.factors, "step_overhead_seconds": res.overhead,
        "intervals": intervals, "cases": n,
        "in_sample": {"geomean_ratio": round(gm, 4),
                      "within_1_5x": sum(1 for x in res.ratio.values() if 2 / 3 <= x <= 1.5)},
        "leave_one_out": {"geomean_ratio": round(gm_loo, 4),
                          "within_1_5x": sum(1 for x in res.loo_ratio.values()
                                             if 2 / 3 <= x <= 1.5),
                          "covered": sum(res.loo_covered.values())},
    }


def rows() -> list[dict[str, Any]]:
    res, parts = fit_suite()
    out = []
    for case, d, r in parts:
        key, value = case.reported
        lo, hi = case.band
        ratio = res.ratio[case.id]
        pred = ratio * value
        fam = d.job_family if d.job_family in res.intervals else "all"
        ilo, ihi, _ = res.intervals[fam]
        pred_loo = res.loo_ratio[case.id] * value
        unfitted = fitting.predict(d, {}, 0.0) / value
        out.append({
            "id": case.id, "metric": key, "reported": value, "predicted": round(pred, 2),
            "ratio": round(ratio, 3), "loo_ratio": round(res.loo_ratio[case.id], 3),
            # counted on the unrounded ratios, as the stored fit counts them (0.6666 is out)
            "within_1_5x": 2 / 3 <= ratio <= 1.5,
            "loo_within_1_5x": 2 / 3 <= res.loo_ratio[case.id] <= 1.5,
            "unfitted_within_1_5x": 2 / 3 <= unfitted <= 1.5,
            "interval": [round(pred_loo * ilo, 2), round(pred_loo * ihi, 2)],
            "loo_covered": res.loo_covered[case.id],
            "band": [lo, hi], "in_band": lo <= ratio <= hi, "confidence": case.raw["confidence"],
            "unfitted_ratio": round(unfitted, 3),
            "phases_seconds_per_step": {k: round(v, 1) for k, v in r.phases.items()},
            "precision": r.precision,
            "update_layout": r.layout.get("update"),
        })
    return out


def _gm(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def _spread(xs: list[float], flags: list[bool]) -> str:
    within = sum(flags)
    return (f"geometric mean {_gm(xs):.2f}, range {min(xs):.2f}-{max(xs):.2f}, "
            f"{within}/{len(xs)} within 1.5x")


def main(argv: list[str]) -> int:
    if "--fit" in argv:
        res, _ = fit_suite()
        FIT_FILE.write_text(json.dumps(stored_fit(res), indent=2, sort_keys=True) + "\n",
                            encoding="utf-8")
        print(f"wrote {FIT_FILE.relative_to(ROOT)}: factors {res.factors}, "
              f"overhead {res.overhead} s/step")
        return 0
    data = rows()
    if "--json" in argv:
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
        return 0
    print(f"{'case':46} {'metric':16} {'reported':>9} {'predicted':>9} {'ratio':>6} "
          f"{'loo':>6} {'unfit':>6}  band")
    for d in data:
        flag = "" if d["in_band"] else "  OUT"
        print(f"{d['id']:46} {d['metric']:16} {d['reported']:>9.1f} {d['predicted']:>9.1f} "
              f"{d['ratio']:>6.2f} {d['loo_ratio']:>6.2f} {d['unfitted_ratio']:>6.2f}  "
              f"{d['band'][0]}-{d['band'][1]}{flag}")
    fit = json.loads(FIT_FILE.read_text(encoding="utf-8"))
    print(f"\n{len(data)} cases; {sum(d['in_band'] for d in data)} in their band")
    def spread(key: str, flag: str) -> str:
        return _spread([d[key] for d in data], [d[flag] for d in data])

    print(f"unfitted:      {spread('unfitted_ratio', 'unfitted_within_1_5x')}")
    print(f"in-sample:     {spread('ratio', 'within_1_5x')}")
    print(f"leave-one-out: {spread('loo_ratio', 'loo_within_1_5x')}; 80 % intervals cover "
          f"{sum(d['loo_covered'] for d in data)}/{len(data)}")
    print(f"factors {fit['factors']}, overhead {fit['step_overhead_seconds']} s/step")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
