"""A RayJob ``entrypoint`` that delivers an argument list intact through the three shells it
crosses on the way to the training process.

1. **KubeRay's submitter** (ray-project/kuberay ``ray-operator/controllers/ray/common/job.go``,
   ``GetK8sJobCommand``; ``rayjob_controller.go``, ``getSubmitterTemplate``) pastes the
   entrypoint *as text* into ``if ! ray job status … ; then ray job submit … -- <entrypoint> ;
   fi ; ray job logs …`` and runs it with ``/bin/bash -ce --``: bash splits it into words.
2. **``ray job submit``** (ray-project/ray ``python/ray/dashboard/modules/job/cli.py``) joins
   those words with :func:`subprocess.list2cmdline` (MS C runtime quoting: a word with a space
   or tab is wrapped in ``"…"``, a ``"`` becomes ``\\"``; other words pass unchanged).
3. **The job supervisor** (``python/ray/dashboard/modules/job/job_supervisor.py``) runs the
   joined string with ``subprocess.Popen(…, shell=True)``: ``/bin/sh -c``.

So a word reaches the process intact when the string sh sees parses back into it, and that
string survives list2cmdline unchanged: every token free of spaces, tabs and ``"``.
:func:`ray_entrypoint` writes each word for sh with backslash escapes only (no quotes, no
spaces), then quotes that for bash. A word that holds whitespace, ``"`` or a control character
cannot be written that way; then the whole command travels base64-encoded (``echo B64|base64
-d|sh``, tokens without spaces) and sh runs ``exec <command>``. ``tests/test_render.py`` runs the
result through real bash, list2cmdline and sh.
"""

from __future__ import annotations

import base64
import string
from collections.abc import Sequence

from ptplan.templates import shell_join

_PLAIN = set(string.ascii_letters + string.digits + "@%+=:,./-_")
_UNSAFE = set(" \t\n\r\"\x0b\x0c") | {chr(c) for c in range(32)} | {"\x7f"}


def sh_word(word: str) -> str:
    """``word`` for /bin/sh with backslash escapes only (no quotes, no spaces)."""
    if word == "":
        return "''"
    return "".join(c if c in _PLAIN else "\\" + c for c in word)


def ray_entrypoint(words: Sequence[str]) -> str:
    """The RayJob ``entrypoint`` that runs ``words`` as one process (see the module doc)."""
    if words and not any(set(w) & _UNSAFE for w in words):
        return shell_join(sh_word(w) for w in words)
    script = "exec " + shell_join(words) + "\n"
    blob = base64.b64encode(script.encode("utf-8")).decode("ascii")
    return shell_join(("echo", f"{blob}|base64", "-d|sh"))
