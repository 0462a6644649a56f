"""The installed layout of the ``ptplan`` package, staged from the repository's folders.

``pyproject.toml`` maps the code folders under one import package (``[tool.setuptools]
package-dir``): ``optimizer/`` is ``ptplan`` itself, ``providers/``, ``policies/`` and
``templates/`` are its subpackages. An editable install resolves that mapping with an import
hook, which tools that walk the file system (grimp, import-linter, mypy) cannot follow. This
helper copies the Python files into the installed shape, ``<dest>/ptplan/...``, so that those
tools read exactly the tree a wheel installs.
"""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def package_dirs() -> dict[str, str]:
    """``package-dir`` of ``pyproject.toml``: import name → repository folder."""
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return dict(data["tool"]["setuptools"]["package-dir"])


def stage(dest: Path) -> Path:
    """Copy every ``*.py`` of the mapped folders to ``dest/ptplan/...``; return ``dest``."""
    for name, folder in sorted(package_dirs().items(), key=lambda kv: kv[0].count(".")):
        target = dest.joinpath(*name.split("."))
        src = ROOT / folder
        for path in sorted(src.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            out = target / path.relative_to(src)
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, out)
    return dest
