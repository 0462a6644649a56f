"""Network egress in the plan: what crosses zones and regions, and what it costs.

Flows (sizes in GB = 10^9 bytes; rates in $/GB from the catalog's ``egress`` table):

=====================  =======================================================================
flow                   bytes
=====================  =======================================================================
weight_sync            every step the trainer broadcasts the policy weights (bf16) to the
                       rollout workers. A broadcast (NCCL ring or tree) moves one copy into
                       each node and fans it out over NVLink inside the node, so each rollout
                       node receives W = params × 2 B per step. ptplan does not assume a
                       zone-aware broadcast (one copy per remote zone): frameworks order ranks
                       without regard to zones.
experience             rollout → scoring → update: prompt and response token ids plus the
                       rollout and scoring log-probabilities, 12 B per token of every sampled
                       sequence per step. Priced when the rollout pool is in another region
                       (all of it); within a region it is listed but not priced (the share of
                       cross-zone rollout nodes is, for the examples, well under 1 % of their
                       weight-sync bytes; the plan item says how many GB).
dataset_staging        the dataset (as stored, see :mod:`ptplan.costs.storage`) copied once from
                       ``data.source`` to the region that reads it (rollout for RL/OPD, the
                       trainer for SFT); free when it is already there.
checkpoint_copies      with ``checkpoints.copy_to``: every archived checkpoint and the final
                       one copied from the trainer's region.
=====================  =======================================================================

Where the pools sit. A plan has a *site*: the trainer's provider, region and zone. The pools
that hold state or talk to the trainer at every micro-step (the update pool, the colocated
pool, and the scoring pool) stay in the site's zone: their zoned (spot) nodes come only from
that zone, and their region-level (on-demand, reserved) nodes are placed there. The rollout
pool may also take spot nodes in the region's other zones; each such *remote* node pays the
``cross_zone`` rate on its weight-sync copy and on its share of the experience data. With a
policy's ``split_regions: true`` the rollout pool may also sit in another region (or another
provider), and then every one of its nodes pays the ``inter_region`` (``inter_continent``,
or the source provider's ``internet``) rate.

Paths between two places: same zone → ``same_zone``; same region → ``cross_zone``; same
provider, same continent → ``inter_region``; same provider, other continent →
``inter_continent`` (``inter_region`` where the catalog has no such row); another provider →
the source provider's ``internet`` rate. A path the catalog does not price costs 0 and the
plan says so in its warnings.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ptplan.demand.model import Demand
from ptplan.providers.base import Catalog, EgressRate

EXPERIENCE_BYTES_PER_TOKEN = 12.0
"""Token id (4 B) + rollout log-probability (4 B) + scored log-probability (4 B)."""

PATHS = ("same_zone", "cross_zone", "inter_region", "inter_continent", "internet")

_CONTINENTS: tuple[tuple[str, str], ...] = (
    # region-name prefixes (AWS and GCP) → continent; first match wins
    ("us-", "north_america"), ("ca-", "north_america"), ("northamerica-", "north_america"),
    ("mx-", "north_america"),
    ("sa-", "south_america"), ("southamerica-", "south_america"),
    ("eu-", "europe"), ("europe-", "europe"),
    ("me-", "middle_east"), ("il-", "middle_east"),
    ("af-", "africa"), ("africa-", "africa"),
    ("ap-southeast-2", "oceania"), ("ap-southeast-4", "oceania"), ("australia-", "oceania"),
    ("ap-", "asia"), ("asia-", "asia"),
)


def continent(region: str) -> str:
    """Continent of a region name (``unknown`` for names no prefix matches, e.g. on-prem)."""
    for prefix, name in _CONTINENTS:
        if region.startswith(prefix):
            return name
    return "unknown"


def path_between(src: tuple[str, str, str], dst: tuple[str, str, str]) -> str:
    """Network path from ``src`` to ``dst`` = (provider, region, zone); an empty zone means
    "anywhere in the region" and is taken as the same zone as the other end."""
    if src[0] != dst[0]:
        return "internet"
    if src[1] != dst[1]:
        a, b = continent(src[1]), continent(dst[1])
        return "inter_region" if a == b and a != "unknown" else "inter_continent"
    if src[2] and dst[2] and src[2] != dst[2]:
        return "cross_zone"
    return "same_zone"


EgressRows = dict[tuple[str, str], EgressRate]
"""A catalog's egress rows by (source provider, path); the first row of each pair counts."""


def egress_rows(catalog: Catalog) -> EgressRows:
    rows: EgressRows = {}
    for e in catalog.egress:
        rows.setdefault((e.provider, e.path), e)
    return rows


def egress_rate(rows: EgressRows, provider: str, path: str) -> EgressRate | None:
    """The row that prices traffic leaving ``provider`` along ``path`` (``inter_continent``
    falls back to ``inter_region`` where the catalog has no such row), or None."""
    for p in (path, "inter_region") if path == "inter_continent" else (path,):
        row = rows.get((provider, p))
        if row is not None:
            return row
    return None


@dataclass(frozen=True)
class Flow:
    name: str
    src: tuple[str, str, str]
    dst: tuple[str, str, str]
    gb: float
    path: str
    usd_per_gb: float
    note: str = ""

    @property
    def cost(self) -> float:
        return self.gb * self.usd_per_gb


