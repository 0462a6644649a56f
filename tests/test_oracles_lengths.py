"""Response-length distributions worked by hand (``optimizer/demand/lengths.py``; issue #27 item
5, the surviving mutants of the whole-module run, docs/testing.md).

The expected longest of ``count`` draws is the quantile at u = count / (count + 1)
(``docs/demand-model.md`` §4: the mean position of the largest of n uniform order statistics is
n / (n + 1)); a histogram or a fixed length is discrete, so that quantile is a step function
(the smallest point whose cumulative share reaches u), while a continuous shape interpolates
between its quantile midpoints and runs linearly to the cap. Each distribution is built here
from its points, never from the spec loader.
"""

from __future__ import annotations

import numpy as np
import pytest

from ptplan.demand.lengths import (
    LengthDist,
    fixed,
    from_histogram,
    from_quantiles,
    max_entropy,
    quantile_mean,
    scaled,
    with_truncation,
)


def two_points() -> LengthDist:
    """100 and 300 tokens, half each, cap 1000: cumulative shares 0.5, 1.0."""
    return from_histogram([(100.0, 1.0), (300.0, 1.0)], 1000.0)


def test_longest_of_a_histogram_is_a_step_quantile() -> None:
    """count 1: the mean, (100 + 300) / 2 = 200. count 2: u = 2/3, the first cumulative share
    ≥ 2/3 is 300's (1.0) — not the interpolated 100 + (2/3 − 1/4) / (3/4 − 1/4) · 200 = 266.67
    of a continuous shape. count 3: u = 3/4, 300."""
    d = two_points()
    assert (d.shape, d.cap) == ("histogram", 1000)
    assert list(d.weights) == [0.5, 0.5]
    assert d.longest(1) == pytest.approx(200.0)
    assert d.longest(2) == 300.0
    assert d.longest(3) == 300.0
    # 3/4 of the mass at 100 tokens: u = 2/3 and u = 3/4 are reached at 100 (the step is
    # inclusive), u = 4/5 (count 4) only at 300
    low = from_histogram([(100.0, 3.0), (300.0, 1.0)], 1000.0)
    assert (low.longest(2), low.longest(3), low.longest(4)) == (100.0, 100.0, 300.0)


def test_longest_of_a_fixed_length_is_that_length() -> None:
    """250.5 tokens every time: cap ⌈250.5⌉ = 251, the longest of any count is 250.5 (a
    continuous reading would run from 250.5 towards the cap: 250.83 for 5 draws)."""
    d = fixed(250.5)
    assert (d.shape, d.cap, d.mean) == ("fixed", 251, 250.5)
    assert d.longest(5) == 250.5 and d.longest(1000) == 250.5
    assert fixed(0.2).mean == 1.0  # at least one token


def test_longest_of_a_continuous_shape_interpolates_to_the_cap() -> None:
    """Quantiles through (0, 100), (1, 300), cap 1000: 64 midpoints (k + 0.5)/64 of a line from
    100 to 300, i.e. 100 + 200·(k + 0.5)/64 at shares (k + 0.5)/64. count 2, u = 2/3: on the
    line, 100 + 200 · 2/3 = 233.33; count 200, u = 200/201 = 0.995, above the top midpoint
    (0.9921875, 298.4375): linear to (1, cap 1000): 298.4375 + (0.995025 − 0.9921875) /
    0.0078125 · 701.5625 = 553.24."""
    d = from_quantiles([(0.0, 100.0), (1.0, 300.0)], 1000.0)
    assert d.shape == "quantiles"
    assert d.longest(2) == pytest.approx(100 + 200 * 2 / 3)
    u = 200 / 201
    top_u, top_l = 127 / 128, 100 + 200 * 127 / 128
    assert d.longest(200) == pytest.approx(top_l + (u - top_u) / (1 / 128) * (1000 - top_l))


def test_scaled_clips_to_one_token_and_the_cap() -> None:
    """× 4 with cap 1000: 400 and 1200 → 1000; × 0.001: 0.1 and 0.3 → 1 token each. The
    shape and weights are kept."""
    d = two_points()
    up = scaled(d, 4.0, 1000.0)
    assert list(up.lengths) == [400.0, 1000.0] and up.cap == 1000 and up.shape == "histogram"
    assert list(up.weights) == [0.5, 0.5] and up.weights is not d.weights
    down = scaled(d, 0.001, 1000.0)
    assert list(down.lengths) == [1.0, 1.0] and down.mean == 1.0


def test_quantile_mean_is_the_trapezoid_area() -> None:
    """Knots (0, 100), (0.5, 200), (0.9, 1000), (1, 2000): 0.5 · 150 + 0.4 · 600 + 0.1 · 1500 =
    75 + 240 + 150 = 465."""
    knots = [(0.0, 100.0), (0.5, 200.0), (0.9, 1000.0), (1.0, 2000.0)]
    assert quantile_mean(knots) == pytest.approx(465.0)
    assert quantile_mean([(0.0, 7.0), (1.0, 7.0)]) == pytest.approx(7.0)
    assert quantile_mean([(0.0, 7.0)]) == 0.0
    # the 64-point discretisation keeps that mean within the midpoint rule's error
    d = from_quantiles(knots, 4096.0)
    assert d.mean == pytest.approx(465.0, rel=1e-3)
    assert float(np.max(d.lengths)) < 2000.0


