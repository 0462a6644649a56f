"""Start-up that pays only for what it uses (the planning-speed issue): ``ptplan plan`` imports
no cloud SDK, chart, Ray, template, ledger, browser or tracking module, nor the price cache's
or custom catalogs' readers when the catalog is the embedded one. Checked in a fresh
interpreter that runs the real command and then lists ``sys.modules``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("boto3", "botocore", "google", "matplotlib", "ray", "jinja2", "mlflow", "kubernetes",
         "playwright", "sqlalchemy", "alembic", "altair", "sky", "tensorboard")
RUN = """
import json, sys
from typer.testing import CliRunner
from ptplan.cli.app import app
result = CliRunner().invoke(app, sys.argv[1:])
assert result.exit_code == 0, result.output
print(json.dumps(sorted(sys.modules)))
"""


@pytest.mark.parametrize("args", [
    ["plan", "examples/sft-8b.yaml", "--format", "json"],
    ["plan", "examples/grpo-7b.yaml", "--format", "table"],
    ["check", "tests/data/plans/grpo-7b-schema3.json"],
])
def test_plan_and_check_import_no_heavy_module(args):
    out = subprocess.run([sys.executable, "-c", RUN, *args], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    modules = set(json.loads(out.stdout.strip().splitlines()[-1]))
    loaded = {m.split(".")[0] for m in modules}
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))
    # the price cache (SQLite and its row models) and custom catalogs (YAML) only when named
    assert not modules & {"ptplan.providers.cache", "ptplan.providers.custom"}, sorted(modules)


def test_registry_reads_the_cache_files_the_cache_writes():
    from ptplan.providers import cache, registry

    assert registry.CACHE_SUFFIXES == cache.CACHE_SUFFIXES
