"""``optimizer/reservations/spend.py``: the order of the rows, one per commitment and purchase
week, and the pairs :func:`check_order` refuses or lets through (the providers' order bills
P before Q; the model prices it exactly only if keys(P) ⊆ keys(Q), P and Q replace the same
on-demand spend and Q's rates are one multiple of P's on the keys they share).

Keys and prices as in ``test_reserve_spend.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_reserve_milp_spend import _spend
from test_reserve_spend import CSP, ISP, commitment, entry, rates_file, rows

from ptplan.core.errors import InputError
from ptplan.reservations.problem import SpendRow
from ptplan.reservations.spend import check_order


def test_rows_per_purchase_week_in_the_providers_order(tmp_path: Path) -> None:
    """A Compute SP listed before an Instance SP, bought in weeks 0 and 2 of a 60-week
    horizon: Instance SP first, each commitment's weeks in order; a 1-year term is 8,760 h =
    52 1/7 weeks, so the row bought in week 2 is active from week 2 to week 54 and 1/7 of
    week 54."""
    out, _ = rows(
        [commitment("csp", **CSP, discount=0.3), commitment("isp", **ISP, discount=0.5)],
        tmp_path,
        weeks=60,
        buy_weeks=[0, 2],
    )
    assert [(r.name, r.buy_week) for r in out] == [
        ("isp", 0),
        ("isp@w2", 2),
        ("csp", 0),
        ("csp@w2", 2),
    ]
    late = out[1].active
    assert late[:2].tolist() == [0.0, 0.0] and late[2:54].tolist() == [1.0] * 52
    assert late[54] == pytest.approx(1 / 7, rel=1e-12, abs=0)
    assert late[55:].tolist() == [0.0] * 5
    assert out[0].active[52] == pytest.approx(1 / 7, rel=1e-12, abs=0)
    assert out[0].rates is out[1].rates and out[1].step == 0.001


def _row(
    name: str, rates: dict[int, tuple[float, float]], kind: str = "compute_savings_plan"
) -> SpendRow:
    return _spend(name, kind, rates, 0.001, weeks=2)


def _refused(p: str, q: str) -> str:
    return (
        f"commitments {p} and {q}: their rates are not in one ratio on the usage both may "
        "cover, so the provider's order (the first applied before the second) may bill "
        "more than the model can price exactly; drop one of them or give both discounts"
    )


def test_refusal_word_for_word() -> None:
    """P covers keys 0 and 1, Q only key 0: keys(P) ⊄ keys(Q)."""
    p, q = _row("p", {0: (30.0, 55.0), 1: (1.0, 2.0)}), _row("q", {0: (40.0, 55.0)})
    with pytest.raises(InputError) as err:
        check_order([p, q], [])
    assert str(err.value) == _refused("p", "q")


def test_one_ratio_on_shared_keys_passes() -> None:
    """Q's rates are 4/3 of P's on both keys, the same on-demand replaced: no error, in
    either order of the keys."""
    p = _row("p", {0: (30.0, 55.0), 1: (1.5, 2.0)})
    q = _row("q", {0: (40.0, 55.0), 1: (2.0, 2.0), 2: (3.0, 4.0)})
    check_order([p, q], [])
    check_order([_row("p", {1: (1.5, 2.0), 0: (30.0, 55.0)}), q], [])


@pytest.mark.parametrize(
    "q_rates",
    [
        {0: (40.0, 55.0), 1: (2.1, 2.0)},  # ratio 4/3 on key 0, 1.4 on key 1
        {0: (40.0, 55.0), 1: (1.9, 2.0)},  # 1.2667 on key 1, below 4/3
        {0: (40.0, 55.0), 1: (2.0, 2.1)},  # the same ratio, another on-demand replaced
        {0: (40.0, 55.0), 1: (2.0, 1.9)},
    ],
)
def test_another_ratio_or_another_replaced_spend_is_refused(q_rates) -> None:
    p = _row("p", {0: (30.0, 55.0), 1: (1.5, 2.0)})
    with pytest.raises(InputError, match="commitments p and q: their rates"):
        check_order([p, _row("q", q_rates)], [])


def test_ratios_within_the_tolerance_pass_and_outside_it_do_not() -> None:
    """RATIO_TOL = 1e-6, relative: Q's rates are 100 × P's (ratio 100) and it replaces
    100 $/h; a ratio or a replaced spend 1e-7 off (1e-5 absolute, within 1e-6 × 100) passes,
    1e-5 off (1e-3 absolute) does not."""
    p = _row("p", {0: (1.0, 100.0), 1: (2.0, 100.0)})

    def q(c1: float, s1: float) -> SpendRow:
        return _row("q", {0: (100.0, 100.0), 1: (c1, s1)})

    check_order([p, q(200.0 * (1 + 1e-7), 100.0)], [])
    check_order([p, q(200.0 * (1 - 1e-7), 100.0)], [])
    check_order([p, q(200.0, 100.0 * (1 + 1e-7))], [])
    for bad in (
        q(200.0 * (1 + 1e-5), 100.0),
        q(200.0 * (1 - 1e-5), 100.0),
        q(200.0, 100.0 * (1 + 1e-5)),
    ):
        with pytest.raises(InputError):
            check_order([p, bad], [])


def test_a_later_pair_is_checked_after_pairs_with_nothing_shared() -> None:
    """P shares nothing with R (listed first) and violates with Q after it."""
    p = _row("p", {0: (30.0, 55.0), 1: (1.0, 2.0)})
    r = _row("r", {2: (5.0, 6.0)})
    q = _row("q", {0: (40.0, 55.0)})
    with pytest.raises(InputError) as err:
        check_order([p, r, q], [])
    assert str(err.value) == _refused("p", "q")


def test_the_same_commitment_in_two_weeks_is_not_compared() -> None:
    """csp and csp@w13 are one commitment: never refused against each other, even if their
    keys differ, but a pair after them still is."""
    a, b = _row("csp", {0: (30.0, 55.0), 1: (1.0, 2.0)}), _row("csp@w13", {0: (30.0, 55.0)})
    check_order([a, b], [])
    q = _row("q", {0: (40.0, 55.0)})
    with pytest.raises(InputError) as err:
        check_order([a, b, q], [])
    assert str(err.value) == _refused("csp", "q")


def test_rates_files_out_of_ratio_through_spend_rows(tmp_path: Path) -> None:
    """An Instance SP on p5 at 50 % off (27.52 $/h) and a Compute SP whose file prices p5 at
    44.032 $/h: one shared key, so one ratio: accepted. A second Compute SP (3 years) that
    covers p5 and g6e before a 1-year one that covers p5 only: refused, naming the pair."""
    rf = rates_file(tmp_path, [entry("p5.48xlarge", 44.032)], "one.json")
    out, _ = rows(
        [commitment("csp", **CSP, rates_file=rf), commitment("isp", **ISP, discount=0.5)],
        tmp_path,
        demand={0},
    )
    assert [r.name for r in out] == ["isp", "csp"]
    both = rates_file(
        tmp_path,
        [entry("p5.48xlarge", 30.0, years=3), entry("g6e.xlarge", 1.0, years=3)],
        "both.json",
    )
    with pytest.raises(InputError) as err:
        rows(
            [
                commitment("c1", **CSP, rates_file=rf),
                commitment("c3", kind="compute_savings_plan", term_years=3, rates_file=both),
            ],
            tmp_path,
            demand={0, 1},
        )
    assert str(err.value) == _refused("c3", "c1")


def test_rows_of_one_commitment_in_later_weeks_are_not_compared() -> None:
    """The rows bought in weeks 13 and 26 of one commitment are not compared either (their
    name before ``@`` is the same), whatever their keys."""
    rows_ = [
        _row("csp", {0: (30.0, 55.0)}),
        _row("csp@w13", {0: (30.0, 55.0), 1: (1.0, 2.0)}),
        _row("csp@w26", {0: (30.0, 55.0)}),
    ]
    check_order(rows_, [])


def test_a_pair_that_passes_does_not_end_the_checks_of_its_first_row() -> None:
    """P passes against Q1 (keys(P) ⊆ keys(Q1), one ratio 4/3) and is refused against Q2
    after it (keys(P) ⊄ keys(Q2))."""
    p = _row("p", {0: (30.0, 55.0), 1: (1.5, 2.0)})
    q1 = _row("q1", {0: (40.0, 55.0), 1: (2.0, 2.0), 2: (3.0, 4.0)})
    q2 = _row("q2", {0: (40.0, 55.0)})
    with pytest.raises(InputError) as err:
        check_order([p, q1, q2], [])
    assert str(err.value) == _refused("p", "q2")
