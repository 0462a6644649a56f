"""Independent re-check of a plan, from the plan alone (and optionally its spec).

Nothing here calls the optimiser or reads the catalog. From the plan's own figures it recomputes:

* ``pool_accounting``: a pool's nodes, $/h and cost are the sums over its allocations; every
  allocation is of the pool's shape, provider and region; pools are in the plan's region
  (with ``split_regions`` the rollout pool may be elsewhere).
* ``zones``: zoned allocations of pools other than rollout are in the plan's (trainer's) zone.
* ``network``: each item costs GB × $/GB on the path its ends imply; weight sync covers every
  rollout node once per step (GB = nodes × steps × W) and its cross-zone nodes are exactly the
  rollout's zoned nodes outside the trainer's zone; the total is the sum of the items.
* ``hold``: every pool is held for the whole run; idle = held − busy ≥ 0, billed.
* ``coverage``: Σ nodes × effective fraction × tokens/node-hour × usable fraction × busy hours
  covers each phase's tokens.
* ``spot_overhead``: effective fractions follow from the interruption rates and the plan's spot
  model (stateless: 1 − λ·(lost + restart); gang: 1 − √(2CΛ) − RΛ).
* ``memory``: pool nodes ≥ nodes per replica, and nodes per replica × GPUs/node ≥ replica GPUs.
* ``capacity``: nodes ≤ each offer's cap (together over pools) and ≤ the pool cap; spot only
  where allowed.
* ``policy ...``: every rule of the policy the plan was made under (:mod:`policies.check`).
* ``makespan``: run = Σ pool busy (sync, colocated) or max + fill (async).
* ``totals``: compute = Σ pools; total = compute + storage + network; idle = Σ idle; phase
  costs + idle = compute.
* ``deadline``, ``budget``.

With a spec, ``spec_match`` also recomputes every phase's tokens and node throughput with the
demand model and compares them with the plan's.
"""

from __future__ import annotations

import math
from decimal import Decimal

from optimizer.plan.schema import Plan

REL = 1e-6


def _close(a: float, b: float, rel: float = REL, abs_: float = 1e-6) -> bool:
    return abs(a - b) <= max(abs_, rel * max(abs(a), abs(b)))


def _money(s: str) -> float:
    return float(Decimal(s))


