"""``other_costs:``: costs beyond compute in the plan, its total and its budget (issue #25).

Fixed lines add to the total exactly and change nothing else; per-hour lines are billed for the
run's hours; they count against the budget (infeasible, exit 1, naming the budget); the verifier
recomputes them; a plan without them is schema 5 and has no such keys.
"""

from __future__ import annotations

import json
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import assert_one_line, example_dict

from ptplan.core.errors import InfeasibleError, InputError
from ptplan.planfile.schema import SCHEMA_VERSION, Plan
from ptplan.planfile.verify import verify_against_spec, verify_plan
from ptplan.planner.api import plan
from ptplan.providers.embedded import embedded_catalog
from ptplan.spec.project import ProjectSpec, parse_spec

ROOT = Path(__file__).resolve().parents[1]


def spec(other: dict[str, Any] | None, **top: Any) -> ProjectSpec:
    d = example_dict("grpo-7b.yaml")
    if other is not None:
        d["other_costs"] = other
    d.update(top)
    return parse_spec(d)


def planned(other: str) -> Plan:
    """Planned in the test that asks (not cached: a plan built once in mutmut's parent process
    would hide every mutant of the costing code, docs/testing.md)."""
    return plan(spec(json.loads(other)), embedded_catalog(), timings=False)


def test_fixed_costs_add_to_the_total_exactly() -> None:
    base = planned("null")
    fixed = planned(json.dumps({"data_collection_usd": 1234.56, "annotation_usd": 3000,
                                "ab_test_usd": 500}))
    # schema 8: every plan carries its 80 % interval (before it: 5 here, 6 with other costs)
    assert base.schema_version == SCHEMA_VERSION and base.other_costs is None
    assert fixed.schema_version == SCHEMA_VERSION
    assert Decimal(fixed.total_cost_usd) == Decimal(base.total_cost_usd) + Decimal("4734.56")
    assert fixed.other_cost_usd == "4734.56"
    assert fixed.compute_cost_usd == base.compute_cost_usd
    assert fixed.makespan_hours == base.makespan_hours
    assert [(i.name, i.basis, i.quantity) for i in fixed.other_costs or []] == [
        ("data_collection", "fixed", 1.0), ("annotation", "fixed", 1.0), ("ab_test", "fixed", 1.0)]
    assert verify_plan(fixed) == []
    assert verify_against_spec(fixed, spec({"data_collection_usd": 1234.56,
                                            "annotation_usd": 3000, "ab_test_usd": 500})) == []
    assert any("costs beyond compute" in line for line in fixed.explain.summary)


def test_review_per_sample_and_ops_per_hour() -> None:
    p = planned(json.dumps({"human_review_usd_per_sample": 0.5, "ops_usd_per_hour": 40}))
    lines = {i.name: i for i in p.other_costs or []}
    # eval: 300 steps // 25 = 12 runs x 500 prompts x 4 samples
    assert lines["human_review"].quantity == 12 * 500 * 4
    assert lines["human_review"].cost_usd == "12000.00"
    assert lines["ops"].quantity == p.makespan_hours
    assert Decimal(lines["ops"].cost_usd) == round(Decimal(40 * p.makespan_hours), 2)
    parts = sum(Decimal(x) for x in (p.compute_cost_usd, p.disk_cost_usd, p.storage_cost_usd,
                                     p.network_cost_usd, p.other_cost_usd or "0"))
    assert parts == Decimal(p.total_cost_usd)
    assert verify_plan(p) == []


def test_other_costs_count_against_the_budget() -> None:
    base = planned("null")
    budget = float(base.total_cost_usd) + 100.0
    s = spec({"annotation_usd": 200}, budget={"max_usd": budget})
    with pytest.raises(InfeasibleError) as info:
        plan(s, embedded_catalog(), timings=False)
    assert "budget" in str(info.value)
    assert info.value.exit_code == 1
    ok = plan(spec({"annotation_usd": 50}, budget={"max_usd": budget}), embedded_catalog(),
              timings=False)
    assert float(ok.total_cost_usd) <= budget


def test_verifier_catches_edited_lines() -> None:
    p = planned(json.dumps({"human_review_usd_per_sample": 0.5, "ops_usd_per_hour": 40}))
    d = p.model_dump(mode="json")
    d["other_costs"][1]["quantity"] = 1.0  # ops billed for 1 h
    d["other_cost_usd"] = "1.00"
    bad = Plan.model_validate(d)
    found = verify_plan(bad)
    assert any("ops is billed for 1 h" in v for v in found)
    assert any(v.startswith("totals: other costs") for v in found)
    assert any(v.startswith("totals: total") for v in found)
    d = p.model_dump(mode="json")
    d["other_costs"] = d["other_costs"][:1]
    d["other_cost_usd"] = d["other_costs"][0]["cost_usd"]
    assert any("other costs ['human_review'] != spec" in v for v in verify_against_spec(
        Plan.model_validate(d), spec({"human_review_usd_per_sample": 0.5,
                                      "ops_usd_per_hour": 40})))


def test_plan_json_round_trip_and_absent_keys() -> None:
    base = planned("null")
    assert "other_cost_usd" not in base.to_json() and "other_costs" not in base.to_json()
    p = planned(json.dumps({"annotation_usd": 10}))
    again = Plan.model_validate_json(p.to_json())
    assert again == p
    d = json.loads(p.to_json())
    d["schema_version"] = 5
    with pytest.raises(ValueError, match="other_costs needs schema 6"):
        Plan.model_validate(d)


