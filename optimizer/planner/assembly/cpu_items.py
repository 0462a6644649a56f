"""The plan's CPU pools (schema 7): the sandbox and reward pools of
:mod:`ptplan.costs.cpu`, in the region of the plan's site, as plan items."""

from __future__ import annotations

from ptplan.core.kinds import CapacityType
from ptplan.costs.cpu import CpuPoolModel
from ptplan.planfile.schema import CpuPoolItem, usd


def cpu_pool_items(model: CpuPoolModel | None, provider: str, region: str,
                   held: float) -> tuple[list[CpuPoolItem] | None, float]:
    """(items, their cost) at the site's region for a run of ``held`` hours; (None, 0) when the
    spec has no CPU work."""
    if model is None:
        return None, 0.0
    choices = model.choices(provider, region)
    assert choices is not None, "the search never picks a region without CPU offers"
    items = []
    total = 0.0
    for c in choices:
        cost = c.cost(held)
        total += cost
        o = c.offer
        items.append(CpuPoolItem(
            name=c.need.name, basis=c.need.basis, vcpus_needed=c.need.vcpus,
            memory_gib_needed=c.need.memory_gib, vcpu_hours=c.need.vcpu_hours,
            provider=o.provider, region=o.region, instance_type=o.instance_type,
            capacity_type=CapacityType(o.capacity_type), vcpus_per_node=float(o.vcpus or 0.0),
            memory_gib_per_node=float(o.memory_gib or 0.0), nodes=c.nodes,
            node_hours=c.node_hours(held), usd_per_hour=o.usd_per_hour, cost_usd=usd(cost)))
    return items, total
