"""Pool frontiers: every option of every pool at every site, Pareto-pruned.

``frontiers`` (:func:`~ptplan.planner.frontier.frontiers.build_frontiers` and
``build_candidates``: every distinct pool frontier of the layouts, on two cores through
:mod:`ptplan.core.forked`; :class:`~ptplan.planner.frontier.frontiers.Candidates`) gathers
``pool`` (one pool's options per site) built from ``parts`` (groups and the frontier's arrays),
``busy_grid`` (busy times over node counts), ``group_filter`` with ``site_stairs`` (options
dropped before their site's filter), ``site_filter`` and ``pareto`` (the per-site Pareto
filter); ``merged`` rebuilds a frontier after a few offers changed.

May import :mod:`ptplan.planner.candidates` and the layers below the planner; never
:mod:`ptplan.planner.search`, :mod:`ptplan.planner.assembly`, :mod:`ptplan.planner.booking`
or :mod:`ptplan.planner.api`.
"""
