"""Small, realistic planner fixtures and an independent brute-force planner.

The brute force shares only the demand model with the planner (``phase_rates`` and each
rate's busy hours as a function of effective nodes, ``PhaseRate.busy``). The layouts, their
stalls, the spot overheads (stateless and gang), the capacity rules and the egress are restated
here from the documentation (``docs/planner.md``, ``docs/architecture.md``): it
enumerates every node count of every offer for every pool, every region and every layout, and
prices each combination directly. It knows nothing of Pareto fronts, bounds or the MILP.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace

from ptplan.core.hardware import gpus
from ptplan.demand.model import build_demand
from ptplan.demand.rates import phase_rates
from ptplan.policies.model import default_policy
from ptplan.providers.base import Catalog, Offer
from ptplan.spec.project import ProjectSpec, parse_spec


def small_spec(**overrides) -> ProjectSpec:
    """A GRPO run of a 1.5B model (Qwen2.5-1.5B shape) small enough to brute-force."""
    data = {
        "name": "grpo-1.5b-test",
        "method": "rl",
        "algorithm": "grpo",
        "model": {"params_b": 1.54, "layers": 28, "hidden_size": 1536, "heads": 12,
                  "kv_heads": 2, "head_dim": 128},
        "data": {"steps": 200, "prompts_per_step": 256, "samples_per_prompt": 8,
                 "prompt_tokens": 512, "response_tokens": 2048},
        "checkpoints": {"every_steps": 20},
        "sla": {"deadline_hours": 6},
        "placement": {"max_nodes_per_pool": 4},
    }
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    return parse_spec(data)


def offer(region: str, itype: str, gpu: str, gpn: int, kind: str, price: float,
          cap: int | None = None, lam: float | None = None, zone: str = "") -> Offer:
    return Offer(provider="lab", region=region, zone=zone, instance_type=itype, gpu=gpu,
                 gpus_per_node=gpn, capacity_type=kind, usd_per_hour=price,
                 interruptions_per_hour=lam if kind == "spot" else None, max_nodes=cap,
                 as_of="2026-11-01", source="test")


def small_catalog(h100_od: float = 20.0, h100_spot: float = 9.0, l4_od: float = 0.8,
                  l4_spot: float = 0.35, l40s_od: float = 1.9, r2_factor: float = 1.1,
                  caps: tuple[int, int] = (3, 2)) -> Catalog:
    od_cap, spot_cap = caps
    offers = []
    for region, f in (("r1", 1.0), ("r2", r2_factor)):
        offers += [
            offer(region, "h100x8", "H100", 8, "on_demand", h100_od * f, od_cap),
            offer(region, "h100x8", "H100", 8, "spot", h100_spot * f, spot_cap, 0.002, "a"),
            offer(region, "l4x1", "L4", 1, "on_demand", l4_od * f, od_cap),
            offer(region, "l4x1", "L4", 1, "spot", l4_spot * f, spot_cap, 0.004, "a"),
            offer(region, "l40sx1", "L40S", 1, "on_demand", l40s_od * f, od_cap),
        ]
    return Catalog(name="test", as_of="2026-11-01", offers=tuple(offers))


def scale_prices(catalog: Catalog, factor: float, kind: str | None = None) -> Catalog:
    offers = tuple(replace(o, usd_per_hour=o.usd_per_hour * factor)
                   if kind is None or o.capacity_type == kind else o for o in catalog.offers)
    return replace(catalog, offers=offers)


@dataclass(frozen=True)
class RefPool:
    name: str
    phases: tuple[str, ...]
    spot_ok: bool
    stateful: bool
    stall_hours: float
    remote_ok: bool = False


@dataclass(frozen=True)
class RefLayout:
    mode: str
    pools: tuple[RefPool, ...]
    tail: bool
    fill_fraction: float = 0.0
    policy: object = None


def ref_layouts(demand) -> list[RefLayout]:
    """The layouts the default policy allows, restated: SFT runs one pool; RL/OPD may run
    colocated (one pool, every phase in turn), sync or async (rollout + eval on one pool,
    scoring alone or with the update). The update never runs on spot (default policy) and is
    a gang (stateful); checkpoints stall the pool that trains for n × GB / write speed; the
    rollout pool waits for the weights every step (steps × params × 2 B / sync speed) and may
    take spot nodes in other zones; a colocated pool refits them in place every step (steps ×
    params × 2 B / refit speed); async adds one step of pipeline fill (1 / steps of the
    rollout's busy time)."""
    spec = demand.spec
    eff = spec.efficiency
    policy = default_policy()
    ckpt = demand.checkpoints * demand.checkpoint_gb / eff.checkpoint_write_gb_per_s / 3600.0
    work = tuple(p for p in demand.phases if p != "checkpoint")
    if spec.method == "sft":
        return [RefLayout("colocated", (RefPool("all", work, False, True, ckpt),), True,
                          policy=policy)]
    assert spec.model.finetune == "full"
    ws = demand.steps * spec.model.params_b * 2.0 / eff.weight_sync_gb_per_s / 3600.0
    gen = tuple(p for p in ("rollout", "eval") if p in work)
    rollout = RefPool("rollout", gen, True, False, ws, remote_ok=True)
    update = RefPool("update", ("update",), False, True, ckpt)
    out = []
    if spec.pipeline in ("auto", "colocated"):  # + the refit into the engines in place
        refit = demand.steps * spec.model.params_b * 2.0 / eff.colocated_refit_gb_per_s / 3600.0
        out.append(RefLayout("colocated", (RefPool("all", work, False, True, ckpt + refit),),
                             True, policy=policy))
    for mode in ("sync", "async"):
        if spec.pipeline not in ("auto", mode):
            continue
        fill = 1.0 / demand.steps if mode == "async" else 0.0
        if "scoring" in work:
            scoring = RefPool("scoring", ("scoring",), True, False, 0.0)
            merged = RefPool("update", ("scoring", "update"), False, True, ckpt)
            out.append(RefLayout(mode, (rollout, scoring, update), mode == "sync", fill,
                                 policy))
            out.append(RefLayout(mode, (rollout, merged), mode == "sync", fill, policy))
        else:
            out.append(RefLayout(mode, (rollout, update), mode == "sync", fill, policy))
    return out


def brute_force(spec: ProjectSpec, catalog: Catalog, objective: str = "cost"
                ) -> tuple[float, float] | None:
    """(cost, run hours) of the best plan by exhaustive enumeration, or None. Pools are held at
    the same time, so together they take at most each offer's cap. The run hours include the
    expected wait of the flex-start offers the plan uses (objective ``time`` minimises that sum:
    the plan cannot end sooner).

    Zones: the trainer sits in one zone of the region (each zone that has zoned offers is
    tried); pools other than rollout use region-level offers and that zone's; the rollout pool
    may use any zone, and each of its nodes outside the trainer's zone pays
    steps × weight GB × the catalog's ``cross_zone`` rate (the model of
    :mod:`ptplan.costs.network`, restated here; storage and fixed flows are not included).
    Every node carries a boot disk of the default policy's size, billed for the run at the
    provider's cheapest block-storage tier (docs/plan-json.md: GB × $/GB-month ÷ 730 per
    node-hour).

    Capacity booked for the run (``catalog.block_offers``, only with ``sla.start_after``;
    docs/blocks.md): a pool whose phases the policy lets book (default: the update
    alone) may take a block offer's nodes in any count the offer sells (``block_counts``, up
    to its cap), billed nodes × price × u·⌈run/u⌉ (at least one unit; the units' length within
    ``block_max_hours``), or flex-start nodes billed per hour for a run of at most 7 days whose
    wait, added to the run, meets the deadline."""
    demand = build_demand(spec)
    booked = list(catalog.block_offers) if spec.sla.start_after is not None else []
    disk_gb = default_policy().boot_disk_gb
    block: dict[str, float] = {}
    for t in catalog.storage_tiers:
        if t.access == "block":
            block[t.provider] = min(block.get(t.provider, math.inf), t.usd_per_gb_month)
    rates_by = {(e.provider, e.path): e.usd_per_gb for e in catalog.egress}
    eff = spec.efficiency
    cap = spec.placement.max_nodes_per_pool
    deadline, budget = spec.sla.deadline_hours, spec.budget.max_usd
    table = gpus()
    best: tuple[float, float] | None = None
    regions = sorted({(o.provider, o.region) for o in catalog.offers})
    sites = [(region, zone) for region in regions for zone in sorted(
        {o.zone for o in catalog.offers if (o.provider, o.region) == region and o.zone} or {""})]
    lost = (eff.lost_work_minutes + eff.restart_minutes) / 60.0
    for lay in ref_layouts(demand):
        for region, zone in sites:
            per_remote = demand.steps * demand.weight_sync_gb_per_step * rates_by.get(
                (region[0], "cross_zone"), 0.0)
            pool_choices = []
            for pool in lay.pools:
                choices = []
                may_book = set(pool.phases) <= set(default_policy().block_phases)
                offers = [o for o in list(catalog.offers) + (booked if may_book else [])
                          if (o.provider, o.region) == region
                          and (pool.spot_ok or o.capacity_type != "spot")
                          and (pool.remote_ok or not o.zone or o.zone == zone)]
                shapes = sorted({(o.gpu, o.gpus_per_node) for o in offers})
                for gpu, gpn in shapes:
                    rates = [phase_rates(demand, ph, table[gpu], gpn, lay.tail, lay.policy,
                                         colocated=lay.mode == "colocated")
                             for ph in pool.phases]
                    if not all(rates):
                        continue
                    group = [o for o in offers if (o.gpu, o.gpus_per_node) == (gpu, gpn)]
                    ranges = [[0, *(n for n in (o.block_counts or range(1, 65))
                                        if n <= (o.max_nodes or cap))]
                              if o.capacity_type == "block" else range((o.max_nodes or cap) + 1)
                              for o in group]
                    for counts in itertools.product(*ranges):
                        n = sum(counts)
                        if n < 1 or n > cap:
                            continue
                        if pool.stateful and n > 1 and \
                                gpn < spec.placement.multi_node_training_min_gpus_per_node:
                            continue
                        blocks = [(c, o) for c, o in zip(counts, group, strict=True)
                                  if c and o.capacity_type == "block"]
                        flex = [o for c, o in zip(counts, group, strict=True)
                                if c and o.capacity_type == "flex_start"]
                        price = sum(c * o.usd_per_hour for c, o in zip(counts, group,
                                                                        strict=True)
                                    if o.capacity_type != "block") \
                            + n * disk_gb * block.get(region[0], 0.0) / 730.0
                        if pool.stateful:
                            lam = sum(c * (o.interruptions_per_hour or 0.0)
                                      for c, o in zip(counts, group, strict=True)
                                      if o.capacity_type == "spot")
                            omega = math.sqrt(2 * eff.checkpoint_minutes / 60 * lam) \
                                + eff.restart_minutes / 60 * lam
                            if omega >= 0.9:
                                continue
                            e = n * (1 - omega)
                        else:
                            # stateless: each interruption loses the work in flight and
                            # a restart (capped at 99 % lost)
                            e = sum(c * ((1 - min(0.99, (o.interruptions_per_hour or 0.0)
                                                  * lost))
                                         if o.capacity_type == "spot" else 1.0)
                                    for c, o in zip(counts, group, strict=True))
                        busy = pool.stall_hours
                        for phase_rates_list in rates:
                            t_best = math.inf
                            for r in phase_rates_list:
                                if n < r.nodes_per_replica:
                                    continue
                                scale = ((n // r.nodes_per_replica) * r.nodes_per_replica / n
                                         if r.nodes_per_replica > 1 else 1.0)
                                # busy hours on e × scale effective nodes: the drain, the
                                # layout at that pool size and the floor (PhaseRate.busy)
                                t_best = min(t_best, r.busy(e * scale))
                            busy += t_best
                        if math.isfinite(busy):
                            used = {o.key: c for c, o in zip(counts, group, strict=True) if c}
                            remote = sum(c for c, o in zip(counts, group, strict=True)
                                         if o.zone and o.zone != zone)
                            choices.append((busy, price, used, remote * per_remote, blocks,
                                            flex))
                pool_choices.append(choices)
            caps = {o.key: o.max_nodes for o in list(catalog.offers) + booked}
            for combo in itertools.product(*pool_choices):
                taken: dict[str, int] = {}
                for choice in combo:  # pools are held together: they share each offer's cap
                    for key, n in choice[2].items():
                        taken[key] = taken.get(key, 0) + n
                if any(caps[k] is not None and n > caps[k] for k, n in taken.items()):
                    continue
                busy = {p.name: c[0] for p, c in zip(lay.pools, combo, strict=True)}
                if lay.mode == "async":
                    run = max(busy.values()) + lay.fill_fraction * busy.get("rollout", 0.0)
                else:
                    run = sum(busy.values())
                cost = run * sum(c[1] for c in combo) + sum(c[3] for c in combo)
                billed = [(n, o, o.block_unit_hours * max(1, math.ceil(run / o.block_unit_hours
                                                                        - 1e-9)))
                          for c in combo for n, o in c[4]]
                if any(h > (o.block_max_hours or math.inf) + 1e-9 for _, o, h in billed):
                    continue
                cost += sum(n * o.usd_per_hour * h for n, o, h in billed)
                wait = max((o.wait_hours for c in combo for o in c[5]), default=0.0)
                if any(c[5] for c in combo) and run > 168.0 * (1 + 1e-9):
                    continue
                if deadline is not None and run + wait > deadline * (1 + 1e-9):
                    continue
                if budget is not None and cost > budget * (1 + 1e-9):
                    continue
                # time: the run plus the flex-start wait (the plan cannot end sooner)
                key = (cost, run + wait) if objective == "cost" else (run + wait, cost)
                if best is None or key < ((best[0], best[1]) if objective == "cost"
                                          else (best[1], best[0])):
                    best = (cost, run + wait)
    return best
