"""The GPU and storage ``catalog_match`` rules at their edges (issue #27 item 5: the surviving
mutants of ``optimizer/planfile/rules_catalog.py``, docs/testing.md).

Each test reads the GRPO example's plan on the embedded snapshot as it was made before issue #39
moved the demand model (``tests/data/plans/grpo-7b-gcp-catalog-edges.json``, frozen: the catalog
rules compare recorded offers and prices, which do not depend on the demand model), breaks one
recorded fact and asserts the exact lines of :func:`check_against_catalog`. The expected
"the catalog says" figures are read from the catalog's own rows (the input), never from the
rule. The plan: rollout on 1 x a3-highgpu-2g spot in zone us-west4-a, scoring on g2-standard-4
and g2-standard-8 spot in us-west4-a (two allocations of one pool), update on
a3-edgegpu-8g-nolssd on demand with no zone; storage on gcs_standard / gcs_nearline.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from ptplan.core.numbers import round_float
from ptplan.planfile.rules_catalog import check_against_catalog, packaged_catalog
from ptplan.planfile.schema import Plan
from ptplan.providers.base import Catalog, Offer
from ptplan.providers.embedded import embedded_catalog

FROZEN = Path(__file__).parent / "data" / "plans" / "grpo-7b-gcp-catalog-edges.json"


def _plan_json() -> dict[str, Any]:
    """Read in each test (never cached: mutmut forks every mutant from one parent process,
    docs/testing.md)."""
    data: dict[str, Any] = json.loads(FROZEN.read_text(encoding="utf-8"))
    return data


def _pool(d: dict[str, Any], name: str) -> list[dict[str, Any]]:
    allocations: list[dict[str, Any]] = next(
        p for p in d["pools"] if p["name"] == name)["allocations"]
    return allocations


def _offer(cat: Catalog, a: dict[str, Any]) -> Offer:
    return next(o for o in cat.offers if (o.region, o.zone, o.instance_type, o.capacity_type)
                == (a["region"], a["zone"], a["instance_type"], a["capacity_type"]))


def _check(change: Callable[[dict[str, Any]], None], cat: Catalog | None = None) -> list[str]:
    d = _plan_json()
    change(d)
    return check_against_catalog(Plan.model_validate(d), cat or embedded_catalog())


def test_the_unbroken_plan_matches_its_catalog() -> None:
    d = _plan_json()
    p = Plan.model_validate(d)
    made_on = packaged_catalog(p)
    assert made_on is not None and check_against_catalog(p, made_on) == []
    scoring = _pool(d, "scoring")
    assert [(a["instance_type"], a["zone"]) for a in scoring] == [
        ("g2-standard-4", "us-west4-a"), ("g2-standard-8", "us-west4-a")]
    assert (_pool(d, "update")[0]["zone"], _pool(d, "update")[0]["interruptions_per_hour"]) == \
        ("", None)


def test_an_unknown_type_does_not_stop_the_next_allocation() -> None:
    """The pool's first allocation on a type the snapshot lacks, its second at twice the
    catalog's $/h: two lines, each naming the allocation's zone."""
    cat = embedded_catalog()
    second = _offer(cat, _pool(_plan_json(), "scoring")[1])

    def change(d: dict[str, Any]) -> None:
        first, other = _pool(d, "scoring")
        first["instance_type"] = "g2-standard-99"
        other["usd_per_hour"] = 2 * second.usd_per_hour
    assert _check(change) == [
        "catalog_match: g2-standard-99 spot in us-west4-a is not in catalog embedded",
        f"catalog_match: g2-standard-8 spot in us-west4-a: 1 x L4 at "
        f"${2 * second.usd_per_hour}/h, {round_float(second.interruptions_per_hour)} "
        f"interruptions/h; the "
        f"catalog says 1 x L4 at ${second.usd_per_hour}/h, {second.interruptions_per_hour}"]


def test_each_recorded_offer_fact_alone_is_a_line() -> None:
    """One fact at a time, the others as the catalog has them: the GPU count, the $/h, and
    an interruption rate recorded (0.0) where the catalog has none (on demand); the message
    names the region when the allocation has no zone."""
    cat = embedded_catalog()
    roll = _offer(cat, _pool(_plan_json(), "rollout")[0])
    upd = _offer(cat, _pool(_plan_json(), "update")[0])
    assert (roll.gpus_per_node, upd.interruptions_per_hour) == (2, None)
    head = "catalog_match: a3-highgpu-2g spot in us-west4-a: "
    says = (f"the catalog says 2 x H100 at ${roll.usd_per_hour}/h, "
            f"{roll.interruptions_per_hour}")
    rate = round_float(roll.interruptions_per_hour)  # as the plan records it (12 digits)
    assert _check(lambda d: _pool(d, "rollout")[0].update(gpus_per_node=4)) == [
        f"{head}4 x H100 at ${roll.usd_per_hour}/h, {rate} interruptions/h; {says}"]
    assert _check(lambda d: _pool(d, "rollout")[0].update(usd_per_hour=6.0)) == [
        f"{head}2 x H100 at $6.0/h, {rate} interruptions/h; {says}"]
    assert _check(lambda d: _pool(d, "update")[0].update(interruptions_per_hour=0.0)) == [
        f"catalog_match: a3-edgegpu-8g-nolssd on_demand in us-west4: 8 x H100 at "
        f"${upd.usd_per_hour}/h, 0.0 interruptions/h; the catalog says 8 x H100 at "
        f"${upd.usd_per_hour}/h, None"]


def test_a_storage_tier_not_in_the_catalog() -> None:
    def change(d: dict[str, Any]) -> None:
        d["storage"][0]["tier"] = "gcs_platinum"
    assert _check(change) == [
        "catalog_match: storage tier gcs_platinum of gcp is not in catalog embedded"]


def test_a_regional_storage_price_is_the_one_compared() -> None:
    """A catalog with the GCP tiers also listed for us-west4, gcs_standard there at
    $0.023/GB-month instead of the "*" rows' $0.02: the plan's region takes the regional rows,
    so each gcs_standard item (priced at $0.02) is a line, the other tiers match."""
    base = embedded_catalog()
    regional = tuple(replace(t, region="us-west4",
                             usd_per_gb_month=0.023 if t.tier == "gcs_standard"
                             else t.usd_per_gb_month)
                     for t in base.storage_tiers if t.provider == "gcp")
    cat = replace(base, storage_tiers=base.storage_tiers + regional)
    d = _plan_json()
    std = [s for s in d["storage"] if s["tier"] == "gcs_standard"]
    assert std and all(s["usd_per_gb_month"] == 0.02 for s in std)
    assert _check(lambda d: None, cat) == [
        f"catalog_match: storage {s['data_class']} on gcs_standard: $0.02/GB-month, "
        f"{s['min_days']:g} days minimum, ${s['retrieval_usd_per_gb']}/GB retrieval; the "
        f"catalog says $0.023, {s['min_days']:g}, ${s['retrieval_usd_per_gb']}" for s in std]


def _flow(d: dict[str, Any], name: str) -> dict[str, Any]:
    item: dict[str, Any] = next(n for n in d["network"] if n["flow"] == name)
    return item


def test_a_network_rate_is_the_catalogs_for_its_provider_and_path() -> None:
    """The experience flow moved to cross_zone: at GCP's cross-zone rate (the catalog's
    ``gcp cross_zone`` row, $0.01/GB) it matches; at $0.02 (AWS's cross-zone rate) or 0 it is a
    line naming the GCP rate."""
    cat = embedded_catalog()
    gcp_cz = next(e.usd_per_gb for e in cat.egress if (e.provider, e.path) == ("gcp", "cross_zone"))
    aws_cz = next(e.usd_per_gb for e in cat.egress if (e.provider, e.path) == ("aws", "cross_zone"))
    assert (gcp_cz, aws_cz) == (0.01, 0.02)
    assert _check(lambda d: _flow(d, "experience").update(path="cross_zone",
                                                          usd_per_gb=gcp_cz)) == []
    for wrong in (aws_cz, 0.0):
        assert _check(lambda d, w=wrong: _flow(d, "experience").update(
            path="cross_zone", usd_per_gb=w)) == [
            f"catalog_match: experience on cross_zone from gcp at ${wrong}/GB; the catalog "
            f"says ${gcp_cz}"]


def test_a_provider_without_an_egress_row_is_free_and_rates_are_exact() -> None:
    """A flow from a provider the catalog has no egress row for is priced 0 (a recorded 0
    matches, $0.01 does not); rates are compared to 1e-12, not the default 1e-6: a same-zone
    flow recorded at $1e-7/GB is a line."""
    def lab(d: dict[str, Any]) -> None:
        _flow(d, "experience")["src"]["provider"] = "lab"
    assert _check(lab) == []

    def lab_priced(d: dict[str, Any]) -> None:
        _flow(d, "experience")["src"]["provider"] = "lab"
        _flow(d, "experience")["usd_per_gb"] = 0.01
    assert _check(lab_priced) == [
        "catalog_match: experience on same_zone from lab at $0.01/GB; the catalog says $0.0"]
    assert _check(lambda d: _flow(d, "weight_sync").update(usd_per_gb=1e-7)) == [
        "catalog_match: weight_sync on same_zone from gcp at $1e-07/GB; the catalog says $0.0"]


def test_storage_rates_are_compared_to_1e_12() -> None:
    """gcs_standard has no retrieval fee and costs $0.02/GB-month: a dataset recorded at
    $1e-7/GB retrieval, or at $0.02 + 1e-7/GB-month, is a line (1e-7 is inside the default
    tolerance of 1e-6)."""
    d0 = _plan_json()["storage"][0]
    assert (d0["data_class"], d0["tier"], d0["retrieval_usd_per_gb"]) == \
        ("dataset", "gcs_standard", 0.0)
    assert _check(lambda d: d["storage"][0].update(retrieval_usd_per_gb=1e-7)) == [
        "catalog_match: storage dataset on gcs_standard: $0.02/GB-month, 0 days minimum, "
        "$1e-07/GB retrieval; the catalog says $0.02, 0, $0.0"]
    assert _check(lambda d: d["storage"][0].update(usd_per_gb_month=0.0200001)) == [
        "catalog_match: storage dataset on gcs_standard: $0.0200001/GB-month, 0 days minimum, "
        "$0.0/GB retrieval; the catalog says $0.02, 0, $0.0"]
