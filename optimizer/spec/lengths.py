"""``data.response_length``: the shape of the response-length distribution, and its checks
against the mean and the cap (the distribution itself: :mod:`ptplan.demand.lengths`)."""

from __future__ import annotations

from itertools import pairwise
from typing import Annotated

from pydantic import Field, model_validator

from ptplan.spec.types import Count, _Strict


class ResponseLength(_Strict):
    """The shape of the response-length distribution (its mean is ``data.response_tokens`` and
    its cap ``data.max_response_tokens``). Give quantiles, or a histogram, or neither (then the
    maximum-entropy shape for that mean and cap is used); ``truncated_share`` puts that share of
    responses at the cap (overlong cut-offs)."""

    p50: Count | None = None
    p90: Count | None = None
    p99: Count | None = None
    histogram: list[tuple[Count, Annotated[float, Field(gt=0, strict=False)]]] | None = None
    """``[[tokens, share], ...]``: shares are normalised to sum to one."""
    truncated_share: Annotated[float, Field(ge=0, lt=1, strict=True)] = 0.0

    @model_validator(mode="after")
    def _one_shape(self) -> ResponseLength:
        quant = [q for q in (self.p50, self.p90, self.p99) if q is not None]
        if quant and self.histogram:
            raise ValueError("response_length: give quantiles (p50/p90/p99) or a histogram, "
                             "not both")
        if self.truncated_share and (quant or self.histogram):
            raise ValueError("response_length.truncated_share shapes the default distribution; "
                             "with quantiles or a histogram put the cap's share in them instead")
        if quant != sorted(quant):
            raise ValueError(f"response_length: quantiles must not decrease (p50 <= p90 <= "
                             f"p99), got {quant}")
        if self.histogram is not None and not self.histogram:
            raise ValueError("response_length.histogram is empty; give [[tokens, share], ...]")
        return self


def _check_lengths(r: ResponseLength, mean: int, cap: int) -> None:
    """Quantiles and histograms must respect the cap and imply the stated mean (±10 %)."""
    field = "data.response_length"
    if r.truncated_share and r.truncated_share * cap > mean:
        raise ValueError(f"{field}.truncated_share {r.truncated_share}: that share at the cap "
                         f"{cap} alone exceeds the mean response_tokens {mean}; lower it")
    if r.histogram:
        if max(t for t, _ in r.histogram) > cap:
            raise ValueError(f"{field}.histogram has lengths above max_response_tokens {cap}; "
                             "raise the cap or fix the bins")
        total = sum(s for _, s in r.histogram)
        implied = sum(t * s for t, s in r.histogram) / total
    else:
        knots = quantile_knots(r, cap)
        if knots is None:
            return
        if knots[-2][1] > cap:
            raise ValueError(f"{field}: quantile {knots[-2][1]} exceeds max_response_tokens "
                             f"{cap}; raise the cap or fix the quantiles")
        implied = sum((u1 - u0) * (a + b) / 2 for (u0, a), (u1, b) in pairwise(knots))
    if abs(implied - mean) > 0.1 * mean:
        raise ValueError(f"{field} implies a mean of {implied:.0f} tokens but "
                         f"data.response_tokens is {mean}; make them agree within 10 %")


def quantile_knots(r: ResponseLength, cap: int) -> list[tuple[float, float]] | None:
    """(u, length) knots of the piecewise-linear quantile function, or None without
    quantiles: (0, 1), the given p50/p90/p99, and (1, cap)."""
    given = [(u, q) for u, q in ((0.5, r.p50), (0.9, r.p90), (0.99, r.p99)) if q is not None]
    if not given:
        return None
    return [(0.0, 1.0), *[(u, float(q)) for u, q in given], (1.0, float(cap))]
