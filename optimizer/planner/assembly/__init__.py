"""The plan of a solution: the chosen pool options assembled into a
:class:`~ptplan.planfile.schema.Plan` (nothing is re-optimised here), and its explanation.

``build`` (:func:`~ptplan.planner.assembly.build.build_plan`: the winning layout, run time,
costs, solver record), ``phases`` (pools, allocations, phases, calibration records), ``items``
(storage and network items), ``cpu_items`` (the CPU pools), ``explain`` (binding constraints,
marginal costs, the best plan of every layout), ``interval`` (the plan's 80 % interval).

May import :mod:`ptplan.planner.search`, :mod:`ptplan.planner.frontier`,
:mod:`ptplan.planner.candidates` and the layers below the planner (the plan schema); never
:mod:`ptplan.planner.booking` or :mod:`ptplan.planner.api`.
"""
