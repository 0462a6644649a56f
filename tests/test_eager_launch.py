"""Engines without CUDA graphs (``efficiency.cuda_graphs: false``): each decode iteration pays
the host and launch cost of every layer (docs/demand-model.md §4.2, docs/spec.md §11). Unset,
``eager_launch_us_per_layer`` is per model (``EAGER_LAUNCH_US``: 340 µs a dense layer, 500 µs a
mixture-of-experts layer, from vllm-omni #7960 and vLLM #45709); stated, it holds for every
layer. Its default was 45 µs before, so a spec that leaves it unset keeps the digest its plans
recorded.

By hand for the grpo-7b example (Qwen2.5-7B, 28 dense layers): eager adds 28 × 340 µs =
9.52 ms to every decode iteration, against 28 × 45 µs = 1.26 ms at the former default.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import example_dict
from typer.testing import CliRunner

from ptplan.cli.app import app
from ptplan.demand.cluster import run_on_cluster
from ptplan.planfile.digest import spec_digest
from ptplan.spec.defaults import applied_defaults
from ptplan.spec.efficiency import EAGER_LAUNCH_US
from ptplan.spec.project import ProjectSpec

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def _spec(**eff: object) -> dict:
    d = example_dict("grpo-7b.yaml")
    d["efficiency"] = {**(d.get("efficiency") or {}), **eff}
    return d


def _parse(**eff: object) -> ProjectSpec:
    return ProjectSpec.model_validate(_spec(**eff))


def test_the_measured_costs_are_the_defaults() -> None:
    assert EAGER_LAUNCH_US == {"dense": 340.0, "moe": 500.0}
    assert _parse().efficiency.eager_launch_us_per_layer is None


def test_unset_keeps_the_digest_plans_recorded_at_the_former_default() -> None:
    unset = _parse().model_dump(mode="json")
    former = {**unset, "efficiency": {**unset["efficiency"], "eager_launch_us_per_layer": 45.0}}
    assert spec_digest(unset) == spec_digest(former)
    # the README's plan golden was made before the default changed and still matches its spec
    golden = ROOT / "tests" / "golden" / "cli" / "plan-grpo-7b.json"
    recorded = yaml.safe_load(golden.read_text())["spec_digest"]
    assert spec_digest(unset) == recorded
    stated = _parse(eager_launch_us_per_layer=340.0).model_dump(mode="json")
    assert spec_digest(stated) != spec_digest(unset)


def test_defaults_applied_name_the_per_model_cost() -> None:
    """Both costs are named, whatever the policy's kind: a teacher may be the other kind."""
    line = ("efficiency.eager_launch_us_per_layer = per model: 340 µs a dense layer, 500 µs a "
            "mixture-of-experts layer (docs/demand-model.md §4.2)")
    assert line in applied_defaults(_parse())
    d = _spec()
    d["model"] = {"preset": "Qwen/Qwen3-30B-A3B"}
    assert line in applied_defaults(ProjectSpec.model_validate(d))
    stated = applied_defaults(_parse(eager_launch_us_per_layer=45.0))
    assert not any(line.startswith("efficiency.eager_launch_us_per_layer") for line in stated)


def test_eager_engines_take_longer_with_the_measured_cost() -> None:
    """Same cluster, same engine: only the launch cost differs, so only the generation
    phases move, and the measured cost is the slower."""
    runs = {k: run_on_cluster(_parse(rollout_tp=1, **v), "H100", 16, 8, "colocated")
            for k, v in {"measured": {"cuda_graphs": False},
                         "former": {"cuda_graphs": False, "eager_launch_us_per_layer": 45.0},
                         "graphs": {"cuda_graphs": True}}.items()}
    assert runs["measured"].phases["rollout"] > runs["former"].phases["rollout"] \
        > runs["graphs"].phases["rollout"]
    assert runs["measured"].phases["update"] == pytest.approx(runs["former"].phases["update"])


def test_a_stated_cost_out_of_range_is_one_line(tmp_path: Path) -> None:
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(_spec(cuda_graphs=False, eager_launch_us_per_layer=-1)))
    result = runner.invoke(app, ["estimate", str(p)])
    assert result.exit_code == 2
    assert "efficiency.eager_launch_us_per_layer = -1" in result.output
    assert "Traceback" not in result.output
