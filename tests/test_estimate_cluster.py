"""``ptplan estimate --cluster NxGPU`` (issue #39): the job on a cluster a team already has.

Through Typer's CliRunner: the three formats for an RL and an SFT example, the three pipelines,
pools given and chosen, every bad input (exit 2, one line), ``--help`` and shell completion,
determinism, and the figures' own arithmetic (GPU-hours = wall x GPUs, utilisation ≤ 1, the
80 % interval = the fit's interval of the figure, never hard-coded here: the fit changes). The
Python API's equality with the command is in ``tests/test_public_api.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import EXAMPLES
from typer.testing import CliRunner

from ptplan.cli.app import app
from ptplan.core.cluster_option import cluster_request, default_pipeline, parse_cluster
from ptplan.core.errors import InputError
from ptplan.core.fit import model_interval
from ptplan.demand.cluster import run_on_cluster
from ptplan.report.tables import REFERENCE_NOT_CLUSTER
from ptplan.spec.project import load_spec

runner = CliRunner()
GRPO = str(EXAMPLES / "grpo-7b.yaml")
SFT = str(EXAMPLES / "sft-8b.yaml")
RL_PHASES = {"generation", "eval", "scoring", "update", "framework_overhead", "weight_sync",
             "checkpoint"}


def _invoke(*args: str) -> Any:
    return runner.invoke(app, list(args))


def _ok(*args: str) -> str:
    r = _invoke(*args)
    assert r.exit_code == 0, (r.exit_code, r.output)
    return str(r.stdout)


def _json(*args: str) -> dict[str, Any]:
    return dict(json.loads(_ok(*args, "--format", "json")))


def _user_error(args: list[str], *expected: str) -> str:
    r = _invoke(*args)
    assert r.exit_code == 2, (r.exit_code, r.output)
    assert r.stdout == ""
    err = str(r.stderr)
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1, err
    assert err.startswith("error: ")
    for text in expected:
        assert text in err, (text, err)
    return err


# --------------------------------------------------------------------------- the figures


def _check_run(run: dict[str, Any], method: str) -> None:
    """What every cluster run holds, whatever the demand model's numbers."""
    assert run["gpu_hours"] == pytest.approx(run["wall_hours"] * run["gpus"], rel=1e-9)
    assert 0 < run["utilisation"] <= 1
    assert run["utilisation"] == pytest.approx(
        min(1.0, run["reference_pool_gpu_hours"] / run["gpu_hours"]), rel=1e-9)
    assert run["wall_hours"] == pytest.approx(run["seconds_per_step"] * run["steps"] / 3600,
                                              rel=1e-9)
    iv = model_interval(method)
    interval = run["interval"]
    assert interval["level"] == iv.level == 0.8
    assert interval["basis"] == iv.basis
    for key in ("seconds_per_step", "wall_hours", "gpu_hours"):
        lo, hi = interval[key]
        assert (lo, hi) == pytest.approx(iv.of(run[key]), rel=1e-9), key
        assert lo <= run[key] <= hi, (
            f"{key}: the fit's {iv.family} interval [{iv.low}, {iv.high}] x the figure excludes "
            "the figure itself: the model is biased for these jobs; refit or re-centre")
    names = [p["name"] for p in run["phases"]]
    assert len(names) == len(set(names)) and set(names) <= RL_PHASES
    assert all(p["seconds_per_step"] > 0 for p in run["phases"])
    busy = sum(p["seconds_per_step"] for p in run["phases"])
    if run["pipeline"] == "async":  # generation overlaps training: the step is the longer one
        assert run["seconds_per_step"] <= busy * (1 + 1e-9)
    else:  # one phase after another
        assert run["seconds_per_step"] == pytest.approx(busy, rel=1e-9)


