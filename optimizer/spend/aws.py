"""The run's actual cost from AWS Cost Explorer (boto3, extra ``aws``).

Call: ``ce.get_cost_and_usage`` (endpoint region us-east-1) with ``TimePeriod`` [since, until)
(``YYYY-MM-DD`` for DAILY, ``YYYY-MM-DDThh:mm:ssZ`` for HOURLY, which AWS serves only for the
last 14 days and after hourly granularity is enabled in the Cost Explorer preferences),
``Metrics=['UnblendedCost']``, ``Filter`` = every run-level cost tag ``render`` puts on the
resources (``ptplan-project``, ``ptplan-method``; ``Tags`` with ``MatchOptions=['EQUALS']``,
joined by ``And``), ``GroupBy`` = the grouping tag (``TAG`` ``ptplan-phase``, ``ptplan-pool``
or ``ptplan-capacity-type``) and the ``PURCHASE_TYPE`` dimension; pages by
``NextPageToken``. Group keys of a tag come back as ``key$value`` (``key$`` when untagged).
Source: https://docs.aws.amazon.com/aws-cost-management/latest/APIReference/API_GetCostAndUsage.html
A tag filters the bill only once the key is activated as a cost allocation tag (render's
``terraform-aws/cost_tags.tf``).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from ptplan.core.errors import ProviderError
from ptplan.providers.aws import _guarded, max_attempts, sdk
from ptplan.providers.cache import utc_now
from ptplan.spend.bill import GRANULARITY, UNCHANGED, BillPull, BillRow

REGION = "us-east-1"
METRIC = "UnblendedCost"
SOURCE = "AWS Cost Explorer GetCostAndUsage (UnblendedCost)"


def _period(text: str, by: str) -> str:
    return text[:10] if by == "day" else text


def _pages(client: Any, kwargs: dict[str, Any]) -> Iterator[dict[str, Any]]:
    token: str | None = None
    while True:
        page = client.get_cost_and_usage(**kwargs, **({"NextPageToken": token} if token else {}))
        yield page
        token = page.get("NextPageToken")
        if not token:
            return


def _amount(group: dict[str, Any], where: str) -> float:
    try:
        m = group["Metrics"][METRIC]
        value = float(m["Amount"])
    except (KeyError, TypeError, ValueError):
        raise ProviderError(f"AWS Cost Explorer returned a malformed group at {where} (no "
                            f"{METRIC} Amount); the spend cache is unchanged") from None
    if not math.isfinite(value) or m.get("Unit", "USD") != "USD":
        raise ProviderError(f"AWS Cost Explorer returned {m.get('Amount')!r} "
                            f"{m.get('Unit')!r} at {where}; expected a USD amount; the spend "
                            "cache is unchanged")
    return value


def fetch_aws_spend(tags: dict[str, str], group_key: str, by: str, since: str, until: str,
                    endpoint: str | None = None) -> BillPull:
    """Every period's cost of the tagged resources, grouped by ``group_key`` and purchase type;
    a complete pull or a :class:`ProviderError`."""
    attempts = max_attempts()
    session, config = sdk("ptplan spend --provider aws needs", attempts)
    client = session.client("ce", region_name=REGION, endpoint_url=endpoint, config=config)
    exprs = [{"Tags": {"Key": k, "Values": [v], "MatchOptions": ["EQUALS"]}}
             for k, v in sorted(tags.items())]
    kwargs: dict[str, Any] = {
        "TimePeriod": {"Start": _period(since, by), "End": _period(until, by)},
        "Granularity": GRANULARITY[by], "Metrics": [METRIC],
        "Filter": {"And": exprs} if len(exprs) > 1 else exprs[0],
        "GroupBy": [{"Type": "TAG", "Key": group_key},
                    {"Type": "DIMENSION", "Key": "PURCHASE_TYPE"}]}
    rows: list[BillRow] = []
    estimated = False
    for page in _guarded(_pages(client, kwargs), "Cost Explorer cost and usage", attempts,
                         permissions="ce:GetCostAndUsage", unchanged=UNCHANGED):
        for result in page.get("ResultsByTime", []):
            tp = result.get("TimePeriod", {})
            start, end = str(tp.get("Start", "")), str(tp.get("End", ""))
            if not start or not end:
                raise ProviderError("AWS Cost Explorer returned a result without TimePeriod; "
                                    "the spend cache is unchanged")
            estimated = estimated or bool(result.get("Estimated"))
            for g in result.get("Groups", []):
                keys = list(g.get("Keys", []))
                if len(keys) != 2:
                    raise ProviderError(f"AWS Cost Explorer returned group keys {keys!r} at "
                                        f"{start}; expected [tag, purchase type]; the spend "
                                        "cache is unchanged")
                tag_value = keys[0].split("$", 1)[1] if "$" in keys[0] else keys[0]
                rows.append(BillRow(_norm(start), _norm(end), tag_value, keys[1],
                                    _amount(g, start)))
    return BillPull(provider="aws", source=SOURCE, by=by, group_key=group_key, tags=dict(tags),
                    since=since, until=until, as_of=utc_now(), rows=tuple(sorted(
                        rows, key=lambda r: (r.start, r.group, r.purchase_type))),
                    estimated=estimated)


def _norm(t: str) -> str:
    """Cost Explorer answers ``YYYY-MM-DD`` (daily) or ``YYYY-MM-DDThh:mm:ssZ`` (hourly)."""
    return f"{t}T00:00:00Z" if len(t) == 10 else t
