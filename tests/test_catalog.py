"""Catalogs: the embedded snapshot (prices recomputed here from the raw CSV rows), GPU name
resolution, and custom YAML catalogs."""

from __future__ import annotations

import csv
import datetime as dt
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import ROOT, assert_one_line

from ptplan.core.errors import InputError
from ptplan.core.hardware import canonical_gpu_name, gpus, resolve_gpu
from ptplan.providers.base import STALE_AFTER_DAYS, Catalog, Offer
from ptplan.providers.custom import load_custom_catalog
from ptplan.providers.embedded import embedded_catalog
from ptplan.providers.registry import load_catalog

DATA = ROOT / "providers" / "data"


def _csv(name: str) -> list[dict[str, str]]:
    with (DATA / name).open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def _one(rows: list[dict[str, str]], **match: str) -> dict[str, str]:
    found = [r for r in rows if all(r[k] == v for k, v in match.items())]
    assert len(found) == 1, (match, len(found))
    return found[0]


def _offers(catalog: Catalog, **match: Any) -> list[Offer]:
    return [o for o in catalog.offers if all(getattr(o, k) == v for k, v in match.items())]


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return embedded_catalog()


# ------------------------------------------------------------------------------ embedded


def test_embedded_catalog_loads(catalog: Catalog) -> None:
    assert catalog.name == "embedded"
    assert len(catalog.offers) > 1000
    assert {o.provider for o in catalog.offers} == {"aws", "gcp"}
    assert dt.date.fromisoformat(catalog.as_of)
    assert load_catalog("embedded") is catalog  # cached, registered


def test_offer_keys_are_unique(catalog: Catalog) -> None:
    counts = Counter(o.key for o in catalog.offers)
    assert [k for k, n in counts.items() if n > 1] == []


def test_every_offer_is_well_formed(catalog: Catalog) -> None:
    known = set(gpus())
    for o in catalog.offers:
        assert o.gpu in known, o
        assert o.gpus_per_node >= 1
        assert o.usd_per_hour > 0, o
        assert o.capacity_type in ("on_demand", "spot")
        assert o.as_of == catalog.as_of


def test_gcp_a3_highgpu_price_is_vm_plus_eight_gpus(catalog: Catalog) -> None:
    vm = _one(
        _csv("gcp_gpu_vms.csv"), InstanceType="a3-highgpu-8g", AvailabilityZone="us-central1-a"
    )
    gpu = _one(
        _csv("gcp_accelerators.csv"),
        AcceleratorName="H100",
        AcceleratorCount="1",
        AvailabilityZone="us-central1-a",
    )
    # SOURCE.md example: VM part 9.46006 + 8 x 4.20076
    assert (vm["Price"], gpu["Price"]) == ("9.46006", "4.20076")
    expected_od = float(vm["Price"]) + 8 * float(gpu["Price"])
    (od,) = _offers(
        catalog,
        provider="gcp",
        region="us-central1",
        instance_type="a3-highgpu-8g",
        capacity_type="on_demand",
    )
    assert od.usd_per_hour == pytest.approx(expected_od, abs=1e-6)
    assert od.usd_per_hour == pytest.approx(9.46006 + 8 * 4.20076, abs=1e-6)
    assert (od.gpu, od.gpus_per_node) == ("H100", 8)
    (spot,) = _offers(
        catalog,
        provider="gcp",
        zone="us-central1-a",
        instance_type="a3-highgpu-8g",
        capacity_type="spot",
    )
    assert spot.usd_per_hour == pytest.approx(
        float(vm["SpotPrice"]) + 8 * float(gpu["SpotPrice"]), abs=1e-6
    )


