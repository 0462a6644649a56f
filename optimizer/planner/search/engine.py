"""The search engine: layouts → candidate pools → exact bound → MILP, per layout.

Solve strategy (per layout the spec's ``pipeline`` allows):

1. :mod:`ptplan.planner.candidates` builds each pool's Pareto options in every region.
2. :mod:`ptplan.planner.search.exact` computes the exact optimum over those options (the
   incumbent) and, per option, a lower bound on any plan using it; options whose bound exceeds
   the incumbent are dropped.
3. :mod:`ptplan.planner.search.milp` solves the MILP on the surviving options at the site step 2
   chose (HiGHS, or CBC with ``--solver cbc``); storage and fixed network flows are constants
   there, and egress enters the objective per option. Its answer must agree with step 2
   (``solver.cross_check``).
4. :mod:`ptplan.planner.assembly.build` turns the best layout's solution into a
   :class:`~ptplan.planfile.schema.Plan`; :mod:`ptplan.planner.api` adds the explanation and
   has :func:`ptplan.planfile.verify.verify_plan` re-check it from the plan alone.

Infeasible inputs raise :class:`~ptplan.core.errors.InfeasibleError` naming the binding
constraint and what would make the plan feasible.
"""

from __future__ import annotations

import math
from dataclasses import replace

from ptplan.core.errors import InfeasibleError
from ptplan.core.hardware import gpus
from ptplan.costs.cpu import CpuPoolModel, cpu_pool_model
from ptplan.costs.disks import DiskModel
from ptplan.costs.network import network_model
from ptplan.costs.other import other_cost_model
from ptplan.costs.storage import StorageModel, data_classes, weights_gb
from ptplan.demand.cells import phase_cell
from ptplan.demand.model import Demand, build_demand
from ptplan.demand.rates import allowed_precisions, phase_rates
from ptplan.planner.candidates import PoolOption, filter_offers, layouts
from ptplan.planner.frontier.frontiers import Candidates, build_candidates, build_frontiers
from ptplan.planner.search.capacity import resolve
from ptplan.planner.search.context import Context, LayoutRun
from ptplan.planner.search.exact import Best, best, rank
from ptplan.planner.search.fills import fill_variants
from ptplan.planner.search.milp import OptionSet, solve
from ptplan.planner.search.option_bounds import prune_for_milp
from ptplan.planner.search.site_bounds import regions_by_bound
from ptplan.policies.model import Policy, default_policy
from ptplan.providers.base import Catalog
from ptplan.spec.project import ProjectSpec

__all__ = ["Context", "LayoutRun", "best_over_layouts", "diagnose", "no_fit_message", "prepare",
           "run_hours", "solution_key", "solve_layout", "solve_runs"]

SHARED_KEEP_GAPS = (0.25, 1.0, 4.0)
"""When pools compete for capped offers: options kept for the MILP (bound within this factor
of the relaxation's optimum), widened until the MILP finds a plan."""
SHARED_MAX_OPTIONS = 150


def prepare(spec: ProjectSpec, catalog: Catalog, policy: Policy | None = None,
            demand: Demand | None = None, grid_cache: dict | None = None) -> Context:
    """Candidates of every layout. ``demand`` and ``grid_cache`` (busy-time grids, which do
    not depend on prices) may be reused across calls on the same spec and policy, e.g. by the
    price scenarios of a what-if sweep."""
    policy = policy or default_policy()
    demand = demand if demand is not None else build_demand(spec)
    filt = filter_offers(spec.placement, catalog, policy, spec.release)
    if not filt.offers:
        removed = ", ".join(f"{k} removed {v}" for k, v in filt.removed.items() if v)
        raise InfeasibleError(
            f"no offers: catalog {catalog.name} has {len(catalog.offers)} offers and the filters "
            f"left none ({removed or 'the catalog is empty'}); widen placement.providers, "
            "placement.regions or placement.gpus"
        )
    cache: dict = {}
    cap = spec.placement.max_nodes_per_pool
    classes = data_classes(demand, policy)
    storage = StorageModel(tuple(classes), catalog)
    archived = next((c for c in classes if c.name == "archived_checkpoints"), None)
    network = network_model(
        demand, catalog, int(archived.groups[0].count) if archived else 0, weights_gb(demand),
        next((c.gb for c in classes if c.name == "dataset"), 0.0))
    disks = DiskModel(catalog, policy.boot_disk_gb)
    lays = [replace(lay, disks=disks) for lay in layouts(demand, policy)]
    if grid_cache is None:  # (a caller's grid cache is to be filled here, for its next call)
        build_frontiers(demand, lays, filt.offers, cap, cache, network, policy.split_regions)
    runs = [build_candidates(demand, lay, filt.offers, cap, cache, grid_cache=grid_cache,
                             network=network, split=policy.split_regions) for lay in lays]
    other = other_cost_model(demand)
    cpu = cpu_pool_model(demand, catalog, policy)
    if cpu is not None:
        _cpu_offered(cpu, catalog, sorted({(o.provider, o.region) for o in filt.offers}))
    for c in runs:
        c.storage = storage
        c.other = other
        c.cpu = cpu
    return Context(spec, demand, catalog, runs, len(filt.offers), filt.offers)


