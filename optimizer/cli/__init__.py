"""The ``ptplan`` command line (:mod:`ptplan.cli.app`)."""

import os

# ptplan does no large matrix products: one BLAS thread is enough, and it keeps the process
# single-threaded, so that the planner may fork a worker for its pool frontiers
# (ptplan.core.forked). Set before numpy is first imported; a user's own setting wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
