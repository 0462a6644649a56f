"""Pool layouts and pool options: the finite choices the planner's MILP selects from.

A *layout* fixes the pipeline mode and which phases share a pool:

* ``colocated``: one pool runs every phase in turn (veRL hybrid engine); held for the run.
* ``sync``: rollout (+eval) on one pool, scoring and update on others (or scoring on the update
  pool); every step waits for each stage, so each pool idles while the others run: the run
  lasts the *sum* of the pools' busy times and every pool is held (and billed) for all of it.
* ``async``: the same pools run concurrently (one-step off-policy): the run lasts the *longest*
  pool's busy time plus one step of pipeline fill; faster pools idle, and that idle is billed.

A *site* is where the trainer sits: (provider, region, zone); see :mod:`optimizer.network`.
Every pool option is priced against a site: the update, colocated and scoring pools use
region-level offers and the site zone's, the rollout pool may add other zones' spot nodes
(each paying cross-zone egress for its weight sync) and, with ``split_regions``, other regions.

A *pool option* is one concrete pool: (provider, region, GPU shape = GPU type × GPUs per node,
node counts per offer). Its ``busy_hours`` (time to do its phases' work) and ``usd_per_hour``
(what holding it costs) are exact functions of the node counts:

    E = Σ_non-spot n_o + Σ_spot n_o·(1 − ω_o)                  (stateless pools)
    E = N·(1 − √(2·C·Λ) − R·Λ),  Λ = Σ_spot n_o·λ_o             (pools running the update: a
                                                                  gang, Young's interval)
    t_phase = max(node_hours(phase, GPU, precision, nodes/node) / E, latency floor)
    busy = Σ t_phase + stalls
    usd_per_hour = Σ n_o·price_o

with ω_o = λ_o·(lost work + restart) for stateless workers (DESIGN §3, shared notes §6), C the
checkpoint cost and R the restart time. The precision of each phase is the fastest allowed one
whose replica fits the pool's GPUs: for fixed nodes a faster precision lowers busy time and
cost never rises, so this choice is exact.

Enumerating and pruning the options of each pool: :mod:`optimizer.frontier`.
"""

from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from optimizer.demand import Demand, latency_floor_hours, phase_cell, precision_options
from optimizer.errors import InputError
from optimizer.hardware import GPU, gpus
from optimizer.network import NetworkModel
from policies.model import Policy, default_policy
from providers.base import Catalog, Offer

if TYPE_CHECKING:
    from optimizer.frontier import PoolFrontier

GEN_PHASES = frozenset({"rollout", "eval", "scoring"})


@dataclass(frozen=True)
class PoolSpec:
    name: str
    phases: tuple[str, ...]
    spot_ok: bool
    stateful: bool
    stall_hours: float
    """Fixed busy time: checkpoint write stalls (update) and weight-sync receive (rollout)."""
    stall_parts: tuple[tuple[str, float], ...] = ()
    capacity_types: frozenset[str] = frozenset({"on_demand", "spot", "reserved"})
    """Capacity types every phase of the pool allows (policy)."""
    max_spot_share: float = 1.0
    remote_ok: bool = False
    """May take spot nodes outside the trainer's zone (or, with ``split_regions``, region),
    paying egress for the weight sync each of them receives (the rollout pool)."""


@dataclass(frozen=True)
class Layout:
    mode: str  # colocated | sync | async
    name: str
    pools: tuple[PoolSpec, ...]
    tail: bool
    fill_fraction: float = 0.0
    """async: one step of pipeline fill = rollout busy time / steps."""
    policy: Policy = field(default_factory=default_policy, compare=False, hash=False)


@dataclass(frozen=True)
class PhaseRate:
    """Node-hours for a phase's whole work on one effective node of a shape, at a precision."""

    phase: str
    precision: str
    node_hours: float
    nodes_per_replica: int
    replica_gpus: int
    gpu_hours: float
    calibrated: bool
    floor_hours: float = 0.0
    """Least busy time whatever the node count (sequential work inside each step)."""

    def busy(self, effective_nodes: float) -> float:
        return max(self.node_hours / effective_nodes, self.floor_hours)


@dataclass(frozen=True)
class PoolOption:
    pool: str
    provider: str
    region: str
    gpu: str
    gpus_per_node: int
    fill: tuple[tuple[Offer, int], ...]
    nodes: int
    effective_nodes: float
    usd_per_hour: float
    busy_hours: float
    phase_hours: tuple[tuple[str, float], ...]
    precisions: tuple[tuple[str, str], ...]
    rates: tuple[PhaseRate, ...]
    overhead_fraction: float
    site: tuple[str, str, str] = ("", "", "")
    """The trainer's (provider, region, zone): where the plan is anchored."""
    egress_usd: float = 0.0
    """Weight-sync egress (and, across regions, experience data and dataset staging) of this
    option over the whole run, priced against :attr:`site`."""
    remote_nodes: int = 0
    """Nodes outside the site's zone (cross-zone) or region (split plans)."""
    egress_path: str = "same_zone"

    @property
    def key(self) -> str:
        shape = f"{self.gpu}x{self.gpus_per_node}"
        zone = f"@{self.site[2]}" if self.site[2] else ""
        home = "" if self.site[:2] == (self.provider, self.region) else \
            f"~{self.site[0]}:{self.site[1]}"
        return (f"{self.pool}:{self.provider}:{self.region}{zone}{home}:{shape}:{self.nodes}"
                f":{self.nodes - self.remote_nodes}")


