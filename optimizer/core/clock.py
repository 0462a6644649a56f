"""Today's date, as every dated figure (a catalog's age, staleness warnings) sees it.

``PTPLAN_TODAY=YYYY-MM-DD`` pins it, so that the same inputs give the same bytes on any day (CI,
golden files, a plan re-made to compare with one from last week). Without it: the system date.
"""

from __future__ import annotations

import datetime as dt
import os

from ptplan.core.errors import InputError

ENV = "PTPLAN_TODAY"


def today() -> dt.date:
    pinned = os.environ.get(ENV, "").strip()
    if not pinned:
        return dt.date.today()
    try:
        return dt.date.fromisoformat(pinned)
    except ValueError:
        raise InputError(f"{ENV}: {pinned!r} is not a date; use YYYY-MM-DD or unset it") from None
