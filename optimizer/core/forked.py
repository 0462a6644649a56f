"""Work split between this process and one forked child, results carried back by pickle.

Used by the planner to build pool frontiers on two cores (:mod:`ptplan.planner.frontier.frontiers`).
The results are the same values whichever process computed them. What must not travel by
value (objects whose identity matters, like catalog offers, or that do not pickle) the
caller replaces by keys in the child (``pack``) and puts back here (``unpack``); the pickle
itself then needs no per-object callback and runs at the C pickler's speed. The child writes
it to an anonymous in-memory file (memfd), so it never waits for this process to read.

A child is forked only where that is safe and useful (:func:`fork_ok`): on Linux, from a
process with a single thread (forking a process whose other threads may hold locks can
deadlock the child; Python 3.12 warns about it), with two or more CPUs usable, and unless
``PTPLAN_WORKERS=1``. Anything that goes wrong in the child (an exception, a result that
does not pickle, a crash) makes the parent compute the child's share itself, so the result
never depends on the child.
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
import tempfile
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, BinaryIO, TypeVar

from ptplan.core.errors import InputError

T = TypeVar("T")

WORKERS_ENV = "PTPLAN_WORKERS"
"""``1`` (or ``0``) keeps all work in this process; unset, ``2`` or more allows one forked
child; anything else is refused (:class:`~ptplan.core.errors.InputError`)."""


def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 0  # unknown: treated as unsafe


def fork_ok() -> bool:
    """Whether :func:`split_run` may fork (see the module's docstring). ``PTPLAN_WORKERS``
    must be empty or a whole number (0 or 1: one process; 2 or more: one forked worker)."""
    workers = os.environ.get(WORKERS_ENV, "").strip()
    if workers and not workers.isdecimal():
        raise InputError(f"{WORKERS_ENV}: {workers!r} is not a worker count; set it to 1 (one "
                         "process) or 2 (a forked worker for the pool frontiers), or unset it")
    if workers in ("0", "1"):
        return False
    if not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return False
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return cpus >= 2 and _threads() == 1


def balance(costs: Sequence[float]) -> list[int]:
    """Which side (0: this process, 1: the child) runs each item: largest first onto the
    less loaded side (ties to this process), so that the two finish near together."""
    load = [0.0, 0.0]
    side = [0] * len(costs)
    for k in sorted(range(len(costs)), key=lambda k: (-costs[k], k)):
        s = 0 if load[0] <= load[1] else 1
        side[k] = s
        load[s] += costs[k]
    return side


def split_run(jobs: Sequence[Callable[[], T]], sides: Sequence[int],
              pack: Callable[[int, T], Any] | None = None,
              unpack: Callable[[int, Any], T] | None = None) -> list[T]:
    """``jobs[k]()`` for every k, in this process where ``sides[k]`` is 0 and in one forked
    child where it is 1; the results in the jobs' order. ``pack(k, result)`` runs in the
    child before its result is pickled (to replace what should not travel by value with
    keys) and ``unpack(k, packed)`` here after it is read (to put it back). Without
    :func:`fork_ok`, or with no job for the child, everything runs here."""
    mine = [k for k, s in enumerate(sides) if s == 0]
    theirs = [k for k, s in enumerate(sides) if s == 1]
    if not theirs or not fork_ok():
        return [job() for job in jobs]
    out: list[Any] = [None] * len(jobs)

    def child(k: int) -> Any:
        got = jobs[k]()
        return pack(k, got) if pack is not None else got

    got = _forked([partial(child, k) for k in range(len(jobs))], theirs, mine, out, jobs)
    if got is None:  # the child failed: its share is done here
        for k in theirs:
            out[k] = jobs[k]()
    else:
        for k, v in zip(theirs, got, strict=True):
            out[k] = unpack(k, v) if unpack is not None else v
    return out


def _scratch() -> BinaryIO:
    """An anonymous file for the child's results: in memory where Linux has memfd, else an
    unlinked temporary file. The child writes it without waiting for this process to read."""
    if hasattr(os, "memfd_create"):
        try:
            return os.fdopen(os.memfd_create("ptplan-forked", os.MFD_CLOEXEC), "w+b")
        except OSError:
            pass
    return tempfile.TemporaryFile()


def _forked(child_jobs: Sequence[Callable[[], Any]], theirs: list[int], mine: list[int],
            out: list[Any], jobs: Sequence[Callable[[], Any]]) -> list[Any] | None:
    """Fork; the child runs ``child_jobs[k]`` for k in ``theirs`` and pickles the results into
    an anonymous file while this process runs ``jobs[k]`` for k in ``mine`` into ``out``;
    then, once the child has exited, its results (None if it failed)."""
    with _scratch() as scratch:
        try:
            pid = os.fork()
        except OSError:  # no process to be had (a process limit, no memory): all done here
            for k in mine:
                out[k] = jobs[k]()
            return None
        if pid == 0:  # the child: never returns
            code = 1
            try:
                pickle.dump([child_jobs[k]() for k in theirs], scratch,
                            protocol=pickle.HIGHEST_PROTOCOL)
                scratch.flush()
                code = 0
            except BaseException:  # any failure: the parent redoes the work
                pass
            finally:
                os._exit(code)
        reaped = False
        try:
            for k in mine:
                out[k] = jobs[k]()
            _, status = os.waitpid(pid, 0)
            reaped = True
            if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
                return None
            scratch.seek(0)
            try:
                return pickle.load(scratch)  # type: ignore[no-any-return]
            except Exception:  # an unreadable result: the work is redone
                return None
        finally:
            if not reaped:  # this process failed or was interrupted: stop and reap the child
                try:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                except OSError:
                    pass
