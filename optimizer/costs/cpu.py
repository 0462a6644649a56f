"""CPU pools (issue #25 item 2): the agent sandboxes and the rule-based reward run on CPU nodes
that the plan sizes, places in the region of its GPU pools and prices (docs/demand-model.md §4.9).

* **Sandbox pool** (``agent.sandbox``): every episode of a step in flight holds its sandbox, so
  the pool holds S = min(N_step, W) sandboxes (N_step = prompts_per_step × samples_per_prompt
  episodes per step, W = ``agent.tool_workers`` when set), S × vcpus vCPUs and S × memory_gib GiB.
  It is held for the whole run: n = max(⌈S·v / v_node⌉, ⌈S·m / m_node⌉) nodes of the type with
  the least n × $/h, cost n × $/h × D. Sized this way no tool call waits for a sandbox, so the
  step is not slowed (the sandbox start-up is in the rollout floor, §4.8).
* **Reward pool** (``reward.cpu_seconds_per_sample`` c): the run's N samples need N·c/3600
  vCPU-hours; an autoscaled pool (Karpenter / GKE autoscaler scale it with the pending scoring
  pods) bills them on the type with the least $/vCPU-hour: node-hours = N·c / (3600·v_node),
  cost = node-hours × $/h; at its peak it holds one vCPU per sample of a step,
  ⌈N_step / v_node⌉ nodes, so a step's scoring takes c seconds of wall time.
* **Preparation pool** (``data.prep_cpu_hours`` H, ``data.prep_hours`` T, default 1 h): the
  data-preparation stage before the GPU run bills H/v node-hours on the type with the least
  $/vCPU-hour, on ⌈H / (T·v)⌉ nodes so that it takes T; the deadline is the GPU run's (the
  stage's T is listed, not added to the makespan).

All three are stateless (a reclaimed sandbox restarts its episode, a reclaimed scorer its
sample, a preparation worker its shard): spot where the policy lets the phase they serve
(sandbox and prep: rollout, reward: scoring) use spot and ``max_spot_share`` is 1, else
on-demand. A region without CPU offers cannot hold the plan."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ptplan.demand.model import Demand
from ptplan.policies.model import Policy
from ptplan.providers.base import Catalog, Offer

PREP_HOURS = 1.0
"""Default wall time of the data-preparation stage (``data.prep_hours``)."""


@dataclass(frozen=True)
class CpuNeed:
    """What one CPU pool needs, before an instance type is chosen."""

    name: Literal["sandbox", "reward", "prep"]
    basis: Literal["held", "work"]
    """``held`` (the whole run) or ``work`` (vCPU-hours billed as used)."""
    vcpus: float
    """vCPUs held (held) or at the peak (work)."""
    memory_gib: float
    vcpu_hours: float
    """The run's vCPU-hours of work (work basis; 0 for held pools)."""
    phase: str
    """The phase whose capacity types the pool follows."""


@dataclass(frozen=True)
class CpuChoice:
    need: CpuNeed
    offer: Offer
    nodes: int
    node_hours_fixed: float
    """Node-hours that do not depend on the run time (work basis)."""

    def node_hours(self, run_hours: float) -> float:
        return self.nodes * run_hours if self.need.basis == "held" else self.node_hours_fixed

    def cost(self, run_hours: float) -> float:
        return self.node_hours(run_hours) * self.offer.usd_per_hour


def steps_episodes(demand: Demand) -> int:
    """N_step: samples (episodes) of one step."""
    d = demand.spec.data
    return (d.prompts_per_step or 0) * (d.samples_per_prompt or 1)


