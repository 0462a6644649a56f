"""The HTML reports in a real browser: Debian's Chromium driven by Playwright (never a browser
downloaded by ``playwright install``; ``.ci/run`` installs ``chromium`` with apt-get).

Each example report (tests/report_fixtures.py: every kind, the hostile-name pages and pages
with their optional parts absent) loads from
a file with zero console errors or warnings and zero network requests (every request other
than ``file:`` / ``data:`` is recorded and aborted), every chart draws an SVG with marks, the
totals the page shows are the JSON's, a screenshot of each chart is not blank, a tooltip shows
on hover, and hostile names stay text. One browser for the module; each page is loaded once.

Without chromium the tests skip locally; with CI set a skip fails (tests/ci_skips.py).
"""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from report_fixtures import CASES, HOSTILE, edge_inputs, hostile_inputs, load

from ptplan.cli.report import pages

pytestmark = pytest.mark.shipped_framework
"""The examples as a user plans them: specs without ``framework:`` take verl==0.9."""

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium"
                                        if Path("/usr/bin/chromium").exists() else None)

HOSTILE_CASES = ("hostile-plan", "hostile-whatif", "hostile-reserve", "hostile-compare",
                 "hostile-review", "hostile-campaign")
EDGE_CASES = ("edge-plan", "edge-whatif", "edge-sweep", "edge-compare", "edge-review")
"""Optional parts absent (tests/report_fixtures.py:edge_inputs)."""


class Loaded:
    """A report page after load: its console messages, requests and the page itself."""

    def __init__(self, page: Any, errors: list[str], requests: list[str]) -> None:
        self.page, self.errors, self.requests = page, errors, requests


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (apt-get install chromium; CI installs it)")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM,
                               args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
        yield b
        b.close()


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, list[Path]]]:
    """name -> (the HTML page, its input JSON files)."""
    tmp = tmp_path_factory.mktemp("reports")
    inputs = dict(CASES)
    for f in [*hostile_inputs(tmp), *edge_inputs(tmp)]:
        inputs[f.stem] = [f]
    out = {}
    for name, src in inputs.items():
        page = tmp / f"{name}.html"
        page.write_text(pages(src), encoding="utf-8")
        out[name] = (page, src)
    return out


def _open(browser: Any, url: str) -> Loaded:
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    requests: list[str] = []
    page.on("console", lambda m: errors.append(f"{m.type}: {m.text}")
            if m.type in ("error", "warning", "assert") else None)
    page.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
    page.on("request", lambda r: requests.append(r.url))

    def route(r: Any) -> None:
        if r.request.url.startswith(("file:", "data:")):
            r.continue_()
        else:
            r.abort()

    page.route("**/*", route)
    page.goto(url)
    page.wait_for_function("document.body.getAttribute('data-charts') !== null",
                           timeout=30_000)
    return Loaded(page, errors, requests)


@pytest.fixture(scope="module")
def loaded(browser: Any, files: dict[str, tuple[Path, list[Path]]]) -> Iterator[dict[str, Loaded]]:
    out = {name: _open(browser, page.as_uri()) for name, (page, _) in files.items()}
    yield out
    for x in out.values():
        x.page.close()


ALL = sorted(CASES) + list(HOSTILE_CASES) + list(EDGE_CASES)


@pytest.mark.parametrize("name", ALL)
def test_loads_offline_and_draws_every_chart(loaded: dict[str, Loaded], name: str) -> None:
    x = loaded[name]
    assert x.errors == []
    assert [u for u in x.requests if not u.startswith(("file:", "data:"))] == []
    page = x.page
    assert page.evaluate("document.body.getAttribute('data-charts')") == "drawn"
    charts = page.evaluate("""Array.from(document.querySelectorAll('figure.chart')).map(f => {
        const svg = f.querySelector('svg.marks');
        const box = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
        return {id: f.id, drawn: f.getAttribute('data-drawn'), w: box.width, h: box.height,
                marks: svg ? svg.querySelectorAll('path, rect, line, symbol, text').length : 0,
                table: f.nextElementSibling.querySelectorAll('tbody tr').length};
    })""")
    assert charts, "no chart on the page"
    for c in charts:
        assert c["drawn"] == "1" and c["w"] > 200 and c["h"] > 50 and c["marks"] > 10, c
        assert c["table"] > 0, f"{c['id']}: no data table beside the chart"


