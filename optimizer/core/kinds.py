"""The closed vocabularies that travel between layers and out in plan JSON.

Each is a :class:`~enum.StrEnum`: a member *is* its string (``CapacityType.spot == "spot"``,
``json.dumps`` writes ``"spot"``), so producers may still pass the plain strings and the plan's
JSON is unchanged, while the plan schema (:mod:`ptplan.planfile.schema`) and its published JSON
Schema (``ptplan schema plan``) reject any other value. A member hashes as its string, so
either works as the same dictionary key.
"""

from __future__ import annotations

from enum import StrEnum


class CapacityType(StrEnum):
    """How a node is bought: on demand, interruptible spot, already reserved (committed), a
    fixed-length capacity block booked for the run (AWS EC2 Capacity Blocks for ML, GCP
    calendar-mode future reservations: billed for whole block units), or GCP DWS flex-start
    (queued, not preempted, at most 7 days)."""

    on_demand = "on_demand"
    spot = "spot"
    reserved = "reserved"
    block = "block"
    flex_start = "flex_start"


class Status(StrEnum):
    """Outcome of a solve. A plan is ``optimal``, ``time_limit`` (a solution the solver did not
    prove optimal in time) or ``feasible`` (within a reported gap of a lower bound); a pipeline
    layout in ``explain.alternatives`` is ``feasible`` or ``infeasible``; ``error`` is a solver
    failure."""

    optimal = "optimal"
    time_limit = "time_limit"
    feasible = "feasible"
    infeasible = "infeasible"
    error = "error"


class NetworkPath(StrEnum):
    """Where a byte travels (see :mod:`ptplan.costs.network`): within a zone, across zones
    of a region, between regions of a continent or of two continents (one provider), or out to
    another provider over the internet."""

    same_zone = "same_zone"
    cross_zone = "cross_zone"
    inter_region = "inter_region"
    inter_continent = "inter_continent"
    internet = "internet"


class Solver(StrEnum):
    """MILP solver behind PuLP (:mod:`ptplan.core.lp`): HiGHS (default) or CBC."""

    highs = "highs"
    cbc = "cbc"


class Flow(StrEnum):
    """What a priced network transfer carries (see :mod:`ptplan.costs.network`)."""

    weight_sync = "weight_sync"
    experience = "experience"
    dataset_staging = "dataset_staging"
    checkpoint_copies = "checkpoint_copies"
