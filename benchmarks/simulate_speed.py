"""Simulation throughput: trials per second of ``ptplan simulate`` on the RL example's plan.

    python benchmarks/simulate_speed.py [--trials 10000] [--runs 3] [--workers 1,2]

Plans ``examples/grpo-7b.yaml`` on the embedded catalog (not timed), then runs ``--trials``
trials ``--runs`` times per case, as ``ptplan simulate`` runs them (chunks of 2,000 trials, one
seed per chunk), and prints the best and median wall-clock time and trials per second of each
case: independent interruptions, a correlated share of 0.5 with a 2-hour spot shortage, and
the hazards × 100 (about four interruptions per run: the event-heavy path), with 1 worker
(this process) and with spawn worker processes (start-up included). Every case's result is
checked to be byte-identical across worker counts.

Times are wall-clock seconds on this machine; other load on it shows up in every figure.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ptplan.planner.api import plan as make_plan  # noqa: E402
from ptplan.providers.registry import load_catalog  # noqa: E402
from ptplan.risk.model import build_model, scaled  # noqa: E402
from ptplan.risk.runner import run_trials  # noqa: E402
from ptplan.spec.project import load_spec  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workers", default="1,2")
    args = ap.parse_args()
    p = make_plan(load_spec(str(ROOT / "examples/grpo-7b.yaml")), load_catalog("embedded"),
                  explain=False, timings=False)
    cases = {
        "independent": build_model(p),
        "correlated 0.5, 2 h shortage": build_model(p, 0.5, 2.0),
        "hazards x100": scaled(build_model(p), 100.0),
    }
    print(f"plan: {p.spec_name}, {p.pipeline_mode}, {len(p.pools)} pools, {p.steps} steps, "
          f"makespan {p.makespan_hours:.3f} h; {args.trials:,} trials per run, best of "
          f"{args.runs}")
    for name, model in cases.items():
        reference = None
        for w in (int(x) for x in args.workers.split(",")):
            times = []
            for _ in range(args.runs):
                t0 = time.perf_counter()
                res = run_trials(model, args.trials, seed=0, workers=w)
                times.append(time.perf_counter() - t0)
            if reference is None:
                reference = res.makespan_hours.tobytes()
            assert res.makespan_hours.tobytes() == reference, "workers changed the result"
            best = min(times)
            print(f"{name:30s} workers {w}: best {best:.3f} s, median "
                  f"{statistics.median(times):.3f} s, {args.trials / best:,.0f} trials/s; "
                  f"mean makespan {res.makespan_hours.mean():.4f} h, "
                  f"{res.interruptions.mean():.3f} interruptions per run")


if __name__ == "__main__":
    main()
