"""What-if analysis (``optimizer/scenarios/``, ``ptplan whatif``): scenarios, sweeps against
independent full re-solves, break-even brackets, diffs, determinism, process pool and Ray.

Fixtures: the 1.5B GRPO spec and two-region lab catalog of ``tests/planner_fixtures.py``
(prices in their docstrings), small enough that one plan takes well under a second.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import assert_one_line
from planner_fixtures import small_catalog, small_spec
from typer.testing import CliRunner

from ptplan.cli.app import app
from ptplan.core.errors import InputError
from ptplan.planfile.schema import usd
from ptplan.planner.api import plan
from ptplan.policies.model import default_policy
from ptplan.providers.base import StorageTier
from ptplan.scenarios.analysis import exact_total_usd, signature, use_of
from ptplan.scenarios.breakeven import break_even
from ptplan.scenarios.diff import diff_plans
from ptplan.scenarios.pricerules import (
    apply_rules,
    make_rule,
    parse_partial,
    parse_rule,
    parse_selector,
)
from ptplan.scenarios.runner import Runner, Setup
from ptplan.scenarios.scenarios import Scenario, run_scenarios
from ptplan.scenarios.sweep import linspace, sweep, sweep_report

cli = CliRunner()
SPEC_DATA: dict[str, Any] = {
    "name": "grpo-1.5b-test", "method": "rl", "algorithm": "grpo",
    "model": {"params_b": 1.54, "layers": 28, "hidden_size": 1536, "heads": 12, "kv_heads": 2,
              "head_dim": 128},
    "data": {"steps": 200, "prompts_per_step": 256, "samples_per_prompt": 8,
             "prompt_tokens": 512, "response_tokens": 2048},
    "checkpoints": {"every_steps": 20},
    "sla": {"deadline_hours": 6},
    "placement": {"max_nodes_per_pool": 4},
}


def setup(**kw: Any) -> Setup:
    return Setup(small_spec(), small_catalog(), default_policy(), timings=False, **kw)


def fresh_plan(rules: list[str] | tuple, catalog=None):
    """An independent full re-solve: new catalog, new demand, no caches."""
    parsed = [r if not isinstance(r, str) else parse_rule(r) for r in rules]
    cat, _ = apply_rules(catalog or small_catalog(), parsed)
    return plan(small_spec(), cat, explain=False, timings=False, policy=default_policy())


def spot_nodes(p) -> int:
    return sum(a.nodes for pool in p.pools for a in pool.allocations
               if a.capacity_type == "spot")


@pytest.fixture(scope="module")
def serial_runner():
    with Runner(setup(), workers=1) as r:
        yield r


def test_spot_times_ten_moves_pools_off_spot(serial_runner: Runner) -> None:
    rep = run_scenarios(setup(), [Scenario("spot x10", (parse_rule("capacity_type=spot *= 10"),))],
                        serial_runner)
    from ptplan.planfile.schema import Plan

    base = Plan.model_validate(rep["baseline"])
    sc = rep["scenarios"][0]
    new = Plan.model_validate(sc["plan"])
    assert spot_nodes(base) > 0 and spot_nodes(new) == 0
    assert sc["delta_usd"] == usd(float(new.total_cost_usd) - float(base.total_cost_usd))
    ch = sc["changes"]
    moved = [m for m in ch["moves"] if m["capacity_type"] == "spot"]
    assert moved and all(m["scenario_nodes"] == 0 for m in moved)
    assert any("spot" in line and "-> 0 nodes" in line for line in ch["statements"])
    assert ch["makespan_hours"]["delta"] == pytest.approx(new.makespan_hours - base.makespan_hours)
    # per-pool deltas add up to the compute delta
    pool_sum = sum(float(r["delta_usd"]) for r in ch["pools"])
    assert pool_sum == pytest.approx(float(ch["compute_delta_usd"]), abs=0.011 * len(ch["pools"]))
    # the scenario plan equals an independent re-solve, and records its rule
    assert new == fresh_plan(["capacity_type=spot *= 10"])
    assert any("capacity_type=spot *= 10" in n for n in new.catalog["notes"])


def test_diff_of_identical_plans_is_empty(serial_runner: Runner) -> None:
    p = serial_runner.map([()])[0].plan
    assert p is not None
    d = diff_plans(p, p)
    assert d["moves"] == [] and d["total"]["delta_usd"] == "0.00" and d["same_allocation"]
    assert all(r["delta_usd"] == "0.00" for r in d["pools"] + d["phases"])
    assert abs(exact_total_usd(p) - float(p.total_cost_usd)) <= 0.005 + 1e-9


@pytest.mark.parametrize("swept, lo, hi", [("capacity_type=spot *=", 0.2, 3.0),
                                           ("gpu=H100,capacity_type=on_demand =", 5.0, 40.0)])
def test_sweep_equals_independent_full_resolves(serial_runner: Runner, swept: str, lo: float,
                                                hi: float) -> None:
    s = setup()
    sel, op = parse_partial(swept)
    values = linspace(lo, hi, 21)
    base, points = sweep(s, sel, op, values, serial_runner)
    rep = sweep_report(s, sel, op, base, points)
    assert rep["points_solved"] < len(values)  # some points were inferred
    assert rep["switches"], "the range should cross at least one plan switch"
    sample = sorted({0, 5, 13, 20}
                    | {values.index(sw["between"][1]) for sw in rep["switches"]})
    for i in sample:
        p = fresh_plan([make_rule(sel, op, values[i])])
        row = rep["points"][i]
        if row["solved"]:  # solved points are the very plan a fresh solve returns
            assert points[i].outcome.plan == p
        assert signature(p) == signature(points[i].outcome.plan if row["solved"] else
                                         points[row_source(points, i)].outcome.plan)
        assert abs(float(row["total_cost_usd"]) - float(p.total_cost_usd)) <= 0.01
        assert row["makespan_hours"] == pytest.approx(p.makespan_hours)


def row_source(points, i: int) -> int:
    return points[i].from_index


def test_sweep_inference_matches_every_point(serial_runner: Runner) -> None:
    s = setup()
    sel, op = parse_partial("gpu=L4 *=")
    values = linspace(0.1, 4.0, 17)
    b1, p1 = sweep(s, sel, op, values, serial_runner)
    b2, p2 = sweep(s, sel, op, values, serial_runner, every_point=True)
    r1, r2 = sweep_report(s, sel, op, b1, p1), sweep_report(s, sel, op, b2, p2)
    assert r2["points_solved"] == 17
    for a, b in zip(r1["points"], r2["points"], strict=True):
        assert a["summary"] == b["summary"] and a["switch"] == b["switch"]
        assert abs(float(a["total_cost_usd"]) - float(b["total_cost_usd"])) <= 0.01
        assert a["matched_quantity"] == pytest.approx(b["matched_quantity"])


def test_sweep_of_the_disk_rate_infers_what_it_solves() -> None:
    """A sweep of the block tier's rate: the points it infers (a known plan repriced, its
    disks included) equal the points solved one by one, totals to the cent, and the matched
    quantity is the disks' GB-months."""
    from dataclasses import replace

    tier = StorageTier("lab", "*", "nvme_block", 1.0, 0, 0.0, "block", "test", "U")
    cat = replace(small_catalog(), storage_tiers=(tier,))
    s = Setup(small_spec(), cat, default_policy(), timings=False)
    sel, op = parse_partial("storage.tier=nvme_block *=")
    values = linspace(0.0, 40.0, 9)
    with Runner(s, workers=1) as r:
        b1, p1 = sweep(s, sel, op, values, r)
        b2, p2 = sweep(s, sel, op, values, r, every_point=True)
    r1, r2 = sweep_report(s, sel, op, b1, p1), sweep_report(s, sel, op, b2, p2)
    assert r1["points_solved"] < len(values)
    for a, b in zip(r1["points"], r2["points"], strict=True):
        assert a["summary"] == b["summary"]
        assert abs(float(a["total_cost_usd"]) - float(b["total_cost_usd"])) <= 0.01
        assert a["matched_quantity"] == pytest.approx(b["matched_quantity"])
    top = p2[-1].outcome.plan
    assert r2["points"][-1]["matched_quantity"] == pytest.approx(
        sum(p.nodes * 200 * p.held_hours / 730.0 for p in top.pools))


