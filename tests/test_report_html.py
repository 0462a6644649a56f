"""HTML reports (``--format html``, ``ptplan report``; docs/report.md) without a browser:
golden pages (minus the inlined chart library), determinism, escaping of hostile names, the
vendored library's hashes and the size budget, kind detection and one-line errors.
``tests/test_report_browser.py`` loads the same pages in Chromium.

The inputs are the golden JSON outputs of ``tests/golden/cli`` and, for a sweep and a
break-even search, ``tests/data/reports`` (written by ``PTPLAN_TODAY=2026-12-03 ptplan whatif
examples/grpo-7b.yaml --sweep 'capacity_type=spot *=' --from 0.5 --to 3 --steps 6 --workers 1
--no-timings --format json`` and ``... --break-even capacity_type=spot --from 0.5 --to 3
--tolerance 0.01 ...``), a comparison (``ptplan compare examples/compare/sft-8b-distilled-data.yaml
examples/compare/opd-8b-from-32b.yaml --risk tests/data/reports/compare-risk.yaml --format
json``), a runs review (``ptplan runs review --format json`` of the seeded ledger of
tests/ledger_seed.py) and a campaign (``ptplan plan examples/campaign-cheap-teacher.yaml
--format json``). Regenerate the goldens with ``PTPLAN_UPDATE_GOLDEN=1``.
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import json
import os
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from golden_compare import same_page
from hypothesis import given
from hypothesis import strategies as st
from report_fixtures import CASES, CLI_GOLDEN, HOSTILE, ROOT, edge_inputs, hostile_inputs, load
from report_fixtures import DATA as DATA_REPORTS
from typer.testing import CliRunner

from ptplan.cli.app import app
from ptplan.cli.report import detect_kind, pages
from ptplan.report.html import (
    LIBRARY_FILES,
    SIZE_BUDGET_LIBRARY,
    SIZE_BUDGET_REPORT,
    esc,
    library,
    script_json,
    strip_library,
)

pytestmark = pytest.mark.shipped_framework
"""The examples as a user plans them: specs without ``framework:`` take verl==0.9."""

GOLDEN = ROOT / "tests" / "golden" / "html"
ASSETS = ROOT / "optimizer" / "report" / "assets"
UPDATE = os.environ.get("PTPLAN_UPDATE_GOLDEN") == "1"


def render(args: list[str], tmp: Path, name: str = "out.html") -> str:
    out = tmp / name
    result = CliRunner().invoke(app, [*args, "-o", str(out)])
    assert result.exit_code == 0, result.output
    return out.read_text(encoding="utf-8")


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_html(name: str, tmp_path: Path) -> None:
    page = render(["report", *map(str, CASES[name])], tmp_path)
    text = strip_library(page)
    assert len(text) < len(page) - SIZE_BUDGET_LIBRARY // 2, "the library was not cut out"
    golden = GOLDEN / f"{name}.html"
    if UPDATE:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text, encoding="utf-8", newline="\n")
    expected = golden.read_text(encoding="utf-8")
    if not same_page(text, expected):
        diff = "".join(difflib.unified_diff(expected.splitlines(True), text.splitlines(True),
                                            f"golden/{name}", f"now/{name}", n=1))
        pytest.fail(f"{name}.html differs from its golden file (PTPLAN_UPDATE_GOLDEN=1 "
                    f"regenerates it once the change is intended):\n{diff[:6000]}")
    assert len(text.encode()) <= SIZE_BUDGET_REPORT, f"{name}: {len(text.encode())} bytes"


def test_same_input_same_bytes(tmp_path: Path) -> None:
    files = [CLI_GOLDEN / "plan-grpo-7b.json", CLI_GOLDEN / "reserve.json"]
    a = render(["report", *map(str, files)], tmp_path, "a.html")
    b = render(["report", *map(str, files)], tmp_path, "b.html")
    assert a == b
    assert re.findall(r'id="(chart-\d+)"', a) == [f"chart-{n}" for n in range(1, 8)]


def test_library_is_the_vendored_release() -> None:
    """The inlined files are the releases VENDOR.md names (hash), under the size budget."""
    vendor = (ASSETS / "VENDOR.md").read_text(encoding="utf-8")
    for name in LIBRARY_FILES:
        digest = hashlib.sha256((ASSETS / name).read_bytes()).hexdigest()
        row = next(line for line in vendor.splitlines() if line.startswith(f"| `{name}`"))
        assert digest in row, f"{name}: sha256 {digest} is not the one VENDOR.md records"
    for lic in ("LICENSE-vega.txt", "LICENSE-vega-lite.txt", "LICENSE-vega-embed.txt"):
        assert "Redistribution and use" in (ASSETS / lic).read_text(encoding="utf-8")
    lib = library()
    assert len(lib.encode()) <= SIZE_BUDGET_LIBRARY
    assert "sourceMappingURL" not in lib
    assert "</script" not in lib.lower()


def test_html_format_of_the_commands_equals_report_of_their_json(tmp_path: Path,
                                                                  monkeypatch: Any) -> None:
    """``plan --format html`` is ``ptplan report`` of ``plan --format json``; ``pareto
    --format html`` marks the plan ``ptplan plan`` makes of the spec."""
    monkeypatch.setenv("PTPLAN_TODAY", "2026-12-03")
    spec = str(ROOT / "examples" / "sft-8b.yaml")
    direct = render(["plan", spec, "--no-timings", "--format", "html"], tmp_path, "p.html")
    render(["plan", spec, "--no-timings", "--format", "json"], tmp_path, "p.json")
    via = render(["report", str(tmp_path / "p.json")], tmp_path, "r.html")
    assert direct == via
    pareto = render(["pareto", spec, "--points", "4", "--format", "html"], tmp_path, "pa.html")
    plan = load(tmp_path / "p.json")
    assert f"chosen plan (red diamond): ${plan['total_cost_usd']} over" in pareto
    from ptplan.cli.report import html_page

    assert pareto == html_page("pareto", load(CLI_GOLDEN / "pareto-sft.json"), plan)


def _body_text_outside_scripts(page: str) -> str:
    return re.sub(r"<script\b[^>]*>.*?</script>", "", page, flags=re.S)


def _strings(obj: Any) -> list[str]:
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for v in obj.values() for s in _strings(v)]
    if isinstance(obj, list):
        return [s for v in obj for s in _strings(v)]
    return []


def test_hostile_names_are_text(tmp_path: Path) -> None:
    files = hostile_inputs(tmp_path)
    page = render(["report", *map(str, files)], tmp_path)
    # exactly the page's own four scripts: library, chart specs, embed options, boot
    assert len(re.findall(r"<script\b", page)) == 4
    assert len(re.findall(r"</script>", page)) == 4
    body = _body_text_outside_scripts(page)
    assert "<img" not in body and "<!--" not in body and "onerror=\"" not in body
    assert esc(HOSTILE) in body  # shown, escaped
    specs = re.search(r'<script type="application/json" id="ptplan-charts">(.*?)</script>',
                      page, re.S)
    assert specs is not None
    assert "<" not in specs.group(1) and "\u2028" not in specs.group(1)
    decoded = json.loads(specs.group(1))
    assert any(HOSTILE in x for x in _strings(decoded))  # the charts get the raw name
    assert "{{ 7*7 }}" in body and "49" not in re.findall(r"\{\{[^}]*\}\}", body)


@given(st.text())
def test_script_json_round_trips_and_cannot_close_the_script(text: str) -> None:
    out = script_json({"k": text, "l": [text]})
    assert json.loads(out) == {"k": text, "l": [text]}
    assert "<" not in out and ">" not in out and "&" not in out


def test_kind_detection() -> None:
    kinds = {name: [detect_kind(load(f)) for f in files] for name, files in CASES.items()}
    assert kinds == {
        "plan-grpo-7b": ["plan"], "plan-opd-8b-from-32b": ["plan"], "plan-sft-8b": ["plan"],
        "pareto-grpo": ["pareto"], "pareto-sft-with-plan": ["pareto", "plan"],
        "whatif-grpo": ["whatif"], "sweep-grpo": ["sweep"],
        "break-even-grpo": ["break_even"], "reserve": ["reserve"],
        "compare-sft-opd": ["compare"], "review": ["review"],
        "campaign-cheap-teacher": ["campaign"]}
    assert detect_kind({"schema_version": 1, "name": "x"}) is None


def _error(args: list[str]) -> str:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = [x for x in result.output.splitlines() if x]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert "Traceback" not in result.output
    return lines[0]


def test_bad_input_is_one_line_exit_2(tmp_path: Path) -> None:
    other = tmp_path / "other.json"
    other.write_text('{"name": "not a ptplan output"}', encoding="utf-8")
    assert "is not a ptplan plan, pareto" in _error(["report", str(other)])
    assert "not found" in _error(["report", str(tmp_path / "missing.json")])
    broken = tmp_path / "broken.json"
    broken.write_text("{not json", encoding="utf-8")
    assert "broken.json" in _error(["report", str(broken)])
    plan = load(CLI_GOLDEN / "plan-grpo-7b.json")
    del plan["total_cost_usd"]
    bad_plan = tmp_path / "bad-plan.json"
    bad_plan.write_text(json.dumps(plan), encoding="utf-8")
    assert "total_cost_usd" in _error(["report", str(bad_plan)])
    res = load(CLI_GOLDEN / "reserve.json")
    del res["scenarios"][0]["total_cost_usd"]
    bad_res = tmp_path / "bad-reserve.json"
    bad_res.write_text(json.dumps(res), encoding="utf-8")
    assert "looks like a reserve report" in _error(["report", str(bad_res)])
    _error(["report"])  # no file: a usage error, one line
    assert "--format" in _error(["plan", str(ROOT / "examples" / "sft-8b.yaml"), "--format",
                                 "htm"])


def test_every_chart_has_its_table_and_every_total_is_the_json_one() -> None:
    page = pages([CLI_GOLDEN / "plan-grpo-7b.json", CLI_GOLDEN / "reserve.json"])
    pairs = re.findall(r'<div class="pair"><figure class="chart" id="chart-\d+"[^>]*></figure>'
                       r'<div class="data"><table>', page)
    assert len(pairs) == len(re.findall(r'<figure class="chart"', page)) == 7
    plan = load(CLI_GOLDEN / "plan-grpo-7b.json")
    res = load(CLI_GOLDEN / "reserve.json")
    # the total, then the plan's 80 % interval (schema 8 uncertainty) in whole dollars
    low, high = (Decimal(x) for x in plan["uncertainty"]["total_cost_usd"])
    assert (f'<dd data-field="total_cost_usd">${plan["total_cost_usd"]} '
            f'(80 %: ${low:,.0f}–${high:,.0f})</dd>') in page
    assert (f'<dd data-field="expected_total_cost_usd">'
            f'${float(res["expected_total_cost_usd"]):,.2f}</dd>') in page
    # the plan's parts, as the chart draws them, add up to its total (each part is rounded to
    # the cent, as the plan rounds each pool's cost: a cent per part at most)
    specs = json.loads(re.search(r'id="ptplan-charts">(.*?)</script>', page, re.S).group(1))
    cost = specs["chart-1"]["data"]["values"]
    assert abs(sum(r["usd"] for r in cost) - float(plan["total_cost_usd"])) <= 0.01 * len(cost)


def test_a_copy_of_a_report_keeps_its_figures() -> None:
    """Changing a figure of the JSON changes the page (the page is not a fixed template)."""
    plan = load(CLI_GOLDEN / "plan-sft-8b.json")
    other = copy.deepcopy(plan)
    other["total_cost_usd"] = "1.23"
    other["uncertainty"]["total_cost_usd"] = ["1.00", "2.00"]  # and its 80 % interval
    from ptplan.cli.report import html_page

    dd = '<dd data-field="total_cost_usd">$1.23 (80 %: $1–$2)</dd>'
    assert dd in html_page("plan", other)
    assert dd not in html_page("plan", plan)
    assert '<dd data-field="total_cost_usd">$1.23' not in html_page("plan", plan)


@pytest.mark.parametrize("name,args", [
    ("whatif-grpo", ["whatif", str(ROOT / "examples" / "grpo-7b.yaml"), "--price",
                     "capacity_type=spot *= 1.5", "--workers", "1", "--no-timings"]),
    ("reserve", ["reserve", str(ROOT / "examples" / "portfolio.yaml"), "--no-timings"]),
])
def test_html_format_of_whatif_and_reserve_is_their_golden(name: str, args: list[str],
                                                            tmp_path: Path,
                                                            monkeypatch: Any) -> None:
    """``whatif``/``reserve --format html`` write the page ``ptplan report`` makes of their
    golden JSON (the same command's ``--format json``, tests/test_golden_cli.py)."""
    monkeypatch.setenv("PTPLAN_TODAY", "2026-12-03")
    page = render([*args, "--format", "html"], tmp_path)
    assert same_page(strip_library(page), (GOLDEN / f"{name}.html").read_text(encoding="utf-8"))


def test_optional_parts_absent(tmp_path: Path) -> None:
    """No deadline, budget, storage or network; an infeasible scenario; an infeasible sweep
    point; a comparison without priors; a review without target results: the page says so
    instead of failing."""
    plan, what, sweep, cmp, rv = edge_inputs(tmp_path)
    page = render(["report", str(plan)], tmp_path, "plan.html")
    assert '<dd data-field="budget_usd">-</dd>' in page
    assert "not priced (no tiers in the catalog)" in page and "<li>no flows</li>" in page
    assert "total cost against the budget thresholds" not in page
    page = render(["report", str(what)], tmp_path, "whatif.html")
    assert '<dd data-field="scenario-1">infeasible</dd>' in page
    assert "no offers: the rules left none (test input)" in page
    page = render(["report", str(sweep)], tmp_path, "sweep.html")
    assert "deadline 72 h: too slow (test input)" in page
    page = render(["report", str(cmp)], tmp_path, "compare.html")
    assert "<li>no priors (test input)</li>" in page and "no prior" in page
    assert "cheapest by planned cost" in page
    page = render(["report", str(rv)], tmp_path, "review.html")
    assert "Dollars per target point" not in page and "Runs: target points" not in page
    assert "<li>none: no method on a model family is outdone" in page


def test_hostile_spec_name_through_the_planner(tmp_path: Path, monkeypatch: Any) -> None:
    """A spec named with markup, planned for real: the page shows the name as text."""
    monkeypatch.setenv("PTPLAN_TODAY", "2026-12-03")
    name = "'\"</script><script>window.__pwned=1</script><!-- {{ 7*7 }} <img src=x>"
    text = (ROOT / "examples" / "sft-8b.yaml").read_text(encoding="utf-8")
    spec = tmp_path / "hostile.yaml"
    spec.write_text(re.sub(r"^name:.*$", "name: " + json.dumps(name), text, count=1,
                           flags=re.M), encoding="utf-8")
    page = render(["plan", str(spec), "--format", "html"], tmp_path)
    assert f"<h1>ptplan plan: {esc(name)} (sft)</h1>" in page
    assert len(re.findall(r"<script\b", page)) == 4
    assert "<img" not in _body_text_outside_scripts(page)


def test_html_format_of_compare_and_review_is_their_golden(tmp_path: Path,
                                                            monkeypatch: Any) -> None:
    """``compare --format html`` and ``runs review --format html`` write the page ``ptplan
    report`` makes of their JSON (tests/data/reports: the same commands' --format json)."""
    monkeypatch.setenv("PTPLAN_TODAY", "2026-12-03")
    monkeypatch.chdir(ROOT)  # the JSON records the spec paths as given
    page = render(["compare", "examples/compare/sft-8b-distilled-data.yaml",
                   "examples/compare/opd-8b-from-32b.yaml", "--risk",
                   "tests/data/reports/compare-risk.yaml", "--format", "html"], tmp_path)
    assert same_page(strip_library(page),
                     (GOLDEN / "compare-sft-opd.html").read_text(encoding="utf-8"))
    from ledger_seed import SEED

    from ptplan.ledger import db
    from ptplan.ledger.records import record

    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    led = db.Ledger(url)
    with led.write() as conn:
        for r in SEED:
            record(conn, r)
    led.close()
    page = render(["runs", "review", "--ledger", url, "--format", "html"], tmp_path, "rv.html")
    assert same_page(strip_library(page), (GOLDEN / "review.html").read_text(encoding="utf-8"))


def test_compare_page_draws_the_json_figures() -> None:
    """The lines pass through each candidate's planned cost at p = 0 and its expected cost at
    its prior; the break-even diamond sits at the JSON's p* on the candidate's line, where it
    meets the best other candidate's expected cost (E_opd = C_opd (1 + 0.05 x 0.5))."""
    data = load(DATA_REPORTS / "compare-sft-opd.json")
    page = pages([DATA_REPORTS / "compare-sft-opd.json"])
    specs = json.loads(re.search(r'id="ptplan-charts">(.*?)</script>', page, re.S).group(1))
    lines, priors, _, marks = (layer["data"]["values"] for layer in specs["chart-1"]["layer"])
    sft, opd = data["candidates"]
    at0 = {v["candidate"]: v["usd"] for v in lines if v["p"] == 0}
    assert at0 == {sft["name"]: sft["planned_cost_usd"], opd["name"]: opd["planned_cost_usd"]}
    assert [(v["p"], v["usd"]) for v in priors] == [(0.3, sft["expected_cost_usd"]),
                                                     (0.05, opd["expected_cost_usd"])]
    assert len(marks) == 1 and marks[0]["p"] == sft["break_even_p"]
    assert marks[0]["usd"] == pytest.approx(opd["expected_cost_usd"])
    assert opd["expected_cost_usd"] == pytest.approx(opd["planned_cost_usd"] * 1.025)
    for k, c in enumerate(data["candidates"], start=1):
        assert (f'<dd data-field="candidate-{k}">${c["expected_cost_usd"]:,.2f}</dd>') in page
    parts = specs["chart-2"]["data"]["values"]
    for c in data["candidates"]:
        assert sum(v["usd"] for v in parts if v["candidate"] == c["name"]) == \
            pytest.approx(c["expected_cost_usd"])


def test_review_page_draws_the_json_figures() -> None:
    """Per group the bars add up to its TCO (own runs + rework caused); the page's totals are
    the review's."""
    data = load(DATA_REPORTS / "review.json")
    page = pages([DATA_REPORTS / "review.json"])
    specs = json.loads(re.search(r'id="ptplan-charts">(.*?)</script>', page, re.S).group(1))
    tco = specs["chart-1"]["data"]["values"]
    for g in data["groups"]["method"]:
        assert sum(v["usd"] for v in tco if v["group"] == g["group"]) == \
            pytest.approx(float(g["tco_usd"]))
    sft = {v["part"]: v["usd"] for v in tco if v["group"] == "sft"}
    assert sft == {"own runs": 6100.0, "rework caused": 1700.0}  # tests/test_ledger_review.py
    for key in ("actual_usd", "planned_usd", "rework_usd", "tco_usd"):
        assert f'<dd data-field="{key}">${data["totals"][key]}</dd>' in page
    assert len(re.findall(r'<figure class="chart"', page)) == len(
        re.findall(r'<div class="pair"><figure class="chart" id="chart-\d+"[^>]*></figure>'
                   r'<div class="data"><table>', page)) == 5


def test_campaign_page(tmp_path: Path, monkeypatch: Any) -> None:
    """``plan CAMPAIGN.yaml --format html`` is the report of its JSON: the campaign page (the
    timeline's bars are the stages' start and end hours, the money bars add up to the total)
    followed by each stage's plan page."""
    monkeypatch.setenv("PTPLAN_TODAY", "2026-12-03")
    monkeypatch.chdir(ROOT)
    page = render(["plan", "examples/campaign-cheap-teacher.yaml", "--format", "html"],
                  tmp_path)
    assert same_page(strip_library(page),
                     (GOLDEN / "campaign-cheap-teacher.html").read_text(encoding="utf-8"))
    data = load(DATA_REPORTS / "campaign-cheap-teacher.json")
    specs = json.loads(re.search(r'id="ptplan-charts">(.*?)</script>', page, re.S).group(1))
    bars = specs["chart-1"]["layer"][0]["data"]["values"]
    assert [(b["stage"], b["start"], b["end"]) for b in bars] == \
        [(s["name"], s["start_hours"], s["end_hours"]) for s in data["stages"]]
    money = specs["chart-3"]["data"]["values"]
    assert sum(m["usd"] for m in money) == pytest.approx(data["total_cost_usd"], abs=0.011)
    kinds = re.findall(r'<article class="report" data-kind="(\w+)"', page)
    assert kinds == ["campaign"] + ["plan"] * len(data["stages"])
    for s in data["stages"]:
        assert f"<h1>stage {esc(s['name'])}: ptplan plan: " in page