@pytest.mark.parametrize("pipeline", ["colocated", "sync", "async"])
def test_rl_pipelines_json(pipeline: str) -> None:
    report = _json("estimate", GRPO, "--cluster", "64xH100", "--pipeline", pipeline)
    assert report["spec_name"] == "grpo-7b-math"
    assert set(report["totals"]["gpu_hours"]) == {"H100"}  # the usual estimate, on that GPU
    assert list(report)[-1] == "cluster_run"
    run = report["cluster_run"]
    assert list(run)[:11] == ["gpu", "gpus", "gpus_per_node", "pipeline", "pools",
                              "seconds_per_step", "seconds_per_step_without_checkpoint",
                              "steps", "wall_hours", "gpu_hours", "utilisation"]
    assert (run["gpu"], run["gpus"], run["gpus_per_node"], run["pipeline"]) == (
        "H100", 64, 8, pipeline)
    assert run["steps"] == report["steps"] == 300
    names = [p["name"] for p in run["phases"]]
    assert names[0] == "generation" and "update" in names and "scoring" in names
    if pipeline == "colocated":  # the refit into the engines on the same GPUs
        assert run["pools"] == {} and "weight_sync" in names
    else:  # the best split, in whole nodes, noted
        pools = run["pools"]
        assert pools["rollout"] % 8 == 0 and pools["rollout"] + pools["update"] == 64
        assert "weight_sync" in names
        assert any(n.startswith("pools: the split of 64 GPUs") for n in run["notes"])
    _check_run(run, "rl")


@pytest.mark.fitted  # the figures a user sees: the stored fit's factors and intervals
@pytest.mark.parametrize(("spec", "method", "pipeline"), [
    (GRPO, "rl", "colocated"), (GRPO, "rl", "sync"), (GRPO, "rl", "async"),
    (SFT, "sft", "colocated")])
def test_figures_as_shipped(spec: str, method: str, pipeline: str) -> None:
    _check_run(_json("estimate", spec, "--cluster", "32xH100", "--pipeline", pipeline)[
        "cluster_run"], method)


def test_rl_default_pipeline_is_the_specs() -> None:
    """grpo-7b says ``pipeline: auto``: colocated."""
    assert _json("estimate", GRPO, "--cluster", "64xH100")["cluster_run"]["pipeline"] == \
        "colocated"
    assert default_pipeline("rl", "auto") == "colocated"
    assert default_pipeline("rl", "async") == "async"
    assert default_pipeline("sft", "colocated") == "colocated"
    assert default_pipeline("generate", "auto") == "colocated"


def test_the_cli_is_run_on_cluster() -> None:
    """The block is :func:`run_on_cluster`'s, rounded as every JSON output."""
    from ptplan.core.numbers import round_floats

    spec = load_spec(GRPO)
    want = round_floats(run_on_cluster(spec, "H100", 64, 8, "sync",
                                       {"rollout": 16, "update": 48}).to_json())
    got = _json("estimate", GRPO, "--cluster", "64xH100", "--pipeline", "sync", "--pools",
                "rollout=16,update=48")["cluster_run"]
    assert got == json.loads(json.dumps(want))


def test_pools_given() -> None:
    run = _json("estimate", GRPO, "--cluster", "64xH100", "--pipeline", "async", "--pools",
                "rollout=32,update=24,scoring=8")["cluster_run"]
    assert run["pools"] == {"rollout": 32, "update": 24, "scoring": 8}
    assert run["notes"] == []  # nothing chosen for the user
    _check_run(run, "rl")
    shared = _json("estimate", GRPO, "--cluster", "64xH100", "--pipeline", "sync", "--pools",
                   "rollout=32,update=32")["cluster_run"]
    assert shared["pools"] == {"rollout": 32, "update": 32, "scoring": 32}  # on update's GPUs


def test_auto_split_is_no_slower_than_a_given_split() -> None:
    auto = _json("estimate", GRPO, "--cluster", "64xH100", "--pipeline", "sync")["cluster_run"]
    given = _json("estimate", GRPO, "--cluster", "64xH100", "--pipeline", "sync", "--pools",
                  "rollout=32,update=32")["cluster_run"]
    assert auto["seconds_per_step"] <= given["seconds_per_step"] * (1 + 1e-9)