@pytest.mark.parametrize(("other", "words"), [
    ({"annotation_usd": -1}, "other_costs.annotation_usd"),
    ({"ops_usd_per_hour": "ten"}, "other_costs.ops_usd_per_hour"),
    ({"annotation": 5}, "unknown key 'annotation'"),
])
def test_bad_other_costs_is_one_line(other: dict[str, Any], words: str) -> None:
    with pytest.raises(InputError) as info:
        spec(other)
    assert_one_line(str(info.value))
    assert words in str(info.value)


def test_review_without_samples_or_eval_is_rejected() -> None:
    d = example_dict("grpo-7b.yaml")
    d.pop("eval")
    d["other_costs"] = {"human_review_usd_per_sample": 1.0}
    with pytest.raises(InputError, match=r"set other_costs\.human_review_samples"):
        parse_spec(d)
    d["other_costs"]["human_review_samples"] = 300
    assert parse_spec(d).other_costs is not None


def test_cli_plan_shows_other_costs(tmp_path: Path) -> None:
    d = example_dict("grpo-7b.yaml")
    d["other_costs"] = {"annotation_usd": 3000, "ops_usd_per_hour": 40}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(d))
    r = subprocess.run([sys.executable, "-m", "ptplan.cli.app", "plan", str(path),
                        "--no-timings"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert "+ other $" in r.stdout and "annotation $3000.00" in r.stdout
    bad = tmp_path / "b.yaml"
    d["other_costs"] = {"annotation_usd": -3}
    bad.write_text(yaml.safe_dump(d))
    r = subprocess.run([sys.executable, "-m", "ptplan.cli.app", "plan", str(bad)],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_json_schema_validates_a_plan_with_other_costs() -> None:
    import jsonschema

    schema = Plan.model_json_schema()
    validator = jsonschema.Draft202012Validator(schema)
    p = json.loads(planned(json.dumps({"annotation_usd": 10, "ops_usd_per_hour": 1})).to_json())
    assert list(validator.iter_errors(p)) == []
    p["other_costs"][0]["basis"] = "per_fortnight"
    assert list(validator.iter_errors(p))


# ---- the cost model by hand (mutation survivors of optimizer/costs/other.py, docs/testing.md) --

def test_review_samples_without_eval_is_zero() -> None:
    """No ``eval`` block and no ``human_review_samples``: no evaluated sample to review, 0
    (docs/spec.md, ``other_costs.human_review_samples``: default every evaluated sample)."""
    from ptplan.costs.other import reviewed_samples
    from ptplan.demand.model import build_demand

    d = example_dict("grpo-7b.yaml")
    d.pop("eval")
    d["other_costs"] = {"annotation_usd": 10}
    assert reviewed_samples(build_demand(parse_spec(d))) == 0
    d["other_costs"]["human_review_samples"] = 300  # given: taken as is, eval or not
    assert reviewed_samples(build_demand(parse_spec(d))) == 300
    # with the example's eval: 300 steps // 25 = 12 runs x 500 prompts x 4 samples = 24,000
    assert reviewed_samples(build_demand(spec({"annotation_usd": 10}))) == 24_000


def test_sub_dollar_lines_are_kept_and_zero_lines_dropped() -> None:
    """Every positive amount is a line, however small: $0.50 + $0.40 + $0.99 fixed, review
    $0.01 x 24,000 samples = $240, ops $0.25/h; fixed = 0.50 + 0.40 + 0.99 + 240 = 241.89, so
    10 h cost 241.89 + 0.25 x 10 = 244.39. A zero amount is no line at all."""
    from ptplan.costs.other import other_cost_model
    from ptplan.demand.model import build_demand

    small = {"data_collection_usd": 0.5, "annotation_usd": 0.4, "ab_test_usd": 0.99,
             "human_review_usd_per_sample": 0.01, "ops_usd_per_hour": 0.25}
    m = other_cost_model(build_demand(spec(small)))
    assert m is not None
    assert [(x.name, x.basis, x.quantity, x.usd_per_unit) for x in m.lines] == [
        ("data_collection", "fixed", 1.0, 0.5), ("annotation", "fixed", 1.0, 0.4),
        ("ab_test", "fixed", 1.0, 0.99), ("human_review", "per_sample", 24_000.0, 0.01),
        ("ops", "per_hour", 0.0, 0.25)]
    assert m.fixed == pytest.approx(241.89)
    assert m.per_hour == pytest.approx(0.25)
    assert m.cost(10.0) == pytest.approx(244.39)
    assert list(m.cost([0.0, 4.0])) == pytest.approx([241.89, 242.89])
    assert [x.cost(10.0) for x in m.lines] == pytest.approx([0.5, 0.4, 0.99, 240.0, 2.5])
    zero = {"data_collection_usd": 0, "annotation_usd": 0, "ab_test_usd": 0,
            "human_review_usd_per_sample": 0, "ops_usd_per_hour": 0}
    none = other_cost_model(build_demand(spec(zero)))
    assert none is not None and none.lines == () and none.cost(10.0) == 0.0
    assert other_cost_model(build_demand(spec(None))) is None
