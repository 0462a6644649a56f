"""Why the plan is what it is: binding constraints, marginal costs, the alternatives.

* ``summary``: one line per pool (shape, nodes, capacity types, precision) with the price per
  effective node-hour of spot against on-demand for that shape and region.
* ``binding``: deadline, budget, capacity caps (per offer and per pool) and memory fit that hold
  with equality in the plan.
* ``marginal``: finite differences from exact re-solves (integers make LP duals meaningless):
  the cost at a 10 % tighter and looser deadline (objective cost) or the run time at a 10 %
  smaller and larger budget (objective time).
* ``alternatives``: the best plan of every pipeline layout the spec allows.
"""

from __future__ import annotations

from ptplan.planfile.schema import CapacityType, Explain, LayoutResult, Plan, Status, hours, usd
from ptplan.planner.candidates import spot_overhead
from ptplan.planner.search.engine import Context, LayoutRun, best_over_layouts

POLICY_PHASES = ("rollout", "scoring", "update", "eval")


def ctx_types(plan: Plan, phase: str) -> set[str]:
    """Capacity types the plan's policy allows for a phase."""
    rule = (plan.policy.get("phases") or {}).get(phase) or {}
    return set(rule.get("capacity_types") or CapacityType)


def _shape_prices(ctx: Context, provider: str, region: str, gpu: str, gpn: int
                  ) -> tuple[float | None, float | None]:
    """(cheapest on-demand $/h, cheapest spot $/effective node-hour) for a shape in a region."""
    od, sp = None, None
    for o in ctx.catalog.offers:
        if (o.provider, o.region, o.gpu, o.gpus_per_node) != (provider, region, gpu, gpn):
            continue
        if o.capacity_type == "on_demand":
            od = o.usd_per_hour if od is None else min(od, o.usd_per_hour)
        elif o.capacity_type == "spot":
            eff = o.usd_per_hour / max(1e-9, 1.0 - spot_overhead(o, ctx.demand))
            sp = eff if sp is None else min(sp, eff)
    return od, sp


