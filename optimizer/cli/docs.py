"""The ``ptplan`` command line as a Click command, for the documentation site.

mkdocs-click renders Click commands, not Typer apps: ``docs/cli.md`` points its
``::: mkdocs-click`` block at :data:`command` (``:module: ptplan.cli.docs``, ``:command:
command``), which is the Typer app :data:`ptplan.cli.app.app` converted by Typer itself, with
every command and subcommand the console script has. The page uses mkdocs-click's ``plain``
style (each command's ``--help`` text): Typer builds its commands on its own copy of Click,
whose options the ``table`` style does not recognise as options. ``tests/test_docs_site.py``
checks that the built reference page lists every command. Nothing in ptplan imports this
module.
"""

from __future__ import annotations

import typer.main

from ptplan.cli.app import app

__all__ = ["command"]

#: The ``ptplan`` group as Click sees it (``typer.main.get_command(app)``).
command = typer.main.get_command(app)
