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
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ptplan.demand.cluster import ClusterRun, run_on_cluster  # noqa: E402
from ptplan.spec.project import parse_spec  # noqa: E402

CASES = ROOT / "validation"


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


def run(case: Case) -> ClusterRun:
    c = case.raw["cluster"]
    spec = parse_spec(case.raw["spec"], f"validation {case.path.name}")
    return run_on_cluster(spec, c["gpu"], int(c["gpus"]), int(c["gpus_per_node"]), c["mode"],
                          c.get("pools"))


def predicted(case: Case, r: ClusterRun) -> float:
    key, _ = case.reported
    if key == "seconds_per_step":
        return r.step_seconds
    if key == "gpu_hours_total":
        return r.gpu_hours
    raise ValueError(f"{case.id}: unknown reported metric {key}")


def rows() -> list[dict[str, Any]]:
    out = []
    for case in load_cases():
        r = run(case)
        key, value = case.reported
        pred = predicted(case, r)
        lo, hi = case.band
        out.append({
            "id": case.id, "metric": key, "reported": value, "predicted": round(pred, 2),
            "ratio": round(pred / value, 3), "band": [lo, hi],
            "in_band": lo <= pred / value <= hi,
            "phases_seconds_per_step": {k: round(v, 1) for k, v in r.phases.items()},
            "precision": r.precision,
            "update_layout": r.layout.get("update"),
        })
    return out


def main(argv: list[str]) -> int:
    data = rows()
    if "--json" in argv:
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
        return 0
    print(f"{'case':44} {'metric':17} {'reported':>10} {'predicted':>10} {'ratio':>6}  band")
    for d in data:
        flag = "" if d["in_band"] else "  OUT"
        print(f"{d['id']:44} {d['metric']:17} {d['reported']:>10.1f} {d['predicted']:>10.1f} "
              f"{d['ratio']:>6.2f}  {d['band'][0]}-{d['band'][1]}{flag}")
        phases = ", ".join(f"{k} {v:.0f}s" for k, v in d["phases_seconds_per_step"].items())
        print(f"{'':44} per step: {phases}; update layout {d['update_layout']}")
    ratios = [d["ratio"] for d in data]
    import math
    gm = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
    print(f"\n{len(data)} cases; geometric mean ratio {gm:.2f}; "
          f"{sum(d['in_band'] for d in data)} in band")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
