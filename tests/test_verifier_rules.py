"""Every rule of the verifier fires: ``ptplan check`` fails, naming the rule, on a valid plan with
exactly that invariant broken, and passes on the plan as it is.

The valid plans are the pinned example plans (``tests/golden/cli/plan-*.json``, the planner's own
output). Each case edits one figure so that only its rule's invariant breaks, runs ``ptplan
check`` through the CLI and asserts exit 1 and a ``violation: <family>`` line; the unbroken plan
exits 0. :func:`test_every_rule_has_a_firing_case` enumerates the rule functions (``RULES`` and
the spec check) and the rule family names the verifier's sources can print, so adding a rule
without a firing case here fails.
"""

from __future__ import annotations

import copy
import inspect
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from optimizer.cli.app import app
from optimizer.plan import rules_costs, rules_phases, rules_pools, verify
from optimizer.plan.schema import Plan

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden" / "cli"
GRPO = "plan-grpo-7b.json"
OPD = "plan-opd-8b-from-32b.json"
SFT = "plan-sft-8b.json"
runner = CliRunner()

Plan_ = dict[str, Any]


def _load(name: str) -> Plan_:
    return json.loads((GOLDEN / name).read_text(encoding="utf-8"))


def _pool(p: Plan_, name: str) -> dict[str, Any]:
    return next(x for x in p["pools"] if x["name"] == name)


def _phase(p: Plan_, name: str) -> dict[str, Any]:
    return next(x for x in p["phases"] if x["name"] == name)


def _item(items: list[dict[str, Any]], key: str, value: str) -> dict[str, Any]:
    return next(x for x in items if x[key] == value)


# ---- the breaks: each edits one figure of a valid plan -----------------------------------------

def b_pool_price(p: Plan_) -> None:
    """A pool's $/h is not the sum over its allocations."""
    _pool(p, "update")["usd_per_hour"] *= 1.1


def b_zone(p: Plan_) -> None:
    """A scoring (stateless, non-rollout) spot node outside the trainer's zone."""
    _pool(p, "scoring")["allocations"][0]["zone"] = p["zone"] + "-other"


def b_hold(p: Plan_) -> None:
    """A pool's idle hours are not held − busy."""
    _pool(p, "update")["idle_hours"] += 1.0


def b_coverage(p: Plan_) -> None:
    """The rollout phase does not process its tokens in its busy hours."""
    _phase(p, "rollout")["tokens"] *= 3


def b_latency_floor(p: Plan_) -> None:
    """A phase busy for less than its latency floor."""
    ph = _phase(p, "update")
    ph["latency_floor_hours"] = ph["busy_hours"] * 2


def b_spot_stateless(p: Plan_) -> None:
    """A spot rollout node with no interruption overhead (coverage still holds: more work)."""
    _pool(p, "rollout")["allocations"][0]["effective_fraction"] = 1.0


def b_spot_gang(p: Plan_) -> None:
    """The update pool (a gang) with an effective fraction below the gang model's 1 (no spot)."""
    _pool(p, "update")["allocations"][0]["effective_fraction"] = 1.0 - 1e-4
    ph = _phase(p, "update")  # keep coverage: the phase rate rises to make up for it
    ph["tokens_per_node_hour"] = ph["tokens_per_node_hour"] / (1.0 - 1e-4)


def b_memory(p: Plan_) -> None:
    """A replica needs more GPUs than the pool's nodes have."""
    _phase(p, "update")["replica_gpus"] = 64


def b_capacity(p: Plan_) -> None:
    """More scoring nodes than their offer's cap."""
    a = _pool(p, "scoring")["allocations"][0]
    a["max_nodes"] = a["nodes"] - 1


def b_capacity_spot(p: Plan_) -> None:
    """Spot where the pool does not allow it."""
    _pool(p, "scoring")["spot_ok"] = False


def b_makespan(p: Plan_) -> None:
    """The async run is not max(pool busy) + one step of fill."""
    p["fill_fraction"] = 0.5


