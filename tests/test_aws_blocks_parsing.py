"""``providers/aws_blocks.py`` without a server: one capacity block offering parsed by hand,
the lengths AWS sells (the EC2 Capacity Blocks user guide: 1–14 days in 1-day steps, then
7-day steps up to 182 days), and ``block_pull``'s offer for the price cache built from a quote
and an embedded catalog written here (fee 2 × 240 h × 31.464 $ = 15,102.72 $)."""

from __future__ import annotations

import datetime as dt

import pytest

from ptplan.core.errors import InputError, ProviderError
from ptplan.providers.aws_blocks import SOURCE, block_pull, check_duration, parse_offering
from ptplan.providers.base import Catalog, Offer

PLUS2 = dt.timezone(dt.timedelta(hours=2))
"""boto3 parses the dates into aware datetimes; +02:00 here so the UTC conversion shows."""


def _item(**over: object) -> dict[str, object]:
    item: dict[str, object] = {
        "CapacityBlockOfferingId": "cbr-1", "InstanceType": "p5.48xlarge",
        "AvailabilityZone": "us-east-1a", "InstanceCount": 2,
        "StartDate": dt.datetime(2026, 12, 10, 13, 30, tzinfo=PLUS2),
        "EndDate": dt.datetime(2026, 12, 20, 13, 30, tzinfo=PLUS2),
        "CapacityBlockDurationHours": 240, "UpfrontFee": "15102.72", "CurrencyCode": "USD"}
    item.update(over)
    return item


def test_an_offering_by_hand() -> None:
    """Dates given at +02:00 are reported in UTC; the rate is the fee over 2 × 240 h."""
    assert parse_offering(_item()) == {
        "offering_id": "cbr-1", "instance_type": "p5.48xlarge", "zone": "us-east-1a",
        "count": 2, "start": "2026-12-10T11:30:00Z", "end": "2026-12-20T11:30:00Z",
        "duration_hours": 240, "upfront_fee_usd": "15102.72",
        "usd_per_instance_hour": 31.464}


@pytest.mark.parametrize("over", [{"CurrencyCode": "EUR"}, {"UpfrontFee": "0"},
                                  {"UpfrontFee": "-1"}, {"InstanceCount": 0},
                                  {"CapacityBlockDurationHours": 0}])
def test_offerings_that_are_not_a_price_are_refused(over: dict[str, object]) -> None:
    with pytest.raises(ProviderError, match=r"^AWS returned capacity block offering cbr-1 "
                                            r"with fee .* for \d+ instances x \d+ h$"):
        parse_offering(_item(**over))


def test_the_smallest_offerings_that_are_a_price() -> None:
    """A fee under a dollar, one instance, one hour: a price all the same."""
    row = parse_offering(_item(UpfrontFee="0.5", InstanceCount=1,
                               CapacityBlockDurationHours=1))
    assert row["usd_per_instance_hour"] == 0.5 and row["upfront_fee_usd"] == "0.50"


def test_a_length_aws_does_not_sell_names_what_it_sells() -> None:
    with pytest.raises(InputError) as err:
        check_duration(25)
    assert str(err.value) == (
        "--duration-hours: 25 is not a capacity block length; AWS sells 24 to 336 h in 24-h "
        "steps, then 168-h steps up to 4,368 h (182 days)")


def _quote(hours: int, rate: float = 31.464) -> dict[str, object]:
    return {"source": SOURCE, "as_of": "2026-12-05T10:00:00Z", "region": "us-east-1",
            "request": {"instance_type": "p5.48xlarge", "count": 2, "duration_hours": hours,
                        "start_after": None},
            "offerings": [{"offering_id": "cbr-1", "instance_type": "p5.48xlarge",
                           "zone": "us-east-1a", "count": 2, "start": "2026-12-10T11:30:00Z",
                           "end": "2026-12-20T11:30:00Z", "duration_hours": hours,
                           "upfront_fee_usd": f"{rate * 2 * hours:.2f}",
                           "usd_per_instance_hour": rate}]}


def _offer(capacity: str, region: str = "us-east-1", itype: str = "p5.48xlarge",
           provider: str = "aws", **extra: object) -> Offer:
    return Offer(provider=provider, region=region, zone="", instance_type=itype, gpu="H100",
                 gpus_per_node=8, capacity_type=capacity, usd_per_hour=55.04, vcpus=192.0,
                 memory_gib=2048.0, **extra)  # type: ignore[arg-type]


def _catalog(offers: tuple[Offer, ...] = (), blocks: tuple[Offer, ...] = ()) -> Catalog:
    return Catalog(name="test", as_of="2026-12-01", offers=offers, block_offers=blocks)


def test_block_pull_on_the_published_block_terms() -> None:
    """The embedded block row's counts and node cap are kept; 240 h books in 24-h units up to
    14 days; the note names the offering."""
    terms = _offer("block", max_nodes=16, block_counts=(1, 2, 4, 8, 16))
    decoys = (_offer("block", region="us-west-2", max_nodes=3),
              _offer("block", itype="p4d.24xlarge", max_nodes=4),
              _offer("block", provider="gcp", max_nodes=5))
    pull = block_pull(_quote(240), _catalog(blocks=(*decoys, terms)))
    assert pull is not None
    assert (pull.provider, pull.as_of, pull.source, pull.regions, pull.instance_types) == (
        "aws", "2026-12-05T10:00:00Z", SOURCE, ("us-east-1",), ("p5.48xlarge",))
    (o,) = pull.offers
    assert (o.provider, o.region, o.zone, o.instance_type, o.gpu, o.gpus_per_node) == (
        "aws", "us-east-1", "", "p5.48xlarge", "H100", 8)
    assert (o.capacity_type, o.usd_per_hour, o.vcpus, o.memory_gib) == (
        "block", 31.464, 192.0, 2048.0)
    assert (o.max_nodes, o.block_counts, o.block_unit_hours, o.block_max_hours) == (
        16, (1, 2, 4, 8, 16), 24.0, 336.0)
    assert (o.as_of, o.source, o.max_start_days) == ("2026-12-05", SOURCE, 56)
    assert o.note == (
        "capacity block: live offering cbr-1 (2 x 240 h from 2026-12-10T11:30:00Z in "
        "us-east-1a, $15102.72 upfront), quoted 2026-12-05T10:00:00Z; booked in 24-h units, "
        "paid upfront; a later quote may differ (`ptplan prices blocks`)")


def test_block_pull_on_the_on_demand_shape_and_week_units() -> None:
    """No published block row: the on-demand row gives the shape, any count up to 64; 336 h
    is still day units, 504 h week units up to 182 days."""
    od = _offer("on_demand")
    decoys = (_offer("spot"), _offer("on_demand", itype="p4d.24xlarge"))
    for hours, unit, longest in ((336, 24.0, 336.0), (504, 168.0, 4368.0)):
        pull = block_pull(_quote(hours), _catalog(offers=(*decoys, od)))
        assert pull is not None
        (o,) = pull.offers
        assert (o.block_unit_hours, o.block_max_hours) == (unit, longest)
        assert (o.max_nodes, o.block_counts, o.vcpus, o.memory_gib) == (64, (), 192.0, 2048.0)
        assert f"booked in {unit:g}-h units" in o.note


def test_block_pull_without_a_quote_or_a_known_shape_is_none() -> None:
    empty = dict(_quote(240), offerings=[])
    assert block_pull(empty, _catalog(offers=(_offer("on_demand"),))) is None
    assert block_pull(_quote(240), _catalog(offers=(_offer("spot"),))) is None
