"""``ptplan prices blocks``: live booked-capacity prices for one request.

* ``--provider aws --region R --instance-type T --count N --duration-hours H [--start-after
  DATE] [--endpoint URL]``: every EC2 Capacity Blocks for ML offering AWS quotes
  (:mod:`ptplan.providers.aws_blocks`), cheapest upfront fee first: zone, start and end, the fee and
  the fee per instance-hour. Bad requests (a length AWS does not sell, more than 64 instances, a
  start more than 8 weeks ahead) exit 2 with one line; provider faults exit 3. The cheapest
  offering's fee per instance-hour is stored in the price cache as the type's block rate
  (:func:`ptplan.providers.aws_blocks.block_pull`; ``--catalog cache`` plans with it); a fault
  leaves the cache as it was.
* ``--provider gcp [--region R,...] [--instance-type T] [--count N --duration-hours H]
  [--endpoint URL] [--cache PATH]``: the GCP DWS flex-start and calendar-mode prices of the
  Billing Catalog (:mod:`ptplan.providers.gcp_dws`), stored in the price cache in one transaction
  (``--catalog cache`` plans with them) and listed per machine type; with ``--count`` and
  ``--duration-hours`` also what N machines for H hours cost (calendar mode: whole days).
  Faults exit 3 and leave the cache as it was.
"""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path
from typing import Any

import typer

from ptplan.cli.common import ProgressBar, TableOrJson, _emit, _run, dumps, info
from ptplan.cli.prices import _check_endpoint, _split, prices_app
from ptplan.core.errors import InputError


def _date(text: str | None) -> dt.date | None:
    if text is None:
        return None
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise InputError(f"--start-after: {text!r} is not a date; use YYYY-MM-DD") from None


@prices_app.command("blocks")
def blocks(
    provider: str = typer.Option("aws", "--provider", help="aws (EC2 Capacity Blocks for ML) "
                                 "or gcp (DWS flex-start and calendar mode)."),
    region: str = typer.Option(None, "--region", help="aws: the region to ask (required), "
                               "e.g. us-east-1; gcp: regions to pull (comma-separated; "
                               "default all)."),
    instance_type: str = typer.Option(None, "--instance-type", help="e.g. p5.48xlarge (aws: "
                                      "required); gcp: show only this machine type."),
    count: int = typer.Option(None, "--count", help="Instances (aws: 1-64, required)."),
    duration_hours: int = typer.Option(None, "--duration-hours", help="aws: 24-336 in 24-h "
                                       "steps, then 168-h steps up to 4368 (required)."),
    start_after: str = typer.Option(None, "--start-after", help="aws: earliest start, "
                                    "YYYY-MM-DD (at most 8 weeks ahead)."),
    endpoint: str = typer.Option(None, "--endpoint", help="Send SDK requests to this URL "
                                 "(private mirror, tests)."),
    cache: Path = typer.Option(None, "--cache", help="The cache file to store the prices in "
                               "(aws: the cheapest offering's rate for the type; default: "
                               "$PTPLAN_CACHE or the user cache directory)."),
    fmt: TableOrJson = typer.Option(TableOrJson.table, "--format"),
    output: Path = typer.Option(None, "-o", "--output", help="Write to FILE instead of stdout."),
) -> None:
    """Live booked capacity: AWS capacity block offerings, or GCP DWS prices (cached)."""

    def go() -> None:
        if provider not in ("aws", "gcp"):
            raise InputError(f"--provider: {provider!r} is not supported; use aws or gcp")
        _check_endpoint(endpoint)
        if provider == "gcp":
            _gcp(region, instance_type, count, duration_hours, start_after, endpoint, cache,
                 fmt, output)
            return
        missing = [f"--{n}" for n, v in (("region", region), ("instance-type", instance_type),
                                         ("count", count), ("duration-hours", duration_hours))
                   if v is None]
        if missing:
            raise InputError(f"{missing[0]}: required with --provider aws; e.g. --region "
                             "us-east-1 --instance-type p5.48xlarge --count 2 "
                             "--duration-hours 48")
        _aws(region, instance_type, count, duration_hours, start_after, endpoint, cache, fmt,
             output)

    _run(go)


