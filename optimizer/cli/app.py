"""The ``ptplan`` command line (Typer). Thin: parse, call the library, format.

This module is the console entry point. It imports the command modules, each of which adds its
commands to the shared :data:`ptplan.cli.common.app`; nothing imports this module back.
Data goes to stdout (or ``-o FILE``); messages to stderr. Exit codes: 0 ok, 1 no feasible plan,
2 bad input, 3 provider error.
"""

from __future__ import annotations

from ptplan.cli import (  # noqa: F401
    compare,
    guard,
    models,
    plan,
    prices,
    prices_blocks,
    render,
    report,
    reserve,
    runs,
    simulate,
    spend,
    whatif,
)
from ptplan.cli.common import app

__all__ = ["app", "main"]


def main() -> None:  # pragma: no cover - console entry
    app()


if __name__ == "__main__":  # pragma: no cover
    app()