def cpu_needs(demand: Demand) -> list[CpuNeed]:
    """The spec's CPU pools (empty without ``agent.sandbox`` and ``reward``)."""
    spec = demand.spec
    n_step = steps_episodes(demand)
    out: list[CpuNeed] = []
    agent = spec.agent
    if agent is not None and agent.sandbox is not None and n_step > 0:
        s = n_step if agent.tool_workers is None else min(n_step, agent.tool_workers)
        out.append(CpuNeed("sandbox", "held", s * agent.sandbox.vcpus,
                           s * agent.sandbox.memory_gib, 0.0, "rollout"))
    d = spec.data
    if d.prep_cpu_hours is not None:
        hours = d.prep_hours if d.prep_hours is not None else PREP_HOURS
        out.append(CpuNeed("prep", "work", d.prep_cpu_hours / hours, 0.0, d.prep_cpu_hours,
                           "rollout"))
    if spec.reward is not None and n_step > 0:
        samples = n_step * (spec.data.steps or 0)
        out.append(CpuNeed("reward", "work", float(n_step), 0.0,
                           samples * spec.reward.cpu_seconds_per_sample / 3600.0, "scoring"))
    return out


def allowed_capacity(policy: Policy, phase: str) -> set[str]:
    """On-demand always; spot when the phase may use spot and the spot share is not capped."""
    kinds = {"on_demand"}
    if "spot" in policy.capacity_types(phase) and policy.max_spot_share >= 1.0:
        kinds.add("spot")
    return kinds


def nodes_for(need: CpuNeed, offer: Offer) -> int:
    v = float(offer.vcpus or 0.0)
    m = float(offer.memory_gib or 0.0)
    if v <= 0:
        return 0
    n = math.ceil(need.vcpus / v - 1e-9)
    if need.memory_gib > 0:
        n = max(n, math.ceil(need.memory_gib / m - 1e-9)) if m > 0 else 0
    return n


def choose(need: CpuNeed, offers: list[Offer]) -> CpuChoice | None:
    """The cheapest usable offer for one pool (ties: offer order), or None."""
    best: tuple[float, tuple, CpuChoice] | None = None
    for o in offers:
        n = nodes_for(need, o)
        if n <= 0:
            continue
        if need.basis == "held":
            rate, fixed = n * o.usd_per_hour, 0.0
        else:
            fixed = need.vcpu_hours / float(o.vcpus or 1.0)
            rate = fixed * o.usd_per_hour
        key = (rate, o.order)
        if best is None or key < best[:2]:
            best = (rate, o.order, CpuChoice(need, o, n, fixed))
    return None if best is None else best[2]


@dataclass(frozen=True)
class CpuPoolModel:
    needs: tuple[CpuNeed, ...]
    offers: tuple[Offer, ...]
    policy: Policy

    def choices(self, provider: str, region: str) -> list[CpuChoice] | None:
        """Each pool's instance type in a region (None if a pool has no usable offer there)."""
        out = []
        for need in self.needs:
            kinds = allowed_capacity(self.policy, need.phase)
            here = [o for o in self.offers if o.provider == provider and o.region == region
                    and o.capacity_type in kinds]
            c = choose(need, here)
            if c is None:
                return None
            out.append(c)
        return out

    def rates(self, provider: str, region: str) -> tuple[float, float]:
        """(fixed USD, USD per hour of the run) at a region; (inf, inf) without CPU offers."""
        key = (provider, region)
        memo = self.__dict__.setdefault("_memo", {})
        if key not in memo:
            ch = self.choices(provider, region)
            if ch is None:
                memo[key] = (math.inf, math.inf)
            else:
                memo[key] = (sum(c.cost(0.0) for c in ch if c.need.basis == "work"),
                             sum(c.nodes * c.offer.usd_per_hour for c in ch
                                 if c.need.basis == "held"))
        return memo[key]

    def cost(self, provider: str, region: str, run_hours):  # type: ignore[no-untyped-def]
        fixed, per_hour = self.rates(provider, region)
        d = np.asarray(run_hours, dtype=float)
        if math.isinf(fixed):
            return np.full_like(d, math.inf)
        return fixed + per_hour * d


def cpu_pool_model(demand: Demand, catalog: Catalog, policy: Policy) -> CpuPoolModel | None:
    """None when the spec has no CPU work (plans stay as they were)."""
    needs = cpu_needs(demand)
    if not needs:
        return None
    return CpuPoolModel(tuple(needs), tuple(catalog.cpu_offers), policy)
