"""Independent oracles for the storage classes added after the 2026-12-03 mutation run of
``optimizer/costs/storage.py`` (docs/testing.md): the agent's trajectories (issue #25) and the
dataset of a ``generate`` job (one offline batch of every prompt).

Expected values are worked out by hand from the module's documented rules (its table of data
classes) and the cited example files; everything is built inside each test.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from conftest import EXAMPLES

from ptplan.costs.storage import DataClass, data_classes
from ptplan.demand.model import build_demand
from ptplan.policies.model import default_policy
from ptplan.spec.project import parse_spec

# examples/agentic-swe-rl.yaml: 200 steps × 64 prompts × 8 samples = 102,400 episodes, each
# 2,048 prompt tokens + 24 turns × 512 generated + 23 observations × 768 = 32,000 tokens
EPISODES = 200 * 64 * 8
TOKENS = 2048 + 24 * 512 + 23 * 768


def _classes(example: str, **edits: Any) -> dict[str, DataClass]:
    raw = yaml.safe_load((EXAMPLES / f"{example}.yaml").read_text(encoding="utf-8"))
    for path, value in edits.items():
        block, key = path.split("__")
        raw.setdefault(block, {})[key] = value
    demand = build_demand(parse_spec(raw, example))
    return {c.name: c for c in data_classes(demand, default_policy())}


def test_agent_trajectories_of_the_agentic_example() -> None:
    """One object of 102,400 × 32,000 tokens × 4 B = 13.1072 GB, online (``ms``), kept the
    default policy's 30 retention days (a constant lifetime of 720 h, not growing with the run),
    never retrieved."""
    assert TOKENS == 32_000
    assert default_policy().storage.retention_days == 30
    c = _classes("agentic-swe-rl")["agent_trajectories"]
    assert (c.name, c.access, c.retrieval_gb) == ("agent_trajectories", "ms", 0.0)
    assert len(c.groups) == 1
    (g,) = c.groups
    assert (g.count, g.a_hours, g.b) == (1, 720.0, 0)
    assert g.gb == pytest.approx(EPISODES * TOKENS * 4 / 1e9, rel=1e-12, abs=0)
    assert g.gb == pytest.approx(13.1072, rel=1e-12, abs=0)


def test_trajectory_days_and_replay_state_by_hand() -> None:
    """``trajectory_days: 7`` keeps each for 168 h; ``replay_state_mb: 50`` adds 50 × 10⁶ B per
    episode: 102,400 × (128,000 + 50,000,000) B = 5,133.1072 GB."""
    c = _classes("agentic-swe-rl", agent__trajectory_days=7, agent__replay_state_mb=50.0)
    (g,) = c["agent_trajectories"].groups
    assert (g.count, g.a_hours, g.b) == (1, 168.0, 0)
    assert g.gb == pytest.approx(5133.1072, rel=1e-12, abs=0)


def test_trajectories_follow_the_specs_retention_days() -> None:
    """Without ``trajectory_days`` the spec's own ``checkpoints.retention_days`` (45: 1,080 h)
    replaces the policy's; ``trajectory_days`` wins over both (3: 72 h)."""
    c = _classes("agentic-swe-rl", checkpoints__retention_days=45)
    assert c["agent_trajectories"].groups[0].a_hours == 1080.0
    c = _classes("agentic-swe-rl", checkpoints__retention_days=45, agent__trajectory_days=3)
    assert c["agent_trajectories"].groups[0].a_hours == 72.0


def test_a_run_without_agent_has_no_trajectories() -> None:
    assert "agent_trajectories" not in _classes("grpo-7b")
    assert "agent_trajectories" not in _classes("generate-32b")


def test_generate_dataset_is_every_prompt_once() -> None:
    """examples/generate-32b.yaml: one offline batch of all 50,000 prompts × 512 tokens × 4 B
    = 0.1024 GB, alive for the run; the responses go to the rollout logs (200,000 × 1,536
    tokens × 8 B = 2.4576 GB); nothing trains, so no checkpoint classes."""
    c = _classes("generate-32b")
    (g,) = c["dataset"].groups
    assert (g.count, g.a_hours, g.b) == (1, 0, 1)
    assert g.gb == pytest.approx(0.1024, rel=1e-12, abs=0)
    assert c["rollout_logs"].gb == pytest.approx(2.4576, rel=1e-12, abs=0)
    assert set(c) == {"dataset", "rollout_logs"}
