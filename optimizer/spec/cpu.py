"""``reward:``: CPU work of a rule-based or sandboxed reward (issue #25 item 2): unit tests,
code execution, verifiers. With ``agent.sandbox`` it makes the plan's CPU pools
(:mod:`ptplan.costs.cpu`; docs/spec.md, docs/demand-model.md §4.9)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from ptplan.spec.types import _Strict


class Reward(_Strict):
    cpu_seconds_per_sample: Annotated[float, Field(gt=0, le=86_400, strict=True)]
    """vCPU-seconds to score one sample (run its tests, execute its code) on a CPU node."""
