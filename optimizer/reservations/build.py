"""The purchase problem of a portfolio: weekly demand per class, products and holdings.

Projects are planned (one plan per distinct spec) and their allocations spread over the weeks
their runs overlap; explicit demand rows are added per scenario; products come from the
catalog's reserved rates or the portfolio's list; held commitments are constants. The model
and its notation: :mod:`ptplan.reservations.purchase`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from ptplan.core.errors import InfeasibleError, InputError, PlannerError, suggest
from ptplan.planfile.schema import Plan, spec_digest
from ptplan.policies.model import Policy, default_policy
from ptplan.providers.base import Catalog, ReservedRate
from ptplan.reservations.portfolio import DemandRow, Portfolio, applied_defaults
from ptplan.reservations.problem import (
    HOURS_PER_WEEK,
    HOURS_PER_YEAR,
    DemandClass,
    Key,
    Problem,
    ProductRow,
    Risk,
    week_profile,
)
from ptplan.reservations.spend import spend_rows


class _Prices:
    """Catalog look-ups by key: cheapest on-demand, cheapest spot, reserved rates."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.od: dict[Key, float] = {}
        self.spot: dict[Key, float] = {}
        for o in catalog.offers:
            k = (o.provider, o.region, o.instance_type)
            book = self.od if o.capacity_type == "on_demand" else (
                self.spot if o.capacity_type == "spot" else None)
            if book is not None and o.usd_per_hour > 0:
                book[k] = min(book.get(k, math.inf), o.usd_per_hour)
        # several purchase options per key (AWS: standard/convertible x upfront options):
        # the default product is the cheapest effective rate (upfront amortised)
        self.reserved: dict[tuple[str, str, str, int], ReservedRate] = {}
        for r in sorted(catalog.reserved_rates, key=lambda r: (
                r.usd_per_hour, r.offering_class or "", r.purchase_option or "")):
            self.reserved.setdefault((r.provider, r.region, r.instance_type, r.term_years), r)

    def known(self, k: Key) -> bool:
        return k in self.od or k in self.spot

    def unknown_message(self, where: str, k: Key) -> str:
        provider, region, itype = k
        regions = {o.region for o in self.catalog.offers if o.provider == provider}
        if region not in regions:
            return (f"{where}.region: {provider} region {region!r} is not in catalog "
                    f"{self.catalog.name}{suggest(region, regions)}; fix the region or give prices")
        types = {o.instance_type for o in self.catalog.offers
                 if o.provider == provider and o.region == region}
        return (f"{where}.instance_type: {itype!r} has no on-demand price in catalog "
                f"{self.catalog.name} for {provider}/{region}{suggest(itype, types)}; fix the "
                "name or give on_demand_usd_per_hour")