def test_longest_with_a_point_mass_at_the_cap() -> None:
    """Four points of 1/4: 100, 300, 999.5 and the cap 1000 (a truncated share of 1/4). Below
    the cap the midpoints are at 1/8, 3/8, 5/8 and the body's quantile runs to (3/4, cap);
    count 2, u = 2/3: 999.5 + (2/3 − 5/8) / (3/4 − 5/8) · 0.5 = 999.67 (a point 0.5 token
    under the cap is body, not cap). Count 3, u = 3/4 = 1 − 1/4: the cap itself; count 1000:
    the cap."""
    d = LengthDist(np.array([100.0, 300.0, 999.5, 1000.0]), np.full(4, 0.25), 1000,
                   "max-entropy+truncated")
    assert d.longest(2) == pytest.approx(999.5 + (2 / 3 - 5 / 8) / (1 / 8) * 0.5)
    assert d.longest(3) == 1000.0 and d.longest(1000) == 1000.0
    # 100, 200, 300 and the cap: count 2 lands on the body's last segment, 300 → 1000 at 3/4:
    # 300 + (2/3 − 5/8) / (1/8) · 700 = 533.33 (without the cap point's share taken out, the
    # midpoints would run to 7/8 and give 300 + (2/3 − 5/8) / (1/4) · 700 = 416.67)
    e = LengthDist(np.array([1000.0, 100.0, 200.0, 300.0]), np.full(4, 0.25), 1000,
                   "max-entropy+truncated")
    assert e.longest(2) == pytest.approx(300 + (2 / 3 - 5 / 8) / (1 / 8) * 700)


def test_survival_and_residual_of_one_token_responses() -> None:
    """Every response 1 token long (the shortest a distribution holds, mean 1): S(j) = 1 for
    j ≤ 1 and 0 beyond; the residual of a sequence caught in flight E[(1 − r)⁺] / 1 = 1 − r."""
    d = fixed(1.0)
    assert list(d.survival(np.array([0.0, 1.0, 1.5]))) == [1.0, 1.0, 0.0]
    assert list(d.residual_survival(np.array([0.0, 0.5, 1.0, 2.0]))) == \
        pytest.approx([1.0, 0.5, 0.0, 0.0])
    # two points of 1/2, 100 and 300 (mean 200): S_e(r) = (½(100 − r)⁺ + ½(300 − r)⁺) / 200
    h = two_points()
    assert list(h.residual_survival(np.array([0.0, 100.0, 200.0]))) == \
        pytest.approx([1.0, 0.5, 0.25])
    assert list(h.survival(np.array([1.0, 100.0, 101.0, 300.0, 301.0]))) == \
        [1.0, 1.0, 0.5, 0.5, 0.0]


def test_truncation_share_zero_and_a_body_at_one_token() -> None:
    """share 0: the max-entropy distribution itself (no point at the cap). share 0.1 of a
    1000-token cap with an overall mean of 100: the body's mean (100 − 0.1 · 1000) / 0.9 = 0
    is floored at one token, so the body is the max-entropy shape of mean 1 on [1, 1000] (its
    64 points, floored at one token after the mean-keeping rescale, average 1.25)."""
    none = with_truncation(500.0, 4000.0, 0.0)
    plain = max_entropy(500.0, 4000.0)
    assert none.shape == "max-entropy" and list(none.lengths) == list(plain.lengths)
    d = with_truncation(100.0, 1000.0, 0.1)
    assert (d.shape, d.cap) == ("max-entropy+truncated", 1000)
    assert d.lengths[-1] == 1000.0 and d.weights[-1] == pytest.approx(0.1)
    body = max_entropy(1.0, 1000.0)
    assert list(d.lengths[:-1]) == list(body.lengths)
    assert list(d.weights[:-1]) == pytest.approx([0.9 / 64] * 64)
    assert 1.0 <= body.mean < 2.0
    assert d.mean == pytest.approx(0.9 * body.mean + 0.1 * 1000)


def test_max_entropy_edges() -> None:
    """A mean at or above the cap is every response at the cap (one point, shape max-entropy);
    a cap under one token is one token. Mean exactly half a large cap: λ = 0, the uniform
    distribution, whose 64 quantile midpoints are (k + 0.5)/64 · 32768 = 256·(2k + 1). A mean
    of 2 on a 1000-token cap piles points at the one-token floor, none below it."""
    top = max_entropy(5000.0, 4000.0)
    assert (list(top.lengths), top.cap, top.shape) == ([4000.0], 4000, "max-entropy")
    tiny = max_entropy(1.0, 0.5)
    assert (list(tiny.lengths), tiny.cap, tiny.shape) == ([1.0], 1, "max-entropy")
    flat = max_entropy(16384.0, 32768.0)
    assert list(flat.lengths) == pytest.approx([256.0 * (2 * k + 1) for k in range(64)],
                                               rel=1e-6)
    low = max_entropy(2.0, 1000.0)
    assert float(low.lengths.min()) == 1.0 and float(low.lengths.max()) < 1000.0


def test_residual_survival_of_a_scalar() -> None:
    """One remaining-length value in, one share out: (½ · 0 + ½ · 200) / 200 = 0.5 at 100."""
    assert float(two_points().residual_survival(100.0)) == pytest.approx(0.5)
