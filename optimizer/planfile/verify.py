"""Independent re-check of a plan, from the plan alone (and optionally its spec).

Nothing here calls the optimiser or reads a catalog. From the plan's own figures it recomputes:

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
* ``policy ...``: every rule of the policy the plan was made under (:mod:`ptplan.policies.check`).
* ``makespan``: run = Σ pool busy (sync, colocated) or max + fill (async).
* ``disks`` (schema 4): each pool's boot disks cost nodes × GB × $/GB-month ÷ 730 per held
  hour; the plan's disk cost is the pools' sum.
* ``other_costs`` (schema 6): each of the spec's other costs is quantity × $/unit, a per-hour
  line billed for the run's hours; their sum is ``other_cost_usd``.
* ``cpu_pools`` (schema 7): each CPU pool in the plan's region, with the nodes its vCPUs and
  memory need, node-hours by its basis (held for the run, or its work), cost = node-hours × $/h,
  spot only where the policy allows; their sum is ``cpu_cost_usd`` (:mod:`rules_cpu`).
* ``totals``: compute = Σ pools; total = compute + disks + storage + network (+ other costs
  + CPU pools); idle = Σ idle; phase costs + idle = compute.
* ``deadline``, ``budget``.
* ``allocations``, ``status``, ``calibration`` and further branches of the families above:
  what the plan records of itself (:mod:`ptplan.planfile.rules_record`: phase allocations are
  their pool's, held hours, idle cost, gang overhead, recorded rates, stall phases, fill,
  status, calibrated flags, flows, and spot_ok, split_regions and budget thresholds against the
  policy record).
* ``uncertainty`` (schema 8): the 80 % interval recomputed from the plan's makespan, its
  time-billed and fixed costs, its calibrated phases' GPU-hours and run rates, and the stored
  fit (:mod:`ptplan.planfile.rules_uncertainty`).
* ``framework.*`` (schema 9): every pool, role and precision against the capability table of
  the release the plan was made for (:mod:`ptplan.planfile.rules_framework`).

One function per rule family, as the MILP has one ``add_*`` per constraint family:
:mod:`ptplan.planfile.rules_pools` (pool accounting, zones, hold, spot overheads, capacity),
:mod:`ptplan.planfile.rules_phases` (coverage, latency floors, memory),
:mod:`ptplan.planfile.rules_costs` (makespan, disks, storage, network, other costs, totals,
deadline and budget).
Violations are listed family by family, in the order of :data:`RULES`.

With a spec, ``spec_match`` also recomputes every phase's tokens and node throughput with the
demand model and compares them with the plan's, and what the plan records of its spec
(:mod:`ptplan.planfile.rules_spec`). ``ptplan check`` also compares a plan made on the embedded
catalog with that catalog (``catalog_match``, :mod:`ptplan.planfile.rules_catalog`); the
schema's ``x-check`` says which fields each of these re-derives.
"""

from __future__ import annotations

from collections.abc import Callable

from ptplan.planfile.rules_base import close as _close
from ptplan.planfile.rules_blocks import check_bookings
from ptplan.planfile.rules_costs import (
    check_deadline_budget,
    check_disks,
    check_makespan,
    check_network,
    check_other_costs,
    check_storage,
    check_totals,
)
from ptplan.planfile.rules_cpu import check_cpu_pools
from ptplan.planfile.rules_framework import check_framework
from ptplan.planfile.rules_phases import check_coverage, check_latency_floors, check_memory_fit
from ptplan.planfile.rules_pools import (
    check_capacity,
    check_hold,
    check_pool_accounting,
    check_spot_overheads,
    check_zones,
)
from ptplan.planfile.rules_record import (
    check_allocations,
    check_record_phases,
    check_record_plan,
    check_record_policy,
    check_record_pools,
)
from ptplan.planfile.rules_uncertainty import check_uncertainty
from ptplan.planfile.schema import Plan


def check_policy(plan: Plan) -> list[str]:
    """Every rule of the policy the plan was made under (:mod:`ptplan.policies.check`)."""
    return [f"policy {line}" for line in _policy_violations(plan)]


RULES: tuple[Callable[[Plan], list[str]], ...] = (
    check_pool_accounting, check_zones, check_hold, check_coverage, check_latency_floors,
    check_spot_overheads, check_memory_fit, check_capacity, check_makespan, check_disks,
    check_storage, check_network, check_other_costs, check_cpu_pools, check_totals,
    check_deadline_budget, check_policy, check_allocations,
    check_record_pools, check_record_phases, check_record_plan, check_record_policy,
    check_bookings, check_uncertainty, check_framework,
)
"""The rule families, in the order :func:`verify_plan` runs them."""


