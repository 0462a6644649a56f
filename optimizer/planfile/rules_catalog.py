"""``catalog_match``: the prices a plan records against the catalog it names, when ``check``
has that catalog (the embedded snapshot ships with ptplan: a plan made on it, at the same
``as_of``, with no what-if price edits in its notes, is compared with it).

Each allocation's offer exists with the recorded GPU shape, $/node-hour and interruption
rate; each storage item's tier has the recorded $/GB-month, minimum duration and retrieval fee;
each priced network item's rate is the catalog's egress rate for its provider and path (0 where
the catalog has none). Capacity caps are not compared: the planner may tighten them (the
embedded snapshot assumes 8 spot nodes per zone, stated in the plan's catalog notes).
"""

from __future__ import annotations

from ptplan.costs.network import egress_rate, egress_rows
from ptplan.costs.storage import tiers_for
from ptplan.planfile.rules_base import close
from ptplan.planfile.rules_cpu import check_cpu_against_catalog
from ptplan.planfile.schema import Plan
from ptplan.providers.base import Catalog


def packaged_catalog(plan: Plan) -> Catalog | None:
    """The catalog the plan was made on, if it is the embedded snapshot unchanged."""
    info = plan.catalog
    if info.get("name") != "embedded":
        return None
    from ptplan.providers.embedded import embedded_catalog

    catalog = embedded_catalog()
    # compared as read: an edited ``notes`` (a number, a string) is simply another catalog
    if (info.get("as_of"), info.get("offers"), info.get("notes", [])) != \
            (catalog.as_of, len(catalog.offers), list(catalog.notes)):
        return None  # another snapshot, or what-if prices (their rules are in the notes)
    return catalog


def check_against_catalog(plan: Plan, catalog: Catalog) -> list[str]:
    v: list[str] = []
    offers = {(o.provider, o.region, o.zone, o.instance_type, o.capacity_type): o
              for o in catalog.offers + catalog.block_offers}
    for pool in plan.pools:
        for a in pool.allocations:
            o = offers.get((a.provider, a.region, a.zone, a.instance_type, a.capacity_type))
            if o is None:
                v.append(f"catalog_match: {a.instance_type} {a.capacity_type} in "
                         f"{a.zone or a.region} is not in catalog {catalog.name}")
                continue
            if (o.gpu, o.gpus_per_node) != (a.gpu, a.gpus_per_node) \
                    or not close(o.usd_per_hour, a.usd_per_hour) \
                    or not close(o.interruptions_per_hour or 0.0,
                                 a.interruptions_per_hour or 0.0) \
                    or (o.interruptions_per_hour is None) != (a.interruptions_per_hour is None):
                v.append(f"catalog_match: {a.instance_type} {a.capacity_type} in "
                         f"{a.zone or a.region}: {a.gpus_per_node} x {a.gpu} at "
                         f"${a.usd_per_hour}/h, {a.interruptions_per_hour} interruptions/h; "
                         f"the catalog says {o.gpus_per_node} x {o.gpu} at "
                         f"${o.usd_per_hour}/h, {o.interruptions_per_hour}")
    for item in plan.storage:
        tier = next((t for t in tiers_for(catalog, item.provider, item.region)
                     if t.tier == item.tier), None)
        if tier is None:
            v.append(f"catalog_match: storage tier {item.tier} of {item.provider} is not in "
                     f"catalog {catalog.name}")
        elif not (close(tier.usd_per_gb_month, item.usd_per_gb_month, abs_=1e-12)
                  and close(tier.min_days, item.min_days)
                  and close(tier.retrieval_usd_per_gb, item.retrieval_usd_per_gb, abs_=1e-12)):
            v.append(f"catalog_match: storage {item.data_class} on {item.tier}: "
                     f"${item.usd_per_gb_month}/GB-month, {item.min_days:g} days minimum, "
                     f"${item.retrieval_usd_per_gb}/GB retrieval; the catalog says "
                     f"${tier.usd_per_gb_month}, {tier.min_days:g}, "
                     f"${tier.retrieval_usd_per_gb}")
    rows = egress_rows(catalog)
    for net in plan.network:
        row = egress_rate(rows, net.src.provider, net.path)
        want = row.usd_per_gb if row is not None else 0.0
        if not close(net.usd_per_gb, want, abs_=1e-12):
            v.append(f"catalog_match: {net.flow} on {net.path} from {net.src.provider} at "
                     f"${net.usd_per_gb}/GB; the catalog says ${want}")
    return v + check_cpu_against_catalog(plan, catalog)