def _field(page: Any, key: str) -> str:
    return str(page.locator(f"[data-field='{key}']").first.inner_text())


def _ranged(text: str, pair: list[Any] | None, level: float = 0.8) -> str:
    """``text`` with the JSON's 80 % interval beside it, its ends in whole dollars
    (``$910.19 (80 %: $607–$1,576)``; plan schema 8, pareto and compare schema 3)."""
    if not pair:
        return text
    low, high = (Decimal(str(x)) for x in pair)
    return f"{text} ({100 * level:.0f} %: ${low:,.0f}–${high:,.0f})"


def _usd_interval(u: dict[str, Any] | None) -> list[Any] | None:
    return u["total_cost_usd"] if u else None


def _svg_text(page: Any) -> str:
    return str(page.evaluate("Array.from(document.querySelectorAll('figure.chart svg text'))"
                             ".map(t => t.textContent).join('\\n')"))


@pytest.mark.parametrize("name", sorted(CASES))
def test_totals_shown_are_the_json_ones(loaded: dict[str, Loaded],
                                        files: dict[str, tuple[Path, list[Path]]],
                                        name: str) -> None:
    page = loaded[name].page
    data = load(files[name][1][0])
    kind = page.evaluate("document.querySelector('article').dataset.kind")
    if kind == "plan":
        assert _field(page, "total_cost_usd") == _ranged(
            f"${data['total_cost_usd']}", _usd_interval(data.get("uncertainty")))
        assert f"Cost by pool and capacity type (total ${data['total_cost_usd']})" in \
            _svg_text(page)
        last = page.locator("figure.chart + div.data tbody tr").nth(
            len(data["pools"]) + 3)  # the cost table's total row
        assert last.inner_text().split() == ["total", data["total_cost_usd"]]
    elif kind == "pareto":
        assert _field(page, "cheapest_usd") == f"${data['cheapest_usd']}"
        shown = page.locator("article").first.locator(
            "figure.chart + div.data tbody tr td:nth-child(2)").all_inner_texts()
        assert shown == [_ranged(p["total_cost_usd"], _usd_interval(p.get("uncertainty")))
                         for p in data["points"]]
        if len(files[name][1]) > 1:  # with its plan: the chosen plan is marked
            plan = load(files[name][1][1])
            assert _field(page, "chosen_total_cost_usd").startswith(
                f"${plan['total_cost_usd']} over")
    elif kind in ("whatif", "sweep", "break_even"):
        base = data["baseline"]["total_cost_usd"]
        assert _field(page, "total_cost_usd") == f"${base}"
    elif kind == "compare":
        for k, c in enumerate(data["candidates"], start=1):
            e = c["expected_cost_usd"]
            shown = _field(page, f"candidate-{k}")
            assert shown == f"${e if e is not None else c['planned_cost_usd']:,.2f}"
        # the side-by-side table's planned and expected columns are the JSON's
        cells = page.locator("table:has(caption:text-is('candidates (as the terminal "
                             "table)')) tbody tr").all()
        assert [r.locator("td").nth(4).inner_text() for r in cells] == \
            [_ranged(f"{c['planned_cost_usd']:,.2f}",
                     c["interval"]["planned_cost_usd"] if c.get("interval") else None)
             for c in data["candidates"]]
        assert [r.locator("td").nth(9).inner_text() for r in cells] == \
            [f"{c['expected_cost_usd']:,.2f}" for c in data["candidates"]]
    elif kind == "campaign":
        for key in ("total_cost_usd", "stages_cost_usd", "handover_cost_usd"):
            assert _field(page, key) == f"${data[key]:,.2f}"
        # each stage's plan page follows, its total the stage plan's
        shown = page.locator("article[data-kind='plan'] [data-field='total_cost_usd']")
        assert shown.all_inner_texts() == [
            _ranged(f"${s['plan']['total_cost_usd']}", _usd_interval(s["plan"].get("uncertainty")))
            for s in data["stages"]]
    elif kind == "review":
        for key in ("actual_usd", "planned_usd", "rework_usd", "tco_usd"):
            assert _field(page, key) == f"${data['totals'][key]}"
        assert _field(page, "runs") == str(data["totals"]["runs"])
    else:
        assert kind == "reserve"
        for key in ("expected_total_cost_usd", "existing_only_cost_usd",
                    "on_demand_only_cost_usd"):
            assert float(_field(page, key).lstrip("$").replace(",", "")) == float(data[key])