def test_sft_json() -> None:
    report = _json("estimate", SFT, "--cluster", "16xH100")
    run = report["cluster_run"]
    assert run["pipeline"] == "colocated" and run["pools"] == {}
    assert [p["name"] for p in run["phases"]] == ["eval", "update", "checkpoint"]
    assert run["steps"] == report["steps"]
    _check_run(run, "sft")


def test_gpu_aliases_and_node_size() -> None:
    run = _json("estimate", GRPO, "--cluster", "8xa100-80gb", "--gpus-per-node", "4")[
        "cluster_run"]
    assert (run["gpu"], run["gpus"], run["gpus_per_node"]) == ("A100-80GB", 8, 4)
    small = _json("estimate", SFT, "--cluster", "4XH100")["cluster_run"]  # one node, part used
    assert (small["gpus"], small["gpus_per_node"]) == (4, 8)


# --------------------------------------------------------------------------- text formats


@pytest.mark.parametrize("spec", [GRPO, SFT])
def test_table(spec: str) -> None:
    out = _ok("estimate", spec, "--cluster", "16xH100")
    run = _json("estimate", spec, "--cluster", "16xH100")["cluster_run"]
    assert "on 16 x H100 (nodes of 8), colocated" in out
    for text in ("generation (drain tail included)" if spec == GRPO else "update",
                 "checkpoint (amortised per step)", "step time", "wall time", "GPU-hours",
                 "utilisation", "pools (GPUs): none, every phase on all 16",
                 "pipeline colocated", f"interval: 80 %, {run['interval']['basis'][:40]}"):
        assert text in out, text
    lo, hi = run["interval"]["wall_hours"]
    assert f"(80 %: {_num(lo)}–{_num(hi)} h)" in out
    assert REFERENCE_NOT_CLUSTER not in out  # that line is the reference-pool table's


def _num(x: float) -> str:
    from ptplan.report.tables_cluster import num

    return num(x)


def test_table_pools_and_pipeline_lines() -> None:
    out = _ok("estimate", GRPO, "--cluster", "64xH100", "--pipeline", "async", "--pools",
              "rollout=32,update=32")
    assert "pools (GPUs): rollout 32, update 32, scoring 32" in out
    assert "weight sync" in out and "update → rollout" in out
    assert "async: generation (and the weight sync) overlaps scoring and update" in out


def test_each_phase_row_names_its_pool() -> None:
    """The table's "pool (GPUs)" column, row by row: colocated, every phase on all GPUs and the
    refit in place; with pools, each phase on its own (scoring on the update pool when it has
    none) and the weight sync from the update pool to the rollout pool."""
    from ptplan.report.tables_cluster import phase_rows

    def pools(*args: str) -> dict[str, str]:
        _, rows = phase_rows(_json("estimate", GRPO, "--cluster", *args)["cluster_run"])
        return {r[0]: r[2] for r in rows if r[0] != "step"}

    colo = pools("16xH100")
    assert colo.pop("weight sync") == "all 16 (refit in place)"
    assert set(colo.values()) == {"all 16"} and "generation (drain tail included)" in colo
    apart = pools("64xH100", "--pipeline", "async", "--pools", "rollout=32,update=16")
    assert apart == {"generation (drain tail included)": "rollout 32",
                     "eval (amortised per step)": "rollout 32", "scoring": "scoring 16",
                     "update": "update 16", "weight sync": "update → rollout",
                     "checkpoint (amortised per step)": "update 16"}


@pytest.mark.parametrize("spec", [GRPO, SFT])
def test_markdown(spec: str) -> None:
    out = _ok("estimate", spec, "--cluster", "16xH100", "--format", "markdown")
    assert out.startswith("# ptplan estimate: ")
    assert "| phase | seconds / step | pool (GPUs) | precision | layout |" in out
    assert "| run | expected (interval) |" in out
    assert "- utilisation: " in out and "- interval: 80 %" in out