def _cpu_offered(cpu: CpuPoolModel, catalog: Catalog, places: list[tuple[str, str]]) -> None:
    """The spec's CPU pools need CPU offers in a region the GPU pools may use."""
    if any(cpu.choices(p, r) is not None for p, r in places):
        return
    names = ", ".join(n.name for n in cpu.needs)
    raise InfeasibleError(
        f"no CPU offers: the spec's CPU pools ({names}) run in the region of the GPU pools, and "
        f"catalog {catalog.name} has no CPU instance type for them in "
        f"{', '.join(f'{p}/{r}' for p, r in places[:6])}{' ...' if len(places) > 6 else ''}; "
        "widen placement.regions or add CPU offers (gpu: none, gpus_per_node: 0) to a custom "
        "catalog")


def best_over_layouts(ctx: Context, deadline: float | None, budget: float | None,
                      objective: str) -> tuple[Candidates, Best] | None:
    found = []
    limit = math.inf  # a later layout is searched only for plans at least as good
    for i in sorted(range(len(ctx.runs)), key=lambda i: (_first_bound(ctx.runs[i], objective), i)):
        c = ctx.runs[i]
        b = best(c, deadline, budget, objective, limit=limit)
        if b is not None:
            found.append((rank(b, objective), i, c, b))
            limit = min(limit, rank(b, objective)[0])
    if not found:
        return None
    found.sort(key=lambda x: (x[0], x[1]))
    return found[0][2], found[0][3]


def _first_bound(c: Candidates, objective: str) -> float:
    """The least region bound of a layout (visiting the most promising layout first gives
    the others a tighter limit; the result does not depend on the order)."""
    regions = regions_by_bound(c, objective)
    return regions[0][0] if regions else math.inf


