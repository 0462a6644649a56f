"""The planner: the cheapest (or fastest) plan of a spec on a catalog under a policy.

Its entry point is :mod:`ptplan.planner.api` (``plan``, ``pareto``, ``defaults_applied``).
Below it, one subpackage per concern, each importing only those under it (an import-linter
layers contract in ``pyproject.toml``; docs/architecture.md):

* :mod:`ptplan.planner.booking`: plans that book capacity (capacity blocks, flex-start);
* :mod:`ptplan.planner.assembly`: the :class:`~ptplan.planfile.schema.Plan` of a solution, and
  why it is what it is;
* :mod:`ptplan.planner.search`: the engine, the exact search per layout, bounds, shared caps,
  the MILP;
* :mod:`ptplan.planner.frontier`: every pool's options at every site, Pareto-pruned;
* :mod:`ptplan.planner.candidates`: layouts, pool specs and pool options, the vocabulary of
  all of them.
"""
