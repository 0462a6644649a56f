"""``ptplan plan``, ``check`` and ``pareto`` through Typer's CliRunner.

The GRPO example takes about a second to plan, so its results are shared through module-scoped
fixtures.
"""

from __future__ import annotations

import copy
import datetime as dt
import itertools
import json
import os
import re
import subprocess
import sys
import tempfile
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import EXAMPLES, ROOT, example_dict
from planner_fixtures import small_spec
from typer.testing import CliRunner

from ptplan.cli.app import app

runner = CliRunner()
GRPO = str(EXAMPLES / "grpo-7b.yaml")
SFT = str(EXAMPLES / "sft-8b.yaml")
OPD = str(EXAMPLES / "opd-8b-from-32b.yaml")
MONEY = re.compile(r"^\d+\.\d{2}$")
CAPACITY_TYPES = {"on_demand", "spot", "reserved"}
TOP_KEYS = {
    "schema_version",
    "spec_name",
    "status",
    "total_cost_usd",
    "compute_cost_usd",
    "makespan_hours",
    "deadline_hours",
    "budget_usd",
    "pipeline_mode",
    "framework",
    "phases",
    "pools",
    "solver",
    "warnings",
    "catalog_as_of",
}
PHASE_KEYS = {"name", "precision", "gpu_hours", "cost_usd", "allocations"}
ALLOCATION_KEYS = {
    "provider",
    "region",
    "instance_type",
    "gpu",
    "gpus_per_node",
    "capacity_type",
    "nodes",
    "hours",
    "usd_per_hour",
    "cost_usd",
}


pytestmark = [pytest.mark.fitted, pytest.mark.shipped_framework]
"""``plan`` as shipped: the stored fit in this process and in the second process of the
byte-identity test alike (tests/conftest.py)."""

BOOT_DISK = {"aws": (0.08, "ebs_gp3"), "gcp": (0.10, "pd_balanced")}
"""The embedded catalog's boot-disk tier and $/GB-month per provider (providers/data)."""


def _invoke(*args: str) -> Any:
    return runner.invoke(app, list(args))


def _invoke_fd(*args: str) -> tuple[Any, bytes]:
    """Invoke, also capturing whatever reaches file descriptor 1 directly (C-level output such
    as a solver banner bypasses ``sys.stdout`` and so CliRunner's capture)."""
    sys.stdout.flush()
    with tempfile.TemporaryFile() as tmp:
        saved = os.dup(1)
        os.dup2(tmp.fileno(), 1)
        try:
            result = runner.invoke(app, list(args))
        finally:
            os.dup2(saved, 1)
            os.close(saved)
        tmp.seek(0)
        leaked = tmp.read()
    return result, leaked


def _ok(result: Any) -> Any:
    assert result.exit_code == 0, (result.exit_code, result.output, result.exception)
    assert "Traceback" not in result.output
    return result


def _json(result: Any) -> dict[str, Any]:
    return json.loads(_ok(result).stdout)


def _money(text: str) -> Decimal:
    assert isinstance(text, str) and MONEY.match(text), text
    return Decimal(text)


def _no_crash(result: Any) -> None:
    """Failures must be deliberate exits (typer.Exit -> SystemExit), never a stray exception."""
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    assert "Traceback" not in result.output and "Traceback" not in result.stderr


def _assert_error(result: Any, code: int, *expected: str) -> str:
    """Exit ``code``, nothing on stdout, one ``error:`` line (the last one) on stderr naming
    ``expected``. ``plan`` may print its one-line "planning ..." progress note first."""
    assert result.exit_code == code, (result.exit_code, result.output, result.exception)
    _no_crash(result)
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1 and lines[-1] == errors[0], result.stderr
    assert all(line.startswith(("error: ", "planning ")) for line in lines), result.stderr
    for text in expected:
        assert text in errors[0], (text, errors[0])
    return errors[0]


def _write_yaml(path: Path, data: dict[str, Any]) -> str:
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return str(path)


def _write_json(path: Path, data: dict[str, Any]) -> str:
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return str(path)


