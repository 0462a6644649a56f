"""ptplan: cheapest GPU cluster plans for LLM post-training.

Public entry points: :func:`optimizer.spec.project.load_spec`,
:func:`optimizer.demand.estimate.estimate`, :func:`optimizer.planner.api.plan` and
:func:`~optimizer.planner.api.pareto`, :func:`optimizer.plan.verify.verify_plan`. The layers are
described in ``docs/architecture.md``.
"""

__version__ = "0.1.0"
