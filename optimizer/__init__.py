"""ptplan: cheapest GPU cluster plans for LLM post-training.

Public entry points: :func:`optimizer.spec.load_spec`, :func:`optimizer.demand.estimate`,
:func:`optimizer.solve.plan`, :func:`optimizer.verify.verify_plan`.
"""

__version__ = "0.1.0"
