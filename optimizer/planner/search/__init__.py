"""The search for the best plan of each layout, and the engine that runs it.

``engine`` (prepare a planning context, solve the layouts in bound order) with what it hands
between steps in ``context``; ``exact`` (the exact optimum over the pool frontiers), sites
ordered by ``site_bounds``, options pruned by ``option_bounds``; ``capacity`` (offers whose caps
pools share: cap splits searched best-first) with ``fills`` (which offers an option's nodes
come from); ``milp`` (the MILP over the surviving options, cross-checked against ``exact``).

May import :mod:`ptplan.planner.frontier`, :mod:`ptplan.planner.candidates` and the layers
below the planner; never :mod:`ptplan.planner.assembly`, :mod:`ptplan.planner.booking` or
:mod:`ptplan.planner.api`.
"""
