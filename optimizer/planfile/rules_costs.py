"""Verifier rules on the run and its cost: ``makespan``, ``disks``, ``storage``, ``network``,
``other_costs``, ``totals``, ``deadline`` and ``budget`` (see :mod:`ptplan.planfile.verify`)."""

from __future__ import annotations

from ptplan.costs.disks import disk_usd_per_hour
from ptplan.costs.network import path_between
from ptplan.planfile.rules_base import REL, close, money
from ptplan.planfile.rules_blocks import longest_wait, rounding_usd
from ptplan.planfile.rules_pools import pool_price
from ptplan.planfile.schema import Plan


def check_makespan(plan: Plan) -> list[str]:
    """Run = Σ pool busy (sync, colocated) or max + fill (async)."""
    held = plan.makespan_hours
    pool_busy = {p.name: p.busy_hours for p in plan.pools}
    if plan.pipeline_mode == "async":
        want = max(pool_busy.values()) + plan.fill_fraction * pool_busy.get("rollout", 0.0)
    else:
        want = sum(pool_busy.values())
    if not close(want, held, abs_=1e-5):
        return [f"makespan: run {held} h != {want:.6f} h from pool busy times "
                f"({plan.pipeline_mode})"]
    return []


def check_disks(plan: Plan) -> list[str]:
    """Schema 4: every pool's boot disks cost nodes × GB × $/GB-month ÷ 730 per hour, for its
    held hours; every pool has a disk size (the plan's policy says which,
    :mod:`ptplan.policies.check`);
    the plan's disk cost is the sum of the pools'."""
    if plan.schema_version < 4:
        return []
    v: list[str] = []
    total = 0.0
    for pool in plan.pools:
        if pool.boot_disk_gb <= 0:
            v.append(f"disks: pool {pool.name} has no boot disk size")
        rate = disk_usd_per_hour(pool.nodes, pool.boot_disk_gb, pool.disk_usd_per_gb_month)
        if not close(pool.disk_usd_per_hour, rate, abs_=1e-9):
            v.append(f"disks: pool {pool.name} disks ${pool.disk_usd_per_hour:.6f}/h != nodes x "
                     f"GB x $/GB-month / 730 = {rate:.6f}")
        want = pool.disk_usd_per_hour * plan.makespan_hours
        if not close(money(pool.disk_cost_usd), want, abs_=0.006):
            v.append(f"disks: pool {pool.name} disks {pool.disk_cost_usd} != $/h x held hours "
                     f"= {want:.2f}")
        if pool.disk_usd_per_gb_month > 0 and not pool.disk_tier:
            v.append(f"disks: pool {pool.name} prices its disks without naming a tier")
        total += money(pool.disk_cost_usd)
    if not close(money(plan.disk_cost_usd), total, abs_=0.006 * (len(plan.pools) + 1)):
        v.append(f"totals: disks {plan.disk_cost_usd} != {total:.2f} from the pools")
    return v


def check_storage(plan: Plan) -> list[str]:
    """Each item costs GB-months × price + retrieval, billed for at least its tier's minimum
    duration."""
    v: list[str] = []
    for item in plan.storage:
        want = item.gb_months * item.usd_per_gb_month + \
            item.retrieval_gb * item.retrieval_usd_per_gb
        if not close(money(item.cost_usd), want, abs_=0.006):
            v.append(f"storage: {item.data_class} cost {item.cost_usd} != GB-months x price + "
                     f"retrieval = {want:.2f}")
        if item.gb_months * 730.0 < item.gb * item.min_days * 24.0 * (1 - 1e-9) - 1e-9:
            v.append(f"storage: {item.data_class} billed {item.gb_months:.4g} GB-months, below "
                     f"the {item.tier} minimum duration of {item.min_days:g} days")
    return v


def check_network(plan: Plan) -> list[str]:
    """Each item costs GB × $/GB on the path its ends imply; weight sync covers every rollout
    node once per step and its cross-zone nodes are the rollout's zoned nodes outside the
    trainer's zone; the total is the sum of the items."""
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
        if not close(money(item.cost_usd), item.gb * item.usd_per_gb, abs_=0.006):
            v.append(f"network: {item.flow} cost {item.cost_usd} != GB x $/GB = "
                     f"{item.gb * item.usd_per_gb:.2f}")
        if item.flow == "weight_sync":
            n = item.nodes or 0
            sync_nodes[item.path] = sync_nodes.get(item.path, 0) + n
            want_gb = n * plan.steps * plan.weight_sync_gb_per_node_step
            if not close(item.gb, want_gb, rel=1e-6):
                v.append(f"network: weight_sync to {n} node(s) moves {item.gb:.6g} GB, "
                         f"nodes x steps x W = {want_gb:.6g}")
        total += money(item.cost_usd)
    v += _weight_sync_reach(plan, sync_nodes)
    if not close(money(plan.network_cost_usd), total, abs_=0.006 * (len(plan.network) + 1)):
        v.append(f"totals: network {plan.network_cost_usd} != {total:.2f} from its items")
    return v