class _Builder:
    def __init__(self, pf: Portfolio, catalog: Catalog, base_dir: Path, policy: Policy,
                 solver: str) -> None:
        self.pf, self.catalog, self.base_dir = pf, catalog, base_dir
        self.policy, self.solver = policy, solver
        self.prices = _Prices(catalog)
        self.W = pf.horizon_weeks
        self.S = len(pf.scenarios)
        self.keys: dict[Key, int] = {}
        self.od: dict[int, tuple[float, str]] = {}
        self.classes: dict[tuple[int, float | None], DemandClass] = {}
        self.warnings: list[str] = []

    def key(self, k: Key) -> int:
        return self.keys.setdefault(k, len(self.keys))

    def set_od(self, k: Key, given: float | None, where: str) -> int:
        i = self.key(k)
        if given is None:
            if i in self.od:
                return i
            if k not in self.prices.od:
                raise InputError(self.prices.unknown_message(where, k))
            self.od[i] = (self.prices.od[k], f"catalog {self.catalog.name}")
            return i
        have = self.od.get(i)
        if have is not None and have[1] != f"catalog {self.catalog.name}" and have[0] != given:
            raise InputError(f"{where}.on_demand_usd_per_hour = {given}: {have[1]} gives "
                             f"{have[0]} for {'/'.join(k)}; use one on-demand price per "
                             "instance type and region")
        self.od[i] = (given, where)
        return i

    def add(self, k: int, spot: float | None, nodes: np.ndarray, source: str) -> None:
        ck = (k, None if spot is None else round(spot, 9))
        cls = self.classes.setdefault(ck, DemandClass(k, spot, np.zeros((self.S, self.W))))
        cls.nodes += nodes
        cls.sources.add(source)

    # ---- explicit rows ----------------------------------------------------------------
    def row(self, r: DemandRow, where: str, scale: np.ndarray) -> None:
        k: Key = (r.provider, r.region, r.instance_type)
        i = self.set_od(k, r.on_demand_usd_per_hour, where)
        spot = None
        if r.spot_ok:
            spot = r.spot_usd_per_hour or self.prices.spot.get(k)
            if spot is None:
                raise InputError(f"{where}.spot_ok: catalog {self.catalog.name} has no spot "
                                 f"offer for {'/'.join(k)}; give spot_usd_per_hour or set "
                                 "spot_ok: false")
        prof = np.zeros(self.W)
        if r.weekly_nodes is not None:
            values = np.array(r.weekly_nodes[: max(0, self.W - r.start_week)])
            prof[r.start_week: r.start_week + len(values)] = values
            if r.start_week + len(r.weekly_nodes) > self.W:
                self.warnings.append(f"{where}: weekly_nodes run past the {self.W}-week "
                                     "horizon; those weeks are not evaluated")
        else:
            end = self.W if r.end_week is None else min(r.end_week, self.W)
            prof[r.start_week:end] = r.nodes or 0.0
        self.add(i, spot, scale[:, None] * prof[None, :], r.label or where)

    # ---- projects ---------------------------------------------------------------------
    def projects(self, progress: Callable[[int, int], None] | None = None
                 ) -> tuple[list[dict[str, Any]], float, int]:
        """Each project's demand from its plan (one plan per distinct spec): the project
        rows, seconds spent planning, distinct plans."""
        from ptplan.planner.api import plan

        cache: dict[str, Plan] = {}
        seconds = 0.0
        out: list[dict[str, Any]] = []
        names: dict[str, int] = {}
        for n, pr in enumerate(self.pf.projects):
            if progress is not None:
                progress(n, len(self.pf.projects))
            where = f"projects[{n}]"
            spec = self.spec_of(pr, where)
            digest = spec_digest(spec.model_dump(mode="json"))
            if digest not in cache:
                start = time.perf_counter()
                try:
                    cache[digest] = plan(spec, self.catalog, solver=self.solver, explain=False,
                                         timings=False, policy=self.policy)
                except PlannerError as exc:
                    raise type(exc)(f"portfolio {where} ({spec.name}): {exc}") from None
                seconds += time.perf_counter() - start
            p = cache[digest]
            base = pr.name or spec.name
            names[base] = names.get(base, 0) + 1
            name = base if names[base] == 1 else f"{base}#{names[base]}"
            out.append(self.project_demand(pr, p, name, where))
        return out, seconds, len(cache)

    def spec_of(self, pr: Any, where: str) -> Any:
        """A project's spec: a path (relative to the portfolio) or inline."""
        from ptplan.spec.project import load_spec, parse_spec

        try:
            if isinstance(pr.spec, str):
                path = Path(pr.spec)
                return load_spec(str(path if path.is_absolute() else self.base_dir / path))
            return parse_spec(pr.spec, f"{where}.spec")
        except InputError as exc:
            raise InputError(f"portfolio {where}.spec: {exc}") from None

    def project_demand(self, pr: Any, p: Plan, name: str, where: str) -> dict[str, Any]:
        """Add the demand of every allocation of plan ``p`` in every run of project ``pr``;
        the project's row of the report."""
        scale = np.array([s.demand_multiplier * pr.scenario_weights.get(s.name, 1.0)
                          for s in self.pf.scenarios])
        starts = _run_starts(pr.start_week, pr.repeat_every_weeks, self.W)
        node_hours = 0.0
        keys: set[str] = set()
        for pool in p.pools:
            for a in pool.allocations:
                k: Key = (a.provider, a.region, a.instance_type)
                i = self.set_od(k, None, f"{where} ({name}) plan allocation")
                keys.add("/".join(k))
                prof = sum((week_profile(self.W, s * HOURS_PER_WEEK, a.hours) for s in starts),
                           np.zeros(self.W))
                if a.capacity_type == "spot":
                    eff = a.effective_fraction if a.effective_fraction > 0 else 1.0
                    nodes, spot = a.nodes * eff, a.usd_per_hour / eff
                else:
                    nodes, spot = float(a.nodes), None
                    if a.capacity_type == "reserved":
                        self.warnings.append(
                            f"project {name}: its plan uses held reserved capacity of "
                            f"{'/'.join(k)}; it is counted as demand here, and the holding "
                            "counts only if listed under existing (so nothing counts twice)")
                node_hours += nodes * float(prof.sum()) * HOURS_PER_WEEK
                self.add(i, spot, nodes * scale[:, None] * prof[None, :], f"project {name}")
        return {"name": name, "spec_name": p.spec_name, "start_week": pr.start_week,
                "repeat_every_weeks": pr.repeat_every_weeks, "runs_in_horizon": len(starts),
                "makespan_hours": p.makespan_hours, "plan_cost_usd": p.total_cost_usd,
                "node_hours_in_horizon": round(node_hours, 6),
                "instance_types": sorted(keys)}


