"""Value types shared by the spec's blocks (strict: booleans and floats are not counts)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from ptplan.core.yamlio import StrictModel

Method = Literal["sft", "rl", "opd", "generate"]
Algorithm = Literal["ppo", "grpo", "dapo"]
Pipeline = Literal["auto", "colocated", "sync", "async"]
Precision = Literal["fp32", "bf16", "fp16", "fp8", "int8"]
PhaseName = Literal["rollout", "scoring", "update", "eval"]
Fraction = Annotated[float, Field(gt=0, le=1, strict=True)]
Count = Annotated[int, Field(gt=0, le=10**12, strict=True)]
"""A positive whole number (booleans and floats are rejected, absurd magnitudes too)."""
Amount = Annotated[float, Field(gt=0, le=1e12, strict=True)]
"""A positive finite number."""
Billions = Annotated[float, Field(gt=0, le=100_000, strict=True)]
"""Parameters in billions (up to 100 trillion)."""


_Strict = StrictModel
"""The blocks' base: :class:`ptplan.core.yamlio.StrictModel` (unknown keys rejected, frozen,
no NaN/inf)."""
