"""The run record: what was planned, what it cost, what it gained; bills; write, read, export.

A run is recorded once (``ptplan runs record``) in one transaction with its costs per phase
and capacity type and its results (target and general-capability metrics before and after).
Money is kept in integer cents, so totals are exact sums of the runs. A run that repairs
another (``repairs``) must name a run already in the ledger; its cost is the rework of that
run (:mod:`ptplan.ledger.review`).
"""

from __future__ import annotations

import csv
import json
import re
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from pathlib import Path
from typing import Annotated, Any, Literal

import sqlalchemy as sa
from pydantic import Field, ValidationError, field_validator
from sqlalchemy.engine import Connection

from ptplan.core.errors import InputError, suggest
from ptplan.core.yamlio import StrictModel
from ptplan.ledger import db

RunId = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")]
Outcome = Literal["kept", "rolled_back", "abandoned"]
OUTCOMES = ("kept", "rolled_back", "abandoned")
PHASES = ("rollout", "scoring", "update", "eval", "weight_sync", "checkpoint")
CPU_POOLS = ("sandbox", "reward", "prep")
"""The plan's CPU pools (issue #25): ``render`` tags each with its name as ``ptplan-phase``."""
OTHER = "other"
"""Bill lines of the spec's ``other_costs`` (annotation, review, ops): ``--cost other=USD``."""
CAPACITY = {"on_demand": "on_demand", "on-demand": "on_demand", "ondemand": "on_demand",
            "spot": "spot", "reserved": "reserved", "mixed": "mixed"}
TAG_KEYS = ("ptplan-project", "ptplan-method", "ptplan-phase", "ptplan-capacity-type",
            "ptplan-pool")


class Cost(StrictModel):
    phase: str = Field(max_length=100)
    """A phase, phases sharing a pool joined by '-' (the ``ptplan-phase`` tag of a pool), or
    ``all`` (resources of the whole run: bucket, network)."""
    capacity_type: Literal["on_demand", "spot", "reserved", "mixed"]
    usd: str = Field(pattern=r"^\d{1,16}\.\d\d$")

    @field_validator("phase")
    @classmethod
    def _phase(cls, v: str) -> str:
        return check_phase(v)


class Result(StrictModel):
    kind: Literal["target", "general"]
    name: str = Field(min_length=1, max_length=100)
    before: float
    after: float


class Metric(StrictModel):
    name: str = Field(min_length=1, max_length=200)
    step: int = Field(ge=-(2**31), lt=2**31)
    source: Literal["mlflow", "tensorboard", "jsonl"]
    phase: str | None = Field(max_length=32)
    kind: str = Field(max_length=16)
    value: float


class RunRecord(StrictModel):
    id: RunId
    recorded_on: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$")
    project: str = Field(min_length=1, max_length=200)
    method: Literal["sft", "rl", "opd"]
    algorithm: str | None = Field(default=None, max_length=32)
    model_family: str = Field(min_length=1, max_length=100)
    outcome: Outcome
    repairs: RunId | None = None
    planned_cost_usd: str | None = None
    planned_hours: float | None = None
    budget_usd: str | None = None
    wall_hours: float | None = Field(default=None, ge=0)
    node_hours: float | None = Field(default=None, ge=0)
    tags: dict[str, str] = {}
    costs: list[Cost] = []
    results: list[Result] = []
    plan: dict[str, Any] | None = None
    spec: str | None = None
    note: str = ""

    @property
    def actual_cents(self) -> int:
        return sum(cents(c.usd) for c in self.costs)

    @property
    def planned_lines(self) -> list[tuple[str, str, int]]:
        """The plan's own planned cost lines beyond its GPU pools (issue #25): ``("other",
        name, cents)`` per ``other_costs[]`` line and ``("cpu", pool, cents)`` per
        ``cpu_pools[]`` pool (both in the plan's total); empty without a plan or them."""
        plan = self.plan or {}
        return ([("other", o["name"], cents(o["cost_usd"])) for o in plan.get("other_costs")
                 or []]
                + [("cpu", c["name"], cents(c["cost_usd"])) for c in plan.get("cpu_pools")
                   or []])

    def actual_beyond(self, kind: str) -> int:
        """Actual cents of ``other`` (phase other) or ``cpu`` (a CPU pool's phase) lines."""
        want = (OTHER,) if kind == "other" else CPU_POOLS
        return sum(cents(c.usd) for c in self.costs if c.phase in want)


