"""Plan time and peak memory against catalog size, and the growth exponent.

Run: ``python benchmarks/plan_scaling.py [--repeat 3] [--scales 1,3,10,20,30] [--chart PNG]``.
Nothing here asserts on time: it reports (the guide: speed is measured by scripts, not tests).

Three tables:

1. **Catalog slices.** ``ptplan.planner.api.plan`` on catalogs of N offers taken at an even
   stride through the embedded catalog (sorted by provider, region, zone, instance type: small
   catalogs mix types and regions) for specs with 1 to 3 pools — SFT (``examples/sft-8b.yaml``),
   OPD (``examples/opd-8b-from-32b.yaml``: rollout, teacher scoring, update), RL
   (``examples/grpo-7b.yaml`` with its placement filter removed so every GPU type competes; and
   without the reference model) — and the README's RL example on the whole catalog.
2. **Synthetic catalogs of 1×–30× the embedded one.** Copy k of every offer is moved to a new
   region ``<region>-s<k>`` (zones renamed alike, storage tiers copied) with its price perturbed
   by a deterministic ±10 % (seeded), so the planner sees k times the regions, zones and offers
   with no two copies priced alike. Each size is planned in a fresh process (so that peak
   memory, ``ru_maxrss``, is that size's own), for the RL example (3 pools) and the OPD example
   (contested spot caps).
3. **Growth exponent.** A least-squares fit of log(seconds) against log(offers) over table 2:
   time ∝ offers^b. ``--chart`` writes a PNG of seconds against offers (log–log) with the fit.

Each figure is the best of ``--repeat`` runs (wall clock, ``time.perf_counter``): the least
disturbed by other work on the machine.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import resource
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# as the ptplan command does (optimizer/cli/__init__.py): one BLAS thread keeps the process
# single-threaded, so the planner builds its pool frontiers on two cores; PTPLAN_WORKERS=1
# measures the one-process build
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from ptplan.core.errors import PlannerError  # noqa: E402
from ptplan.planner.api import plan  # noqa: E402
from ptplan.providers.base import Catalog  # noqa: E402
from ptplan.providers.embedded import embedded_catalog  # noqa: E402
from ptplan.spec.project import load_spec  # noqa: E402

SPECS = {"rl": "examples/grpo-7b.yaml", "opd": "examples/opd-8b-from-32b.yaml",
         "sft": "examples/sft-8b.yaml"}
PERTURB = 0.10
"""Synthetic copies' prices: the original times a uniform factor in [1 − PERTURB, 1 + PERTURB]."""


def synthetic(catalog: Catalog, scale: int) -> Catalog:
    """The catalog with ``scale − 1`` perturbed copies in new regions (see the docstring)."""
    offers = list(catalog.offers)
    tiers = list(catalog.storage_tiers)
    for k in range(1, scale):
        rng = random.Random(k)  # deterministic: the same catalog at every run
        suffix = f"-s{k}"
        for o in catalog.offers:
            offers.append(replace(
                o, region=o.region + suffix, zone=o.zone + suffix if o.zone else "",
                usd_per_hour=round(o.usd_per_hour * rng.uniform(1 - PERTURB, 1 + PERTURB), 6)))
        tiers.extend(replace(t, region=t.region + suffix) for t in catalog.storage_tiers)
    return replace(catalog, name=f"{catalog.name}x{scale}", offers=tuple(offers),
                   storage_tiers=tuple(tiers))


def timed(spec, catalog, repeat: int) -> tuple[float, float, str]:
    """Best wall seconds of ``repeat`` plans, the plan's own search seconds, and a summary."""
    best, search, result = math.inf, 0.0, ""
    for _ in range(repeat):
        start = time.perf_counter()
        try:
            p = plan(spec, catalog, explain=False)
            search = p.solver.seconds
            result = f"${p.total_cost_usd} {p.pipeline_mode} {p.region}"
        except PlannerError as exc:
            result = f"no plan ({str(exc)[:40]})"
        best = min(best, time.perf_counter() - start)
    return best, search, result


def one(spec_name: str, scale: int, repeat: int) -> dict:
    """Table 2's measurement for one size, in this process (run by ``--one``)."""
    catalog = synthetic(embedded_catalog(), scale)
    spec = load_spec(str(ROOT / SPECS[spec_name]))
    seconds, search, result = timed(spec, catalog, repeat)
    return {"spec": spec_name, "scale": scale, "offers": len(catalog.offers),
            "regions": len({(o.provider, o.region) for o in catalog.offers}),
            "seconds": seconds, "search_seconds": search,
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
            # the forked frontier worker's own peak (it shares the parent's pages until they
            # are written, so the two peaks do not add up to the machine's use)
            "child_peak_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0,
            "result": result}


