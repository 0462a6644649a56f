"""Parts of ``ptplan.reservations.problem`` by hand (docs/testing.md, mutation testing of
``reserve/problem.py``, 2026-12-05): a spend commitment's saving and order of application, and
``--risk`` parsing: ``cvar:ALPHA`` or
``cvar:ALPHA:WEIGHT`` with 0 < ALPHA < 1 and 0 < WEIGHT ≤ 1 (weight 0.5 when not given);
nothing, ``""`` or ``none`` is no risk term; anything else is one input error naming the text.
"""

from __future__ import annotations

import numpy as np
import pytest

from ptplan.core.errors import InputError
from ptplan.reservations.problem import DemandClass, Risk, SpendRow

MESSAGE = ("--risk: {!r} is not understood; use cvar:ALPHA or cvar:ALPHA:WEIGHT with "
           "0 < ALPHA < 1 and 0 < WEIGHT <= 1, e.g. cvar:0.9")


@pytest.mark.parametrize(("text", "alpha", "weight"), [
    ("cvar:0.9", 0.9, 0.5),
    ("cvar:0.5:0.25", 0.5, 0.25),
    ("cvar:0.01:1", 0.01, 1.0),  # weight 1 is allowed (CVaR alone)
    ("cvar:0.99:0.001", 0.99, 0.001),
])
def test_cvar_levels_and_weights(text: str, alpha: float, weight: float) -> None:
    risk = Risk.parse(text)
    assert risk is not None
    assert (risk.alpha, risk.weight) == (alpha, weight)
    assert type(risk.alpha) is float and type(risk.weight) is float


@pytest.mark.parametrize("text", [None, "", "none"])
def test_no_risk_term(text: str | None) -> None:
    assert Risk.parse(text) is None


@pytest.mark.parametrize("text", [
    "cvar", "var:0.9", "CVAR:0.9", "cvar:0.9:0.5:1", "cvar:", "cvar:x", "cvar:0.9:y",
    "cvar:0", "cvar:1", "cvar:-0.5", "cvar:1.5", "cvar:0.9:0", "cvar:0.9:1.5", "cvar:0.9:-1",
    "None", "cvar:0.9:", ":0.9",
])
def test_anything_else_is_one_input_error(text: str) -> None:
    with pytest.raises(InputError) as e:
        Risk.parse(text)
    assert str(e.value) == MESSAGE.format(text)


# ---- a spend commitment's saving and order (SpendRow.saving / order) ---------------------------

def _plan(rates: dict[int, tuple[float, float]]) -> SpendRow:
    return SpendRow(name="sp", kind="compute_savings_plan", provider="aws", term_years=1,
                    rates=rates, step=0.001, source="t", assumption=False,
                    active=np.ones(4))


def _class(key: int, spot: float | None) -> DemandClass:
    return DemandClass(key=key, spot_usd_per_hour=spot, nodes=np.ones((1, 4)))


def test_the_saving_is_against_the_cheaper_of_on_demand_and_spot() -> None:
    """Saved per covered node-hour = the alternative (on demand, or spot when cheaper) − the
    on-demand spend left to pay (od − s). A plan rate c = $6/h replacing s = $10 of a $10/h
    on-demand price: 10 − 0 = $10 without spot, 7 − 0 = $7 with spot at $7, still $10 with spot
    at $12 (dearer). A plan replacing only s = $4: 10 − 6 = $4 without spot, 5 − 6 = −$1 with
    spot at $5."""
    sp = _plan({0: (6.0, 10.0), 1: (2.0, 4.0)})
    assert sp.saving(_class(0, None), 10.0) == 10.0
    assert sp.saving(_class(0, 7.0), 10.0) == 7.0
    assert sp.saving(_class(0, 12.0), 10.0) == 10.0
    assert sp.saving(_class(1, None), 10.0) == 4.0
    assert sp.saving(_class(1, 5.0), 10.0) == -1.0


def test_classes_are_covered_most_saved_per_commitment_dollar_first() -> None:
    """Savings per commitment dollar: key 0 without spot 10/6 = 1.667, key 0 with spot at $7
    7/6 = 1.167, key 1 without spot 4/2 = 2; key 1 with spot at $6 saves 6 − 6 = 0 (left out,
    as is key 2, which the plan does not cover, wherever it stands)."""
    sp = _plan({0: (6.0, 10.0), 1: (2.0, 4.0)})
    classes = [_class(2, None), _class(0, 7.0), _class(1, 6.0), _class(0, None),
               _class(1, None)]
    assert sp.order(classes, [10.0, 10.0, 10.0]) == [4, 3, 1]
