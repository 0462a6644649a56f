"""The copy that archives checkpoints: veRL 0.9 and OpenRLHF 0.11 keep only their last
``keep_hot`` checkpoints (``trainer.max_actor_ckpt_to_keep``, ``--ckpt.max_num``) and delete the
older ones, while the plan prices every ``archive_every``-th checkpoint as kept under
``archive/`` for ``retention_days``. The rendered launch therefore runs the framework's command
inside a small POSIX shell wrapper that, every minute (``PTPLAN_ARCHIVE_INTERVAL`` seconds) and
once more when the command ends,
copies each complete checkpoint whose step is a multiple of ``every_steps × archive_every``
from the hot prefix to the archive prefix (both under the bucket mount, so the copy is a bucket
copy the lifecycle rules then tier).

A checkpoint is complete once the framework's tracker names a step at least as late: veRL writes
``latest_checkpointed_iteration.txt`` after each save (``verl/utils/checkpoint/
checkpoint_handler.py``), DeepSpeed a ``latest`` tag file in each save directory (OpenRLHF's
``_actor`` and ``_critic``). The copy goes to a hidden ``.part`` directory and is renamed when
whole, so an interrupted copy is redone, never taken for a checkpoint. Only the node of rank 0
(``SKYPILOT_NODE_RANK`` unset or 0) copies.
"""

from __future__ import annotations

from collections.abc import Sequence

from ptplan.rendering.paths import launch_path

ARCHIVE_ARG0 = "ptplan-archive"
"""``$0`` of the wrapper (what ``ps`` shows)."""

_SCRIPT = " ".join((
    "E={every};",
    "archive() {{",
    "for pair in {pairs}; do",
    "H=${{pair%%|*}}; A=${{pair#*|}};",
    '[ -d "$H" ] || continue;',
    "done_n=$(cat \"$H/latest_checkpointed_iteration.txt\" \"$H/latest\" 2>/dev/null"
    " | tr -cd '0-9\\n' | sort -n | tail -n 1);",
    '[ -n "$done_n" ] || continue;',
    'for d in "$H"/global_step*; do',
    '[ -d "$d" ] || continue;',
    "b=${{d##*/}}; n=${{b#global_step}}; n=${{n#_}};",
    "case $n in ''|*[!0-9]*) continue ;; esac;",
    '[ "$n" -gt 0 ] && [ $((n % E)) -eq 0 ] && [ "$n" -le "$done_n" ] || continue;',
    '[ -e "$A/$b" ] && continue;',
    'mkdir -p "$A" && rm -rf "$A/.$b.part" && cp -R "$d" "$A/.$b.part"'
    ' && mv "$A/.$b.part" "$A/$b" && echo "ptplan-archive: $d -> $A/$b" >&2;',
    "done;",
    "done;",
    "}};",
    'if [ "${{SKYPILOT_NODE_RANK:-0}}" = 0 ]; then',
    "( trap 'kill \"$s\" 2>/dev/null; exit 0' TERM;",
    'while :; do sleep "${{PTPLAN_ARCHIVE_INTERVAL:-60}}" >/dev/null 2>&1 & s=$!; wait "$s";',
    "archive; done ) &",
    "loop=$!;",
    'rc=0; "$@" || rc=$?;',
    'kill "$loop" 2>/dev/null || true;',
    "archive;",
    'exit "$rc";',
    "fi;",
    'exec "$@"',
))
"""One line (every reader of a launch takes it line by line): the archive loop, then the
framework's command as ``"$@"``. The loop's ``sleep`` holds none of the launch's output: a
``sleep`` the ``TERM`` trap misses (it lands between the fork and ``s=$!``) cannot keep a
caller waiting on the launch's pipes."""


def archive_roots(framework: str, method: str, critic: bool) -> list[tuple[str, str]]:
    """(hot directory, archive directory) pairs the framework saves checkpoints under."""
    if framework == "openrlhf":
        roles = ["_actor", *(["_critic"] if critic else [])]
        return [(launch_path("hot_checkpoints", "ds", r), launch_path("archived_checkpoints", r))
                for r in roles]
    del method  # veRL: RL, OPD and SFT all save global_step_N under default_local_dir
    return [(launch_path("hot_checkpoints"), launch_path("archived_checkpoints"))]


def archive_script(roots: Sequence[tuple[str, str]], every: int) -> str:
    """The wrapper's shell text for checkpoints at multiples of ``every`` steps."""
    if every < 1:
        raise ValueError(f"archive cadence {every} must be a positive number of steps")
    for hot, arch in roots:
        if any(c in hot + arch for c in "|'\"$`\\ \n"):
            raise ValueError(f"archive path {hot!r} / {arch!r} holds a shell metacharacter")
    pairs = " ".join(f"'{hot}|{arch}'" for hot, arch in roots)
    return _SCRIPT.format(every=every, pairs=pairs)


def archive_words(words: Sequence[str], roots: Sequence[tuple[str, str]], every: int
                  ) -> list[str]:
    """``words`` run inside the archiving wrapper: ``sh -c SCRIPT ptplan-archive WORDS...``."""
    return ["sh", "-c", archive_script(roots, every), ARCHIVE_ARG0, *words]


def unwrap(words: Sequence[str]) -> list[str]:
    """The framework's command inside :func:`archive_words`' wrapper (``words`` as they are
    when there is none)."""
    if len(words) > 4 and list(words[:2]) == ["sh", "-c"] and words[3] == ARCHIVE_ARG0:
        return list(words[4:])
    return list(words)
