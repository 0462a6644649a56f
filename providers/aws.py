"""Live AWS GPU prices through boto3 (extra ``aws``): on-demand, reserved and spot.

Sources (the user's own credentials, from the SDK's default chain only: environment, shared
config/credentials files, SSO, container or instance role; nothing is logged or stored):

* **On-demand and reserved** — the Price List Query API, ``pricing.get_products`` (endpoint
  region us-east-1), ``ServiceCode=AmazonEC2``, ``FormatVersion=aws_v1``, one query per instance
  type (and per region when ``regions`` are given) with ``TERM_MATCH`` filters ``instanceType``,
  ``regionCode``, ``operatingSystem=Linux``, ``tenancy=Shared``, ``preInstalledSw=NA``,
  ``capacitystatus=Used``; paginated (``NextToken``). Each ``PriceList`` entry is a JSON *string*
  read by :func:`ptplan.providers.aws_prices.parse_price_item` (pydantic models of the item's shape;
  EC2 Capacity Blocks skipped). Reserved terms keep the lease length (1yr/3yr), offering class
  (standard/convertible), purchase option (No/Partial/All Upfront), the upfront fee, the hourly
  part and the effective rate in :class:`~ptplan.providers.base.ReservedRate`: rates for buying
  analysis (``ptplan reserve``); a project plan never uses them without holdings (DESIGN §3).
* **Spot** — EC2 ``describe_spot_price_history`` per region (``ProductDescriptions=
  ['Linux/UNIX']``, ``StartTime=now``: the price in effect now per availability zone; the latest
  ``Timestamp`` per (instance type, zone) wins). Zones are keyed by their account-independent
  zone ID (``AvailabilityZoneId``, or via ``describe_availability_zones`` when absent), like the
  embedded catalog.

GPU mapping (instance family -> GPU, the ``gpu`` attribute or the accelerator table for the
count, ``gpuMemory`` checked against the GPU): :mod:`ptplan.providers.aws_prices`.

Spot interruption rates and capacity are not published by these APIs: the embedded catalog's
Spot Advisor bands and its 8-nodes-per-zone cap apply (assumptions, stated in each offer's note).

Retries: botocore ``standard`` mode (exponential backoff with jitter on throttling and transient
errors), ``max_attempts`` from the SDK config (``AWS_MAX_ATTEMPTS``) or 8. Any fault — throttling
after the retries, a page failing mid-pull, a malformed price item, missing or rejected
credentials, an unreachable endpoint — raises :class:`~ptplan.core.errors.ProviderError` before
anything is written (the cache is written only from a complete pull).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ptplan.core.errors import InputError, ProviderError
from ptplan.providers.aws_prices import (
    BASE_FILTERS,
    CPU_FAMILIES,
    DEFAULT_INSTANCE_TYPES,
    FAMILY_GPU,
    SOURCE_PRICING,
    SpotRow,
    TypeInfo,
    parse_price_item,
    read_spot_row,
)
from ptplan.providers.base import Offer, ReservedRate, checked_regions
from ptplan.providers.cache import UNCHANGED, ProgressFn, Pull, utc_now
from ptplan.providers.embedded import (
    DEFAULT_SPOT_BAND,
    SPOT_BANDS,
    SPOT_NODES_PER_ZONE,
    aws_family,
    band_hazard,
)

PRICING_REGION = "us-east-1"
DEFAULT_MAX_ATTEMPTS = 8
SOURCE_SPOT = "AWS EC2 DescribeSpotPriceHistory (Linux/UNIX)"

_REGION_RE = re.compile(r"^[a-z]{2}(-gov)?-[a-z]+-\d+$")
_THROTTLE = {"Throttling", "ThrottlingException", "RequestLimitExceeded",
             "TooManyRequestsException", "RequestThrottled", "SlowDown",
             "LimitExceededException"}  # Cost Explorer's rate limit
_CREDENTIALS = {"UnrecognizedClientException", "InvalidClientTokenId", "AuthFailure",
                "ExpiredToken", "ExpiredTokenException", "SignatureDoesNotMatch",
                "AccessDeniedException", "AccessDenied", "UnauthorizedOperation",
                "IncompleteSignature"}


def validate_regions(regions: Iterable[str]) -> tuple[str, ...]:
    return checked_regions(regions, _REGION_RE, "an AWS region code", "us-east-1,us-west-2")


def validate_instance_types(types: Iterable[str]) -> tuple[str, ...]:
    out = tuple(sorted(set(types)))
    for t in out:
        if aws_family(t) not in FAMILY_GPU and aws_family(t) not in CPU_FAMILIES:
            raise InputError(f"--instance-type: {t!r} is not in a known GPU family; use one of "
                             f"the families {', '.join(sorted(FAMILY_GPU))} (or the CPU "
                             f"families {', '.join(CPU_FAMILIES)})")
    return out


def _first_sentence(message: str) -> str:
    # AWS error messages (e.g. SignatureDoesNotMatch) can quote signed request headers; keep the
    # first sentence only so that nothing secret reaches the terminal.
    text = message.split("\n")[0]
    return text.split(". ")[0][:160]


PRICE_PERMISSIONS = "pricing:GetProducts, ec2:DescribeSpotPriceHistory"
"""The IAM actions a price refresh needs, named when AWS rejects the credentials."""


def _translate(exc: Exception, what: str, attempts: int, *,
               permissions: str = PRICE_PERMISSIONS, unchanged: str = UNCHANGED
               ) -> ProviderError:
    """An SDK fault as one line: what failed, why, the fix, and what was left as it was
    (``unchanged``: the price cache by default); ``permissions``: the IAM actions ``what``
    needs, named when the credentials are rejected."""
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
            f"configure` or AWS_PROFILE) and retry; {unchanged}")
    if isinstance(exc, ClientError):
        err = exc.response.get("Error", {})
        code = str(err.get("Code", "?"))
        if code in _THROTTLE:
            return ProviderError(
                f"AWS throttled {what} ({code}) after {attempts} attempts with backoff; retry "
                f"later or narrow --regions/--instance-type; {unchanged}")
        if code in _CREDENTIALS:
            return ProviderError(
                f"AWS rejected the credentials for {what} ({code}: "
                f"{_first_sentence(str(err.get('Message', '')))}); check the profile and its "
                f"permissions ({permissions}); {unchanged}")
        return ProviderError(f"AWS {what} failed ({code}: "
                             f"{_first_sentence(str(err.get('Message', '')))}); {unchanged}")
    if isinstance(exc, EndpointConnectionError):
        return ProviderError(f"cannot reach the AWS endpoint for {what} ({exc}); check the network "
                             f"or --endpoint; {unchanged}")
    if isinstance(exc, NoRegionError):
        return ProviderError(f"AWS {what}: no region configured; {unchanged}")
    if isinstance(exc, BotoCoreError):
        return ProviderError(f"AWS {what} failed ({type(exc).__name__}); {unchanged}")
    return ProviderError(f"AWS {what} failed ({type(exc).__name__}); {unchanged}")


def _guarded(pages: Iterable[dict[str, Any]], what: str, attempts: int, *,
             permissions: str = PRICE_PERMISSIONS, unchanged: str = UNCHANGED
             ) -> Iterator[dict[str, Any]]:
    """Iterate SDK pages, turning SDK faults (also those raised on page 2, 3, ...) into
    ProviderError (:func:`_translate`)."""
    from botocore.exceptions import BotoCoreError, ClientError

    it = iter(pages)
    while True:
        try:
            page = next(it)
        except StopIteration:
            return
        except (BotoCoreError, ClientError) as exc:
            raise _translate(exc, what, attempts, permissions=permissions,
                             unchanged=unchanged) from None
        yield page


def sdk(needs: str, attempts: int) -> tuple[Any, Any]:
    """A boto3 session and the client config of every ptplan AWS call (standard retries up to
    ``attempts``, timeouts, user agent); ``needs`` opens the error when the SDK is missing
    ("live Savings Plans rates need")."""
    try:
        import boto3
        from botocore.config import Config
    except ImportError:
        raise ProviderError(f"{needs} the AWS SDK: pip install 'ptplan[aws]'") from None
    return boto3.session.Session(), Config(
        retries={"mode": "standard", "total_max_attempts": attempts}, connect_timeout=10,
        read_timeout=60, user_agent_extra="ptplan")


def _clients(endpoint: str | None, attempts: int) -> tuple[Any, Callable[[str], Any]]:
    session, config = sdk("--provider aws needs", attempts)
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
                    rates[r.order] = r
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
                            + f"; check --regions and --instance-type; {UNCHANGED}")
    offers = sorted([*on_demand.values(), *spot], key=lambda o: o.order)
    return Pull(
        provider="aws", as_of=as_of, source=f"{SOURCE_PRICING}; {SOURCE_SPOT}",
        regions=regions, offers=tuple(offers),
        reserved_rates=tuple(sorted(rates.values(), key=lambda r: r.order)),
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
    latest: dict[tuple[str, str], SpotRow] = {}
    try:
        pages = ec2.get_paginator("describe_spot_price_history").paginate(
            InstanceTypes=list(known), ProductDescriptions=["Linux/UNIX"], StartTime=stamp)
    except Exception as exc:
        raise _translate(exc, what, attempts) from None
    for page in _guarded(pages, what, attempts):
        for raw in page.get("SpotPriceHistory", []):
            row = read_spot_row(raw)
            itype, zone = row.instance_type, row.zone
            if itype not in info or not zone or row.description != "Linux/UNIX":
                continue
            old = latest.get((itype, zone))
            if old is None or (row.timestamp is not None and old.timestamp is not None
                               and row.timestamp > old.timestamp):
                latest[(itype, zone)] = row
    zone_ids: dict[str, str] = {}
    if any(not row.zone_id for row in latest.values()):
        try:
            zones = ec2.describe_availability_zones()["AvailabilityZones"]
        except Exception as exc:
            raise _translate(exc, f"ec2.describe_availability_zones in {region}",
                             attempts) from None
        zone_ids = {z["ZoneName"]: z["ZoneId"] for z in zones if "ZoneId" in z}
    out: list[Offer] = []
    for (itype, zone), row in sorted(latest.items()):
        price = row.price
        if price <= 0:
            continue
        t = info[itype]
        fam = aws_family(itype)
        band = SPOT_BANDS.get(fam, DEFAULT_SPOT_BAND)
        od = on_demand.get((itype, region))
        above = ("; spot above on-demand (kept as published)"
                 if od is not None and price > od.usd_per_hour else "")
        out.append(Offer(
            provider="aws", region=region,
            zone=row.zone_id or zone_ids.get(zone, zone),
            instance_type=itype, gpu=t.gpu, gpus_per_node=t.gpus_per_node,
            capacity_type="spot", usd_per_hour=price, vcpus=t.vcpus, memory_gib=t.memory_gib,
            interruptions_per_hour=band_hazard(band),
            max_nodes=SPOT_NODES_PER_ZONE, as_of=as_of, source=SOURCE_SPOT,
            note=(f"spot band {band} ({'advisor' if fam in SPOT_BANDS else 'default'}); "
                  f"capacity assumed {SPOT_NODES_PER_ZONE} nodes{above}")))
    return out
