"""Spot risk by simulation (``ptplan simulate``, ``ptplan plan --risk pNN``).

* :mod:`ptplan.risk.model`: what the simulation needs, read from a plan alone: each pool's
  interruption-free busy time, its spot nodes and their hazards, the run's base makespan and the
  plan's own expected overhead;
* :mod:`ptplan.risk.montecarlo`: the vectorised Monte Carlo of one chunk of trials
  (interruptions, zone-wide reclaims, replacement or on-demand fallback, gang rollbacks,
  the sync barrier and the async pipeline);
* :mod:`ptplan.risk.runner`: chunks in this process, worker processes or Ray, with one seed
  per chunk so that the result does not depend on where the chunks ran;
* :mod:`ptplan.risk.summary`: distributions, confidence intervals, P(deadline met),
  P(budget exceeded), and their renderings;
* :mod:`ptplan.risk.tighten`: the cheapest plan whose simulated quantile meets the deadline
  and budget (``plan --risk``).
"""
