"""What the simulation reads from a plan: pools, their interruption-free busy time, their spot
nodes and hazards, the checkpoint interval and the money figures (docs/simulate.md).

Every figure comes from the plan JSON (or, for an on-demand fallback price the plan does not
hold, from the embedded catalog the plan was made on):

* a work phase's busy hours are tokens ÷ (Σ nodes × effective fraction × rate × usable
  fraction) (:mod:`ptplan.planfile.schema`), so without interruptions it would take
  ``busy × Σ n·f ÷ Σ n`` hours, never less than its latency floor; stall phases (weight sync,
  checkpoint writes) take their recorded hours. A pool's base busy time B0 is their sum;
* the base makespan M0 follows the plan's pipeline mode as the verifier computes it (sync and
  colocated: Σ B0; async: max B0 + fill × B0 of the rollout pool); the plan's own expected
  interruption overhead is its makespan − M0;
* hazards: each spot allocation's ``interruptions_per_hour``; with a correlated share s, a
  zone-wide reclaim event hits every spot node of a zone at once, at s × the zone's
  node-weighted mean hazard, and each node keeps (λ − that) of independent interruptions, so a
  node's own hazard stays λ;
* the spot model: lost in-flight work L, restart (replacement) R, checkpoint write C.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ptplan.core.errors import InputError
from ptplan.planfile.schema import Plan

ASYNC_BUFFERS = ("one-step", "unbounded")
"""How an async run's pools are coupled: ``one-step`` (one step off-policy: a pool may run at
most one step ahead, so a slip passes on beyond the pool's per-step slack) or ``unbounded``
(the planner's formula: the longest pool's total + one rollout step of fill)."""
CHECKPOINT_MODES = ("lifecycle", "young")
"""Where the gang's checkpoints fall: ``lifecycle`` every ``lifecycle.every_steps`` steps (what
``ptplan render`` deploys; the writes are the plan's checkpoint stall), ``young`` at Young's
interval τ* = √(2C/Λ) of the gang's hazard Λ, each write costing C (the planner's gang model)."""


@dataclass(frozen=True)
class ZoneHit:
    """A zone-wide reclaim stream's effect on one pool."""

    zone: int
    """Index into :attr:`RunModel.zone_rates`."""
    nodes: int
    """Spot nodes of the pool in that zone."""
    fallback_premium_usd_per_hour: float | None
    """(on-demand − spot) $/h over those nodes when the policy lets the pool's phases run on
    demand and the price is known; ``None``: no fallback, the nodes wait for spot capacity."""


@dataclass(frozen=True)
class PoolModel:
    name: str
    nodes: int
    base_busy_hours: float
    """B0: the pool's busy time without interruptions."""
    stateful: bool
    """Runs the update: a training gang that rolls back to its last checkpoint."""
    replica_nodes: int
    """Nodes one interruption stops (the largest ``nodes_per_replica`` of its phases)."""
    independent_rate: float
    """Σ over spot nodes of their independent interruptions per hour."""
    zone_hits: tuple[ZoneHit, ...] = ()


@dataclass(frozen=True)
class RunModel:
    name: str
    mode: str
    steps: int
    pools: tuple[PoolModel, ...]
    base_makespan_hours: float
    plan_makespan_hours: float
    fill_fraction: float
    lost_work_hours: float
    restart_hours: float
    checkpoint_hours: float
    checkpoint_every_steps: int
    checkpoint_mode: str
    zone_rates: tuple[float, ...]
    """Zone-wide reclaim events per hour, per zone with spot nodes."""
    zone_names: tuple[str, ...]
    shortage_hours: float
    """After a zone-wide reclaim, spot capacity in the zone returns after this many hours."""
    usd_per_hour: float
    """Instances and boot disks of every pool: what one more hour of run costs."""
    plan_total_usd: float
    deadline_hours: float | None
    budget_usd: float | None
    correlated: float
    async_buffer: str = "one-step"
    plan_pool_busy: dict[str, float] = field(default_factory=dict)
    """Each pool's busy hours as planned (with the planner's expected overhead)."""
    notes: tuple[str, ...] = field(default=())
    overruns: tuple[tuple[float, float], ...] = ()
    """Capacity booked for the run (the plan's ``bookings``), as (slack hours, $/h past it):
    a block is prepaid for whole units and ends at a fixed hour, so a delay costs nothing
    until the run outlasts it (slack = booked duration − the interruption-free run) and then
    its nodes' on-demand price per hour (they continue on demand); flex-start nodes run at
    most 7 days, then continue on demand at the difference. ``usd_per_hour`` leaves block
    nodes out."""
    wait_hours: float = 0.0
    """The plan's flex-start wait: added to every simulated run (the deadline holds both)."""
    time_mu: float = 0.0
    time_sigma: float = 0.0
    """The demand model's uncertainty: each trial's job time is × a lognormal multiplier
    exp(N(μ, σ²)) (:mod:`ptplan.risk.uncertainty`); σ = 0: the plan's figures as they are."""
    time_interval: tuple[float, float, float, str] | None = None
    """(level, low, high, basis) the multiplier was matched to."""
    time_usd_per_hour: float | None = None
    """What one more hour of the job itself costs under the multiplier (the plan's time-billed
    cost ÷ its makespan: compute, boot disks, CPU pools, per-hour other costs); ``None``:
    ``usd_per_hour``."""

    @property
    def time_rate(self) -> float:
        return self.usd_per_hour if self.time_usd_per_hour is None else self.time_usd_per_hour

    @property
    def plan_overhead_hours(self) -> float:
        return self.plan_makespan_hours - self.base_makespan_hours

    @property
    def base_cost_usd(self) -> float:
        return self.plan_total_usd - self.usd_per_hour * self.plan_overhead_hours

    def checkpoint_interval(self, pool: PoolModel) -> tuple[float, float]:
        """(progress hours between a gang's checkpoints, extra wall hours per write)."""
        if self.checkpoint_mode == "young":
            lam = pool.independent_rate + sum(self.zone_rates[h.zone] for h in pool.zone_hits)
            if lam <= 0:
                return math.inf, 0.0
            return math.sqrt(2.0 * self.checkpoint_hours / lam), self.checkpoint_hours
        every = self.base_makespan_hours * self.checkpoint_every_steps / self.steps
        return every, 0.0