def _aws(region: str, instance_type: str, count: int, duration_hours: int,
         start_after: str | None, endpoint: str | None, cache: Path | None,
         fmt: TableOrJson, output: Path | None) -> None:
    from ptplan.providers.aws_blocks import block_pull, fetch_block_offerings
    from ptplan.providers.cache import resolve_cache_path, store_pull
    from ptplan.providers.embedded import embedded_catalog

    data = fetch_block_offerings(region, instance_type, count, duration_hours,
                                 _date(start_after), endpoint)
    pull = block_pull(data, embedded_catalog())
    target = resolve_cache_path(cache)
    if pull is not None:  # the type's block rate in the cache: --catalog cache plans with it
        store_pull(pull, target)
        data["cached"] = {"cache": str(target), "usd_per_hour": pull.offers[0].usd_per_hour,
                          "unit_hours": pull.offers[0].block_unit_hours}
    else:
        data["cached"] = None
        info("not cached: " + ("AWS quoted no offering" if not data["offerings"] else
                               f"{instance_type} is not in the embedded catalog"))
    if fmt is TableOrJson.json:
        _emit(dumps(data), output)
        return
    from ptplan.report.tables_prices import capacity_blocks_table

    _emit(capacity_blocks_table(data, count, instance_type, duration_hours), output)


def gcp_cost(kind: str, usd_per_hour: float, count: int, hours: int) -> tuple[float | None, int]:
    """What ``count`` machines for ``hours`` cost and the hours billed: calendar mode in whole
    24-h days (1 to 90), flex-start as used (at most 168 h; None beyond)."""
    if kind == "block":
        billed = 24 * max(1, math.ceil(hours / 24))
        return (None, billed) if billed > 90 * 24 else (count * usd_per_hour * billed, billed)
    return (None, hours) if hours > 168 else (count * usd_per_hour * hours, hours)


def _gcp(region: str | None, instance_type: str | None, count: int | None,
         duration_hours: int | None, start_after: str | None, endpoint: str | None,
         cache: Path | None, fmt: TableOrJson, output: Path | None) -> None:
    if start_after is not None:
        raise InputError("--start-after: applies to aws only; GCP DWS prices do not depend "
                         "on the start")
    if (count is None) != (duration_hours is None):
        raise InputError("--count and --duration-hours: give both (the cost of N machines for "
                         "H hours) or neither")
    if count is not None and duration_hours is not None and (count < 1 or duration_hours < 1):
        raise InputError(f"--count {count} --duration-hours {duration_hours}: both must be "
                         "at least 1")
    from ptplan.providers.cache import resolve_cache_path, store_pull
    from ptplan.providers.gcp_dws import fetch_dws

    regions = _split([region] if region else None)
    target = resolve_cache_path(cache)
    info(f"pulling gcp DWS prices into {target}...")
    with ProgressBar("pulling gcp DWS prices") as bar:
        pull = fetch_dws(regions, endpoint=endpoint,
                         progress=lambda label, done, total: bar(done, total, label))
    store_pull(pull, target)
    rows: list[dict[str, Any]] = []
    for o in pull.offers:
        if instance_type and o.instance_type != instance_type:
            continue
        row: dict[str, Any] = {"region": o.region, "instance_type": o.instance_type,
                               "capacity_type": o.capacity_type, "usd_per_hour": o.usd_per_hour,
                               "unit_hours": o.block_unit_hours,
                               "max_hours": o.block_max_hours, "note": o.note}
        if count is not None and duration_hours is not None:
            cost, billed = gcp_cost(o.capacity_type, o.usd_per_hour, count, duration_hours)
            row |= {"billed_hours": billed, "cost_usd": None if cost is None else round(cost, 2)}
        rows.append(row)
    data = {"source": pull.source, "as_of": pull.as_of, "cache": str(target),
            "regions": list(pull.regions), "request": {
                "instance_type": instance_type, "count": count,
                "duration_hours": duration_hours},
            "prices": rows, "exclusions": list(pull.exclusions)}
    if fmt is TableOrJson.json:
        _emit(dumps(data), output)
        return
    from ptplan.report.tables_prices import dws_prices_table

    _emit(dws_prices_table(data, count, duration_hours), output)