# ----------------------------------------------------------------------------- shared runs
@pytest.fixture(scope="module")
def grpo_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The GRPO example planned as JSON on stdout in-process and in a fresh interpreter (another
    hash seed; HiGHS prints its banner once per process, so only a fresh process shows for sure
    that none reaches stdout), and once more with -o."""
    first, leaked = _invoke_fd("plan", GRPO, "--format", "json", "--no-timings")
    second = subprocess.run(
        [sys.executable, "-m", "ptplan.cli.app", "plan", GRPO, "--format", "json",
         "--no-timings"],
        cwd=ROOT,
        capture_output=True,
        timeout=120,
        check=False,
    )
    out = tmp_path_factory.mktemp("grpo") / "sub" / "plan.json"
    written = _invoke("plan", GRPO, "--format", "json", "--no-timings", "-o", str(out))
    return {"first": first, "leaked": leaked, "second": second, "written": written, "file": out}


@pytest.fixture(scope="module")
def grpo_plan(grpo_runs: dict[str, Any]) -> dict[str, Any]:
    return _json(grpo_runs["first"])


@pytest.fixture(scope="module")
def grpo_file(grpo_runs: dict[str, Any]) -> Path:
    result = _ok(grpo_runs["written"])
    assert result.stdout == ""
    assert "wrote" in result.stderr and str(grpo_runs["file"]) in result.stderr
    assert grpo_runs["file"].is_file()
    return grpo_runs["file"]


@pytest.fixture(scope="module")
def grpo_text() -> dict[str, str]:
    out: dict[str, str] = {}
    for key, args in {
        "table_explain": ("--format", "table", "--explain"),
        "markdown": ("--format", "markdown"),
    }.items():
        out[key] = _ok(_invoke("plan", GRPO, *args)).stdout
    return out


# ----------------------------------------------------------------------------- plan JSON
def test_plan_json_stdout_is_only_json(grpo_runs: dict[str, Any]) -> None:
    result = _ok(grpo_runs["first"])
    assert result.stdout.startswith("{") and result.stdout.endswith("}\n")
    json.loads(result.stdout)  # the whole of stdout parses: nothing else was printed to it
    assert grpo_runs["leaked"] == b"", grpo_runs["leaked"][:300]  # e.g. a HiGHS banner on fd 1
    assert "planning grpo-7b-math" in result.stderr  # progress goes to stderr
    proc = grpo_runs["second"]
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-2000:]
    assert proc.stdout.startswith(b"{"), proc.stdout[:300]  # no solver banner in front
    json.loads(proc.stdout)
    assert b"planning grpo-7b-math" in proc.stderr


def test_plan_json_is_byte_identical_across_runs(
    grpo_runs: dict[str, Any], grpo_file: Path
) -> None:
    a = _ok(grpo_runs["first"]).stdout
    assert grpo_runs["second"].stdout == a.encode("utf-8")  # another process, same bytes
    assert grpo_file.read_text(encoding="utf-8") == a


def test_plan_json_documented_keys(grpo_plan: dict[str, Any]) -> None:
    p = grpo_plan
    assert set(p) >= TOP_KEYS, TOP_KEYS - set(p)
    assert p["schema_version"] == 9  # 8: its 80 % interval; 9: the framework it was made for
    assert p["framework"] == "verl==0.9"  # the spec sets none: the default release
    assert p["calibration"] == []  # the example measures nothing: the model is uncalibrated
    assert p["spec_name"] == "grpo-7b-math"
    assert p["status"] == "optimal"
    assert p["pipeline_mode"] in {"colocated", "sync", "async"}
    assert p["deadline_hours"] == 72
    assert _money(p["budget_usd"]) == Decimal("25000.00")
    total = _money(p["total_cost_usd"])
    # the printed parts add up to the printed total, to the cent (compute takes the rounding)
    assert _money(p["compute_cost_usd"]) + _money(p["disk_cost_usd"]) + \
        _money(p["storage_cost_usd"]) + _money(p["network_cost_usd"]) == total
    # schema 4: each pool's boot disks, nodes x GB x $/GB-month / 730 for the run
    disks = Decimal(0)
    usd_gb_month, tier = BOOT_DISK[p["provider"]]
    for pool in p["pools"]:
        assert pool["boot_disk_gb"] == 200 and pool["disk_tier"] == tier
        rate = pool["nodes"] * 200 * usd_gb_month / 730.0
        assert pool["disk_usd_per_hour"] == pytest.approx(rate, abs=1e-9)
        assert _money(pool["disk_cost_usd"]) == _money(f"{rate * p['makespan_hours']:.2f}")
        disks += _money(pool["disk_cost_usd"])
    assert abs(disks - _money(p["disk_cost_usd"])) <= Decimal("0.005") * len(p["pools"])
    # each item and the total are rounded to cents separately: half a cent each at most
    items = sum(_money(i["cost_usd"]) for i in p["storage"])
    assert abs(items - _money(p["storage_cost_usd"])) <= Decimal("0.005") * (len(p["storage"]) + 1)
    assert 0 < total <= Decimal(p["budget_usd"])
    assert 0 < p["makespan_hours"] <= p["deadline_hours"]
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", p["catalog_as_of"])
    assert isinstance(p["warnings"], list) and all(isinstance(w, str) for w in p["warnings"])
    solver = p["solver"]
    assert {"name", "status", "gap", "seconds"} <= set(solver)
    assert solver["name"] == "highs" and solver["status"] == "optimal"
    assert 0 <= solver["gap"] <= 1e-4
    assert solver["seconds"] == 0  # --no-timings
    names = [ph["name"] for ph in p["phases"]]
    assert {"rollout", "scoring", "update"} <= set(names)
    for ph in p["phases"]:
        assert set(ph) >= PHASE_KEYS, (ph["name"], PHASE_KEYS - set(ph))
        assert ph["gpu_hours"] >= 0
        _money(ph["cost_usd"])
        assert ph["allocations"], ph["name"]
        for a in ph["allocations"]:
            assert set(a) >= ALLOCATION_KEYS, ALLOCATION_KEYS - set(a)
            assert a["capacity_type"] in CAPACITY_TYPES
            assert a["nodes"] >= 1 and a["gpus_per_node"] >= 1
            assert a["usd_per_hour"] >= 0
            _money(a["cost_usd"])
    # schema 3: phases record the layout they were priced with, on their pool's GPUs
    gpus = {pool["name"]: pool["nodes"] * pool["gpus_per_node"] for pool in p["pools"]}
    layouts = {ph["name"]: ph["parallel_layout"] for ph in p["phases"]
               if ph.get("parallel_layout") is not None}
    assert "update" in layouts and layouts["update"]["zero_stage"] in (1, 3)
    for ph in p["phases"]:
        lay = ph.get("parallel_layout")
        if lay is not None:
            assert set(lay) == {"tp", "cp", "pp", "dp", "zero_stage", "optimizer_offload"}
            assert 1 <= lay["tp"] * lay["cp"] * lay["pp"] * lay["dp"] <= gpus[ph["pool"]]
    assert p["pools"]
    for pool in p["pools"]:
        assert pool["allocations"]
        assert sum(a["nodes"] for a in pool["allocations"]) == pool["nodes"]
        for a in pool["allocations"]:
            assert set(a) >= ALLOCATION_KEYS
            assert a["capacity_type"] in CAPACITY_TYPES
            assert a["hours"] == pytest.approx(p["makespan_hours"])


def test_plan_total_is_sum_of_pool_costs(grpo_plan: dict[str, Any]) -> None:
    pools = sum(_money(pool["cost_usd"]) for pool in grpo_plan["pools"])
    # each pool rounded to the cent; compute is the balance of four rounded figures
    slack = Decimal("0.005") * len(grpo_plan["pools"]) + Decimal("0.0201")
    assert abs(pools - _money(grpo_plan["compute_cost_usd"])) <= slack
    disks = sum(_money(pool["disk_cost_usd"]) for pool in grpo_plan["pools"])
    total = pools + disks + _money(grpo_plan["storage_cost_usd"])
    assert abs(total - _money(grpo_plan["total_cost_usd"])) <= Decimal("0.005") * (
        2 * len(grpo_plan["pools"]) + 2)
    for pool in grpo_plan["pools"]:
        allocs = sum(_money(a["cost_usd"]) for a in pool["allocations"])
        assert abs(allocs - _money(pool["cost_usd"])) <= Decimal("0.01") * len(pool["allocations"])


def test_rl_update_never_on_spot(grpo_plan: dict[str, Any]) -> None:
    update = [pool for pool in grpo_plan["pools"] if "update" in pool["phases"]]
    assert len(update) == 1
    assert all(a["capacity_type"] != "spot" for a in update[0]["allocations"])


# ----------------------------------------------------------------------------- check
def test_written_plan_passes_check(grpo_file: Path) -> None:
    result = _ok(_invoke("check", str(grpo_file)))
    assert result.stdout.startswith("ok: ") and "consistent" in result.stdout
    result = _ok(_invoke("check", str(grpo_file), "--spec", GRPO))
    assert result.stdout.startswith("ok: ")


def _halve_nodes(p: dict[str, Any]) -> None:
    alloc = max((a for pool in p["pools"] for a in pool["allocations"]), key=lambda a: a["nodes"])
    alloc["nodes"] = alloc["nodes"] // 2 if alloc["nodes"] >= 2 else 2  # 1 node: double it


def _tokens_x10(p: dict[str, Any]) -> None:
    for ph in p["phases"]:
        if ph["name"] == "rollout":
            ph["tokens"] *= 10


def _deadline_1h(p: dict[str, Any]) -> None:
    p["deadline_hours"] = 1


def _update_on_spot(p: dict[str, Any]) -> None:
    pool = next(pool for pool in p["pools"] if "update" in pool["phases"])
    pool["allocations"][0]["capacity_type"] = "spot"


def _budget_1usd(p: dict[str, Any]) -> None:
    p["budget_usd"] = "1.00"


@pytest.mark.parametrize(
    "tamper,rule,spec_rule",
    [
        (_halve_nodes, "pool_accounting", None),
        (_tokens_x10, "coverage", "spec_match"),
        (_deadline_1h, "deadline", "spec_match"),
        (_update_on_spot, "capacity", None),
        (_budget_1usd, "budget", None),
    ],
)
def test_check_reports_tampering(
    grpo_plan: dict[str, Any], tmp_path: Path, tamper: Any, rule: str, spec_rule: str | None
) -> None:
    data = copy.deepcopy(grpo_plan)
    tamper(data)
    path = _write_json(tmp_path / "tampered.json", data)
    for extra, rules in (((), [rule]), (("--spec", GRPO), [rule, spec_rule or rule])):
        result = _invoke("check", path, *extra)
        assert result.exit_code == 1, (result.exit_code, result.output, result.exception)
        _no_crash(result)
        lines = result.stdout.splitlines()
        assert lines and all(line.startswith("violation: ") for line in lines), result.stdout
        for r in rules:
            assert any(line.startswith(f"violation: {r}:") for line in lines), (r, lines)
        assert re.search(rf"^{len(lines)} violation\(s\) in ", result.stderr), result.stderr


def test_check_against_another_spec_reports_spec_match(grpo_file: Path, tmp_path: Path) -> None:
    other = example_dict("grpo-7b.yaml")
    other["name"] = "someone-else"
    other["data"]["steps"] = 600
    result = _invoke("check", str(grpo_file), "--spec", _write_yaml(tmp_path / "o.yaml", other))
    assert result.exit_code == 1, (result.exit_code, result.output)
    _no_crash(result)
    assert "violation: spec_match: plan is for 'grpo-7b-math'" in result.stdout
    assert "violation: spec_match: the spec changed" in result.stdout
    assert "violation: spec_match: phase rollout tokens" in result.stdout


def test_check_rejects_a_spec_yaml() -> None:
    _assert_error(_invoke("check", GRPO), 2, "grpo-7b.yaml", "unknown key")


@pytest.mark.parametrize("key", ["pools", "solver", "total_cost_usd"])
def test_check_rejects_a_plan_missing_a_key(
    grpo_plan: dict[str, Any], tmp_path: Path, key: str
) -> None:
    data = copy.deepcopy(grpo_plan)
    del data[key]
    path = _write_json(tmp_path / "partial.json", data)
    _assert_error(_invoke("check", path), 2, "partial.json", key, "missing")


def test_check_rejects_non_plan_files(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"schema_version": 1,', encoding="utf-8")
    _assert_error(_invoke("check", str(broken)), 2, "broken.json", "not valid")
    listing = tmp_path / "list.json"
    listing.write_text("[1, 2]", encoding="utf-8")
    _assert_error(_invoke("check", str(listing)), 2, "list.json", "mapping")
    _assert_error(_invoke("check", str(tmp_path / "nope.json")), 2, "nope.json", "not found")


def test_check_rejects_wrong_types(grpo_plan: dict[str, Any], tmp_path: Path) -> None:
    data = copy.deepcopy(grpo_plan)
    data["makespan_hours"] = "soon"
    path = _write_json(tmp_path / "typed.json", data)
    _assert_error(_invoke("check", path), 2, "makespan_hours")


# ----------------------------------------------------------------------------- plan schema
def test_schema_plan_validates_a_real_plan(grpo_plan: dict[str, Any]) -> None:
    import jsonschema

    result = _invoke("schema", "plan")
    assert result.exit_code == 0, result.output
    schema = json.loads(result.stdout)
    assert schema["additionalProperties"] is False
    assert schema["properties"]["schema_version"]["enum"] == [1, 2, 3, 4, 5, 6, 7, 8, 9]
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    assert list(validator.iter_errors(grpo_plan)) == []
    # the closed vocabularies are in the schema: another capacity type, path or status fails
    for mutate in (
        lambda p: p["pools"][0]["allocations"][0].update(capacity_type="spotty"),
        lambda p: p["solver"].update(status="fine"),
        lambda p: p.update(status="fine"),
        lambda p: p.pop("lifecycle"),  # schema 3 requires lifecycle
        lambda p: p["phases"][0].update(parallel_layout={"tp": "two"}),
    ):
        bad = copy.deepcopy(grpo_plan)
        mutate(bad)
        assert list(validator.iter_errors(bad)), bad.get("status")
    if grpo_plan["network"]:
        bad = copy.deepcopy(grpo_plan)
        bad["network"][0]["path"] = "teleport"
        assert list(validator.iter_errors(bad))
    # a schema-2 plan (no parallel layouts or calibration records) is valid ...
    older = copy.deepcopy(grpo_plan)
    older["schema_version"] = 2
    del older["calibration"]
    for ph in older["phases"]:
        ph.pop("parallel_layout", None)
    assert list(validator.iter_errors(older)) == []
    # ... and so is a schema-1 plan without lifecycle (written before it was recorded)
    old = copy.deepcopy(grpo_plan)
    old["schema_version"] = 1
    del old["lifecycle"]
    assert list(validator.iter_errors(old)) == []


def test_plan_enums_serialise_as_before(grpo_plan: dict[str, Any]) -> None:
    from ptplan.planfile.schema import CapacityType, Plan, Status

    plan = Plan.model_validate(grpo_plan)
    alloc = plan.pools[0].allocations[0]
    assert isinstance(alloc.capacity_type, CapacityType) and isinstance(plan.status, Status)
    assert plan.status == "optimal" and alloc.capacity_type in CAPACITY_TYPES
    assert json.loads(plan.to_json()) == grpo_plan  # the same strings, byte for byte
    assert plan.to_json() == json.dumps(grpo_plan, indent=2, ensure_ascii=False) + "\n"


def test_check_reads_schema1_plans_and_refuses_unknown_versions(
    grpo_plan: dict[str, Any], tmp_path: Path
) -> None:
    old = copy.deepcopy(grpo_plan)
    old["schema_version"] = 1
    del old["lifecycle"]  # schema-1 plans written before plans recorded it
    del old["uncertainty"]  # and before the 80 % interval (schema 8)
    del old["framework"]  # and before the framework it was made for (schema 9)
    result = _ok(_invoke("check", _write_json(tmp_path / "v1.json", old)))
    assert result.stdout.startswith("ok:")
    v2 = copy.deepcopy(grpo_plan)
    v2["schema_version"] = 2  # written before phases recorded their parallel layout
    del v2["uncertainty"], v2["framework"]
    for ph in v2["phases"]:
        ph.pop("parallel_layout", None)
    assert _ok(_invoke("check", _write_json(tmp_path / "v2-ok.json", v2))).stdout \
        .startswith("ok:")
    v3 = copy.deepcopy(grpo_plan)
    v3["schema_version"] = 3  # written before boot disks were priced: no disk figures
    del v3["uncertainty"], v3["framework"]
    v3["total_cost_usd"] = f"{float(v3['total_cost_usd']) - float(v3.pop('disk_cost_usd')):.2f}"
    for pool in v3["pools"]:
        for key in ("boot_disk_gb", "disk_tier", "disk_usd_per_gb_month", "disk_usd_per_hour",
                    "disk_cost_usd"):
            pool.pop(key)
    assert _ok(_invoke("check", _write_json(tmp_path / "v3-ok.json", v3))).stdout \
        .startswith("ok:")
    newer = copy.deepcopy(grpo_plan)
    newer["schema_version"] = 10
    _assert_error(_invoke("check", _write_json(tmp_path / "v10.json", newer)), 2, "v10.json",
                  "schema 10", "upgrade ptplan", "ptplan plan SPEC --format json")
    partial = copy.deepcopy(grpo_plan)
    del partial["lifecycle"]
    _assert_error(_invoke("check", _write_json(tmp_path / "v2.json", partial)), 2, "v2.json",
                  "lifecycle is missing", "ptplan plan SPEC --format json")


# Plan files that once crashed `check` with a traceback (regressions): each must be reported as
# violations (exit 1) or a one-line input error (exit 2).
def _sft_spec(p: dict[str, Any]) -> tuple[str, ...]:
    return ("--spec", SFT)  # another method's spec: once a ZeroDivisionError (no rollout in SFT)


def _unknown_pool(p: dict[str, Any]) -> tuple[str, ...]:
    p["phases"][0]["pool"] = "nosuch"  # once a KeyError with --spec
    return ("--spec", GRPO)


def _no_pools(p: dict[str, Any]) -> tuple[str, ...]:
    p["pools"] = []  # once max() of an empty sequence (async plan)
    p["pipeline_mode"] = "async"
    return ()


def _money_not_a_number(p: dict[str, Any]) -> tuple[str, ...]:
    p["budget_usd"] = "lots"  # once decimal.InvalidOperation
    return ()


def _empty_spot_model(p: dict[str, Any]) -> tuple[str, ...]:
    p["spot_model"] = {}  # once a KeyError
    return ()


@pytest.mark.parametrize(
    "mutate", [_sft_spec, _unknown_pool, _no_pools, _money_not_a_number, _empty_spot_model]
)
def test_check_never_crashes(grpo_plan: dict[str, Any], tmp_path: Path, mutate: Any) -> None:
    data = copy.deepcopy(grpo_plan)
    extra = mutate(data)
    path = _write_json(tmp_path / "odd.json", data)
    result = _invoke("check", path, *extra)
    _no_crash(result)
    assert result.exit_code in (1, 2)
    assert result.stdout.startswith("violation: ") or result.stderr.startswith("error: ")


# ----------------------------------------------------------------------------- text formats
_CAPACITY_CELL = re.compile(r"│\s*(on_demand|spot|reserved)\s*│")
EXPLAIN_SECTIONS = ("binding:", "marginal:", "alternatives")


def test_plan_table_has_a_row_per_pool_and_a_total(
    grpo_plan: dict[str, Any], grpo_text: dict[str, str]
) -> None:
    text = grpo_text["table_explain"]
    pools = grpo_plan["pools"]
    rows = [line for line in text.splitlines()
            if any(re.match(rf"│\s*{p['name']}\s*│", line) for p in pools)]
    assert len(rows) == len(pools), rows
    for row, pool in zip(rows, pools, strict=True):
        assert pool["cost_usd"] in row and pool["idle_cost_usd"] in row
        for a in pool["allocations"]:
            assert a["instance_type"] in row and a["capacity_type"] in row
    totals = [line for line in text.splitlines() if re.match(r"│\s*total\s*│", line)]
    assert len(totals) == 1, text
    assert grpo_plan["total_cost_usd"] in totals[0]
    nodes = sum(pool["nodes"] for pool in grpo_plan["pools"])
    assert re.search(rf"│\s*{nodes}\s*│", totals[0]), totals[0]


def test_plan_markdown_is_a_markdown_table(
    grpo_plan: dict[str, Any], grpo_text: dict[str, str]
) -> None:
    text = grpo_text["markdown"]
    lines = text.splitlines()
    assert lines[0] == "# ptplan plan: grpo-7b-math"
    table = [line for line in lines if line.startswith("|")]
    header, sep, *rows = table
    columns = header.count("|") - 1
    assert columns >= 5 and header.startswith("| pool |")
    assert re.fullmatch(r"\|(---\|)+", sep) and sep.count("|") - 1 == columns
    assert all(r.endswith("|") and r.count("|") - 1 == columns for r in rows)
    storage_rows = 1 if grpo_plan["storage"] else 0
    network_rows = 1 if grpo_plan["network"] else 0
    # pools, disks, storage, network, total
    assert len(rows) == len(grpo_plan["pools"]) + 1 + storage_rows + network_rows + 1
    disks = rows[len(grpo_plan["pools"])]
    assert disks.startswith("| disks |") and grpo_plan["disk_cost_usd"] in disks \
        and BOOT_DISK[grpo_plan["provider"]][1] in disks
    if storage_rows:
        row = rows[-2 - network_rows]
        assert row.startswith("| storage |") and grpo_plan["storage_cost_usd"] in row
    if network_rows:
        assert rows[-2].startswith("| network |") and grpo_plan["network_cost_usd"] in rows[-2]
    assert rows[-1].startswith("| total |") and grpo_plan["total_cost_usd"] in rows[-1]
    assert "│" not in text and "┃" not in text  # no box drawing in markdown
    assert any(line.startswith("- makespan ") for line in lines)  # footer as a list


def test_plan_explain_adds_sections(grpo_plan: dict[str, Any], grpo_text: dict[str, str]) -> None:
    plain = grpo_text["markdown"]
    assert not any(s in plain for s in EXPLAIN_SECTIONS), "sections without --explain"
    lines = grpo_text["table_explain"].splitlines()
    for section in ("binding:", "marginal:"):
        assert section in lines, section
        i = lines.index(section)
        assert lines[i + 1].startswith("  "), f"{section} section is empty"
    alt = next(i for i, line in enumerate(lines) if line.startswith("alternatives"))
    layouts = [line for line in lines[alt + 1 :] if line.startswith("  ")]
    assert len(layouts) >= 2
    binding = lines[lines.index("binding:") + 1 : lines.index("marginal:")]
    assert any("deadline" in line for line in binding)
    assert any("budget" in line for line in binding)
    chosen = [line for line in layouts if f"${grpo_plan['total_cost_usd']} " in line]
    assert chosen, (grpo_plan["total_cost_usd"], layouts)
    # the rest of the footer is the same as without --explain
    assert f"total ${grpo_plan['total_cost_usd']}" in plain


# ----------------------------------------------------------------------------- infeasible
@pytest.mark.parametrize(
    "section,change,expected",
    [
        (
            "sla",
            {"deadline_hours": 0.01},
            ("deadline 0.01 h", "fastest achievable", "sla.deadline_hours"),
        ),
        ("budget", {"max_usd": 10}, ("budget $10.00", "cheapest", "budget.max_usd")),
        ("placement", {"regions": ["mars-*"]}, ("no offers", "placement.regions")),
    ],
)
def test_plan_infeasible(
    tmp_path: Path, section: str, change: dict[str, Any], expected: tuple[str, ...]
) -> None:
    spec = example_dict("grpo-7b.yaml")
    spec.setdefault(section, {}).update(change)
    path = _write_yaml(tmp_path / "spec.yaml", spec)
    _assert_error(_invoke("plan", path, "--format", "json"), 1, *expected)


def test_plan_bad_spec(tmp_path: Path) -> None:
    spec = example_dict("grpo-7b.yaml")
    spec["sla"]["deadline_hourz"] = spec["sla"].pop("deadline_hours")
    path = _write_yaml(tmp_path / "bad.yaml", spec)
    result = _invoke("plan", path)
    _assert_error(result, 2, "bad.yaml", "deadline_hourz")
    assert len(result.stderr.splitlines()) == 1  # rejected before planning starts


def test_plan_unknown_catalog() -> None:
    _assert_error(_invoke("plan", GRPO, "--catalog", "nosuch"), 2, "--catalog", "'nosuch'")


def test_plan_unknown_objective() -> None:
    result = _invoke("plan", GRPO, "--objective", "speed")
    assert result.exit_code == 2 and result.stdout == ""
    _no_crash(result)
    _assert_error(result, 2, "--objective", "'speed'", "use one of cost, time")


@pytest.mark.parametrize("args,expected", [
    (("plan", GRPO, "--format", "yaml"), ("--format", "'yaml'", "table, json, markdown")),
    (("plan", GRPO, "--solver", "higs"), ("--solver", "did you mean: highs", "highs, cbc")),
    (("pareto", GRPO, "--solver", "glpk"), ("--solver", "'glpk'", "highs, cbc")),
    (("reserve", str(EXAMPLES / "portfolio.yaml"), "--solver", "CBC!"), ("--solver", "cbc")),
    (("estimate", GRPO, "--format", "markdwn"), ("did you mean: markdown",)),
    (("prices", "show", "--format", "markdown"), ("--format", "'markdown'", "table, json")),
    (("render", "plan.json", "--target", "kuberey", "-o", "out"),
     ("--target", "did you mean: kuberay", "terraform-aws", "all")),
])
def test_unknown_choice_is_one_line_exit_2(args: tuple[str, ...],
                                           expected: tuple[str, ...]) -> None:
    """Options with a closed set of values are Typer enums; an unknown value is one error line
    naming the option, close matches and the choices (no usage box), exit 2, before any work."""
    _assert_error(_invoke(*args), 2, *expected)


# ----------------------------------------------------------------------------- custom catalog
LAB_AS_OF = dt.date.today().isoformat()


def _lab_catalog(path: Path) -> str:
    return _write_yaml(
        path,
        {
            "as_of": LAB_AS_OF,
            "name": "lab",
            "offers": [
                {
                    "provider": "lab",
                    "region": "local",
                    "instance_type": "h100x8",
                    "gpu": "H100",
                    "gpus_per_node": 8,
                    "on_demand_usd_per_hour": 20.0,
                    "spot_usd_per_hour": 8.0,
                    "spot_interruptions_per_hour": 0.05,
                    "max_nodes": 4,
                    "reserved_nodes_held": 2,
                    "reserved_sunk": True,
                }
            ],
        },
    )


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from ptplan.spec.project import load_spec

    root = tmp_path_factory.mktemp("lab")
    catalog = _lab_catalog(root / "lab.yaml")
    spec = _write_yaml(root / "small.yaml", small_spec().model_dump(mode="json", exclude_none=True))
    assert load_spec(spec) == small_spec()  # the dump loads back to the same spec
    out = root / "plan.json"
    result = _ok(
        _invoke(
            "plan", spec, "--catalog", catalog, "--format", "json", "--no-timings", "-o", str(out)
        )
    )
    assert "planning grpo-1.5b-test on catalog lab" in result.stderr
    return {
        "catalog": catalog,
        "spec": spec,
        "file": out,
        "plan": json.loads(out.read_text(encoding="utf-8")),
    }


def test_custom_catalog_plan(lab: dict[str, Any]) -> None:
    p = lab["plan"]
    assert p["catalog_as_of"] == LAB_AS_OF
    assert p["catalog"]["name"] == "lab"
    allocations = [a for pool in p["pools"] for a in pool["allocations"]]
    assert all(
        (a["provider"], a["region"], a["instance_type"]) == ("lab", "local", "h100x8")
        for a in allocations
    )
    reserved = [a for a in allocations if a["capacity_type"] == "reserved"]
    assert reserved, "free (sunk) reserved nodes should be used by the cheapest plan"
    for a in reserved:
        assert a["usd_per_hour"] == 0 and a["cost_usd"] == "0.00"
        assert a["nodes"] <= 2
    paid = sum(Decimal(repr(a["usd_per_hour"])) * a["nodes"] for a in allocations)
    if paid == 0:
        assert p["total_cost_usd"] == "0.00"
    _ok(_invoke("check", str(lab["file"]), "--spec", lab["spec"]))


def test_custom_catalog_plan_is_deterministic(lab: dict[str, Any]) -> None:
    result = _ok(
        _invoke(
            "plan", lab["spec"], "--catalog", lab["catalog"], "--format", "json", "--no-timings"
        )
    )
    assert result.stdout == lab["file"].read_text(encoding="utf-8")


def test_custom_catalog_reserved_nodes_are_shared_by_pools(lab: dict[str, Any]) -> None:
    used: dict[tuple[str, str, str, str], int] = {}
    for pool in lab["plan"]["pools"]:
        for a in pool["allocations"]:
            key = (a["instance_type"], a["zone"] or a["region"], a["capacity_type"], a["provider"])
            used[key] = used.get(key, 0) + a["nodes"]
    caps = {"reserved": 2, "on_demand": 4, "spot": 4}
    for key, nodes in used.items():
        assert nodes <= caps[key[2]], (key, nodes)


def test_plan_unknown_solver(lab: dict[str, Any]) -> None:
    _assert_error(
        _invoke("plan", lab["spec"], "--catalog", lab["catalog"], "--solver", "foo"),
        2,
        "--solver",
        "'foo'",
    )


def test_plan_unknown_solver_is_rejected_before_planning(
    lab: dict[str, Any], tmp_path: Path
) -> None:
    spec = small_spec().model_dump(mode="json", exclude_none=True)
    spec["sla"]["deadline_hours"] = 0.001
    path = _write_yaml(tmp_path / "tight.yaml", spec)
    _assert_error(
        _invoke("plan", path, "--catalog", lab["catalog"], "--solver", "foo"), 2, "--solver"
    )


# ----------------------------------------------------------------------------- objective time
def test_plan_objective_time(grpo_plan: dict[str, Any]) -> None:
    fast = _json(_invoke("plan", GRPO, "--format", "json", "--objective", "time", "--no-timings"))
    assert fast["objective"] == "time"
    assert fast["status"] == "optimal"
    assert fast["makespan_hours"] <= grpo_plan["makespan_hours"] * (1 + 1e-9)
    assert _money(fast["total_cost_usd"]) <= _money(fast["budget_usd"])
    assert fast["makespan_hours"] <= fast["deadline_hours"]
    # both meet deadline and budget, and the cost plan is the cheapest such plan
    assert _money(grpo_plan["total_cost_usd"]) <= _money(fast["total_cost_usd"])


# ----------------------------------------------------------------------------- pareto
@pytest.fixture(scope="module")
def sft_pareto() -> dict[str, Any]:
    return _json(_invoke("pareto", SFT, "--points", "4", "--format", "json"))


def test_pareto_json(sft_pareto: dict[str, Any]) -> None:
    r = sft_pareto
    assert r["spec_name"] == "sft-8b-chat"
    points = r["points"]
    assert 2 <= len(points) <= 4
    spans = [pt["makespan_hours"] for pt in points]
    costs = [_money(pt["total_cost_usd"]) for pt in points]
    assert spans == sorted(spans) and len(set(spans)) == len(spans)
    assert all(a > b for a, b in itertools.pairwise(costs)), costs
    assert spans[0] == pytest.approx(r["fastest_hours"], rel=1e-6)
    assert costs[-1] == _money(r["cheapest_usd"])
    if r["budget_usd"] is not None:
        assert all(c <= _money(r["budget_usd"]) for c in costs)
    for a, b in itertools.pairwise(points):
        per_hour = (Decimal(a["total_cost_usd"]) - Decimal(b["total_cost_usd"])) / Decimal(
            repr(b["makespan_hours"] - a["makespan_hours"])
        )
        assert abs(_money(a["usd_per_hour_saved"]) - per_hour) <= Decimal("0.01")
    assert points[-1]["usd_per_hour_saved"] is None
    assert all(pt["verified"] is True and pt["pools"] for pt in points)


def test_pareto_reports_defaults_and_warnings_like_a_plan(sft_pareto: dict[str, Any]) -> None:
    r = sft_pareto
    assert r["schema_version"] == 3  # 3: each point's 80 % interval
    p = _json(_invoke("plan", SFT, "--format", "json", "--no-timings"))
    assert r["defaults_applied"] == p["defaults_applied"] != []
    assert isinstance(r["warnings"], list) and len(set(r["warnings"])) == len(r["warnings"])
    stale = [w for w in p["warnings"] if "days old" in w]
    assert all(w in r["warnings"] for w in stale)
    text = _ok(_invoke("pareto", SFT, "--points", "4", "--format", "markdown")).stdout
    assert "- defaults applied: " + "; ".join(r["defaults_applied"]) in text
    assert all(f"- warning: {w}" in text for w in r["warnings"])


def test_pareto_table(sft_pareto: dict[str, Any]) -> None:
    result = _ok(_invoke("pareto", SFT, "--points", "4"))
    assert "ptplan pareto: sft-8b-chat" in result.stdout
    cell = r"│\s*\d[\d,]*\.\d\d( \(80 %: [^│]*\))?\s*│"  # makespan (80 %: its interval)
    rows = [line for line in result.stdout.splitlines() if re.match(cell, line)]
    assert len(rows) == len(sft_pareto["points"])
    for row, pt in zip(rows, sft_pareto["points"], strict=True):
        assert pt["total_cost_usd"] in row


def test_pareto_too_few_points() -> None:
    _assert_error(_invoke("pareto", SFT, "--points", "1"), 2, "--points")


# ----------------------------------------------------------------------------- other examples
@pytest.mark.parametrize("spec,name", [(OPD, "opd-8b-from-32b"), (SFT, "sft-8b-chat")])
def test_estimate_examples(spec: str, name: str) -> None:
    report = _json(_invoke("estimate", spec, "--format", "json"))
    assert report["spec_name"] == name and report["phases"]
    assert _ok(_invoke("estimate", spec)).stdout.strip()


@pytest.mark.parametrize("spec,name", [(OPD, "opd-8b-from-32b"), (SFT, "sft-8b-chat")])
def test_plan_examples(spec: str, name: str, tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    _ok(_invoke("plan", spec, "--format", "json", "--no-timings", "-o", str(out)))
    p = json.loads(out.read_text(encoding="utf-8"))
    assert p["spec_name"] == name and p["status"] == "optimal"
    assert p["makespan_hours"] <= p["deadline_hours"]
    assert _money(p["total_cost_usd"]) <= _money(p["budget_usd"])
    pools = sum(_money(pool["cost_usd"]) + _money(pool["disk_cost_usd"]) for pool in p["pools"])
    total = pools + _money(p["storage_cost_usd"])
    assert abs(total - _money(p["total_cost_usd"])) <= Decimal("0.005") * (
        2 * len(p["pools"]) + 2)
    result = _ok(_invoke("check", str(out), "--spec", spec))
    assert result.stdout.startswith("ok: ")
