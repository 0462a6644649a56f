"""Inputs of the HTML report tests (tests/test_report_html.py, tests/test_report_browser.py):
every report kind on the examples, and copies with a hostile name in every free-text field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CLI_GOLDEN = ROOT / "tests" / "golden" / "cli"
DATA = ROOT / "tests" / "data" / "reports"

CASES: dict[str, list[Path]] = {
    "plan-grpo-7b": [CLI_GOLDEN / "plan-grpo-7b.json"],
    "plan-opd-8b-from-32b": [CLI_GOLDEN / "plan-opd-8b-from-32b.json"],
    "plan-sft-8b": [CLI_GOLDEN / "plan-sft-8b.json"],
    "pareto-grpo": [CLI_GOLDEN / "pareto-grpo.json"],
    "pareto-sft-with-plan": [CLI_GOLDEN / "pareto-sft.json", CLI_GOLDEN / "plan-sft-8b.json"],
    "whatif-grpo": [CLI_GOLDEN / "whatif-grpo.json"],
    "sweep-grpo": [DATA / "sweep-grpo.json"],
    "break-even-grpo": [DATA / "break-even-grpo.json"],
    "reserve": [CLI_GOLDEN / "reserve.json"],
    "compare-sft-opd": [DATA / "compare-sft-opd.json"],
    "review": [DATA / "review.json"],
    "campaign-cheap-teacher": [DATA / "campaign-cheap-teacher.json"],
}
"""Every report kind on the examples: name -> input JSON files (one page)."""

HOSTILE = ("'\"</script><script>window.__pwned=1</script><!-- {{ 7*7 }} {% raw %} "
           "<img src=x onerror=\"window.__pwned=2\"> &amp; \u2028")
"""A name that must render as text: quotes, a script end and start, a comment opener, template
braces, an event handler, an entity and a JavaScript line separator."""


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def hostile_inputs(tmp: Path) -> list[Path]:
    """The plan, what-if, reserve, compare, review and campaign examples with the hostile name
    in every free-text field a user controls (spec, scenario, portfolio, candidate, run, model
    family, campaign and stage names; warnings, notes, sources and recommendations)."""
    plan = load(CLI_GOLDEN / "plan-grpo-7b.json")
    plan["spec_name"] = HOSTILE
    plan["warnings"].append(HOSTILE)
    plan["defaults_applied"].append(HOSTILE)
    plan["explain"]["summary"].append(HOSTILE)
    plan["pools"][0]["allocations"][0]["note"] = HOSTILE
    plan["network"][0]["note"] = HOSTILE
    what = load(CLI_GOLDEN / "whatif-grpo.json")
    what["spec_name"] = HOSTILE
    what["scenarios"][0]["name"] = HOSTILE
    res = load(CLI_GOLDEN / "reserve.json")
    res["portfolio"] = HOSTILE
    old = res["scenarios"][0]["name"]
    res["scenarios"][0]["name"] = HOSTILE
    for c in res["coverage"]:
        if c["scenario"] == old:
            c["scenario"] = HOSTILE
    cmp = load(DATA / "compare-sft-opd.json")
    old = cmp["candidates"][0]["name"]
    cmp["candidates"][0]["name"] = HOSTILE
    cmp["candidates"][0]["prior"]["source"] = HOSTILE
    cmp["ranking"] = [HOSTILE if n == old else n for n in cmp["ranking"]]
    cmp["notes"].append(HOSTILE)
    rv = load(DATA / "review.json")
    rv["runs"][0]["id"] = HOSTILE
    rv["groups"]["family"][0]["group"] = HOSTILE
    rv["recommendations"][0]["text"] += " " + HOSTILE
    camp = load(DATA / "campaign-cheap-teacher.json")
    camp["name"] = HOSTILE
    first = camp["stages"][0]["name"]

    def rename(x: str) -> str:
        return HOSTILE if x == first else x

    for st in camp["stages"]:
        st["name"], st["after"] = rename(st["name"]), [rename(a) for a in st["after"]]
    camp["critical_path"] = [rename(x) for x in camp["critical_path"]]
    for st in camp["stored"]:
        st["stage"] = rename(st["stage"])
    for h in camp["handovers"]:
        h["from"], h["to"] = rename(h["from"]), rename(h["to"])
    out = []
    for name, data in (("plan", plan), ("whatif", what), ("reserve", res), ("compare", cmp),
                       ("review", rv), ("campaign", camp)):
        f = tmp / f"hostile-{name}.json"
        f.write_text(json.dumps(data), encoding="utf-8")
        out.append(f)
    return out


def edge_inputs(tmp: Path) -> list[Path]:
    """Reports with their optional parts absent: a plan without deadline, budget, storage or
    network; a what-if whose scenario has no feasible plan; a sweep with an infeasible point
    and no switch; a comparison without priors; a review without target results."""
    plan = load(CLI_GOLDEN / "plan-sft-8b.json")
    plan.update(deadline_hours=None, budget_usd=None, budget_warn_usd=None,
                budget_stop_usd=None, storage=[], network=[], warnings=[])
    plan["storage_cost_usd"] = plan["network_cost_usd"] = "0.00"
    what = load(CLI_GOLDEN / "whatif-grpo.json")
    s = what["scenarios"][0]
    s.update(plan=None, changes=None, delta_usd=None,
             error="no offers: the rules left none (test input)")
    sweep = load(DATA / "sweep-grpo.json")
    last = sweep["points"][-1]
    last.update(total_cost_usd=None, delta_usd=None, makespan_hours=None, summary=None,
                status="infeasible", error="deadline 72 h: too slow (test input)",
                matched_quantity=None, matched_spend_usd=None)
    sweep["switches"] = [w for w in sweep["switches"] if w["between"][1] != last["value"]]
    cmp = load(DATA / "compare-sft-opd.json")  # no priors: only break-evens (one more run)
    cmp.update(priors=None, statement="no priors (test input)", ranked_by="planned_cost_usd")
    for c in cmp["candidates"]:
        c.update(prior=None, expected_cost_usd=None, p90_cost_usd=None,
                 break_even_rework_usd=c["run_cost_usd"],
                 break_even_rework_basis="one more run")
    rv = load(DATA / "review.json")  # no target results: no gains, no dollars per point
    for r in rv["runs"]:
        r.update(target_gain=None, cost_per_point_usd=None)
    for groups in rv["groups"].values():
        for g in groups:
            g.update(target_gain=None, cost_per_point_usd=None, tco_per_point_usd=None)
    rv["recommendations"] = []
    out = []
    for name, data in (("plan", plan), ("whatif", what), ("sweep", sweep), ("compare", cmp),
                       ("review", rv)):
        f = tmp / f"edge-{name}.json"
        f.write_text(json.dumps(data), encoding="utf-8")
        out.append(f)
    return out
