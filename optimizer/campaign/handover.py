"""What one stage hands the next, and what that costs.

A ``generate`` stage hands its generated data: prompts × samples × (prompt + response) tokens
× 4 B (int32 token ids, :data:`ptplan.costs.storage.BYTES_PER_TOKEN`). A trained stage hands
its final weights without optimizer state (:func:`ptplan.costs.storage.weights_gb`: bf16
weights, or the LoRA adapters' share). The output is stored at the producer's region on its
cheapest online (``ms``) tier, held until the campaign's deadline (an upper bound on how long
the next stages need it; the tier's minimum duration applies), and copied once to each
consumer's region: egress on the path between the two regions
(:func:`ptplan.costs.network.path_between`, the catalog's rate for that path from the
producer's provider; the same region is ``same_zone``, free in the embedded catalog).
"""

from __future__ import annotations

from dataclasses import dataclass

from ptplan.costs.network import egress_rate, egress_rows, path_between
from ptplan.costs.storage import BYTES_PER_TOKEN, HOURS_PER_MONTH, tiers_for, weights_gb
from ptplan.demand.model import build_demand
from ptplan.providers.base import Catalog
from ptplan.spec.project import ProjectSpec


def output(spec: ProjectSpec) -> tuple[str, float]:
    """(what, GB) a stage hands on."""
    d = spec.data
    if spec.method == "generate":
        tokens = (d.prompts or 0) * (d.samples_per_prompt or 0) * \
            ((d.prompt_tokens or 0) + (d.response_tokens or 0))
        return "generated data", tokens * BYTES_PER_TOKEN / 1e9
    what = "final LoRA adapters" if spec.model.finetune == "lora" else "final weights"
    return what, weights_gb(build_demand(spec))


@dataclass(frozen=True)
class Storage:
    tier: str
    usd_per_gb_month: float
    min_days: float
    cost: float


@dataclass(frozen=True)
class Egress:
    path: str
    usd_per_gb: float
    cost: float
    note: str = ""
    """Set when the catalog has no rate for the path (priced $0, and said so)."""


class Pricer:
    """Hand-over prices on one catalog (memoised: the MILP asks for every pair of points)."""

    def __init__(self, catalog: Catalog, hold_hours: float) -> None:
        self.catalog = catalog
        self.rows = egress_rows(catalog)
        self.hold_hours = hold_hours

    def storage(self, provider: str, region: str, gb: float) -> Storage:
        tiers = [t for t in tiers_for(self.catalog, provider, region) if t.access == "ms"]
        if not tiers or gb <= 0:
            return Storage("", 0.0, 0.0, 0.0)

        def cost(t: object) -> float:
            hours = max(self.hold_hours, t.min_days * 24.0)  # type: ignore[attr-defined]
            return gb * t.usd_per_gb_month * hours / HOURS_PER_MONTH  # type: ignore[attr-defined]

        best = min(tiers, key=lambda t: (cost(t), t.tier))
        return Storage(best.tier, best.usd_per_gb_month, best.min_days, cost(best))

    def egress(self, src: tuple[str, str], dst: tuple[str, str], gb: float) -> Egress:
        path = path_between((src[0], src[1], ""), (dst[0], dst[1], ""))
        rate = egress_rate(self.rows, src[0], path)
        if rate is None:
            note = "" if path == "same_zone" else (
                f"catalog {self.catalog.name} has no {path} egress rate from {src[0]}: "
                "priced $0")
            return Egress(path, 0.0, 0.0, note)
        return Egress(path, rate.usd_per_gb, gb * rate.usd_per_gb)