def _weight_sync_reach(plan: Plan, sync_nodes: dict[str, int]) -> list[str]:
    """Weight sync reaches every rollout node, cross-zone exactly those outside the trainer's
    zone (``sync_nodes``: nodes per path of the weight-sync items)."""
    rollout = next((p for p in plan.pools if p.name == "rollout"), None)
    if rollout is None or plan.weight_sync_gb_per_node_step <= 0:
        return []
    v: list[str] = []
    if sum(sync_nodes.values()) != rollout.nodes:
        v.append(f"network: weight sync reaches {sum(sync_nodes.values())} node(s), the "
                 f"rollout pool has {rollout.nodes}")
    if (rollout.provider, rollout.region) == (plan.provider, plan.region) and plan.zone:
        remote = sum(a.nodes for a in rollout.allocations
                     if a.zone and a.zone != plan.zone)
        if sync_nodes.get("cross_zone", 0) != remote:
            v.append(f"network: {sync_nodes.get('cross_zone', 0)} rollout node(s) billed "
                     f"cross-zone, {remote} are outside the trainer's zone {plan.zone}")
    return v


def check_totals(plan: Plan) -> list[str]:
    """Compute = Σ pools; storage = Σ its items; total = compute + disks + storage + network;
    idle = Σ idle; phase costs + idle = compute."""
    v: list[str] = []
    held = plan.makespan_hours
    compute = 0.0
    idle = 0.0
    for pool in plan.pools:
        if pool.nodes < 1:
            continue
        price = pool_price(pool)
        compute += price * held + rounding_usd(pool)  # blocks: whole units past the run
        idle += price * max(0.0, held - pool.busy_hours) + rounding_usd(pool)
    # compute takes the rounding of the parts (they add up to the printed total): 2 cents
    if not close(money(plan.compute_cost_usd), compute, abs_=0.0201):
        v.append(f"totals: compute {plan.compute_cost_usd} != {compute:.2f}")
    storage = 0.0
    for item in plan.storage:
        storage += money(item.cost_usd)
    if not close(money(plan.storage_cost_usd), storage, abs_=0.006 * (len(plan.storage) + 1)):
        v.append(f"totals: storage {plan.storage_cost_usd} != {storage:.2f} from its items")
    total = money(plan.compute_cost_usd) + money(plan.disk_cost_usd) + \
        money(plan.storage_cost_usd) + money(plan.network_cost_usd)
    if plan.other_cost_usd is not None:
        total += money(plan.other_cost_usd)
    if plan.cpu_cost_usd is not None:
        total += money(plan.cpu_cost_usd)
    # the parts add up to the cent (compute is the balance); plans before schema 4 were
    # written with four separate roundings
    if not close(money(plan.total_cost_usd), total,
                 abs_=0.0051 if plan.schema_version >= 4 else 0.0151):
        v.append(f"totals: total {plan.total_cost_usd} != compute + disks + storage + network "
                 f"{total:.2f}")
    if not close(money(plan.idle_cost_usd), idle, abs_=0.01):
        v.append(f"totals: idle {plan.idle_cost_usd} != {idle:.2f}")
    parts = sum(money(ph.cost_usd) for ph in plan.phases) + money(plan.idle_cost_usd)
    # each phase and the idle are rounded to the cent on their own, and compute is the balance
    # of the total less disks, storage, network, other and CPU costs, each rounded too
    tol = 0.006 * (len(plan.phases) + 1) + 0.0051 * 5
    if not close(parts, money(plan.compute_cost_usd), abs_=tol):
        v.append(f"totals: phases + idle = {parts:.2f} != compute {plan.compute_cost_usd}")
    return v


def check_other_costs(plan: Plan) -> list[str]:
    """Schema 6: each of the spec's other costs is quantity × $/unit, a per-hour line is billed
    for the run's hours, a fixed line once; their sum is ``other_cost_usd``."""
    if plan.other_costs is None or plan.other_cost_usd is None:
        return []
    v: list[str] = []
    total = 0.0
    for item in plan.other_costs:
        if item.basis == "per_hour" and not close(item.quantity, plan.makespan_hours, abs_=1e-6):
            v.append(f"other_costs: {item.name} is billed for {item.quantity:g} h, the run "
                     f"lasts {plan.makespan_hours:g} h")
        if item.basis == "fixed" and item.quantity != 1.0:
            v.append(f"other_costs: {item.name} is fixed but counted {item.quantity:g} times")
        want = item.quantity * item.usd_per_unit
        if not close(money(item.cost_usd), want, abs_=0.006):
            v.append(f"other_costs: {item.name} {item.cost_usd} != quantity x $/unit = "
                     f"{want:.2f}")
        total += money(item.cost_usd)
    if not close(money(plan.other_cost_usd), total, abs_=0.006 * (len(plan.other_costs) + 1)):
        v.append(f"totals: other costs {plan.other_cost_usd} != {total:.2f} from their lines")
    return v


def check_deadline_budget(plan: Plan) -> list[str]:
    v: list[str] = []
    held = plan.makespan_hours
    if plan.deadline_hours is not None and held > plan.deadline_hours * (1 + REL):
        v.append(f"deadline: run {held} h exceeds the deadline {plan.deadline_hours} h")
    wait = longest_wait(plan)  # flex-start queues before the run (schema 6)
    if wait and plan.deadline_hours is not None and \
            held + wait > plan.deadline_hours * (1 + REL):
        v.append(f"deadline: run {held} h + flex-start wait {wait} h exceeds the deadline "
                 f"{plan.deadline_hours} h")
    if plan.budget_usd is not None and money(plan.total_cost_usd) > money(plan.budget_usd):
        v.append(f"budget: cost {plan.total_cost_usd} exceeds the budget {plan.budget_usd}")
    return v
