"""Verifier rules on what a plan records about itself (issue #21: ``check`` re-derives every
field of the plan or the schema lists it as informational):

* ``allocations``: each phase's allocations are its pool's allocations (same offers, nodes,
  prices, caps, rates, capacity types), held for the phase's busy hours and costed at
  nodes × price × busy hours; the phase's cost is their sum and its GPU-hours are
  busy × nodes × GPUs per node; a pool lists exactly the phases that name it.
* ``hold``: every pool's ``held_hours`` is the run (the makespan).
* ``totals``: a pool's ``idle_cost_usd`` is its $/h × (held − busy).
* ``spot_overhead``: a training pool's ``gang_overhead_fraction`` is 1 − its nodes' effective
  fraction; other pools have none.
* ``coverage``: ``tokens_per_node_hour`` = tokens ÷ (busy × effective nodes × usable fraction);
  stall phases (checkpoint writes, weight-sync receive) carry no tokens, replicas or precision
  and last exactly their floor.
* ``memory``: a replica of ``replica_gpus`` spans ⌈replica_gpus ÷ GPUs per node⌉ nodes.
* ``makespan``: ``fill_fraction`` is one step of the run (1 ÷ steps) for async, else 0.
* ``policy``: ``spot_ok`` of each pool, ``split_regions`` and the precision floors follow the
  plan's policy record.
* ``budget``: ``budget_warn_usd`` and ``budget_stop_usd`` are the budget × the policy's
  thresholds.
* ``status``: the plan's status is a solver outcome that carries a plan and equals the solver's.
* ``calibration``: a phase is ``calibrated`` exactly when a calibration record applied to its
  GPU and precision.
* ``network``: every flow but weight sync appears once and names no nodes; weight sync names
  its nodes.
"""

from __future__ import annotations

import math

from ptplan.planfile.rules_base import close, money
from ptplan.planfile.rules_blocks import rounding_usd
from ptplan.planfile.schema import Allocation, Plan, PoolPlan, usd

MIRRORED = ("provider", "region", "zone", "instance_type", "gpu", "gpus_per_node",
            "capacity_type", "nodes", "usd_per_hour", "max_nodes", "interruptions_per_hour",
            "effective_fraction", "note")
"""Fields of a phase's allocation that copy its pool's allocation."""
PLAN_STATUSES = ("optimal", "feasible", "time_limit")


def _mirror(a: Allocation) -> tuple[object, ...]:
    return tuple(getattr(a, f) for f in MIRRORED)


def check_allocations(plan: Plan) -> list[str]:
    v: list[str] = []
    pools = {p.name: p for p in plan.pools}
    for ph in plan.phases:
        pool = pools.get(ph.pool)
        if pool is None:
            continue
        if [_mirror(a) for a in ph.allocations] != [_mirror(a) for a in pool.allocations]:
            v.append(f"allocations: phase {ph.name}'s allocations differ from pool "
                     f"{pool.name}'s")
        for a in ph.allocations:
            if not close(a.hours, ph.busy_hours):
                v.append(f"allocations: phase {ph.name} bills {a.instance_type} for {a.hours} "
                         f"h, the phase is busy {ph.busy_hours} h")
            if not close(money(a.cost_usd), a.nodes * a.usd_per_hour * ph.busy_hours,
                         abs_=0.006):
                v.append(f"allocations: phase {ph.name} {a.instance_type} cost {a.cost_usd} != "
                         "nodes x price x busy hours")
        price = sum(a.nodes * a.usd_per_hour for a in pool.allocations)
        if not close(money(ph.cost_usd), price * ph.busy_hours, abs_=0.006):
            v.append(f"allocations: phase {ph.name} cost {ph.cost_usd} != pool $/h x busy "
                     f"= {price * ph.busy_hours:.2f}")
        gpu_hours = ph.busy_hours * pool.gpus_per_node * sum(a.nodes for a in pool.allocations)
        if not close(ph.gpu_hours, gpu_hours):
            v.append(f"allocations: phase {ph.name} {ph.gpu_hours:.6g} GPU-hours != busy x "
                     f"GPUs = {gpu_hours:.6g}")
    for pool in plan.pools:
        named = sorted(ph.name for ph in plan.phases if ph.pool == pool.name)
        if sorted(pool.phases) != named:
            v.append(f"allocations: pool {pool.name} lists phases {sorted(pool.phases)}, the "
                     f"phases name it for {named}")
    return v


def check_record_pools(plan: Plan) -> list[str]:
    v: list[str] = []
    for pool in plan.pools:
        if not close(pool.held_hours, plan.makespan_hours):
            v.append(f"hold: pool {pool.name} held {pool.held_hours} h, the run lasts "
                     f"{plan.makespan_hours} h")
        price = sum(a.nodes * a.usd_per_hour for a in pool.allocations)
        # blocks: the whole units past the run are idle too (billed, unused)
        idle = price * max(0.0, plan.makespan_hours - pool.busy_hours) + rounding_usd(pool)
        if not close(money(pool.idle_cost_usd), idle, abs_=0.006):
            v.append(f"totals: pool {pool.name} idle cost {pool.idle_cost_usd} != $/h x "
                     f"(held - busy) = {idle:.2f}")
        v += _gang(pool)
    return v


def _gang(pool: PoolPlan) -> list[str]:
    if "update" not in pool.phases:
        want = 0.0
    else:
        fractions = {a.effective_fraction for a in pool.allocations}
        want = 1.0 - min(fractions) if fractions else 0.0
    if not close(pool.gang_overhead_fraction, want, abs_=1e-8):
        return [f"spot_overhead: pool {pool.name} gang overhead {pool.gang_overhead_fraction} "
                f"!= {want:.9f} (1 - its nodes' effective fraction)"]
    return []


