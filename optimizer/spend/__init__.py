"""Spend and the budget guard (docs/spend.md): the run's actual cost from the providers' billing
data selected by the plan's cost tags (``bill``: rows, the spend cache; ``aws``: Cost Explorer;
``gcp``: the Cloud Billing export in BigQuery), beside the plan's expected cumulative cost
(``curve``), and the circuit breaker (``guard``)."""