def test_gcp_machines_priced_only_as_8_gpu_bundles_are_offered(catalog: Catalog) -> None:
    """H100-MEGA and H200 accelerator rows exist only with AcceleratorCount 8 (bundle price)."""
    vm = _one(
        _csv("gcp_gpu_vms.csv"), InstanceType="a3-megagpu-8g", AvailabilityZone="us-central1-a"
    )
    bundle = _one(
        _csv("gcp_accelerators.csv"),
        AcceleratorName="H100-MEGA",
        AcceleratorCount="8",
        AvailabilityZone="us-central1-a",
    )
    (od,) = _offers(
        catalog,
        provider="gcp",
        region="us-central1",
        instance_type="a3-megagpu-8g",
        capacity_type="on_demand",
    )
    assert od.usd_per_hour == pytest.approx(float(vm["Price"]) + float(bundle["Price"]), abs=1e-6)
    assert (od.gpu, od.gpus_per_node) == ("H100", 8)
    h200 = _offers(catalog, provider="gcp", gpu="H200", instance_type="a3-ultragpu-8g")
    assert h200, "GCP a3-ultragpu-8g (H200) offers are missing"


def test_gcp_a4_with_zero_vm_price_is_excluded(catalog: Catalog) -> None:
    rows = [r for r in _csv("gcp_gpu_vms.csv") if r["InstanceType"] == "a4-highgpu-8g"]
    assert rows and all(float(r["Price"]) == 0.0 for r in rows)
    assert _offers(catalog, instance_type="a4-highgpu-8g") == []
    reasons = [e for e in catalog.exclusions if "a4-highgpu-8g" in e]
    assert len(reasons) >= len(rows)
    assert all("zero" in e or "no " in e for e in reasons)
    assert any("us-central1-b" in e and "on-demand" in e for e in reasons)


def test_b300_without_spec_is_excluded(catalog: Catalog) -> None:
    assert canonical_gpu_name("B300") is None
    assert _offers(catalog, instance_type="p6-b300.48xlarge") == []
    reasons = [e for e in catalog.exclusions if "p6-b300.48xlarge" in e]
    assert reasons and all("B300" in e for e in reasons)


def test_aws_p5_on_demand_us_east_1(catalog: Catalog) -> None:
    (od,) = _offers(
        catalog,
        provider="aws",
        region="us-east-1",
        instance_type="p5.48xlarge",
        capacity_type="on_demand",
    )
    assert od.usd_per_hour == 55.04
    assert (od.gpu, od.gpus_per_node, od.zone) == ("H100", 8, "")
    assert od.interruptions_per_hour is None
    # one spot offer per AZ with a spot price; the raw snapshot has them all
    raw = [
        r
        for r in _csv("aws_gpu_vms.csv")
        if r["InstanceType"] == "p5.48xlarge" and r["Region"] == "us-east-1" and r["SpotPrice"]
    ]
    spots = _offers(
        catalog,
        provider="aws",
        region="us-east-1",
        instance_type="p5.48xlarge",
        capacity_type="spot",
    )
    assert {o.zone: o.usd_per_hour for o in spots} == {
        r["AvailabilityZone"]: float(r["SpotPrice"]) for r in raw
    }


def test_aws_missing_on_demand_price_is_excluded(catalog: Catalog) -> None:
    assert _offers(catalog, instance_type="p5e.48xlarge", capacity_type="on_demand") == []
    assert any("p5e.48xlarge" in e and "on-demand" in e for e in catalog.exclusions)


def test_spot_offers_have_hazard_and_cap(catalog: Catalog) -> None:
    spots = [o for o in catalog.offers if o.capacity_type == "spot"]
    assert len(spots) > 500
    for o in spots:
        assert o.interruptions_per_hour is not None and o.interruptions_per_hour > 0, o.key
        assert o.max_nodes is not None and o.max_nodes > 0, o.key
        assert o.zone, o.key


def test_no_reserved_offers_but_reserved_rates_flagged(catalog: Catalog) -> None:
    assert [o for o in catalog.offers if o.capacity_type == "reserved"] == []
    assert catalog.reserved_rates
    assert all(r.assumption for r in catalog.reserved_rates)
    assert {r.term_years for r in catalog.reserved_rates} == {1, 3}
    by_term = {
        r.term_years: r.usd_per_hour
        for r in catalog.reserved_rates
        if (r.provider, r.region, r.instance_type) == ("aws", "us-east-1", "p5.48xlarge")
    }
    assert 0 < by_term[3] < by_term[1] < 55.04


