"""What the engine hands between its steps: the planning :class:`Context` of one spec, catalog
and policy (demand, candidate runs per layout, the offers and their real caps) and a
:class:`LayoutRun` (one layout's candidates, exact bound and MILP solution)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from ptplan.demand.model import Demand
from ptplan.planner.frontier.frontiers import Candidates
from ptplan.planner.search.exact import Best
from ptplan.planner.search.milp import Solution
from ptplan.providers.base import Catalog
from ptplan.spec.project import ProjectSpec


@dataclass
class LayoutRun:
    cands: Candidates
    best: Best | None
    solution: Solution | None = None
    milp_options: int = 0
    shared_capacity: bool = False
    """The cap-split search of :mod:`ptplan.planner.search.capacity` hit its limits: the MILP then
    gets a wider option set and the plan is reported as feasible with its gap to the bound."""


@dataclass
class Context:
    spec: ProjectSpec
    demand: Demand
    catalog: Catalog
    runs: list[Candidates]
    offers_considered: int
    offers: list = field(default_factory=list)

    @cached_property
    def caps(self) -> dict[str, int | None]:
        """Real caps by offer key (split searches hand pools shares of capped offers);
        computed once (plan building asks for every allocation; ``offers`` is never
        reassigned, and ``dataclasses.replace`` makes a new context)."""
        return {o.key: o.max_nodes for o in self.offers}
