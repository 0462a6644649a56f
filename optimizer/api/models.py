"""The model presets in the public API: :func:`models` (``ptplan models``),
:func:`model_preset` (``ptplan models show``) and :func:`init_spec` (``ptplan init``)."""

from __future__ import annotations

from typing import Any, Literal

from ptplan.spec import presets, starter


def models(search: str | None = None) -> list[dict[str, Any]]:
    """The embedded model presets, as ``ptplan models --format json`` prints them.

    Args:
        search: Keep the presets whose name, architecture or kind (``moe``, ``dense``) holds
            every word of it, any case (``None``: all).

    Returns:
        One mapping per preset, by name: its shape, parameter counts, KV bytes per token, the
        spec fields it sets and the ``config.json`` it was generated from (source, date).

    Raises:
        InputError: Never for a search; an empty list when nothing matches.
    """
    return [p.summary() for p in presets.search(search)]


def model_preset(name: str) -> dict[str, Any]:
    """One preset, as ``ptplan models show NAME --format json`` prints it.

    Args:
        name: The Hugging Face repository id, any case (``Qwen/Qwen2.5-7B``).

    Returns:
        The preset's mapping (``params_b``, ``active_params_b``, ``layers``, ``hidden_size``,
        ``heads``, ``kv_heads``, ``head_dim``, ``kv_bytes_per_token``, ``spec_fields``, ...).

    Raises:
        InputError: The name is not a preset; the message names the nearest.
    """
    return presets.lookup(name).summary()


def init_spec(method: Literal["sft", "rl", "opd"] = "rl", model: str | None = None,
              teacher: str | None = None) -> str:
    """The commented starter spec ``ptplan init`` writes, checked to load.

    Args:
        method: ``sft``, ``rl`` (GRPO) or ``opd`` (on-policy distillation).
        model: The trained model's preset (default per method, as ``ptplan init``).
        teacher: ``opd`` only: the teacher's preset (default ``Qwen/Qwen3-32B``).

    Returns:
        The spec's YAML text, its models given by preset.

    Raises:
        InputError: An unknown method or preset, or a teacher for another method.
    """
    return starter.starter(method, model, teacher)
