"""Pool layouts and pool options: the finite choices the planner's MILP selects from.

A *layout* fixes the pipeline mode and which phases share a pool:

* ``colocated``: one pool runs every phase in turn (veRL hybrid engine); held for the run.
* ``sync``: rollout (+eval) on one pool, scoring and update on others (or scoring on the update
  pool); every step waits for each stage, so each pool idles while the others run: the run
  lasts the *sum* of the pools' busy times and every pool is held (and billed) for all of it.
* ``async``: the same pools run concurrently (one-step off-policy): the run lasts the *longest*
  pool's busy time plus one step of pipeline fill; faster pools idle, and that idle is billed.

A *site* is where the trainer sits: (provider, region, zone); see :mod:`ptplan.costs.network`.
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
    usd_per_hour = Σ n_o·(price_o + boot disk $/h)

with ω_o = λ_o·(lost work + restart) for stateless workers (DESIGN §3, shared notes §6), C the
checkpoint cost and R the restart time. The precision of each phase is the fastest allowed one
whose replica fits the pool's GPUs: for fixed nodes a faster precision lowers busy time and
cost never rises, so this choice is exact.

Enumerating and pruning the options of each pool: :mod:`ptplan.planner.frontier.frontiers`.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field

from ptplan.core.errors import InputError
from ptplan.core.hardware import gpus
from ptplan.costs.disks import DiskModel
from ptplan.demand.model import Demand
from ptplan.demand.rates import PhaseRate
from ptplan.policies.model import Policy, default_policy
from ptplan.providers.base import Catalog, Offer
from ptplan.providers.buyability import opt_in, sold
from ptplan.spec.frameworks import Release


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
    disks: DiskModel | None = field(default=None, compare=False, hash=False)
    """Boot-disk $/node-hour per region (:mod:`ptplan.costs.disks`): added to every node's
    price where pool options accumulate it (:mod:`ptplan.planner.frontier.pool`)."""


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
    disk_usd_per_hour: float = 0.0
    """The nodes' boot disks, included in :attr:`usd_per_hour` (the instances' $/h is the
    rest: Σ n_o·price_o)."""

    @property
    def key(self) -> str:
        shape = f"{self.gpu}x{self.gpus_per_node}"
        zone = f"@{self.site[2]}" if self.site[2] else ""
        home = "" if self.site[:2] == (self.provider, self.region) else \
            f"~{self.site[0]}:{self.site[1]}"
        return (f"{self.pool}:{self.provider}:{self.region}{zone}{home}:{shape}:{self.nodes}"
                f":{self.nodes - self.remote_nodes}")


@dataclass
class OfferFilter:
    offers: list[Offer]
    removed: dict[str, int] = field(default_factory=dict)
    """Filter name -> offers it removed (for 'no offers' diagnostics)."""


def filter_offers(spec_placement, catalog: Catalog,
                  policy: Policy | None = None, release: Release | None = None) -> OfferFilter:
    """Apply ``placement`` (providers, regions globs, GPUs) and the policy's providers and
    regions; drop GPUs without specs, capacity the provider does not sell that way (A3 High
    under 8 GPUs on demand: :mod:`ptplan.providers.buyability`) and opt-in zones (AWS Local and
    Wavelength zones) unless the policy sets ``allow_opt_in_zones``; with a framework
    ``release``, accelerators its build does not run on (:mod:`ptplan.spec.frameworks`)."""
    offers = list(catalog.offers)
    bad = next((o for o in offers if o.max_nodes is not None and o.max_nodes < 1), None)
    if bad is not None:  # a catalog built in Python skips the file formats' validation
        raise InputError(f"catalog {catalog.name}: offer {bad.key}: max_nodes {bad.max_nodes} "
                         "is below 1; give None (no cap) or at least 1, or leave the offer out")
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
    offers = keep
    if release is not None:
        keep = [o for o in offers if known_gpus[o.gpu].vendor in release.accelerators]
        removed[f"framework {release.key}: not a {'/'.join(sorted(release.accelerators))} GPU "
                f"({release.cite('accelerators')})"] = len(offers) - len(keep)
        offers = keep
    keep = [o for o in offers if sold(o.provider, o.instance_type, o.region, o.capacity_type)]
    removed["not sold that way (providers/data/buyability.csv)"] = len(offers) - len(keep)
    offers = keep
    if not (policy is not None and policy.allow_opt_in_zones):
        keep = [o for o in offers if opt_in(o.provider, o.zone) is None]
        removed["opt-in zone (policy allow_opt_in_zones: false)"] = len(offers) - len(keep)
    return OfferFilter(keep, removed)


def layouts(demand: Demand, policy: Policy | None = None) -> list[Layout]:
    """The pool layouts the spec's ``pipeline`` allows (SFT: one pool), with the policy's
    capacity rules compiled into each pool: a pool may use a capacity type only if every phase
    it runs allows it."""
    policy = policy or default_policy()
    spec = demand.spec
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

    if spec.method in ("sft", "generate"):  # one pool; generate: rollout only, stateless
        return [Layout("colocated", "colocated", (pool("all", work, stall, ckpt),), tail=True,
                       policy=policy)]
    ws_hours = demand.steps * demand.weight_sync_seconds / 3600.0
    ws = (("weight_sync", ws_hours),)
    out: list[Layout] = []
    want = spec.pipeline
    rel = spec.release
    # the release's roles: which may have a pool apart from the trainer (docs/frameworks.md)
    own_scoring = rel is None or set(spec.scoring_roles) <= rel.own_pool_roles
    teacher_apart = rel is not None and rel.teacher_needs_own_pool and spec.teacher is not None
    if want in ("auto", "colocated") and not teacher_apart:
        refit = demand.steps * demand.refit_seconds / 3600.0
        parts = ckpt + ((("weight_sync", refit),) if refit > 0 else ())
        out.append(Layout("colocated", "colocated", (pool("all", work, stall + refit, parts),),
                          tail=True, policy=policy))
    for mode in ("sync", "async"):
        if want not in ("auto", mode):
            continue
        if rel is not None and mode not in rel.separate_rollout_pipelines:
            continue
        rollout = pool("rollout", gen, ws_hours, ws, remote_ok=True)
        pools3: list[PoolSpec] = [rollout]
        if has_scoring:
            pools3.append(pool("scoring", ("scoring",), 0.0, ()))
        pools3.append(pool("update", ("update",), stall, ckpt))
        fill = 1.0 / demand.steps if mode == "async" else 0.0
        if own_scoring or not has_scoring:
            out.append(Layout(mode, f"{mode}:" + "|".join(p.name for p in pools3),
                              tuple(pools3), tail=(mode == "sync"), fill_fraction=fill,
                              policy=policy))
        if has_scoring and not teacher_apart:
            merged = pool("update", ("scoring", "update"), stall, ckpt)
            out.append(Layout(mode, f"{mode}:rollout|update+scoring", (rollout, merged),
                              tail=(mode == "sync"), fill_fraction=fill, policy=policy))
    return out


def spot_overhead(offer: Offer, demand: Demand) -> float:
    """Stateless worker overhead ω = λ·(lost work + restart), as a fraction of time."""
    eff = demand.spec.efficiency
    lam = offer.interruptions_per_hour or 0.0
    return min(0.99, lam * (eff.lost_work_minutes + eff.restart_minutes) / 60.0)