def check_record_phases(plan: Plan) -> list[str]:
    v: list[str] = []
    pools = {p.name: p for p in plan.pools}
    for ph in plan.phases:
        pool = pools.get(ph.pool)
        if ph.tokens_per_node_hour is None:  # a stall: fixed time, no tokens or replicas
            if ph.precision is not None or ph.tokens != 0 or ph.replica_gpus != 0 \
                    or ph.nodes_per_replica != 0 or ph.usable_node_fraction != 1.0 \
                    or ph.parallel_layout is not None or ph.calibrated:
                v.append(f"coverage: stall phase {ph.name} records tokens, replicas, a "
                         "precision or a layout")
            if not close(ph.latency_floor_hours, ph.busy_hours):
                v.append(f"coverage: stall phase {ph.name} floor {ph.latency_floor_hours} h != "
                         f"its busy {ph.busy_hours} h")
            continue
        if pool is None or pool.nodes < 1:
            continue
        effective = sum(a.nodes * a.effective_fraction for a in pool.allocations) \
            * ph.usable_node_fraction
        want = ph.tokens / (ph.busy_hours * effective) if ph.busy_hours * effective > 0 \
            else math.nan  # no busy time: the planner records the model's rate, not derivable
        if not math.isnan(want) and not close(ph.tokens_per_node_hour, want):
            v.append(f"coverage: phase {ph.name} rate {ph.tokens_per_node_hour:.6g} tokens/"
                     f"node-hour != tokens / busy / effective nodes = {want:.6g}")
        npr = max(1, -(-ph.replica_gpus // pool.gpus_per_node)) if pool.gpus_per_node else 0
        if ph.replica_gpus < 1 or ph.nodes_per_replica != npr:
            v.append(f"memory: phase {ph.name} replica of {ph.replica_gpus} GPUs spans "
                     f"{ph.nodes_per_replica} node(s); on {pool.gpus_per_node}-GPU nodes it "
                     f"spans {npr}")
        if ph.precision is None:
            v.append(f"coverage: phase {ph.name} processes tokens but has no precision")
    return v


def check_record_plan(plan: Plan) -> list[str]:
    v: list[str] = []
    want_fill = 1.0 / plan.steps if plan.pipeline_mode == "async" and plan.steps else 0.0
    if not close(plan.fill_fraction, want_fill, abs_=1e-12):
        v.append(f"makespan: fill_fraction {plan.fill_fraction} != {want_fill:.9g} (one step "
                 f"of {plan.steps} for async, else 0)")
    if plan.layout.split(":")[0] != plan.pipeline_mode:
        v.append(f"makespan: pipeline_mode {plan.pipeline_mode} but the layout is {plan.layout}")
    if plan.status not in PLAN_STATUSES or plan.status != plan.solver.status:
        v.append(f"status: the plan says {plan.status}, the solver {plan.solver.status}; a plan "
                 f"is {', '.join(PLAN_STATUSES)}")
    v += _calibration(plan)
    v += _flows(plan)
    return v


def _calibration(plan: Plan) -> list[str]:
    pools = {p.name: p for p in plan.pools}
    applied = {(c.phase, c.gpu, prec) for c in plan.calibration for prec in c.applied_to}
    v: list[str] = []
    for ph in plan.phases:
        pool = pools.get(ph.pool)
        if pool is None:
            continue
        want = (ph.name, pool.gpu, ph.precision) in applied
        if ph.calibrated != want:
            v.append(f"calibration: phase {ph.name} says calibrated={ph.calibrated}, the "
                     f"calibration records say {want}")
    return v


def _flows(plan: Plan) -> list[str]:
    v: list[str] = []
    seen: set[str] = set()
    for item in plan.network:
        if item.flow == "weight_sync":
            if item.nodes is None or item.nodes < 1:
                v.append("network: a weight_sync item names no rollout nodes")
            continue
        if item.nodes is not None:
            v.append(f"network: {item.flow} names {item.nodes} node(s); only weight sync does")
        if item.flow in seen:
            v.append(f"network: {item.flow} appears twice")
        seen.add(item.flow)
    return v


def check_record_policy(plan: Plan) -> list[str]:
    """``spot_ok``, ``split_regions`` and the budget thresholds against the policy record."""
    from ptplan.policies.model import Policy

    try:
        policy = Policy.model_validate(plan.policy)
    except ValueError:  # reported by the policy rule
        return []
    v: list[str] = []
    for pool in plan.pools:
        want = all("spot" in policy.capacity_types(ph) for ph in pool.phases)
        if pool.spot_ok != want:
            v.append(f"policy: pool {pool.name} spot_ok={pool.spot_ok}, the policy says "
                     f"{want} for its phases {', '.join(pool.phases)}")
    if plan.split_regions != policy.split_regions:
        v.append(f"policy: split_regions={plan.split_regions}, the plan's policy says "
                 f"{policy.split_regions}")
    budget = money(plan.budget_usd) if plan.budget_usd is not None else None
    for name, share, got in (("warn", policy.budget.warn_at, plan.budget_warn_usd),
                             ("stop", policy.budget.stop_at, plan.budget_stop_usd)):
        limit = None if budget is None else budget * share
        if (limit is None) != (got is None) or (
                limit is not None and got is not None and not close(money(got), limit,
                                                                    abs_=0.0101)):
            shown = "none" if limit is None else usd(limit)
            v.append(f"budget: budget_{name}_usd {got} != budget x {name} threshold "
                     f"({share:g}) = {shown}")
    return v
