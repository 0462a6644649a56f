"""The run ledger: every experiment's plan, actual cost, timings and results in one database.

``db`` (where the ledger lives, the tables, Alembic migrations, one transaction per write),
``records`` (the run record, bills, recording, reading, export), ``metrics`` (MLflow,
TensorBoard and veRL/OpenRLHF JSONL metrics mapped to the plan's phases), ``review`` (the
method–cost–benefit table) and ``calibrate`` (calibration entries from recorded timings).
A sibling of ``whatif`` and ``reserve``: it reads plans only through the plan schema.
"""
