"""``other_costs:``: what a post-training run costs beyond compute, storage and network (issue
#25): data collection, annotation, A/B tests (fixed), human review per reviewed sample, and
operations time per hour of the run. The planner does not optimise them; it adds them to the
total (so they count against the budget) and shows them as their own lines
(:mod:`ptplan.costs.other`; docs/spec.md)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from ptplan.spec.types import _Strict

Usd = Annotated[float, Field(ge=0, le=1e12, strict=True)]
"""A non-negative amount in USD."""


class OtherCosts(_Strict):
    data_collection_usd: Usd = 0.0
    """Collecting, cleaning and de-duplicating the data (once)."""
    annotation_usd: Usd = 0.0
    """Labelling (once)."""
    ab_test_usd: Usd = 0.0
    """An online A/B test of the result (once)."""
    human_review_usd_per_sample: Usd = 0.0
    """Human spot checks, per reviewed sample."""
    human_review_samples: Annotated[int, Field(ge=0, le=10**12, strict=True)] | None = None
    """Samples reviewed; default every evaluated sample (eval runs × prompts × samples)."""
    ops_usd_per_hour: Usd = 0.0
    """Operations (on-call, monitoring) per hour of the run (the plan's makespan)."""