def solve_runs(ctx: Context, objective: str, solver: str, every_layout: bool = True,
               diagnose_infeasible: bool = True) -> tuple[list[LayoutRun], list[LayoutRun]]:
    """The layouts of ``ctx`` solved exactly: (all runs, those with a solution). Raises
    :class:`InfeasibleError` naming what binds when no layout has a plan.

    With ``every_layout`` False (a plan without its explanation, whose alternatives list
    every layout's own optimum) a layout whose relaxed optimum (pools sharing capped offers
    freely: a lower bound) is worse than a plan already found for another layout is not
    resolved (its ``best`` stays None: it cannot win): its relaxed search and the cap-split
    search of the others are pruned by that plan from the start. Layouts are resolved in the
    order of their relaxed optimum (with every layout) or of their least region bound; ties
    are kept, so the winner is the same."""
    spec = ctx.spec
    deadline, budget = spec.sla.deadline_hours, spec.budget.max_usd
    cap = spec.placement.max_nodes_per_pool
    if every_layout:
        relaxed: list[Best | None] = [best(c, deadline, budget, objective) for c in ctx.runs]
        order = sorted((i for i, b in enumerate(relaxed) if b is not None),
                       key=lambda i: (rank(relaxed[i], objective), i))  # type: ignore[arg-type]
    else:  # the most promising layout first; the others are searched with a limit below
        relaxed = [None] * len(ctx.runs)
        order = sorted(range(len(ctx.runs)), key=lambda i: (_first_bound(ctx.runs[i],
                                                                         objective), i))
    runs = [LayoutRun(c, None) for c in ctx.runs]
    plan_rank: tuple[float, float] | None = None  # the best plan resolved so far
    for i in order:
        c, rb = ctx.runs[i], relaxed[i]
        limit = None
        if not every_layout:
            if plan_rank is not None:
                # ranks at or below the plan found are kept (ties go to the first layout)
                limit = (plan_rank[0] * (1 + 1e-9) + 1e-9, math.inf)
            rb = best(c, deadline, budget, objective,
                      limit=limit[0] if limit is not None else math.inf)
            if rb is None or (limit is not None and rank(rb, objective) >= limit):
                continue  # no plan below the one we have (its lower bound is worse)
        assert rb is not None
        resolved = resolve(c, ctx.offers, ctx.demand, cap, deadline, budget, objective,
                           relaxed=rb, limit=limit)
        if resolved is not None:
            runs[i] = LayoutRun(resolved.cands, resolved.best,
                                shared_capacity=not resolved.exact)
            r_rank = rank(resolved.best, objective)
            plan_rank = r_rank if plan_rank is None else min(plan_rank, r_rank)
    feasible = [r for r in runs if r.best is not None]
    if not feasible:
        raise InfeasibleError(diagnose(ctx, deadline, budget, objective)
                              if diagnose_infeasible else "no plan")
    caps = ctx.caps
    contested = any(r.shared_capacity for r in feasible)
    by_rank = sorted(feasible, key=lambda r: (rank(r.best, objective),  # type: ignore[arg-type]
                                              runs.index(r)))
    leader: tuple[float, float, int] | None = None
    for r in by_rank:
        # the exact search's optimum of a layout bounds its MILP from below: a layout whose
        # optimum is worse than a solved layout's plan cannot win (with contested caps the
        # search only bounds, and every layout is solved)
        if leader is not None and not contested and \
                rank(r.best, objective)[0] > leader[0] * (1 + 1e-6) + 1e-6:  # type: ignore[arg-type]
            break
        solve_layout(r, deadline, budget, objective, solver, caps)
        if r.solution and r.solution.chosen:
            key = solution_key(r, objective, runs.index(r))
            leader = key if leader is None else min(leader, key)
    solved = [r for r in feasible if r.solution and r.solution.chosen]
    if not solved:
        if any(r.shared_capacity for r in feasible):
            raise InfeasibleError(
                "capacity: the pools need more nodes of capped offers than the offers have "
                "when held at the same time; raise the offers' max_nodes, relax the deadline "
                "or allow more GPU types and regions")
        statuses = ", ".join(f"{r.cands.layout.name}: {r.solution.status if r.solution else '?'}"
                             for r in feasible)
        raise InfeasibleError(f"the MILP solver returned no solution ({statuses}); "
                              "retry with --solver cbc or report a bug")
    return runs, solved


def run_hours(mode: str, chosen: dict[str, PoolOption], fill_fraction: float) -> float:
    """A plan's run time from its pools' busy hours: their sum (sync, colocated) or the
    slowest pool plus the rollout's fill (async)."""
    if mode == "async":
        fill = fill_fraction * chosen["rollout"].busy_hours if "rollout" in chosen else 0.0
        return max(o.busy_hours for o in chosen.values()) + fill
    return sum(o.busy_hours for o in chosen.values())


def solution_key(r: LayoutRun, objective: str, index: int) -> tuple[float, float, int]:
    """How a solved layout ranks: (objective, other figure, layout index). The cost is the
    whole plan's: compute, egress, and storage and fixed network flows at the run time and
    site (the MILP, solved at the search's site, minimises only the first two)."""
    assert r.solution is not None and r.best is not None
    run = run_hours(r.cands.layout.mode, r.solution.chosen, r.cands.layout.fill_fraction)
    cost = run * sum(o.usd_per_hour for o in r.solution.chosen.values()) + sum(
        o.egress_usd for o in r.solution.chosen.values()) + float(
        r.cands.extra_cost(r.best.region, run))
    first = cost if objective == "cost" else run
    second = run if objective == "cost" else cost
    return (round(first, 9), round(second, 9), index)


