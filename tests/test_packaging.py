"""The distribution installs one import package, ``ptplan``, and lives next to anything.

``pyproject.toml`` maps the repository's code folders under ``ptplan`` (``package-dir``):
``optimizer/`` is ``ptplan`` itself, ``providers/``, ``policies/`` and ``templates/`` are its
subpackages. Generic names such as ``optimizer`` or ``templates`` belong to unrelated projects on
the package index; a wheel that installed them at the top of site-packages would break those
projects, or be shadowed by a user's local folder of the same name.

The wheel is built from a copy of the sources (no build directory in the checkout) without
build isolation: setuptools ≥ 77 and wheel come with the test extras.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import tomllib
import zipfile
from pathlib import Path

import pytest
from package_tree import package_dirs

ROOT = Path(__file__).resolve().parent.parent
FOREIGN = ("optimizer", "providers", "policies", "templates")


def _declared_packages() -> list[str]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return list(data["tool"]["setuptools"]["packages"])


def _package_folders() -> list[str]:
    """Every folder with an ``__init__.py`` under the mapped folders, as its import name."""
    names = []
    for name, folder in package_dirs().items():
        src = ROOT / folder
        for init in src.rglob("__init__.py"):
            if "__pycache__" in init.parts:
                continue
            rel = init.parent.relative_to(src).parts
            names.append(".".join((name, *rel)))
    # a folder mapped on its own is also found inside its parent's folder only if nested there
    return sorted(set(names))


def test_package_list_is_every_folder() -> None:
    """The explicit package list names every subpackage once (a missing one drops from the
    wheel; an extra one fails the build)."""
    declared = _declared_packages()
    assert declared == sorted(declared), "keep [tool.setuptools] packages sorted"
    assert len(declared) == len(set(declared))
    assert declared == _package_folders()


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copyfile(ROOT / name, src / name)
    for folder in sorted(set(package_dirs().values())):
        shutil.copytree(ROOT / folder, src / folder,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                           "--no-build-isolation", "--no-index", "-q", "-w", str(out), str(src)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (found,) = out.glob("ptplan-*.whl")
    return found


def test_wheel_has_one_top_level_package(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
    tops = {n.split("/")[0] for n in names}
    dist_info = {t for t in tops if t.endswith(".dist-info")}
    assert tops - dist_info == {"ptplan"}, sorted(tops)
    for needed in ("ptplan/__init__.py", "ptplan/py.typed", "ptplan/cli/app.py",
                   "ptplan/providers/registry.py", "ptplan/policies/default.yaml",
                   "ptplan/templates/__init__.py", "ptplan/core/data/gpu_specs.csv"):
        assert needed in names, needed
    assert any(n.startswith("ptplan/templates/") and n.endswith(".j2") for n in names)
    assert any(n.startswith("ptplan/providers/data/") for n in names)
    (entry,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    with zipfile.ZipFile(wheel) as z:
        assert "ptplan = ptplan.cli.app:app" in z.read(entry).decode()


def _foreign_wheel_tree(dest: Path) -> Path:
    """Four unrelated top-level packages with ptplan's old folder names."""
    for name in FOREIGN:
        pkg = dest / name
        pkg.mkdir(parents=True)
        (pkg / "__init__.py").write_text(f"OWNER = 'foreign-{name}'\n")
    (dest / "pyproject.toml").write_text(textwrap.dedent("""\
        [build-system]
        requires = ["setuptools>=77"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "foreign-generic-names"
        version = "1.0"

        [tool.setuptools]
        packages = ["optimizer", "providers", "policies", "templates"]
        """))
    return dest


def test_installs_next_to_foreign_packages(wheel: Path, tmp_path: Path) -> None:
    """In a fresh venv holding foreign ``optimizer``/``providers``/``policies``/``templates``
    packages, ``ptplan plan`` runs and the foreign packages still import as themselves.

    The venv gets ptplan's dependencies from this environment's site-packages through a
    ``.pth`` line (added after the venv's own site-packages, so the venv's ptplan and foreign
    packages win; ``.pth`` files in that directory are not executed, so an editable ptplan of
    this environment stays invisible)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()"
                                "['purelib'])"], capture_output=True, text=True,
                               check=True).stdout.strip())
    deps = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "zz_ptplan_test_deps.pth").write_text("".join(f"{d}\n" for d in sorted(deps)))
    foreign = _foreign_wheel_tree(tmp_path / "foreign")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    # --ignore-installed: the .pth makes this environment's own ptplan visible, which pip
    # would otherwise take as already installed
    pip = [sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps",
           "--ignore-installed",
           "--no-build-isolation", "--no-index", "-q"]
    for target in (str(foreign), str(wheel)):
        proc = subprocess.run([*pip, target], capture_output=True, text=True, env=env)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    for name in FOREIGN:
        assert (site / name / "__init__.py").read_text() == f"OWNER = 'foreign-{name}'\n"
    assert (site / "ptplan" / "py.typed").exists()

    work = tmp_path / "work"
    work.mkdir()
    spec = work / "grpo-7b.yaml"
    shutil.copyfile(ROOT / "examples" / "grpo-7b.yaml", spec)
    # a user's own local `templates` package in the working directory shadows nothing of ptplan
    (work / "templates").mkdir()
    (work / "templates" / "__init__.py").write_text("raise ImportError('local templates')\n")
    for cmd in ([str(venv / "bin" / "ptplan"), "plan", spec.name, "--format", "json"],
                [str(py), "-m", "ptplan", "plan", spec.name, "--format", "json"]):
        proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True, env=env,
                              timeout=300)
        assert proc.returncode == 0, proc.stderr
        assert '"total_cost_usd"' in proc.stdout
    check = ("import optimizer, providers, policies, templates, ptplan, ptplan.templates\n"
             "assert [m.OWNER for m in (optimizer, providers, policies, templates)] == "
             "['foreign-optimizer', 'foreign-providers', 'foreign-policies', "
             "'foreign-templates']\n"
             "assert ptplan.templates.__file__.endswith('ptplan/templates/__init__.py')\n"
             "print(ptplan.__version__)\n")
    proc = subprocess.run([str(py), "-c", check], cwd=tmp_path, capture_output=True, text=True,
                          env=env)
    assert proc.returncode == 0, proc.stderr
    from ptplan.core.version import __version__
    assert proc.stdout.strip() == __version__
