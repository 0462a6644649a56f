"""Property-based fuzzing of every file ptplan reads (issue #21): specs, policies, custom
catalogs, plan files and price-cache rows, each derived from a valid file and then damaged by
Hypothesis (values replaced by any JSON/YAML value, including NaN, infinity, huge numbers,
control characters and nested structures; keys dropped or added; types changed), written to
disk and run through the CLI (``estimate``, ``check --policy``, ``prices show``, ``check``,
``check --spec``).

The property is the CLI's contract: every run ends with exit 0, 1, 2 or 3, and never with a
traceback (an exception escaping the command); an error is one ``error:`` line. In CI
(profile ``ci``) each target runs :data:`FUZZ_EXAMPLES` examples, derandomized; the ``deep``
profile (``python benchmarks/fuzz_deep.py``, or ``pytest tests/test_fuzz.py
--hypothesis-profile=deep``) runs 2,500 per target, 12,500 in all.
"""

from __future__ import annotations

import contextlib
import copy
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import EXAMPLES, example_dict
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from ptplan.cli.app import app
from ptplan.policies.model import _default_text
from ptplan.providers.base import Offer, ReservedRate
from ptplan.providers.cache import OFFER_COLUMNS, RATE_COLUMNS, Pull, store_pull

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden" / "cli"
runner = CliRunner()

FUZZ_EXAMPLES = 300
"""Examples per target in CI (the ``deep`` profile raises it)."""
FUZZ = settings(max_examples=max(FUZZ_EXAMPLES, settings.default.max_examples), deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.filter_too_much,
                                       HealthCheck.function_scoped_fixture])

# ---- values: anything a YAML or JSON file can hold, weighted toward trouble ----------------------

_text = st.one_of(
    st.sampled_from(["", " ", "x", "default", "H100", "aws", "us-east-1", "on_demand", "spot",
                     "reserved", "sft", "rl", "grpo", "../x", "/etc/passwd", "a\x00b",
                     "two\nlines", "\x1b[31m", "é", "1e999", "NaN", "-1", "0", "*", "[", "{"]),
    st.text(max_size=20))
_number = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, 1, -1, 0.5, 1e-12, 1e300, 10**20, 2**63, float("nan"), float("inf")]))
_scalar = st.one_of(st.none(), st.booleans(), _number, _text)
_value = st.recursive(_scalar, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(_text, inner, max_size=4)), max_leaves=12)


def _paths(data: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(data, dict):
        for k, v in data.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            out += _paths(v, (*prefix, i))
    return out


@st.composite
def damaged(draw: st.DrawFn, base: dict[str, Any]) -> dict[str, Any]:
    """``base`` with 1 to 3 edits: a value replaced, a key dropped, or a key added."""
    data = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(data)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent: Any = data
        for p in path[:-1]:
            parent = parent[p]
        action = draw(st.sampled_from(["replace", "replace", "drop", "add"]))
        if action == "replace":
            parent[path[-1]] = draw(_value)
        elif action == "drop" and isinstance(parent, dict):
            del parent[path[-1]]
        elif action == "add" and isinstance(parent, dict):
            parent[draw(_text)] = draw(_value)
    return data


def _write(tmp: Path, name: str, data: Any, fmt: str) -> Path:
    path = tmp / name
    if fmt == "json":
        text = json.dumps(data, allow_nan=True, default=str)
    else:
        text = yaml.safe_dump(data, allow_unicode=True, sort_keys=False)
    path.write_text(text, encoding="utf-8")
    return path


def _cli_ok(args: list[str]) -> None:
    """The CLI contract: a documented exit code, no escaped exception, one-line errors."""
    result = runner.invoke(app, args, prog_name="ptplan")
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"traceback for {args}: {result.exception!r}") from \
            result.exception
    assert result.exit_code in (0, 1, 2, 3), (args, result.exit_code, result.output)
    if result.exit_code in (2, 3):
        errors = [ln for ln in result.stderr.splitlines() if ln.strip()]
        assert len(errors) == 1 and errors[0].startswith("error: "), result.stderr


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


# ---- specs ---------------------------------------------------------------------------------------

@FUZZ
@given(st.sampled_from(["sft-8b.yaml", "grpo-7b.yaml", "opd-8b-from-32b.yaml"]), st.data(),
       st.sampled_from(["yaml", "json"]))
def test_fuzz_specs(workdir: Path, example: str, data: st.DataObject, fmt: str) -> None:
    spec = data.draw(damaged(example_dict(example)))
    path = _write(workdir, f"spec.{fmt}", spec, fmt)
    _cli_ok(["estimate", str(path), "--gpu", "H100", "--format", "json"])


# ---- policies ------------------------------------------------------------------------------------

_POLICY = yaml.safe_load(_default_text())


@FUZZ
@given(st.data(), st.sampled_from(["yaml", "json"]))
def test_fuzz_policies(workdir: Path, data: st.DataObject, fmt: str) -> None:
    policy = data.draw(damaged({**_POLICY, "extends": "default"}))
    path = _write(workdir, f"policy.{fmt}", policy, fmt)
    _cli_ok(["check", str(GOLDEN / "plan-grpo-7b.json"), "--policy", str(path)])