def test_break_even_brackets_a_real_switch(serial_runner: Runner) -> None:
    s = setup()
    sel = parse_selector("capacity_type=spot")
    rep = break_even(s, sel, serial_runner, 0.5, 4.0, 2e-3)
    up = next(x for x in rep["sides"] if x["direction"] == "up")
    assert up["found"]
    a, b = up["multiplier_same"], up["multiplier_changed"]
    assert 1.0 < a < b <= 4.0 and b - a <= 2e-3
    # independent re-solves on both sides: the same side uses spot as the baseline does,
    # the changed side uses the matched offers differently
    same = fresh_plan([make_rule(sel, "*=", a)])
    changed = fresh_plan([make_rule(sel, "*=", b)])
    base = fresh_plan([])
    cat = small_catalog()
    assert use_of(same, sel, cat).key() == use_of(base, sel, cat).key()
    assert use_of(changed, sel, cat).key() != use_of(base, sel, cat).key()
    assert use_of(changed, sel, cat).spend_usd < use_of(same, sel, cat).spend_usd
    assert up["plan_same"] == same.model_dump(mode="json")
    assert up["plan_changed"] == changed.model_dump(mode="json")
    # where the two cost lines cross lies in the bracket; both plans cost the same there
    m = up["crossing_multiplier"]
    assert a - 1e-6 <= m <= b + 1e-6
    at_m = [fresh_plan([make_rule(sel, "*=", m)])]
    assert abs(float(at_m[0].total_cost_usd) - float(up["plan_same"]["total_cost_usd"])) < 0.05
    assert up["prices_same"] and all(v == pytest.approx(9.0 * a) or v == pytest.approx(9.9 * a)
                                     or v == pytest.approx(0.35 * a) or v == pytest.approx(
                                         0.385 * a) for v in up["prices_same"].values())