def _run_starts(start_week: int, repeat_every: int | None, weeks: int) -> list[int]:
    """Start weeks of a project's runs inside the horizon (it repeats every ``repeat_every``
    weeks while the start is inside)."""
    starts = [start_week]
    while repeat_every and starts[-1] + repeat_every < weeks:
        starts.append(starts[-1] + repeat_every)
    return [s for s in starts if s < weeks]


LADDERS = {"quarterly": 13}
"""``--ladder`` → weeks between purchase dates."""


def buy_weeks(weeks: int, ladder: str | None) -> list[int]:
    """Purchase weeks: now only, or the first week of every quarter inside the horizon."""
    if ladder is None:
        return [0]
    if ladder not in LADDERS:
        raise InputError(f"--ladder: {ladder!r} is not a ladder; use one of "
                         f"{', '.join(LADDERS)}")
    return list(range(0, weeks, LADDERS[ladder]))


def build_problem(pf: Portfolio, catalog: Catalog, base_dir: Path, policy: Policy | None = None,
                  solver: str = "highs", risk: Risk | None = None,
                  progress: Callable[[int, int], None] | None = None,
                  ladder: str | None = None) -> Problem:
    """Plan the projects, build weekly demand, products and holdings (see
    :mod:`ptplan.reservations.purchase`)."""
    starts = buy_weeks(pf.horizon_weeks, ladder)
    b = _Builder(pf, catalog, base_dir, policy or default_policy(), solver)
    projects, seconds, distinct = b.projects(progress)
    _demand_rows(pf, b)
    demand_keys = {c.key for c in b.classes.values() if c.nodes.any()}
    if not demand_keys:
        late = sum(1 for p in pf.projects if p.start_week >= b.W)
        raise InfeasibleError(
            f"portfolio {pf.name}: nothing to buy for: no demand inside the {b.W}-week horizon "
            f"({len(pf.projects)} projects, {late} starting after it; {len(pf.demand)} demand "
            "rows); add projects or demand rows, or move start weeks into the horizon")
    products = _products(pf, b, demand_keys, starts)
    existing, existing_cost = _holdings(pf, b)
    weights = [sc.weight for sc in pf.scenarios]
    total = sum(weights)
    defaults = applied_defaults(pf)
    if abs(total - 1) > 1e-9:
        defaults.append(f"scenario weights normalised to probabilities (they summed to {total:g})")
    keys = list(b.keys)
    for k in keys:
        i = b.keys[k]
        if i not in b.od and k in b.prices.od:
            b.od[i] = (b.prices.od[k], f"catalog {catalog.name}")
    spend = spend_rows(pf.commitments, b.keys, {i: v[0] for i, v in b.od.items()},
                       demand_keys, b.W, starts, base_dir, b.warnings)
    if ladder is not None:
        defaults.append(f"--ladder {ladder}: purchases in weeks {', '.join(map(str, starts))}; "
                        "week 0's is the answer, later ones the plan (one plan for every "
                        "scenario), revised each quarter")
    if any(pr.assumption for pr in products):
        b.warnings.append("some product rates are the catalog's assumed discounts (not quoted "
                          "prices); give products with your quoted usd_per_hour before buying")
    return Problem(
        name=pf.name, weeks=b.W, scenarios=[s.name for s in pf.scenarios], weights=weights,
        multipliers=[s.demand_multiplier for s in pf.scenarios],
        prob=np.array(weights) / total, keys=keys,
        on_demand=[b.od[i][0] if i in b.od else None for i in range(len(keys))],
        classes=_classes(b), products=products, existing_nodes=existing,
        existing_cost_usd=existing_cost, risk=risk, warnings=sorted(set(b.warnings)),
        defaults=defaults, projects=projects, planning_seconds=seconds,
        distinct_plans=distinct, spend=spend)