def b_storage(p: Plan_) -> None:
    """An item billed below its tier's minimum duration (its cost still GB-months × price)."""
    _item(p["storage"], "data_class", "retained_checkpoints")["min_days"] = 90


def b_storage_price(p: Plan_) -> None:
    """An item whose cost is not GB-months × price + retrieval (the totals follow it)."""
    item = _item(p["storage"], "data_class", "hot_checkpoints")
    item["usd_per_gb_month"] *= 2


def b_network_path(p: Plan_) -> None:
    """Weight sync labelled cross-zone between two places in one zone."""
    _item(p["network"], "flow", "weight_sync")["path"] = "cross_zone"


def b_network_bytes(p: Plan_) -> None:
    """Weight sync moving fewer bytes than nodes × steps × W."""
    _item(p["network"], "flow", "weight_sync")["gb"] *= 0.5


def b_totals(p: Plan_) -> None:
    """The idle cost is not Σ pools' $/h × idle hours."""
    p["idle_cost_usd"] = f"{float(p['idle_cost_usd']) + 1:.2f}"


def b_totals_total(p: Plan_) -> None:
    """The total is not compute + storage + network (network forgotten is the same check)."""
    p["total_cost_usd"] = f"{float(p['total_cost_usd']) + 5:.2f}"


def b_deadline(p: Plan_) -> None:
    p["deadline_hours"] = p["makespan_hours"] / 2


def b_budget(p: Plan_) -> None:
    p["budget_usd"] = "1.00"


def b_policy(p: Plan_) -> None:
    """The policy the plan records forbids spot for rollout."""
    p["policy"]["phases"]["rollout"]["capacity_types"] = ["on_demand", "reserved"]


CASES: dict[str, tuple[str, Callable[[Plan_], None], str, Callable[..., list[str]]]] = {
    # case: (plan, break, family printed, rule function)
    "pool_accounting": (GRPO, b_pool_price, "pool_accounting", rules_pools.check_pool_accounting),
    "zones": (GRPO, b_zone, "zones", rules_pools.check_zones),
    "hold": (GRPO, b_hold, "hold", rules_pools.check_hold),
    "coverage": (GRPO, b_coverage, "coverage", rules_phases.check_coverage),
    "latency_floor": (GRPO, b_latency_floor, "coverage", rules_phases.check_latency_floors),
    "spot_stateless": (GRPO, b_spot_stateless, "spot_overhead",
                       rules_pools.check_spot_overheads),
    "spot_gang": (GRPO, b_spot_gang, "spot_overhead", rules_pools.check_spot_overheads),
    "memory": (GRPO, b_memory, "memory", rules_phases.check_memory_fit),
    "capacity": (GRPO, b_capacity, "capacity", rules_pools.check_capacity),
    "capacity_spot": (GRPO, b_capacity_spot, "capacity", rules_pools.check_capacity),
    "makespan": (GRPO, b_makespan, "makespan", rules_costs.check_makespan),
    "storage_min_days": (GRPO, b_storage, "storage", rules_costs.check_storage),
    "storage_price": (GRPO, b_storage_price, "storage", rules_costs.check_storage),
    "network_path": (GRPO, b_network_path, "network", rules_costs.check_network),
    "network_bytes": (GRPO, b_network_bytes, "network", rules_costs.check_network),
    "totals_idle": (GRPO, b_totals, "totals", rules_costs.check_totals),
    "totals_total": (SFT, b_totals_total, "totals", rules_costs.check_totals),
    "deadline": (OPD, b_deadline, "deadline", rules_costs.check_deadline_budget),
    "budget": (OPD, b_budget, "budget", rules_costs.check_deadline_budget),
    "policy": (GRPO, b_policy, "policy", verify.check_policy),
}
ONLY_FAMILY = {"storage_price": {"storage", "totals"}, "budget": {"budget", "policy"}}
"""Cases whose break legitimately shows in a second family: a dearer item moves the totals; the
policy's ``budget.stop_at`` is a share of the same budget."""