@dataclass
class Candidates:
    layout: Layout
    frontiers: dict[str, PoolFrontier]
    """Per pool name: its Pareto options in every region."""
    regions: list[tuple[str, str, str]]
    """Sites: (provider, region, zone) where the trainer sits (see :func:`sites_of`)."""
    considered: int = 0
    """Grid points (pool × region × shape × node counts) evaluated."""
    pruned: int = 0
    """Of those, dropped as Pareto-dominated."""
    storage: object | None = None
    """A :class:`optimizer.storage.StorageModel`: storage cost as a function of run time."""
    network: NetworkModel | None = None
    """Egress rates and flows; fixed flows (dataset staging, checkpoint copies) per site."""
    places: list[tuple[str, str]] = field(default_factory=list)
    """Regions of the rollout pool's cross-region entries (``split_regions``)."""
    memo: dict = field(default_factory=dict, repr=False)
    """Results derived from the frontiers (e.g. region bounds), computed once."""

    def storage_cost(self, region: int, run_hours):
        """Storage cost (USD) at site ``region`` at run time(s) D (0 without a storage model)."""
        if self.storage is None:
            return 0.0 * np.asarray(run_hours, dtype=float)
        provider, name = self.regions[region][:2]
        return self.storage.cost(provider, name, run_hours)  # type: ignore[attr-defined]

    def fixed_network(self, region: int) -> float:
        """Dataset staging and checkpoint copies of a plan anchored at site ``region`` whose
        rollout (if any) is in the same region."""
        if self.network is None:
            return 0.0
        key = ("fixed_network", region)
        if key not in self.memo:
            self.memo[key] = self.network.fixed_cost(self.regions[region])
        return float(self.memo[key])

    def extra_cost(self, region: int, run_hours):
        """Storage + fixed network cost at site ``region`` for run time(s) D."""
        return self.storage_cost(region, run_hours) + self.fixed_network(region)


@dataclass
class OfferFilter:
    offers: list[Offer]
    removed: dict[str, int] = field(default_factory=dict)
    """Filter name -> offers it removed (for 'no offers' diagnostics)."""


def filter_offers(spec_placement, catalog: Catalog,
                  policy: Policy | None = None) -> OfferFilter:
    """Apply ``placement`` (providers, regions globs, GPUs) and the policy's providers and
    regions, and drop GPUs without specs."""
    offers = list(catalog.offers)
    removed: dict[str, int] = {}
    if spec_placement.providers:  # a name the catalog lacks is a typo, whatever the policy
        known = {o.provider for o in offers}
        unknown = [x for x in spec_placement.providers if x.lower() not in known]
        if unknown:
            raise InputError(
                f"placement.providers: {unknown[0]!r} is not in the catalog {catalog.name} "
                f"(providers: {', '.join(sorted(known))}); fix the name or the catalog"
            )
    if policy is not None and (policy.providers is not None or policy.regions is not None):
        keep = [o for o in offers if policy.allows_region(o.provider, o.region)]
        removed[f"policy {policy.name} providers/regions"] = len(offers) - len(keep)
        offers = keep
    p = spec_placement
    if p.providers:
        allowed = {x.lower() for x in p.providers}
        keep = [o for o in offers if o.provider.lower() in allowed]
        removed["placement.providers"] = len(offers) - len(keep)
        offers = keep
    if p.regions:
        keep = [o for o in offers if any(fnmatch.fnmatchcase(o.region, g) for g in p.regions)]
        removed["placement.regions"] = len(offers) - len(keep)
        offers = keep
    if p.gpus:
        keep = [o for o in offers if o.gpu in set(p.gpus)]
        removed["placement.gpus"] = len(offers) - len(keep)
        offers = keep
    known_gpus = gpus()
    keep = [o for o in offers if o.gpu in known_gpus]
    removed["no GPU spec"] = len(offers) - len(keep)
    return OfferFilter(keep, removed)


