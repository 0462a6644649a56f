"""The documentation site builds strictly and every link in it resolves, offline.

``mkdocs build --strict`` (mkdocs.yml: README.md as the front page, docs/*.md, the generated CLI
and Python API references and JSON Schemas) runs once into a temporary directory; then every
HTML page is parsed and each internal ``href``/``src`` must name a file of the built site and,
with a ``#fragment``, an ``id`` on that page. External links (http, https, mailto) are not
fetched. The generated references must be complete: the CLI page lists every command of the
Typer app, the API page documents every name of ``ptplan.__all__``. The README's own links
into ``docs/`` (read on GitHub) must name existing files too.
"""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

ROOT = Path(__file__).resolve().parent.parent
for _module in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python",
                "mkdocs_click"):
    pytest.importorskip(_module, reason="the docs extra: pip install '.[docs]'")

EXTERNAL = ("http:", "https:", "mailto:", "data:", "javascript:")


class _Page(HTMLParser):
    """The ids of one HTML page and the links it makes (href and src of every tag)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.links: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for key, value in attrs:
            if value is None:
                continue
            if key in ("id", "name") and (key == "id" or tag == "a"):
                self.ids.add(value)
            elif key in ("href", "src") and tag in ("a", "link", "img", "script", "source"):
                self.links.append(value)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("WARNING")]
    assert warnings == [], warnings
    return out


@pytest.fixture(scope="module")
def pages(site: Path) -> dict[Path, _Page]:
    return {path: _parse(path) for path in sorted(site.rglob("*.html"))}


def test_every_page_of_the_nav_is_built(site: Path) -> None:
    for name in ("index", "getting-started", "planner", "policies", "verification",
                 "validation", "plan", "reserve", "whatif", "render", "ledger", "spend",
                 "campaigns", "compare", "simulate", "prices", "report", "cli", "api",
                 "spec", "plan-json", "schemas", "benchmarks", "python", "architecture",
                 "testing", "development", "reliability", "blocks", "demand-model"):
        assert (site / f"{name}.html").is_file(), name


def test_internal_links_and_anchors_resolve(site: Path, pages: dict[Path, _Page]) -> None:
    broken = []
    checked = 0
    for path, page in pages.items():
        if path == site / "404.html":  # its links are absolute, for the root of a web server
            continue
        for link in page.links:
            if link.startswith(EXTERNAL) or link in ("", "#"):
                continue
            parts = urlsplit(link)
            if parts.scheme or parts.netloc:
                broken.append(f"{path.relative_to(site)}: {link} (unexpected scheme)")
                continue
            target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
            if target.is_dir():
                target = target / "index.html"
            rel = f"{path.relative_to(site)}: {link}"
            if not target.is_relative_to(site.resolve()) or not target.is_file():
                broken.append(f"{rel} (no such file)")
                continue
            checked += 1
            fragment = unquote(parts.fragment)
            if fragment and target.suffix == ".html":
                ids = pages[target].ids if target in pages else _parse(target).ids
                if fragment not in ids:
                    broken.append(f"{rel} (no id {fragment!r})")
    assert broken == [], "\n".join(broken)
    assert checked > 1000, checked  # the check did look at the site's links


def test_site_fetches_nothing(site: Path) -> None:
    """Offline: no page loads a script, stylesheet, font or image from the network (no web
    fonts; Material's file:// search shim is vendored, docs/assets/vendor/)."""
    remote = re.compile(r"<(?:script|img|source)\b[^>]*\bsrc=\"(?:https?:)?//"
                        r"|<link\b[^>]*\bhref=\"(?:https?:)?//[^\"]*\"[^>]*>", re.I)
    found = []
    for path in sorted(site.rglob("*.html")):
        for m in remote.finditer(path.read_text(encoding="utf-8")):
            tag = m.group(0)
            if "<link" in tag.lower() and not re.search(r"rel=\"(stylesheet|preconnect|preload|"
                                                        r"icon|manifest)\"", tag):
                continue
            found.append(f"{path.relative_to(site)}: {tag[:120]}")
    assert found == [], "\n".join(found)


def _command_paths() -> list[str]:
    import typer.main

    from ptplan.cli.app import app

    found: list[str] = []

    def walk(command: object, path: str) -> None:
        found.append(path)
        for name, sub in sorted(getattr(command, "commands", {}).items()):
            walk(sub, f"{path} {name}")

    walk(typer.main.get_command(app), "ptplan")
    return found


def test_cli_reference_lists_every_command(site: Path) -> None:
    text = html.unescape(" ".join(_parse(site / "cli.html").text))
    text = re.sub(r"\s+", " ", text)
    paths = _command_paths()
    assert len(paths) > 20, paths  # the app's ~15 commands and their subcommands
    missing = [p for p in paths if f"{p} [OPTIONS]" not in text]
    assert missing == [], f"not on the CLI reference page: {missing}"


def test_api_reference_documents_every_public_name(site: Path) -> None:
    import ptplan

    names = getattr(ptplan, "__all__", None)
    assert names, "ptplan.__all__ is missing or empty: the public API is not exported yet"
    ids = _parse(site / "api.html").ids
    missing = [n for n in names if f"ptplan.{n}" not in ids]
    assert missing == [], f"no anchor on the API page: {missing}"
    # and each has its documentation (mkdocstrings' block, under the path of its definition),
    # except plain values such as __version__
    sys.path.insert(0, str(ROOT / "docs"))
    try:
        from hooks import api_home  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(ROOT / "docs"))
    homes = {n: api_home(n) for n in names}
    undocumented = [n for n, home in homes.items() if home is not None and home not in ids]
    assert undocumented == [], f"no documentation on the API page: {undocumented}"


def test_schemas_are_the_models(site: Path) -> None:
    from ptplan.planfile.schema import Plan
    from ptplan.spec.project import ProjectSpec

    for name, model in (("spec", ProjectSpec), ("plan", Plan)):
        built = (site / "schemas" / f"{name}.schema.json").read_text(encoding="utf-8")
        assert built == json.dumps(model.model_json_schema(), indent=2,
                                   ensure_ascii=False) + "\n"


_RUN_BLOCKS = """
import re, sys
text = open(sys.argv[1], encoding="utf-8").read()
for i, block in enumerate(re.findall(r"^```python\\n(.*?)^```", text, re.S | re.M)):
    exec(compile(block, f"{sys.argv[1]} block {i}", "exec"), {"__name__": "__main__"})
    print(f"block {i} ok")
"""


def test_python_guide_runs(tmp_path: Path) -> None:
    """Every Python block of docs/python.md runs as written (in a scratch directory that has
    the repository's examples/), in order, each in a fresh namespace."""
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    guide = ROOT / "docs" / "python.md"
    proc = subprocess.run([sys.executable, "-c", _RUN_BLOCKS, str(guide)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    blocks = guide.read_text(encoding="utf-8").count("```python")
    assert proc.stdout.count(" ok\n") == blocks


def test_readme_links_into_docs_exist() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    local = [t for t in targets if not t.startswith(EXTERNAL)]
    assert local, "the README links into docs/"
    for target in local:
        path = target.split("#", 1)[0]
        assert path.startswith("docs/"), f"README link outside docs/: {target}"
        assert (ROOT / path).is_file(), f"README link to a missing file: {target}"
