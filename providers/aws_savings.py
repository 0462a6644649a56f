"""Live AWS Savings Plans rates through boto3 (extra ``aws``), for ``ptplan reserve``.

Source: the Savings Plans API, ``savingsplans.describe_savings_plans_offering_rates`` (a global
service; requests signed for us-east-1), with ``savingsPlanTypes`` ``Compute`` and
``EC2Instance``, ``savingsPlanPaymentOptions=['No Upfront']``, ``products=['EC2']``,
``serviceCodes=['AmazonEC2']`` and filters ``instanceType``, ``region`` (when given),
``tenancy=shared`` and ``productDescription=Linux/UNIX``; paginated by ``nextToken``. Each
search result carries its offering (``planType``, ``paymentOption``, ``durationSeconds``:
31,536,000 s = 1 year, 94,608,000 s = 3 years), ``rate`` (USD per hour of the instance, a
decimal string), ``unit`` (``Hrs``) and ``properties`` (``region``, ``instanceType``, ...).

The rates are what one hour of the instance consumes of an hourly Savings Plans commitment;
``ptplan reserve`` reads them from the file ``ptplan prices savings-plans -o FILE`` writes
(portfolio ``commitments[].rates_file``). Faults (throttling after the SDK's standard retries,
rejected or missing credentials, an unreachable endpoint, a malformed result) raise
:class:`~ptplan.core.errors.ProviderError`; nothing is written then.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import Field, ValidationError

from ptplan.core.errors import InputError, ProviderError
from ptplan.providers.aws import _guarded, max_attempts, sdk, validate_instance_types
from ptplan.providers.aws import validate_regions as aws_regions
from ptplan.providers.base import PriceListModel, validation_detail
from ptplan.providers.cache import utc_now

SOURCE = "AWS Savings Plans DescribeSavingsPlansOfferingRates (No Upfront, Linux/UNIX, shared)"
SIGNING_REGION = "us-east-1"
PLAN_TYPES = ("Compute", "EC2Instance")
YEAR_SECONDS = 31_536_000


class _Offering(PriceListModel):
    planType: str
    paymentOption: str
    durationSeconds: int


class _Property(PriceListModel):
    name: str
    value: str


class _Rate(PriceListModel):
    savingsPlanOffering: _Offering
    rate: float = Field(strict=False)
    unit: str
    properties: list[_Property]


def parse_rate(item: dict[str, Any]) -> dict[str, Any] | None:
    """One search result as a rates-file row, or None when it is not an hourly Linux rate
    of a 1- or 3-year plan. A malformed result raises :class:`ProviderError`."""
    try:
        r = _Rate.model_validate(item)
    except ValidationError as exc:
        raise ProviderError(f"AWS Savings Plans returned a malformed rate "
                            f"({validation_detail(exc)}); nothing was written") from None
    props = {p.name: p.value for p in r.properties}
    years, rest = divmod(r.savingsPlanOffering.durationSeconds, YEAR_SECONDS)
    if r.unit != "Hrs" or rest or years not in (1, 3) or \
            r.savingsPlanOffering.planType not in PLAN_TYPES:
        return None
    if "region" not in props or "instanceType" not in props:
        raise ProviderError("AWS Savings Plans returned a rate without region or instanceType "
                            "properties; nothing was written")
    if not r.rate > 0:
        raise ProviderError(f"AWS Savings Plans returned rate {r.rate} for "
                            f"{props['instanceType']}; nothing was written")
    return {"plan_type": r.savingsPlanOffering.planType, "term_years": years,
            "payment_option": r.savingsPlanOffering.paymentOption, "region": props["region"],
            "instance_type": props["instanceType"], "usd_per_hour": r.rate}


def fetch_savings_plan_rates(regions: Iterable[str], instance_types: Iterable[str],
                             endpoint: str | None = None) -> dict[str, Any]:
    """No Upfront Compute and EC2 Instance Savings Plans rates of the instance types (in
    the regions; empty: every region returned), as a rates file's content."""
    types = validate_instance_types(instance_types)
    if not types:
        raise InputError("--instance-type: give at least one instance type, e.g. p5.48xlarge")
    region_list = aws_regions(regions)
    attempts = max_attempts()
    session, config = sdk("live Savings Plans rates need", attempts)
    client = session.client("savingsplans", region_name=SIGNING_REGION, endpoint_url=endpoint,
                            config=config)
    filters = [{"name": "instanceType", "values": list(types)},
               {"name": "tenancy", "values": ["shared"]},
               {"name": "productDescription", "values": ["Linux/UNIX"]}]
    if region_list:
        filters.append({"name": "region", "values": list(region_list)})
    rows: dict[tuple[str, int, str, str, str], dict[str, Any]] = {}
    for page in _guarded(_pages(client, filters), "Savings Plans rates", attempts,
                         permissions="savingsplans:DescribeSavingsPlansOfferingRates",
                         unchanged="nothing is written"):
        for item in page.get("searchResults", []):
            row = parse_rate(item)
            if row is not None:
                rows[(row["plan_type"], row["term_years"], row["payment_option"],
                      row["region"], row["instance_type"])] = row
    if not rows:
        raise ProviderError(f"AWS Savings Plans returned no rate for {', '.join(types)}"
                            + (f" in {', '.join(region_list)}" if region_list else "")
                            + "; nothing was written")
    return {"source": SOURCE, "as_of": utc_now(),
            "rates": [rows[k] for k in sorted(rows)]}


def _pages(client: Any, filters: list[dict[str, Any]]) -> Iterable[dict[str, Any]]:
    token: str | None = None
    while True:
        kwargs: dict[str, Any] = dict(
            savingsPlanTypes=list(PLAN_TYPES), savingsPlanPaymentOptions=["No Upfront"],
            products=["EC2"], serviceCodes=["AmazonEC2"], filters=filters, maxResults=1000)
        if token:
            kwargs["nextToken"] = token
        page = client.describe_savings_plans_offering_rates(**kwargs)
        yield page
        token = page.get("nextToken")
        if not token:
            return