# ---- custom catalogs -----------------------------------------------------------------------------

_CATALOG = {
    "as_of": "2026-11-01", "name": "lab",
    "offers": [{"provider": "lab", "region": "local", "instance_type": "h100x8", "gpu": "H100",
                "gpus_per_node": 8, "on_demand_usd_per_hour": 20.0, "spot_usd_per_hour": 8.0,
                "reserved_1y_usd_per_hour": 14.0, "spot_interruptions_per_hour": 0.05,
                "max_nodes": 16, "reserved_nodes_held": 4, "reserved_term_years": 1,
                "reserved_sunk": False}],
    "storage_tiers": [{"provider": "lab", "region": "local", "tier": "nfs",
                       "usd_per_gb_month": 0.05}],
    "egress": [{"provider": "lab", "path": "inter_region", "usd_per_gb": 0.0}],
}


@FUZZ
@given(st.data(), st.sampled_from(["yaml", "json"]))
def test_fuzz_custom_catalogs(workdir: Path, data: st.DataObject, fmt: str) -> None:
    catalog = data.draw(damaged(_CATALOG))
    path = _write(workdir, f"catalog.{fmt}", catalog, fmt)
    _cli_ok(["prices", "show", "--catalog", str(path), "--format", "json"])


# ---- plan files ----------------------------------------------------------------------------------

_PLANS = {name: json.loads((GOLDEN / f"plan-{name}.json").read_text(encoding="utf-8"))
          for name in ("sft-8b", "grpo-7b", "opd-8b-from-32b")}
_SPEC_FOR = {"sft-8b": "sft-8b.yaml", "grpo-7b": "grpo-7b.yaml",
             "opd-8b-from-32b": "opd-8b-from-32b.yaml"}


@FUZZ
@given(st.sampled_from(sorted(_PLANS)), st.data(), st.booleans())
def test_fuzz_plan_files(workdir: Path, name: str, data: st.DataObject, with_spec: bool
                         ) -> None:
    plan = data.draw(damaged(_PLANS[name]))
    path = _write(workdir, "plan.json", plan, "json")
    extra = ["--spec", str(EXAMPLES / _SPEC_FOR[name])] if with_spec else []
    _cli_ok(["check", str(path), *extra])


# ---- price-cache rows ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def good_cache(workdir: Path) -> Path:
    path = workdir / "good.sqlite"
    offers = (Offer("aws", "us-east-1", "", "p5.48xlarge", "H100", 8, "on_demand", 98.32,
                    192.0, 2048.0, None, None, "2026-12-01T00:00:00Z", "test", ""),
              Offer("aws", "us-east-1", "use1-az1", "p5.48xlarge", "H100", 8, "spot", 40.0,
                    192.0, 2048.0, 0.01, 8, "2026-12-01T00:00:00Z", "test", "spot"))
    rates = (ReservedRate("aws", "us-east-1", "p5.48xlarge", 1, 60.0, "test", False,
                          "standard", "No Upfront", 0.0, 60.0, "2026-12-01T00:00:00Z"),)
    store_pull(Pull("aws", "2026-12-01T00:00:00Z", "test", (), offers, rates, (), ("n",)), path)
    return path


_COLUMNS = {"offers": OFFER_COLUMNS, "reserved_rates": RATE_COLUMNS,
            "pulls": ("provider", "region", "as_of", "source", "notes"),
            "exclusions": ("provider", "region", "reason", "as_of", "source")}
_sql_value = st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1), st.floats(),
                       st.text(max_size=12), st.binary(max_size=8),
                       st.sampled_from(["[]", "[1]", "{}", "spot", "on_demand", "NaN", "-1"]))


@FUZZ
@given(st.data())
def test_fuzz_cache_rows(workdir: Path, good_cache: Path, data: st.DataObject) -> None:
    path = workdir / "fuzzed.sqlite"
    shutil.copy(good_cache, path)
    edits = []  # drawn before the file is opened: a draw that ends the example (Hypothesis
    for _ in range(data.draw(st.integers(1, 3))):  # stops it by raising) then leaves no open
        table = data.draw(st.sampled_from(sorted(_COLUMNS)))  # write transaction locking the
        column = data.draw(st.sampled_from(_COLUMNS[table]))  # next example's file (each
        edits.append((table, column, data.draw(_sql_value)))  # ptplan read waited 30 s)
    con = sqlite3.connect(path)
    try:
        con.execute("PRAGMA ignore_check_constraints = ON")  # as another tool might write it
        for table, column, value in edits:
            with contextlib.suppress(sqlite3.DatabaseError):  # NOT NULL, UNIQUE: refused
                con.execute(f"UPDATE {table} SET {column} = ?", (value,))
        con.commit()
    finally:
        con.close()
    _cli_ok(["prices", "show", "--catalog", str(path), "--format", "json"])


def test_profile_sets_the_example_count() -> None:
    """CI runs FUZZ_EXAMPLES per target; the deep profile more."""
    assert FUZZ.max_examples >= FUZZ_EXAMPLES
