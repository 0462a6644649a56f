"""Self-contained HTML reports (``--format html``, ``ptplan report``): one file that works
offline, with interactive Vega-Lite charts and each chart's data table beside it.

This module is the page: the document model (:class:`Doc` of :class:`Section` of
:class:`Chart` and :class:`Table`), escaping, the embedded chart specs and the inlined chart
library (vega, vega-lite and vega-embed, vendored in ``assets/``: versions, licences and
sources in ``assets/VENDOR.md``; the choice is argued in docs/report.md). The pages of each
report kind are built in :mod:`ptplan.report.html_plan` and
:mod:`ptplan.report.html_analysis`.

Every string of the input goes through :func:`esc` (text and attribute values) or
:func:`script_json` (the chart specs, whose ``<``, ``>``, ``&``, U+2028 and U+2029 are
``\\u`` escapes, so no ``</script>`` or ``<!--`` can end or hide the script); the page is
built with plain string joins, never a template engine, so ``{{ }}`` in a name is text.
Output is deterministic: no timestamps, chart ids numbered in page order, dicts in insertion
order, floats by ``repr``.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass, field
from functools import cache
from importlib.resources import files
from typing import Any

from ptplan.core.numbers import round_floats

LIBRARY_FILES = ("vega.min.js", "vega-lite.min.js", "vega-embed.min.js")
"""Inlined in this order (vega-lite needs vega; vega-embed needs both)."""

LIBRARY_ID = "ptplan-lib"
"""The id of the one ``<script>`` that holds the library (golden tests cut it out)."""

SIZE_BUDGET_LIBRARY = 900_000
"""Bytes of the inlined library (vega 6.4.0 + vega-lite 6.5.0 + vega-embed 7.3.0 as inlined:
839,474; 281,641 gzipped)."""

SIZE_BUDGET_REPORT = 400_000
"""Bytes of a report page without the library (the largest example, reserve: 217,726); so a
page stays under 1.3 MB."""

_MAP = re.compile(r"\n?//# sourceMappingURL=\S*\s*$")

EMBED_OPTIONS = {"mode": "vega-lite", "renderer": "svg",
                 "actions": {"export": True, "source": False, "compiled": False,
                             "editor": False}}
"""SVG (searchable, copyable text; tests count its marks); export to SVG/PNG is done in the
page; no "open in the Vega editor" link (it would leave the page)."""


def esc(text: Any) -> str:
    """Text or attribute value: ``& < > " '`` escaped."""
    return html.escape(str(text), quote=True)


def script_json(data: Any) -> str:
    """JSON safe inside ``<script type="application/json">``: ``<``, ``>`` and ``&`` (so
    ``</script>`` and ``<!--``) and the JavaScript line separators are ``\\u`` escapes, which
    ``JSON.parse`` reads back unchanged. Floats are rounded to 12 significant digits
    (:mod:`ptplan.core.numbers`), the figures a chart derives included."""
    text = json.dumps(round_floats(data), ensure_ascii=False, separators=(",", ":"),
                      allow_nan=False)
    for ch, rep in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                    ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(ch, rep)
    return text


@cache
def library() -> str:
    """The chart library's JavaScript, the three vendored files joined (their trailing
    ``sourceMappingURL`` comments dropped: the maps are not shipped, and a browser with its
    developer tools open would try to fetch them)."""
    assets = files("ptplan.report") / "assets"
    parts = []
    for name in LIBRARY_FILES:
        text = (assets / name).read_text(encoding="utf-8")
        text = _MAP.sub("\n", text)
        if "</script" in text.lower() or "<!--" in text:
            raise ValueError(f"assets/{name} holds '</script' or '<!--' and cannot be inlined")
        parts.append(f"/* {name}: see optimizer/report/assets/VENDOR.md */\n{text}")
    return "\n".join(parts)