def slices(repeat: int) -> None:
    full = embedded_catalog()
    specs = {"sft-8b (1 pool)": load_spec(str(ROOT / SPECS["sft"])),
             "opd-8b (3 pools)": load_spec(str(ROOT / SPECS["opd"]))}
    grpo = load_spec(str(ROOT / SPECS["rl"]))
    open_placement = grpo.placement.model_copy(update={"gpus": None, "providers": None})
    specs["grpo-7b all GPUs (3 pools)"] = grpo.model_copy(update={"placement": open_placement})
    specs["grpo-7b no ref (2 pools)"] = grpo.model_copy(
        update={"placement": open_placement, "reference_model": False})
    print(f"{'spec':<28} {'offers':>6} {'regions':>7} {'seconds':>8}  result")
    for name, spec in specs.items():
        for n in (10, 100, 300, 1000, len(full.offers)):
            stride = max(1, len(full.offers) // n)
            catalog = replace(full, offers=full.offers[::stride][:n])
            regions = len({(o.provider, o.region) for o in catalog.offers})
            seconds, _, result = timed(spec, catalog, repeat)
            print(f"{name:<28} {n:>6} {regions:>7} {seconds:>8.3f}  {result}")
    seconds, search, result = timed(grpo, full, repeat)
    print(f"{'grpo-7b example (README)':<28} {len(full.offers):>6} "
          f"{len({(o.provider, o.region) for o in full.offers}):>7} {seconds:>8.3f}  {result} "
          f"(search {search:.3f} s)")


def exponent(rows: list[dict]) -> float:
    """Least-squares slope of log(seconds) against log(offers)."""
    xs = [math.log(r["offers"]) for r in rows]
    ys = [math.log(r["seconds"]) for r in rows]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx if sxx else 0.0


def scaling(scales: list[int], repeat: int, specs: list[str], chart: str | None) -> None:
    print(f"\n{'spec':<5} {'scale':>5} {'offers':>7} {'regions':>7} {'seconds':>8} "
          f"{'search s':>8} {'peak MB':>8} {'child MB':>8}  result")
    by_spec: dict[str, list[dict]] = {}
    for name in specs:
        for k in scales:
            out = subprocess.run(
                [sys.executable, __file__, "--one", name, "--scale", str(k),
                 "--repeat", str(repeat)], capture_output=True, text=True, check=True)
            r = json.loads(out.stdout.strip().splitlines()[-1])
            by_spec.setdefault(name, []).append(r)
            print(f"{name:<5} {k:>4}x {r['offers']:>7} {r['regions']:>7} {r['seconds']:>8.3f} "
                  f"{r['search_seconds']:>8.3f} {r['peak_mb']:>8.0f} {r['child_peak_mb']:>8.0f}  "
                  f"{r['result']}", flush=True)
    for name, rows in by_spec.items():
        if len(rows) > 1:
            print(f"{name}: time grows as offers^{exponent(rows):.2f} "
                  f"({rows[0]['offers']}–{rows[-1]['offers']} offers)")
    if chart:
        import matplotlib
        import matplotlib.ticker

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4))
        for name, rows in by_spec.items():
            xs = [r["offers"] for r in rows]
            ax.plot(xs, [r["seconds"] for r in rows], "o-",
                    label=f"{name} (offers^{exponent(rows):.2f})")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xlabel("offers in the catalog")
        ax.set_ylabel("plan seconds (best of runs)")
        ax.set_title("ptplan plan time against catalog size")
        ax.legend()
        ax.grid(True, which="both", alpha=0.3)
        fig.tight_layout()
        fig.savefig(chart, dpi=100, metadata={"Software": None})
        print(f"wrote {chart}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--scales", default="1,3,10,20,30",
                        help="synthetic catalog sizes, in multiples of the embedded one")
    parser.add_argument("--specs", default="rl,opd", help="specs of table 2 (rl, opd, sft)")
    parser.add_argument("--no-slices", action="store_true", help="skip table 1")
    parser.add_argument("--chart", default=None, help="write a PNG of table 2 here")
    parser.add_argument("--one", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--scale", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.scale, args.repeat)))
        return
    print(f"machine: {sys.platform}, python {sys.version.split()[0]}; best of {args.repeat}")
    if not args.no_slices:
        slices(args.repeat)
    scaling([int(k) for k in args.scales.split(",")], args.repeat, args.specs.split(","),
            args.chart)


if __name__ == "__main__":
    main()