def test_storage_tiers_and_egress_present(catalog: Catalog) -> None:
    tiers = {(t.provider, t.tier): t for t in catalog.storage_tiers}
    assert tiers[("aws", "s3_standard")].usd_per_gb_month == 0.023
    assert tiers[("gcp", "gcs_archive")].min_days == 365
    assert {p for p, _ in tiers} == {"aws", "gcp"}
    paths = {(e.provider, e.path) for e in catalog.egress}
    for provider in ("aws", "gcp"):
        for path in ("same_zone", "cross_zone", "inter_region", "internet"):
            assert (provider, path) in paths


def test_staleness_warning() -> None:
    c = embedded_catalog()
    as_of = dt.date.fromisoformat(c.as_of)
    assert c.staleness_warning(as_of + dt.timedelta(days=STALE_AFTER_DAYS)) is None
    old = c.staleness_warning(as_of + dt.timedelta(days=STALE_AFTER_DAYS + 30))
    assert old is not None and f"{STALE_AFTER_DAYS + 30} days old" in old
    undated = Catalog(name="x", as_of="sometime", offers=())
    message = undated.staleness_warning()
    assert message is not None and "not a date" in message


def test_catalog_gpus_include_the_main_types(catalog: Catalog) -> None:
    assert {"H100", "H200", "A100-40GB", "A100-80GB", "L4", "L40S", "T4"} <= set(catalog.gpus())


def test_unknown_catalog_name() -> None:
    with pytest.raises(InputError) as info:
        load_catalog("embeded")
    assert_one_line(str(info.value))
    assert "did you mean: embedded" in str(info.value)


# ------------------------------------------------------------------------------ GPU names


@pytest.mark.parametrize("name", ["H100", "h100", "H100-80GB", "H100-MEGA", "h100_sxm5", " H100 "])
def test_h100_aliases(name: str) -> None:
    assert canonical_gpu_name(name) == "H100"
    assert resolve_gpu(name).name == "H100"


@pytest.mark.parametrize(
    ("name", "canon"),
    [
        ("A100", "A100-40GB"),
        ("a100-80gb", "A100-80GB"),
        ("trn1", "Trainium1"),
        ("l40s", "L40S"),
        ("H200-141GB", "H200"),
        ("B200", "B200"),
    ],
)
def test_other_aliases(name: str, canon: str) -> None:
    assert canonical_gpu_name(name) == canon


def test_every_canonical_name_resolves_to_itself() -> None:
    for name in gpus():
        assert canonical_gpu_name(name) == name
        assert canonical_gpu_name(name.lower()) == name


def test_unknown_gpu_raises_with_suggestions() -> None:
    with pytest.raises(InputError) as info:
        resolve_gpu("H1000", "--gpu")
    message = str(info.value)
    assert_one_line(message)
    assert message.startswith("--gpu: unknown GPU 'H1000'")
    assert "did you mean" in message and "h100" in message.lower()
    assert canonical_gpu_name("V100") is None


# ------------------------------------------------------------------------------ custom


