"""``runs calibrate``: calibration entries from the timings the ledger recorded.

For each run with a plan and per-step phase timings (``import-metrics``), and each phase of
its plan with timings: measured tokens/s per GPU = (the phase's planned tokens ÷ the plan's
steps) ÷ (mean recorded seconds of the phase per step × GPUs of the phase's pool). Runs are
grouped by (phase, GPU, precision); an entry's ``tokens_per_second_per_gpu`` is the median over
its runs, ``spread`` is (max − min) ÷ median, ``runs`` names them and ``run_rates`` holds
each run's rate in the same order (with three or more, the plan's 80 % interval takes their
q10–q90 for the phase instead of the validation suite's). The file is the spec's
``calibration:`` list, which ``ptplan plan --calibration FILE`` reads; plans record the runs
behind each cell they used.
"""

from __future__ import annotations

import statistics
from typing import Any

import yaml

from ptplan.core.errors import InputError
from ptplan.ledger.metrics import phase_seconds_per_step
from ptplan.ledger.records import Metric, RunRecord


def measurements(run: RunRecord, metrics: list[Metric]) -> list[dict[str, Any]]:
    """(phase, gpu, precision, tokens/s per GPU, steps) of one run."""
    plan = run.plan
    if not plan:
        return []
    secs = phase_seconds_per_step(metrics)
    pools = {p["name"]: p for p in plan.get("pools", [])}
    out = []
    for ph in plan.get("phases", []):
        name = ph["name"]
        pool = pools.get(ph["pool"])
        if name not in secs or pool is None or not ph.get("precision") or not plan.get("steps"):
            continue
        seconds, steps = secs[name]
        gpus = pool["nodes"] * pool["gpus_per_node"]
        if seconds <= 0 or gpus <= 0 or ph["tokens"] <= 0:
            continue
        out.append({"phase": name, "gpu": pool["gpu"], "precision": ph["precision"],
                    "tokens_per_second_per_gpu": ph["tokens"] / plan["steps"] / (seconds * gpus),
                    "steps": steps, "run": run.id})
    return out


def entries(runs: list[RunRecord], metrics: dict[str, list[Metric]]) -> list[dict[str, Any]]:
    cells: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in runs:
        for m in measurements(r, metrics.get(r.id, [])):
            cells.setdefault((m["phase"], m["gpu"], m["precision"]), []).append(m)
    out = []
    for (phase, gpu, precision), ms in sorted(cells.items()):
        ms = sorted(ms, key=lambda m: m["run"])
        values = [m["tokens_per_second_per_gpu"] for m in ms]
        med = statistics.median(values)
        out.append({"phase": phase, "gpu": gpu, "precision": precision,
                    "tokens_per_second_per_gpu": round(med, 3),
                    "runs": [m["run"] for m in ms],
                    "spread": round((max(values) - min(values)) / med, 4),
                    "steps": sum(m["steps"] for m in ms),
                    "run_rates": [float(f"{v:.6g}") for v in values]})
    if not out:
        raise InputError("runs calibrate: no run has both a plan and per-step phase timings; "
                         "record runs with --plan and import their metrics first "
                         "(`ptplan runs import-metrics`)")
    return out


def calibration_yaml(cells: list[dict[str, Any]]) -> str:
    head = ("# ptplan runs calibrate: measured tokens/s per GPU per (phase, GPU, precision),\n"
            "# median over the runs named (spread = (max - min) / median; run_rates: each\n"
            "# run's rate, which narrows the plan's 80 % interval). Use with\n"
            "# `ptplan plan SPEC --calibration FILE` or paste under the spec's calibration:.\n")
    return head + yaml.safe_dump({"calibration": cells}, sort_keys=False)
