"""The plan's storage and network items: what the chosen pools store and send, and its cost.

Storage is that of the trainer's region at the plan's run time; network items follow
:mod:`ptplan.costs.network` (weight sync into the rollout nodes, experience data back,
dataset staging and checkpoint copies).
"""

from __future__ import annotations

from ptplan.costs.network import NetworkModel, path_between
from ptplan.planfile.schema import Flow, NetworkItem, NetworkPath, Place, StorageItem, usd
from ptplan.planner.candidates import PoolOption
from ptplan.planner.search.engine import LayoutRun

Site = tuple[str, str, str]


def plan_site(chosen: dict[str, PoolOption]) -> Site:
    """The trainer's (provider, region, zone); the zone is left empty when no pool holds a
    zoned (spot) node, since region-level nodes can then sit in any one zone."""
    site = next(iter(chosen.values())).site
    zoned = any(o.zone for opt in chosen.values() for o, _ in opt.fill)
    return site if zoned else (site[0], site[1], "")


def network_items(winner: LayoutRun, chosen: dict[str, PoolOption]
                  ) -> tuple[list[NetworkItem], float]:
    """Egress of the chosen plan (see :mod:`ptplan.costs.network`) and its unrounded total,
    which equals the options' egress plus the site's fixed flows (the search's figure)."""
    net = winner.cands.network
    if net is None:
        return [], 0.0
    site = plan_site(chosen)
    items: list[NetworkItem] = []
    rollout = chosen.get("rollout") if any(
        p.remote_ok for p in winner.cands.layout.pools) else None
    place = None
    if rollout is not None and net.weight_gb > 0:
        cross = (rollout.provider, rollout.region) != site[:2]
        if cross:
            place = (rollout.provider, rollout.region, "")
        items += _weight_sync_items(net, site, rollout, place)
        items += _experience_items(net, site, rollout, place)
    items += _fixed_flow_items(net, site, place)
    total = sum(o.egress_usd for o in chosen.values()) + net.fixed_cost(site)
    return items, total


def _weight_sync_items(net: NetworkModel, site: Site, rollout: PoolOption,
                       place: Site | None) -> list[NetworkItem]:
    """The weight sync into the rollout nodes, one item per path (and remote zone);
    ``place`` is the rollout pool's region when it is not the trainer's."""
    if place is not None:
        path = path_between(site, place)
        groups: list[tuple[str, int, float, str]] = [
            (path, rollout.nodes, net.rate(site[0], path), "")]
    else:
        by_zone: dict[str, int] = {}
        for o, n in rollout.fill:
            if o.zone and o.zone != site[2]:
                by_zone[o.zone] = by_zone.get(o.zone, 0) + n
        cross_zone = net.rate(site[0], "cross_zone")
        groups = [("same_zone", rollout.nodes - rollout.remote_nodes, 0.0, site[2])]
        groups += [("cross_zone", n, cross_zone, z) for z, n in sorted(by_zone.items())]
    trainer = Place(provider=site[0], region=site[1], zone=site[2])
    items = []
    for path, n, rate, zone in groups:
        if n <= 0:
            continue
        gb = n * net.steps * net.weight_gb
        items.append(NetworkItem(
            flow=Flow.weight_sync, src=trainer,
            dst=Place(provider=rollout.provider, region=rollout.region, zone=zone),
            path=NetworkPath(path), nodes=n, gb=gb, usd_per_gb=rate, cost_usd=usd(gb * rate),
            note=f"{net.steps} steps x {net.weight_gb:g} GB (bf16 weights) into each of "
                 f"{n} node(s)"))
    return items


def _experience_items(net: NetworkModel, site: Site, rollout: PoolOption,
                      place: Site | None) -> list[NetworkItem]:
    """The experience data from the rollout pool to the trainer: priced when the pool is in
    another region, listed (not priced) within the region."""
    exp_gb = net.steps * net.experience_gb_per_step
    if exp_gb <= 0:
        return []
    note = "token ids and log-probabilities of every sampled sequence"
    if place is not None:
        exp_path = path_between(site, place)
        exp_rate = net.rate(site[0], exp_path)
    else:
        exp_path, exp_rate = "same_zone", 0.0
        if rollout.remote_nodes:
            share = exp_gb * rollout.remote_nodes / rollout.nodes
            note += (f"; the {rollout.remote_nodes} cross-zone node(s)' share (about "
                     f"{share:.1f} GB) is not priced")
    return [NetworkItem(
        flow=Flow.experience, src=Place(provider=rollout.provider, region=rollout.region),
        dst=Place(provider=site[0], region=site[1], zone=site[2]), path=NetworkPath(exp_path),
        gb=exp_gb, usd_per_gb=exp_rate, cost_usd=usd(exp_gb * exp_rate), note=note)]


def _fixed_flow_items(net: NetworkModel, site: Site, place: Site | None) -> list[NetworkItem]:
    """Dataset staging and checkpoint copies."""
    return [NetworkItem(
        flow=Flow(f.name), src=Place(provider=f.src[0], region=f.src[1], zone=f.src[2]),
        dst=Place(provider=f.dst[0], region=f.dst[1], zone=f.dst[2]), path=NetworkPath(f.path),
        gb=f.gb, usd_per_gb=f.usd_per_gb, cost_usd=usd(f.cost), note=f.note)
        for f in net.fixed_flows(site, place)]


def storage_items(winner: LayoutRun, chosen: dict[str, PoolOption], held: float
                  ) -> tuple[list[StorageItem], float]:
    """The storage of the trainer's region at the plan's run time, and its unrounded total."""
    model = winner.cands.storage
    if model is None:
        return [], 0.0
    site = plan_site(chosen)
    first = next(o for o in chosen.values() if (o.provider, o.region) == site[:2])
    out = []
    total = 0.0
    choice = model.choose(first.provider, first.region, held)  # type: ignore[attr-defined]
    for c, tier, gb_months, cost in choice:
        total += cost
        out.append(StorageItem(
            data_class=c.name, provider=first.provider, region=first.region, tier=tier.tier,
            access=c.access, gb=c.gb, gb_months=gb_months,
            usd_per_gb_month=tier.usd_per_gb_month, min_days=tier.min_days,
            retrieval_gb=c.retrieval_gb, retrieval_usd_per_gb=tier.retrieval_usd_per_gb,
            cost_usd=usd(cost)))
    return out, total
