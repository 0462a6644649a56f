"""The two-core frontier build (ptplan.core.forked, planner.frontier.build_frontiers).

Forking needs a single-threaded process, which the test runner is not (numpy's BLAS threads,
the runner's own), so every fork here happens in a fresh interpreter started by the test.
What is checked: the child's share comes back in order and equal to a serial build, what the
child packs as keys comes back unpacked (here: the parent's own objects), and any failure in
the child (an exception, a result that does not pickle, a crash) leaves the parent computing
that share itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ptplan.core import forked

ROOT = Path(__file__).resolve().parents[1]


def _run(script: str, **env: str) -> str:
    full = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), **env}
    full.pop(forked.WORKERS_ENV, None) if forked.WORKERS_ENV not in env else None
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=full, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr  # a failing child dies quietly
    return done.stdout


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forks on Linux only")
def test_child_share_comes_back_in_order_packed_and_unpacked() -> None:
    out = _run("""
import json, os
from ptplan.core import forked
assert forked.fork_ok(), "a fresh interpreter should be allowed to fork"
parent = os.getpid()
token = object()  # does not pickle by identity: packed as a key, unpacked to this object
def job(k):
    return lambda: (k, os.getpid(), token, k * k)
packed, unpacked = [], []
def pack(k, got):
    assert os.getpid() != parent
    return (got[0], got[1], "token", got[3], k)
def unpack(k, got):
    unpacked.append(k)
    assert got[2] == "token" and got[4] == k == got[0]
    return (got[0], got[1], token, got[3])
got = forked.split_run([job(k) for k in range(5)], [0, 1, 0, 1, 1], pack, unpack)
print(json.dumps({
    "order": [g[0] for g in got],
    "child": [g[1] != parent for g in got],
    "same": all(g[2] is token for g in got),
    "squares": [g[3] for g in got],
    "unpacked": unpacked}))
""")
    got = json.loads(out)
    assert got["order"] == [0, 1, 2, 3, 4]
    assert got["child"] == [False, True, False, True, True]  # the child really ran its share
    assert got["same"] is True
    assert got["squares"] == [0, 1, 4, 9, 16]
    assert got["unpacked"] == [1, 3, 4]  # only the child's results are unpacked


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forks on Linux only")
@pytest.mark.parametrize("failure", [
    "raise ValueError('boom')",                 # an exception in the child
    "return lambda: None",                      # a result that does not pickle
    "os.kill(os.getpid(), signal.SIGKILL)",     # the child dies
])
def test_a_failed_child_share_is_computed_here(failure: str) -> None:
    out = _run(f"""
import json, os, signal
from ptplan.core import forked
parent = os.getpid()
def bad():
    if os.getpid() != parent:
        {failure}
    return ("here", os.getpid())
jobs = [lambda: ("here", os.getpid()), bad]
got = forked.split_run(jobs, [0, 1])
print(json.dumps([list(g) for g in got]))
""")
    got = json.loads(out)
    assert [g[0] for g in got] == ["here", "here"]
    assert len({g[1] for g in got}) == 1  # both computed by the parent


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forks on Linux only")
def test_results_travel_as_they_are_without_pack_and_unpack() -> None:
    out = _run("""
import json, os
from ptplan.core import forked
parent = os.getpid()
got = forked.split_run([lambda k=k: (k, os.getpid() != parent) for k in range(3)], [1, 0, 1])
print(json.dumps([list(g) for g in got]))
""")
    assert json.loads(out) == [[0, True], [1, False], [2, True]]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forks on Linux only")
def test_a_failing_parent_job_stops_and_reaps_the_child(tmp_path: Path) -> None:
    """The planner's own share raises while the child still works: the exception is the
    caller's (not hidden by the clean-up), the child is killed at once and reaped."""
    pidfile = tmp_path / "child.pid"
    out = _run(f"""
import json, os, time
from ptplan.core import forked
parent = os.getpid()
PIDFILE = {str(pidfile)!r}
def slow():
    if os.getpid() != parent:
        with open(PIDFILE, "w") as f:
            f.write(str(os.getpid()))
        time.sleep(60)
    return 1
def boom():
    for _ in range(500):
        if os.path.exists(PIDFILE):
            break
        time.sleep(0.01)
    raise ValueError("the planner's job failed")
start = time.perf_counter()
try:
    forked.split_run([boom, slow], [0, 1])
    raised = None
except ValueError as exc:
    raised = str(exc)
elapsed = time.perf_counter() - start
pid = int(open(PIDFILE).read())
try:
    os.waitpid(pid, os.WNOHANG)
    reaped = False
except ChildProcessError:
    reaped = True
print(json.dumps({{"raised": raised, "elapsed": elapsed, "reaped": reaped}}))
""")
    got = json.loads(out)
    assert got["raised"] == "the planner's job failed"
    assert got["elapsed"] < 20  # not the child's 60 s
    assert got["reaped"] is True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forks on Linux only")
