"""``python -m ptplan``: the same command line as the ``ptplan`` console script."""

from ptplan.cli.app import app

app(prog_name="ptplan")
