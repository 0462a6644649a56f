"""Live AWS GPU prices through boto3 (extra ``aws``): on-demand, reserved and spot.

Sources (the user's own credentials, from the SDK's default chain only: environment, shared
config/credentials files, SSO, container or instance role; nothing is logged or stored):

* **On-demand and reserved** — the Price List Query API, ``pricing.get_products`` (endpoint
  region us-east-1), ``ServiceCode=AmazonEC2``, ``FormatVersion=aws_v1``, one query per instance
  type (and per region when ``regions`` are given) with ``TERM_MATCH`` filters ``instanceType``,
  ``regionCode``, ``operatingSystem=Linux``, ``tenancy=Shared``, ``preInstalledSw=NA``,
  ``capacitystatus=Used``; paginated (``NextToken``). Each ``PriceList`` entry is a JSON *string*
  ``{product: {sku, attributes: {instanceType, regionCode, vcpu, memory, gpu, gpuMemory, ...}},
  terms: {OnDemand: {...}, Reserved: {...}}}``. Items whose ``marketoption`` is not ``OnDemand``
  (EC2 Capacity Blocks) are skipped.
* **Reserved terms** keep ``LeaseContractLength`` (1yr/3yr), ``OfferingClass``
  (standard/convertible) and ``PurchaseOption`` (No/Partial/All Upfront). A term has an hourly
  price dimension (unit ``Hrs``) and, unless No Upfront, an upfront fee (unit ``Quantity``). The
  effective hourly rate is ``hourly + upfront / (years × 8760 h)`` (AWS defines a 1-year term as
  31,536,000 s = 8,760 h, 3 years as 94,608,000 s); both the parts and the effective rate are
  kept in :class:`~providers.base.ReservedRate`. Reserved rates are for buying analysis
  (``ptplan reserve``); a project plan never uses them without holdings (DESIGN §3).
* **Spot** — EC2 ``describe_spot_price_history`` per region (``ProductDescriptions=
  ['Linux/UNIX']``, ``StartTime=now``: the price in effect now per availability zone; the latest
  ``Timestamp`` per (instance type, zone) wins). Zones are keyed by their account-independent
  zone ID (``AvailabilityZoneId``, or via ``describe_availability_zones`` when absent), like the
  embedded catalog.

GPU mapping: the Pricing API names no GPU model, so the instance family maps to a GPU
(:data:`FAMILY_GPU`, SkyPilot's names, resolved through :mod:`optimizer.core.hardware`); the count is
the product's ``gpu`` attribute (Trainium chips, absent there, from :data:`ACCELERATOR_COUNT`),
and ``gpuMemory`` / count must match the GPU's memory within 10 % or the row is excluded.

Spot interruption rates and capacity are not published by these APIs: the embedded catalog's
Spot Advisor bands and its 8-nodes-per-zone cap apply (assumptions, stated in each offer's note).

Retries: botocore ``standard`` mode (exponential backoff with jitter on throttling and transient
errors), ``max_attempts`` from the SDK config (``AWS_MAX_ATTEMPTS``) or 8. Any fault — throttling
after the retries, a page failing mid-pull, a malformed price item, missing or rejected
credentials, an unreachable endpoint — raises :class:`~optimizer.core.errors.ProviderError` before
anything is written (the cache is written only from a complete pull).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from optimizer.core.errors import InputError, ProviderError
from optimizer.core.hardware import canonical_gpu_name, gpus
from providers.base import Offer, ReservedRate, checked_regions
from providers.cache import ProgressFn, Pull, utc_now
from providers.embedded import (
    BAND_FRACTION,
    DEFAULT_SPOT_BAND,
    SPOT_BANDS,
    SPOT_NODES_PER_ZONE,
    hazard_per_hour,
)

PRICING_REGION = "us-east-1"
HOURS_PER_YEAR = 8760
DEFAULT_MAX_ATTEMPTS = 8
SOURCE_PRICING = "AWS Price List API (pricing.get_products AmazonEC2)"
SOURCE_SPOT = "AWS EC2 DescribeSpotPriceHistory (Linux/UNIX)"
BASE_FILTERS: tuple[tuple[str, str], ...] = (
    ("operatingSystem", "Linux"),
    ("tenancy", "Shared"),
    ("preInstalledSw", "NA"),
    ("capacitystatus", "Used"),
)

FAMILY_GPU: dict[str, str] = {
    # instance family -> accelerator (SkyPilot catalog names; AWS instance type pages)
    "g4dn": "T4",
    "g5": "A10G",
    "g6": "L4",
    "g6e": "L40S",
    "p4d": "A100",
    "p4de": "A100-80GB",
    "p5": "H100",
    "p5e": "H200",
    "p5en": "H200",
    "p6-b200": "B200",
    "p6-b300": "B300",
    "trn1": "Trainium",
    "trn1n": "Trainium",
    "trn2": "Trainium2",
}

ACCELERATOR_COUNT: dict[str, int] = {
    # GPUs / Trainium chips per instance: AWS instance type pages, as tabulated in the embedded
    # snapshot (providers/data/aws_gpu_vms.csv, AcceleratorCount). Used when the price item's
    # ``gpu`` attribute is absent (Trainium) and to define the default instance types.
    "g4dn.xlarge": 1, "g4dn.2xlarge": 1, "g4dn.4xlarge": 1, "g4dn.8xlarge": 1,
    "g4dn.16xlarge": 1, "g4dn.12xlarge": 4, "g4dn.metal": 8,
    "g5.xlarge": 1, "g5.2xlarge": 1, "g5.4xlarge": 1, "g5.8xlarge": 1, "g5.16xlarge": 1,
    "g5.12xlarge": 4, "g5.24xlarge": 4, "g5.48xlarge": 8,
    "g6.xlarge": 1, "g6.2xlarge": 1, "g6.4xlarge": 1, "g6.8xlarge": 1, "g6.16xlarge": 1,
    "g6.12xlarge": 4, "g6.24xlarge": 4, "g6.48xlarge": 8,
    "g6e.xlarge": 1, "g6e.2xlarge": 1, "g6e.4xlarge": 1, "g6e.8xlarge": 1, "g6e.16xlarge": 1,
    "g6e.12xlarge": 4, "g6e.24xlarge": 4, "g6e.48xlarge": 8,
    "p4d.24xlarge": 8, "p4de.24xlarge": 8,
    "p5.4xlarge": 1, "p5.48xlarge": 8, "p5e.48xlarge": 8, "p5en.48xlarge": 8,
    "p6-b200.48xlarge": 8, "p6-b300.48xlarge": 8,
    "trn1.2xlarge": 1, "trn1.32xlarge": 16, "trn1n.32xlarge": 16,
    "trn2.3xlarge": 1, "trn2.48xlarge": 16,
}
DEFAULT_INSTANCE_TYPES: tuple[str, ...] = tuple(sorted(ACCELERATOR_COUNT))
"""GPU and Trainium instance types pulled by default (the embedded snapshot's types)."""

_REGION_RE = re.compile(r"^[a-z]{2}(-gov)?-[a-z]+-\d+$")
_THROTTLE = {"Throttling", "ThrottlingException", "RequestLimitExceeded",
             "TooManyRequestsException", "RequestThrottled", "SlowDown"}
_CREDENTIALS = {"UnrecognizedClientException", "InvalidClientTokenId", "AuthFailure",
                "ExpiredToken", "ExpiredTokenException", "SignatureDoesNotMatch",
                "AccessDeniedException", "AccessDenied", "UnauthorizedOperation",
                "IncompleteSignature"}
_UNCHANGED = "the cache is unchanged"


def family(instance_type: str) -> str:
    return instance_type.split(".")[0]


def validate_regions(regions: Iterable[str]) -> tuple[str, ...]:
    return checked_regions(regions, _REGION_RE, "an AWS region code", "us-east-1,us-west-2")


def validate_instance_types(types: Iterable[str]) -> tuple[str, ...]:
    out = tuple(sorted(set(types)))
    for t in out:
        if family(t) not in FAMILY_GPU:
            raise InputError(f"--instance-type: {t!r} is not in a known GPU family; use one of "
                             f"the families {', '.join(sorted(FAMILY_GPU))}")
    return out


def _first_sentence(message: str) -> str:
    # AWS error messages (e.g. SignatureDoesNotMatch) can quote signed request headers; keep the
    # first sentence only so that nothing secret reaches the terminal.
    text = message.split("\n")[0]
    return text.split(". ")[0][:160]


def _translate(exc: Exception, what: str, attempts: int) -> ProviderError:
    from botocore.exceptions import (
        BotoCoreError,
        ClientError,
        EndpointConnectionError,
        NoCredentialsError,
        NoRegionError,
        PartialCredentialsError,
    )

    if isinstance(exc, NoCredentialsError | PartialCredentialsError):
        return ProviderError(
            "no AWS credentials found by the SDK default chain (environment, shared config and "
            "credentials files, SSO, container or instance role); configure them (e.g. `aws "
            f"configure` or AWS_PROFILE) and retry; {_UNCHANGED}")
    if isinstance(exc, ClientError):
        err = exc.response.get("Error", {})
        code = str(err.get("Code", "?"))
        if code in _THROTTLE:
            return ProviderError(
                f"AWS throttled {what} ({code}) after {attempts} attempts with backoff; retry "
                f"later or narrow --regions/--instance-type; {_UNCHANGED}")
        if code in _CREDENTIALS:
            return ProviderError(
                f"AWS rejected the credentials for {what} ({code}: "
                f"{_first_sentence(str(err.get('Message', '')))}); check the profile and its "
                f"permissions (pricing:GetProducts, ec2:DescribeSpotPriceHistory); {_UNCHANGED}")
        return ProviderError(f"AWS {what} failed ({code}: "
                             f"{_first_sentence(str(err.get('Message', '')))}); {_UNCHANGED}")
    if isinstance(exc, EndpointConnectionError):
        return ProviderError(f"cannot reach the AWS endpoint for {what} ({exc}); check the network "
                             f"or --endpoint; {_UNCHANGED}")
    if isinstance(exc, NoRegionError):
        return ProviderError(f"AWS {what}: no region configured; {_UNCHANGED}")
    if isinstance(exc, BotoCoreError):
        return ProviderError(f"AWS {what} failed ({type(exc).__name__}); {_UNCHANGED}")
    return ProviderError(f"AWS {what} failed ({type(exc).__name__}); {_UNCHANGED}")


def _guarded(pages: Iterable[dict[str, Any]], what: str, attempts: int
             ) -> Iterator[dict[str, Any]]:
    """Iterate SDK pages, turning SDK faults (also those raised on page 2, 3, ...) into
    ProviderError."""
    from botocore.exceptions import BotoCoreError, ClientError

    it = iter(pages)
    while True:
        try:
            page = next(it)
        except StopIteration:
            return
        except (BotoCoreError, ClientError) as exc:
            raise _translate(exc, what, attempts) from None
        yield page


def _num(value: Any, sku: str, field: str) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise ProviderError(f"malformed AWS price item (sku {sku}): {field} = {value!r} is not a "
                            f"number; {_UNCHANGED}") from None
    if out != out or out < 0 or out == float("inf"):
        raise ProviderError(f"malformed AWS price item (sku {sku}): {field} = {value!r}; "
                            f"{_UNCHANGED}")
    return out


def _get(d: Any, key: str, sku: str, path: str) -> Any:
    if not isinstance(d, dict) or key not in d:
        raise ProviderError(f"malformed AWS price item (sku {sku}): missing {path}.{key}; "
                            f"{_UNCHANGED}")
    return d[key]


def _gib(text: str) -> float | None:
    m = re.match(r"^\s*([\d,.]+)\s*GiB", text or "")
    return float(m.group(1).replace(",", "")) if m else None


def _years(text: str, sku: str) -> int:
    m = re.match(r"^\s*([13])\s*yr", text or "")
    if not m:
        raise ProviderError(f"malformed AWS price item (sku {sku}): LeaseContractLength "
                            f"{text!r} (expected 1yr or 3yr); {_UNCHANGED}")
    return int(m.group(1))


@dataclass(frozen=True, slots=True)
class TypeInfo:
    """What a price item says about an instance type (needed to build its spot offers)."""

    instance_type: str
    gpu: str
    gpus_per_node: int
    vcpus: float | None
    memory_gib: float | None


def parse_price_item(text: str, as_of: str, exclusions: list[str]
                     ) -> tuple[Offer | None, list[ReservedRate], TypeInfo | None]:
    """One ``PriceList`` JSON string -> (on-demand offer, reserved rates, GPU info).

    Returns ``(None, [], None)`` for an item outside the filters (recorded in ``exclusions`` when
    it is a price we could not use). Raises ProviderError when the item is malformed."""
    try:
        item = json.loads(text)
    except (TypeError, json.JSONDecodeError) as exc:
        raise ProviderError(f"malformed AWS price item: not a JSON string ({exc}); "
                            f"{_UNCHANGED}") from None
    product = _get(item, "product", "?", "item")
    sku = str(product.get("sku", "?")) if isinstance(product, dict) else "?"
    attrs = _get(product, "attributes", sku, "product")
    itype = str(_get(attrs, "instanceType", sku, "product.attributes"))
    region = str(_get(attrs, "regionCode", sku, "product.attributes"))
    for field, value in BASE_FILTERS:
        if field in attrs and attrs[field] != value:
            return None, [], None
    if attrs.get("marketoption", "OnDemand") != "OnDemand":
        return None, [], None
    accel = FAMILY_GPU.get(family(itype))
    gpu = canonical_gpu_name(accel) if accel else None
    if gpu is None:
        exclusions.append(f"aws {itype} {region}: no GPU spec for "
                          f"{accel or 'family ' + family(itype)!r}")
        return None, [], None
    raw_count = str(attrs.get("gpu", "")).strip()
    if raw_count.isdigit() and int(raw_count) > 0:
        count = int(raw_count)
    elif itype in ACCELERATOR_COUNT:
        count = ACCELERATOR_COUNT[itype]
    else:
        exclusions.append(f"aws {itype} {region}: accelerator count unknown (gpu attribute "
                          f"{raw_count or 'absent'!r})")
        return None, [], None
    mem = re.match(r"^\s*([\d.]+)\s*GB", str(attrs.get("gpuMemory", "")))
    if mem and count:
        per_gpu, spec = float(mem.group(1)) / count, gpus()[gpu].memory_gb
        if abs(per_gpu - spec) > 0.1 * spec:
            exclusions.append(f"aws {itype} {region}: gpuMemory {attrs['gpuMemory']} for {count} "
                              f"GPUs does not match {gpu} ({spec:g} GB each)")
            return None, [], None
    vcpus = _num(attrs["vcpu"], sku, "vcpu") if str(attrs.get("vcpu", "")).strip() else None
    info = TypeInfo(itype, gpu, count, vcpus, _gib(str(attrs.get("memory", ""))))
    terms = _get(item, "terms", sku, "item")
    if not isinstance(terms, dict):
        raise ProviderError(f"malformed AWS price item (sku {sku}): terms is not an object; "
                            f"{_UNCHANGED}")
    offer: Offer | None = None
    common: dict[str, Any] = dict(provider="aws", region=region, instance_type=itype, gpu=gpu,
                                  gpus_per_node=count, vcpus=info.vcpus,
                                  memory_gib=info.memory_gib, as_of=as_of)
    for term in (terms.get("OnDemand") or {}).values():
        dims = _get(term, "priceDimensions", sku, "terms.OnDemand.<term>")
        for dim in dims.values():
            if _get(dim, "unit", sku, "priceDimensions.<rate>") != "Hrs":
                continue
            price = _num(_get(_get(dim, "pricePerUnit", sku, "priceDimensions.<rate>"), "USD",
                              sku, "pricePerUnit"), sku, "pricePerUnit.USD")
            if price <= 0:
                exclusions.append(f"aws {itype} {region}: on-demand price {price} (not offered)")
            elif offer is None or price < offer.usd_per_hour:
                offer = Offer(zone="", capacity_type="on_demand", usd_per_hour=price,
                              source=SOURCE_PRICING, **common)
    rates: list[ReservedRate] = []
    for term in (terms.get("Reserved") or {}).values():
        ta = _get(term, "termAttributes", sku, "terms.Reserved.<term>")
        years = _years(str(_get(ta, "LeaseContractLength", sku, "termAttributes")), sku)
        option = str(_get(ta, "PurchaseOption", sku, "termAttributes"))
        klass = str(_get(ta, "OfferingClass", sku, "termAttributes"))
        hourly, upfront = 0.0, 0.0
        dims = _get(term, "priceDimensions", sku, "terms.Reserved.<term>")
        for dim in dims.values():
            unit = _get(dim, "unit", sku, "priceDimensions.<rate>")
            usd = _num(_get(_get(dim, "pricePerUnit", sku, "priceDimensions.<rate>"), "USD",
                            sku, "pricePerUnit"), sku, "pricePerUnit.USD")
            if unit == "Hrs":
                hourly += usd
            elif unit == "Quantity":
                upfront += usd
        effective = hourly + upfront / (years * HOURS_PER_YEAR)
        if effective <= 0:
            exclusions.append(f"aws {itype} {region}: reserved {years}y {klass} {option} priced 0")
            continue
        rates.append(ReservedRate(
            provider="aws", region=region, instance_type=itype, term_years=years,
            usd_per_hour=round(effective, 6), source=SOURCE_PRICING + " terms.Reserved",
            assumption=False, offering_class=klass, purchase_option=option,
            upfront_usd=round(upfront, 2), recurring_usd_per_hour=round(hourly, 6), as_of=as_of))
    return offer, rates, info


def _clients(endpoint: str | None, attempts: int) -> tuple[Any, Callable[[str], Any]]:
    try:
        import boto3
        from botocore.config import Config
    except ImportError:
        raise ProviderError("--provider aws needs the AWS SDK: pip install 'ptplan[aws]'"
                            ) from None
    session = boto3.session.Session()
    config = Config(retries={"mode": "standard", "total_max_attempts": attempts},
                    connect_timeout=10, read_timeout=60, user_agent_extra="ptplan")
    pricing = session.client("pricing", region_name=PRICING_REGION, endpoint_url=endpoint,
                             config=config)

    def ec2(region: str) -> Any:
        return session.client("ec2", region_name=region, endpoint_url=endpoint, config=config)

    return pricing, ec2


def max_attempts() -> int:
    """The SDK's configured ``max_attempts`` (AWS_MAX_ATTEMPTS or config file), else 8."""
    try:
        import botocore.session

        value = botocore.session.get_session().get_config_variable("max_attempts")
    except Exception:  # config parsing problems fall back to the default
        value = None
    return int(value) if value else DEFAULT_MAX_ATTEMPTS


def fetch_aws(regions: Iterable[str] = (), instance_types: Iterable[str] = (),
              endpoint: str | None = None, progress: ProgressFn | None = None,
              now: dt.datetime | None = None) -> Pull:
    """Pull on-demand, reserved and spot prices; returns a complete :class:`Pull` or raises.

    ``regions`` empty: every region the Price List returns for the instance types. ``endpoint``
    overrides both the Pricing and the EC2 endpoint (mirrors, tests)."""
    regions = validate_regions(regions)
    types = validate_instance_types(instance_types) or DEFAULT_INSTANCE_TYPES
    attempts = max_attempts()
    pricing, ec2_for = _clients(endpoint, attempts)
    stamp = now or dt.datetime.now(dt.UTC)
    as_of = utc_now(stamp)
    exclusions: list[str] = []
    on_demand: dict[tuple[str, str], Offer] = {}
    rates: dict[tuple[Any, ...], ReservedRate] = {}
    info: dict[str, TypeInfo] = {}
    queries = [(t, r) for t in types for r in (regions or (None,))]
    total = len(queries) + len(regions)
    done = 0
    for itype, region in queries:
        filters = [{"Type": "TERM_MATCH", "Field": "instanceType", "Value": itype}]
        if region:
            filters.append({"Type": "TERM_MATCH", "Field": "regionCode", "Value": region})
        filters += [{"Type": "TERM_MATCH", "Field": f, "Value": v} for f, v in BASE_FILTERS]
        what = f"pricing.get_products for {itype}" + (f" in {region}" if region else "")
        try:
            pages = pricing.get_paginator("get_products").paginate(
                ServiceCode="AmazonEC2", FormatVersion="aws_v1", Filters=filters,
                PaginationConfig={"PageSize": 100})
        except Exception as exc:
            raise _translate(exc, what, attempts) from None
        for page in _guarded(pages, what, attempts):
            for text in page.get("PriceList", []):
                offer, item_rates, tinfo = parse_price_item(text, as_of, exclusions)
                if regions and offer is not None and offer.region not in regions:
                    continue
                if tinfo is not None:
                    info.setdefault(tinfo.instance_type, tinfo)
                if offer is not None:
                    key = (offer.instance_type, offer.region)
                    if key not in on_demand or offer.usd_per_hour < on_demand[key].usd_per_hour:
                        on_demand[key] = offer
                for r in item_rates:
                    if regions and r.region not in regions:
                        continue
                    rates[(r.region, r.instance_type, r.term_years, r.offering_class,
                           r.purchase_option)] = r
        done += 1
        if progress:
            progress(f"aws prices {itype}" + (f" {region}" if region else ""), done,
                     total or None)
    spot_regions = regions or tuple(sorted({r for _, r in on_demand}))
    total = len(queries) + len(spot_regions)
    spot: list[Offer] = []
    for region in spot_regions:
        spot += _spot(ec2_for(region), region, types, info, on_demand, stamp, attempts, as_of)
        done += 1
        if progress:
            progress(f"aws spot {region}", done, total)
    if not on_demand and not spot:
        raise ProviderError("AWS returned no prices for the requested instance types"
                            + (f" in {', '.join(regions)}" if regions else "")
                            + f"; check --regions and --instance-type; {_UNCHANGED}")
    offers = sorted([*on_demand.values(), *spot],
                    key=lambda o: (o.region, o.zone, o.instance_type, o.capacity_type))
    return Pull(
        provider="aws", as_of=as_of, source=f"{SOURCE_PRICING}; {SOURCE_SPOT}",
        regions=regions, offers=tuple(offers),
        reserved_rates=tuple(sorted(rates.values(), key=lambda r: (
            r.region, r.instance_type, r.term_years, r.offering_class, r.purchase_option))),
        exclusions=tuple(sorted(set(exclusions))),
        notes=(f"spot capacity assumed {SPOT_NODES_PER_ZONE} nodes per zone and interruption "
               "rates from Spot Advisor bands (neither is published by the APIs)",),
    )


def _spot(ec2: Any, region: str, types: tuple[str, ...], info: dict[str, TypeInfo],
          on_demand: dict[tuple[str, str], Offer], stamp: dt.datetime, attempts: int,
          as_of: str) -> list[Offer]:
    known = tuple(t for t in types if t in info)
    if not known:
        return []
    what = f"ec2.describe_spot_price_history in {region}"
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    try:
        pages = ec2.get_paginator("describe_spot_price_history").paginate(
            InstanceTypes=list(known), ProductDescriptions=["Linux/UNIX"], StartTime=stamp)
    except Exception as exc:
        raise _translate(exc, what, attempts) from None
    for page in _guarded(pages, what, attempts):
        for row in page.get("SpotPriceHistory", []):
            itype, zone = row.get("InstanceType"), row.get("AvailabilityZone")
            if itype not in info or not zone or row.get("ProductDescription") != "Linux/UNIX":
                continue
            ts = row.get("Timestamp")
            old = latest.get((itype, zone))
            if old is None or (ts is not None and old.get("Timestamp") is not None
                               and ts > old["Timestamp"]):
                latest[(itype, zone)] = row
    zone_ids: dict[str, str] = {}
    if any(not row.get("AvailabilityZoneId") for row in latest.values()):
        try:
            zones = ec2.describe_availability_zones()["AvailabilityZones"]
        except Exception as exc:
            raise _translate(exc, f"ec2.describe_availability_zones in {region}",
                             attempts) from None
        zone_ids = {z["ZoneName"]: z["ZoneId"] for z in zones if "ZoneId" in z}
    out: list[Offer] = []
    for (itype, zone), row in sorted(latest.items()):
        sku = f"spot {itype} {zone}"
        price = _num(row.get("SpotPrice"), sku, "SpotPrice")
        if price <= 0:
            continue
        t = info[itype]
        fam = family(itype)
        band = SPOT_BANDS.get(fam, DEFAULT_SPOT_BAND)
        od = on_demand.get((itype, region))
        above = ("; spot above on-demand (kept as published)"
                 if od is not None and price > od.usd_per_hour else "")
        out.append(Offer(
            provider="aws", region=region,
            zone=row.get("AvailabilityZoneId") or zone_ids.get(zone, zone),
            instance_type=itype, gpu=t.gpu, gpus_per_node=t.gpus_per_node,
            capacity_type="spot", usd_per_hour=price, vcpus=t.vcpus, memory_gib=t.memory_gib,
            interruptions_per_hour=hazard_per_hour(BAND_FRACTION[band]),
            max_nodes=SPOT_NODES_PER_ZONE, as_of=as_of, source=SOURCE_SPOT,
            note=(f"spot band {band} ({'advisor' if fam in SPOT_BANDS else 'default'}); "
                  f"capacity assumed {SPOT_NODES_PER_ZONE} nodes{above}")))
    return out
