"""``ptplan guard --against expected|upper``: the budget's warn and stop thresholds set against
the upper end of the plan's 80 % interval (optimizer/spend/guard.py), by hand; never above the
budget's own; bad input one line, exit 2."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_guard import SERIES, metrics_file, plan, spend_file
from typer.testing import CliRunner

from ptplan.cli.app import app
from ptplan.core.errors import InputError
from ptplan.core.fit import model_interval
from ptplan.planfile.schema import Plan
from ptplan.spend.guard import LEVELS, decide, thresholds, upper_cost

runner = CliRunner()


def _no_budget(p: Plan) -> Plan:
    return p.model_copy(update={"budget_usd": None, "budget_warn_usd": None,
                                "budget_stop_usd": None})


def _with_interval(p: Plan, hi: Any, level: float = 0.8) -> Plan:
    unc = SimpleNamespace(level=level, total_cost_usd=["1.00", hi])
    return p.model_copy(update={"uncertainty": unc})


def _fallback_upper(p: Plan) -> float:
    """By hand: fixed costs unchanged, compute + boot disks (+ CPU pools) × the model's high."""
    total = float(p.total_cost_usd)
    timed = float(p.compute_cost_usd) + float(p.disk_cost_usd) + float(p.cpu_cost_usd or 0)
    return total - timed + timed * model_interval(p.method).high


def test_expected_is_the_default_and_unchanged() -> None:
    r = decide(plan(), SERIES, 3.0, 150, window=2)
    assert (r["warn_usd"], r["stop_usd"], r["against"]) == (800.0, 1000.0, "expected")
    assert r["thresholds_from"] == "the plan's budget"


def test_upper_without_a_budget_by_hand() -> None:
    p = _no_budget(plan())
    if getattr(p, "uncertainty", None) is not None:
        p = p.model_copy(update={"uncertainty": None})
    hi = _fallback_upper(p)
    assert hi > float(p.total_cost_usd)
    assert upper_cost(p)[1] == pytest.approx(hi)
    r = decide(p, SERIES, 3.0, 150, window=2, against="upper")
    assert (r["warn_usd"], r["stop_usd"]) == (round(hi * 0.8, 2), round(hi, 2))
    assert r["thresholds_from"].startswith("against the upper end of the model's 80 % interval")
    assert "no budget in the plan" in r["thresholds_from"] and r["against"] == "upper"
    # 130 $/h, 150 of 300 steps in 3 h: F = 390 + 130 * 3 = 780; ok against the total (929.07)
    # as against its upper end
    assert r["decision"] == "ok" and any("(against the upper end" in x for x in r["reasons"])


def test_upper_from_the_plans_own_interval() -> None:
    p = _with_interval(_no_budget(plan()), "1500.00")
    assert upper_cost(p)[1] == 1500.0
    warn, stop, basis = thresholds(p, "upper")
    assert (warn, stop) == (1200.0, 1500.0)
    assert basis == "against the upper end of the plan's 80 % interval, $1,500.00 " \
        "(no budget in the plan)"
    # F = 390 + 130 * 7 = 1300 (90 of 300 steps in 3 h): stop against the total (929.07),
    # warn against the upper end (1200 ≤ 1300 < 1500)
    assert decide(p, SERIES, 3.0, 90, window=2)["decision"] == "stop"
    r = decide(p, SERIES, 3.0, 90, window=2, against="upper")
    assert (r["forecast_usd"], r["decision"]) == (1300.0, "warn")


def test_upper_below_the_budget_and_capped_by_it() -> None:
    below = _with_interval(plan(), "900.00")   # budget 1000: the upper end is tighter
    assert thresholds(below, "upper") == (720.0, 900.0, "against the upper end of the plan's "
                                          "80 % interval, $900.00 (below the plan's budget)")
    above = _with_interval(plan(), "2000.00")  # the budget binds
    warn, stop, basis = thresholds(above, "upper")
    assert (warn, stop) == (800.0, 1000.0)
    assert basis.endswith("capped by the plan's budget (its stop $1,000.00)")


@settings(max_examples=200, deadline=None)
@given(hi=st.floats(1.0, 1e6), hours=st.floats(0.5, 8.0), steps=st.integers(1, 300),
       rate=st.floats(1.0, 500.0))
def test_upper_is_never_looser_than_the_budget(hi: float, hours: float, steps: int,
                                               rate: float) -> None:
    """With a budget, --against upper never raises a threshold above the budget's, so its
    decision is never milder than the default's."""
    p = _with_interval(plan(), f"{hi:.2f}")
    warn, stop, _ = thresholds(p, "upper")
    assert warn <= 800.0 and stop <= 1000.0
    series = [(float(h), rate * h) for h in range(1, 9)]
    a = decide(p, series, hours, steps, window=2)
    b = decide(p, series, hours, steps, window=2, against="upper")
    assert LEVELS[b["decision"]] >= LEVELS[a["decision"]]


@pytest.mark.parametrize("hi", ["nan", "inf", "-5", None, "x"])
def test_a_damaged_interval_is_refused(hi: Any) -> None:
    p = _with_interval(_no_budget(plan()), hi)
    with pytest.raises(InputError, match=r"uncertainty\.total_cost_usd"):
        decide(p, SERIES, 3.0, 150, window=2, against="upper")


def test_an_unknown_basis_is_refused() -> None:
    with pytest.raises(InputError, match="--against: unknown value 'lower'"):
        decide(plan(), SERIES, 3.0, 150, window=2, against="lower")


def _plan_file(tmp_path: Path, p: Plan) -> str:
    f = tmp_path / "plan.json"
    data = json.loads(p.model_dump_json())
    f.write_text(json.dumps(data))
    return str(f)


def test_cli_against_upper(tmp_path: Path) -> None:
    p = _no_budget(plan())
    f = _plan_file(tmp_path, p)
    args = ["guard", f, "--spend-from", str(spend_file(tmp_path, 3)), "--metrics",
            str(metrics_file(tmp_path, 100, 0.5)), "--window", "2"]
    exp = runner.invoke(app, [*args, "--format", "json"])
    up = runner.invoke(app, [*args, "--against", "upper", "--format", "json"])
    assert exp.exit_code == 11, exp.output
    re, ru = json.loads(exp.stdout), json.loads(up.stdout)
    assert re["against"] == "expected" and ru["against"] == "upper"
    hi = upper_cost(Plan.model_validate_json(Path(f).read_text()))[1]
    assert ru["stop_usd"] == round(hi, 2) and ru["stop_usd"] > re["stop_usd"]
    assert up.exit_code == (11 if hi <= 1170.0 else 10 if 0.8 * hi <= 1170.0 else 0)
    table = runner.invoke(app, [*args, "--against", "upper"])
    assert "against the upper end" in table.output  # the basis is printed
    assert "thresholds against the upper end" in table.stderr


@pytest.mark.parametrize("value", ["lower", "", "UPPER", "nan"])
def test_cli_bad_against_is_one_line_exit_2(tmp_path: Path, value: str) -> None:
    f = _plan_file(tmp_path, plan())
    res = runner.invoke(app, ["guard", f, "--spend-from", str(spend_file(tmp_path, 3)),
                              "--against", value])
    assert res.exit_code == 2
    lines = [x for x in res.output.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: --against") and \
        "Traceback" not in res.output


def test_nan_never_silences_upper() -> None:
    p = _with_interval(_no_budget(plan()), "1e308")
    r = decide(p, [(1.0, 1e308), (2.0, 1.7e308)], 2.0, 1, window=2, against="upper")
    assert r["decision"] == "stop" or not math.isfinite(r["forecast_usd"] or math.inf)