def test_reference_table_says_it_is_not_a_cluster() -> None:
    for fmt in ("table", "markdown"):
        out = _ok("estimate", GRPO, "--gpu", "H100", "--format", fmt)
        assert REFERENCE_NOT_CLUSTER in out
        assert "--cluster NxGPU" in REFERENCE_NOT_CLUSTER
    table = _ok("estimate", GRPO, "--gpu", "H100").splitlines()
    last_row = max(i for i, line in enumerate(table) if line.startswith("└"))
    assert table[last_row + 1] == REFERENCE_NOT_CLUSTER  # the line right under the table


@pytest.mark.fitted  # as shipped: the fresh process runs the stored fit (tests/conftest.py)
@pytest.mark.shipped_framework  # and reads the spec with the shipped default framework
@pytest.mark.parametrize("fmt", ["table", "json", "markdown"])
def test_same_bytes_twice(fmt: str, tmp_path: Path) -> None:
    args = ["estimate", GRPO, "--cluster", "64xH100", "--pipeline", "async", "--format", fmt]
    assert _ok(*args) == _ok(*args)
    # and in a fresh process (no state carried from an earlier run)
    env = {**os.environ, "COLUMNS": "200"}
    proc = subprocess.run([sys.executable, "-m", "ptplan", "-q", *args], capture_output=True,
                          text=True, env=env, check=True)
    assert proc.stdout == _ok(*args)


# --------------------------------------------------------------------------- bad input


BAD: list[tuple[list[str], tuple[str, ...]]] = [
    (["--cluster", "64H100"], ("--cluster 64H100: use NxGPU, e.g. 64xH100",)),
    (["--cluster", "H100"], ("--cluster H100", "NxGPU")),
    (["--cluster", ""], ("--cluster ''", "NxGPU")),
    (["--cluster", "0xH100"], ("--cluster 0xH100", "1 to 100,000")),
    (["--cluster", "1000000xH100"], ("--cluster 1000000xH100", "1 to 100,000")),
    (["--cluster", "-8xH100"], ("--cluster -8xH100", "NxGPU")),
    (["--cluster", "64xH1000"], ("--cluster 64xH1000", "unknown GPU 'H1000'", "did you mean")),
    (["--cluster", "12xH100"], ("--cluster 12xH100", "not whole nodes of 8",
                                "--gpus-per-node")),
    (["--cluster", "64xH100", "--gpus-per-node", "0"], ("--gpus-per-node 0", "e.g. 8")),
    (["--cluster", "64xH100", "--gpus-per-node", "-8"], ("--gpus-per-node -8",)),
    (["--cluster", "64xH100", "--gpus-per-node", "eight"], ("--gpus-per-node",)),
    (["--cluster", "64xH100", "--pipeline", "asyn"], ("--pipeline", "'asyn'", "async")),
    (["--cluster", "64xH100", "--pools", "rollout=32,update=32"],
     ("--pools", "colocated", "--pipeline sync or async")),
    (["--cluster", "64xH100", "--pipeline", "sync", "--pools", "rollout=32"],
     ("--pools rollout=32", "no update pool", "rollout=N,update=M")),
    (["--cluster", "64xH100", "--pipeline", "sync", "--pools", "rollout=8,updat=8"],
     ("--pools rollout=8,updat=8", "unknown pool 'updat'", "did you mean: update")),
    (["--cluster", "64xH100", "--pipeline", "sync", "--pools", "rollout=x,update=8"],
     ("--pools", "rollout=x is not a number of GPUs",)),
    (["--cluster", "64xH100", "--pipeline", "sync", "--pools", "rollout=0,update=8"],
     ("--pools", "rollout=0 is not a number of GPUs",)),
    (["--cluster", "64xH100", "--pipeline", "sync", "--pools", "rollout=8,rollout=8"],
     ("--pools", "rollout is given twice")),
    (["--cluster", "64xH100", "--pipeline", "sync", "--pools", "rollout"],
     ("--pools rollout", "is not POOL=N")),
    (["--cluster", "64xH100", "--pipeline", "sync", "--pools", "rollout=48,update=32"],
     ("--pools rollout=48,update=32", "80 GPUs, more than the 64 of --cluster 64xH100")),
    (["--cluster", "64xH100", "--gpu", "H100"], ("--cluster 64xH100 with --gpu", "drop --gpu")),
    (["--cluster", "64xH100", "--precision", "fp8"],
     ("--cluster 64xH100 with --precision", "drop --precision")),
    (["--pipeline", "sync"], ("--pipeline sync: only with --cluster NxGPU",)),
    (["--gpus-per-node", "4"], ("--gpus-per-node 4: only with --cluster NxGPU",)),
    (["--pools", "rollout=8,update=8"], ("--pools rollout=8,update=8: only with --cluster",)),
    (["--cluster", "1xT4"], ("--cluster 1xT4", "does not fit", "more GPUs")),
    (["--cluster", "1xH100", "--pipeline", "sync"], ("--pipeline sync", "no split of 1")),
]


