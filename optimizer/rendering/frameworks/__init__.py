"""Framework targets of the launch commands: one module per framework and version line.

``render --framework NAME==LINE`` picks one (:func:`parse_framework`); the default is the
current release line of veRL. Each module turns the plan (pools, phases, layouts, precisions,
lifecycle) and the run settings of the spec (batch, samples, lengths, eval, checkpoint
contents: the plan does not record them) into :class:`Setting` rows, field → framework key →
value, and the rows into the command line. :data:`FIELDS` is the mapping as data; the same
table is in ``docs/render.md`` and ``tests/test_launch_mapping.py`` checks both, and walks the
rows of every example against the rendered command and the framework's own parser.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Any

from ptplan.core.errors import InputError
from ptplan.rendering.frameworks.fields import FIELDS as FIELDS  # the mapping, re-exported
from ptplan.spec import frameworks as releases


@dataclass(frozen=True)
class Framework:
    name: str
    line: str
    """Release line (``0.9``): the flags and entry points of this module hold for all of it."""
    pin: str
    """The release installed by the launch (``pip install NAME==PIN``) and checked in CI."""

    @property
    def spec(self) -> str:
        return f"{self.name}=={self.pin}"

    @property
    def key(self) -> str:
        """``name==line``, the spec's ``framework:`` value (:mod:`ptplan.spec.frameworks`)."""
        return f"{self.name}=={self.line}"

    @property
    def install(self) -> list[str]:
        """The install step (SkyPilot ``setup``, launch scripts) as words: this release and
        the Python dependencies it declares, on an image with CUDA, torch, vLLM and Ray
        (:data:`ptplan.rendering.context.DEFAULT_IMAGE`, or ``--image``)."""
        return ["python3", "-m", "pip", "install", self.spec]


VERL_0_9, OPENRLHF_0_11 = (Framework(r.package, r.key.partition("==")[2], r.pin)
                           for r in (releases.VERL_0_9, releases.OPENRLHF_0_11))
"""The launch targets of the capability table's releases (one place holds each pin)."""
SUPPORTED: dict[str, Framework] = {f.key: f for f in (VERL_0_9, OPENRLHF_0_11)}
DEFAULT = VERL_0_9
"""Current release lines on PyPI: veRL 0.9.x, OpenRLHF 0.11.x."""


def parse_framework(text: str | None) -> Framework:
    """``verl``, ``verl==0.9`` or ``verl==0.9.1``, read as the spec's ``framework:`` is."""
    if not text:
        return DEFAULT
    key: str | None = None
    with contextlib.suppress(InputError):  # an unknown name: the message below
        key = releases.normalise(text)
    if key not in SUPPORTED:  # unknown, or ``any`` (no release to launch)
        raise InputError(f"--framework: {text!r} is not supported; use one of "
                         f"{', '.join(SUPPORTED)} (default {DEFAULT.key})")
    return SUPPORTED[key]


def framework_for(plan: Any, text: str | None) -> Framework:
    """The release a plan's launch targets: the one the plan was made for (schema 9); for a plan
    made for ``any`` (or before schema 9), ``--framework`` or the default. A ``--framework``
    other than the plan's is refused: the plan bought pools, GPUs and precisions for its own."""
    made_for = getattr(plan, "framework_key", "any")
    if text is None:
        return SUPPORTED.get(made_for, DEFAULT)
    fw = parse_framework(text)
    if made_for != "any" and fw.key != made_for:
        raise InputError(f"--framework {text}: the plan was made for {made_for}; its pools, GPUs "
                         f"and precisions are what {made_for} runs. Re-plan for {fw.key} "
                         f"(`ptplan plan SPEC --framework {fw.key}`) or drop --framework")
    return fw


@dataclass(frozen=True)
class Setting:
    """One planned value as a framework argument: ``field`` (the planned quantity), ``key``
    (the framework's config key or flag), ``value`` (what the composed config must hold)."""

    field: str
    key: str
    value: Any
    source: str
    new: bool = False
    """veRL: a key absent from the framework's YAML (Hydra ``+key=value``)."""


# ---- what the plan and the spec say -------------------------------------------------------

def phase(plan: Any, name: str) -> Any:
    return next((p for p in plan.phases if p.name == name), None)