def layouts(demand: Demand, policy: Policy | None = None) -> list[Layout]:
    """The pool layouts the spec's ``pipeline`` allows (SFT: one pool), with the policy's
    capacity rules compiled into each pool: a pool may use a capacity type only if every phase
    it runs allows it."""
    policy = policy or default_policy()
    spec = demand.spec
    eff = spec.efficiency
    stall = demand.checkpoint_stall_hours
    phases = demand.phases
    has_scoring = "scoring" in phases
    gen = tuple(p for p in ("rollout", "eval") if p in phases)
    work = tuple(p for p in phases if p != "checkpoint")
    ckpt = (("checkpoint", stall),) if stall > 0 else ()

    def pool(name: str, runs: tuple[str, ...], stall_hours: float,
             parts: tuple[tuple[str, float], ...], remote_ok: bool = False) -> PoolSpec:
        kinds = frozenset.intersection(*(frozenset(policy.capacity_types(p)) for p in runs))
        return PoolSpec(name, runs, "spot" in kinds, "update" in runs, stall_hours, parts,
                        kinds, policy.max_spot_share, remote_ok)

    if spec.method == "sft":
        return [Layout("colocated", "colocated", (pool("all", work, stall, ckpt),), tail=True,
                       policy=policy)]
    ws_hours = demand.steps * demand.weight_sync_gb_per_step / eff.weight_sync_gb_per_s / 3600.0
    ws = (("weight_sync", ws_hours),)
    out: list[Layout] = []
    want = spec.pipeline
    if want in ("auto", "colocated"):
        out.append(Layout("colocated", "colocated", (pool("all", work, stall, ckpt),),
                          tail=True, policy=policy))
    for mode in ("sync", "async"):
        if want not in ("auto", mode):
            continue
        rollout = pool("rollout", gen, ws_hours, ws, remote_ok=True)
        pools3: list[PoolSpec] = [rollout]
        if has_scoring:
            pools3.append(pool("scoring", ("scoring",), 0.0, ()))
        pools3.append(pool("update", ("update",), stall, ckpt))
        fill = 1.0 / demand.steps if mode == "async" else 0.0
        out.append(Layout(mode, f"{mode}:" + "|".join(p.name for p in pools3), tuple(pools3),
                          tail=(mode == "sync"), fill_fraction=fill, policy=policy))
        if has_scoring:
            merged = pool("update", ("scoring", "update"), stall, ckpt)
            out.append(Layout(mode, f"{mode}:rollout|update+scoring", (rollout, merged),
                              tail=(mode == "sync"), fill_fraction=fill, policy=policy))
    return out


def allowed_precisions(demand: Demand, phase: str, policy: Policy | None = None
                       ) -> tuple[str, ...]:
    """Precisions a phase may use: what the phase supports ∩ the spec's ``precisions`` (eval
    follows rollout when it has no entry) ∩ the policy's."""
    policy = policy or default_policy()
    allowed = precision_options(phase)
    spec_p = demand.spec.precisions or {}
    if phase in spec_p:
        allowed = tuple(q for q in allowed if q in spec_p[phase])  # type: ignore[index]
    elif phase == "eval" and "rollout" in spec_p:
        allowed = tuple(q for q in allowed if q in spec_p["rollout"])  # type: ignore[index]
    from_policy = policy.precisions(phase)
    if from_policy is not None:
        allowed = tuple(q for q in allowed if q in from_policy)
    return allowed


def phase_rates(demand: Demand, phase: str, gpu: GPU, gpn: int, tail: bool,
                policy: Policy | None = None) -> list[PhaseRate]:
    """Per allowed precision that fits: node-hours on one node of ``gpn`` GPUs (with the
    policy's high-precision fallback share for teacher and reward scoring)."""
    policy = policy or default_policy()
    out: list[PhaseRate] = []
    tail_factor = demand.spec.efficiency.tail_factor if tail else 1.0
    fallback: dict[str, float] | None = (
        {str(k): v for k, v in policy.high_precision_fallback.items()}
        if phase == "scoring" else None)
    for q in allowed_precisions(demand, phase, policy):
        if not gpu.supports(q):
            continue
        pc = phase_cell(demand, phase, gpu, q, fallback=fallback)
        if not pc.fits:
            continue
        g = pc.replica_gpus
        if phase in GEN_PHASES:
            if g <= gpn:
                npr, usable = 1, (gpn // g) * g
            else:
                npr = math.ceil(g / gpn)
                pc = phase_cell(demand, phase, gpu, q, replica_gpus=npr * gpn,
                                fallback=fallback)
                if not pc.fits:
                    continue
                usable = gpn
        else:
            npr, usable = math.ceil(g / gpn), gpn
        busy_gpu_hours = pc.gpu_hours + pc.decode_gpu_hours * (tail_factor - 1.0)
        floor = latency_floor_hours(demand, phase, gpu, q, pc.replica_gpus)
        out.append(PhaseRate(phase, q, busy_gpu_hours / usable, npr, pc.replica_gpus,
                             busy_gpu_hours, pc.calibrated, floor))
    return out


def spot_overhead(offer: Offer, demand: Demand) -> float:
    """Stateless worker overhead ω = λ·(lost work + restart), as a fraction of time."""
    eff = demand.spec.efficiency
    lam = offer.interruptions_per_hour or 0.0
    return min(0.99, lam * (eff.lost_work_minutes + eff.restart_minutes) / 60.0)
