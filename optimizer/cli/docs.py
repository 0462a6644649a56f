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

from typing import Any

import typer.main

from ptplan.cli.app import app
from ptplan.cli.common import _harden

__all__ = ["command"]


def _hardened(cmd: Any) -> Any:
    """Every command as the console script runs it: with the options every command shares
    (``--force`` where it writes ``-o``), which the script adds as Click resolves a command."""
    _harden(cmd)
    for sub in getattr(cmd, "commands", {}).values():
        _hardened(sub)
    return cmd


#: The ``ptplan`` group as Click sees it (``typer.main.get_command(app)``), every command
#: with the options the console script gives it.
command = _hardened(typer.main.get_command(app))