@pytest.mark.parametrize(("args", "expected"), BAD, ids=[" ".join(a) or "empty" for a, _ in BAD])
def test_bad_input_is_one_line_exit_2(args: list[str], expected: tuple[str, ...]) -> None:
    _user_error(["estimate", GRPO, *args], *expected)


@pytest.mark.parametrize("pipeline", ["sync", "async"])
def test_sft_has_one_pool(pipeline: str) -> None:
    _user_error(["estimate", SFT, "--cluster", "16xH100", "--pipeline", pipeline],
                f"--pipeline {pipeline}: a sft job runs on one pool", "use colocated")


def test_parser_names_the_options_as_python_does() -> None:
    from ptplan.core.cluster_option import PYTHON

    with pytest.raises(InputError, match=r"^gpus_per_node 0: "):
        cluster_request("8xH100", 0, None, None, "rl", "auto", PYTHON)
    with pytest.raises(InputError, match=r"^pools: a colocated run"):
        cluster_request("8xH100", None, "colocated", {"rollout": 4, "update": 4}, "rl", "auto",
                        PYTHON)
    with pytest.raises(InputError, match=r"^pools rollout=4,update=True: update=True"):
        cluster_request("8xH100", None, "sync", {"rollout": 4, "update": True}, "rl", "auto",
                        PYTHON)
    assert parse_cluster(" 64 x h100 ") == (64, "H100")
    assert parse_cluster("8×A100-80GB") == (8, "A100-80GB")


# --------------------------------------------------------------------------- help, completion


def test_help_shows_the_cluster_options() -> None:
    proc = subprocess.run([sys.executable, "-m", "ptplan", "estimate", "--help"],
                          capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    for text in ("--cluster", "NxGPU", "--gpus-per-node", "--pipeline", "colocated|sync|async",
                 "--pools", "64xH100"):
        assert text in proc.stdout, text


def _complete(words: str, cword: int) -> list[str]:
    env = {**os.environ, "_PTPLAN_COMPLETE": "complete_bash", "COMP_WORDS": words,
           "COMP_CWORD": str(cword)}
    proc = subprocess.run([sys.executable, "-m", "ptplan"], capture_output=True, text=True,
                          env=env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


def test_shell_completion_of_the_new_options() -> None:
    assert {"--cluster", "--gpus-per-node", "--pipeline", "--pools"} <= set(
        _complete("ptplan estimate x.yaml --", 3))
    assert _complete("ptplan estimate x.yaml --pipeline ", 4) == ["colocated", "sync", "async"]
    assert "64xH100" in _complete("ptplan estimate x.yaml --cluster 64xH1", 4)
    assert all(c.startswith("64xH1") for c in _complete("ptplan estimate x.yaml --cluster 64xH1",
                                                        4))
    assert _complete("ptplan estimate x.yaml --pools rollout=8,", 4) == [
        "rollout=8,update=", "rollout=8,scoring="]
