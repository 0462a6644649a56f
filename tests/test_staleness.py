"""``max_staleness_steps``: an asynchronous rollout that may run k steps ahead of the update
(NeMo RL ``max_trajectory_age_steps``, AReaL ``max_head_offpolicyness``, veRL 0.9
``num_warmup_batches``, OpenRLHF 0.11 ``--train.async_queue_size``; docs/demand-model.md §4.5,
docs/spec.md §9).

With k steps of prompts queued, an engine serving n sequences a step keeps min(k·n, B) in
flight, and a response may take up to k steps to finish, so the longest response alone floors a
step at 1/k of its time. The engine of ``tests/inference_engines.py`` is memory-bound:
t_iter(b, c) = 2e-3 + 1e-9·b·c s; every response is 192 tokens (so the mean age is 96).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml
from inference_engines import engine, lengths
from later_fields import assert_left_out_at_default
from test_launch_frameworks import ENV, compose_verl, parse_openrlhf, plan_path
from typer.testing import CliRunner

from ptplan.cli.app import app
from ptplan.demand.cluster import run_on_cluster
from ptplan.demand.inference import Rollout
from ptplan.demand.steps import async_model, single_stream_seconds
from ptplan.planfile.load import load_plan
from ptplan.spec.defaults import applied_defaults
from ptplan.spec.project import ProjectSpec

ROOT = Path(__file__).resolve().parents[1]
P = 1000.0


def t_iter(b: float, c: float) -> float:
    return 2e-3 + 1e-9 * b * c


def fixed_rollout() -> Rollout:
    return Rollout(64.0, P, lengths([192.0], [1.0], 192, "fixed"))


def test_a_queue_of_k_steps_keeps_the_batch_full() -> None:
    """B = 16. One step off (k = 1): n sequences decode at batch n, 192 iterations of
    t(n, P + 96). k = 4: an engine serving n = 2 a step holds 8 in flight, so the 2·192 tokens
    take 2·192/8 iterations of t(8, P + 96); from n = 4 (4·4 = B) on it runs at the cap, n ×
    the saturated seconds per sequence. The floor is the longest response alone ÷ k."""
    ro = fixed_rollout()
    e = engine(batch_cap=16)
    one = async_model(e, ro, 16)
    four = async_model(e, ro, 16, lag=4)
    alone = single_stream_seconds(e, ro)
    assert one.floor == pytest.approx(alone, rel=1e-12)
    assert four.floor == pytest.approx(alone / 4, rel=1e-12)
    grid = four.n_grid
    i2 = int(np.argmin(abs(grid - 2.0)))
    n = float(grid[i2])
    held = min(4 * n, 16.0)
    assert four.work[i2] == pytest.approx(n * 192 / held * t_iter(held, P + 96), rel=1e-12)
    assert one.work[i2] == pytest.approx(192 * t_iter(n, P + 96), rel=1e-12)
    sat = 192 / 16 * t_iter(16, P + 96)
    assert four.per_sequence_saturated == pytest.approx(sat, rel=1e-12)
    for i, m in enumerate(grid):  # from k·n = B on, the tabulated loads run at the cap
        if 4 * m >= 16:
            assert four.work[i] == pytest.approx(m * sat, rel=1e-12)
    two = async_model(e, ro, 16, lag=2)  # 2 steps queued: n = 2 holds 4
    assert two.work[i2] == pytest.approx(n * 192 / min(2 * n, 16.0)
                                         * t_iter(min(2 * n, 16.0), P + 96), rel=1e-12)
    assert two.floor == pytest.approx(alone / 2, rel=1e-12)
    for m in (16.0, 64.0):  # at and past the cap itself
        assert float(four.seconds(m)) == pytest.approx(max(m * sat, alone / 4), rel=1e-12)


def test_more_staleness_never_slows_a_step_and_one_is_one_step_off() -> None:
    """Per load, k = 1, 2, 4, 8 never take longer; k = 1 is the one-step-off model as it
    was (batch n, floor the longest alone)."""
    ro = fixed_rollout()
    e = engine(batch_cap=64)
    loads = np.arange(1.0, 130.0)
    prev = None
    for k in (1, 2, 4, 8):
        t = async_model(e, ro, 64, lag=k).seconds(loads)
        if prev is not None:
            assert np.all(t <= prev + 1e-15)
        prev = t
    base = async_model(e, ro, 64)
    want = np.maximum(192 * t_iter(np.minimum(loads, 64), P + 96),
                      single_stream_seconds(e, ro))
    below = loads < 64
    # below the cap the load rounds up to the drain table's sizes (an upper bound)
    assert np.all(base.seconds(loads)[below] >= want[below] - 1e-15)


def _spec(**top: object) -> dict:
    d = yaml.safe_load((ROOT / "examples" / "grpo-7b.yaml").read_text())
    d.update(top)
    return d


def test_the_async_rollout_of_a_cluster_run_shortens_with_staleness() -> None:
    """The example GRPO job on 16 + 16 H100, pipeline async: the rollout with 4 steps queued
    is shorter than one step off; the update does not change."""
    runs = [run_on_cluster(ProjectSpec.model_validate(_spec(pipeline="async",
                                                            max_staleness_steps=k)),
                           "H100", 32, 8, "async", {"rollout": 16, "update": 16})
            for k in (1, 4)]
    assert runs[1].phases["rollout"] < runs[0].phases["rollout"]
    assert runs[1].phases["update"] == pytest.approx(runs[0].phases["update"], rel=1e-12)


@pytest.mark.parametrize("top,where", [({"pipeline": "sync"}, "pipeline sync"),
                                       ({"pipeline": "colocated"}, "pipeline colocated")])
def test_staleness_needs_the_async_pipeline(top: dict, where: str) -> None:
    with pytest.raises(ValueError, match=f"max_staleness_steps 4 applies to the async pipeline "
                                         f"of rl/opd, not {where}"):
        ProjectSpec.model_validate(_spec(max_staleness_steps=4, **top))


def test_staleness_is_refused_for_sft_and_out_of_range_values() -> None:
    d = yaml.safe_load((ROOT / "examples" / "sft-8b.yaml").read_text())
    with pytest.raises(ValueError, match="not method sft"):
        ProjectSpec.model_validate({**d, "max_staleness_steps": 2})
    for bad in (0, 65, 2.5, "4"):
        with pytest.raises(ValueError, match="max_staleness_steps"):
            ProjectSpec.model_validate(_spec(max_staleness_steps=bad))


def test_the_cli_names_the_field_the_value_and_the_fix(tmp_path: Path) -> None:
    f = tmp_path / "job.yaml"
    f.write_text(yaml.safe_dump(_spec(pipeline="sync", max_staleness_steps=4)))
    r = CliRunner().invoke(app, ["estimate", str(f)])
    assert r.exit_code == 2
    line = r.output.strip()
    assert "\n" not in line and "max_staleness_steps" in line and "pipeline: async" in line


def test_the_default_keeps_a_specs_digest_and_is_listed() -> None:
    """At 1 the field is left out of the digest (plans made before it still match); 4 changes
    it. The defaults a plan lists name it for auto and async pipelines, not for colocated."""
    plain = ProjectSpec.model_validate(_spec())
    assert_left_out_at_default(plain, ProjectSpec.model_validate(_spec(max_staleness_steps=4)),
                               "max_staleness_steps")
    line = ("max_staleness_steps = 1 (an async layout's rollout runs one step ahead of the "
            "update)")
    assert line in applied_defaults(plain)
    assert line not in applied_defaults(ProjectSpec.model_validate(_spec(max_staleness_steps=2)))
    assert line not in applied_defaults(ProjectSpec.model_validate(_spec(pipeline="colocated")))


def _launch(framework: str, k: int) -> dict:
    from ptplan.rendering.context import build_context
    from ptplan.rendering.facts import facts_for
    from ptplan.rendering.frameworks import parse_framework
    from ptplan.spec.project import with_framework

    plan = load_plan(plan_path("grpo-7b", framework))
    spec = with_framework(ProjectSpec.model_validate(_spec(max_staleness_steps=k)), framework)
    facts = replace(facts_for(plan, spec), framework=parse_framework(framework))
    return dict(build_context(plan, facts)["launch"])


def test_render_writes_the_staleness_where_veRL_reads_it() -> None:
    """veRL 0.9's separate_async trainer generates ``num_warmup_batches`` batches ahead; the
    composed Hydra config (the wheel's own YAML) holds the spec's value. Beyond 8 a note says
    to raise ``max_off_policy_threshold`` (veRL drops older trajectories)."""
    la = _launch("verl==0.9", 4)
    assert "trainer.v1.separate_async.num_warmup_batches=4" in la["words"]
    cfg = compose_verl(la["words"], la["config_name"])
    assert cfg.trainer.v1.separate_async.num_warmup_batches == 4
    assert not any("max_off_policy_threshold" in n for n in la.get("notes", []))
    from ptplan.rendering.targets import render_plan

    plan = load_plan(plan_path("grpo-7b", "verl==0.9"))
    spec = ProjectSpec.model_validate(_spec(max_staleness_steps=12))
    _, notes = render_plan(plan, "kuberay", spec=spec)
    assert any("max_off_policy_threshold" in n and "12" in n for n in notes)


def test_render_writes_the_staleness_where_openrlhf_reads_it() -> None:
    """The example's OpenRLHF plan is async on pools of their own: ``--train.async_enable``
    with ``--train.async_queue_size`` k, as OpenRLHF 0.11's own parser reads them."""
    from ptplan.rendering.frameworks import openrlhf_0_11

    la = _launch("openrlhf==0.11", 4)
    settings = {s.key: s.value for s in la["settings"]}
    assert settings["--train.async_enable"] is True
    args = parse_openrlhf(openrlhf_0_11.argv(la["words"], ENV))
    assert args.train.async_queue_size == 4 and args.train.async_enable is True
