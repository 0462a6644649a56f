"""What ``ptplan estimate --cluster NxGPU`` prints: the job on a cluster the team already has.

Two tables from the report's ``cluster_run`` block (:meth:`ptplan.demand.cluster.ClusterRun
.to_json`): the seconds each phase takes per step on its pool, then the run (step time, wall
hours, GPU-hours, utilisation), each expected figure beside its interval; the pools, how the
pipeline composes a step, and the notes follow. Every figure shown is one the JSON holds."""

from __future__ import annotations

from typing import Any

from ptplan.report.tables import md_table, text_table

PHASE_LABEL = {
    "generation": "generation (drain tail included)",
    "eval": "eval (amortised per step)",
    "scoring": "scoring",
    "update": "update",
    "framework_overhead": "framework overhead",
    "weight_sync": "weight sync",
    "checkpoint": "checkpoint (amortised per step)",
}
PHASE_KEY = {"generation": "rollout", "eval": "eval", "scoring": "scoring", "update": "update"}
"""The ``precision`` and ``layout`` key of a phase row."""
POOL_OF = {"generation": "rollout", "eval": "rollout", "scoring": "scoring", "update": "update",
           "framework_overhead": "update", "checkpoint": "update"}
STEP = {
    "colocated": "colocated: every phase on all {gpus} GPUs, one after another, plus the refit "
                 "of the weights into the engines in place",
    "sync": "sync: each phase on its own pool, one after another, plus the weight sync to the "
            "rollout pool",
    "async": "async: generation (and the weight sync) overlaps scoring and update; a step takes "
             "the longer of the two, so the phases do not add up to the step",
}


def num(x: float) -> str:
    """A figure in a table: thousands separated, three significant digits or more."""
    if x >= 100:
        return f"{x:,.0f}"
    if x >= 10:
        return f"{x:.1f}"
    if x >= 1:
        return f"{x:.2f}"
    return f"{x:.3f}"


def with_interval(x: float, interval: list[float], level: float, unit: str = "") -> str:
    """``5.0 h (80 %: 4.2–6.6 h)``."""
    u = f" {unit}" if unit else ""
    return f"{num(x)}{u} ({level * 100:.0f} %: {num(interval[0])}–{num(interval[1])}{u})"


def _layout(layout: dict[str, Any] | None) -> str:
    if not layout:
        return ""
    parts: list[str] = []
    for k, v in layout.items():
        if isinstance(v, bool):
            parts += [f"+{k.replace('optimizer_', '')}"] if v else []
        elif k == "zero_stage":
            parts.append(f"z{v}")
        else:
            parts.append(f"{k}{v}")
    return " ".join(parts)


def _pool(run: dict[str, Any], phase: str) -> str:
    if run["pipeline"] == "colocated":  # every phase, and the refit, on all GPUs
        return f"all {run['gpus']}" + (" (refit in place)" if phase == "weight_sync" else "")
    if phase == "weight_sync":
        return "update → rollout"
    if not run["pools"]:
        return f"all {run['gpus']}"
    pool = POOL_OF.get(phase, "update")
    return f"{pool} {run['pools'].get(pool, run['pools'].get('update'))}"


def phase_rows(run: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """Per step: each phase's seconds on its pool, its precision and layout."""
    header = ["phase", "seconds / step", "pool (GPUs)", "precision", "layout"]
    rows: list[list[str]] = []
    for ph in run["phases"]:
        key = PHASE_KEY.get(ph["name"])
        rows.append([PHASE_LABEL.get(ph["name"], ph["name"]), num(ph["seconds_per_step"]),
                     _pool(run, ph["name"]),
                     run["precision"].get(key, "") if key else "",
                     _layout(run["layout"].get(key)) if key else ""])
    rows.append(["step", num(run["seconds_per_step"]), "", "", ""])
    return header, rows


def run_rows(run: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The run: step time, wall hours and GPU-hours, each with its interval; utilisation."""
    iv, level = run["interval"], run["interval"]["level"]
    rows = [
        ["step time", with_interval(run["seconds_per_step"], iv["seconds_per_step"], level, "s")
         + f"; without checkpoint stalls {num(run['seconds_per_step_without_checkpoint'])} s"],
        ["wall time", with_interval(run["wall_hours"], iv["wall_hours"], level, "h")
         + f" for {run['steps']:,} steps"],
        ["GPU-hours", with_interval(run["gpu_hours"], iv["gpu_hours"], level)
         + f": the wall time x {run['gpus']} GPUs"],
        ["utilisation", f"{100 * run['utilisation']:.0f} %: "
         f"{num(run['reference_pool_gpu_hours'])} of these GPU-hours at each phase's most "
         "efficient pool"],
    ]
    return ["run", "expected (interval)"], rows


def cluster_lines(report: dict[str, Any]) -> list[str]:
    """What the figures mean, the pools, how a step is composed, the notes."""
    run = report["cluster_run"]
    iv = run["interval"]
    pools = ", ".join(f"{k} {v}" for k, v in run["pools"].items())
    lines = [
        "utilisation: the GPU-hours the job needs at each phase's most efficient pool "
        "(`ptplan estimate` without --cluster) over the cluster's; the rest is idle (drain "
        "tails, barriers, pools waiting for each other)",
        "pools (GPUs): " + (pools if pools else f"none, every phase on all {run['gpus']}"),
        "pipeline " + STEP.get(run["pipeline"], run["pipeline"]).format(gpus=run["gpus"]),
        f"interval: {iv['level'] * 100:.0f} %, {iv['basis']}",
        f"step unit: {report['step_unit']}",
    ]
    lines += [f"note: {n}" for n in [*run["notes"], *report["notes"]]]
    lines.append("defaults applied: " + "; ".join(report["defaults_applied"]))
    return lines


def _title(report: dict[str, Any]) -> str:
    run = report["cluster_run"]
    return (f"ptplan estimate: {report['spec_name']} ({report['method']}) on {run['gpus']} x "
            f"{run['gpu']} (nodes of {run['gpus_per_node']}), {run['pipeline']}")


def cluster_table(report: dict[str, Any]) -> str:
    """``estimate --cluster`` as text: the phases, the run, the lines."""
    run = report["cluster_run"]
    return (text_table(*phase_rows(run), title=_title(report))
            + text_table(*run_rows(run))
            + "".join(line + "\n" for line in cluster_lines(report)))


def cluster_markdown(report: dict[str, Any]) -> str:
    """``estimate --cluster`` as Markdown."""
    run = report["cluster_run"]
    return (f"# {_title(report)}\n\n" + md_table(*phase_rows(run)) + "\n"
            + md_table(*run_rows(run)) + "\n"
            + "\n".join(f"- {line}" for line in cluster_lines(report)) + "\n")