def verify_plan(plan: Plan) -> list[str]:
    """Violations as ``rule: detail`` lines; empty when the plan is consistent."""
    if not plan.pools:
        return ["pool_accounting: the plan has no pools"]
    return [line for rule in RULES for line in rule(plan)]


def _policy_violations(plan: Plan) -> list[str]:
    """The plan against the policy it says it was made under."""
    from ptplan.policies.check import check_plan
    from ptplan.policies.model import Policy

    try:
        policy = Policy.model_validate(plan.policy)
    except ValueError as exc:
        return [f"policy: the plan's policy block is invalid ({str(exc).splitlines()[0]})"]
    return check_plan(plan, policy)


def verify_against_spec(plan: Plan, spec) -> list[str]:
    """``spec_match``: recompute tokens, busy hours, throughput, floor and parallel layout per
    phase from the spec, at the plan's own pool sizes (generation drains, so the model is
    evaluated on the effective nodes each phase had), under the policy the plan records."""
    from ptplan.core.hardware import gpus
    from ptplan.demand.model import build_demand
    from ptplan.demand.rates import allowed_precisions, phase_rates
    from ptplan.planfile.digest import digest_matches
    from ptplan.planfile.schema import ParallelLayout
    from ptplan.policies.model import Policy

    v: list[str] = []
    if spec.name != plan.spec_name:
        v.append(f"spec_match: plan is for {plan.spec_name!r}, the spec is {spec.name!r}")
    if not digest_matches(spec.model_dump(mode="json"), plan.spec_digest):
        v.append("spec_match: the spec changed since the plan was made (digest differs)")
    deadline = spec.sla.deadline_hours  # the plan holds it to 12 significant digits
    if (deadline is None) != (plan.deadline_hours is None) or (
            deadline is not None and plan.deadline_hours is not None
            and not _close(deadline, plan.deadline_hours, rel=1e-9, abs_=0.0)):
        v.append(f"spec_match: deadline {plan.deadline_hours} != spec {spec.sla.deadline_hours}")
    demand = build_demand(spec)
    try:
        policy: Policy | None = Policy.model_validate(plan.policy)
    except ValueError:  # pydantic's ValidationError
        policy = None
        v.append("spec_match: the plan's policy record is not a valid policy; demand "
                 "recomputed under the default policy")
    from ptplan.planfile.rules_spec import check_spec_record

    v += check_spec_record(plan, spec, demand, policy)
    pools = {p.name: p for p in plan.pools}
    trainer_pools = {ph.pool for ph in plan.phases if ph.name == "update"}
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
        rates = {r.precision: r for r in phase_rates(
            demand, ph.name, gpu, pool.gpus_per_node, tail, policy,
            colocated=plan.pipeline_mode == "colocated",
            with_trainer=ph.pool in trainer_pools)}
        r = rates.get(ph.precision or "")
        if r is None:
            v.append(f"spec_match: phase {ph.name} does not fit {pool.gpu} at {ph.precision}")
            continue
        if r.node_hours <= 0:
            v.append(f"spec_match: phase {ph.name} has no work in the spec")
            continue
        if r.replica_gpus != ph.replica_gpus:
            v.append(f"spec_match: phase {ph.name} replica of {ph.replica_gpus} GPUs != model "
                     f"{r.replica_gpus}")
        if not _close(r.floor_hours, ph.latency_floor_hours):
            v.append(f"spec_match: phase {ph.name} latency floor {ph.latency_floor_hours:.6g} h "
                     f"!= model {r.floor_hours:.6g} h")
        effective = sum(a.nodes * a.effective_fraction for a in pool.allocations) \
            * ph.usable_node_fraction
        if effective <= 0:
            v.append(f"spec_match: phase {ph.name} has no effective nodes")
            continue
        busy = r.busy(effective)
        if not _close(busy, ph.busy_hours):
            v.append(f"spec_match: phase {ph.name} busy {ph.busy_hours:.6g} h != model "
                     f"{busy:.6g} h on {effective:.6g} effective nodes")
        rate = tokens / (ph.busy_hours * effective) if ph.busy_hours > 0 else 0.0
        if not _close(rate, ph.tokens_per_node_hour):
            v.append(f"spec_match: phase {ph.name} throughput {ph.tokens_per_node_hour:.6g} "
                     f"tokens/node-hour != {rate:.6g} (tokens / busy / effective nodes)")
        layout = r.layout_for(effective)
        recorded = ph.parallel_layout.model_dump() if ph.parallel_layout is not None else None
        if plan.schema_version >= 3 and layout is not None \
                and recorded != ParallelLayout.model_validate(layout).model_dump():
            v.append(f"spec_match: phase {ph.name} layout {recorded} != model {layout}")
    return v