def check_phase(v: str) -> str:
    v = v.strip().lower()
    parts = v.split("-")
    if v in CPU_POOLS or v == OTHER:
        return v
    if v != "all" and not all(p in PHASES for p in parts):
        raise ValueError(f"phase {v!r}: use a plan phase ({', '.join(PHASES)}), phases of one pool "
                         "joined by '-' (the ptplan-phase tag), a CPU pool ("
                         f"{', '.join(CPU_POOLS)}), {OTHER} (costs beyond compute) or all")
    return v


def cents(usd: str | float | int | Decimal) -> int:
    try:
        d = Decimal(str(usd))
    except InvalidOperation:
        raise InputError(f"cost {usd!r} is not a number of dollars; use e.g. 1234.56") from None
    if not d.is_finite() or d < 0 or d >= Decimal(10) ** 13:
        raise InputError(f"cost {usd!r}: use a finite, non-negative number of dollars below "
                         "10^13")
    return int((d * 100).quantize(Decimal(1), rounding=ROUND_HALF_UP))


def usd(c: int | None) -> str | None:
    return None if c is None else f"{Decimal(c) / 100:.2f}"


def norm_tag(value: str) -> str:
    """Tag values compare across clouds' label rules (case, punctuation folded)."""
    return re.sub(r"[^a-z0-9]+", "-", value.lower()).strip("-")


def cost_tags(project: str, method: str) -> dict[str, str]:
    """The run-level cost tags ``render`` puts on every resource (``ptplan-project``,
    ``ptplan-method``); pools add ``ptplan-pool``, ``ptplan-phase``, ``ptplan-capacity-type``."""
    return {"ptplan-project": norm_tag(project), "ptplan-method": norm_tag(method)}


# ---- bills --------------------------------------------------------------------------------
def _bill_rows(path: Path) -> list[dict[str, Any]]:
    name = repr(str(path))
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"--bill: cannot read {name} ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"--bill {name}: not UTF-8 text (byte {exc.start}); export the bill "
                         "as UTF-8 CSV or JSON") from None
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"--bill {name}: not JSON ({exc.msg} at line {exc.lineno})") \
                from None
        if isinstance(data, dict):
            data = data.get("rows")
        if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
            raise InputError(f"--bill {name}: expected a list of rows (objects with usd and "
                             "tags) or {\"rows\": [...]}")
        return [{**(r.get("tags") or {}), **{k: v for k, v in r.items() if k != "tags"}}
                for r in data]
    if path.suffix.lower() != ".csv":
        raise InputError(f"--bill {name}: use a .csv or .json bill export")
    try:
        return list(csv.DictReader(text.splitlines()))
    except csv.Error as exc:
        raise InputError(f"--bill {name}: not a CSV file ({exc})") from None


def tag_spellings(project: str, method: str, prefix: str | None = None
                  ) -> dict[str, frozenset[str]]:
    """Every spelling a bill may carry for the run's tags: the values render writes on each
    platform (:data:`ptplan.planfile.tags.SANITIZE`; a name that had to change carries a hash
    of the original, so two projects never share a value), and ``ptplan-plan`` when the plan
    is known."""
    from ptplan.planfile.tags import SANITIZE

    out = {"ptplan-project": frozenset(f(project) for f in SANITIZE.values()),
           "ptplan-method": frozenset(f(method) for f in SANITIZE.values())}
    if prefix is not None:
        out["ptplan-plan"] = frozenset(f(prefix) for f in SANITIZE.values())
    return out


def bill_costs(path: Path, tags: dict[str, str],
               spellings: dict[str, frozenset[str]] | None = None) -> list[Cost]:
    """Costs per phase and capacity type from a bill's rows whose ``ptplan-project`` and
    ``ptplan-method`` tags are the run's; raises when no row matches.

    With ``spellings`` (:func:`tag_spellings`) a row matches only when its tags are spelled
    exactly as render wrote them for this run (and, where the row carries ``ptplan-plan``,
    for this plan): ``grpo#7b#math`` never takes the bill of ``grpo-7b-math``. Without, the
    values are compared folded (case and punctuation), as bills recorded by hand are."""
    name = repr(str(path))
    rows = _bill_rows(path)
    if not rows:
        raise InputError(f"--bill {name}: no rows")
    total: dict[tuple[str, str], int] = {}
    seen: set[str] = set()
    for i, row in enumerate(rows, start=1):
        amount = next((row[k] for k in ("usd", "cost_usd", "cost") if k in row), None)
        if amount is None:
            raise InputError(f"--bill {name}: row {i} has no usd (or cost_usd) column")
        project = norm_tag(str(row.get("ptplan-project", "")))
        seen.add(project or "(untagged)")
        if spellings is not None:
            # the project tag must be there; method and plan are checked where the row has them
            if not all(str(row[k]) in v if k in row else k != "ptplan-project"
                       for k, v in spellings.items()):
                continue
        elif project != tags["ptplan-project"] or \
                norm_tag(str(row.get("ptplan-method", tags["ptplan-method"]))) \
                != tags["ptplan-method"]:
            continue
        phase = str(row.get("ptplan-phase") or "all")
        cap = CAPACITY.get(norm_tag(str(row.get("ptplan-capacity-type") or "mixed")))
        if cap is None:
            raise InputError(f"--bill {name}: row {i}: ptplan-capacity-type "
                             f"{row.get('ptplan-capacity-type')!r}; use on-demand, spot, "
                             "reserved or mixed")
        try:
            phase = check_phase(phase)
        except ValueError as exc:
            raise InputError(f"--bill {name}: row {i}: {exc}") from None
        try:
            total[(phase, cap)] = total.get((phase, cap), 0) + cents(amount)
        except InputError as exc:
            raise InputError(f"--bill {name}: row {i}: {exc}") from None
    if not total:
        raise InputError(f"--bill {name}: no row's tags match the run (ptplan-project="
                         f"{tags['ptplan-project']}, ptplan-method={tags['ptplan-method']}); "
                         f"the bill's projects: {', '.join(sorted(seen))}")
    return [Cost.model_validate({"phase": p, "capacity_type": c, "usd": usd(v)})
            for (p, c), v in sorted(total.items())]