def test_break_even_none_in_range(serial_runner: Runner) -> None:
    rep = break_even(setup(), parse_selector("gpu=L40S"), serial_runner, 0.9, 1.1)
    assert [s["found"] for s in rep["sides"]] == [False, False]


def test_break_even_bad_range(serial_runner: Runner) -> None:
    with pytest.raises(InputError, match="around 1"):
        break_even(setup(), parse_selector("gpu=L4"), serial_runner, 2.0, 3.0)


def test_storage_rule_changes_storage_cost(serial_runner: Runner) -> None:
    from ptplan.costs.storage import tiers_for
    from ptplan.providers.embedded import embedded_catalog

    emb = embedded_catalog()
    tiers = tuple(t.__class__(**{**{f: getattr(t, f) for f in t.__slots__}, "provider": "lab"})
                  for t in emb.storage_tiers if t.provider == "aws")
    cat = small_catalog().__class__(**{**small_catalog().__dict__, "storage_tiers": tiers})
    assert tiers_for(cat, "lab", "r1")
    s = Setup(small_spec(), cat, default_policy(), timings=False)
    with Runner(s, workers=1) as r:
        rep = run_scenarios(s, [Scenario("s3 x3", (parse_rule("storage.tier=s3_* *= 3"),))], r)
    base, sc = rep["baseline"], rep["scenarios"][0]
    assert float(base["storage_cost_usd"]) > 0
    assert float(sc["changes"]["storage_delta_usd"]) > 0
    assert sc["effects"][0]["kind"] == "storage"


