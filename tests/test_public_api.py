"""The public Python API (``import ptplan``; :mod:`ptplan.api`): the exported names, their
docstrings and annotations, that ``import ptplan`` stays cheap, that each entry point returns
what its command prints with ``--format json``, the README's Python snippet, and what a type
checker sees."""

from __future__ import annotations

import ast
import inspect
import json
import os
import re
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import pytest
import yaml
from package_tree import stage
from typer.testing import CliRunner

import ptplan
from ptplan.cli.app import app

ROOT = Path(__file__).resolve().parent.parent
EX = ROOT / "examples"
GRPO = EX / "grpo-7b.yaml"
COMPARE = [EX / "compare" / "sft-8b-distilled-data.yaml", EX / "compare" / "opd-8b-from-32b.yaml"]
RISK = EX / "compare" / "risk.yaml"

FUNCTIONS = ("compare", "estimate", "init_spec", "load_catalog", "load_plan", "load_policy",
             "load_spec", "model_preset", "models", "pareto", "plan", "render", "reserve",
             "simulate", "verify", "whatif")
TYPES = ("Catalog", "Plan", "Policy", "ProjectSpec")
ERRORS = ("InfeasibleError", "InputError", "PlannerError", "ProviderError")
DOCUMENTED = {*FUNCTIONS, *TYPES, *ERRORS, "__version__"}
UNDOCUMENTED_TYPES = {"Catalog", "Plan", "Policy", "ProjectSpec"}
"""Types without a class docstring of their own (a dataclass's generated signature does not
count). Their modules are not the API's; a docstring on a pydantic model also becomes the
``description`` of its published JSON Schema, so adding one is their owners' change. The test
below fails when one gains a docstring, so that this set shrinks with them."""
SNIPPET = """
import ptplan

spec = ptplan.load_spec("examples/grpo-7b.yaml")
catalog = ptplan.load_catalog("embedded")
report = ptplan.estimate(spec, gpus=["H100", "L40S"])   # dict, as `ptplan estimate --format json`
plan = ptplan.plan(spec, catalog)                        # a frozen, verified Plan
assert ptplan.verify(plan, spec) == []
print(plan.total_cost_usd, [pool.nodes for pool in plan.pools])
written = ptplan.render(plan, "skypilot", "out/deploy", spec=spec)
"""
"""The snippet agreed for the README's Python section."""


def cli(*args: str | Path) -> None:
    result = CliRunner().invoke(app, ["-q", *map(str, args)])
    assert result.exit_code == 0, result.output


def cli_json(tmp_path: Path, *args: str | Path) -> Any:
    out = tmp_path / "cli.json"
    cli(*args, "--format", "json", "-o", out)
    return json.loads(out.read_text(encoding="utf-8"))


def as_json(data: Any) -> Any:
    """``data`` as the command writes it (``json.dumps``) and reads back."""
    return json.loads(json.dumps(data, ensure_ascii=False))


@pytest.fixture(scope="module")
def spec() -> ptplan.ProjectSpec:
    return ptplan.load_spec(GRPO)


@pytest.fixture(scope="module")
def grpo_plan(spec: ptplan.ProjectSpec) -> ptplan.Plan:
    return ptplan.plan(spec, timings=False)


@pytest.fixture(scope="module")
def plan_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("plan") / "grpo-7b.json"
    cli("plan", GRPO, "--format", "json", "--no-timings", "-o", out)
    return out


# --------------------------------------------------------------------------- the surface


def test_all_is_the_documented_surface() -> None:
    assert set(ptplan.__all__) == DOCUMENTED
    assert len(ptplan.__all__) == len(DOCUMENTED)
    assert sorted(dir(ptplan)) == sorted(DOCUMENTED)