@pytest.mark.parametrize("name", ["plan-grpo-7b", "reserve", "sweep-grpo", "pareto-grpo",
                                  "compare-sft-opd", "review", "campaign-cheap-teacher"])
def test_screenshots_are_not_blank(loaded: dict[str, Loaded], name: str) -> None:
    from PIL import Image, ImageStat

    page = loaded[name].page
    for fig in page.locator("figure.chart").all():
        img = Image.open(io.BytesIO(fig.screenshot())).convert("RGB")
        stat = ImageStat.Stat(img.convert("L"))
        colours = img.getcolors(maxcolors=1 << 20) or []
        assert stat.stddev[0] > 10 and len(colours) > 20, (name, stat.stddev, len(colours))


def test_tooltip_on_hover(loaded: dict[str, Loaded]) -> None:
    """The charts are interactive: hovering a bar shows its figures."""
    page = loaded["plan-grpo-7b"].page
    bar = page.locator("#chart-1 svg.marks g.mark-rect path").first
    bar.hover()
    tip = page.locator("#vg-tooltip-element")
    tip.wait_for(state="visible", timeout=5_000)
    assert "USD" in tip.inner_text()


@pytest.mark.parametrize("name", HOSTILE_CASES)
def test_hostile_names_render_as_text(loaded: dict[str, Loaded], name: str) -> None:
    page = loaded[name].page
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.locator("img").count() == 0
    assert page.evaluate("document.scripts.length") == 4
    assert HOSTILE in page.locator("body").text_content()
    if name != "hostile-plan":  # what-if and reserve chart their scenario names
        assert "</script><script>window.__pwned=1</script>" in _svg_text(page)
    else:
        assert page.locator("h1").first.text_content() == f"ptplan plan: {HOSTILE} (rl)"


def test_the_harness_sees_a_network_request(browser: Any, tmp_path: Path) -> None:
    """The offline check can fail: a page that asks the network is caught."""
    page = tmp_path / "leaky.html"
    page.write_text("<!DOCTYPE html><html><body><img src='https://example.invalid/x.png'>"
                    "<script>document.body.setAttribute('data-charts','drawn')</script>"
                    "</body></html>", encoding="utf-8")
    x = _open(browser, page.as_uri())
    try:
        assert any(u.startswith("https://example.invalid/") for u in x.requests)
    finally:
        x.page.close()


def test_data_of_the_charts_is_the_pages_json(loaded: dict[str, Loaded],
                                              files: dict[str, tuple[Path, list[Path]]]) -> None:
    """The specs the browser parsed are those embedded (the JSON escapes read back)."""
    page = loaded["hostile-reserve"].page
    specs = json.loads(page.evaluate("document.getElementById('ptplan-charts').textContent"))
    title = specs["chart-2"]["title"]["text"]
    assert title == f"{HOSTILE}: weekly demand vs committed capacity"