def _demand_rows(pf: Portfolio, b: _Builder) -> None:
    """The explicit demand rows: the portfolio's in every scenario (scaled by its demand
    multiplier), or a scenario's own."""
    for s, sc in enumerate(pf.scenarios):
        onehot = np.zeros(b.S)
        onehot[s] = sc.demand_multiplier
        rows = pf.demand if sc.demand is None else sc.demand
        prefix = "demand" if sc.demand is None else f"scenarios[{s}].demand"
        for n, r in enumerate(rows):
            b.row(r, f"{prefix}[{n}]", onehot)


def _holdings(pf: Portfolio, b: _Builder) -> tuple[np.ndarray, float]:
    """Held commitments: nodes per key and week until they expire, and their cost."""
    held: list[tuple[int, int, float, int]] = []
    for n, e in enumerate(pf.existing):
        k: Key = (e.provider, e.region, e.instance_type)
        if k not in b.keys and not b.prices.known(k):
            raise InputError(b.prices.unknown_message(f"existing[{n}]", k))
        held.append((b.key(k), e.count, e.usd_per_hour, min(e.expires_week, b.W)))
    existing = np.zeros((len(b.keys), b.W))
    existing_cost = 0.0
    for i, count, rate, until in held:
        existing[i, :until] += count
        existing_cost += count * rate * until * HOURS_PER_WEEK
    return existing, existing_cost


def _classes(b: _Builder) -> list[DemandClass]:
    """Demand classes in key order, on-demand-only first; spot dearer than on-demand is never
    used, so such a class is on-demand-only."""
    classes = sorted(b.classes.values(), key=lambda c: (
        c.key, c.spot_usd_per_hour is not None, c.spot_usd_per_hour or 0.0))
    for c in classes:
        if c.spot_usd_per_hour is not None and c.spot_usd_per_hour >= b.od[c.key][0]:
            c.spot_usd_per_hour = None  # spot dearer than on-demand: never used
    return classes


def _active(weeks: int, years: int, t: int = 0) -> np.ndarray:
    return week_profile(weeks, t * HOURS_PER_WEEK, HOURS_PER_YEAR * years)


def _products(pf: Portfolio, b: _Builder, demand_keys: set[int], starts: list[int]
              ) -> list[ProductRow]:
    """The portfolio's products, or (none listed) the catalog's 1- and 3-year reserved rates
    of every key with demand; one row per purchase week."""
    now = _products_now(pf, b, demand_keys)
    return [replace(p, name=p.name if t == 0 else f"{p.name}@w{t}", buy_week=t,
                    active=_active(b.W, p.term_years, t)) for p in now for t in starts]


def _products_now(pf: Portfolio, b: _Builder, demand_keys: set[int]) -> list[ProductRow]:
    if pf.products is None:
        return _catalog_products(b, demand_keys)
    out: list[ProductRow] = []
    for n, p in enumerate(pf.products):
        k = (p.provider, p.region, p.instance_type)
        if k not in b.keys and not b.prices.known(k):
            raise InputError(b.prices.unknown_message(f"products[{n}]", k))
        rate, source, assumption = p.usd_per_hour, "portfolio", False
        if rate is None:
            r = b.prices.reserved.get((*k, p.term_years))
            if r is None:
                raise InputError(f"products[{n}].usd_per_hour: catalog {b.catalog.name} has no "
                                 f"{p.term_years}-year rate for {'/'.join(k)}; give "
                                 "usd_per_hour")
            rate, source, assumption = r.usd_per_hour, r.source, r.assumption
        out.append(ProductRow(p.name, b.key(k), p.term_years, rate, p.upfront_usd, source,
                              assumption, _active(b.W, p.term_years)))
    return out


def _catalog_products(b: _Builder, demand_keys: set[int]) -> list[ProductRow]:
    out: list[ProductRow] = []
    inv = {i: k for k, i in b.keys.items()}
    for i in sorted(demand_keys, key=lambda i: inv[i]):
        k = inv[i]
        found = False
        for years in (1, 3):
            r = b.prices.reserved.get((*k, years))
            if r is None:
                continue
            found = True
            out.append(ProductRow(f"{'/'.join(k)}/{years}y", i, years, r.usd_per_hour, 0.0,
                                  r.source, r.assumption, _active(b.W, years)))
        if not found:
            b.warnings.append(f"catalog {b.catalog.name} has no reserved rate for "
                              f"{'/'.join(k)}: no product to buy for it (list products)")
    return out
