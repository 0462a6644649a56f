"""Spot risk by simulation (``ptplan simulate``, ``ptplan plan --risk pNN``).

* :mod:`optimizer.risk.model`: what the simulation needs, read from a plan alone: each pool's
  interruption-free busy time, its spot nodes and their hazards, the run's base makespan and the
  plan's own expected overhead;
* :mod:`optimizer.risk.montecarlo`: the vectorised Monte Carlo of one chunk of trials
  (interruptions, zone-wide reclaims, replacement or on-demand fallback, gang rollbacks,
  the sync barrier and the async pipeline);
* :mod:`optimizer.risk.runner`: chunks in this process, worker processes or Ray, with one seed
  per chunk so that the result does not depend on where the chunks ran;
* :mod:`optimizer.risk.summary`: distributions, confidence intervals, P(deadline met),
  P(budget exceeded), and their renderings;
* :mod:`optimizer.risk.tighten`: the cheapest plan whose simulated quantile meets the deadline
  and budget (``plan --risk``).
"""
