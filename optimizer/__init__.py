"""ptplan: cheapest GPU cluster plans for LLM post-training.

Public entry points: :func:`ptplan.spec.project.load_spec`,
:func:`ptplan.demand.estimate.estimate`, :func:`ptplan.planner.api.plan` and
:func:`~ptplan.planner.api.pareto`, :func:`ptplan.plan.verify.verify_plan`. The layers are
described in ``docs/architecture.md``.
"""

__version__ = "0.1.0"
