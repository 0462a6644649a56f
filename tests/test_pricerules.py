"""The price-rule language (``ptplan.scenarios.pricerules``): parsing, matching, applying, errors.

Fixture prices come from ``tests/planner_fixtures.small_catalog`` (two regions r1/r2, r2 10 %
dearer; H100 x8 on-demand $20/h, spot $9/h; L4 on-demand $0.80/h, spot $0.35/h; L40S $1.90/h)
plus the embedded catalog's storage and egress rows (REFERENCE_FACTS.md list prices).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from conftest import assert_one_line
from planner_fixtures import small_catalog

from ptplan.core.errors import InputError
from ptplan.providers.base import EgressRate, StorageTier
from ptplan.scenarios.pricerules import (
    ALL_KEYS,
    apply_rule,
    apply_rules,
    parse_partial,
    parse_rule,
    parse_selector,
)


def catalog():
    cat = small_catalog()
    tiers = (
        StorageTier("lab", "*", "hot", 0.023, 0, 0.0, "ms", "test", "V"),
        StorageTier("lab", "*", "cold", 0.004, 90, 0.03, "ms", "test", "V"),
        StorageTier("lab", "*", "archive", 0.00099, 180, 0.02, "hours", "test", "S"),
    )
    egress = (EgressRate("lab", "cross_zone", 0.02, "test", "S"),
              EgressRate("lab", "inter_region", 0.02, "test", "S"))
    return replace(cat, storage_tiers=tiers, egress=egress)


def prices(cat, **match) -> list[float]:
    return sorted(o.usd_per_hour for o in cat.offers
                  if all(getattr(o, k) == v for k, v in match.items()))


@pytest.mark.parametrize("text, expected", [
    ("provider=lab *= 2", 10),
    ("region=r2 *= 2", 5),
    ("zone=a *= 2", 4),
    ("instance_type=l4x1 *= 2", 4),
    ("gpu=H100 *= 2", 4),
    ("capacity_type=spot *= 2", 4),
    ("* *= 2", 10),
    ("region=r* *= 2", 10),
    ("instance_type=?4x1 *= 2", 4),
    ("instance_type=[hl]*,capacity_type=on_demand *= 2", 6),
    ("instance_type=[!h]*,capacity_type=on_demand *= 2", 4),
])
def test_every_offer_key_and_glob_matches_the_right_offers(text: str, expected: int) -> None:
    rule = parse_rule(text)
    assert len(rule.selector.indices(catalog())) == expected


def test_each_operator() -> None:
    cat = catalog()
    scaled, eff = apply_rule(cat, parse_rule("gpu=H100,capacity_type=spot *= 1.4"))
    assert prices(scaled, gpu="H100", capacity_type="spot") == pytest.approx([12.6, 13.86])
    assert eff.matched == 2 and eff.before == (9.0, pytest.approx(9.9))
    added, _ = apply_rule(cat, parse_rule("gpu=L4,capacity_type=on_demand += 0.2"))
    assert prices(added, gpu="L4", capacity_type="on_demand") == pytest.approx([1.0, 1.08])
    cut, _ = apply_rule(cat, parse_rule("gpu=L4,capacity_type=on_demand += -0.8"))
    assert prices(cut, gpu="L4", capacity_type="on_demand") == pytest.approx([0.0, 0.08])
    set_, _ = apply_rule(cat, parse_rule("provider=lab,gpu=H100 = 9.5"))
    assert prices(set_, gpu="H100") == [9.5] * 4
    # untouched offers keep every field
    assert [o for o in set_.offers if o.gpu != "H100"] == [o for o in cat.offers if o.gpu != "H100"]


def test_rules_apply_in_order_and_are_recorded() -> None:
    cat = catalog()
    rules = [parse_rule("gpu=H100 *= 0.5"), parse_rule("capacity_type=spot += 1")]
    out, effects = apply_rules(cat, rules)
    assert prices(out, gpu="H100", region="r1") == [5.5, 10.0]  # 9*0.5+1, 20*0.5
    reverse, _ = apply_rules(cat, rules[::-1])
    assert prices(reverse, gpu="H100", region="r1") == [5.0, 10.0]  # (9+1)*0.5
    assert [e.matched for e in effects] == [4, 4]
    assert out.notes[-2:] == tuple(e.note() for e in effects)
    assert "gpu=H100 *= 0.5" in out.notes[-2] and "USD per node-hour" in out.notes[-2]
    assert cat.offers == small_catalog().offers  # the input catalog is not changed


def test_case_insensitive_aliases_and_whitespace() -> None:
    cat = catalog()
    assert parse_rule("GPU=h100-sxm *= 2").selector.indices(cat) == \
        parse_rule("gpu=H100 *= 2").selector.indices(cat)
    assert parse_rule("capacity_type=on-demand *= 2").selector.indices(cat) == \
        parse_rule("capacity_type=on_demand *= 2").selector.indices(cat)
    spaced = parse_rule("  provider=lab, gpu=L4   =   $0.5 ")
    assert spaced.value == 0.5 and spaced.op == "="
    assert len(spaced.selector.indices(cat)) == 4


def test_storage_and_egress_keys() -> None:
    cat = catalog()
    out, eff = apply_rule(cat, parse_rule("storage.tier=cold *= 2"))
    assert [t.usd_per_gb_month for t in out.storage_tiers] == [0.023, 0.008, 0.00099]
    assert eff.kind == "storage" and "USD per GB-month" in eff.note()
    out, _ = apply_rule(cat, parse_rule("storage.access=hours,storage.provider=lab = 0.002"))
    assert out.storage_tiers[2].usd_per_gb_month == 0.002
    out, _ = apply_rule(cat, parse_rule("storage.region=* += 0.001"))
    assert out.storage_tiers[0].usd_per_gb_month == pytest.approx(0.024)
    out, eff = apply_rule(cat, parse_rule("egress.path=inter_region = 0.05"))
    assert [e.usd_per_gb for e in out.egress] == [0.02, 0.05]
    out, _ = apply_rule(cat, parse_rule("egress.provider=lab *= 0"))
    assert [e.usd_per_gb for e in out.egress] == [0.0, 0.0]
    assert out.offers == cat.offers


def test_partial_rule_for_sweeps() -> None:
    sel, op = parse_partial("capacity_type=spot *=")
    assert op == "*=" and sel.kind == "offer" and sel.terms == (("capacity_type", "spot"),)
    sel, op = parse_partial("storage.tier=cold =")
    assert op == "=" and sel.kind == "storage"


def test_keys_documented() -> None:
    assert set(ALL_KEYS) == {"provider", "region", "zone", "instance_type", "gpu",
                             "capacity_type", "storage.provider", "storage.region",
                             "storage.tier", "storage.access", "egress.provider", "egress.path"}


@pytest.mark.parametrize("text, needle", [
    ("gpus=H100 *= 2", "unknown key 'gpus' (did you mean: gpu?)"),
    ("storage.price=x *= 2", "unknown key 'storage.price'"),
    ("gpu=H100 *= abc", "'abc' is not a number"),
    ("gpu=H100 *= nan", "out of range"),
    ("gpu=H100 *= 1e12", "out of range"),
    ("gpu=H100 *= -1", "scale factor -1 is negative"),
    ("gpu=H100*=2", "put spaces around the operator"),
    ("gpu=H100 2", "expected 'SELECTOR OP VALUE'"),
    ("gpu=H100 ~= 2", "expected 'SELECTOR OP VALUE'"),
    ("gpu=H100,storage.tier=hot *= 2", "mixes offers and storage tiers"),
    ("gpu=H100,gpu=L4 *= 2", "appears twice"),
    ("gpu= *= 2", "empty glob"),
    ("H100 *= 2", "has no '='"),
])
def test_bad_rules_parse_errors(text: str, needle: str) -> None:
    with pytest.raises(InputError) as exc:
        parse_rule(text)
    msg = str(exc.value)
    assert_one_line(msg)
    assert needle in msg and f"price rule {text.strip()!r}" in msg


@pytest.mark.parametrize("text, needle", [
    ("gpu=H1000 *= 2", "gpu=h1000 matches no offer of catalog test (did you mean: H100?); "
                       "use one of: H100, L4, L40S"),
    ("region=eu-* *= 2", "region=eu-* matches no offer of catalog test; use one of: r1, r2"),
    ("gpu=L40S,capacity_type=spot *= 2", "no offer of catalog test matches all of "
                                         "gpu=L40S,capacity_type=spot; loosen one of the terms"),
    ("storage.tier=glacier *= 2", "storage.tier=glacier matches no storage tier of catalog "
                                  "test; use one of: archive, cold, hot"),
    ("egress.path=internet *= 2", "egress.path=internet matches no egress rate of catalog test "
                                  "(did you mean: inter_region?)"),
])
def test_nothing_matched(text: str, needle: str) -> None:
    with pytest.raises(InputError) as exc:
        apply_rules(catalog(), [parse_rule(text)])
    msg = str(exc.value)
    assert_one_line(msg)
    assert msg.startswith(f"price rule {text!r}: ") and needle in msg


@pytest.mark.parametrize("text, needle", [
    ("gpu=L4 += -0.5", "makes the price of lab a l4x1 spot negative (-0.15 USD per node-hour); "
                       "use += -0.35 or more (the lowest matched price is 0.35)"),
    ("capacity_type=spot = -1", "negative"),
    ("storage.tier=hot += -1", "makes the price of lab * hot negative"),
])
def test_negative_resulting_price(text: str, needle: str) -> None:
    with pytest.raises(InputError) as exc:
        apply_rules(catalog(), [parse_rule(text)])
    msg = str(exc.value)
    assert_one_line(msg)
    assert needle in msg and f"price rule {text!r}" in msg and "narrow the selector" in msg


def test_negative_price_from_rule_order() -> None:
    """Each rule sees the previous one's prices: a discount then a set-below-zero add."""
    rules = [parse_rule("gpu=L4 = 0.1"), parse_rule("gpu=L4 += -0.2")]
    with pytest.raises(InputError, match=r"use \+= -0.1 or more"):
        apply_rules(catalog(), rules)


def test_selector_star_alone() -> None:
    sel = parse_selector("*")
    assert sel.kind == "offer" and sel.terms == ()
    assert len(sel.indices(catalog())) == len(catalog().offers)
