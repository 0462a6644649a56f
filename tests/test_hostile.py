"""Regression tests of issue #21 (hostile input), each with the input that broke it: bounded
parsing (alias bombs, size, nesting), non-finite numbers and control characters, one-line usage
errors, and a price cache with bad content."""

from __future__ import annotations

import json
import os
import resource
import shutil
import sqlite3
import time
from pathlib import Path

import pytest
from conftest import EXAMPLES, assert_one_line
from typer.testing import CliRunner

from ptplan.cli.app import app
from ptplan.core.errors import InputError, ProviderError
from ptplan.core.yamlio import MAX_FILE_BYTES, parse_mapping, read_mapping
from ptplan.providers.base import Offer, ReservedRate
from ptplan.providers.cache import Pull, load_cache_catalog, store_pull

ROOT = Path(__file__).resolve().parent.parent
runner = CliRunner()

BOMB = "\n".join(
    [f'l0: &l0 [{", ".join(["lol"] * 9)}]']
    + [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, 9)]
    + ["name: *l8", "method: sft"]) + "\n"
"""A "billion laughs" spec of 450 bytes: 9^9 strings when expanded; the error message for
``name`` used to expand them (2.5 GB and a hang)."""


def _cli(*args: str):
    return runner.invoke(app, list(args), prog_name="ptplan")


def _error_line(result) -> str:
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert "Traceback" not in result.output
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def test_alias_bomb_is_refused_fast_and_small(tmp_path: Path) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB, encoding="utf-8")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    with pytest.raises(InputError, match="aliases expand the document beyond") as info:
        read_mapping(path, "spec")
    assert time.perf_counter() - start < 1.0
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < 20
    assert_one_line(str(info.value))
    line = _error_line(_cli("plan", str(path)))
    assert "alias" in line and len(line) < 300


def test_aliases_in_moderation_are_fine() -> None:
    text = "base: &b {a: 1, b: 2}\nx: *b\ny: *b\n"
    assert parse_mapping(text, "spec") == {"base": {"a": 1, "b": 2}, "x": {"a": 1, "b": 2},
                                           "y": {"a": 1, "b": 2}}


def test_deep_nesting_is_refused_fast(tmp_path: Path) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text("name: x\nz: " + "[" * 2_000_000, encoding="utf-8")
    start = time.perf_counter()
    with pytest.raises(InputError, match="nest deeper than 64 levels"):
        read_mapping(path, "spec")
    assert time.perf_counter() - start < 1.0
    with pytest.raises(InputError, match="nested too deeply"):
        parse_mapping('{"a":' * 100_000 + "1" + "}" * 100_000, "plan", "p.json")


