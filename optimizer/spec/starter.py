"""``ptplan init``: a commented starter spec for SFT, RL (GRPO) or on-policy distillation,
its models given by preset. The job's sizes are the examples' (``examples/``); the deadline
and budget grow with the model's active parameters (GPU-hours scale with them, 6·N·D), so the
spec plans as written for any preset on the embedded catalog."""

from __future__ import annotations

import math
import re

import yaml

from ptplan.core.errors import InputError
from ptplan.spec.presets import Preset, lookup
from ptplan.spec.project import parse_spec

METHODS = ("sft", "rl", "opd")
DEFAULT_MODEL = {"sft": "meta-llama/Llama-3.1-8B", "rl": "Qwen/Qwen2.5-7B",
                 "opd": "Qwen/Qwen3-8B"}
DEFAULT_TEACHER = "Qwen/Qwen3-32B"
REFERENCE_B = 8.0
"""The examples' deadlines and budgets are for a model of about 8B active parameters."""


def _scale(p: Preset, teacher: Preset | None = None) -> float:
    active = p.shape.active_params / 1e9
    if teacher is not None:
        active = max(active, teacher.shape.active_params / 1e9 / 4)  # scores, no update
    return max(1.0, active / REFERENCE_B)


def _hours(base: float, scale: float) -> int:
    return int(math.ceil(base * math.sqrt(scale) / 12.0) * 12)  # whole half-days


def _usd(base: float, scale: float) -> int:
    return int(math.ceil(base * scale / 5000.0) * 5000)


def _slug(method: str, name: str) -> str:
    tail = re.sub(r"[^a-z0-9]+", "-", name.rsplit("/", 1)[-1].lower()).strip("-")
    return f"{method}-{tail}"[:60]


def _model_lines(key: str, p: Preset, extra: str = "") -> str:
    s = p.shape
    kind = (f"MoE, {s.active_params / 1e9:.1f}B of {s.params / 1e9:.1f}B active, "
            f"{s.experts_per_token} of {s.experts} experts per token" if s.is_moe
            else f"{s.params / 1e9:.2f}B dense")
    return (f"{key}:  # {kind}; {s.layers} layers, {s.kv_heads} KV heads of dim {s.head_dim} "
            f"(`ptplan models show {p.name}`)\n  preset: {p.name}\n{extra}")


def starter(method: str = "rl", model: str | None = None, teacher: str | None = None) -> str:
    """The YAML text of a starter spec, checked to load as a spec."""
    text = _text(method, model, teacher)
    parse_spec(yaml.safe_load(text), "ptplan init")
    return text


def _text(method: str, model: str | None, teacher: str | None) -> str:
    if method not in METHODS:
        raise InputError(f"--method: {method!r} is not one of {', '.join(METHODS)}; e.g. "
                         "--method rl")
    if teacher is not None and method != "opd":
        raise InputError(f"--teacher: a teacher applies to --method opd only (got --method "
                         f"{method}); drop --teacher or use --method opd")
    m = _lookup("--model", model or DEFAULT_MODEL[method])
    t = _lookup("--teacher", teacher or DEFAULT_TEACHER) if method == "opd" else None
    k = _scale(m, t)
    head = ("# Written by `ptplan init`. Plan it with `ptplan plan THIS.yaml`; change any "
            "figure to your job's.\n# The spec reference: docs/spec.md. Fields typed beside "
            "a preset override it.\n")
    if method == "sft":
        return head + _SFT.format(name=_slug("sft", m.name),
                                  model=_model_lines("model", m, "  finetune: full\n"),
                                  hours=_hours(48, k), usd=_usd(10000, k))
    if method == "rl":
        return head + _RL.format(name=_slug("grpo", m.name),
                                 model=_model_lines("model", m, "  finetune: full\n"),
                                 hours=_hours(72, k), usd=_usd(25000, k))
    assert t is not None
    return head + _OPD.format(name=_slug("opd", m.name), model=_model_lines("model", m),
                              teacher=_model_lines("teacher", t), hours=_hours(96, k),
                              usd=_usd(40000, k))


def _lookup(option: str, name: str) -> Preset:
    try:
        return lookup(name)
    except InputError as exc:
        raise InputError(f"{option}: {exc}") from None


_LIMITS = """\
sla:
  deadline_hours: {hours}  # wall-clock hours from the start
budget:
  max_usd: {usd}  # the plan must cost no more (compute, storage, egress)
"""
_PIPELINE = "pipeline: auto  # colocated, sync or async: the planner picks the cheapest\n"

_SFT = """\
name: {name}
method: sft
{model}data:
  examples: 200000  # training examples
  tokens_per_example: 2048  # mean tokens per example (prompt + response)
  epochs: 3
  batch_size: 256  # examples per optimizer step
eval:
  every_steps: 500
  prompts: 1000
  samples_per_prompt: 1
  response_tokens: 512
checkpoints:
  every_steps: 500
  keep_hot: 2  # checkpoints kept on fast storage
  archive_every: 2  # every 2nd checkpoint copied to the archive tier
  retention_days: 60
""" + _LIMITS

_RL = """\
name: {name}
method: rl
algorithm: grpo
{model}reference_model: true  # a KL reference scored every step
data:
  steps: 300
  prompts_per_step: 256
  samples_per_prompt: 8  # responses per prompt (the GRPO group)
  prompt_tokens: 512
  response_tokens: 2048  # mean response
  max_response_tokens: 8192  # the response cap (the generation tail runs to it)
eval:
  every_steps: 25
  prompts: 500
  samples_per_prompt: 4
  response_tokens: 2048
checkpoints:
  every_steps: 25
  keep_hot: 3
  archive_every: 4
  retention_days: 30
""" + _LIMITS + _PIPELINE + """\
precisions:  # what each phase may run in (the framework's table narrows it)
  rollout: [bf16, fp8]
  scoring: [bf16, fp8]
  update: [bf16]
"""

_OPD = """\
name: {name}
method: opd
{model}{teacher}reference_model: false  # the teacher's log-probs replace the KL reference
data:
  steps: 150
  prompts_per_step: 256
  samples_per_prompt: 4
  prompt_tokens: 1024
  response_tokens: 4096
  max_response_tokens: 16384
eval:
  every_steps: 25
  prompts: 300
  samples_per_prompt: 2
  response_tokens: 4096
checkpoints:
  every_steps: 25
""" + _LIMITS + _PIPELINE + """\
precisions:
  rollout: [bf16, fp8]
  scoring: [bf16, fp8]
  update: [bf16]
"""