def test_block_tier_rule_reprices_the_boot_disks() -> None:
    """A what-if on the block tier (``storage.tier=ebs_gp3``) reprices every node's boot disk:
    the scenario's disk cost scales with the rate, the other storage does not move, and the
    changes table gets a ``boot disks`` row."""
    from dataclasses import replace

    from ptplan.providers.embedded import embedded_catalog
    from ptplan.scenarios.rows import change_rows

    tiers = tuple(replace(t, provider="lab") for t in embedded_catalog().storage_tiers
                  if t.provider == "aws")
    cat = replace(small_catalog(), storage_tiers=tiers)
    s = Setup(small_spec(), cat, default_policy(), timings=False)
    with Runner(s, workers=1) as r:
        rep = run_scenarios(s, [Scenario("disks x5", (parse_rule("storage.tier=ebs_gp3 *= 5"),))],
                            r)
    base, sc = rep["baseline"], rep["scenarios"][0]
    assert float(base["disk_cost_usd"]) > 0
    assert all(p["disk_tier"] == "ebs_gp3" for p in base["pools"])
    assert sc["changes"]["storage_delta_usd"] == "0.00"
    disks = sc["changes"]["disks"]
    assert disks["delta_usd"] == sc["changes"]["disks_delta_usd"]
    plan_s = sc["plan"]
    want = sum(p["nodes"] * 200 * 0.4 / 730.0 for p in plan_s["pools"]) * plan_s["makespan_hours"]
    assert float(disks["scenario_usd"]) == pytest.approx(want, abs=0.005 * len(plan_s["pools"]))
    assert all(p["disk_usd_per_gb_month"] == pytest.approx(0.4) for p in plan_s["pools"])
    _, rows = change_rows(sc["changes"])
    assert any(row[0] == "boot disks" and "$0.4/GB-month" in row[2] for row in rows), rows


@pytest.mark.fitted  # spawned workers load the stored fit: so does the in-process run
def test_results_do_not_depend_on_workers() -> None:
    """Process pool (spawn, 2 workers) vs in-process: same plans, same order, same bytes."""
    s = setup()
    scenarios = [Scenario(f"s{k}", (parse_rule(f"capacity_type=spot *= {m}"),))
                 for k, m in enumerate((0.5, 2.0, 10.0))]
    with Runner(s, workers=1) as r1:
        one = json.dumps(run_scenarios(s, scenarios, r1))
    with Runner(s, workers=2) as r2:
        assert r2.backend == "process"
        two = json.dumps(run_scenarios(s, scenarios, r2))
    assert one == two


def test_bad_workers() -> None:
    with pytest.raises(InputError, match="--workers"):
        Runner(setup(), workers=0)


# --------------------------------------------------------------------------- CLI


def write_inputs(tmp: Path) -> tuple[Path, Path]:
    spec = tmp / "spec.yaml"
    spec.write_text(yaml.safe_dump(SPEC_DATA), encoding="utf-8")
    rows = []
    for region, f in (("r1", 1.0), ("r2", 1.1)):
        rows += [
            {"provider": "lab", "region": region, "instance_type": "h100x8", "gpu": "H100",
             "gpus_per_node": 8, "on_demand_usd_per_hour": 20.0 * f, "max_nodes": 3},
            {"provider": "lab", "region": region, "zone": "a", "instance_type": "h100x8",
             "gpu": "H100", "gpus_per_node": 8, "spot_usd_per_hour": 9.0 * f,
             "spot_interruptions_per_hour": 0.002, "spot_max_nodes": 2},
            {"provider": "lab", "region": region, "instance_type": "l4x1", "gpu": "L4",
             "gpus_per_node": 1, "on_demand_usd_per_hour": 0.8 * f, "max_nodes": 3},
            {"provider": "lab", "region": region, "zone": "a", "instance_type": "l4x1",
             "gpu": "L4", "gpus_per_node": 1, "spot_usd_per_hour": 0.35 * f,
             "spot_interruptions_per_hour": 0.004, "spot_max_nodes": 2},
        ]
    cat = tmp / "lab.yaml"
    cat.write_text(yaml.safe_dump({"as_of": "2026-11-01", "name": "lab", "offers": rows,
                                   "storage_tiers": [{"provider": "lab", "tier": "disk",
                                                      "usd_per_gb_month": 0.05}]}),
                   encoding="utf-8")
    return spec, cat


def invoke(*args: str):
    return cli.invoke(app, ["whatif", *args])


