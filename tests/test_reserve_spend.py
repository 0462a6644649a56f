"""``optimizer/reservations/spend.py`` on inputs written in the test: the rows of a Savings Plans
rates file that count, its errors word for word, the keys a commitment may cover, the
warnings and sources of each row, the embedded vCPU/memory share of a flexible CUD, and the
pairs :func:`check_order` refuses (docs/testing.md, mutation testing of ``reserve/spend.py``).

Keys and prices are written here: p5.48xlarge 55.04 $/h and g6e.xlarge 1.861 $/h in
aws/us-east-1 (the reserve test catalog), p5.48xlarge 60 $/h in aws/us-west-2, an on-prem
``lab`` key, and GCP a3-highgpu-8g in us-central1 (10 $/h, a price of the test).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ptplan.core.errors import InputError
from ptplan.core.yamlio import validate
from ptplan.reservations.portfolio import Commitment
from ptplan.reservations.spend import spend_rows

P5E = ("aws", "us-east-1", "p5.48xlarge")
G6E = ("aws", "us-east-1", "g6e.xlarge")
P5W = ("aws", "us-west-2", "p5.48xlarge")
LAB = ("lab", "local", "h100x8")
A3 = ("gcp", "us-central1", "a3-highgpu-8g")
KEYS = {P5E: 0, G6E: 1, P5W: 2, LAB: 3, A3: 4}
OD = {0: 55.04, 1: 1.861, 2: 60.0, 3: 20.0, 4: 10.0}
ALL = set(KEYS.values())
ISP = {"kind": "ec2_instance_savings_plan", "region": "us-east-1", "family": "p5", "term_years": 1}
CSP = {"kind": "compute_savings_plan", "term_years": 1}


def commitment(name: str, **fields: Any) -> Commitment:
    return validate(Commitment, {"name": name, **fields}, "commitment")


def rows(
    cms: list[Commitment],
    tmp_path: Path,
    weeks: int = 4,
    buy_weeks: list[int] | None = None,
    keys: dict = KEYS,
    on_demand: dict[int, float] = OD,
    demand: set[int] = ALL,
) -> tuple[list[Any], list[str]]:
    warnings: list[str] = []
    out = spend_rows(cms, keys, on_demand, demand, weeks, buy_weeks or [0], tmp_path, warnings)
    return out, warnings


def rates_file(tmp_path: Path, entries: list[dict[str, Any]], name: str = "sp.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps({"source": "test", "rates": entries}))
    return name


def entry(
    itype: str,
    usd: float,
    region: str = "us-east-1",
    plan: str = "Compute",
    years: int = 1,
    payment: str = "No Upfront",
) -> dict[str, Any]:
    return {
        "plan_type": plan,
        "term_years": years,
        "payment_option": payment,
        "region": region,
        "instance_type": itype,
        "usd_per_hour": usd,
    }


# ---- the rates file ---------------------------------------------------------------------------


def test_only_no_upfront_rows_count_wherever_they_stand(tmp_path: Path) -> None:
    """A Partial Upfront row of p5 comes first (30 $/h) and an All Upfront one last; the
    No Upfront rate between them (44.032 $/h) is the one used; g6e has a No Upfront row
    after them (1.3027 $/h)."""
    rf = rates_file(
        tmp_path,
        [
            entry("p5.48xlarge", 30.0, payment="Partial Upfront"),
            entry("p5.48xlarge", 44.032),
            entry("p5.48xlarge", 20.0, payment="All Upfront"),
            entry("g6e.xlarge", 1.3027),
        ],
    )
    (r,), warnings = rows([commitment("csp", **CSP, rates_file=rf)], tmp_path)
    assert r.rates == {0: (44.032, 55.04), 1: (1.3027, 1.861)}
    assert r.source == f"rates file {rf}" and r.assumption is False
    # p5 in us-west-2 has no rate in the file: warned about, not covered
    assert warnings == [
        "commitments[0] (csp): its rates file has no No Upfront 1-year rate "
        "for aws/us-west-2/p5.48xlarge; not covered"
    ]


def test_a_rate_under_one_dollar_is_a_rate(tmp_path: Path) -> None:
    rf = rates_file(tmp_path, [entry("g6e.xlarge", 0.5)])
    (r,), _ = rows([commitment("csp", **CSP, rates_file=rf)], tmp_path)
    assert r.rates == {1: (0.5, 1.861)}


@pytest.mark.parametrize("usd", [0.0, -1.0])
def test_a_rate_not_positive_is_refused_word_for_word(tmp_path: Path, usd: float) -> None:
    rf = rates_file(tmp_path, [entry("g6e.xlarge", usd)])
    path = str(tmp_path / rf)
    with pytest.raises(InputError) as err:
        rows([commitment("c", **CSP, rates_file=rf)], tmp_path)
    assert str(err.value) == (
        f"commitments[0].rates_file: {path!r} is not a rates file of `ptplan prices "
        f"savings-plans` (ValueError: usd_per_hour {usd} is not positive)"
    )


def test_a_rates_file_without_rates_is_refused_word_for_word(tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text(json.dumps({"source": "test"}))
    with pytest.raises(InputError) as err:
        rows([commitment("c", **CSP, rates_file="x.json")], tmp_path)
    assert str(err.value) == (
        f"commitments[0].rates_file: {str(tmp_path / 'x.json')!r} is not a rates file of "
        "`ptplan prices savings-plans` (KeyError: 'rates')"
    )


def test_an_unreadable_rates_file_is_refused_word_for_word(tmp_path: Path) -> None:
    with pytest.raises(InputError) as err:
        rows([commitment("c", **CSP, rates_file="nope.json")], tmp_path)
    assert str(err.value) == (
        f"commitments[0].rates_file: cannot read "
        f"{str(tmp_path / 'nope.json')!r} (No such file or directory)"
    )


def test_an_absolute_rates_file_path(tmp_path: Path) -> None:
    rf = rates_file(tmp_path, [entry("g6e.xlarge", 1.3027)])
    (r,), _ = rows([commitment("c", **CSP, rates_file=str(tmp_path / rf))], tmp_path / "other")
    assert r.rates == {1: (1.3027, 1.861)}


def test_a_rates_file_missing_the_first_key_still_prices_the_others(tmp_path: Path) -> None:
    """Keys in order: p5 us-east-1 (no rate in the file), g6e, p5 us-west-2 (rates)."""
    rf = rates_file(
        tmp_path, [entry("g6e.xlarge", 1.3027), entry("p5.48xlarge", 48.0, region="us-west-2")]
    )
    (r,), warnings = rows([commitment("c", **CSP, rates_file=rf)], tmp_path)
    assert r.rates == {1: (1.3027, 1.861), 2: (48.0, 60.0)}
    assert warnings == [
        "commitments[0] (c): its rates file has no No Upfront 1-year rate for "
        "aws/us-east-1/p5.48xlarge; not covered"
    ]


def test_three_year_rates_are_read_for_a_three_year_plan(tmp_path: Path) -> None:
    """A 3-year Compute SP takes the file's 3-year row (1.0 $/h), not the 1-year one, and is
    active every week of a 26-week horizon (its term is 3 × 8,760 h)."""
    rf = rates_file(tmp_path, [entry("g6e.xlarge", 1.3027), entry("g6e.xlarge", 1.0, years=3)])
    (r,), _ = rows(
        [commitment("c", kind="compute_savings_plan", term_years=3, rates_file=rf)],
        tmp_path,
        weeks=26,
        demand={1},
    )
    assert r.rates == {1: (1.0, 1.861)}
    assert r.active.tolist() == [1.0] * 26
    assert r.paid_hours == 26 * 168.0


# ---- which keys a commitment covers --------------------------------------------------------


def test_a_compute_plan_covers_every_aws_key_with_demand_and_a_price(tmp_path: Path) -> None:
    """30 % off (the portfolio's discount): c = 0.7 × o, s = o on the AWS keys with demand
    and an on-demand price; not the lab or GCP keys, not g6e (no demand) nor p5 us-west-2
    (no on-demand price), whichever order they come in."""
    od = {0: 55.04, 1: 1.861, 3: 20.0, 4: 10.0}  # no price for p5 us-west-2
    (r,), warnings = rows(
        [commitment("c", **CSP, discount=0.3)], tmp_path, on_demand=od, demand={0, 2, 3, 4}
    )
    assert r.rates == {0: (pytest.approx(0.7 * 55.04, rel=1e-12, abs=0), 55.04)}
    assert r.provider == "aws" and r.kind == "compute_savings_plan" and r.term_years == 1
    assert r.source == "portfolio discount 0.3" and r.assumption is False
    assert r.scope == "every aws region" and warnings == []


def test_keys_before_the_covered_ones_do_not_stop_the_search(tmp_path: Path) -> None:
    """Keys sorted as written: a lab key, a GCP key and p5 us-west-2 without a price come
    before g6e, the one key a Compute SP may cover here."""
    keys = {("aaa", "r", "t"): 0, ("aws", "a-region", "x.large"): 1, A3: 2, G6E: 3}
    od = {0: 5.0, 2: 10.0, 3: 1.861}
    (r,), _ = rows(
        [commitment("c", **CSP, discount=0.3)],
        tmp_path,
        keys=keys,
        on_demand=od,
        demand={0, 1, 2, 3},
    )
    assert r.rates == {3: (pytest.approx(0.7 * 1.861, rel=1e-12, abs=0), 1.861)}


def test_an_instance_plan_covers_its_family_in_its_region(tmp_path: Path) -> None:
    """g6e (another family) and p5 in us-west-2 (another region) come around the one key."""
    keys = {("aws", "us-east-1", "a1.large"): 0, P5E: 1, P5W: 2, ("aws", "us-east-1", "p5e.x"): 3}
    od = {0: 1.0, 1: 55.04, 2: 60.0, 3: 70.0}
    (r,), warnings = rows(
        [commitment("isp", **ISP, discount=0.5)],
        tmp_path,
        keys=keys,
        on_demand=od,
        demand={0, 1, 2, 3},
    )
    assert r.rates == {1: (27.52, 55.04)}
    assert r.scope == "aws p5 in us-east-1" and r.source == "portfolio discount 0.5"
    assert warnings == []


def test_the_catalog_default_discount_is_warned_about(tmp_path: Path) -> None:
    """No discount, no rates file: the Instance SP's 1-year default, 35 % off."""
    (r,), warnings = rows([commitment("isp", **ISP)], tmp_path)
    assert r.rates == {0: (pytest.approx(0.65 * 55.04, rel=1e-12, abs=0), 55.04)}
    assert r.assumption is True
    assert r.source == ("providers/embedded.py SPEND_DISCOUNT (REFERENCE_FACTS.md, U: assumption)")
    assert warnings == [
        "commitments[0] (isp): discount 35% is the catalog's planner default "
        "(an assumption); give discount or rates_file before buying"
    ]


def test_a_commitment_with_nothing_to_cover_is_dropped_and_the_next_kept(tmp_path: Path) -> None:
    """A flexible CUD with no GCP demand, then a Compute SP: the CUD is not offered."""
    cud = commitment("cud", kind="flexible_cud", term_years=1, discount=0.28, eligible_share=0.2)
    out, warnings = rows([cud, commitment("csp", **CSP, discount=0.3)], tmp_path, demand={0})
    assert [r.name for r in out] == ["csp"]
    assert warnings == ["commitments[0] (cud): no demand it may cover; not offered"]


def test_flexible_cud_with_its_share_given(tmp_path: Path) -> None:
    """20 % of the 10 $/h price is eligible, 28 % off: c = 2 × 0.72 = 1.44, s = 2."""
    cud = commitment("cud", kind="flexible_cud", term_years=1, discount=0.28, eligible_share=0.2)
    (r,), _ = rows([cud], tmp_path)
    assert r.rates == {
        4: (pytest.approx(1.44, rel=1e-12, abs=0), pytest.approx(2.0, rel=1e-12, abs=0))
    }
    assert r.provider == "gcp" and r.scope == "every gcp region"


def test_flexible_cud_takes_the_embedded_vm_share(tmp_path: Path) -> None:
    """No ``eligible_share``: the embedded a3-highgpu-8g in us-central1 is a VM part of
    9.46006 $/h and 8 H100 at 4.20076 $/h (providers/data/gcp_gpu_vms.csv,
    gcp_accelerators.csv, zone us-central1-a): share 9.46006 / 43.06614; with the default
    1-year discount (28 %) on the test's 10 $/h price."""
    share = 9.46006 / 43.06614
    (r,), warnings = rows([commitment("cud", kind="flexible_cud", term_years=1)], tmp_path)
    c, s = r.rates[4]
    assert s == pytest.approx(10.0 * share, rel=1e-9, abs=0)
    assert c == pytest.approx(10.0 * share * 0.72, rel=1e-9, abs=0)
    assert warnings == [
        "commitments[0] (cud): discount 28% is the catalog's planner default "
        "(an assumption); give discount or rates_file before buying"
    ]


def test_flexible_cud_on_a_machine_without_a_split_is_refused(tmp_path: Path) -> None:
    keys = {("gcp", "us-central1", "no-such-machine"): 0}
    with pytest.raises(InputError) as err:
        rows(
            [commitment("cud", kind="flexible_cud", term_years=1)],
            tmp_path,
            keys=keys,
            on_demand={0: 10.0},
            demand={0},
        )
    assert str(err.value) == (
        "commitments[0].eligible_share: the embedded catalog has no vCPU/memory split for "
        "gcp/us-central1/no-such-machine; give the share of its price a flexible CUD covers"
    )
