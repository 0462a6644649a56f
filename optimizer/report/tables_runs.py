"""What ``ptplan runs`` prints: the recorded runs (``list``), one run (``show``) and the
method–cost–benefit review (``review``: tables and Markdown; its HTML page,
:func:`ptplan.report.html_methods.review_doc`, uses the same sections). Every figure is one the
ledger's records or the review JSON hold."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ptplan.report.tables import md_table, text_table

RUN_COST = ["run", "method", "family", "outcome", "planned $", "actual $", "var",
            "hours var", "eval", "rework $", "TCO $"]
RUN_BENEFIT = ["run", "gain", "$/point", "general", "flags"]
GROUP_COST = ["group", "runs", "repairs", "planned $", "actual $", "var", "var sd", "rework $",
              "rework x", "TCO $", "TCO $/run", "eval"]
GROUP_BENEFIT = ["group", "gain", "$/point", "TCO $/point", "general", "forgot", "flagged"]
TITLES = {"method": "per method", "family": "per model family and method",
          "project": "per project"}


def _s(x: Any) -> str:
    return "-" if x is None else str(x)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:+.1f}%"


def _share(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _pts(x: float | None) -> str:
    return "-" if x is None else f"{x:+.2f}"


def _sections(rv: dict[str, Any]) -> tuple[list[tuple[str, list[str], list[list[str]]]],
                                           list[str]]:
    def name(r: dict[str, Any]) -> str:
        return r["id"] + (f" (repairs {r['repairs']})" if r["repairs"] else "")

    cost = [[name(r), r["method"] + (f"/{r['algorithm']}" if r["algorithm"] else ""),
             r["model_family"], r["outcome"], _s(r["planned_usd"]), _s(r["actual_usd"]),
             _pct(r["cost_variance"]), _pct(r["hours_variance"]), _share(r["eval_share"]),
             _s(r["rework_usd"]), _s(r["tco_usd"])] for r in rv["runs"]]
    benefit = [[name(r), _pts(r["target_gain"]), _s(r["cost_per_point_usd"]),
                _pts(r["general_change"]), ", ".join(r["flags"]) or "-"] for r in rv["runs"]]
    tables = [("runs: cost", RUN_COST, cost), ("runs: benefit", RUN_BENEFIT, benefit)]
    for by, groups in rv["groups"].items():
        gc = [[g["group"], str(g["runs"]), str(g["repair_runs"]), _s(g["planned_usd"]),
               _s(g["actual_usd"]), _pct(g["cost_variance"]),
               _s(None if g["cost_variance_stdev"] is None
                  else f"{100 * g['cost_variance_stdev']:.1f}%"),
               g["rework_caused_usd"], _s(None if g["rework_ratio"] is None
                                          else f"{g['rework_ratio']:.2f}x"),
               g["tco_usd"], _s(g["tco_per_run_usd"]), _share(g["eval_share"])]
              for g in groups]
        gb = [[g["group"], _pts(g["target_gain"]), _s(g["cost_per_point_usd"]),
               _s(g["tco_per_point_usd"]), _pts(g["general_change_mean"]),
               str(g["forgetting_runs"]), str(g["flagged_runs"])] for g in groups]
        tables += [(f"{TITLES[by]}: cost", GROUP_COST, gc),
                   (f"{TITLES[by]}: benefit", GROUP_BENEFIT, gb)]
    t, th = rv["totals"], rv["thresholds"]
    footer = [f"totals: {t['runs']} runs, actual ${t['actual_usd']}, planned ${t['planned_usd']}"
              f", rework ${t['rework_usd']}, TCO ${t['tco_usd']}"]
    if "planned_other_usd" in t:  # the plans' other costs and CPU pools (issue #25)
        footer.append(f"of which other costs: planned ${t['planned_other_usd']}, actual "
                      f"${t['actual_other_usd']}; CPU pools: planned ${t['planned_cpu_usd']}, "
                      f"actual ${t['actual_cpu_usd']} (actual: bill lines of phase other, "
                      "and of the sandbox, reward and prep pools)")
    footer += [f"flags: over_budget (actual > plan budget), target_missed (gain <= 0), "
               f"forgetting (general < -{th['forgetting_points']:g} points), plan_variance "
               f"(cost or hours off the plan by > {100 * th['variance']:g}%)",
               "TCO = own cost (0 for a repair run: its cost is its cause's rework) + rework "
               "of the runs that repair it"]
    footer += [f"recommendation: {r['text']} (evidence: {', '.join(r['evidence_runs'])})"
               for r in rv["recommendations"]] or ["recommendation: none (no method on a "
                                                    "model family is outdone on recorded TCO "
                                                    "per point by one that did not forget)"]
    return tables, footer


RUN_INTERVAL = ["run", "planned $", "80 % $", "actual $", "in?", "planned h", "80 % h",
                "wall h", "in?"]


def _interval_section(rv: dict[str, Any]) -> list[tuple[str, list[str], list[list[str]]]]:
    """Each run's planned figures with the plan's 80 % interval and whether the actual landed
    inside it (the review JSON's ``planned_interval`` and ``within_interval``)."""
    def yes(x: bool | None) -> str:
        return "-" if x is None else "yes" if x else "no"

    rows = []
    for r in rv["runs"]:
        iv, w = r.get("planned_interval"), r.get("within_interval") or {}
        if iv is None:
            continue
        rows.append([r["id"], _s(r["planned_usd"]), f"{iv['usd'][0]}–{iv['usd'][1]}",
                     _s(r["actual_usd"]), yes(w.get("cost")), _s(r["planned_hours"]),
                     f"{iv['hours'][0]:g}–{iv['hours'][1]:g}", _s(r["wall_hours"]),
                     yes(w.get("hours"))])
    if not rows:
        return []
    inside = sum(1 for r in rv["runs"] if (r.get("within_interval") or {}).get("cost"))
    known = sum(1 for r in rv["runs"]
                if (r.get("within_interval") or {}).get("cost") is not None)
    return [(f"runs: planned with the 80 % interval (actual cost inside for {inside} of "
             f"{known})", RUN_INTERVAL, rows)]


def review_table(rv: dict[str, Any]) -> str:
    tables, footer = _sections(rv)
    tables += _interval_section(rv)
    out = ["ptplan runs review: method-cost-benefit\n"]
    out += [text_table(header, rows, caption) for caption, header, rows in tables]
    return "".join(out) + "".join(line + "\n" for line in footer)


def review_markdown(rv: dict[str, Any]) -> str:
    tables, footer = _sections(rv)
    tables += _interval_section(rv)
    out = ["# ptplan runs review: method-cost-benefit\n"]
    for caption, header, rows in tables:
        out.append(f"\n## {caption}\n\n{md_table(header, rows)}")
    out.append("\n" + "".join(f"* {line}\n" for line in footer))
    return "".join(out)


RUNS = ["id", "date", "project", "method", "family", "outcome", "repairs", "planned $",
        "actual $"]


def runs_table(rows: list[dict[str, Any]]) -> str:
    """``runs list``: one line per recorded run (the rows of its JSON, in order)."""
    return text_table(RUNS, [[_s(x) for x in row.values()] for row in rows])


def _h(x: float | None) -> str:
    return "-" if x is None else f"{x:,.2f}"


def show_text(run: Any, secs: dict[str, tuple[float, int]], n_metrics: int,
              usd: Callable[[int | None], str | None]) -> str:
    """One recorded run: plan against actual, costs, results and timings per phase (``usd``:
    how the ledger writes cents, :func:`ptplan.ledger.records.usd`)."""
    head = [f"run {run.id}: {run.project} ({run.method}"
            f"{'/' + run.algorithm if run.algorithm else ''}, {run.model_family}), "
            f"{run.outcome}, recorded {run.recorded_on}"
            + (f", repairs {run.repairs}" if run.repairs else "")]
    head.append(f"planned ${_s(run.planned_cost_usd)} over {_h(run.planned_hours)} h; actual "
                f"${usd(run.actual_cents)} over {_h(run.wall_hours)} h wall, "
                f"{_h(run.node_hours)} node-hours; budget ${_s(run.budget_usd)}")
    out = "\n".join(head) + "\n"
    out += text_table(["phase", "capacity", "usd"],
                      [[c.phase, c.capacity_type, c.usd] for c in run.costs], "actual costs")
    if run.planned_lines:  # the plan's other costs and CPU pools (issue #25), in its total
        out += text_table(["line", "name", "usd"], [[k, n, usd(c) or ""] for k, n, c in
                                                    run.planned_lines],
                          "planned costs beyond the GPU pools (in the planned total)")
    out += text_table(["kind", "metric", "before", "after", "change"],
                      [[r.kind, r.name, f"{r.before:g}", f"{r.after:g}",
                        f"{r.after - r.before:+.2f}"] for r in run.results], "results")
    if secs:
        out += text_table(["phase", "mean s/step", "steps"],
                          [[p, f"{s:.2f}", str(n)] for p, (s, n) in secs.items()],
                          f"timings ({n_metrics} metric values)")
    return out