def merge_costs(parts: list[Cost]) -> list[Cost]:
    total: dict[tuple[str, str], int] = {}
    for c in parts:
        total[(c.phase, c.capacity_type)] = total.get((c.phase, c.capacity_type), 0) + cents(c.usd)
    return [Cost.model_validate({"phase": p, "capacity_type": k, "usd": usd(v)})
            for (p, k), v in sorted(total.items())]


# ---- writing and reading ------------------------------------------------------------------
def record(conn: Connection, run: RunRecord) -> None:
    """Insert a run with its costs and results (the caller's transaction)."""
    exists = conn.execute(sa.select(db.runs.c.id).where(db.runs.c.id == run.id)).first()
    if exists:
        raise InputError(f"run {run.id!r} is already in the ledger; record it under a new id")
    if run.repairs is not None:
        if run.repairs == run.id:
            raise InputError(f"--repairs: run {run.id!r} cannot repair itself")
        if conn.execute(sa.select(db.runs.c.id).where(db.runs.c.id == run.repairs)).first() \
                is None:
            raise InputError(f"--repairs: unknown run {run.repairs!r}"
                             f"{suggest(run.repairs, run_ids(conn))}; record the run it "
                             "repairs first")
    conn.execute(db.runs.insert().values(
        id=run.id, recorded_on=run.recorded_on, project=run.project, method=run.method,
        algorithm=run.algorithm, model_family=run.model_family, outcome=run.outcome,
        repairs=run.repairs,
        planned_cost_cents=None if run.planned_cost_usd is None else cents(run.planned_cost_usd),
        planned_hours=run.planned_hours,
        budget_cents=None if run.budget_usd is None else cents(run.budget_usd),
        wall_hours=run.wall_hours, node_hours=run.node_hours,
        tags=json.dumps(run.tags, sort_keys=True),
        plan=None if run.plan is None else json.dumps(run.plan, sort_keys=True),
        spec=run.spec, note=run.note))
    if run.costs:
        conn.execute(db.costs.insert(), [
            {"run_id": run.id, "phase": c.phase, "capacity_type": c.capacity_type,
             "cents": cents(c.usd)} for c in run.costs])
    if run.results:
        conn.execute(db.results.insert(), [
            {"run_id": run.id, "kind": r.kind, "name": r.name, "before": r.before,
             "after": r.after} for r in run.results])


def run_ids(conn: Connection) -> list[str]:
    return [r[0] for r in conn.execute(sa.select(db.runs.c.id).order_by(db.runs.c.id))]


