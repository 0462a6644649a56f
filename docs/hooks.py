"""Build hooks of the documentation site (``hooks:`` in mkdocs.yml).

* The front page is the repository's README.md: it becomes the site's ``index.md``, with its
  links into ``docs/`` (written so that they work on GitHub) made relative to the site.
* The JSON Schemas of the project spec and of the plan are generated from the pydantic models
  (:class:`ptplan.spec.project.ProjectSpec`, :class:`ptplan.planfile.schema.Plan`) and written into
  the site as ``schemas/spec.schema.json`` and ``schemas/plan.schema.json``: the same bytes as
  ``ptplan schema spec`` and ``ptplan schema plan``.
* A page line ``<!-- schema-table: spec -->`` (or ``plan``) becomes a table of that schema's
  top-level properties: type, required or default, and for the plan how ``check`` re-derives it.
* The line ``<!-- ptplan-api -->`` of docs/api.md becomes one mkdocstrings block per name of
  ``ptplan.__all__``, grouped, each under the anchor ``ptplan.NAME``. ``::: ptplan`` cannot
  document them itself: the names are imported lazily (PEP 562), and five of them (``plan``,
  ``render``, ``whatif``, ``reserve``, ``compare``) are also subpackages, which is what static
  analysis finds under those names. Each block documents the object the name stands for, where
  it is defined (``ptplan.api.plan``), headed ``ptplan.plan``.
* ``\\|`` in a table row (a pipe inside a cell, as GitHub reads it) shows as ``|`` also inside
  code spans, where Python-Markdown would keep the backslash.
* ``benchmarks/results/plan_scaling.png`` (made by ``benchmarks/plan_scaling.py --chart``) is
  served as ``assets/plan_scaling.png``.

* The Python API is read from a copy of the sources in the installed shape (``ptplan/``,
  ``ptplan/providers/``, ... from ``[tool.setuptools] package-dir``), staged in a temporary
  directory that is put first on mkdocstrings' search path: griffe's finder cannot follow the
  package-dir mapping of an editable install, and an installed wheel would be read the same.

Every file is added as a generated page or asset, so mkdocs validates links to it like any other.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import tomllib
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files

SCHEMAS = {
    "schemas/spec.schema.json": ("ptplan.spec.project", "ProjectSpec"),
    "schemas/plan.schema.json": ("ptplan.planfile.schema", "Plan"),
}
ASSETS = {"assets/plan_scaling.png": "benchmarks/results/plan_scaling.png"}

# a Markdown link or image target that starts with docs/ (README.md's links into the site)
_DOCS_LINK = re.compile(r"\]\(docs/")
_SCHEMA_TABLE = re.compile(r"^<!-- schema-table: (spec|plan) -->$", re.M)
_API = re.compile(r"^<!-- ptplan-api -->$", re.M)
_PIPE = "\ue000"  # stands for an escaped pipe of a table cell between Markdown and HTML
API_GROUPS = (
    ("Loading inputs", ("load_spec", "load_catalog", "load_policy", "load_plan")),
    ("One function per command", ("estimate", "plan", "pareto", "verify", "render", "whatif",
                                  "reserve", "simulate", "compare")),
    ("Types", ("ProjectSpec", "Plan", "Catalog", "Policy")),
    ("Errors", ("PlannerError", "InputError", "InfeasibleError", "ProviderError")),
)


def _root(config: MkDocsConfig) -> Path:
    return Path(config.config_file_path).resolve().parent


def readme_as_index(text: str) -> str:
    """README.md's text as the site's index.md: links ``docs/X`` become ``X``."""
    return _DOCS_LINK.sub("](", text)


def schema_json(module: str, name: str) -> str:
    """A model's JSON Schema as ``ptplan schema`` prints it (2-space indent, UTF-8, newline)."""
    import importlib

    model: Any = getattr(importlib.import_module(module), name)
    return json.dumps(model.model_json_schema(), indent=2, ensure_ascii=False) + "\n"


def _type(node: dict[str, Any]) -> str:
    """A property's type in a few words: ``integer``, ``list of Pool``, ``one of: a, b``."""
    if "$ref" in node:
        return node["$ref"].rsplit("/", 1)[-1]
    if "enum" in node:
        return "one of: " + ", ".join(f"`{v}`" for v in node["enum"])
    if "const" in node:
        return f"`{node['const']}`"
    if "anyOf" in node:
        kinds = [_type(n) for n in node["anyOf"]]
        return " or ".join(k for k in kinds if k != "null") + (
            " or null" if "null" in kinds else "")
    kind = node.get("type", "any")
    if kind == "array":
        return "list of " + _type(node.get("items", {}))
    if kind == "object" and isinstance(node.get("additionalProperties"), dict):
        return "map of " + _type(node["additionalProperties"])
    return str(kind)