def solve_layout(r: LayoutRun, deadline: float | None, budget: float | None, objective: str,
                 solver: str, caps: dict[str, int | None]) -> None:
    """MILP on the options that can still be optimal (with the shared-capacity rows). When the
    split search of :mod:`ptplan.planner.search.capacity` hit its limits, the MILP gets a wider
    option set and fill variants, and the plan is reported as feasible with its gap to the
    bound."""
    assert r.best is not None
    frontiers = r.cands.frontiers
    milp_budget = budget
    if r.cands.storage is not None or r.cands.network is not None:
        # Storage and fixed network flows depend only on the site and the run time and never
        # fall as the run gets longer: the MILP minimises compute + egress with the run no
        # longer than the exact search's optimum, at the search's site, and within the budget
        # left after that site's storage and fixed flows (the option bounds below count them
        # themselves, so they keep the full budget).
        stored = float(r.cands.extra_cost(r.best.region, r.best.run_hours))
        cap_run = r.best.run_hours * (1 + 1e-9) + 1e-9
        deadline = cap_run if deadline is None else min(deadline, cap_run)
        if budget is not None:
            milp_budget = budget - stored + 1e-6
    gaps: tuple[float, ...] = SHARED_KEEP_GAPS if r.shared_capacity else (1e-6,)
    for keep_gap in gaps:
        keep = prune_for_milp(r.cands, r.best, deadline, budget, objective, keep_gap,
                              SHARED_MAX_OPTIONS if r.shared_capacity else None)
        options: dict[str, list[PoolOption]] = {}
        sites = r.cands.regions
        for n, idx in keep.items():
            opts = []
            f = frontiers[n]
            for k in idx:
                if f.place[k] >= 0:  # cross-region: priced at the best site
                    if f.place[k] == r.cands.places.index(sites[r.best.region][:2]):
                        continue
                    opt = f.option(int(k), sites, r.best.region, r.cands.network)
                else:
                    opt = f.option(int(k), sites)
                if opt.site != sites[r.best.region]:
                    continue  # the MILP is solved at the search's site (see above)
                opts.append(opt)
                if r.shared_capacity:
                    opts.extend(fill_variants(opt, frontiers[n].groups[int(frontiers[n].gid[k])]))
            options[n] = opts
        r.milp_options = sum(len(v) for v in options.values())
        regions = sorted({o.site for v in options.values() for o in v})
        r.solution = solve(OptionSet(r.cands.layout, options, regions, caps), deadline,
                           milp_budget, objective, solver)
        if r.solution.chosen:
            return


def diagnose(ctx: Context, deadline: float | None, budget: float | None, objective: str) -> str:
    """Name what binds and what would make the plan feasible."""
    empty = [(c.layout.name, name) for c in ctx.runs for name, f in c.frontiers.items()
             if len(f.t) == 0]
    if len(empty) and all(any(len(f.t) == 0 for f in c.frontiers.values()) for c in ctx.runs):
        return no_fit_message(ctx, sorted({p for _, p in empty}))
    relaxed = best_over_layouts(ctx, deadline, budget, objective)
    fastest = best_over_layouts(ctx, None, None, "time")
    cheapest_any = best_over_layouts(ctx, None, None, "cost")
    assert fastest is not None and cheapest_any is not None
    f_c, f_b = fastest
    region = "/".join(f_c.regions[f_b.region])
    if deadline is not None and f_b.run_hours > deadline:
        return (
            f"deadline {deadline:g} h: fastest achievable {f_b.run_hours:.2f} h "
            f"({f_c.layout.name}, {region}, ${f_b.usd:,.2f}); set sla.deadline_hours to at least "
            f"{_ceil2(f_b.run_hours):.2f}, raise placement.max_nodes_per_pool "
            f"({ctx.spec.placement.max_nodes_per_pool}) or allow more GPU types and regions"
        )
    if budget is not None:
        cheap = best_over_layouts(ctx, deadline, None, "cost")
        assert cheap is not None
        c_c, c_b = cheap
        within = f"meeting the {deadline:g} h deadline " if deadline is not None else ""
        any_deadline = (f"; with no deadline the cheapest plan costs ${cheapest_any[1].usd:,.2f} "
                        f"over {cheapest_any[1].run_hours:.1f} h" if deadline is not None else "")
        return (
            f"budget ${budget:,.2f}: the cheapest plan {within}costs ${c_b.usd:,.2f} "
            f"({c_c.layout.name}, {'/'.join(c_c.regions[c_b.region])}); raise budget.max_usd "
            f"to at least {_ceil2(c_b.usd):.2f}{any_deadline}"
        )
    if relaxed is not None:  # feasible only if pools could share capped offers freely
        from ptplan.planner.search.capacity import _contested

        r_c, r_b = relaxed
        offers = ", ".join(_contested(r_c, r_b)) or "capped offers"
        return (f"capacity: the pools are held at the same time and together need more nodes "
                f"of {offers} than the offers have (max_nodes); raise those offers' max_nodes, "
                "relax the deadline or budget, or allow more GPU types and regions")
    return "no feasible plan under the given constraints"