def _phase_policy_allows_on_demand(plan: Plan, phases: list[str]) -> bool:
    rules = (plan.policy or {}).get("phases") or {}
    for ph in phases:
        rule = rules.get(ph)
        if isinstance(rule, dict) and rule.get("capacity_types") is not None \
                and "on_demand" not in rule["capacity_types"]:
            return False
    return True


def _on_demand_price(plan: Plan, provider: str, region: str, instance_type: str,
                     catalog_prices: dict[tuple[str, str, str], float] | None) -> float | None:
    for pool in plan.pools:
        for a in pool.allocations:
            if a.capacity_type == "on_demand" and (a.provider, a.region, a.instance_type) == \
                    (provider, region, instance_type):
                return a.usd_per_hour
    if catalog_prices is None:
        return None
    return catalog_prices.get((provider, region, instance_type))


def _catalog_on_demand(plan: Plan) -> dict[tuple[str, str, str], float] | None:
    from ptplan.planfile.rules_catalog import packaged_catalog

    cat = packaged_catalog(plan)
    if cat is None:
        return None
    return {(o.provider, o.region, o.instance_type): o.usd_per_hour for o in cat.offers
            if o.capacity_type == "on_demand"}


def base_busy(plan: Plan) -> dict[str, float]:
    """Each pool's busy hours with every effective fraction at 1 (no interruptions)."""
    out = {p.name: 0.0 for p in plan.pools}
    for ph in plan.phases:
        if ph.tokens_per_node_hour is None:
            out[ph.pool] += ph.busy_hours
            continue
        n = sum(a.nodes for a in ph.allocations)
        eff = sum(a.nodes * a.effective_fraction for a in ph.allocations)
        t0 = ph.busy_hours * eff / n if n else ph.busy_hours
        out[ph.pool] += max(t0, ph.latency_floor_hours)
    return out


def makespan_of(mode: str, busy: dict[str, float], fill: float) -> float:
    """The run by pipeline mode, as the verifier computes it."""
    if mode == "async":
        return max(busy.values()) + fill * busy.get("rollout", 0.0)
    return sum(busy.values())


