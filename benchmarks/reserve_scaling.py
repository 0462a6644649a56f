"""``ptplan reserve`` solve time for a large portfolio: 200 projects, 52 weeks, 3 scenarios.

Run: ``python benchmarks/reserve_scaling.py [--projects 200] [--weeks 52] [--solver highs]
[--risk cvar:0.9]``. The portfolio is synthetic but built from the three example specs, each in
several variants (region and GPU restrictions, so the plans land on different instance types
and regions); project i uses variant i mod V, starts in week i mod 40, repeats every 1, 2, 4
or 13 weeks or runs once, and has per-scenario weights drawn from a seeded generator. Scenarios:
low (0.25, demand × 0.7), expected (0.5), high (0.25, × 1.4). Products: the catalog's 1- and
3-year rates for every instance type with demand.

Prints project planning time (each distinct spec is planned once) separately from the purchase
MILP (build + solve), the independent re-check and report assembly. Nothing here asserts on
time: it reports.
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ptplan.core.yamlio import validate  # noqa: E402
from ptplan.providers.registry import load_catalog  # noqa: E402
from ptplan.reservations import milp as reserve_model  # noqa: E402
from ptplan.reservations.portfolio import Portfolio  # noqa: E402
from ptplan.reservations.purchase import Risk, build_problem, reserve  # noqa: E402

VARIANTS = [  # (example, placement override)
    ("sft-8b.yaml", {}),
    ("sft-8b.yaml", {"providers": ["aws"]}),
    ("sft-8b.yaml", {"gpus": ["A100-80GB"]}),
    ("grpo-7b.yaml", None),
    ("grpo-7b.yaml", {"providers": ["aws"]}),
    ("grpo-7b.yaml", {"regions": ["europe-*"]}),
    ("opd-8b-from-32b.yaml", None),
    ("opd-8b-from-32b.yaml", {"providers": ["gcp"]}),
]


def specs() -> list[dict]:
    out = []
    for name, placement in VARIANTS:
        spec = yaml.safe_load((ROOT / "examples" / name).read_text(encoding="utf-8"))
        if placement is not None:
            spec = copy.deepcopy(spec)
            spec["placement"] = {**spec.get("placement", {}), **placement}
        out.append(spec)
    return out


def portfolio(n: int, weeks: int) -> dict:
    rng = np.random.default_rng(0)
    variants = specs()
    projects = []
    for i in range(n):
        repeat = [1, 2, 4, 13, None][i % 5]
        projects.append({
            "name": f"team{i:03d}", "spec": variants[i % len(variants)],
            "start_week": i % 40, **({"repeat_every_weeks": repeat} if repeat else {}),
            "scenario_weights": {"low": float(rng.choice([0.0, 0.5, 1.0])),
                                 "high": float(rng.choice([1.0, 1.5, 2.0]))}})
    return {"name": f"bench-{n}", "horizon_weeks": weeks, "projects": projects,
            "scenarios": [{"name": "low", "weight": 0.25, "demand_multiplier": 0.7},
                          {"name": "expected", "weight": 0.5},
                          {"name": "high", "weight": 0.25, "demand_multiplier": 1.4}]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--projects", type=int, default=200)
    ap.add_argument("--weeks", type=int, default=52)
    ap.add_argument("--solver", default="highs")
    ap.add_argument("--risk", default=None)
    args = ap.parse_args()
    risk = Risk.parse(args.risk)
    catalog = load_catalog("embedded")
    pf = validate(Portfolio, portfolio(args.projects, args.weeks), "benchmark portfolio")
    t0 = time.perf_counter()
    pb = build_problem(pf, catalog, ROOT, solver=args.solver, risk=risk)
    t_build = time.perf_counter() - t0
    t1 = time.perf_counter()
    sol = reserve_model.solve(pb, args.solver)
    t_solve = time.perf_counter() - t1
    t2 = time.perf_counter()
    result = reserve(pf, catalog, ROOT, solver=args.solver, risk=risk)  # full path, re-check
    t_full = time.perf_counter() - t2
    rep = result.report
    print(f"portfolio: {args.projects} projects, {args.weeks} weeks, {len(pb.scenarios)} "
          f"scenarios, risk {args.risk or 'none'}, solver {args.solver}")
    print(f"project planning: {pb.planning_seconds:.2f} s for {pb.distinct_plans} distinct "
          f"plans (demand building total {t_build:.2f} s)")
    print(f"demand: {len(pb.keys)} instance types/regions, {len(pb.classes)} demand classes, "
          f"{len(pb.products)} candidate products")
    print(f"MILP: {sol.variables} variables ({sol.integers} integer), {sol.constraints} rows; "
          f"build + solve {t_solve:.2f} s ({sol.status}, gap {sol.gap:.2g})")
    print(f"full reserve() (planning + MILP + re-check + report): {t_full:.2f} s; "
          f"MILP inside it {rep['solver']['seconds']:.2f} s")
    bought = [(p["product"], p["count"]) for p in rep["purchases"] if p["count"]]
    print(f"bought: {bought}")
    print(f"expected ${rep['expected_total_cost_usd']} vs on-demand only "
          f"${rep['on_demand_only_cost_usd']} vs no purchase ${rep['existing_only_cost_usd']}")


if __name__ == "__main__":
    main()
