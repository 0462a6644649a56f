"""ptplan: cheapest GPU cluster plans for LLM post-training.

Public entry points: :func:`optimizer.spec.project.load_spec`, :func:`optimizer.demand.model.estimate`,
:func:`optimizer.planner.engine.plan`, :func:`optimizer.plan.verify.verify_plan`.
"""

__version__ = "0.1.0"
