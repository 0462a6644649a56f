"""The deep fuzz run and the hostile-file timings (issue #21; docs/reliability.md).

1. ``pytest tests/test_fuzz.py tests/test_fuzz_operations.py --hypothesis-profile=deep``:
   2,500 examples per fuzz target (specs, policies, custom catalogs, plan files, price-cache
   rows; ledger URLs and files, metrics JSONL and TensorBoard, bills, spend files and spend
   cache rows), 32,500 in all, derandomized; prints each target's passing / failing counts
   and the wall time.
2. Hostile files through the real CLI (``ptplan plan FILE``, a fresh process each): a YAML
   alias bomb, a document nested two million levels deep and an 8 MB file; prints the exit
   code, the wall time and the peak memory of the process (the interpreter's start-up is
   about 0.6 s and 60 MB of that; the parse itself is timed in-process too).

    python benchmarks/fuzz_deep.py            # both
    python benchmarks/fuzz_deep.py --hostile  # only the hostile files (seconds)
"""

from __future__ import annotations

import contextlib
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def deep_fuzz() -> None:
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/test_fuzz.py", "tests/test_fuzz_operations.py",
         "--hypothesis-profile=deep",
         "--hypothesis-show-statistics", "-q", "-p", "no:cacheprovider"],
        cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    total = failing = 0
    for name, passing, fails in re.findall(
            r"::(test_fuzz_\w+):.*?(\d+) passing, (\d+) failing", proc.stdout, re.S):
        print(f"{name:28s} {int(passing):6,d} passing, {int(fails)} failing")
        total += int(passing) + int(fails)
        failing += int(fails)
    print(f"deep fuzz: {total:,d} examples, {failing} failing, pytest exit {proc.returncode}, "
          f"{wall / 60:.1f} min")
    if proc.returncode != 0:
        print(proc.stdout[-4000:])


def _hostile_files(tmp: Path) -> dict[str, Path]:
    bomb = "\n".join(
        [f'l0: &l0 [{", ".join(["lol"] * 9)}]']
        + [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, 9)]
        + ["name: *l8"]) + "\n"
    files = {"alias bomb (9^9 strings, 450 B)": bomb,
             "nesting 2,000,000 deep (2 MB)": "name: x\nz: " + "[" * 2_000_000,
             "8 MB file": "name: x\n" + "# padding\n" * 800_000}
    out = {}
    for i, (label, text) in enumerate(files.items()):
        path = tmp / f"hostile{i}.yaml"
        path.write_text(text, encoding="utf-8")
        out[label] = path
    return out


def hostile() -> None:
    from ptplan.core.errors import InputError
    from ptplan.core.yamlio import read_mapping

    with tempfile.TemporaryDirectory() as d:
        for label, path in _hostile_files(Path(d)).items():
            t0 = time.perf_counter()
            with contextlib.suppress(InputError):
                read_mapping(path, "spec")
            parse = time.perf_counter() - t0
            before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
            t0 = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "ptplan.cli.app", "plan", str(path)],
                                  cwd=ROOT, capture_output=True, text=True, check=False)
            wall = time.perf_counter() - t0
            peak = max(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, before) / 1024
            print(f"{label:34s} exit {proc.returncode}, parse {parse * 1000:6.1f} ms, "
                  f"process {wall:.2f} s, peak {peak:.0f} MB: {proc.stderr.strip()[:90]}")


if __name__ == "__main__":
    hostile()
    if "--hostile" not in sys.argv:
        deep_fuzz()
