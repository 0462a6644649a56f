"""The cost of booking capacity blocks and flex-start: ``plan()`` with and without a start date.

Run: ``python benchmarks/booking_speed.py [--repeat 3] [--root CHECKOUT]``.
Nothing here asserts on time: it reports (the guide: speed is measured by scripts, not tests).

For each case (``examples/grpo-7b.yaml`` and ``examples/opd-8b-from-32b.yaml`` on the embedded
catalog, which carries the published AWS Capacity Block rates for p5 and p4d; objective cost
and time) it plans once without ``sla.start_after`` (the ordinary planner) and once with
``--start-after`` one week after the pinned today (``PTPLAN_TODAY``), so the exact booking
search of ``optimizer/planner/booking/`` runs. Each figure is the process CPU time of one
``plan()`` call (``time.process_time``, explanation on, as the CLI plans) in a fresh Python
process (no cache carried over), best of ``--repeat``: the least disturbed by other work on the
machine. ``--root`` measures another checkout (e.g. the one before a change) with the same
script. Also printed: the plan's total and its bookings, so that two checkouts can be compared
for the same answer.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TODAY = "2026-12-04"
START = "2026-12-11"
CASES = [("grpo-7b", "examples/grpo-7b.yaml"), ("opd-8b", "examples/opd-8b-from-32b.yaml")]

CHILD = """
import datetime as dt, json, sys, time
from ptplan.planner.api import plan
from ptplan.spec.project import load_spec
from ptplan.providers.embedded import embedded_catalog
path, objective, start = sys.argv[1:4]
spec = load_spec(path)
if start != "-":
    spec = spec.model_copy(update={"sla": spec.sla.model_copy(update={
        "start_after": dt.date.fromisoformat(start)})})
catalog = embedded_catalog()
t = time.process_time()
p = plan(spec, catalog, objective, explain=True, timings=False)
cpu = time.process_time() - t
print(json.dumps({"cpu": cpu, "total": p.total_cost_usd, "hours": round(p.makespan_hours, 6),
                  "status": str(p.status),
                  "bookings": [f"{b.nodes} x {b.instance_type} {b.capacity_type}"
                               for b in p.bookings]}))
"""


def measure(root: Path, path: str, objective: str, start: str, repeat: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(root), "PTPLAN_TODAY": TODAY}
    runs = []
    for _ in range(repeat):
        out = subprocess.run([sys.executable, "-c", CHILD, str(root / path), objective, start],
                             env=env, cwd=root, capture_output=True, text=True, check=True)
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    best = min(runs, key=lambda r: r["cpu"])
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--root", type=Path, default=ROOT, help="checkout to measure")
    args = ap.parse_args()
    print(f"checkout {args.root}; process CPU of plan(), best of {args.repeat}; "
          f"--start-after {START} (today {TODAY})")
    print(f"{'case':<10} {'objective':<9} {'plain s':>8} {'booked s':>9} {'ratio':>6}  booked plan")
    for name, path in CASES:
        for objective in ("cost", "time"):
            plain = measure(args.root, path, objective, "-", args.repeat)
            booked = measure(args.root, path, objective, START, args.repeat)
            print(f"{name:<10} {objective:<9} {plain['cpu']:>8.2f} {booked['cpu']:>9.2f} "
                  f"{booked['cpu'] / plain['cpu']:>6.2f}  ${booked['total']} "
                  f"{booked['hours']} h {booked['status']} {booked['bookings'] or 'no booking'}")


if __name__ == "__main__":
    main()
