"""Building a run record from what ``ptplan runs record`` is given: the plan (validated through
the plan schema), the spec text, bills, cost lines, results, outcome and links."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ptplan.core.clock import today
from ptplan.core.errors import InputError
from ptplan.core.yamlio import quoted
from ptplan.ledger.records import (
    Cost,
    Result,
    RunRecord,
    bill_costs,
    cost_tags,
    merge_costs,
    parse_run,
    tag_spellings,
)
from ptplan.planfile.load import load_plan
from ptplan.planfile.schema import Plan

_COST = re.compile(r"^(?P<phase>[a-z-]+)(/(?P<cap>[a-z_-]+))?=(?P<usd>[^=]+)$")
_RESULT = re.compile(r"^(?P<name>[^=]+)=(?P<before>[^:]+):(?P<after>.+)$")


def parse_cost(text: str) -> Cost:
    m = _COST.match(text.strip().lower())
    if m is None:
        raise InputError(f"--cost: {text!r} is not PHASE[/CAPACITY]=USD; e.g. "
                         "update/spot=1234.50 or rollout-scoring/on-demand=800")
    from ptplan.ledger.records import CAPACITY, cents, usd

    cap = CAPACITY.get(m["cap"] or "mixed")
    if cap is None:
        raise InputError(f"--cost {text!r}: capacity {m['cap']!r}; use on-demand, spot, "
                         "reserved or mixed")
    try:
        return Cost.model_validate({"phase": m["phase"], "capacity_type": cap,
                                    "usd": usd(cents(m["usd"]))})
    except InputError as exc:
        raise InputError(f"--cost {text!r}: {exc}") from None
    except ValidationError as exc:  # its message's last line is only a link to pydantic's docs
        msg = exc.errors()[0]["msg"].removeprefix("Value error, ")
        raise InputError(f"--cost {text!r}: {msg}") from None


def parse_result(kind: str, text: str) -> Result:
    m = _RESULT.match(text.strip())
    option = "--target" if kind == "target" else "--general"
    if m is None:
        raise InputError(f"{option}: {text!r} is not NAME=BEFORE:AFTER; e.g. gsm8k=61.2:68.9")
    try:
        before, after = float(m["before"]), float(m["after"])
    except ValueError:
        raise InputError(f"{option} {text!r}: BEFORE and AFTER must be numbers") from None
    if not all(map(lambda x: x == x and abs(x) != float("inf"), (before, after))):
        raise InputError(f"{option} {text!r}: BEFORE and AFTER must be finite")
    return Result(kind=kind, name=m["name"].strip(), before=before, after=after)  # type: ignore


def build_run(run_id: str, *, plan: Path | None, spec: Path | None, project: str | None,
              method: str | None, algorithm: str | None, model_family: str, outcome: str,
              repairs: str | None, bills: list[Path], costs: list[str], targets: list[str],
              generals: list[str], wall_hours: float | None, node_hours: float | None,
              date: str | None, note: str) -> RunRecord:
    p: Plan | None = None
    if plan is not None:
        p = load_plan(plan)
    spec_text = None
    if spec is not None:
        from ptplan.spec.project import load_spec

        s = load_spec(str(spec))  # validated: a bad spec is refused before anything is written
        spec_text = spec.read_text(encoding="utf-8")
        if p is not None and s.name != p.spec_name:
            raise InputError(f"--spec {quoted(spec)} is project {s.name!r} but the plan is "
                             f"{p.spec_name!r}; give the spec the plan was made from")
    project = project or (p.spec_name if p else None)
    method = method or (p.method if p else None)
    if project is None or method is None:
        raise InputError("runs record: give --plan PLAN.json, or --project and --method")
    if p is not None and method != p.method:
        raise InputError(f"--method {method} differs from the plan's method {p.method}")
    tags = cost_tags(project, method)
    spellings = None  # a run recorded without its plan: tags compared folded, as written
    if p is not None:  # the plan's deployment: tags exactly as render spelled them
        from ptplan.planfile.identity import plan_prefix

        spellings = tag_spellings(project, method, plan_prefix(p))
    lines = [c for b in bills for c in bill_costs(b, tags, spellings)] + \
        [parse_cost(c) for c in costs]
    if date is not None:
        try:
            dt.date.fromisoformat(date)
        except ValueError:
            raise InputError(f"--date: {date!r} is not a date; use YYYY-MM-DD") from None
    data: dict[str, Any] = {
        "id": run_id, "recorded_on": date or today().isoformat(), "project": project,
        "method": method, "algorithm": algorithm or (p.algorithm if p else None),
        "model_family": model_family, "outcome": outcome, "repairs": repairs,
        "planned_cost_usd": p.total_cost_usd if p else None,
        "planned_hours": p.makespan_hours if p else None,
        "budget_usd": p.budget_usd if p else None,
        "wall_hours": wall_hours, "node_hours": node_hours, "tags": tags,
        "costs": [c.model_dump() for c in merge_costs(lines)],
        "results": [r.model_dump() for r in
                    [parse_result("target", t) for t in targets]
                    + [parse_result("general", g) for g in generals]],
        "plan": p.model_dump(mode="json") if p else None, "spec": spec_text, "note": note}
    seen: set[tuple[str, str]] = set()
    for r in data["results"]:
        if (r["kind"], r["name"]) in seen:
            raise InputError(f"--{r['kind']} {r['name']!r} is given twice; give each metric once")
        seen.add((r["kind"], r["name"]))
    return parse_run(data, f"run {run_id!r}")
