"""Work split between this process and one forked child, results carried back by pickle.

Used by the planner to build pool frontiers on two cores (:mod:`optimizer.planner.frontier`).
The results are the same objects' values whichever process computed them: objects that exist
before the fork and must keep their identity (catalog offers, demand-model rates, which
also hold closures that do not pickle) are named in ``shared`` and travel as references —
after a fork they sit at the same address in both processes, so their ``id`` names them.

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
from collections.abc import Callable, Sequence
from typing import Any, BinaryIO, TypeVar

T = TypeVar("T")

WORKERS_ENV = "PTPLAN_WORKERS"
"""``1`` (or ``0``) keeps all work in this process; unset or ``2`` allows one forked child."""


def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 0  # unknown: treated as unsafe


def fork_ok() -> bool:
    """Whether :func:`split_run` may fork (see the module's docstring)."""
    if os.environ.get(WORKERS_ENV, "").strip() in ("0", "1"):
        return False
    if not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return False
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return cpus >= 2 and _threads() == 1


_NOTHING = object()


class _Out(pickle.Pickler):
    def __init__(self, file: BinaryIO, shared: dict[int, Any]) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.shared = shared

    def persistent_id(self, obj: Any) -> int | None:
        ref = self.shared.get(id(obj), _NOTHING)
        return id(obj) if ref is obj else None


class _In(pickle.Unpickler):
    def __init__(self, file: BinaryIO, shared: dict[int, Any]) -> None:
        super().__init__(file)
        self.shared = shared

    def persistent_load(self, pid: Any) -> Any:
        return self.shared[pid]


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
              shared: Callable[[list[int]], dict[int, Any]] | None = None) -> list[T]:
    """``jobs[k]()`` for every k, in this process where ``sides[k]`` is 0 and in one forked
    child where it is 1; the results in the jobs' order. ``shared(child_items)`` is called
    before the fork and returns the objects (by ``id``) that the child's results may
    reference without copying (it may also compute them, so that they exist before the fork).
    Without :func:`fork_ok`, or with no job for the child, everything runs here."""
    mine = [k for k, s in enumerate(sides) if s == 0]
    theirs = [k for k, s in enumerate(sides) if s == 1]
    if not theirs or not fork_ok():
        return [job() for job in jobs]
    refs = shared(theirs) if shared is not None else {}
    out: list[Any] = [None] * len(jobs)
    got = _forked(jobs, theirs, refs, mine, out)
    if got is None:  # the child failed: its share is done here
        for k in theirs:
            out[k] = jobs[k]()
    else:
        for k, v in zip(theirs, got, strict=True):
            out[k] = v
    return out


def _forked(jobs: Sequence[Callable[[], Any]], theirs: list[int], refs: dict[int, Any],
            mine: list[int], out: list[Any]) -> list[Any] | None:
    """Fork; the child runs ``theirs`` and pickles their results into a pipe while this
    process runs ``mine`` into ``out``; then the child's results (None if it failed), read
    from the pipe as a stream (neither side holds the whole pickle at once)."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(rfd)
        code = 1
        try:
            with os.fdopen(wfd, "wb", buffering=1 << 16) as pipe:
                _Out(pipe, refs).dump([jobs[k]() for k in theirs])
            code = 0
        except BaseException:  # any failure: the parent redoes the work
            pass
        finally:
            os._exit(code)
    os.close(wfd)
    reaped = False
    pipe = os.fdopen(rfd, "rb", buffering=1 << 16)
    try:
        for k in mine:
            out[k] = jobs[k]()
        try:
            got = _In(pipe, refs).load()
        except Exception:  # a torn or unreadable result (the child failed): redo it
            got = None
        pipe.close()  # a child still writing stops (broken pipe) before it is reaped
        _, status = os.waitpid(pid, 0)
        reaped = True
        ok = os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
        return got if ok else None  # type: ignore[no-any-return]
    finally:
        pipe.close()
        if not reaped:  # this process failed or was interrupted: stop and reap the child
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except OSError:
                pass