def load_runs(conn: Connection, ids: list[str] | None = None) -> list[RunRecord]:
    """Runs in (recorded_on, id) order, with costs and results; unknown ids raise."""
    q = sa.select(db.runs).order_by(db.runs.c.recorded_on, db.runs.c.id)
    if ids:
        known = set(run_ids(conn))
        for i in ids:
            if i not in known:
                raise InputError(f"unknown run {i!r}{suggest(i, known)}; see `ptplan runs list`")
        q = q.where(db.runs.c.id.in_(ids))
    rows = conn.execute(q).mappings().all()
    want = [r["id"] for r in rows]
    cost_rows: dict[str, list[Cost]] = {i: [] for i in want}
    for c in conn.execute(sa.select(db.costs).order_by(db.costs.c.run_id, db.costs.c.phase,
                                                      db.costs.c.capacity_type)).mappings():
        if c["run_id"] in cost_rows:
            cost_rows[c["run_id"]].append(Cost.model_validate(
                {"phase": c["phase"], "capacity_type": c["capacity_type"],
                 "usd": usd(c["cents"])}))
    res_rows: dict[str, list[Result]] = {i: [] for i in want}
    for r in conn.execute(sa.select(db.results).order_by(db.results.c.run_id, db.results.c.kind,
                                                        db.results.c.name)).mappings():
        if r["run_id"] in res_rows:
            res_rows[r["run_id"]].append(Result(kind=r["kind"], name=r["name"],
                                                before=r["before"], after=r["after"]))
    return [RunRecord(
        id=r["id"], recorded_on=r["recorded_on"], project=r["project"], method=r["method"],
        algorithm=r["algorithm"], model_family=r["model_family"], outcome=r["outcome"],
        repairs=r["repairs"], planned_cost_usd=usd(r["planned_cost_cents"]),
        planned_hours=r["planned_hours"], budget_usd=usd(r["budget_cents"]),
        wall_hours=r["wall_hours"], node_hours=r["node_hours"], tags=json.loads(r["tags"]),
        costs=cost_rows[r["id"]], results=res_rows[r["id"]],
        plan=None if r["plan"] is None else json.loads(r["plan"]), spec=r["spec"],
        note=r["note"]) for r in rows]


def load_metrics(conn: Connection, run_id: str) -> list[Metric]:
    q = sa.select(db.metrics).where(db.metrics.c.run_id == run_id).order_by(
        db.metrics.c.name, db.metrics.c.step)
    return [Metric(name=m["name"], step=m["step"], source=m["source"], phase=m["phase"],
                   kind=m["kind"], value=m["value"]) for m in conn.execute(q).mappings()]


def parse_run(data: dict[str, Any], where: str) -> RunRecord:
    try:
        return RunRecord.model_validate(data)
    except ValidationError as exc:
        e = exc.errors()[0]
        loc = ".".join(str(x) for x in e["loc"]) or "run"
        raise InputError(f"{where}: {loc}: {e['msg']}") from None


def export_json(runs: list[RunRecord], metrics: dict[str, list[Metric]] | None = None) -> str:
    out = []
    for r in runs:
        d = r.model_dump(mode="json")
        if metrics is not None:
            d["metrics"] = [m.model_dump(mode="json") for m in metrics.get(r.id, [])]
        out.append(d)
    return json.dumps({"runs": out}, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


CSV_FIELDS = ("id", "recorded_on", "project", "method", "algorithm", "model_family", "outcome",
              "repairs", "planned_cost_usd", "actual_cost_usd", "planned_hours", "wall_hours",
              "node_hours", "budget_usd", "costs", "results")


def export_csv(runs: list[RunRecord]) -> str:
    """One row per run; ``costs`` as ``phase/capacity=usd;...``, ``results`` as
    ``kind:name=before>after;...``."""
    import io

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_FIELDS)
    for r in runs:
        w.writerow([r.id, r.recorded_on, r.project, r.method, r.algorithm or "", r.model_family,
                    r.outcome, r.repairs or "", r.planned_cost_usd or "", usd(r.actual_cents),
                    _num(r.planned_hours), _num(r.wall_hours), _num(r.node_hours),
                    r.budget_usd or "",
                    ";".join(f"{c.phase}/{c.capacity_type}={c.usd}" for c in r.costs),
                    ";".join(f"{x.kind}:{x.name}={x.before!r}>{x.after!r}" for x in r.results)])
    return buf.getvalue()


def _num(x: float | None) -> str:
    return "" if x is None else repr(x)


def store_metrics(conn: Connection, run_id: str, ms: list[Metric], replace: bool) -> None:
    """Add a run's metrics (the caller's transaction). Values already imported under the same
    names are refused unless ``replace``, which deletes those names first."""
    names = sorted({m.name for m in ms})
    have = {r[0] for r in conn.execute(
        sa.select(db.metrics.c.name).where(db.metrics.c.run_id == run_id,
                                           db.metrics.c.name.in_(names)).distinct())}
    if have and not replace:
        shown = ", ".join(sorted(have)[:4]) + (" ..." if len(have) > 4 else "")
        raise InputError(f"run {run_id!r} already has metrics {shown}; pass --replace to "
                         "replace them")
    if have:
        conn.execute(db.metrics.delete().where(db.metrics.c.run_id == run_id,
                                               db.metrics.c.name.in_(names)))
    conn.execute(db.metrics.insert(), [{"run_id": run_id, **m.model_dump()} for m in ms])