@dataclass
class NetworkModel:
    """Egress rates of a catalog and the byte counts of one spec's flows."""

    catalog: Catalog
    steps: int
    weight_gb: float
    """Per rollout node per step (0 for layouts without a separate rollout pool)."""
    experience_gb_per_step: float
    dataset_gb: float
    dataset_reader: str
    """Pool that reads the dataset: ``rollout`` (RL/OPD) or ``update`` (SFT)."""
    dataset_source: tuple[str, str] | None
    checkpoint_copy_gb: float
    copy_to: tuple[str, str] | None
    missing: set[str] = field(default_factory=set)
    """(provider, path) pairs priced at 0 because the catalog has no rate (for warnings)."""
    _rows: EgressRows = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._rows = egress_rows(self.catalog)

    def rate(self, provider: str, path: str) -> float:
        """$/GB for traffic leaving ``provider`` along ``path`` (see :func:`egress_rate`);
        0 where the catalog has no rate, recorded in :attr:`missing` unless same-zone."""
        row = egress_rate(self._rows, provider, path)
        if row is not None:
            return row.usd_per_gb
        if path != "same_zone":
            self.missing.add(f"{provider} {path}")
        return 0.0

    def sync_rates(self, trainer: tuple[str, str, str], rollout: tuple[str, str, str]
                   ) -> tuple[str, float, float]:
        """(path, $ per rollout node over the run for weight sync, $ for all the experience
        data over the run) between the trainer's site and a rollout node's place."""
        path = path_between(trainer, rollout)
        r = self.rate(trainer[0], path)
        return path, self.steps * self.weight_gb * r, self.steps * self.experience_gb_per_step * r

    def cross_zone_per_node(self, provider: str) -> float:
        """$ over the run for one rollout node outside the trainer's zone (its weight sync)."""
        return self.steps * self.weight_gb * self.rate(provider, "cross_zone")

    def cross_region_terms(self, trainer: tuple[str, str, str], place: tuple[str, str]
                           ) -> tuple[str, float, float]:
        """(path, $ per rollout node, fixed $) of a rollout pool in region ``place`` serving a
        trainer at ``trainer``: each node's weight sync; all the experience data and the
        dataset staged to ``place`` instead of the trainer's region."""
        dst = (place[0], place[1], "")
        path, per_node, experience = self.sync_rates(trainer, dst)
        staging = self.fixed_cost(trainer, dst) - self.fixed_cost(trainer)
        return path, per_node, experience + staging

    def fixed_flows(self, trainer: tuple[str, str, str],
                    rollout: tuple[str, str, str] | None = None) -> list[Flow]:
        """Dataset staging and checkpoint copies for a plan whose trainer sits at ``trainer``
        (and whose rollout pool, if in another region, at ``rollout``)."""
        out: list[Flow] = []
        if self.dataset_gb > 0:
            reader = rollout if (self.dataset_reader == "rollout" and rollout) else trainer
            src = (self.dataset_source[0], self.dataset_source[1], "") \
                if self.dataset_source else (reader[0], reader[1], "")
            path = path_between(src, (reader[0], reader[1], ""))
            note = "" if self.dataset_source else "data.source not set: staged in-region"
            out.append(Flow("dataset_staging", src, (reader[0], reader[1], ""),
                            self.dataset_gb, path, self.rate(src[0], path), note))
        if self.copy_to and self.checkpoint_copy_gb > 0:
            dst = (self.copy_to[0], self.copy_to[1], "")
            src = (trainer[0], trainer[1], "")
            path = path_between(src, dst)
            out.append(Flow("checkpoint_copies", src, dst, self.checkpoint_copy_gb, path,
                            self.rate(src[0], path)))
        return out

    def fixed_cost(self, trainer: tuple[str, str, str],
                   rollout: tuple[str, str, str] | None = None) -> float:
        return sum(f.cost for f in self.fixed_flows(trainer, rollout))


def _place(ref: str | None) -> tuple[str, str] | None:
    if not ref:
        return None
    provider, _, region = ref.partition(":")
    return provider, region


def network_model(demand: Demand, catalog: Catalog, archived: int, archived_gb: float,
                  dataset_gb: float) -> NetworkModel:
    """Byte counts of ``demand``'s flows on ``catalog``'s rates. ``archived`` checkpoints of
    ``archived_gb`` each (from the storage model) are the ones ``checkpoints.copy_to`` copies,
    plus the final checkpoint."""
    spec = demand.spec
    rl = spec.method != "sft"
    seq_tokens = 0.0
    if rl:  # every sampled sequence carries its prompt and its response (the prefill part
        # counts a shared prompt once per group with prefix caching: compute, not bytes)
        seq_tokens = sum(p.tokens + p.runs * p.run_sequences * p.prompt_tokens
                         for p in demand.phase_parts("rollout") if p.kind == "decode")
    copies = archived + (1 if demand.checkpoints > 0 else 0)
    return NetworkModel(
        catalog=catalog,
        steps=demand.steps,
        weight_gb=demand.weight_sync_gb_per_step if rl else 0.0,
        experience_gb_per_step=(seq_tokens * EXPERIENCE_BYTES_PER_TOKEN / 1e9 / demand.steps
                                if rl and demand.steps else 0.0),
        dataset_gb=dataset_gb,
        dataset_reader="rollout" if rl else "update",
        dataset_source=_place(getattr(spec.data, "source", None)),
        checkpoint_copy_gb=copies * archived_gb,
        copy_to=_place(getattr(spec.checkpoints, "copy_to", None)),
    )
