"""Price-list parsing edge cases (``providers/aws_prices.py``, ``providers/gcp_skus.py``): the GPU
count and memory checks of an AWS item, spot rows, the errors' wording (they name the item),
and a GCP SKU's tiers, currency and category.

Expected values are read off the items themselves: the recorded p5.48xlarge item of
``tests/data/aws/price_list.json`` (8 × H100, 640 GB, $55.04/h on demand) edited one field at a
time, and GCP SKUs written here.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ptplan.core.errors import ProviderError
from ptplan.providers.aws_prices import parse_price_item, read_spot_row
from ptplan.providers.gcp_skus import classify, read_head, read_price

DATA = Path(__file__).parent / "data" / "aws"
PRICE_LIST: list[dict[str, Any]] = json.loads((DATA / "price_list.json").read_text())


def _p5(**attrs: Any) -> dict[str, Any]:
    """The recorded p5.48xlarge on-demand item with some attributes changed (None: removed)."""
    item = json.loads(json.dumps(next(
        i for i in PRICE_LIST if i["product"]["attributes"]["instanceType"] == "p5.48xlarge"
        and "OnDemand" in i["terms"])))
    a = item["product"]["attributes"]
    for k, v in attrs.items():
        if v is None:
            a.pop(k, None)
        else:
            a[k] = v
    return item


def _parse(item: dict[str, Any]) -> tuple[Any, list[Any], Any, list[str]]:
    exclusions: list[str] = []
    offer, rates, info = parse_price_item(json.dumps(item), "2026-12-01T00:00:00Z", exclusions)
    return offer, rates, info, exclusions


def test_recorded_p5_item_reads_as_8_h100_at_55_04() -> None:
    offer, _, info, excl = _parse(_p5())
    assert excl == []
    assert (offer.gpu, offer.gpus_per_node, offer.usd_per_hour) == ("H100", 8, 55.04)
    assert (info.vcpus, info.memory_gib) == (192.0, 2048.0)


# ---- AWS: GPU count and memory -----------------------------------------------------------------

def test_blank_vcpu_is_unknown_not_an_error() -> None:
    offer, _, info, _ = _parse(_p5(vcpu="  "))
    assert offer is not None and offer.vcpus is None and info.vcpus is None


def test_gpu_count_zero_falls_back_to_the_instance_table() -> None:
    """``gpu: "0"`` is not a count: p5.48xlarge has 8 GPUs (ACCELERATOR_COUNT)."""
    offer, _, _, _ = _parse(_p5(gpu="0"))
    assert offer is not None and offer.gpus_per_node == 8


def test_gpu_count_absent_falls_back_to_the_instance_table() -> None:
    offer, _, _, _ = _parse(_p5(gpu=None))
    assert offer is not None and offer.gpus_per_node == 8


def test_type_outside_the_table_takes_its_count_from_the_item() -> None:
    """A p5 size AWS may add (not in ACCELERATOR_COUNT) with ``gpu: "1"`` and 80 GB: one H100."""
    offer, _, _, excl = _parse(_p5(instanceType="p5.12xlarge", gpu="1", gpuMemory="80 GB"))
    assert excl == []
    assert offer is not None and (offer.instance_type, offer.gpus_per_node) == ("p5.12xlarge", 1)


def test_type_outside_the_table_without_a_count_is_excluded_with_the_reason() -> None:
    offer, rates, info, excl = _parse(_p5(instanceType="p5.12xlarge", gpu=None))
    assert (offer, rates, info) == (None, [], None)
    assert excl == ["aws p5.12xlarge us-east-1: accelerator count unknown (gpu attribute "
                    "'absent')"]


def test_family_without_a_gpu_is_excluded_with_the_reason() -> None:
    offer, rates, info, excl = _parse(_p5(instanceType="m5.48xlarge"))
    assert (offer, rates, info) == (None, [], None)
    assert excl == ["aws m5.48xlarge us-east-1: no GPU spec for 'family m5'"]


def test_item_without_gpu_memory_skips_the_memory_check() -> None:
    offer, _, _, excl = _parse(_p5(gpuMemory=None))
    assert excl == [] and offer is not None and offer.gpus_per_node == 8


@pytest.mark.parametrize(("total_gb", "kept"), [
    (8 * 82, True),     # 82 GB each: 2.5 % over H100's 80 GB
    (8 * 88, True),     # 88 GB each: exactly 10 % over, still within
    (8 * 72, True),     # 72 GB each: exactly 10 % under
    (8 * 89, False),    # 11.25 % over
    (8 * 71, False),
])
def test_gpu_memory_must_match_within_ten_percent(total_gb: int, kept: bool) -> None:
    offer, _, _, excl = _parse(_p5(gpuMemory=f"{total_gb} GB"))
    assert (offer is not None) == kept, excl
    if not kept:
        assert excl == [f"aws p5.48xlarge us-east-1: gpuMemory {total_gb} GB for 8 GPUs does not "
                        "match H100 (80 GB each)"]


# ---- AWS: errors name the item -----------------------------------------------------------------

def test_bad_lease_names_the_sku() -> None:
    item = next(i for i in PRICE_LIST if i["terms"].get("Reserved"))
    item = json.loads(json.dumps(item))
    sku = item["product"]["sku"]
    next(iter(item["terms"]["Reserved"].values()))["termAttributes"]["LeaseContractLength"] = \
        "2yr"
    with pytest.raises(ProviderError) as exc:
        _parse(item)
    assert str(exc.value) == (f"malformed AWS price item (sku {sku}): LeaseContractLength '2yr' "
                              "(expected 1yr or 3yr); the cache is unchanged")


def test_malformed_spot_row_names_type_and_zone() -> None:
    row = {"InstanceType": "p5.48xlarge", "AvailabilityZone": "us-east-1a", "SpotPrice": "x"}
    with pytest.raises(ProviderError) as exc:
        read_spot_row(row)
    assert str(exc.value) == ("malformed AWS price item (sku spot p5.48xlarge us-east-1a): "
                              "SpotPrice = 'x' is not a number; the cache is unchanged")


def test_spot_row_that_is_not_an_object() -> None:
    with pytest.raises(ProviderError) as exc:
        read_spot_row(["p5.48xlarge"])
    assert str(exc.value) == ("malformed AWS price item (sku spot ? ?): item is not an object; "
                              "the cache is unchanged")


def test_spot_row_reads_price_and_zone() -> None:
    row = read_spot_row({"InstanceType": "p5.48xlarge", "AvailabilityZone": "us-east-1a",
                         "SpotPrice": "12.5", "ProductDescription": "Linux/UNIX"})
    assert (row.instance_type, row.zone, row.price) == ("p5.48xlarge", "us-east-1a", 12.5)


# ---- GCP ---------------------------------------------------------------------------------------

def _sku(price_tiers: list[tuple[float, int, int]], currency: str | None = "USD",
         **head: Any) -> dict[str, Any]:
    """A SKU dict: tiers of (start amount, units, nanos)."""
    tiers = []
    for start, units, nanos in price_tiers:
        money: dict[str, Any] = {"units": str(units), "nanos": nanos}
        if currency is not None:
            money["currency_code"] = currency
        tiers.append({"start_usage_amount": start, "unit_price": money})
    return {"sku_id": "AAAA-BBBB-CCCC", "description": "A3 Instance Core running in Americas",
            "category": {"resource_family": "Compute", "resource_group": "CPU",
                         "usage_type": "OnDemand"},
            "pricing_info": [{"pricing_expression": {"usage_unit": "h", "tiered_rates": tiers}}],
            **head}


def test_gcp_price_is_units_plus_nanos_of_the_first_tier() -> None:
    """Tiers listed out of order: the tier starting at 0 ($2.5) is the price, not the one
    starting at 100 ($1.25)."""
    assert read_price(_sku([(100.0, 1, 250_000_000), (0.0, 2, 500_000_000)])) == (2.5, "h")


def test_gcp_price_without_a_currency_is_usd_and_zero_is_a_price() -> None:
    assert read_price(_sku([(0.0, 0, 31_000_000)], currency=None)) == (0.031, "h")
    assert read_price(_sku([(0.0, 0, 0)])) == (0.0, "h")


def test_gcp_negative_price_names_the_sku() -> None:
    with pytest.raises(ProviderError) as exc:
        read_price(_sku([(0.0, -1, 0)]))
    assert str(exc.value) == ("malformed GCP SKU sku AAAA-BBBB-CCCC ('A3 Instance Core running "
                              "in Americas'): negative price -1.0; the cache is unchanged")


def test_gcp_currency_error_names_the_sku() -> None:
    with pytest.raises(ProviderError) as exc:
        read_price(_sku([(0.0, 1, 0)], currency="EUR"))
    assert str(exc.value).startswith("malformed GCP SKU sku AAAA-BBBB-CCCC ('A3 Instance Core")


def test_gcp_error_on_an_sdk_like_object_names_it() -> None:
    """An SDK message is read by attribute: its id and description name it in the error."""
    sku = SimpleNamespace(sku_id="DDDD-EEEE", description="Nvidia H100 80GB GPU running in Tokyo",
                          category="GPU", service_regions=[])
    with pytest.raises(ProviderError) as exc:
        read_head(sku)
    assert str(exc.value) == ("malformed GCP SKU sku DDDD-EEEE ('Nvidia H100 80GB GPU running in "
                              "Tokyo'): category is not an object; the cache is unchanged")


def test_gcp_error_without_id_or_description() -> None:
    with pytest.raises(ProviderError) as exc:
        read_head(SimpleNamespace(category="GPU"))
    assert str(exc.value) == ("malformed GCP SKU sku ? (''): category is not an object; the "
                              "cache is unchanged")
    with pytest.raises(ProviderError) as exc:
        read_head({"category": "GPU"})
    assert "sku ? ('')" in str(exc.value)


def test_gcp_sku_outside_compute_is_not_used() -> None:
    """A GPU description and a kept usage type, but billed under another resource family."""
    sku = _sku([(0.0, 1, 0)], description="Nvidia H100 80GB GPU running in Americas",
               category={"resource_family": "License", "resource_group": "GPU",
                         "usage_type": "OnDemand"})
    assert classify(sku) is None
    sku["category"]["resource_family"] = "Compute"
    assert classify(sku) == ("gpu", "H100", "OnDemand")


# ---- AWS: the whole record of an item ----------------------------------------------------------

SOURCE = "AWS Price List API (pricing.get_products AmazonEC2)"


def _rate(rates: list[Any], years: int, klass: str, option: str) -> Any:
    return next(r for r in rates if (r.term_years, r.offering_class, r.purchase_option)
                == (years, klass, option))


def test_p5_offer_record_in_full() -> None:
    offer, rates, _, _ = _parse(_p5())
    assert (offer.provider, offer.region, offer.zone, offer.instance_type, offer.capacity_type,
            offer.as_of, offer.source) == ("aws", "us-east-1", "", "p5.48xlarge", "on_demand",
                                           "2026-12-01T00:00:00Z", SOURCE)
    assert len(rates) == 12


def test_p5_reserved_rates_by_hand() -> None:
    """3-year standard Partial Upfront: $331,961.08 upfront + $12.6317/h; the term is 3 × 8,760 h,
    so 331,961.08 / 26,280 = 12.63170015 $/h of fee: effective 25.263400 $/h (to the
    micro-dollar). 1-year standard All Upfront: $313,397.76 / 8,760 h = 35.776 $/h, nothing
    recurring."""
    _, rates, _, _ = _parse(_p5())
    r = _rate(rates, 3, "standard", "Partial Upfront")
    assert (r.provider, r.region, r.instance_type, r.source, r.assumption, r.as_of) == (
        "aws", "us-east-1", "p5.48xlarge", SOURCE + " terms.Reserved", False,
        "2026-12-01T00:00:00Z")
    assert (r.usd_per_hour, r.upfront_usd, r.recurring_usd_per_hour) == (25.2634, 331961.08,
                                                                         12.6317)
    a = _rate(rates, 1, "standard", "All Upfront")
    assert (a.usd_per_hour, a.upfront_usd, a.recurring_usd_per_hour) == (35.776, 313397.76, 0.0)


def test_recurring_hourly_is_kept_to_the_micro_dollar() -> None:
    item = _p5()
    term = next(t for t in item["terms"]["Reserved"].values()
                if t["termAttributes"]["PurchaseOption"] == "No Upfront"
                and t["termAttributes"]["LeaseContractLength"] == "1yr"
                and t["termAttributes"]["OfferingClass"] == "standard")
    next(iter(term["priceDimensions"].values()))["pricePerUnit"]["USD"] = "37.56481234"
    _, rates, _, _ = _parse(item)
    r = _rate(rates, 1, "standard", "No Upfront")
    assert (r.usd_per_hour, r.recurring_usd_per_hour) == (37.564812, 37.564812)


def test_reserved_term_priced_zero_is_excluded_and_the_rest_kept() -> None:
    item = _p5()
    term = next(t for t in item["terms"]["Reserved"].values()
                if t["termAttributes"]["PurchaseOption"] == "No Upfront"
                and t["termAttributes"]["LeaseContractLength"] == "1yr"
                and t["termAttributes"]["OfferingClass"] == "standard")
    next(iter(term["priceDimensions"].values()))["pricePerUnit"]["USD"] = "0.0000000000"
    _, rates, _, excl = _parse(item)
    assert len(rates) == 11
    assert excl == ["aws p5.48xlarge us-east-1: reserved 1y standard No Upfront priced 0"]


def _on_demand_dims(item: dict[str, Any]) -> dict[str, Any]:
    return next(iter(item["terms"]["OnDemand"].values()))["priceDimensions"]


def test_on_demand_price_zero_is_not_offered_and_a_small_one_is() -> None:
    item = _p5()
    next(iter(_on_demand_dims(item).values()))["pricePerUnit"]["USD"] = "0.0000000000"
    offer, _, _, excl = _parse(item)
    assert offer is None
    assert excl == ["aws p5.48xlarge us-east-1: on-demand price 0.0 (not offered)"]
    next(iter(_on_demand_dims(item).values()))["pricePerUnit"]["USD"] = "0.5"
    offer, _, _, excl = _parse(item)
    assert offer is not None and offer.usd_per_hour == 0.5 and excl == []


def test_on_demand_hourly_rate_after_another_unit() -> None:
    """A non-hourly dimension listed first does not hide the hourly one."""
    item = _p5()
    dims = _on_demand_dims(item)
    dims.clear()
    dims["fee"] = {"unit": "Quantity", "pricePerUnit": {"USD": "100.00"}}
    dims["hourly"] = {"unit": "Hrs", "pricePerUnit": {"USD": "55.04"}}
    offer, _, _, _ = _parse(item)
    assert offer is not None and offer.usd_per_hour == 55.04


@pytest.mark.parametrize(("raw", "message"), [
    ([1], "malformed AWS price item (sku ?): item is not an object; the cache is unchanged"),
    ({"product": "x"},
     "malformed AWS price item (sku ?): product is not an object; the cache is unchanged"),
    ({"product": {"attributes": {"instanceType": "p5.48xlarge"}}},
     "malformed AWS price item (sku ?): missing product.attributes.regionCode; the cache is "
     "unchanged"),
])
def test_malformed_item_without_a_sku(raw: Any, message: str) -> None:
    with pytest.raises(ProviderError) as exc:
        parse_price_item(json.dumps(raw), "x", [])
    assert str(exc.value) == message


def test_malformed_item_names_its_sku() -> None:
    item = _p5(regionCode=None)
    with pytest.raises(ProviderError) as exc:
        _parse(item)
    assert str(exc.value) == ("malformed AWS price item (sku 8XJ2QD3M4B6TZQNF): missing "
                              "product.attributes.regionCode; the cache is unchanged")
