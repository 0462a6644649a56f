"""One error hierarchy; the CLI maps each class to an exit code.

0 ok, 1 no feasible plan (:class:`InfeasibleError`), 2 bad input (:class:`InputError`),
3 provider error (:class:`ProviderError`). Messages are one line: what failed, why, how to fix.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class PlannerError(Exception):
    """Base of every error ptplan raises on purpose."""

    exit_code = 1


class InputError(PlannerError):
    """A spec, catalog, plan or option the user gave is malformed or inconsistent."""

    exit_code = 2


class InfeasibleError(PlannerError):
    """No plan satisfies the constraints; the message says which binds and what would help."""

    exit_code = 1


class ProviderError(PlannerError):
    """A price source failed (network, credentials, malformed data)."""

    exit_code = 3


def suggest(name: str, choices: Iterable[str], n: int = 3) -> str:
    """Return ' (did you mean: a, b?)' for close matches of ``name`` in ``choices``, else ''."""
    pool = sorted(set(choices))
    lowered = {c.lower(): c for c in pool}
    hits = difflib.get_close_matches(name.lower(), list(lowered), n=n, cutoff=0.6)
    if not hits:
        return ""
    return " (did you mean: " + ", ".join(lowered[h] for h in hits) + "?)"