def _write(tmp_path: Path, data: dict[str, Any], name: str = "lab.yaml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return str(path)


def _lab(**offer: Any) -> dict[str, Any]:
    base = {
        "provider": "lab",
        "region": "local",
        "instance_type": "h100x8",
        "gpu": "H100",
        "gpus_per_node": 8,
    }
    return {"as_of": dt.date.today().isoformat(), "offers": [{**base, **offer}]}


def test_custom_catalog_docstring_shape(tmp_path: Path) -> None:
    data = {
        "as_of": dt.date.today().isoformat(),
        "name": "lab",
        "offers": [
            {
                "provider": "lab",
                "region": "local",
                "instance_type": "h100x8",
                "gpu": "H100",
                "gpus_per_node": 8,
                "on_demand_usd_per_hour": 20.0,
                "spot_usd_per_hour": 8.0,
                "reserved_1y_usd_per_hour": 14.0,
                "spot_interruptions_per_hour": 0.05,
                "max_nodes": 16,
                "reserved_nodes_held": 4,
                "reserved_term_years": 1,
                "reserved_sunk": False,
            }
        ],
        "storage_tiers": [
            {"provider": "lab", "region": "local", "tier": "nfs", "usd_per_gb_month": 0.05}
        ],
        "egress": [{"provider": "lab", "path": "inter_region", "usd_per_gb": 0.0}],
    }
    path = _write(tmp_path, data)
    c = load_custom_catalog(path)
    assert c.name == "lab"
    by_type = {o.capacity_type: o for o in c.offers}
    assert set(by_type) == {"on_demand", "spot", "reserved"}
    assert by_type["on_demand"].usd_per_hour == 20.0 and by_type["on_demand"].max_nodes == 16
    assert by_type["spot"].usd_per_hour == 8.0
    assert by_type["spot"].interruptions_per_hour == 0.05 and by_type["spot"].max_nodes == 16
    reserved = by_type["reserved"]
    assert (reserved.usd_per_hour, reserved.max_nodes, reserved.reserved_sunk) == (14.0, 4, False)
    assert all(o.gpu == "H100" and o.gpus_per_node == 8 for o in c.offers)
    assert [(r.term_years, r.usd_per_hour, r.assumption) for r in c.reserved_rates] == [
        (1, 14.0, False)
    ]
    assert [(t.tier, t.usd_per_gb_month) for t in c.storage_tiers] == [("nfs", 0.05)]
    assert [(e.path, e.usd_per_gb) for e in c.egress] == [("inter_region", 0.0)]
    assert c.staleness_warning() is None
    assert c.gpus() == ["H100"]
    # the same file through the generic loader
    assert [o.key for o in load_catalog(path).offers] == [o.key for o in c.offers]


def test_custom_absent_prices_mean_not_offered(tmp_path: Path) -> None:
    c = load_custom_catalog(_write(tmp_path, _lab(on_demand_usd_per_hour=12.5)))
    assert [o.capacity_type for o in c.offers] == ["on_demand"]
    c = load_custom_catalog(
        _write(tmp_path, _lab(spot_usd_per_hour=3.0, spot_max_nodes=2, max_nodes=10))
    )
    (spot,) = c.offers
    assert spot.capacity_type == "spot" and spot.max_nodes == 2
    assert spot.interruptions_per_hour is not None and spot.interruptions_per_hour > 0
    assert "default band" in spot.note
    assert c.name == "lab"  # from the file name


def test_custom_reserved_rate_without_holdings_is_not_an_offer(tmp_path: Path) -> None:
    c = load_custom_catalog(
        _write(tmp_path, _lab(on_demand_usd_per_hour=20.0, reserved_3y_usd_per_hour=9.0))
    )
    assert [o.capacity_type for o in c.offers] == ["on_demand"]
    assert [(r.term_years, r.usd_per_hour) for r in c.reserved_rates] == [(3, 9.0)]


def test_custom_sunk_reservation_is_free(tmp_path: Path) -> None:
    c = load_custom_catalog(_write(tmp_path, _lab(reserved_nodes_held=2, reserved_sunk=True)))
    (reserved,) = c.offers
    assert reserved.capacity_type == "reserved"
    assert reserved.usd_per_hour == 0.0 and reserved.reserved_sunk
    assert reserved.max_nodes == 2


def test_custom_held_reservation_at_amortised_rate(tmp_path: Path) -> None:
    c = load_custom_catalog(
        _write(
            tmp_path,
            _lab(
                reserved_nodes_held=3,
                reserved_term_years=3,
                reserved_3y_usd_per_hour=7.5,
                reserved_1y_usd_per_hour=11.0,
            ),
        )
    )
    (reserved,) = c.offers
    assert (reserved.usd_per_hour, reserved.max_nodes) == (7.5, 3)


def test_custom_held_reservation_without_rate_is_excluded(tmp_path: Path) -> None:
    c = load_custom_catalog(
        _write(tmp_path, _lab(on_demand_usd_per_hour=20.0, reserved_nodes_held=2))
    )
    assert [o.capacity_type for o in c.offers] == ["on_demand"]
    assert len(c.exclusions) == 1 and "reserved_1y_usd_per_hour" in c.exclusions[0]


def test_custom_gpu_alias_is_canonicalised(tmp_path: Path) -> None:
    c = load_custom_catalog(_write(tmp_path, _lab(gpu="h100-mega", on_demand_usd_per_hour=1.0)))
    assert c.offers[0].gpu == "H100"


def test_custom_catalog_staleness(tmp_path: Path) -> None:
    data = _lab(on_demand_usd_per_hour=1.0)
    data["as_of"] = "2020-01-01"
    c = load_custom_catalog(_write(tmp_path, data))
    warning = c.staleness_warning()
    assert warning is not None and "2020-01-01" in warning and "days old" in warning
    fresh = c.staleness_warning(dt.date(2020, 1, 31))
    assert fresh is None


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda d: d["offers"][0].update(on_demand_usd=1.0),
            ("offers[0].on_demand_usd", "unknown key", "on_demand_usd_per_hour"),
        ),
        (lambda d: d.update(offerz=[]), ("offerz", "did you mean: offers")),
        (
            lambda d: d["offers"][0].update(on_demand_usd_per_hour=-1.0),
            ("offers[0].on_demand_usd_per_hour", "-1.0"),
        ),
        (
            lambda d: d["offers"][0].update(spot_usd_per_hour=float("inf")),
            ("offers[0].spot_usd_per_hour", "inf"),
        ),
        (lambda d: d["offers"][0].update(gpu="Z100"), ("offers[0].gpu", "'Z100'", "known GPUs")),
        (lambda d: d["offers"][0].update(gpus_per_node=0), ("offers[0].gpus_per_node", "0")),
        (
            lambda d: d["offers"][0].update(reserved_term_years=2),
            ("offers[0].reserved_term_years", "2"),
        ),
        (lambda d: d.update(offers=[]), ("offers", "[]")),
        (lambda d: d.pop("as_of"), ("as_of", "required")),
        (lambda d: d.update(as_of="last tuesday"), ("as_of", "'last tuesday'")),
        (
            lambda d: d.update(egress=[{"provider": "lab", "path": "moon", "usd_per_gb": 1}]),
            ("egress[0].path", "'moon'"),
        ),
        (
            lambda d: d.update(
                storage_tiers=[{"provider": "lab", "tier": "t", "usd_per_gb_month": -2}]
            ),
            ("storage_tiers[0].usd_per_gb_month", "-2"),
        ),
    ],
    ids=[
        "offer-key",
        "top-key",
        "negative-price",
        "inf-price",
        "unknown-gpu",
        "zero-gpus",
        "term",
        "no-offers",
        "no-as-of",
        "bad-date",
        "egress-path",
        "storage-price",
    ],
)
def test_bad_custom_catalog(tmp_path: Path, mutate: Any, expected: tuple[str, ...]) -> None:
    data = _lab(on_demand_usd_per_hour=10.0)
    mutate(data)
    path = _write(tmp_path, data)
    with pytest.raises(InputError) as info:
        load_custom_catalog(path)
    message = str(info.value)
    assert_one_line(message)
    assert message.startswith(f"catalog {str(path)!r}: ")  # file names are quoted
    for text in expected:
        assert text in message, f"{text!r} not in {message!r}"


def test_custom_catalog_file_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        load_catalog(str(tmp_path / "missing.yaml"))
    assert_one_line(str(info.value))
    assert "not found" in str(info.value)
    bad = tmp_path / "bad.yaml"
    bad.write_text("offers: [\n", encoding="utf-8")
    with pytest.raises(InputError) as info:
        load_catalog(str(bad))
    assert_one_line(str(info.value))
    assert "bad.yaml" in str(info.value)


def test_custom_catalog_rejects_repeated_offers_and_boolean_prices(tmp_path) -> None:
    row = ("{provider: lab, region: local, instance_type: h100x8, gpu: H100, gpus_per_node: 8, "
           "on_demand_usd_per_hour: 20.0}")
    path = tmp_path / "dup.yaml"
    path.write_text(f"as_of: 2026-11-01\noffers:\n  - {row}\n  - {row}\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"offers\[1\] repeats offers\[0\]"):
        load_custom_catalog(str(path))
    path.write_text("as_of: 2026-11-01\noffers:\n  - " + row.replace("20.0", "true") + "\n",
                    encoding="utf-8")
    with pytest.raises(InputError, match=r"on_demand_usd_per_hour = True"):
        load_custom_catalog(str(path))