def test_oversized_file_is_refused_before_parsing(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_text("name: x\n" + "# padding\n" * (MAX_FILE_BYTES // 10 + 1), encoding="utf-8")
    start = time.perf_counter()
    with pytest.raises(InputError, match="larger than 2 MiB"):
        read_mapping(path, "spec")
    assert time.perf_counter() - start < 0.5


@pytest.mark.parametrize("text, origin, where", [
    ('{"makespan_hours": NaN}', "p.json", "makespan_hours = nan"),
    ('{"a": {"b": [1, Infinity]}}', "p.json", "a.b[1] = inf"),
    ('{"a": -Infinity}', "p.json", "a = -inf"),
    ('{"a": 1e999}', "p.json", "a = inf"),
    ("sla: {deadline_hours: .inf}", "s.yaml", "sla.deadline_hours = inf"),
    ("a: [.nan]", "s.yaml", "a[0] = nan"),
])
def test_non_finite_numbers_refused_anywhere(text: str, origin: str, where: str) -> None:
    with pytest.raises(InputError, match="numbers must be finite") as info:
        parse_mapping(text, "plan", origin)
    assert where in str(info.value)
    assert_one_line(str(info.value))


def test_non_finite_number_in_a_plan_file_is_exit_2(tmp_path: Path) -> None:
    plan = json.loads((ROOT / "tests/golden/cli/plan-sft-8b.json").read_text())
    text = json.dumps(plan).replace('"fill_fraction": 0.0', '"fill_fraction": NaN')
    assert "NaN" in text
    path = tmp_path / "plan.json"
    path.write_text(text, encoding="utf-8")
    line = _error_line(_cli("check", str(path)))
    assert "fill_fraction = nan" in line


@pytest.mark.parametrize("text, field", [
    ('name: "a\\x00b"\n', "name"),
    ('name: "two\\nlines"\n', "name"),
    ('name: ok\nplacement: {regions: ["us-\\x1b[31mred"]}\n', "placement.regions[0]"),
    ('"na\\x07me": x\n', "key"),
])
def test_control_characters_refused_naming_the_field(text: str, field: str) -> None:
    with pytest.raises(InputError, match="control character") as info:
        parse_mapping(text, "spec", "s.yaml")
    assert field in str(info.value)
    assert_one_line(str(info.value))


def test_newline_allowed_in_free_text() -> None:
    assert parse_mapping('notes: "one\\ntwo"\n', "catalog") == {"notes": "one\ntwo"}


def test_null_byte_in_policy_extends(tmp_path: Path) -> None:
    """Used to end in a traceback (``ValueError: embedded null byte``)."""
    policy = tmp_path / "p.yaml"
    policy.write_text('name: x\nextends: "de\\0fault"\n', encoding="utf-8")
    line = _error_line(_cli("plan", str(EXAMPLES / "sft-8b.yaml"), "--policy", str(policy)))
    assert "extends" in line and "control character" in line


def test_file_name_with_a_newline_is_quoted(tmp_path: Path) -> None:
    odd = tmp_path / "we\nird.yaml"
    odd.write_text("name: x\n", encoding="utf-8")
    line = _error_line(_cli("plan", str(odd)))
    assert "'we\\nird.yaml'" in line or "we\\nird.yaml" in line
    spaced = tmp_path / "my spec.yaml"
    spaced.write_text("name: x\nmethod: sft\nbogus: 1\n", encoding="utf-8")
    line = _error_line(_cli("plan", str(spaced)))
    assert f"spec {str(spaced)!r}:" in line


@pytest.mark.parametrize("args, text", [
    (("check",), "ptplan check: Missing argument 'PLAN.json'; see `ptplan check --help`"),
    (("plan", "--bogus", "x"), "ptplan plan: No such option: --bogus; see `ptplan plan --help`"),
    (("--bogus",), "ptplan: No such option: --bogus; see `ptplan --help`"),
    (("nope",), "ptplan: No such command 'nope'; see `ptplan --help`"),
    (("pareto", "x.yaml", "--points", "many"), "error: --points: Input should be a valid integer"),
])
def test_usage_errors_are_one_line(args: tuple[str, ...], text: str) -> None:
    """These were Click's framed usage boxes (six lines) on stderr."""
    line = _error_line(_cli(*args))
    assert text in line
    assert "╭" not in line


def test_directory_as_plan_and_as_cache(tmp_path: Path) -> None:
    line = _error_line(_cli("check", str(tmp_path)))
    assert "is a directory; pass a file" in line
    with pytest.raises(InputError, match="is a directory; pass the cache file"):
        load_cache_catalog(tmp_path)
    line = _error_line(_cli("prices", "show", "--catalog", str(tmp_path)))
    assert "directory" in line


# --- the price cache ---------------------------------------------------------------------

def _offer(price: float = 98.3, **kw) -> Offer:
    return Offer(**{"provider": "aws", "region": "us-east-1", "zone": "",
                    "instance_type": "p5.48xlarge", "gpu": "H100", "gpus_per_node": 8,
                    "capacity_type": "on_demand", "usd_per_hour": price,
                    "as_of": "2026-12-01T00:00:00Z", "source": "test", **kw})


def _pull(*offers: Offer, rates: tuple[ReservedRate, ...] = ()) -> Pull:
    return Pull("aws", "2026-12-01T00:00:00Z", "test", (), offers or (_offer(),), rates, (),
                ("a note",))


@pytest.fixture
def cache_file(tmp_path: Path) -> Path:
    path = tmp_path / "c.sqlite"
    store_pull(_pull(_offer(), _offer(8.0, capacity_type="spot", zone="use1-az1",
                                      interruptions_per_hour=0.01)), path)
    assert len(load_cache_catalog(path).offers) == 2
    return path


@pytest.mark.parametrize("sql, table, column", [
    ("UPDATE offers SET usd_per_hour = 'abc'", "offers", "usd_per_hour = 'abc': stored as str"),
    ("UPDATE offers SET usd_per_hour = -1", "offers", "usd_per_hour = -1"),
    ("UPDATE offers SET usd_per_hour = 0", "offers", "does not say the capacity is free"),
    ("UPDATE offers SET capacity_type = 'preemptible'", "offers", "capacity_type = 'preemptible'"),
    ("UPDATE offers SET interruptions_per_hour = 9e999", "offers",
     "interruptions_per_hour = inf"),
    ("UPDATE offers SET max_nodes = -3", "offers", "max_nodes = -3"),
    ("UPDATE offers SET gpus_per_node = 'eight'", "offers", "gpus_per_node = 'eight'"),
    ("UPDATE pulls SET notes = 'not json'", "pulls", "notes = 'not json': is not valid JSON"),
    ("UPDATE pulls SET notes = '{\"a\": 1}'", "pulls", "not a JSON list of strings"),
])
def test_bad_cache_row_names_table_key_and_fix(cache_file: Path, tmp_path: Path, sql: str,
                                               table: str, column: str) -> None:
    bad = tmp_path / "bad.sqlite"
    shutil.copy(cache_file, bad)
    con = sqlite3.connect(bad)
    con.execute("PRAGMA ignore_check_constraints = ON")  # as another tool might write it
    con.execute(sql)
    con.commit()
    con.close()
    with pytest.raises(ProviderError) as info:
        load_cache_catalog(bad)
    message = str(info.value)
    assert_one_line(message)
    assert f"table {table}, row aws:" in message and column in message
    assert "`ptplan prices refresh --provider aws`" in message
    assert "report a bug" not in message
    result = _cli("plan", str(EXAMPLES / "sft-8b.yaml"), "--catalog", str(bad))
    assert result.exit_code == 3 and "Traceback" not in result.output
    assert len(result.stderr.strip().splitlines()) == 1


def test_bad_rows_are_not_written(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    for bad in (_offer(float("nan")), _offer(-1.0), _offer(1.0, capacity_type="preemptible"),
                _offer(1.0, max_nodes=0), _offer(1.0, interruptions_per_hour=float("inf"))):
        with pytest.raises(ProviderError, match=r"could not be stored \(table offers, row aws:.*"
                                                r"the cache is unchanged"):
            store_pull(_pull(bad), path)
    assert not path.exists()
    rate = ReservedRate("aws", "us-east-1", "p5.48xlarge", 1, float("inf"), "test", False)
    with pytest.raises(ProviderError, match="table reserved_rates"):
        store_pull(_pull(rates=(rate,)), path)


def test_zero_price_allowed_where_the_row_says_free(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    store_pull(_pull(_offer(0.0, capacity_type="reserved", note="sunk: zero marginal cost")),
               path)
    assert load_cache_catalog(path).offers[0].usd_per_hour == 0.0


def test_read_only_cache_has_its_own_message(cache_file: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if Path(p) == cache_file
                        else real(p, mode))
    with pytest.raises(ProviderError, match=r"is read-only; make it writable .*--cache; "
                                            "the cache is unchanged"):
        store_pull(_pull(), cache_file)
    assert len(load_cache_catalog(cache_file).offers) == 2  # reading still works


def test_read_only_database_error_is_named(cache_file: Path) -> None:
    """SQLite's own refusal (a read-only file system, or a file the OS will not let us write)
    gets the read-only message, not 'not a ptplan price cache'."""
    from ptplan.providers import cache as cache_module

    with pytest.raises(ProviderError, match="is read-only"):
        with cache_module._connect(cache_file, write=True) as con:
            raise sqlite3.OperationalError("attempt to write a readonly database")
        del con


# --- custom catalogs ---------------------------------------------------------------------

_OFFER = ("{provider: lab, region: local, instance_type: h100x8, gpu: H100, gpus_per_node: 8, "
          "on_demand_usd_per_hour: 20.0, spot_usd_per_hour: 8.0")


@pytest.mark.parametrize("extra, field, text", [
    ("spot_interruptions_per_hour: .inf", "offers[0].spot_interruptions_per_hour = inf",
     "numbers must be finite"),
    ("spot_interruptions_per_hour: -0.1", "offers[0].spot_interruptions_per_hour = -0.1",
     "greater than or equal to 0"),
    ("max_nodes: -1", "offers[0].max_nodes = -1", "greater than 0"),
    ("max_nodes: 0", "offers[0].max_nodes = 0", "greater than 0"),
    ("spot_max_nodes: 0", "offers[0].spot_max_nodes = 0", "greater than 0"),
    ("capacity_type: preemptible", "offers[0].capacity_type", "unknown key"),
])
def test_custom_catalog_hazards_and_caps(tmp_path: Path, extra: str, field: str,
                                         text: str) -> None:
    """An infinite hazard, a negative cap and an unknown capacity type were accepted silently
    (issue #21)."""
    path = tmp_path / "lab.yaml"
    path.write_text(f"as_of: 2026-11-01\noffers:\n  - {_OFFER}, {extra}}}\n", encoding="utf-8")
    line = _error_line(_cli("prices", "show", "--catalog", str(path)))
    assert field in line and text in line


def test_error_with_a_newline_stays_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    import typer

    from ptplan.cli.common import _run

    def fail() -> None:
        raise InputError("value 'two\nlines' is bad; fix it")

    with pytest.raises(typer.Exit) as info:
        _run(fail)
    assert info.value.exit_code == 2
    err = capsys.readouterr().err
    assert err == "error: value 'two\\nlines' is bad; fix it\n"


def test_zero_gpus_per_node_with_spec_is_refused_not_a_traceback(tmp_path: Path) -> None:
    """``check --spec`` divided by zero on a pool of 0 GPUs per node (found by the tamper
    suite); the schema now refuses it when the plan is read."""
    plan = json.loads((ROOT / "tests/golden/cli/plan-sft-8b.json").read_text())
    plan["pools"][0]["gpus_per_node"] = 0
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan), encoding="utf-8")
    line = _error_line(_cli("check", str(path), "--spec", str(EXAMPLES / "sft-8b.yaml")))
    assert "pools[0].gpus_per_node = 0" in line and "greater than or equal to 1" in line
