"""Plan solve time against catalog size and number of phases.

Run: ``python benchmarks/plan_scaling.py [--repeat 3]``. Prints a table of wall-clock seconds
(median of the repeats) for ``optimizer.planner.api.plan`` on catalogs of N offers taken at an
even stride through the embedded catalog (sorted by provider, region, zone, instance type: so small
catalogs mix types and regions, the full one has every offer) and on specs with 1 to 3 pools:

* SFT (update + eval pool): ``examples/sft-8b.yaml``
* OPD (rollout, teacher scoring, update, eval): ``examples/opd-8b-from-32b.yaml``
* RL (rollout, reference scoring, update, eval): ``examples/grpo-7b.yaml``, with its placement
  filter removed so that every GPU type and region competes; and without the reference model
  (2 pools); and the example itself on the whole catalog.

Nothing here asserts on time: it reports.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from optimizer.core.errors import PlannerError  # noqa: E402
from optimizer.planner.api import plan  # noqa: E402
from optimizer.spec.project import load_spec  # noqa: E402
from providers.embedded import embedded_catalog  # noqa: E402


def timed(spec, catalog, repeat: int) -> tuple[float, str]:
    times = []
    result = ""
    for _ in range(repeat):
        start = time.perf_counter()
        try:
            p = plan(spec, catalog, explain=False, timings=False)
            result = f"${p.total_cost_usd} {p.pipeline_mode} {p.region}"
        except PlannerError as exc:
            result = f"no plan ({str(exc)[:40]})"
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    full = embedded_catalog()
    specs = {
        "sft-8b (1 pool)": load_spec(str(ROOT / "examples/sft-8b.yaml")),
        "opd-8b (3 pools)": load_spec(str(ROOT / "examples/opd-8b-from-32b.yaml")),
    }
    grpo = load_spec(str(ROOT / "examples/grpo-7b.yaml"))
    open_placement = grpo.placement.model_copy(update={"gpus": None, "providers": None})
    specs["grpo-7b all GPUs (3 pools)"] = grpo.model_copy(update={"placement": open_placement})
    specs["grpo-7b no ref (2 pools)"] = grpo.model_copy(
        update={"placement": open_placement, "reference_model": False})
    sizes = [10, 100, 300, 1000, len(full.offers)]
    print(f"machine: {sys.platform}, python {sys.version.split()[0]}; median of {args.repeat}")
    print(f"{'spec':<28} {'offers':>6} {'regions':>7} {'seconds':>8}  result")
    for name, spec in specs.items():
        for n in sizes:
            stride = max(1, len(full.offers) // n)
            offers = full.offers[::stride][:n]
            catalog = replace(full, offers=offers)
            regions = len({(o.provider, o.region) for o in offers})
            seconds, result = timed(spec, catalog, args.repeat)
            print(f"{name:<28} {n:>6} {regions:>7} {seconds:>8.3f}  {result}")
    seconds, result = timed(grpo, full, args.repeat)
    print(f"{'grpo-7b example (README)':<28} {len(full.offers):>6} "
          f"{len({(o.provider, o.region) for o in full.offers}):>7} {seconds:>8.3f}  {result}")


if __name__ == "__main__":
    main()
