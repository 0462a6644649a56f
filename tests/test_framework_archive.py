"""The copy that archives checkpoints (``ptplan.rendering.archive``), run for real: ``sh`` runs
the wrapper around a stand-in training command that saves and prunes checkpoints the way each
framework does (veRL: ``global_step_N`` directories and ``latest_checkpointed_iteration.txt``,
keeping the last few; OpenRLHF/DeepSpeed: ``_actor``/``_critic`` save directories of
``global_stepN`` tags and a ``latest`` file, pruned to ``--ckpt.max_num``). What reaches the
archive must be exactly the checkpoints at multiples of ``every_steps × archive_every``, whole,
even though the framework deleted them later; the command's exit status passes through."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ptplan.rendering.archive import archive_roots, archive_script, archive_words
from ptplan.rendering.paths import MOUNT

# the stand-in trainer: saves a checkpoint every EVERY steps (writing its files, then the
# tracker), keeps the last KEEP, sleeps a little between saves so the copy loop runs
TRAINER = r"""
import os, shutil, sys, time
root, layout, steps, every, keep, status = sys.argv[1:7]
steps, every, keep, status = int(steps), int(every), int(keep), int(status)
dirs = [os.path.join(root, "_actor"), os.path.join(root, "_critic")] if layout == "ds" else [root]
saved = []
for step in range(every, steps + 1, every):
    for d in dirs:
        name = f"global_step{step}" if layout == "ds" else f"global_step_{step}"
        path = os.path.join(d, name)
        os.makedirs(path)
        with open(os.path.join(path, "model.bin"), "w") as f:
            f.write(f"weights at {step}\n")
        tracker = os.path.join(d, "latest" if layout == "ds"
                               else "latest_checkpointed_iteration.txt")
        with open(tracker, "w") as f:
            f.write(name if layout == "ds" else str(step))
    saved.append(step)
    while len(saved) > keep:
        old = saved.pop(0)
        for d in dirs:
            shutil.rmtree(os.path.join(d, f"global_step{old}" if layout == "ds"
                                       else f"global_step_{old}"))
    time.sleep(0.15)
sys.exit(status)
"""


def _run(tmp_path: Path, layout: str, status: int = 0) -> tuple[subprocess.CompletedProcess, Path]:
    hot, arch = tmp_path / "hot", tmp_path / "archive"
    if layout == "ds":
        roots = [(str(hot / "_actor"), str(arch / "_actor")),
                 (str(hot / "_critic"), str(arch / "_critic"))]
    else:
        roots = [(str(hot), str(arch))]
    hot.mkdir()
    script = tmp_path / "trainer.py"
    script.write_text(TRAINER, encoding="utf-8")
    # 12 saves every 5 steps, 2 kept; every 4th (steps 20, 40, 60) is archived
    words = archive_words([sys.executable, str(script), str(hot), layout, "60", "5", "2",
                           str(status)], roots, 20)
    env = {"PATH": "/usr/bin:/bin", "PTPLAN_ARCHIVE_INTERVAL": "0.05"}
    done = subprocess.run(words, env=env, capture_output=True, text=True, timeout=60,
                          check=False)
    return done, arch


@pytest.mark.parametrize("layout", ["verl", "ds"])
def test_archived_checkpoints_survive_the_frameworks_pruning(tmp_path: Path,
                                                             layout: str) -> None:
    done, arch = _run(tmp_path, layout)
    assert done.returncode == 0, done.stderr
    subdirs = [arch / "_actor", arch / "_critic"] if layout == "ds" else [arch]
    for d in subdirs:
        names = sorted(p.name for p in d.iterdir())
        want = [f"global_step{n}" if layout == "ds" else f"global_step_{n}" for n in (20, 40, 60)]
        assert names == sorted(want), names  # no .part left, nothing else copied
        for n, name in zip((20, 40, 60), want, strict=True):
            assert (d / name / "model.bin").read_text() == f"weights at {n}\n"
    # the framework kept only its last two
    hot = tmp_path / "hot" / ("_actor" if layout == "ds" else "")
    assert len([p for p in hot.iterdir() if p.name.startswith("global_step")]) == 2


def test_the_commands_exit_status_passes_through(tmp_path: Path) -> None:
    done, arch = _run(tmp_path, "verl", status=3)
    assert done.returncode == 3
    assert (arch / "global_step_60").is_dir()  # the last pass ran after the failure too


def test_an_incomplete_checkpoint_is_not_archived(tmp_path: Path) -> None:
    """A step directory the tracker does not name yet (being written) is left for later."""
    hot, arch = tmp_path / "hot", tmp_path / "archive"
    (hot / "global_step_20").mkdir(parents=True)
    (hot / "global_step_20" / "part.bin").write_text("half")
    (hot / "latest_checkpointed_iteration.txt").write_text("15")
    words = archive_words(["true"], [(str(hot), str(arch))], 20)
    done = subprocess.run(words, env={"PATH": "/usr/bin:/bin"}, capture_output=True,
                          text=True, timeout=30, check=False)
    assert done.returncode == 0 and not arch.exists()
    (hot / "latest_checkpointed_iteration.txt").write_text("20")
    subprocess.run(words, env={"PATH": "/usr/bin:/bin"}, timeout=30, check=True)
    assert (arch / "global_step_20" / "part.bin").read_text() == "half"


def test_only_rank_zero_copies(tmp_path: Path) -> None:
    hot, arch = tmp_path / "hot", tmp_path / "archive"
    (hot / "global_step_20").mkdir(parents=True)
    (hot / "latest_checkpointed_iteration.txt").write_text("20")
    words = archive_words(["true"], [(str(hot), str(arch))], 20)
    subprocess.run(words, env={"PATH": "/usr/bin:/bin", "SKYPILOT_NODE_RANK": "1"},
                   timeout=30, check=True)
    assert not arch.exists()


def test_roots_under_the_mount_and_bad_input() -> None:
    assert archive_roots("verl", "rl", False) == [(f"{MOUNT}/checkpoints", f"{MOUNT}/archive")]
    assert [a for _, a in archive_roots("openrlhf", "rl", True)] == [
        f"{MOUNT}/archive/_actor", f"{MOUNT}/archive/_critic"]
    with pytest.raises(ValueError):
        archive_script([("/a b", "/c")], 5)
    with pytest.raises(ValueError):
        archive_script([("/a", "/c")], 0)
