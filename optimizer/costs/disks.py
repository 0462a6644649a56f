"""Boot disks: every node the plan holds carries one, billed for every hour the node is held.

Per node: ``boot_disk_gb`` (the policy's, default 200 GB) × the provider's block-storage rate
($/GB-month, the catalog's cheapest storage tier with ``access: block`` in the pool's region,
else the provider's ``*`` row) ÷ 730 h. The embedded catalog has EBS gp3 ($0.08, AWS) and
pd-balanced ($0.10, GCP) — the volume types ``ptplan render`` writes (Karpenter
``blockDeviceMappings``, GKE ``disk_type``, SkyPilot ``disk_tier: medium``). Both clouds bill the
provisioned GiB per second, whatever the disk holds, so a node's disk costs a fixed $/h on top of
its instance price: the planner adds it to every node's price (the options it compares), and the
plan shows it per pool (``disk_cost_usd``) and in its total. A catalog without a block tier for
a provider prices that provider's disks at $0, with a warning in the plan.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ptplan.costs.storage import HOURS_PER_MONTH, tiers_for
from ptplan.providers.base import Catalog, StorageTier

BLOCK = "block"
"""The ``access`` of block-storage tiers (volumes attached to a node)."""


def block_tier(catalog: Catalog, provider: str, region: str) -> StorageTier | None:
    """The cheapest block-storage tier of ``provider`` in ``region`` (or its ``*`` rows)."""
    tiers = [t for t in tiers_for(catalog, provider, region) if t.access == BLOCK]
    if not tiers:
        tiers = [t for t in catalog.storage_tiers
                 if t.provider == provider and t.region == "*" and t.access == BLOCK]
    return min(tiers, key=lambda t: (t.usd_per_gb_month, t.tier)) if tiers else None


@dataclass
class DiskModel:
    """Boot-disk cost per node-hour, per (provider, region)."""

    catalog: Catalog
    gb: int
    _rates: dict[tuple[str, str], float] = field(default_factory=dict, repr=False)

    def tier(self, provider: str, region: str) -> StorageTier | None:
        return block_tier(self.catalog, provider, region)

    def per_node_hour(self, provider: str, region: str) -> float:
        """USD per node-hour of one node's boot disk (0 without a block tier)."""
        key = (provider, region)
        if key not in self._rates:
            t = self.tier(provider, region)
            self._rates[key] = (self.gb * t.usd_per_gb_month / HOURS_PER_MONTH
                                if t is not None else 0.0)
        return self._rates[key]


def disk_usd_per_hour(nodes: int, gb: int, usd_per_gb_month: float) -> float:
    """$/h of ``nodes`` boot disks of ``gb`` each (the verifier's formula)."""
    return nodes * gb * usd_per_gb_month / HOURS_PER_MONTH
