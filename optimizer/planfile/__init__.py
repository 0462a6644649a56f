"""The plan: the contract between the planner and everything that reads its output.

``schema`` (+ ``schema_items``: the Plan JSON, published by ``ptplan schema plan``), ``load``
(reading a plan file), ``digest`` (the spec digest), ``verify`` with ``rules_*`` and ``fields``
(the independent verifier), and what a deployment of a plan is called and tagged: ``names``
(label, tag and resource-name syntax per platform), ``tags`` (the ``ptplan-*`` cost tags that
select and split the bill), ``deployment`` (the pinned zone, the project's slug, the groups and
their names). Readers of plans (render, spend, guard, the ledger, the report) take these from
here rather than from each other.
"""