def explain_plan(ctx: Context, runs: list[LayoutRun], plan: Plan, objective: str) -> Explain:
    summary = [f"{plan.pipeline_mode} pipeline ({plan.layout}) in {plan.provider} "
               f"{plan.region}: ${plan.total_cost_usd} over {plan.makespan_hours:.1f} h, of "
               f"which ${plan.idle_cost_usd} is idle time of held pools"]
    sync = [i for i in plan.network if i.flow == "weight_sync"]
    if sync:
        where = "; ".join(f"{i.nodes} node(s) {i.path} ${i.cost_usd}" for i in sync)
        summary.append(
            f"trainer in {plan.zone or plan.region}; weight sync every step to the rollout "
            f"pool: {where} (rollout nodes outside the trainer's zone or region pay "
            f"{plan.weight_sync_gb_per_node_step:g} GB x steps each; network total "
            f"${plan.network_cost_usd})")
    if plan.other_costs is not None:
        lines = "; ".join(f"{i.name} {i.quantity:g} x ${i.usd_per_unit:g} = ${i.cost_usd}"
                          for i in plan.other_costs)
        summary.append(f"costs beyond compute (spec other_costs, in the total and the budget, "
                       f"not optimised): ${plan.other_cost_usd}" + (f" ({lines})" if lines
                                                                     else ""))
    for c in plan.cpu_pools or []:
        size = (f"{c.vcpus_needed:g} vCPUs, {c.memory_gib_needed:g} GiB held for the run"
                if c.basis == "held" else
                f"{c.vcpu_hours:,.1f} vCPU-hours of work, {c.vcpus_needed:g} vCPUs at its peak")
        why = (f"before the GPU run, sized to take {c.vcpu_hours / c.vcpus_needed:g} h "
               "(data.prep_hours; not in the makespan)" if c.name == "prep"
               else "sized so the CPU work does not slow the step")
        summary.append(f"CPU pool {c.name} ({size}): {c.nodes} x {c.instance_type} "
                       f"{c.capacity_type} in {c.region}, {c.node_hours:,.1f} node-hours x "
                       f"${c.usd_per_hour:g}/h = ${c.cost_usd} ({why}; in the total and the "
                       "budget)")
    binding: list[str] = []
    for pool in plan.pools:
        kinds = sorted({a.capacity_type for a in pool.allocations})
        precisions = {ph.name: ph.precision for ph in plan.phases if ph.pool == pool.name
                      and ph.precision}
        types = sorted({a.instance_type for a in pool.allocations})
        od, sp = _shape_prices(ctx, pool.provider, pool.region, pool.gpu, pool.gpus_per_node)
        line = (f"pool {pool.name}: {pool.nodes} x {'/'.join(types)} ({pool.gpu} x "
                f"{pool.gpus_per_node}) {'+'.join(kinds)}, precision "
                + ", ".join(f"{k} {v}" for k, v in precisions.items())
                + f"; busy {pool.busy_hours:.1f} of {pool.held_hours:.1f} h")
        if not pool.spot_ok:
            line += (f"; spot not allowed here (policy {plan.policy.get('name', '?')}: "
                     + ", ".join(f"{ph} may use {'/'.join(sorted(ctx_types(plan, ph)))}"
                                 for ph in pool.phases if ph in POLICY_PHASES) + ")")
        elif od is not None and sp is not None:
            verdict = "spot is cheaper" if sp < od else "on-demand is cheaper"
            line += (f"; spot ${sp:.3f} per effective node-hour (after interruption overhead) vs "
                     f"on-demand ${od:.3f}: {verdict}")
        elif sp is None:
            line += "; no spot offer for this shape here"
        summary.append(line)
        for a in pool.allocations:
            if a.max_nodes is not None and a.nodes >= a.max_nodes:
                binding.append(f"capacity cap: {a.nodes} {a.capacity_type} {a.instance_type} in "
                               f"{a.region}{'/' + a.zone if a.zone else ''} is all the offer "
                               "has; more capacity there would lower the cost or time")
        if pool.nodes >= plan.max_nodes_per_pool:
            binding.append(f"pool cap: pool {pool.name} uses placement.max_nodes_per_pool = "
                           f"{plan.max_nodes_per_pool} nodes")
        for ph in plan.phases:
            if ph.pool == pool.name and ph.nodes_per_replica and \
                    pool.nodes == ph.nodes_per_replica and ph.nodes_per_replica > 1:
                binding.append(f"memory fit: {ph.name} needs {ph.replica_gpus} GPUs per replica "
                               f"= {ph.nodes_per_replica} nodes, the pool's size")
    deadline, budget = plan.deadline_hours, plan.budget_usd
    if deadline is not None:
        state = "binding" if plan.makespan_hours >= deadline * (1 - 1e-6) else "not binding"
        binding.append(f"deadline {deadline:g} h: {state} (run {plan.makespan_hours:.2f} h)")
    if budget is not None:
        b = float(budget)
        state = "binding" if float(plan.total_cost_usd) >= b * (1 - 1e-6) else "not binding"
        binding.append(f"budget ${budget}: {state} (cost ${plan.total_cost_usd})")
    marginal = _marginal(ctx, plan, objective)
    alternatives = []
    for r in runs:
        best = r.best
        alternatives.append(LayoutResult(
            layout=r.cands.layout.name, pipeline_mode=r.cands.layout.mode,
            status=Status.feasible if best else Status.infeasible,
            total_cost_usd=usd(best.usd) if best else None,
            makespan_hours=hours(best.run_hours) if best else None,
            provider=r.cands.regions[best.region][0] if best else None,
            region=r.cands.regions[best.region][1] if best else None,
        ))
    return Explain(summary=summary, binding=binding, marginal=marginal,
                   alternatives=alternatives)


def _marginal(ctx: Context, plan: Plan, objective: str) -> list[str]:
    out: list[str] = []
    deadline = plan.deadline_hours
    budget = float(plan.budget_usd) if plan.budget_usd is not None else None
    total = float(plan.total_cost_usd)
    if objective == "cost":
        if deadline is None:
            fast = best_over_layouts(ctx, None, budget, "time")
            if fast:
                out.append(f"no deadline: the fastest plan within budget takes "
                           f"{fast[1].run_hours:.1f} h and costs ${fast[1].usd:,.2f}")
            return out
        for factor in (0.9, 1.1):
            d = deadline * factor
            r = best_over_layouts(ctx, d, budget, "cost")
            if r is None:
                out.append(f"deadline {d:.1f} h ({factor - 1:+.0%}): infeasible")
            else:
                out.append(f"deadline {d:.1f} h ({factor - 1:+.0%}): ${r[1].usd:,.2f} "
                           f"({r[1].usd - total:+,.2f}; run {r[1].run_hours:.1f} h)")
    else:
        if budget is None:
            out.append("no budget: this is the fastest plan at any cost")
            return out
        for factor in (0.9, 1.1):
            b = budget * factor
            r = best_over_layouts(ctx, deadline, b, "time")
            if r is None:
                out.append(f"budget ${b:,.2f} ({factor - 1:+.0%}): infeasible")
            else:
                out.append(f"budget ${b:,.2f} ({factor - 1:+.0%}): run {r[1].run_hours:.2f} h "
                           f"({r[1].run_hours - plan.makespan_hours:+.2f} h; ${r[1].usd:,.2f})")
    return out