def schema_table(which: str) -> str:
    """The top-level properties of the spec or plan schema as a Markdown table."""
    module, name = SCHEMAS[f"schemas/{which}.schema.json"]
    schema = json.loads(schema_json(module, name))
    required = set(schema.get("required", []))
    plan = which == "plan"
    head = "| key | type | required / default |" + (" `x-check` |" if plan else "")
    rows = [head, "|---|---|---|" + ("---|" if plan else "")]
    for key, node in schema["properties"].items():
        if key in required:
            need = "required"
        elif isinstance(node.get("default"), dict) and node["default"]:
            need = "optional (each field's own default)"
        elif "default" in node:
            need = f"default `{json.dumps(node['default'], ensure_ascii=False)}`"
        else:
            need = "optional"
        kind = _type(node).replace("|", "\\|")
        row = f"| `{key}` | {kind} | {need} |"
        if plan:
            ref = node.get("$ref", "").rsplit("/", 1)[-1]
            check = node.get("x-check") or schema.get("$defs", {}).get(ref, {}).get("x-check")
            row += f" {check or 'derived'} |"
        rows.append(row)
    return "\n".join(rows)


def api_home(name: str) -> str | None:
    """Where the object ``ptplan.NAME`` is defined (``ptplan.api.plan``); None for a value
    without one (``__version__``)."""
    import ptplan

    obj = getattr(ptplan, name)
    obj = getattr(obj, "__wrapped__", obj)  # a decorated function: the function behind it
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str):
        return None
    return f"{module}.{qualname}"


def api_blocks() -> str:
    """One mkdocstrings block per name of ``ptplan.__all__``, in :data:`API_GROUPS` order
    (names of no group last, under "Other names")."""
    import ptplan

    public = list(ptplan.__all__)
    grouped = [(title, [n for n in names if n in public]) for title, names in API_GROUPS]
    seen = {n for _, names in grouped for n in names}
    grouped.append(("Other names", [n for n in public if n not in seen]))
    out: list[str] = []
    for title, names in grouped:
        if not names:
            continue
        out += [f"## {title}", ""]
        for name in names:
            home = api_home(name)
            out += [f'<a id="ptplan.{name}"></a>', ""]
            if home is None:
                value = getattr(ptplan, name)
                out += [f"### `ptplan.{name}`", "", f"`{value!r}`", ""]
                continue
            out += [f"::: {home}", "    options:", f'      heading: "ptplan.{name}"',
                    f'      toc_label: "{name}"', "      heading_level: 3",
                    "      show_root_heading: true", ""]
    return "\n".join(out)


def escape_table_pipes(markdown: str) -> str:
    """``\\|`` in table rows (outside fenced code) as :data:`_PIPE`, put back as ``|`` in the
    HTML by :func:`on_page_content`."""
    out, fence = [], False
    for line in markdown.split("\n"):
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
        if not fence and line.lstrip().startswith("|"):
            line = line.replace("\\|", _PIPE)
        out.append(line)
    return "\n".join(out)


def on_page_markdown(markdown: str, page: Any, config: MkDocsConfig, files: Files) -> str:
    markdown = _SCHEMA_TABLE.sub(lambda m: schema_table(m.group(1)), markdown)
    markdown = _API.sub(lambda m: api_blocks(), markdown)
    return escape_table_pipes(markdown)


def on_page_content(html: str, page: Any, config: MkDocsConfig, files: Files) -> str:
    return html.replace(_PIPE, "|")


_STAGE: list[Path] = []


def stage_package(root: Path, dest: Path) -> Path:
    """Copy every ``*.py`` of the folders ``package-dir`` maps to ``dest/ptplan/...``."""
    data = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    dirs: dict[str, str] = data["tool"]["setuptools"]["package-dir"]
    for name, folder in sorted(dirs.items(), key=lambda kv: kv[0].count(".")):
        target = dest.joinpath(*name.split("."))
        for path in sorted((root / folder).rglob("*.py")):
            if "__pycache__" not in path.parts:
                out = target / path.relative_to(root / folder)
                out.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, out)
    return dest


@event_priority(100)  # before mkdocstrings' on_config, which creates the Python handler
def on_config(config: MkDocsConfig) -> MkDocsConfig:
    stage = stage_package(_root(config), Path(tempfile.mkdtemp(prefix="ptplan-docs-")))
    _STAGE.append(stage)
    handlers = config.plugins["mkdocstrings"].config["handlers"]
    python = handlers.setdefault("python", {})
    python["paths"] = [str(stage), *python.get("paths", [])]
    return config


def on_shutdown() -> None:
    while _STAGE:
        shutil.rmtree(_STAGE.pop(), ignore_errors=True)


def on_files(files: Files, config: MkDocsConfig) -> Files:
    root = _root(config)
    readme = (root / "README.md").read_text(encoding="utf-8")
    files.append(File.generated(config, "index.md", content=readme_as_index(readme)))
    for uri, (module, name) in SCHEMAS.items():
        files.append(File.generated(config, uri, content=schema_json(module, name)))
    for uri, source in ASSETS.items():
        files.append(File.generated(config, uri, abs_src_path=str(root / source)))
    return files