def test_no_process_to_fork_means_all_work_here() -> None:
    out = _run("""
import json, os
from ptplan.core import forked
def refuse():
    raise BlockingIOError(11, "Resource temporarily unavailable")
os.fork = refuse
got = forked.split_run([lambda k=k: (k, os.getpid()) for k in range(3)], [1, 0, 1])
print(json.dumps([list(g) for g in got]))
""")
    got = json.loads(out)
    assert [g[0] for g in got] == [0, 1, 2]
    assert len({g[1] for g in got}) == 1


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forks on Linux only")
@pytest.mark.parametrize("all_in_child", [False, True])
def test_forked_frontiers_equal_the_serial_ones(all_in_child: bool) -> None:
    """The RL example's frontiers built on two cores: the child ran (its share came back), and
    every pool's arrays, groups' offers (the catalog's own objects) and rates equal a serial
    build in the same process. Second case: every pool built by the child (the colocated and
    sync rollout pools too), under a policy with an fp8 KV cache, so that the rates put back
    lazily must follow each pool's layout, tail, colocation and policy."""
    out = _run("""
import json, os
ALL_IN_CHILD = """ + repr(all_in_child) + """
from ptplan.planner.frontier import frontiers as frontier
from ptplan.policies.model import default_policy, parse_policy
policy = parse_policy("name: kv8\\nkv_cache_fp8: true\\n") if ALL_IN_CHILD else default_policy()
if ALL_IN_CHILD:
    frontier.balance = lambda work: [1] * len(work)
import numpy as np
from ptplan.core import forked
from ptplan.planner.search import engine
from ptplan.spec.project import load_spec
from ptplan.providers.embedded import embedded_catalog
calls = []
real = forked._forked
def spy(*a):
    got = real(*a)
    calls.append(got is not None)
    return got
forked._forked = spy
spec, cat = load_spec("examples/grpo-7b.yaml"), embedded_catalog()
if not ALL_IN_CHILD:
    engine.prepare(load_spec("examples/sft-8b.yaml"), cat)  # one pool, little work: no fork
    assert calls == [], calls
two = engine.prepare(spec, cat, policy)
os.environ[forked.WORKERS_ENV] = "1"
one = engine.prepare(spec, cat, policy)
offers = {id(o) for o in two.offers}
same, refs = True, True
for a, b in zip(two.runs, one.runs, strict=True):
    for name, fa in a.frontiers.items():
        fb = b.frontiers[name]
        for col in ("t", "c", "i", "j", "region", "e", "remote", "place"):
            same &= bool(np.array_equal(getattr(fa, col), getattr(fb, col)))
        # groups compared through the options that refer to them (the child sends only
        # those, renumbered)
        same &= len(fa.groups) <= len(fb.groups)
        pairs = sorted(set(zip(fa.gid.tolist(), fb.gid.tolist(), strict=True)))
        same &= len({x for x, _ in pairs}) == len(pairs) == len({y for _, y in pairs})
        for x, y in pairs:
            ga, gb = fa.groups[x], fb.groups[y]
            for name in ("nonspot_seq", "spot_seq", "nonspot_offers", "spot_offers"):
                same &= [o.key for o in getattr(ga, name)] == [o.key for o in getattr(gb, name)]
            for name in ("e_nodes", "omega", "remote"):
                same &= bool(np.array_equal(getattr(ga, name), getattr(gb, name)))
            same &= all(np.array_equal(p, q) for p, q in zip(ga.picks, gb.picks, strict=True))
            same &= (ga.provider, ga.region, ga.gpu, ga.gpus_per_node, ga.all_remote, ga.disk) \\
                == (gb.provider, gb.region, gb.gpu, gb.gpus_per_node, gb.all_remote, gb.disk)
            same &= list(ga.rates) == list(gb.rates)  # the lazy rates equal the enumerator's
            refs &= all(id(o) in offers for o in ga.nonspot_seq + ga.spot_seq)
        # the options themselves, as the planner reads them
        for k in range(0, len(fa.t), max(1, len(fa.t) // 50)):
            same &= fa.option(k, a.regions) == fb.option(k, b.regions)
print(json.dumps({"calls": calls, "same": same, "refs": refs,
                  "considered": [r.considered for r in two.runs] ==
                                [r.considered for r in one.runs]}))
""")
    got = json.loads(out)
    assert got["calls"] == [True]  # forked once, and the child's share came back
    assert got["same"] is True
    assert got["refs"] is True
    assert got["considered"] is True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="memfd on Linux")
