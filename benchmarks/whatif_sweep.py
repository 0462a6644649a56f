"""What-if throughput: scenarios per second (1 and 2 local workers, Ray) and a 200-point sweep
of the RL example against 200 separate ``ptplan plan`` runs.

    python benchmarks/whatif_sweep.py [--points 200] [--scenarios 8] [--runs 3] [--no-ray]

* Scenarios per second: ``--scenarios`` distinct price scenarios (spot prices × 0.6 … 2.0),
  every one an exact re-solve, timed from the start of the pool to the last result (worker
  start-up included) with 1 worker (in-process), 2 spawn workers, and Ray actors on a local
  Ray instance started here with 2 CPUs (skipped when ray is not installed).
* The sweep: ``capacity_type=spot *=`` from 0.5 to 3.0 in ``--points`` values, as
  ``ptplan whatif --sweep`` runs it (2 workers; solves until every gap's two ends have the
  same optimal plan, which is then provably optimal inside), and with ``--every-point``.
* The baseline: ``--runs`` subprocess runs of ``ptplan plan examples/grpo-7b.yaml --format
  json --no-timings`` (catalog prices), and ``--runs`` fresh-interpreter runs of the same
  pipeline at sweep values (the planner's work varies with prices: at some prices its bound
  pruning takes several times longer), each timed and **extrapolated** to ``--points`` runs
  (mean × points); running all 200 would take many minutes and measure the same thing.

Times are wall-clock seconds on this machine; other load on it shows up in every figure.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ptplan.policies.model import load_policy  # noqa: E402
from ptplan.providers.registry import load_catalog  # noqa: E402
from ptplan.scenarios.pricerules import parse_partial, parse_rule  # noqa: E402
from ptplan.scenarios.runner import Runner, Setup  # noqa: E402
from ptplan.scenarios.scenarios import Scenario, run_scenarios  # noqa: E402
from ptplan.scenarios.sweep import linspace, sweep  # noqa: E402
from ptplan.spec.project import load_spec  # noqa: E402

SPEC = ROOT / "examples" / "grpo-7b.yaml"


def scenarios_per_second(setup: Setup, n: int, workers: int, ray: str | None) -> float:
    multipliers = [0.6 + 1.4 * i / max(1, n - 1) for i in range(n)]
    scenarios = [Scenario(f"s{i}", (parse_rule(f"capacity_type=spot *= {m:.4f}"),))
                 for i, m in enumerate(multipliers)]
    start = time.perf_counter()
    with Runner(setup, workers, ray) as runner:
        run_scenarios(setup, scenarios, runner)
    return (n + 1) / (time.perf_counter() - start)  # + the baseline


def separate_runs(runs: int) -> float:
    exe = [sys.executable, "-m", "ptplan.cli.app", "plan", str(SPEC), "--format", "json",
           "--no-timings"]
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(exe, check=True, capture_output=True, cwd=ROOT)
        times.append(time.perf_counter() - start)
    return sum(times) / len(times)


SCRIPTED = """
import os, sys
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as the ptplan command sets it
from ptplan.scenarios.pricerules import apply_rules, parse_rule
from ptplan.planner.api import plan
from ptplan.spec.project import load_spec
from ptplan.policies.model import load_policy
from ptplan.providers.registry import load_catalog
cat, _ = apply_rules(load_catalog("embedded"), [parse_rule(sys.argv[2])])
p = plan(load_spec(sys.argv[1]), cat, explain=True, timings=False, policy=load_policy(None))
sys.stdout.write(p.to_json())
"""


def scripted_runs(rules: list[str]) -> float:
    """One fresh interpreter per scenario, as a script looping over `ptplan plan` would do
    (imports, catalog load, rule, plan with explain, JSON), at the sweep's own prices."""
    times = []
    for rule in rules:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", SCRIPTED, str(SPEC), rule], check=True,
                       capture_output=True, cwd=ROOT)
        times.append(time.perf_counter() - start)
    return sum(times) / len(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=200)
    ap.add_argument("--scenarios", type=int, default=8)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-ray", action="store_true")
    ap.add_argument("--skip-every-point", action="store_true",
                    help="skip the every-point sweep (the slowest figure)")
    args = ap.parse_args()
    setup = Setup(load_spec(str(SPEC)), load_catalog("embedded"), load_policy(None),
                  timings=False)
    print(f"machine: {os.cpu_count()} CPUs; spec {SPEC.name}; catalog embedded "
          f"({len(setup.catalog.offers)} offers)")

    print(f"\n-- scenarios per second ({args.scenarios} scenarios + baseline, exact re-solves, "
          "start-up included)")
    for workers in (1, 2):
        rate = scenarios_per_second(setup, args.scenarios, workers, None)
        print(f"{workers} worker(s): {rate:.3f} scenarios/s ({1 / rate:.2f} s each)")
    if not args.no_ray:
        try:
            import ray
        except ImportError:
            print("ray: not installed (pip install 'ptplan[ray]'); skipped")
        else:
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
            try:
                rate = scenarios_per_second(setup, args.scenarios, 2, "local")
                print(f"ray (local instance, 2 CPUs, 2 actors): {rate:.3f} scenarios/s "
                      f"({1 / rate:.2f} s each)")
            finally:
                ray.shutdown()

    sel, op = parse_partial("capacity_type=spot *=")
    values = linspace(0.5, 3.0, args.points)
    print(f"\n-- sweep capacity_type=spot *= 0.5..3.0, {args.points} points, 2 workers")
    start = time.perf_counter()
    with Runner(setup, 2) as runner:
        _, points = sweep(setup, sel, op, values, runner)
        solves = runner.solves
    sweep_s = time.perf_counter() - start
    solved = sum(1 for p in points if p.outcome is not None)
    print(f"whatif --sweep: {sweep_s:.1f} s ({solves} exact solves incl. baseline; {solved} "
          f"points solved, {args.points - solved} inferred)")
    every_s = None
    if not args.skip_every_point:
        start = time.perf_counter()
        with Runner(setup, 2) as runner:
            sweep(setup, sel, op, values, runner, every_point=True)
        every_s = time.perf_counter() - start
        print(f"whatif --sweep --every-point: {every_s:.1f} s ({args.points + 1} exact solves)")

    each = separate_runs(args.runs)
    print(f"\n-- {args.points} separate `ptplan plan` runs at catalog prices: measured "
          f"{args.runs} subprocess runs, mean {each:.2f} s each; extrapolated "
          f"{each * args.points:.0f} s")
    sample = [values[round(i * (len(values) - 1) / (args.runs + 1))]
              for i in range(1, args.runs + 1)]
    each_swept = scripted_runs([f"capacity_type=spot *= {v!r}" for v in sample])
    total = each_swept * args.points
    print(f"-- {args.points} separate runs at the swept prices (fresh interpreter, rule applied, "
          f"plan with explain): measured at {', '.join(f'{v:.3f}' for v in sample)}, mean "
          f"{each_swept:.2f} s each; extrapolated {total:.0f} s")
    print(f"speed-up of whatif --sweep: {total / sweep_s:.1f}x vs runs at the swept prices, "
          f"{each * args.points / sweep_s:.1f}x vs `ptplan plan` at catalog prices "
          "(target >= 20x)")
    if every_s is not None:
        print(f"speed-up of whatif --sweep --every-point: {total / every_s:.1f}x")


if __name__ == "__main__":
    main()