@dataclass(frozen=True)
class Table:
    """A data table: caption, header and rows of strings formatted like the terminal's.
    ``numeric`` columns are right-aligned."""

    caption: str
    header: list[str]
    rows: list[list[str]]
    numeric: tuple[int, ...] = ()


@dataclass(frozen=True)
class Chart:
    """A Vega-Lite spec and the table of the figures it draws (shown beside it)."""

    title: str
    spec: dict[str, Any]
    table: Table


@dataclass
class Section:
    title: str
    charts: list[Chart] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    """Paragraph lines (a list when several)."""
    anchor: str = ""


@dataclass
class Doc:
    """One report: kind (plan, pareto, whatif, sweep, break_even, reserve), title, headline
    figures (label, value, data key: the key lets tests and tools find the figure) and
    sections."""

    kind: str
    title: str
    headline: list[tuple[str, str, str]]
    sections: list[Section]
    subtitle: str = ""


_CSS = """
:root{color-scheme:light;--fg:#1b1f24;--mute:#57606a;--line:#d0d7de;--bg2:#f6f8fa;
--warn:#9a6700}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,
sans-serif;color:var(--fg);margin:0 auto;max-width:1320px;padding:16px 24px 48px}
h1{font-size:22px;margin:8px 0 2px}h2{font-size:17px;margin:28px 0 8px;
border-bottom:1px solid var(--line);padding-bottom:4px}h3{font-size:14px;margin:14px 0 6px}
.sub{color:var(--mute);margin:0 0 12px}
nav{font-size:13px;margin:6px 0 0}nav a{margin-right:12px;color:#0969da}
dl.headline{display:grid;grid-template-columns:repeat(auto-fill,minmax(220px,1fr));gap:8px;
margin:12px 0}
dl.headline div{background:var(--bg2);border:1px solid var(--line);border-radius:6px;
padding:8px 10px}
dl.headline dt{color:var(--mute);font-size:12px}dl.headline dd{margin:2px 0 0;font-size:15px;
font-weight:600;font-variant-numeric:tabular-nums;overflow-wrap:anywhere}
.pair{display:flex;flex-wrap:wrap;gap:16px;align-items:flex-start;margin:8px 0 16px}
.chart{flex:0 0 auto;min-height:60px}
.data{flex:1 1 380px;max-height:440px;overflow:auto;min-width:320px}
table{border-collapse:collapse;font-size:12.5px;font-variant-numeric:tabular-nums;margin:4px 0}
caption{text-align:left;font-weight:600;padding:2px 0 4px}
th,td{border:1px solid var(--line);padding:3px 6px;vertical-align:top;text-align:left}
th{background:var(--bg2);position:sticky;top:0}
td.n{text-align:right;white-space:nowrap}
ul.lines{margin:4px 0;padding-left:20px}ul.lines li{margin:2px 0}
li.warn{color:var(--warn)}
article+article{margin-top:48px;border-top:3px solid var(--line)}
@media print{.data{max-height:none;overflow:visible}}
"""

_BOOT = """(function () {
  "use strict";
  var specs = JSON.parse(document.getElementById("ptplan-charts").textContent);
  var opts = JSON.parse(document.getElementById("ptplan-embed").textContent);
  var jobs = Object.keys(specs).map(function (id) {
    var el = document.getElementById(id);
    return vegaEmbed(el, specs[id], opts).then(function () {
      el.setAttribute("data-drawn", "1");
    });
  });
  Promise.all(jobs).then(function () {
    document.body.setAttribute("data-charts", "drawn");
  }, function (err) {
    document.body.setAttribute("data-charts", "failed");
    console.error("ptplan report: a chart failed to draw: " + err);
  });
})();"""


def _table(t: Table) -> str:
    head = "".join(f"<th scope=\"col\">{esc(h)}</th>" for h in t.header)
    body = []
    for row in t.rows:
        cells = "".join(f"<td class=\"n\">{esc(c)}</td>" if i in t.numeric else
                        f"<td>{esc(c)}</td>" for i, c in enumerate(row))
        body.append(f"<tr>{cells}</tr>")
    return (f"<table><caption>{esc(t.caption)}</caption><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table>")


