"""Storage in the plan: data classes sized from the spec, one tier per class, lifecycle billed.

Data classes (sizes in GB = 10^9 bytes; lifetimes in hours, linear in the run time D):

==========================  ==============================================================  =====
class                       objects and lifetime                                            access
==========================  ==============================================================  =====
dataset                     prompts (RL/OPD) or examples (SFT) × tokens × 4 B; the run       ms
hot_checkpoints             the last ``keep_hot`` full checkpoints (weights + optimizer       ms
                            state): each is hot for keep_hot checkpoint intervals; the last
                            ones stay hot to the end of the run and ``retention_days`` after
retained_checkpoints        the others (neither hot nor archived) after they leave the hot   ms
                            set: ``retention_days``, then deleted
archived_checkpoints        every ``archive_every``-th checkpoint, weights only (bf16), kept  hours
                            ``metrics_days``; one expected retrieval
rollout_logs                generated tokens × 8 B (token id, log-prob); rollout_log_days    hours
agent_trajectories          agent runs: every episode's full trajectory (prompt, turns and     ms
                            observations) × 4 B + ``agent.replay_state_mb``; each kept
                            ``agent.trajectory_days`` (default ``retention_days``) after written
eval_outputs                eval tokens × 4 B, ``metrics_days``                              hours
==========================  ==============================================================  =====

Each class takes the tier of the plan's provider (and region) that allows its access latency
and costs least: Σ objects GB × $/GB-month × max(lifetime, the tier's minimum duration) +
expected retrievals × fee. A tier whose minimum duration makes it dearer than a hotter one is
therefore never chosen. Lifecycle parameters come from the spec's ``checkpoints`` block where
the user set them, otherwise from the policy's ``storage`` block.

The cost is a non-decreasing function of D for a given provider and region, so the planner adds
it exactly to every candidate plan (:mod:`ptplan.planner.search.exact`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ptplan.demand.model import Demand
from ptplan.policies.model import Policy
from ptplan.providers.base import Catalog, StorageTier

BYTES_PER_TOKEN = 4.0
"""Tokenised text as int32 ids (datasets, eval outputs)."""
LOG_BYTES_PER_TOKEN = 8.0
"""Rollout logs: token id + log-probability."""
HOURS_PER_MONTH = 730.0
ACCESS_RANK = {"ms": 0, "minutes": 1, "hours": 2}
FAR_HOURS = 1e7
"""Far end of the exact piecewise-linear storage cost (about 1,100 years of run time)."""


@dataclass(frozen=True)
class ObjectGroup:
    """``count`` objects of ``gb`` each, alive ``a + b·D`` hours (D = run time)."""

    count: float
    gb: float
    a_hours: float
    b: float


@dataclass(frozen=True)
class DataClass:
    name: str
    access: str
    groups: tuple[ObjectGroup, ...]
    retrieval_gb: float = 0.0

    @property
    def gb(self) -> float:
        return sum(g.count * g.gb for g in self.groups)


def lifecycle(demand: Demand, policy: Policy) -> dict[str, int]:
    """keep_hot, archive_every, retention_days (spec where set, else policy),
    rollout_log_days and metrics_days (policy)."""
    spec = demand.spec
    given = spec.checkpoints.model_fields_set
    out = {k: getattr(policy.storage, k) for k in
           ("keep_hot", "archive_every", "retention_days", "rollout_log_days", "metrics_days")}
    for k in ("keep_hot", "archive_every", "retention_days"):
        if k in given:
            out[k] = getattr(spec.checkpoints, k)
    return out


def data_classes(demand: Demand, policy: Policy) -> list[DataClass]:
    spec = demand.spec
    life = lifecycle(demand, policy)
    d = spec.data
    out: list[DataClass] = []
    if spec.method == "sft":
        tokens = (d.examples or 0) * (d.tokens_per_example or 0)
    else:
        tokens = demand.steps * spec.prompts_per_run * (d.prompt_tokens or 0)
    out.append(DataClass("dataset", "ms", (ObjectGroup(1, tokens * BYTES_PER_TOKEN / 1e9, 0, 1),)))
    n = demand.checkpoints
    if n > 0:
        full = demand.checkpoint_gb
        interval_b = spec.checkpoint_every_steps / demand.steps  # × D = hours between writes
        k = min(life["keep_hot"], n)
        retention = life["retention_days"] * 24.0
        n_arch = n // life["archive_every"]
        # the last k checkpoints: hot from their write (step (n - j + 1) x every, before the
        # end when steps is not a multiple of every) to the end, then retention_days
        tail_b = (demand.steps - n * spec.checkpoint_every_steps) / demand.steps
        last = tuple(ObjectGroup(1, full, retention, tail_b + (j - 1) * interval_b)
                     for j in range(1, k + 1))
        earlier = (ObjectGroup(n - k, full, 0, k * interval_b),) if n > k else ()
        out.append(DataClass("hot_checkpoints", "ms", earlier + last))
        # retained: the earlier checkpoints that are not archived (an archived checkpoint
        # among the last k is hot, not retained, and does not reduce the earlier ones)
        rest = (n - k) - (n - k) // life["archive_every"]
        if rest:
            out.append(DataClass("retained_checkpoints", "ms",
                                 (ObjectGroup(rest, full, retention, 0),)))
        if n_arch:
            weights = weights_gb(demand)
            out.append(DataClass("archived_checkpoints", "hours",
                                 (ObjectGroup(n_arch, weights, life["metrics_days"] * 24.0, 0),),
                                 retrieval_gb=weights))
    generated = sum(p.tokens for p in demand.phase_parts("rollout") if p.kind == "decode")
    if generated:
        out.append(DataClass("rollout_logs", "hours", (ObjectGroup(
            1, generated * LOG_BYTES_PER_TOKEN / 1e9, life["rollout_log_days"] * 24.0, 0),)))
    if spec.agent is not None:
        out.append(agent_trajectories(demand, life))
    evaluated = sum(p.tokens for p in demand.phase_parts("eval") if p.kind == "decode")
    if evaluated:
        out.append(DataClass("eval_outputs", "hours", (ObjectGroup(
            1, evaluated * BYTES_PER_TOKEN / 1e9, life["metrics_days"] * 24.0, 0),)))
    return [c for c in out if c.gb > 0]


def agent_trajectories(demand: Demand, life: dict[str, int]) -> DataClass:
    """Trajectory logs and replay state of an agent run (issue #25): the run's episodes, each
    P + K·τ + (K − 1)·o tokens of text at 4 B plus its replay state, written through the run and
    each kept ``trajectory_days`` after it is written (an age rule expires it: GB × days)."""
    spec = demand.spec
    agent = spec.agent
    assert agent is not None
    episodes = demand.steps * spec.prompts_per_run * (spec.data.samples_per_prompt or 1)
    tokens = (spec.data.prompt_tokens or 0) + agent.response_tokens + agent.observation_tokens
    gb = episodes * (tokens * BYTES_PER_TOKEN + agent.replay_state_mb * 1e6) / 1e9
    days = agent.trajectory_days if agent.trajectory_days is not None \
        else life["retention_days"]
    return DataClass("agent_trajectories", "ms", (ObjectGroup(1, gb, days * 24.0, 0),))


def weights_gb(demand: Demand) -> float:
    """A checkpoint without optimizer state: bf16 weights (full fine-tuning) or the weights'
    share of a LoRA checkpoint (2 of its bytes per parameter: 2 + the optimizer state's
    adam_bytes_per_param − 4 when the checkpoint holds it, else 2)."""
    spec = demand.spec
    if spec.model.finetune == "full":
        return spec.model.params_b * 2.0
    state = max(0.0, spec.efficiency.adam_bytes_per_param - 4.0) \
        if spec.checkpoints.with_optimizer else 0.0
    return demand.checkpoint_gb * 2.0 / (2.0 + state)


def tiers_for(catalog: Catalog, provider: str, region: str) -> list[StorageTier]:
    exact = [t for t in catalog.storage_tiers if t.provider == provider and t.region == region]
    return exact or [t for t in catalog.storage_tiers
                     if t.provider == provider and t.region == "*"]


def class_cost(c: DataClass, tier: StorageTier, run_hours: np.ndarray | float
               ) -> tuple[np.ndarray | float, np.ndarray | float]:
    """(billed GB-months, cost in USD) of a class on a tier, for run time(s) D."""
    min_hours = tier.min_days * 24.0
    gb_months: np.ndarray | float = 0.0
    for g in c.groups:
        life = g.a_hours + g.b * np.asarray(run_hours, dtype=float)
        gb_months = gb_months + g.count * g.gb * np.maximum(life, min_hours) / HOURS_PER_MONTH
    cost = gb_months * tier.usd_per_gb_month + c.retrieval_gb * tier.retrieval_usd_per_gb
    return gb_months, cost


def eligible(c: DataClass, tiers: Sequence[StorageTier]) -> list[StorageTier]:
    return [t for t in tiers if ACCESS_RANK.get(t.access, 9) <= ACCESS_RANK[c.access]]


@dataclass(frozen=True)
class _Compiled:
    """One class on the eligible tiers of one region, as arrays (tiers × object groups)."""

    coef: np.ndarray  # count × GB × $/GB-month / 730, per tier and group
    a: np.ndarray  # lifetime intercept per group (h)
    b: np.ndarray  # lifetime slope per group (× D)
    min_hours: np.ndarray  # per tier
    retrieval: np.ndarray  # per tier (USD)


@dataclass(frozen=True)
class StorageModel:
    """Storage cost as a function of the run time, per (provider, region)."""

    classes: tuple[DataClass, ...]
    catalog: Catalog
    _compiled: dict = field(default_factory=dict, compare=False, repr=False)

    def _tiers(self, provider: str, region: str) -> tuple[int, tuple[StorageTier, ...]]:
        """The region's tiers and a number for that set of tiers (regions often share their
        provider's ``*`` tiers): what is compiled from them is kept per set, under its number,
        so that a lookup (every :meth:`cost` call) hashes an int, not the tiers."""
        key = ("tiers", provider, region)
        if key not in self._compiled:
            tiers = tuple(tiers_for(self.catalog, provider, region))
            one = self._compiled.setdefault(("set", tiers), tiers)  # one tuple per set, kept
            self._compiled[key] = (id(one), one)  # alive here, so its id names the set
        return self._compiled[key]  # type: ignore[no-any-return]

    def _compile(self, provider: str, region: str) -> list[_Compiled]:
        number, tiers = self._tiers(provider, region)
        key = ("compiled", number)
        if key not in self._compiled:
            out = []
            for c in self.classes:
                ok = eligible(c, tiers)
                if not ok:
                    continue
                size = np.array([g.count * g.gb for g in c.groups])
                price = np.array([t.usd_per_gb_month for t in ok])
                out.append(_Compiled(
                    coef=price[:, None] * size[None, :] / HOURS_PER_MONTH,
                    a=np.array([g.a_hours for g in c.groups]),
                    b=np.array([g.b for g in c.groups]),
                    min_hours=np.array([t.min_days * 24.0 for t in ok]),
                    retrieval=np.array([c.retrieval_gb * t.retrieval_usd_per_gb for t in ok]),
                ))
            self._compiled[key] = out
        return self._compiled[key]

    def _exact(self, provider: str, region: str, d: np.ndarray) -> np.ndarray:
        """Least storage cost at each run time in ``d`` (1-D), evaluated term by term."""
        total = np.zeros(d.shape)
        for k in self._compile(provider, region):
            total += self._tier_costs(k, d).min(axis=0)
        return total

    def _breakpoints(self, provider: str, region: str) -> tuple[np.ndarray, np.ndarray]:
        """The cost as an exact piecewise-linear function of D: its breakpoints and values.

        Each (class, tier) cost is piecewise linear with kinks where an object group's
        lifetime a + b·D crosses the tier's minimum duration; between kinks every tier's cost
        is linear, so the least over tiers changes slope only at the kinks and where two
        tiers' lines cross. Those points (with 0 and a far end) are breakpoints of the sum."""
        key = ("pwl", self._tiers(provider, region)[0])
        if key in self._compiled:
            return self._compiled[key]  # type: ignore[no-any-return]
        points = {0.0, FAR_HOURS}
        for k in self._compile(provider, region):
            kinks = {0.0, FAR_HOURS}
            for m in k.min_hours:
                for a, b in zip(k.a, k.b, strict=True):
                    if b > 0 and 0 < (m - a) / b < FAR_HOURS:
                        kinks.add(float((m - a) / b))
            ks = np.array(sorted(kinks))
            values = self._tier_costs(k, ks)  # tiers × K
            for lo in range(len(ks) - 1):
                x0, x1 = ks[lo], ks[lo + 1]
                y0, y1 = values[:, lo], values[:, lo + 1]
                for i in range(len(y0)):
                    for j in range(i + 1, len(y0)):
                        d0, d1 = y0[i] - y0[j], y1[i] - y1[j]
                        if d0 * d1 < 0:  # the two tiers' lines cross inside the interval
                            points.add(float(x0 + (x1 - x0) * d0 / (d0 - d1)))
            points.update(kinks)
        xs = np.array(sorted(points))
        out = (xs, self._exact(provider, region, xs))
        self._compiled[key] = out
        return out

    @staticmethod
    def _tier_costs(k: _Compiled, d: np.ndarray) -> np.ndarray:
        """Cost of the class on each eligible tier (tiers × N) at run times ``d``."""
        life = k.a[:, None] + k.b[:, None] * d[None, :]  # groups × N
        billed = np.maximum(life[None, :, :], k.min_hours[:, None, None])
        return (k.coef[:, :, None] * billed).sum(axis=1) + k.retrieval[:, None]

    def cost(self, provider: str, region: str, run_hours: np.ndarray | float
             ) -> np.ndarray | float:
        """Least storage cost (USD) at run time(s) D; 0 where the catalog has no tiers.
        Interpolated on the exact breakpoints (see :meth:`_breakpoints`); run times beyond
        the far end are evaluated term by term."""
        d = np.asarray(run_hours, dtype=float)
        xs, ys = self._breakpoints(provider, region)
        flat = d.reshape(-1)
        out = np.interp(flat, xs, ys)
        beyond = flat > xs[-1]
        if beyond.any():
            out[beyond] = self._exact(provider, region, flat[beyond])
        return out.reshape(d.shape)

    def choose(self, provider: str, region: str, run_hours: float
               ) -> list[tuple[DataClass, StorageTier, float, float]]:
        """Per class: (class, tier, billed GB-months, cost) at run time D."""
        tiers = tiers_for(self.catalog, provider, region)
        out = []
        for c in self.classes:
            scored = []
            for t in eligible(c, tiers):
                gbm, usd = class_cost(c, t, run_hours)
                scored.append((float(usd), t.tier, t, float(gbm)))
            if scored:
                usd, _, t, gbm = min(scored, key=lambda x: (x[0], x[1]))
                out.append((c, t, gbm, usd))
        return out