def test_cli_whatif_json_deterministic(tmp_path: Path) -> None:
    spec, cat = write_inputs(tmp_path)
    args = [str(spec), "--catalog", str(cat), "--price", "capacity_type=spot *= 1.4",
            "--price", "gpu=L4 += 0.1", "--scenario", "cheap-h100: gpu=H100 *= 0.5",
            "--format", "json", "--no-timings", "--workers", "1"]
    r1, r2 = invoke(*args), invoke(*args)
    assert r1.exit_code == 0, r1.output
    assert r1.stdout == r2.stdout
    data = json.loads(r1.stdout)
    assert set(data) >= {"baseline", "scenarios"}
    assert [s["name"] for s in data["scenarios"]] == ["scenario 1", "cheap-h100"]
    assert data["scenarios"][0]["rules"] == ["capacity_type=spot *= 1.4", "gpu=L4 += 0.1"]
    for s in data["scenarios"]:
        assert set(s) >= {"rules", "plan", "delta_usd", "changes"}
        assert s["plan"]["solver"]["seconds"] == 0


def test_cli_whatif_table_and_markdown(tmp_path: Path) -> None:
    spec, cat = write_inputs(tmp_path)
    r = invoke(str(spec), "--catalog", str(cat), "--price", "capacity_type=spot *= 10",
               "--workers", "1")
    assert r.exit_code == 0, r.output
    assert "baseline" in r.stdout and "changes: scenario 1 vs baseline" in r.stdout
    r = invoke(str(spec), "--catalog", str(cat), "--price", "capacity_type=spot *= 10",
               "--workers", "1", "--format", "markdown")
    assert r.exit_code == 0 and r.stdout.startswith("# ptplan whatif: grpo-1.5b-test")


@pytest.mark.parametrize("args, needle", [
    (["--price", "gpus=H100 *= 2"], "unknown key 'gpus'"),
    (["--price", "gpu=B200 *= 2"], "matches no offer"),
    (["--price", "gpu=L4 += -5"], "negative"),
    (["--price", "gpu=L4 *= lots"], "is not a number"),
    ([], "nothing to compare"),
    (["--sweep", "gpu=L4 *=", "--from", "1"], "--sweep needs --from A --to B"),
    (["--sweep", "gpu=L4 *=", "--from", "1", "--to", "2", "--steps", "1"], "--steps"),
    (["--price", "gpu=L4 *= 2", "--from", "1"], "--from/--to: only with"),
    (["--sweep", "gpu=L4 *=", "--break-even", "gpu=L4"], "give one of them"),
    (["--price", "gpu=L4 *= 2", "--chart", "x.svg"], "--chart: only with --sweep"),
    (["--scenario", "a: gpu=L4 *= 2", "--scenario", "a: gpu=H100 *= 2"], "used twice"),
])
def test_cli_bad_input_exit_2_one_line(tmp_path: Path, args: list[str], needle: str) -> None:
    spec, cat = write_inputs(tmp_path)
    r = invoke(str(spec), "--catalog", str(cat), "--workers", "1", *args)
    assert r.exit_code == 2, r.output
    err = r.stderr.strip().splitlines()[-1]
    assert_one_line(err)
    assert err.startswith("error: ") and needle in err