def test_the_results_file_is_in_memory_and_closed_on_exec(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    import fcntl

    with forked._scratch() as f:
        fd = f.fileno()
        assert os.readlink(f"/proc/self/fd/{fd}").startswith("/memfd:ptplan-forked")
        assert fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC
        f.write(b"abc")
        f.seek(0)
        assert f.read() == b"abc"

    def refuse(*_):
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(forked.os, "memfd_create", refuse)
    with forked._scratch() as f:  # an unlinked temporary file instead
        assert not os.readlink(f"/proc/self/fd/{f.fileno()}").startswith("/memfd:")
        f.write(b"abc")
        f.seek(0)
        assert f.read() == b"abc"


def test_unknown_thread_count_is_unsafe(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(_):
        raise FileNotFoundError("/proc/self/task")

    monkeypatch.setattr(forked.os, "listdir", missing)
    assert forked._threads() == 0


def test_cpus_counted_without_affinity(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(forked, "_threads", lambda: 1)
    monkeypatch.setattr(forked.sys, "platform", "linux")
    monkeypatch.delenv(forked.WORKERS_ENV, raising=False)
    monkeypatch.delattr(forked.os, "sched_getaffinity", raising=False)
    for count, ok in ((None, False), (1, False), (2, True), (8, True)):
        monkeypatch.setattr(forked.os, "cpu_count", lambda count=count: count)
        assert forked.fork_ok() is ok, count


def test_fork_is_refused_where_unsafe_or_unwanted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(forked, "_threads", lambda: 1)
    monkeypatch.setattr(forked.sys, "platform", "linux")
    monkeypatch.setattr(forked.os, "sched_getaffinity", lambda _: {0, 1}, raising=False)
    monkeypatch.delenv(forked.WORKERS_ENV, raising=False)
    assert forked.fork_ok()
    for value in ("1", "0", " 1 "):
        monkeypatch.setenv(forked.WORKERS_ENV, value)
        assert not forked.fork_ok()
    monkeypatch.setenv(forked.WORKERS_ENV, "2")
    assert forked.fork_ok()
    monkeypatch.setattr(forked, "_threads", lambda: 2)  # another thread may hold a lock
    assert not forked.fork_ok()
    monkeypatch.setattr(forked, "_threads", lambda: 0)  # thread count unknown
    assert not forked.fork_ok()
    monkeypatch.setattr(forked, "_threads", lambda: 1)
    monkeypatch.setattr(forked.os, "sched_getaffinity", lambda _: {0}, raising=False)
    assert not forked.fork_ok()  # one usable CPU
    monkeypatch.setattr(forked.os, "sched_getaffinity", lambda _: {0, 1}, raising=False)
    monkeypatch.setattr(forked.sys, "platform", "darwin")
    assert not forked.fork_ok()


def test_without_fork_everything_runs_here_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(forked, "fork_ok", lambda: False)
    asked: list = []
    got = forked.split_run([lambda k=k: k * 10 for k in range(4)], [1, 0, 1, 1],
                           lambda k, v: asked.append(k) or v, lambda k, v: asked.append(k) or v)
    assert got == [0, 10, 20, 30]
    assert asked == []  # nothing is packed or unpacked when nothing is forked
    monkeypatch.setattr(forked, "fork_ok", lambda: True)
    assert forked.split_run([lambda: 1, lambda: 2], [0, 0]) == [1, 2]  # no share for a child


def test_balance_puts_the_largest_first_on_the_less_loaded_side() -> None:
    assert forked.balance([]) == []
    assert forked.balance([5]) == [0]
    assert forked.balance([1, 5, 1, 0, 1, 5]) == [0, 0, 1, 1, 0, 1]
    assert forked.balance([3, 3, 2, 2]) == [0, 1, 0, 1]
    assert forked.balance([10, 1, 1, 1]) == [0, 1, 1, 1]
    # ties in cost: the earlier item first; equal loads: this process
    assert forked.balance([2, 2]) == [0, 1]


def test_pool_work_counts_groups_phases_and_remote_pools() -> None:
    from ptplan.planner.candidates import PoolSpec
    from ptplan.planner.frontier.frontiers import frontier_work
    from ptplan.providers.base import Offer

    def offer(region: str, zone: str, cap_type: str, gpu: str = "H100") -> Offer:
        return Offer(provider="aws", region=region, zone=zone, instance_type=f"p5-{gpu}",
                     gpu=gpu, gpus_per_node=8, capacity_type=cap_type, usd_per_hour=10.0)

    offers = [offer("r1", "", "on_demand"), offer("r1", "a", "spot"), offer("r1", "b", "spot"),
              offer("r2", "", "on_demand", "A100"), offer("r2", "c", "spot", "A100")]
    pool = PoolSpec("update", ("update",), True, True, 0.0)
    # shapes: (r1, H100) with zones a, b -> 3 groups; (r2, A100) with zone c -> 2 groups
    assert frontier_work(pool, offers) == 5
    rollout = PoolSpec("rollout", ("rollout", "eval"), True, False, 0.0, remote_ok=True)
    assert frontier_work(rollout, offers) == 5 * 2 * 2
    no_spot = PoolSpec("update", ("update",), False, True, 0.0,
                       capacity_types=frozenset({"on_demand"}))
    assert frontier_work(no_spot, offers) == 2  # one group per shape


@pytest.mark.parametrize(("given", "expected"), [(None, "1"), ("4", "4")])
def test_the_cli_keeps_blas_single_threaded_unless_told(given: str | None, expected: str
                                                        ) -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if given is not None:
        env["OPENBLAS_NUM_THREADS"] = given
    done = subprocess.run(
        [sys.executable, "-c", "import os, ptplan.cli.app; "
         "print(os.environ['OPENBLAS_NUM_THREADS'], len(os.listdir('/proc/self/task')) "
         "if os.path.isdir('/proc/self/task') else 1)"],
        capture_output=True, text=True, env={**env, "PYTHONPATH": str(ROOT)}, cwd=ROOT,
        timeout=120)
    assert done.returncode == 0, done.stderr
    value, threads = done.stdout.split()
    assert value == expected
    if given is None:
        assert threads == "1"  # numpy loaded, and still one thread: the planner may fork


@pytest.mark.parametrize("value", ["abc", "two", "-1", "1.5"])
def test_a_workers_value_that_is_no_count_is_refused(monkeypatch: pytest.MonkeyPatch,
                                                     value: str) -> None:
    from ptplan.core.errors import InputError

    monkeypatch.setenv(forked.WORKERS_ENV, value)
    with pytest.raises(InputError) as err:
        forked.fork_ok()
    assert str(err.value).startswith(f"PTPLAN_WORKERS: {value!r} is not a worker count")
    assert "set it to 1" in str(err.value)


def test_the_cli_refuses_a_bad_workers_value_in_one_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ptplan.cli.app", "plan", "examples/grpo-7b.yaml"],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT), forked.WORKERS_ENV: "lots"})
    assert done.returncode == 2
    lines = [ln for ln in done.stderr.splitlines() if ln.startswith("error")]
    assert lines == ["error: PTPLAN_WORKERS: 'lots' is not a worker count; set it to 1 (one "
                     "process) or 2 (a forked worker for the pool frontiers), or unset it"]
    assert "Traceback" not in done.stderr