def pool(plan: Any, name: str | None) -> Any:
    return next((p for p in plan.pools if p.name == name), None)


@dataclass(frozen=True)
class Geometry:
    """Pools and engines the plan sized."""

    upool: Any
    rpool: Any
    spool: Any
    engine_gpus: int
    engines: int

    @property
    def separate(self) -> bool:
        return self.rpool.name != self.upool.name

    @property
    def tp(self) -> int:
        """An engine's tensor-parallel degree: all its GPUs, across nodes when it spans them (no
        pipeline-parallel rollout: verl/workers/config/rollout.py rejects it for vLLM)."""
        return self.engine_gpus


def geometry(plan: Any) -> Geometry:
    update = phase(plan, "update")
    upool = pool(plan, update.pool if update else None) or plan.pools[0]
    rollout = phase(plan, "rollout")
    rpool = pool(plan, rollout.pool) if rollout else upool
    g = max(1, rollout.replica_gpus if rollout else 1)
    if rollout is not None and rollout.parallel_layout is not None:
        g = max(g, rollout.parallel_layout.tp)  # the engine size priced at this pool
    scoring = phase(plan, "scoring")
    spool = pool(plan, scoring.pool) if scoring else None
    return Geometry(upool, rpool, spool, g, max(1, rpool.nodes * rpool.gpus_per_node // g))


def scoring_models(plan: Any) -> list[str]:
    s = phase(plan, "scoring")
    return list(s.models) if s is not None else []


@dataclass(frozen=True)
class Run:
    """Run settings of the spec that the plan does not record (the plan was priced with them)."""

    batch: int
    samples: int
    prompt_tokens: int
    max_response_tokens: int
    sequence_tokens: int
    epochs: float
    update_epochs: int
    mini_batches: int
    oversample: float
    eval_every: int | None
    eval_prompts: int | None
    eval_samples: int
    eval_response_tokens: int | None
    with_optimizer: bool
    gpu_memory_utilization: float
    colocated_fraction: float
    agent: Any = None
    """The spec's ``agent:`` section (issue #25), None for single-turn rollouts."""
    lora_rank: int | None = None
    """LoRA adapters of this rank (``model.finetune: lora``); None for a full fine-tune."""
    packed: bool = True  # efficiency.sequence_packing: the plan priced token budgets
    staleness: int = 1
    """Steps an async rollout may run ahead of the update (``max_staleness_steps``)."""


def run_of(spec: Any) -> Run:
    d, e = spec.data, spec.eval
    sft = spec.method == "sft"
    return Run(
        batch=spec.sft_batch_size if sft else int(d.prompts_per_step or 0),
        samples=1 if sft else int(d.samples_per_prompt or 1),
        prompt_tokens=int(d.prompt_tokens or 0),
        max_response_tokens=0 if sft else int(spec.max_response_tokens),
        sequence_tokens=int(d.tokens_per_example or 0) if sft else
        int((d.prompt_tokens or 0) + spec.max_response_tokens),
        epochs=float(spec.epochs), update_epochs=int(spec.update_epochs),
        mini_batches=int(d.mini_batches_per_step or 1),
        oversample=1.0 if sft else float(spec.oversample_factor),
        eval_every=e.every_steps if e else None, eval_prompts=e.prompts if e else None,
        eval_samples=e.samples_per_prompt if e else 1,
        eval_response_tokens=e.response_tokens if e else None,
        with_optimizer=bool(spec.checkpoints.with_optimizer),
        gpu_memory_utilization=float(spec.efficiency.gpu_memory_utilization),
        colocated_fraction=float(spec.efficiency.colocated_rollout_memory_fraction),
        agent=getattr(spec, "agent", None), packed=bool(spec.efficiency.sequence_packing),
        lora_rank=spec.lora_rank if spec.model.finetune == "lora" else None,
        staleness=int(spec.max_staleness_steps))


def max_turns(agent: Any) -> int:
    """The longest episode's model turns (the cap the frameworks take): ``agent.turns``, or
    its ``max`` when it is a distribution."""
    return int(agent.max_turns)


def ceil_int(x: float) -> int:
    return math.ceil(x - 1e-9)