def _ceil2(x: float) -> float:
    """Round up to 2 decimals, so that a suggested limit is enough."""
    return math.ceil(x * 100 - 1e-9) / 100


def _shape_misfit(demand: Demand, phase: str, name: str, gpn: int, allowed: tuple[str, ...],
                  policy: Policy | None, max_nodes: int, min_gpn: int) -> str | None:
    """Why nodes of ``gpn`` ``name`` GPUs cannot run ``phase`` (None when they can)."""
    gpu = gpus().get(name)
    if gpu is None:
        return f"{phase} on {name}: not in the GPU table"
    qs = [q for q in allowed if gpu.supports(q)]
    if not qs:
        return f"{phase} on {name}: none of {', '.join(allowed)} is supported"
    rates = phase_rates(demand, phase, gpu, gpn, True, policy)
    if not rates:
        return f"{phase} on {name}: {phase_cell(demand, phase, gpu, qs[0]).reason or 'no fit'}"
    npr = min(r.nodes_per_replica for r in rates)
    if npr > max_nodes:
        return (f"{phase} on {name} x {gpn}: one replica needs {npr} nodes, more than "
                f"placement.max_nodes_per_pool ({max_nodes})")
    if npr > 1 and phase == "update" and gpn < min_gpn:
        return (f"{phase} on {name} x {gpn}: one replica spans {npr} nodes and training across "
                f"nodes needs nodes of at least {min_gpn} GPUs "
                "(placement.multi_node_training_min_gpus_per_node)")
    return None


def no_fit_message(ctx: Context, pools: list[str]) -> str:
    """Why no offer can run a pool: per phase, the first GPU type's real reason — the part
    that does not fit it (memory, an unsupported precision), or a replica needing more nodes
    than a pool may hold, or a multi-node replica on nodes too small to train across."""
    demand, spec = ctx.demand, ctx.spec
    policy = ctx.runs[0].layout.policy if ctx.runs else None
    max_nodes = spec.placement.max_nodes_per_pool
    min_gpn = spec.placement.multi_node_training_min_gpus_per_node
    shapes = sorted({(o.gpu, o.gpus_per_node) for o in ctx.offers or ctx.catalog.offers},
                    key=lambda s: (-s[1], s[0]))  # largest nodes first: the nearest miss
    reasons: list[str] = []
    for phase in demand.phases:
        if phase == "checkpoint":
            continue
        allowed = allowed_precisions(demand, phase, policy)
        first: str | None = None
        for name, gpn in shapes:
            why = _shape_misfit(demand, phase, name, gpn, allowed, policy, max_nodes, min_gpn)
            if why is None:  # some shape runs this phase: it does not bind
                first = None
                break
            first = first or why
        if first:
            reasons.append(first)
    detail = "; ".join(reasons[:3]) or "every GPU type runs each phase, but no pool fits " \
        "the offers' node caps together"
    return (f"no offer can run pool(s) {', '.join(pools)}: {detail}; allow larger GPUs "
            "(placement.gpus), lower precisions (precisions), more nodes per pool "
            "(placement.max_nodes_per_pool) or more offers")