def _lines(lines: list[str]) -> str:
    if not lines:
        return ""
    items = "".join(f"<li class=\"warn\">{esc(x)}</li>" if x.startswith("warning:") else
                    f"<li>{esc(x)}</li>" for x in lines)
    return f"<ul class=\"lines\">{items}</ul>"


class _Ids:
    """Chart ids in page order: ``chart-1``, ``chart-2``... (deterministic)."""

    def __init__(self) -> None:
        self.n = 0
        self.specs: dict[str, dict[str, Any]] = {}

    def add(self, spec: dict[str, Any]) -> str:
        self.n += 1
        cid = f"chart-{self.n}"
        self.specs[cid] = spec
        return cid


def _doc(doc: Doc, ids: _Ids, n: int) -> str:
    out = [f"<article class=\"report\" data-kind=\"{esc(doc.kind)}\" id=\"report-{n}\">",
           f"<h1>{esc(doc.title)}</h1>"]
    if doc.subtitle:
        out.append(f"<p class=\"sub\">{esc(doc.subtitle)}</p>")
    links = "".join(f"<a href=\"#{esc(s.anchor or f'r{n}-s{k}')}\">{esc(s.title)}</a>"
                    for k, s in enumerate(doc.sections, start=1))
    out.append(f"<nav>{links}</nav>")
    out.append("<dl class=\"headline\">" + "".join(
        f"<div><dt>{esc(label)}</dt><dd data-field=\"{esc(key)}\">{esc(value)}</dd></div>"
        for label, value, key in doc.headline) + "</dl>")
    for k, s in enumerate(doc.sections, start=1):
        out.append(f"<section id=\"{esc(s.anchor or f'r{n}-s{k}')}\"><h2>{esc(s.title)}</h2>")
        out.append(_lines(s.lines))
        for c in s.charts:
            cid = ids.add(c.spec)
            out.append(f"<div class=\"pair\"><figure class=\"chart\" id=\"{cid}\" role=\"img\" "
                       f"aria-label=\"{esc(c.title)}\"></figure><div class=\"data\">"
                       f"{_table(c.table)}</div></div>")
        out += [f"<div class=\"data wide\">{_table(t)}</div>" for t in s.tables]
        out.append("</section>")
    out.append("</article>")
    return "\n".join(out)


def render_page(docs: list[Doc]) -> str:
    """One HTML page holding ``docs`` (one or more reports), the chart specs and the library."""
    ids = _Ids()
    body = "\n".join(_doc(d, ids, n) for n, d in enumerate(docs, start=1))
    title = docs[0].title if len(docs) == 1 else f"ptplan report ({len(docs)} reports)"
    return "\n".join([
        "<!DOCTYPE html>",
        "<html lang=\"en\">",
        "<head>",
        "<meta charset=\"utf-8\">",
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">",
        "<meta name=\"generator\" content=\"ptplan\">",
        f"<title>{esc(title)}</title>",
        f"<style>{_CSS}</style>",
        f"<script id=\"{LIBRARY_ID}\">\n{library()}\n</script>",
        "</head>",
        "<body>",
        body,
        f"<script type=\"application/json\" id=\"ptplan-charts\">{script_json(ids.specs)}"
        "</script>",
        f"<script type=\"application/json\" id=\"ptplan-embed\">{script_json(EMBED_OPTIONS)}"
        "</script>",
        f"<script>\n{_BOOT}\n</script>",
        "</body>",
        "</html>",
    ]) + "\n"


_LIB_BLOCK = re.compile(r"(<script id=\"" + LIBRARY_ID + r"\">).*?(</script>)", re.S)


def strip_library(page: str) -> str:
    """The page with the library's script emptied (what golden files hold)."""
    return _LIB_BLOCK.sub(r"\1/* chart library */\2", page, count=1)