def verify_plan(plan: Plan) -> list[str]:
    """Violations as ``rule: detail`` lines; empty when the plan is consistent."""
    v: list[str] = []
    held = plan.makespan_hours
    pools = {p.name: p for p in plan.pools}
    if not plan.pools:
        return ["pool_accounting: the plan has no pools"]
    sm = plan.spot_model
    lost_r = (sm.lost_work_minutes + sm.restart_minutes) / 60.0
    c_h, r_h = sm.checkpoint_minutes / 60.0, sm.restart_minutes / 60.0
    total_cost = 0.0
    idle_cost = 0.0
    for pool in plan.pools:
        allocs = pool.allocations
        stateful = "update" in pool.phases
        if sum(a.nodes for a in allocs) != pool.nodes:
            v.append(f"pool_accounting: pool {pool.name} nodes {pool.nodes} != sum of "
                     "allocations")
        price = sum(a.nodes * a.usd_per_hour for a in allocs)
        if not _close(price, pool.usd_per_hour):
            v.append(f"pool_accounting: pool {pool.name} ${pool.usd_per_hour}/h != "
                     f"{price:.6f} from allocations")
        for a in allocs:
            if (a.gpu, a.gpus_per_node) != (pool.gpu, pool.gpus_per_node):
                v.append(f"pool_accounting: pool {pool.name} mixes shapes ({a.instance_type})")
            if (a.provider, a.region) != (pool.provider, pool.region):
                v.append(f"pool_accounting: {a.instance_type} in {a.provider}/{a.region} is "
                         f"outside pool {pool.name}'s region {pool.provider}/{pool.region}")
            if pool.name != "rollout" and a.zone and plan.zone and a.zone != plan.zone:
                v.append(f"zones: pool {pool.name} has {a.nodes} {a.instance_type} in {a.zone}, "
                         f"outside the trainer's zone {plan.zone}")
            if a.capacity_type not in ("on_demand", "spot", "reserved"):
                v.append(f"capacity: unknown capacity_type {a.capacity_type!r}")
            if a.max_nodes is not None and a.nodes > a.max_nodes:
                v.append(f"capacity: {a.nodes} {a.instance_type} {a.capacity_type} in "
                         f"{a.zone or a.region} exceeds the offer's cap {a.max_nodes}")
            if a.capacity_type == "spot" and not pool.spot_ok:
                v.append(f"capacity: pool {pool.name} uses spot but spot is not allowed there")
            if not _close(a.hours, held):
                v.append(f"hold: {a.instance_type} in pool {pool.name} billed {a.hours} h, "
                         f"the run lasts {held} h")
            if not _close(_money(a.cost_usd), a.nodes * a.usd_per_hour * a.hours, abs_=0.006):
                v.append(f"pool_accounting: {a.instance_type} cost {a.cost_usd} != nodes x "
                         "price x hours")
        if (pool.provider, pool.region) != (plan.provider, plan.region) and \
                (pool.name != "rollout" or not plan.split_regions):
            v.append(f"pool_accounting: pool {pool.name} is in {pool.provider}/{pool.region}, "
                     f"outside the plan's region {plan.provider}/{plan.region}")
        if stateful:
            lam = sum(a.nodes * (a.interruptions_per_hour or 0.0) for a in allocs
                      if a.capacity_type == "spot")
            want = 1.0 - (math.sqrt(2.0 * c_h * lam) + r_h * lam)
            for a in allocs:
                if not _close(a.effective_fraction, want, abs_=1e-8):
                    v.append(f"spot_overhead: pool {pool.name} effective fraction "
                             f"{a.effective_fraction} != {want:.9f} (gang model)")
        else:
            for a in allocs:
                want = 1.0 - (a.interruptions_per_hour or 0.0) * lost_r \
                    if a.capacity_type == "spot" else 1.0
                if not _close(a.effective_fraction, want, abs_=1e-8):
                    v.append(f"spot_overhead: {a.instance_type} effective fraction "
                             f"{a.effective_fraction} != {want:.9f}")
        if stateful and pool.nodes > 1 and \
                pool.gpus_per_node < plan.multi_node_training_min_gpus_per_node:
            v.append(f"capacity: pool {pool.name} trains across {pool.nodes} nodes of "
                     f"{pool.gpus_per_node} GPUs; multi-node training needs "
                     f"{plan.multi_node_training_min_gpus_per_node}+ GPUs per node")
        if pool.nodes < 1:
            v.append(f"pool_accounting: pool {pool.name} has no nodes")
            continue
        if pool.nodes > plan.max_nodes_per_pool:
            v.append(f"capacity: pool {pool.name} has {pool.nodes} nodes, the pool cap is "
                     f"{plan.max_nodes_per_pool}")
        busy = sum(ph.busy_hours for ph in plan.phases if ph.pool == pool.name)
        if not _close(busy, pool.busy_hours, abs_=1e-5):
            v.append(f"hold: pool {pool.name} busy {pool.busy_hours} h != phases' {busy:.6f} h")
        if pool.busy_hours > held * (1 + REL) + 1e-6:
            v.append(f"hold: pool {pool.name} busy {pool.busy_hours} h exceeds the run {held} h")
        if not _close(pool.idle_hours, max(0.0, held - pool.busy_hours), abs_=1e-5):
            v.append(f"hold: pool {pool.name} idle {pool.idle_hours} h != held - busy")
        if not _close(_money(pool.cost_usd), price * held, abs_=0.006):
            v.append(f"pool_accounting: pool {pool.name} cost {pool.cost_usd} != "
                     f"{price * held:.2f}")
        total_cost += price * held
        idle_cost += price * max(0.0, held - pool.busy_hours)
    for ph in plan.phases:
        owner = pools.get(ph.pool)
        if owner is None:
            v.append(f"coverage: phase {ph.name} names unknown pool {ph.pool!r}")
            continue
        if ph.tokens_per_node_hour is None or owner.nodes < 1:
            continue
        done = sum(a.nodes * a.effective_fraction for a in owner.allocations) \
            * ph.tokens_per_node_hour * ph.usable_node_fraction * ph.busy_hours
        if ph.busy_hours < ph.latency_floor_hours * (1 - REL):
            v.append(f"coverage: phase {ph.name} busy {ph.busy_hours:.6g} h is below its "
                     f"latency floor {ph.latency_floor_hours:.6g} h")
        if done < ph.tokens * (1 - 1e-5):
            v.append(f"coverage: phase {ph.name} covers {done:.6g} of {ph.tokens:.6g} tokens")
        npr = ph.nodes_per_replica
        if owner.nodes < npr or npr * owner.gpus_per_node < ph.replica_gpus:
            v.append(f"memory: phase {ph.name} needs {ph.replica_gpus} GPUs per replica; pool "
                     f"{owner.name} has {owner.nodes} x {owner.gpus_per_node}")
        usable = (owner.nodes // npr) * npr / owner.nodes if npr > 1 else 1.0
        if not _close(usable, ph.usable_node_fraction):
            v.append(f"memory: phase {ph.name} usable fraction {ph.usable_node_fraction} != "
                     f"{usable}")
    used: dict[tuple, int] = {}
    caps: dict[tuple, int | None] = {}
    for pool in plan.pools:
        for a in pool.allocations:
            key = (a.provider, a.region, a.zone, a.instance_type, a.capacity_type)
            used[key] = used.get(key, 0) + a.nodes
            caps[key] = a.max_nodes
    for key, n in sorted(used.items()):
        cap = caps[key]
        if cap is not None and n > cap:
            v.append(f"capacity: pools together hold {n} {key[3]} {key[4]} in "
                     f"{key[2] or key[1]}, the offer's cap is {cap}")
    pool_busy = {p.name: p.busy_hours for p in plan.pools}
    if plan.pipeline_mode == "async":
        want = max(pool_busy.values()) + plan.fill_fraction * pool_busy.get("rollout", 0.0)
    else:
        want = sum(pool_busy.values())
    if not _close(want, held, abs_=1e-5):
        v.append(f"makespan: run {held} h != {want:.6f} h from pool busy times "
                 f"({plan.pipeline_mode})")
    if not _close(_money(plan.compute_cost_usd), total_cost, abs_=0.01):
        v.append(f"totals: compute {plan.compute_cost_usd} != {total_cost:.2f}")
    storage = 0.0
    for item in plan.storage:
        want = item.gb_months * item.usd_per_gb_month + \
            item.retrieval_gb * item.retrieval_usd_per_gb
        if not _close(_money(item.cost_usd), want, abs_=0.006):
            v.append(f"storage: {item.data_class} cost {item.cost_usd} != GB-months x price + "
                     f"retrieval = {want:.2f}")
        if item.gb_months * 730.0 < item.gb * item.min_days * 24.0 * (1 - 1e-9) - 1e-9:
            v.append(f"storage: {item.data_class} billed {item.gb_months:.4g} GB-months, below "
                     f"the {item.tier} minimum duration of {item.min_days:g} days")
        storage += _money(item.cost_usd)
    if not _close(_money(plan.storage_cost_usd), storage, abs_=0.006 * (len(plan.storage) + 1)):
        v.append(f"totals: storage {plan.storage_cost_usd} != {storage:.2f} from its items")
    v += _network(plan)
    total = _money(plan.compute_cost_usd) + _money(plan.storage_cost_usd) + \
        _money(plan.network_cost_usd)
    if not _close(_money(plan.total_cost_usd), total, abs_=0.0151):  # four roundings
        v.append(f"totals: total {plan.total_cost_usd} != compute + storage + network "
                 f"{total:.2f}")
    if not _close(_money(plan.idle_cost_usd), idle_cost, abs_=0.01):
        v.append(f"totals: idle {plan.idle_cost_usd} != {idle_cost:.2f}")
    parts = sum(_money(ph.cost_usd) for ph in plan.phases) + _money(plan.idle_cost_usd)
    tol = 0.006 * (len(plan.phases) + 1)
    if not _close(parts, _money(plan.compute_cost_usd), abs_=tol):
        v.append(f"totals: phases + idle = {parts:.2f} != compute {plan.compute_cost_usd}")
    if plan.deadline_hours is not None and held > plan.deadline_hours * (1 + REL):
        v.append(f"deadline: run {held} h exceeds the deadline {plan.deadline_hours} h")
    if plan.budget_usd is not None and _money(plan.total_cost_usd) > _money(plan.budget_usd):
        v.append(f"budget: cost {plan.total_cost_usd} exceeds the budget {plan.budget_usd}")
    v += [f"policy {line}" for line in _policy_violations(plan)]
    return v


def _network(plan: Plan) -> list[str]:
    from optimizer.costs.network import path_between

    v: list[str] = []
    total = 0.0
    sync_nodes: dict[str, int] = {}
    for item in plan.network:
        want_path = path_between((item.src.provider, item.src.region, item.src.zone),
                                 (item.dst.provider, item.dst.region, item.dst.zone))
        if item.path != want_path and not (item.flow == "experience"
                                           and item.path == "same_zone"):
            v.append(f"network: {item.flow} from {item.src.region} to {item.dst.region} is "
                     f"labelled {item.path}, the ends say {want_path}")
        if not _close(_money(item.cost_usd), item.gb * item.usd_per_gb, abs_=0.006):
            v.append(f"network: {item.flow} cost {item.cost_usd} != GB x $/GB = "
                     f"{item.gb * item.usd_per_gb:.2f}")
        if item.flow == "weight_sync":
            n = item.nodes or 0
            sync_nodes[item.path] = sync_nodes.get(item.path, 0) + n
            want_gb = n * plan.steps * plan.weight_sync_gb_per_node_step
            if not _close(item.gb, want_gb, rel=1e-6):
                v.append(f"network: weight_sync to {n} node(s) moves {item.gb:.6g} GB, "
                         f"nodes x steps x W = {want_gb:.6g}")
        total += _money(item.cost_usd)
    rollout = next((p for p in plan.pools if p.name == "rollout"), None)
    if rollout is not None and plan.weight_sync_gb_per_node_step > 0:
        if sum(sync_nodes.values()) != rollout.nodes:
            v.append(f"network: weight sync reaches {sum(sync_nodes.values())} node(s), the "
                     f"rollout pool has {rollout.nodes}")
        if (rollout.provider, rollout.region) == (plan.provider, plan.region) and plan.zone:
            remote = sum(a.nodes for a in rollout.allocations
                         if a.zone and a.zone != plan.zone)
            if sync_nodes.get("cross_zone", 0) != remote:
                v.append(f"network: {sync_nodes.get('cross_zone', 0)} rollout node(s) billed "
                         f"cross-zone, {remote} are outside the trainer's zone {plan.zone}")
    if not _close(_money(plan.network_cost_usd), total, abs_=0.006 * (len(plan.network) + 1)):
        v.append(f"totals: network {plan.network_cost_usd} != {total:.2f} from its items")
    return v


def _policy_violations(plan: Plan) -> list[str]:
    """The plan against the policy it says it was made under."""
    from policies.check import check_plan
    from policies.model import Policy

    try:
        policy = Policy.model_validate(plan.policy)
    except ValueError as exc:
        return [f"policy: the plan's policy block is invalid ({str(exc).splitlines()[0]})"]
    return check_plan(plan, policy)


def verify_against_spec(plan: Plan, spec) -> list[str]:
    """``spec_match``: recompute tokens and node throughput per phase from the spec, under the
    policy the plan records (allowed precisions, high-precision fallback)."""
    from optimizer.core.hardware import gpus
    from optimizer.demand.model import build_demand
    from optimizer.demand.rates import allowed_precisions, phase_rates
    from optimizer.plan.schema import spec_digest
    from policies.model import Policy

    v: list[str] = []
    if spec.name != plan.spec_name:
        v.append(f"spec_match: plan is for {plan.spec_name!r}, the spec is {spec.name!r}")
    if spec_digest(spec.model_dump(mode="json")) != plan.spec_digest:
        v.append("spec_match: the spec changed since the plan was made (digest differs)")
    if spec.sla.deadline_hours != plan.deadline_hours:
        v.append(f"spec_match: deadline {plan.deadline_hours} != spec {spec.sla.deadline_hours}")
    demand = build_demand(spec)
    try:
        policy: Policy | None = Policy.model_validate(plan.policy)
    except ValueError:  # pydantic's ValidationError
        policy = None
        v.append("spec_match: the plan's policy record is not a valid policy; demand "
                 "recomputed under the default policy")
    pools = {p.name: p for p in plan.pools}
    tail = plan.pipeline_mode != "async"
    for ph in plan.phases:
        if ph.tokens_per_node_hour is None:
            continue
        tokens = demand.primary_tokens(ph.name)
        if not _close(tokens, ph.tokens):
            v.append(f"spec_match: phase {ph.name} tokens {ph.tokens:.6g} != {tokens:.6g}")
        if ph.precision not in allowed_precisions(demand, ph.name, policy):
            v.append(f"spec_match: phase {ph.name} precision {ph.precision} is not allowed")
        pool = pools.get(ph.pool)
        if pool is None:
            v.append(f"spec_match: phase {ph.name} names unknown pool {ph.pool!r}")
            continue
        if tokens <= 0:
            v.append(f"spec_match: the spec's job has no {ph.name} phase")
            continue
        gpu = gpus().get(pool.gpu)
        if gpu is None:
            v.append(f"spec_match: unknown GPU {pool.gpu!r}")
            continue
        rates = {r.precision: r for r in phase_rates(demand, ph.name, gpu, pool.gpus_per_node,
                                                     tail, policy)}
        r = rates.get(ph.precision or "")
        if r is None:
            v.append(f"spec_match: phase {ph.name} does not fit {pool.gpu} at {ph.precision}")
            continue
        if r.node_hours <= 0:
            v.append(f"spec_match: phase {ph.name} has no work in the spec")
            continue
        if not _close(r.floor_hours, ph.latency_floor_hours):
            v.append(f"spec_match: phase {ph.name} latency floor {ph.latency_floor_hours:.6g} h "
                     f"!= model {r.floor_hours:.6g} h")
        if not _close(tokens / r.node_hours, ph.tokens_per_node_hour):
            v.append(f"spec_match: phase {ph.name} throughput {ph.tokens_per_node_hour:.6g} "
                     f"tokens/node-hour != model {tokens / r.node_hours:.6g}")
    return v
