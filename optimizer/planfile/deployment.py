"""What a plan's deployment is called and where it sits: the zone region-level allocations are
pinned to, the project's slug and one *group* per (pool, capacity type, zone, instance type)
cell with its names. Render builds every file around these (:mod:`ptplan.rendering.context`);
``guard --act`` stops the objects they name (:mod:`ptplan.spend.act`) without rendering.

Group names: ``<pool>-<capacity>``, the zone or instance type appended only where one capacity
type of the pool spans several, as a DNS label of at most 30 characters; the full name
(Karpenter NodePool and EC2NodeClass, GKE node pool, node label ``ptplan.io/group``) puts the
plan's prefix before it, ``<slug>-<digest>-<group>`` in at most 40 characters, the slug cut to
fit (:mod:`ptplan.planfile.identity`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ptplan.planfile.identity import GROUP_NAME_CHARS, plan_digest, project_slug
from ptplan.planfile.names import dns_name, prefixed
from ptplan.planfile.schema import Plan
from ptplan.planfile.tags import CAPACITY_LABEL

__all__ = ["CAPACITY_ORDER", "GroupCell", "group_cells", "project_slug", "site_zone"]

CAPACITY_ORDER = {"reserved": 0, "block": 0, "on_demand": 1, "flex_start": 1, "spot": 2}
"""Kueue flavor preference: capacity already paid for first, then on-demand, then spot."""


def site_zone(plan: Plan) -> tuple[str, list[str]]:
    """The zone region-level allocations are pinned to, and notes."""
    if plan.zone:
        return plan.zone, []
    zoned = sorted({a.zone for p in plan.pools for a in p.allocations if a.zone and a.nodes})
    if zoned:
        return zoned[0], []
    types = {(p.provider, p.region, a.instance_type) for p in plan.pools for a in p.allocations}
    try:
        from ptplan.providers.embedded import embedded_catalog

        offers = embedded_catalog().offers
    except Exception:  # pragma: no cover - the embedded catalog always loads
        offers = ()
    common: set[str] | None = None
    for key in types:
        zones = {o.zone for o in offers if o.zone and (o.provider, o.region, o.instance_type)
                 == key}
        common = zones if common is None else common & zones
    if common:
        zone = sorted(common)[0]
        return zone, [f"zone: the plan has no zoned node; every pool is pinned to {zone}, a "
                      "zone of the embedded catalog that offers all its instance types "
                      "(same-zone traffic, as priced)"]
    return "", ["zone: the plan has no zone and no catalog zone offers all its instance "
                "types; pools are region-level (cross-zone traffic is not priced)"]


@dataclass(frozen=True)
class GroupCell:
    """One group of a plan: its pool's nodes of one capacity type, zone and instance type."""

    pool: Any
    capacity_type: str
    zone: str
    instance_type: str
    allocations: list[Any]
    label: str
    """The capacity type as the ``ptplan-capacity-type`` value (:data:`CAPACITY_LABEL`)."""
    name: str
    full_name: str


def _group_name(pool: str, label: str, zone: str, it: str, split_zone: bool,
                split_type: bool) -> str:
    parts = [pool, label] + ([zone] if split_zone and zone else []) + \
        ([it] if split_type else [])
    return dns_name("-".join(parts), 30)


def group_cells(plan: Plan, slug: str, site: str, digest: str | None = None
                ) -> list[GroupCell]:
    """The plan's groups in deployment order (pool by pool, capacity paid for first); the
    allocations without a zone sit in ``site`` (:func:`site_zone`); ``digest``: the plan's
    (:func:`ptplan.planfile.identity.plan_digest`, computed when not given)."""
    digest = digest or plan_digest(plan)
    out = []
    for pool in plan.pools:
        cells: dict[tuple[str, str, str], list[Any]] = {}
        for a in pool.allocations:
            if a.nodes > 0:
                cells.setdefault((a.capacity_type, a.zone or site, a.instance_type), []).append(a)
        for ct, zone, it in sorted(cells, key=lambda c: (CAPACITY_ORDER.get(c[0], 9), c)):
            label = CAPACITY_LABEL.get(ct, ct)
            same_ct = [c for c in cells if c[0] == ct]
            name = _group_name(pool.name, label, zone, it,
                               len({c[1] for c in same_ct}) > 1, len({c[2] for c in same_ct}) > 1)
            out.append(GroupCell(pool, ct, zone, it, cells[(ct, zone, it)], label, name,
                                 prefixed(slug, digest, name, GROUP_NAME_CHARS)))
    return out
