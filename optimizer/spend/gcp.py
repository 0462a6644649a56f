"""The run's actual cost from the GCP Cloud Billing export in BigQuery
(``google-cloud-bigquery``, extra ``gcp``).

Table: the standard usage cost export (``--bq-table PROJECT.DATASET.gcp_billing_export_v1_...``;
schema: https://cloud.google.com/billing/docs/how-to/export-data-bigquery-tables/standard-usage):
``usage_start_time``, ``cost``, ``credits`` (negative amounts: spending-based discounts,
sustained use), ``labels`` (the resource's labels: the ``ptplan-*`` cost labels ``render`` puts
on node pools, disks and the bucket), ``sku.description`` (``Spot Preemptible ...`` for spot VMs
and GPUs). One query through ``Client.query_and_wait`` (the REST ``jobs.query``, further pages
by ``jobs.getQueryResults``), every value a query parameter; the cost of a row is ``cost`` plus
its credits, summed per period (``TIMESTAMP_TRUNC`` to the day or hour, UTC), grouping label
and purchase type (``Spot`` when the SKU description says Spot or Preemptible, else
``On Demand``; committed-use discounts arrive as credits). The export lags usage by hours.
"""

from __future__ import annotations

import math
import re
from typing import Any
from urllib.parse import urlparse

from ptplan.core.errors import InputError, ProviderError
from ptplan.providers.cache import utc_now
from ptplan.spend.bill import BillPull, BillRow

SOURCE = "GCP Cloud Billing export (BigQuery, cost + credits)"
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
PAGE_SIZE = 10_000
TABLE_RE = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]\.[A-Za-z0-9_]{1,1024}"
                      r"\.[A-Za-z0-9_$-]{1,1024}$")
NO_SDK = "ptplan spend --provider gcp needs google-cloud-bigquery: pip install 'ptplan[gcp]'"
UNCHANGED = "the spend cache is unchanged"


def check_table(table: str | None) -> str:
    if not table or not TABLE_RE.match(table):
        raise InputError(f"--bq-table: {table!r} is not PROJECT.DATASET.TABLE; give the Cloud "
                         "Billing export table, e.g. my-proj.billing.gcp_billing_export_v1_X")
    return table


def query_text(table: str, tags: dict[str, str], by: str) -> str:
    part = "DAY" if by == "day" else "HOUR"
    label_tests = "".join(
        f"\n  AND EXISTS (SELECT 1 FROM UNNEST(labels) l WHERE l.key = @k{i} AND l.value = @v{i})"
        for i in range(len(tags)))
    return (
        f"SELECT FORMAT_TIMESTAMP('%Y-%m-%dT%H:%M:%SZ', TIMESTAMP_TRUNC(usage_start_time, {part}), "
        "'UTC') AS period,\n"
        "  IFNULL((SELECT l.value FROM UNNEST(labels) l WHERE l.key = @group_key LIMIT 1), '') "
        "AS grp,\n"
        "  IF(REGEXP_CONTAINS(LOWER(sku.description), r'spot|preemptible'), 'Spot', "
        "'On Demand') AS purchase_type,\n"
        "  SUM(cost) + SUM(IFNULL((SELECT SUM(c.amount) FROM UNNEST(credits) c), 0)) AS usd\n"
        f"FROM `{table}`\n"
        "WHERE usage_start_time >= @start AND usage_start_time < @end"
        f"{label_tests}\n"
        "GROUP BY period, grp, purchase_type\nORDER BY period, grp, purchase_type")


def _client(project: str, endpoint: str | None) -> Any:
    try:
        from google.cloud import bigquery
    except ImportError:
        raise ProviderError(NO_SDK) from None
    kwargs: dict[str, Any] = {"project": project}
    if endpoint:
        from google.api_core.client_options import ClientOptions

        kwargs["client_options"] = ClientOptions(api_endpoint=endpoint)
        if urlparse(endpoint).hostname in LOCAL_HOSTS:
            from google.auth.credentials import AnonymousCredentials

            kwargs["credentials"] = AnonymousCredentials()
    return bigquery.Client(**kwargs)


def _translate(exc: BaseException) -> ProviderError:
    from ptplan.providers.gcp import _translate as base

    return base(exc, "BigQuery billing export query", api="BigQuery API", unchanged=UNCHANGED)


def fetch_gcp_spend(table: str, tags: dict[str, str], group_key: str, by: str, since: str,
                    until: str, endpoint: str | None = None) -> BillPull:
    table = check_table(table)
    try:
        from google.cloud import bigquery
    except ImportError:
        raise ProviderError(NO_SDK) from None
    import datetime as dt

    params: list[Any] = [
        bigquery.ScalarQueryParameter("group_key", "STRING", group_key),
        bigquery.ScalarQueryParameter("start", "TIMESTAMP", dt.datetime.fromisoformat(since)),
        bigquery.ScalarQueryParameter("end", "TIMESTAMP", dt.datetime.fromisoformat(until))]
    for i, (k, v) in enumerate(sorted(tags.items())):
        params += [bigquery.ScalarQueryParameter(f"k{i}", "STRING", k),
                   bigquery.ScalarQueryParameter(f"v{i}", "STRING", v)]
    config = bigquery.QueryJobConfig(query_parameters=params, use_legacy_sql=False)
    rows: list[BillRow] = []
    step = dt.timedelta(days=1) if by == "day" else dt.timedelta(hours=1)
    try:
        client = _client(table.split(".")[0], endpoint)
        result = client.query_and_wait(query_text(table, tags, by), job_config=config,
                                       page_size=PAGE_SIZE)
        for r in result:
            start = dt.datetime.fromisoformat(str(r["period"]))
            usd = float(r["usd"])
            if not math.isfinite(usd):
                raise ProviderError(f"BigQuery returned cost {r['usd']!r} at {r['period']}; "
                                    f"{UNCHANGED}")
            rows.append(BillRow(str(r["period"]), (start + step).strftime("%Y-%m-%dT%H:%M:%SZ"),
                                str(r["grp"]), str(r["purchase_type"]), usd))
    except ProviderError:
        raise
    except (KeyError, TypeError, ValueError) as exc:
        raise ProviderError(f"BigQuery returned a malformed row ({type(exc).__name__}: "
                            f"{str(exc)[:120]}); {UNCHANGED}") from None
    except Exception as exc:  # google.api_core / google.auth errors, network failures
        raise _translate(exc) from None
    return BillPull(provider="gcp", source=SOURCE, by=by, group_key=group_key, tags=dict(tags),
                    since=since, until=until, as_of=utc_now(), rows=tuple(sorted(
                        rows, key=lambda r: (r.start, r.group, r.purchase_type))))
