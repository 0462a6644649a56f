"""Which offers a pool option's nodes come from: alternative fills and shared caps."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from typing import TYPE_CHECKING

from ptplan.planner.candidates import PoolOption
from ptplan.providers.base import Offer

if TYPE_CHECKING:
    from ptplan.planner.frontier.parts import Group


def fill_variants(option: PoolOption, group: Group, limit: int = 4) -> list[PoolOption]:
    """The same node counts drawn from other offers of the same class (rotating which offer
    is used first), where every offer of the class has the same interruption rate, so the
    busy time is unchanged and only the price and the offers used differ. Used when pools
    compete for capped offers."""
    out: list[PoolOption] = []
    by_class = {"nonspot": group.nonspot_offers, "spot": group.spot_offers}
    counts = {"nonspot": sum(n for o, n in option.fill if o.capacity_type != "spot"),
              "spot": sum(n for o, n in option.fill if o.capacity_type == "spot")}
    for cls, offers in by_class.items():
        k = counts[cls]
        rates = {o.interruptions_per_hour for o in offers}
        if k == 0 or len(offers) < 2 or len(rates) > 1 or \
                (cls == "spot" and (option.remote_nodes or group.all_remote)):
            continue  # rotating remote spot nodes would change the egress
        ordered = sorted(offers, key=lambda o: (o.usd_per_hour, o.key))
        keep = [(o, n) for o, n in option.fill
                if (o.capacity_type == "spot") != (cls == "spot")]
        for r in range(1, min(limit, len(ordered))):
            fill = _rotated_fill(ordered, r, k)
            if fill is None:
                continue
            new_fill = tuple(keep + fill)
            price = sum(o.usd_per_hour * n for o, n in new_fill) + option.disk_usd_per_hour
            out.append(replace(option, fill=new_fill, usd_per_hour=price))
    return out


def _rotated_fill(ordered: list[Offer], r: int, k: int) -> list[tuple[Offer, int]] | None:
    """``k`` nodes taken from ``ordered`` rotated by ``r`` (each offer up to its cap), or
    None when the offers together have fewer than ``k`` nodes."""
    fill: list[tuple[Offer, int]] = []
    left = k
    for o in ordered[r:] + ordered[:r]:
        take = min(left, o.max_nodes or left)
        if take:
            fill.append((o, take))
            left -= take
        if left == 0:
            break
    return None if left else fill


def offer_usage(options: list[PoolOption]) -> dict[str, int]:
    """Nodes taken from each offer (by key) by a set of pool options held at the same time."""
    used: dict[str, int] = defaultdict(int)
    for opt in options:
        for o, n in opt.fill:
            used[o.key] += n
    return dict(used)


def over_capacity(options: list[PoolOption], caps: dict[str, int | None] | None = None
                  ) -> list[str]:
    """Offers whose cap the options exceed together (pools are held at the same time).
    ``caps`` gives the offers' real caps when the options' offers carry per-pool shares."""
    if caps is None:
        caps = {o.key: o.max_nodes for opt in options for o, _ in opt.fill}
    return sorted(k for k, n in offer_usage(options).items()
                  if (cap := caps[k]) is not None and n > cap)