def test_cli_sweep_chart_and_break_even(tmp_path: Path) -> None:
    spec, cat = write_inputs(tmp_path)
    charts = []
    for n in (1, 2):
        out = tmp_path / f"c{n}.svg"
        r = invoke(str(spec), "--catalog", str(cat), "--sweep", "capacity_type=spot *=",
                   "--from", "1", "--to", "3", "--steps", "11", "--chart", str(out),
                   "--format", "json", "--no-timings", "--workers", "1")
        assert r.exit_code == 0, r.output
        charts.append(out.read_bytes())
        data = json.loads(r.stdout)
    assert charts[0] == charts[1] and charts[0].startswith(b"<?xml")
    assert b"plan switch" in charts[0] or not data["switches"]
    assert len(data["points"]) == 11 and data["points"][0]["rule"] == "capacity_type=spot *= 1"
    png = tmp_path / "c.png"
    r = invoke(str(spec), "--catalog", str(cat), "--sweep", "gpu=L4 *=", "--from", "0.5",
               "--to", "2", "--steps", "4", "--chart", str(png), "--workers", "1")
    assert r.exit_code == 0, r.output
    assert png.read_bytes().startswith(b"\x89PNG") and "switch" in r.stdout
    r = invoke(str(spec), "--catalog", str(cat), "--break-even", "capacity_type=spot",
               "--from", "1", "--to", "3", "--tolerance", "0.05", "--workers", "1",
               "--format", "json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["kind"] == "break_even" and len(data["sides"]) == 2
    for side in data["sides"]:
        if side["found"]:
            lo, hi = side["bracket"]
            assert hi - lo <= 0.05 and side["plan_same"] != side["plan_changed"]


# --------------------------------------------------------------------------- Ray


@pytest.mark.ray
@pytest.mark.fitted  # Ray workers load the stored fit: so does the in-process run
def test_ray_backend_matches_local() -> None:
    """A local Ray instance started here (2 CPUs, no dashboard): same sweep as in-process."""
    ray = pytest.importorskip("ray")
    s = setup()
    sel, op = parse_partial("capacity_type=spot *=")
    values = linspace(0.5, 3.0, 4)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        with Runner(s, workers=2, ray_address="local") as r:
            assert r.backend == "ray"
            base, pts = sweep(s, sel, op, values, r, every_point=True)
            remote = sweep_report(s, sel, op, base, pts)
    finally:
        ray.shutdown()
    with Runner(s, workers=1) as r:
        base, pts = sweep(s, sel, op, values, r, every_point=True)
        local = sweep_report(s, sel, op, base, pts)
    assert json.dumps(remote) == json.dumps(local)


def _zoned_setup() -> tuple[Setup, Any]:
    """The zoned fixture of test_network: rollout spot in two zones of one region, so the
    cross-zone egress rate decides whether the rollout pool spreads over both zones."""
    from test_network import rollout_spec, zoned_catalog

    cat = zoned_catalog(cross_zone=0.0005)
    return Setup(rollout_spec(), cat, default_policy(), timings=False), cat


def test_egress_sweep_prices_network_items_exactly() -> None:
    """A sweep of the cross-zone rate: inferred points are priced with the plan's network GB
    at the swept rate and equal independent full re-solves; the plan stops spreading over
    zones as the rate rises."""
    from test_network import rollout_spec

    s, cat = _zoned_setup()
    sel, op = parse_partial("egress.path=cross_zone =")
    values = linspace(0.0, 0.02, 11)
    with Runner(s, workers=1) as r:
        base, points = sweep(s, sel, op, values, r)
        rep = sweep_report(s, sel, op, base, points)
        every_base, every = sweep(s, sel, op, values, r, every_point=True)
        rep_all = sweep_report(s, sel, op, every_base, every)
    assert rep["switches"], "the rate range should move the rollout pool into one zone"
    for row, full in zip(rep["points"], rep_all["points"], strict=True):
        assert abs(float(row["total_cost_usd"]) - float(full["total_cost_usd"])) <= 0.01
        assert row["summary"] == full["summary"]
    for i in (0, 5, 10):
        cat_i, _ = apply_rules(cat, [make_rule(sel, op, values[i])])
        fresh = plan(rollout_spec(), cat_i, explain=False, timings=False,
                     policy=default_policy())
        assert abs(float(rep["points"][i]["total_cost_usd"]) - float(fresh.total_cost_usd)) \
            <= 0.01
    cheap, dear = rep["points"][0], rep["points"][-1]
    assert cheap["matched_quantity"] > 0 and dear["matched_quantity"] == 0


def test_break_even_on_the_cross_zone_rate() -> None:
    s, _ = _zoned_setup()
    sel = parse_selector("egress.path=cross_zone")
    with Runner(s, workers=1) as r:
        rep = break_even(s, sel, r, 0.0, 200.0, 0.05)
    up = next(x for x in rep["sides"] if x["direction"] == "up")
    assert up["found"]
    assert up["use_same"]["quantity"] > 0 and up["use_changed"]["quantity"] == 0
    assert all(v > 0 for v in up["prices_same"].values())
