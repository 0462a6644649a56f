"""Comparing outputs with their golden files across CPUs (tests/test_golden_cli.py,
tests/test_report_html.py).

Every float ptplan writes is rounded to :data:`~ptplan.core.numbers.SIGNIFICANT_DIGITS`
significant digits, which takes away the last-bit differences of CPUs and numpy releases. Only a
value within that noise of a rounding boundary can still come out one unit apart in its last
digit: :func:`one_step` admits exactly that, and :func:`same_page` compares a page's text
exactly and its numbers so.
"""

from __future__ import annotations

import math
import re

from ptplan.core.numbers import SIGNIFICANT_DIGITS

NUMBER = re.compile(r"-?\d+\.\d+(?:[eE][-+]?\d+)?")
"""A number with a decimal point (floats as JSON writes them; integers are compared as text)."""


def one_step(a: float, b: float) -> bool:
    """``a`` and ``b`` differ by at most one unit in the last of the
    :data:`~ptplan.core.numbers.SIGNIFICANT_DIGITS` digits the outputs keep."""
    m = max(abs(a), abs(b))
    if m == 0 or not math.isfinite(m):
        return a == b
    unit = 10.0 ** (math.floor(math.log10(m)) - (SIGNIFICANT_DIGITS - 1))
    return abs(a - b) <= unit * 1.01  # the binary floats hold the decimals to ~2e-4 of a unit


def same_page(got: str, expected: str) -> bool:
    """The same text, but for numbers :func:`one_step` apart (a figure printed with fewer
    digits, such as a table's ``16.52``, can only be equal: one unit in the 12th significant
    digit is below what it shows)."""
    if got == expected:
        return True
    if NUMBER.split(got) != NUMBER.split(expected):
        return False
    return all(x == y or one_step(float(x), float(y))
               for x, y in zip(NUMBER.findall(got), NUMBER.findall(expected), strict=True))
