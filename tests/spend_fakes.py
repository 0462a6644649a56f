"""Fakes of the billing APIs ``ptplan spend`` reads, on :class:`local_server.LocalServer`:
Cost Explorer (AWS JSON 1.1, ``AWSInsightsIndexService.GetCostAndUsage``, shapes from botocore's
``ce`` service model 2017-10-25) and BigQuery REST (``jobs.query`` POST
``/bigquery/v2/projects/P/queries``, ``jobs.getQueryResults`` GET ``.../queries/JOB``,
``jobs.get``), both aggregating one list of line items the way the real services do.

Line items: the synthetic bill of ``tests/data/plans/grpo-aws.json`` / ``grpo-gcp.json`` run
for hours starting 2026-12-01T00:00Z, one item per phase tag of the plans' pools with the pool's
purchase type (both plans: rollout and scoring spot, update on demand; the GCP spot SKU is the
H100 of grpo-gcp's a3-edgegpu pools); the amounts are made up (not prices) so that actual and
planned differ by a figure the tests compute by hand."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlparse

from local_server import Answer, LocalServer

T0 = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
H100_SKU = "Nvidia H100 80GB GPU running in Americas"


@dataclass(frozen=True)
class Item:
    hour: int  # hours after T0
    tags: tuple[tuple[str, str], ...]
    purchase_type: str  # Cost Explorer PURCHASE_TYPE value
    usd: float
    sku: str = H100_SKU


def run_items(project: str, method: str, phases: dict[str, tuple[str, float]], hours: int,
              other: float = 999.0, plans: tuple[str, ...] = ()) -> list[Item]:
    """Per hour: one item per phase tag value (purchase type, $/h) and plan label of ``plans``
    (none: no ``ptplan-plan`` tag), one of another project, and one of another plan of the same
    project (``ptplan-plan`` ``<project>-000000``)."""
    out = []
    for h in range(hours):
        for plan in plans or (None,):
            mine = (("ptplan-plan", plan),) if plan else ()
            for phase, (ptype, usd) in phases.items():
                out.append(Item(h, (*mine, ("ptplan-project", project),
                                    ("ptplan-method", method), ("ptplan-phase", phase)),
                                ptype, usd, f"Spot Preemptible {H100_SKU}"
                                if ptype == "Spot Instances" else H100_SKU))
        out.append(Item(h, (("ptplan-project", "someone-else"), ("ptplan-method", method),
                            ("ptplan-phase", "update")), "On Demand Instances", other))
        out.append(Item(h, (("ptplan-plan", f"{project}-000000"), ("ptplan-project", project),
                            ("ptplan-method", method), ("ptplan-phase", "update")),
                        "On Demand Instances", other))
    return out


def _hour(text: str) -> int:
    t = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.UTC)
    return int((t - T0).total_seconds() // 3600)


class FakeCostExplorer:
    """Filters by ``Tags`` (``And`` of EQUALS), aggregates by the granularity and the two
    ``GroupBy`` keys, ``page_size`` periods per page (``NextPageToken``). Faults: ``throttle``
    (next N calls: LimitExceededException), ``fail_token`` (that page:
    InvalidNextTokenException), ``malformed`` (Amount "n/a"), ``denied``
    (AccessDeniedException)."""

    page_size = 2

    def __init__(self, items: list[Item]) -> None:
        self.items = items
        self.throttle = 0
        self.fail_token: str | None = None
        self.malformed = False
        self.denied = False
        self.requests: list[dict[str, Any]] = []
        self.local = LocalServer(self.answer)
        self.url = self.local.url

    def close(self) -> None:
        self.local.close()

    def answer(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Answer:
        ctype = {"Content-Type": "application/x-amz-json-1.1"}
        if headers.get("x-amz-target") != "AWSInsightsIndexService.GetCostAndUsage":
            return 400, ctype, {"__type": "UnknownOperationException"}
        req = json.loads(body)
        self.requests.append(req)
        if self.denied:
            return 400, ctype, {"__type": "AccessDeniedException", "Message": "User: arn:aws:"
                                "iam::123456789012:user/x is not authorized to perform: "
                                "ce:GetCostAndUsage"}
        if self.throttle > 0:
            self.throttle -= 1
            return 400, ctype, {"__type": "LimitExceededException", "Message": "Rate exceeded"}
        token = req.get("NextPageToken")
        if token is not None and token == self.fail_token:
            return 400, ctype, {"__type": "InvalidNextTokenException",
                                "Message": "The NextPageToken is invalid."}
        f = req["Filter"]
        tests = [e["Tags"] for e in f.get("And", [f])]
        hourly = req["Granularity"] == "HOURLY"
        size = 1 if hourly else 24
        lo, hi = _hour(req["TimePeriod"]["Start"]), _hour(req["TimePeriod"]["End"])
        tag_key = req["GroupBy"][0]["Key"]
        periods: list[dict[str, Any]] = []
        for p in range(lo, hi, size):
            groups: dict[tuple[str, str], float] = {}
            for it in self.items:
                tags = dict(it.tags)
                if p <= it.hour < p + size and all(tags.get(t["Key"]) in t["Values"]
                                                     for t in tests):
                    k = (f"{tag_key}${tags.get(tag_key, '')}", it.purchase_type)
                    groups[k] = groups.get(k, 0.0) + it.usd
            start, end = T0 + dt.timedelta(hours=p), T0 + dt.timedelta(hours=p + size)
            fmt = "%Y-%m-%dT%H:%M:%SZ" if hourly else "%Y-%m-%d"
            periods.append({
                "TimePeriod": {"Start": start.strftime(fmt), "End": end.strftime(fmt)},
                "Total": {}, "Estimated": p + size > hi - size,
                "Groups": [{"Keys": list(k), "Metrics": {"UnblendedCost": {
                    "Amount": "n/a" if self.malformed else f"{v:.10f}", "Unit": "USD"}}}
                    for k, v in sorted(groups.items())]})
        first = int(token or 0)
        out: dict[str, Any] = {"GroupDefinitions": req["GroupBy"],
                               "ResultsByTime": periods[first:first + self.page_size],
                               "DimensionValueAttributes": []}
        if first + self.page_size < len(periods):
            out["NextPageToken"] = str(first + self.page_size)
        return 200, ctype, out


class FakeBigQuery:
    """jobs.query answers the first ``page_size`` rows with a pageToken; getQueryResults
    serves the rest; the rows are the billing-export aggregation the query asks for, computed
    from the query parameters (labels, window, grouping label) and the TIMESTAMP_TRUNC part.
    Faults: ``status`` maps a page number (0 = jobs.query) to an HTTP status."""

    page_size = 2

    def __init__(self, items: list[Item]) -> None:
        self.items = items
        self.status: dict[int, int] = {}
        self.rate_limited = 0  # next N jobs.query calls: 403 rateLimitExceeded (retried)
        self.rows: list[list[Any]] = []
        self.queries: list[dict[str, Any]] = []
        self.local = LocalServer(self.answer)
        self.url = self.local.url

    def close(self) -> None:
        self.local.close()

    def _aggregate(self, req: dict[str, Any]) -> list[list[Any]]:
        params = {p["name"]: p["parameterValue"]["value"] for p in req["queryParameters"]}
        size = 1 if "usage_start_time, HOUR)" in req["query"] else 24
        lo, hi = _hour(params["start"]), _hour(params["end"])
        labels = [(params[f"k{i}"], params[f"v{i}"]) for i in range(10) if f"k{i}" in params]
        out: dict[tuple[int, str, str], float] = {}
        for it in self.items:
            tags = dict(it.tags)
            if lo <= it.hour < hi and all(tags.get(k) == v for k, v in labels):
                ptype = "Spot" if "spot" in it.sku.lower() or "preemptible" in it.sku.lower() \
                    else "On Demand"
                k = ((it.hour - lo) // size * size + lo, tags.get(params["group_key"], ""), ptype)
                out[k] = out.get(k, 0.0) + it.usd
        return [[(T0 + dt.timedelta(hours=h)).strftime("%Y-%m-%dT%H:%M:%SZ"), g, p, v]
                for (h, g, p), v in sorted(out.items())]

    def _page(self, first: int, job: str) -> dict[str, Any]:
        page = self.rows[first:first + self.page_size]
        out: dict[str, Any] = {
            "kind": "bigquery#queryResponse", "jobComplete": True,
            "jobReference": {"projectId": "billing-proj", "jobId": job, "location": "US"},
            "schema": {"fields": [{"name": "period", "type": "STRING", "mode": "NULLABLE"},
                                  {"name": "grp", "type": "STRING", "mode": "NULLABLE"},
                                  {"name": "purchase_type", "type": "STRING",
                                   "mode": "NULLABLE"},
                                  {"name": "usd", "type": "FLOAT", "mode": "NULLABLE"}]},
            "totalRows": str(len(self.rows)),
            "rows": [{"f": [{"v": r[0]}, {"v": r[1]}, {"v": r[2]}, {"v": repr(r[3])}]}
                     for r in page]}
        if first + self.page_size < len(self.rows):
            out["pageToken"] = str(first + self.page_size)
        return out

    def answer(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Answer:
        url = urlparse(path)
        q = {k: v[0] for k, v in parse_qs(url.query).items()}
        parts = url.path.split("/")
        if method == "POST" and url.path.endswith("/queries"):
            if self.rate_limited > 0:
                self.rate_limited -= 1
                return 403, {}, {"error": {"code": 403, "message": "Exceeded rate limits",
                                           "errors": [{"reason": "rateLimitExceeded",
                                                       "message": "Exceeded rate limits"}],
                                           "status": "PERMISSION_DENIED"}}
            if self.status.get(0):
                return self.status[0], {}, {"error": {"code": self.status[0], "message":
                                                      "injected", "status": "UNAVAILABLE"}}
            req = json.loads(body)
            self.queries.append(req)
            self.rows = self._aggregate(req)
            return 200, {}, self._page(0, "job-1")
        if method == "GET" and "/jobs/" in url.path:
            return 200, {}, {"kind": "bigquery#job", "id": f"billing-proj:US.{parts[-1]}",
                             "jobReference": {"projectId": "billing-proj", "jobId": parts[-1],
                                              "location": "US"},
                             "configuration": {"query": {"query": self.queries[-1]["query"]}},
                             "status": {"state": "DONE"}}
        if method == "GET" and "/queries/" in url.path:
            first = int(q.get("pageToken") or q.get("startIndex") or 0)
            n = first // self.page_size
            if self.status.get(n):
                code = self.status[n]
                return code, {}, {"error": {"code": code, "message": "injected failure",
                                            "status": "PERMISSION_DENIED" if code == 403
                                            else "INTERNAL"}}
            return 200, {}, self._page(first, parts[-1])
        return 404, {}, {"error": {"code": 404, "message": path}}