def build_model(plan: Plan, correlated: float = 0.0, shortage_hours: float = 0.0,
                checkpoint_mode: str = "lifecycle", async_buffer: str = "one-step") -> RunModel:
    """The simulation model of ``plan``; ``correlated`` is the share of each spot node's hazard
    that comes from zone-wide reclaim events."""
    if not 0.0 <= correlated <= 1.0 or math.isnan(correlated):
        raise InputError(f"--correlated: {correlated} is not a share; use a number in [0, 1]")
    if not shortage_hours >= 0 or math.isinf(shortage_hours):
        raise InputError(f"--shortage-hours: {shortage_hours} is not a duration; use a "
                         "number of hours ≥ 0")
    if checkpoint_mode not in CHECKPOINT_MODES:
        raise InputError(f"--checkpoints: unknown value {checkpoint_mode!r}; use one of "
                         f"{', '.join(CHECKPOINT_MODES)}")
    if async_buffer not in ASYNC_BUFFERS:
        raise InputError(f"--async-buffer: unknown value {async_buffer!r}; use one of "
                         f"{', '.join(ASYNC_BUFFERS)}")
    if plan.lifecycle is None:
        raise InputError("plan: no lifecycle recorded (a schema 1 plan): the checkpoint "
                         "cadence is unknown; regenerate it with `ptplan plan SPEC --format json`")
    busy0 = base_busy(plan)
    m0 = makespan_of(plan.pipeline_mode, busy0, plan.fill_fraction)
    sm = plan.spot_model
    # zones with spot nodes and their node-weighted mean hazard
    zone_nodes: dict[str, list[tuple[int, float]]] = {}
    for pool in plan.pools:
        for a in pool.allocations:
            if a.capacity_type == "spot" and (a.interruptions_per_hour or 0.0) > 0:
                zone_nodes.setdefault(a.zone or a.region, []).append(
                    (a.nodes, a.interruptions_per_hour or 0.0))
    zone_names = tuple(sorted(zone_nodes))
    zone_mean = {z: sum(n * lam for n, lam in v) / sum(n for n, _ in v)
                 for z, v in zone_nodes.items()}
    zone_rates = tuple(correlated * zone_mean[z] for z in zone_names)
    need_prices = correlated > 0 and shortage_hours > sm.restart_minutes / 60.0
    catalog_prices = _catalog_on_demand(plan) if need_prices else None
    notes: list[str] = []
    pools: list[PoolModel] = []
    for pool in plan.pools:
        phases = [ph for ph in plan.phases if ph.pool == pool.name]
        k = max([ph.nodes_per_replica for ph in phases if ph.tokens_per_node_hour] or [1])
        indep = 0.0
        per_zone: dict[str, tuple[int, float]] = {}
        for a in pool.allocations:
            lam = a.interruptions_per_hour or 0.0
            if a.capacity_type != "spot" or lam <= 0:
                continue
            z = a.zone or a.region
            indep += a.nodes * max(0.0, lam - correlated * zone_mean[z])
            n, prem = per_zone.get(z, (0, 0.0))
            od = _on_demand_price(plan, a.provider, a.region, a.instance_type, catalog_prices) \
                if need_prices else None
            extra = math.nan if od is None else a.nodes * max(0.0, od - a.usd_per_hour)
            per_zone[z] = (n + a.nodes, prem + extra)
        fallback_ok = _phase_policy_allows_on_demand(plan, pool.phases)
        hits = []
        for z, (n, prem) in sorted(per_zone.items()):
            if correlated <= 0:
                continue
            premium = prem if fallback_ok and need_prices and not math.isnan(prem) else None
            if need_prices and fallback_ok and premium is None:
                notes.append(f"pool {pool.name}: no on-demand price for its spot nodes in {z} "
                             "(not in the plan or its catalog): they wait for spot capacity")
            hits.append(ZoneHit(zone_names.index(z), n, premium))
        pools.append(PoolModel(pool.name, pool.nodes, busy0[pool.name], "update" in pool.phases,
                               k, indep, tuple(hits)))
    order = {"rollout": 0, "update": 2}
    pools.sort(key=lambda p: 2 if p.stateful else order.get(p.name, 1))
    rate = sum(p.usd_per_hour + p.disk_usd_per_hour for p in plan.pools)
    overruns, wait = _bookings(plan, m0, notes)
    rate -= sum(b.nodes * b.usd_per_hour for b in plan.bookings if b.capacity_type == "block")
    return RunModel(
        name=plan.spec_name, mode=plan.pipeline_mode, steps=plan.steps, pools=tuple(pools),
        base_makespan_hours=m0, plan_makespan_hours=plan.makespan_hours,
        fill_fraction=plan.fill_fraction, lost_work_hours=sm.lost_work_minutes / 60.0,
        restart_hours=sm.restart_minutes / 60.0, checkpoint_hours=sm.checkpoint_minutes / 60.0,
        checkpoint_every_steps=plan.lifecycle.every_steps, checkpoint_mode=checkpoint_mode,
        zone_rates=zone_rates, zone_names=zone_names, shortage_hours=shortage_hours,
        usd_per_hour=rate, plan_total_usd=float(plan.total_cost_usd),
        deadline_hours=plan.deadline_hours,
        budget_usd=float(plan.budget_usd) if plan.budget_usd is not None else None,
        correlated=correlated, async_buffer=async_buffer,
        plan_pool_busy={p.name: p.busy_hours for p in plan.pools}, notes=tuple(notes),
        overruns=overruns, wait_hours=wait)


FLEX_START_HOURS = 168.0
"""GCP flex-start VMs run at most 7 days (ptplan.providers.blocks.FLEX_START_MAX_HOURS)."""


def _bookings(plan: Plan, m0: float, notes: list[str]
              ) -> tuple[tuple[tuple[float, float], ...], float]:
    """:attr:`RunModel.overruns` and :attr:`RunModel.wait_hours` of the plan's bookings."""
    out = []
    for b in plan.bookings:
        od = b.on_demand_usd_per_hour
        if od is None:
            notes.append(f"pool {b.pool}: no on-demand price for its {b.capacity_type} "
                         f"{b.instance_type} nodes: a run past the booking is priced at the "
                         "booking's rate")
            od = b.usd_per_hour
        if b.capacity_type == "block":
            out.append((max(0.0, b.duration_hours - m0), b.nodes * od))
        else:
            out.append((max(0.0, FLEX_START_HOURS - m0), b.nodes * max(0.0, od - b.usd_per_hour)))
    return tuple(out), max((b.wait_hours for b in plan.bookings), default=0.0)


def scaled(model: RunModel, factor: float) -> RunModel:
    """The same run with every hazard × ``factor`` (for monotonicity checks)."""
    from dataclasses import replace

    return replace(model, zone_rates=tuple(r * factor for r in model.zone_rates),
                   pools=tuple(replace(p, independent_rate=p.independent_rate * factor)
                               for p in model.pools))