@pytest.mark.parametrize("name", FUNCTIONS)
def test_function_is_documented_and_fully_annotated(name: str) -> None:
    fn = getattr(ptplan, name)
    assert callable(fn) and not inspect.ismodule(fn)
    sig = inspect.signature(fn)
    assert sig.return_annotation is not inspect.Signature.empty, name
    missing = [p.name for p in sig.parameters.values() if p.annotation is inspect.Parameter.empty]
    assert missing == [], f"{name}: parameters without annotation: {missing}"
    hints = typing.get_type_hints(fn)  # every annotation resolves at run time too
    assert set(hints) == {*sig.parameters, "return"}
    doc = inspect.getdoc(fn)
    assert doc, name
    for section in ("Args:", "Returns:", "Raises:"):
        assert f"\n{section}\n" in doc, f"{name}: no {section} section"
    documented = set(re.findall(r"^    (\w+):", doc.split("Args:")[1].split("Returns:")[0], re.M))
    assert documented == set(sig.parameters), f"{name}: Args lists {documented}"


@pytest.mark.parametrize("name", TYPES + ERRORS)
def test_type_resolves(name: str) -> None:
    cls = getattr(ptplan, name)
    assert inspect.isclass(cls) and cls.__name__ == name
    doc = cls.__dict__.get("__doc__") or ""
    has_doc = bool(doc.strip()) and not doc.startswith(f"{name}(")
    assert has_doc == (name not in UNDOCUMENTED_TYPES), (name, doc[:80])


def test_errors_and_version() -> None:
    from ptplan.core import errors
    from ptplan.core.version import __version__

    assert ptplan.__version__ == __version__
    for name in ERRORS:
        assert getattr(ptplan, name) is getattr(errors, name)
        assert issubclass(getattr(ptplan, name), ptplan.PlannerError)
    with pytest.raises(ptplan.InputError, match="not found"):
        ptplan.load_spec(ROOT / "no-such-spec.yaml")