def _check(tmp_path: Path, data: Plan_, *extra: str) -> tuple[int, str]:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    result = runner.invoke(app, ["check", str(path), *extra])
    return result.exit_code, result.output


@pytest.mark.parametrize("name", sorted({c[0] for c in CASES.values()}))
def test_unbroken_plans_pass(name: str, tmp_path: Path) -> None:
    code, out = _check(tmp_path, _load(name))
    assert code == 0, out
    assert out.startswith("ok:")


@pytest.mark.parametrize("case", sorted(CASES))
def test_rule_fires_through_check(case: str, tmp_path: Path) -> None:
    plan_name, brk, family, rule = CASES[case]
    good = _load(plan_name)
    assert rule(Plan.model_validate(good)) == [], "the rule holds on the unbroken plan"
    bad = copy.deepcopy(good)
    brk(bad)
    code, out = _check(tmp_path, bad)
    assert code == 1, out
    lines = [x for x in out.splitlines() if x.startswith("violation: ")]
    assert lines, out
    fired = {re.match(r"violation: ([a-z_]+)", x).group(1) for x in lines}  # type: ignore
    assert family in fired, out
    # exactly that invariant: no other family fires
    assert fired <= ONLY_FAMILY.get(case, {family}), out
    got = rule(Plan.model_validate(bad))
    assert got and all(x.startswith((family, "totals")) for x in got), got


def test_spec_match_fires_with_spec(tmp_path: Path) -> None:
    """``check --spec``: the spec's deadline differs from the plan's (nothing else changed)."""
    spec = ROOT / "examples" / "sft-8b.yaml"
    good = _load(SFT)
    code, out = _check(tmp_path, good, "--spec", str(spec))
    assert code == 0, out
    bad = copy.deepcopy(good)
    bad["deadline_hours"] = (bad["deadline_hours"] or 0) + 10
    code, out = _check(tmp_path, bad, "--spec", str(spec))
    assert code == 1
    assert {x.split(":")[1].strip() for x in out.splitlines() if x.startswith("violation:")} \
        == {"spec_match"}, out
    assert "deadline" in out


def test_policy_option_fires(tmp_path: Path) -> None:
    """``check --policy``: a stricter policy than the plan was made under names its rule."""
    pol = tmp_path / "strict.yaml"
    pol.write_text("name: strict\nmax_spot_share: 0.0\n", encoding="utf-8")
    code, out = _check(tmp_path, _load(GRPO), "--policy", str(pol))
    assert code == 1, out
    assert "violation: policy strict: max_spot_share" in out


def test_no_pools_is_named(tmp_path: Path) -> None:
    bad = _load(SFT)
    bad["pools"] = []
    code, out = _check(tmp_path, bad)
    assert code == 1
    assert "violation: pool_accounting: the plan has no pools" in out


# ---- the enumeration ---------------------------------------------------------------------------

def _families_in_source() -> set[str]:
    """Rule family names the verifier's sources print: the word before ``: `` at the start of a
    string literal (``policy {line}`` for the policy family)."""
    found: set[str] = set()
    for mod in (rules_pools, rules_phases, rules_costs, verify):
        src = inspect.getsource(mod)
        found |= set(re.findall(r'f?"([a-z_]+): ', src))
        found |= set(re.findall(r'f"(policy) \{', src))
    return found


def test_every_rule_has_a_firing_case() -> None:
    rules = {f.__name__ for f in verify.RULES}
    covered = {c[3].__name__ for c in CASES.values()}
    assert rules - covered == set(), f"rules without a firing case: {rules - covered}"
    families = _families_in_source()
    fired = {c[2] for c in CASES.values()} | {"spec_match"}
    assert families, "no rule family found in the verifier's sources"
    assert families - fired == set(), f"rule families without a firing case: {families - fired}"
    # the module docstring lists the families too
    doc = verify.__doc__ or ""
    listed = set(re.findall(r"\* ``([a-z_]+)", doc))
    assert listed - fired - {"policy"} == set(), listed - fired