def test_api_never_imports_the_cli() -> None:
    for path in (ROOT / "optimizer").glob("api*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        names += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        assert not [m for m in names if m.startswith("ptplan.cli")], path.name


IMPORT_COST = """
import sys
import ptplan
assert ptplan.__version__
print(sorted(m for m in sys.modules if m.startswith(("ptplan", "pydantic", "numpy"))))
"""


def test_import_ptplan_is_cheap() -> None:
    """``import ptplan`` loads the version and nothing else of ptplan (nor pydantic or numpy):
    the names are imported on first use."""
    out = subprocess.run([sys.executable, "-c", IMPORT_COST], cwd=ROOT, capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == str(["ptplan", "ptplan.core", "ptplan.core.version"])


SHARED = """
import pickle, sys, types
import ptplan.comparison.runner, ptplan.planfile.schema, ptplan.rendering.targets
import ptplan.reservations.portfolio, ptplan.scenarios.runner, ptplan.api
import ptplan
for name in ptplan.__all__:
    entry = getattr(ptplan, name)
    assert not isinstance(entry, types.ModuleType), name
for name in ("compare", "plan", "render", "reserve", "whatif", "estimate", "pareto"):
    entry = getattr(ptplan, name)
    assert isinstance(entry, types.FunctionType), name
    assert entry is getattr(sys.modules["ptplan.api"], name), name
    assert pickle.loads(pickle.dumps(entry)) is entry
from ptplan import plan
assert plan is ptplan.plan
print("ok")
"""


def test_entry_points_are_plain_functions_whatever_was_imported() -> None:
    """Every exported name is the function or type itself, never a module, even after the
    internal subpackages were imported first (no subpackage shares an exported name)."""
    out = subprocess.run([sys.executable, "-c", SHARED], cwd=ROOT, capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip() == "ok"


# --------------------------------------------------------------------------- the commands


def test_plan_is_the_cli_plan(grpo_plan: ptplan.Plan, plan_file: Path) -> None:
    assert isinstance(grpo_plan, ptplan.Plan)
    assert grpo_plan.to_json().rstrip("\n") == plan_file.read_text(encoding="utf-8").rstrip("\n")
    # a path instead of a spec, a catalog named instead of loaded: the same plan
    again = ptplan.plan(str(GRPO), "embedded", timings=False, explain=True)
    assert again.to_json() == grpo_plan.to_json()


def test_plan_options(spec: ptplan.ProjectSpec, tmp_path: Path) -> None:
    fast = ptplan.plan(spec, objective="time", timings=False)
    cli_fast = cli_json(tmp_path, "plan", GRPO, "--objective", "time", "--no-timings")
    assert as_json(json.loads(fast.to_json())) == cli_fast
    with pytest.raises(ptplan.InputError, match="objective"):
        ptplan.plan(spec, objective="fastest")  # type: ignore[arg-type]
    with pytest.raises(ptplan.InputError, match="risk"):
        ptplan.plan(spec, objective="time", risk="p90")


def test_verify(grpo_plan: ptplan.Plan, spec: ptplan.ProjectSpec, plan_file: Path) -> None:
    assert ptplan.verify(grpo_plan) == []
    assert ptplan.verify(grpo_plan, spec) == []
    assert ptplan.verify(plan_file, GRPO, policy=ROOT / "policies" / "default.yaml") == []
    assert ptplan.load_plan(plan_file) == grpo_plan
    tampered = grpo_plan.model_copy(update={"total_cost_usd": "1.00"})
    problems = ptplan.verify(tampered)
    assert problems and all(isinstance(p, str) for p in problems)


def test_estimate_is_the_cli_estimate(spec: ptplan.ProjectSpec, tmp_path: Path) -> None:
    report = ptplan.estimate(spec, gpus=["H100", "L40S"])
    assert as_json(report) == cli_json(tmp_path, "estimate", GRPO, "--gpu", "H100", "--gpu",
                                       "L40S")
    every = ptplan.estimate(GRPO)  # every GPU type of the embedded catalog, as without --gpu
    assert as_json(every) == cli_json(tmp_path, "estimate", GRPO)


def test_estimate_on_a_cluster_is_the_cli_estimate(spec: ptplan.ProjectSpec,
                                                   tmp_path: Path) -> None:
    """``ptplan.estimate(..., cluster=...)`` is ``ptplan estimate --cluster`` (issue #39)."""
    report = ptplan.estimate(spec, cluster="64xH100")
    assert "cluster_run" in report
    assert as_json(report) == cli_json(tmp_path, "estimate", GRPO, "--cluster", "64xH100")
    for pools in ("rollout=16,update=48", {"rollout": 16, "update": 48}):
        split = ptplan.estimate(GRPO, cluster="64xH100", gpus_per_node=8, pipeline="sync",
                                pools=pools)
        assert as_json(split) == cli_json(tmp_path, "estimate", GRPO, "--cluster", "64xH100",
                                          "--gpus-per-node", "8", "--pipeline", "sync",
                                          "--pools", "rollout=16,update=48")
    sft = ptplan.estimate(EX / "sft-8b.yaml", cluster="16xH100", pipeline="colocated")
    assert as_json(sft) == cli_json(tmp_path, "estimate", EX / "sft-8b.yaml", "--cluster",
                                    "16xH100")
    with pytest.raises(ptplan.InputError, match=r"^cluster 64H100: use NxGPU"):
        ptplan.estimate(spec, cluster="64H100")
    with pytest.raises(ptplan.InputError, match=r"^cluster 64xH100 with gpus"):
        ptplan.estimate(spec, gpus=["H100"], cluster="64xH100")
    with pytest.raises(ptplan.InputError, match=r"^pipeline sync: only with cluster"):
        ptplan.estimate(spec, pipeline="sync")
    with pytest.raises(ptplan.InputError, match=r"^pipeline: unknown value 'asyn'"):
        ptplan.estimate(spec, cluster="64xH100", pipeline="asyn")  # type: ignore[arg-type]
    with pytest.raises(ptplan.InputError, match=r"^pools: a colocated run"):
        ptplan.estimate(spec, cluster="64xH100", pools="rollout=8,update=8")


def test_render_writes_what_the_cli_writes(grpo_plan: ptplan.Plan, spec: ptplan.ProjectSpec,
                                           plan_file: Path, tmp_path: Path) -> None:
    written = ptplan.render(grpo_plan, "all", tmp_path / "api", spec=spec, check=True)
    cli("render", plan_file, "--target", "all", "--spec", GRPO, "-o", tmp_path / "cli",
        "--check")
    got = {p.relative_to(tmp_path / "api").as_posix(): p.read_text(encoding="utf-8")
           for p in written}
    want = {p.relative_to(tmp_path / "cli").as_posix(): p.read_text(encoding="utf-8")
            for p in sorted((tmp_path / "cli").rglob("*")) if p.is_file()}
    assert "skypilot/grpo-7b-math.yaml" in got
    assert got == want
    tampered = grpo_plan.model_copy(update={"total_cost_usd": "1.00"})
    with pytest.raises(ptplan.InputError, match="fails verification"):
        ptplan.render(tampered, "skypilot", tmp_path / "bad")
    assert not (tmp_path / "bad").exists()


def test_pareto_is_the_cli_pareto(spec: ptplan.ProjectSpec, tmp_path: Path) -> None:
    report = ptplan.pareto(spec, points=3)
    assert as_json(report) == cli_json(tmp_path, "pareto", GRPO, "--points", "3")


def test_whatif_is_the_cli_whatif(spec: ptplan.ProjectSpec, tmp_path: Path) -> None:
    rule = "capacity_type=spot *= 1.5"
    report = ptplan.whatif(spec, [rule], timings=False)
    assert as_json(report) == cli_json(tmp_path, "whatif", GRPO, "--price", rule, "--workers",
                                       "1", "--no-timings")
    with pytest.raises(ptplan.InputError, match="nothing to compare"):
        ptplan.whatif(spec)


def test_simulate_is_the_cli_simulate(grpo_plan: ptplan.Plan, plan_file: Path,
                                      tmp_path: Path) -> None:
    report = ptplan.simulate(grpo_plan, trials=2000, seed=7)
    assert as_json(report) == cli_json(tmp_path, "simulate", plan_file, "--trials", "2000",
                                       "--seed", "7")
    assert ptplan.simulate(plan_file, 2000, 7) == report


def test_reserve_is_the_cli_reserve(tmp_path: Path) -> None:
    portfolio = EX / "portfolio.yaml"
    report = ptplan.reserve(portfolio, timings=False)
    assert as_json(report) == cli_json(tmp_path, "reserve", portfolio, "--no-timings")
    content = yaml.safe_load(portfolio.read_text(encoding="utf-8"))  # a mapping, not a file
    assert ptplan.reserve(content, timings=False, base_dir=EX) == report


def test_compare_is_the_cli_compare(tmp_path: Path) -> None:
    report = ptplan.compare(COMPARE, risk=RISK)
    assert as_json(report) == cli_json(tmp_path, "compare", *COMPARE, "--risk", RISK)
    with pytest.raises(ptplan.InputError, match="two or more"):
        ptplan.compare(COMPARE[0])  # type: ignore[arg-type]


# --------------------------------------------------------------------------- the README


def _run_snippet(code: str, workdir: Path) -> None:
    """Run ``code`` as a script in ``workdir``, where ``examples/`` is the repository's."""
    (workdir / "examples").symlink_to(EX, target_is_directory=True)
    cwd = Path.cwd()
    os.chdir(workdir)
    try:
        exec(compile(code, "<snippet>", "exec"), {"__name__": "__main__"})
    finally:
        os.chdir(cwd)


def readme_python_blocks() -> list[str]:
    """The ```python blocks under the README's heading(s) that name Python."""
    blocks: list[str] = []
    level = 0
    fence: list[str] | None = None
    for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines():
        if fence is not None:
            if line.strip() == "```":
                blocks.append("\n".join(fence) + "\n")
                fence = None
            else:
                fence.append(line)
            continue
        heading = re.match(r"^(#+)\s+(.*)", line)
        if heading:
            depth = len(heading[1])
            if "Python" in heading[2]:
                level = depth
            elif level and depth <= level:
                level = 0
        elif level and line.strip() == "```python":
            fence = []
    return blocks


def test_readme_python_snippet_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocks = readme_python_blocks()
    if not blocks:
        pytest.fail("README.md has no ```python block under a heading that names Python "
                    "(the Python API section, e.g. '## Python API'): this test runs it")
    for n, code in enumerate(blocks):
        workdir = tmp_path / f"block{n}"
        workdir.mkdir()
        _run_snippet(code, workdir)
    assert capsys.readouterr().out.strip()


def test_agreed_snippet_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _run_snippet(SNIPPET, tmp_path)
    cost, nodes = capsys.readouterr().out.split(" ", 1)
    assert float(cost) > 0 and nodes.startswith("[")
    assert (tmp_path / "out" / "deploy" / "skypilot" / "grpo-7b-math.yaml").is_file()


# --------------------------------------------------------------------------- type checking

TYPED_USE = """
import ptplan

spec = ptplan.load_spec("examples/grpo-7b.yaml")
catalog = ptplan.load_catalog("embedded")
plan = ptplan.plan(spec, catalog)
reveal_type(spec)
reveal_type(catalog)
reveal_type(ptplan.load_policy())
reveal_type(plan)
reveal_type(ptplan.load_plan("plan.json"))
reveal_type(ptplan.verify(plan, spec))
reveal_type(ptplan.render(plan, "skypilot", "out/deploy", spec=spec))
reveal_type(ptplan.estimate(spec, gpus=["H100"]))
reveal_type(ptplan.pareto(spec, points=3))
reveal_type(ptplan.whatif(spec, ["gpu=H100 *= 0.9"]))
reveal_type(ptplan.reserve("examples/portfolio.yaml"))
reveal_type(ptplan.simulate(plan, trials=100))
reveal_type(ptplan.compare(["a.yaml", "b.yaml"]))
reveal_type(ptplan.__version__)
error: type[ptplan.PlannerError] = ptplan.InputError
ptplan.plan(spec, objective="fastest")
"""
REVEALED = ["ptplan.spec.project.ProjectSpec", "ptplan.providers.base.Catalog",
            "ptplan.policies.model.Policy", "ptplan.planfile.schema.Plan",
            "ptplan.planfile.schema.Plan", "list[str]", "list[pathlib.Path]",
            *["dict[str, Any]"] * 6, "str"]
"""What mypy reveals for the lines of :data:`TYPED_USE` (``builtins.`` left out: mypy
releases differ in whether they print it)."""


def test_type_checker_sees_the_api(tmp_path: Path) -> None:
    """mypy, on a script using the API against the package in its installed shape, infers
    the documented return types and rejects a wrong option; the API's own modules check
    clean (imports elsewhere are followed silently)."""
    staged = stage(tmp_path / "staged")
    (staged / "use.py").write_text(TYPED_USE, encoding="utf-8")
    own = ["ptplan/__init__.py", "ptplan/api/__init__.py", "ptplan/api/ops.py",
           "ptplan/api/inputs.py"]
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
         "--follow-imports=silent", "--cache-dir", str(tmp_path / "cache"),
         "--hide-error-context", "--no-error-summary", "--no-pretty", "use.py", *own],
        cwd=staged, capture_output=True, text=True, timeout=300,
        env={**os.environ, "MYPYPATH": str(staged)})
    lines = proc.stdout.splitlines()
    revealed = [re.sub(r"^.*Revealed type is \"(.*)\"$", r"\1", x).replace("builtins.", "")
                for x in lines if "Revealed type" in x]
    assert revealed == REVEALED, proc.stdout[-3000:]
    errors = [x for x in lines if ": error:" in x]
    last = len(TYPED_USE.strip("\n").splitlines()) + 1  # the line of objective="fastest"
    assert len(errors) == 1 and errors[0].startswith(f"use.py:{last}: error:") \
        and '"objective"' in errors[0], proc.stdout[-3000:] + proc.stderr[-2000:]
