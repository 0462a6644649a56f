"""``ptplan spend PLAN.json``: the run's actual cost from the provider's bill (selected by the
plan's cost tags) beside the plan's expected cumulative cost (:mod:`ptplan.spend`)."""

from __future__ import annotations

import datetime as dt
from enum import StrEnum
from pathlib import Path
from typing import Any

import typer

from ptplan.cli.common import Format, _emit_as, _run, app, dumps, info


class Provider(StrEnum):
    aws = "aws"
    gcp = "gcp"


class By(StrEnum):
    day = "day"
    hour = "hour"


class Group(StrEnum):
    phase = "phase"
    capacity_type = "capacity_type"
    pool = "pool"


DEFAULT_DAYS = 14
"""Without --since: the last 14 days (Cost Explorer keeps hourly data that long)."""


def window(by: str, since: str | None, until: str | None) -> tuple[str, str]:
    from ptplan.core.errors import InputError
    from ptplan.spend.bill import iso, parse_instant

    now = dt.datetime.now(dt.UTC)
    end = parse_instant(until, "--until", by) if until else parse_instant(
        now.isoformat(), "--until", by) + (dt.timedelta(days=1) if by == "day"
                                             else dt.timedelta(hours=1))
    start = parse_instant(since, "--since", by) if since else end - dt.timedelta(
        days=DEFAULT_DAYS)
    if start >= end:
        raise InputError(f"--since {iso(start)} is not before --until {iso(end)}; give a "
                         "start before the end")
    return iso(start), iso(end)


def pull_spend(plan: Any, provider: str, by: str, group: str, since: str | None,
               until: str | None, bq_table: str | None, endpoint: str | None,
               cache: Path | None, cached: bool) -> Any:
    """The pull: from the cache with --cached, else from the provider, then cached (a failed
    pull raises ProviderError and leaves the cache as it was)."""
    from ptplan.core.errors import InputError
    from ptplan.planfile.tags import GROUP_TAGS, run_cost_tags
    from ptplan.spend import bill

    tags = run_cost_tags(plan, provider)
    start, end = window(by, since, until)
    path = bill.resolve_cache(cache)
    key = bill.pull_key(provider, tags, GROUP_TAGS[group], by, start, end)
    if cached:
        pull = bill.load(key, path)
        if pull is None:
            raise InputError(f"--cached: no pull of {provider} spend for this plan, --by {by}, "
                             f"--group {group}, {start} to {end} in {str(path)!r}; run without "
                             "--cached first")
        return pull
    if provider == "aws":
        from ptplan.spend.aws import fetch_aws_spend

        pull = fetch_aws_spend(tags, GROUP_TAGS[group], by, start, end, endpoint)
    else:
        from ptplan.spend.gcp import check_table, fetch_gcp_spend

        pull = fetch_gcp_spend(check_table(bq_table), tags, GROUP_TAGS[group], by, start, end,
                               endpoint)
    bill.store(pull, path)
    info(f"pulled {len(pull.rows)} cost rows from {pull.source}; cached in {path}")
    return pull


@app.command()
def spend(
    plan_file: Path = typer.Argument(..., metavar="PLAN.json", help="The plan that was "
                                     "rendered and is running."),
    provider: Provider = typer.Option(..., "--provider", help="Whose bill: aws (Cost "
                                      "Explorer) or gcp (the billing export in BigQuery)."),
    since: str = typer.Option(None, "--since", help="First day or hour (UTC) to pull; default "
                              "14 days before --until."),
    until: str = typer.Option(None, "--until", help="End (exclusive); default: now."),
    by: By = typer.Option(By.day, "--by", help="Billing periods: day or hour."),
    group: Group = typer.Option(Group.phase, "--group", help="Split by the phase, "
                                "capacity_type or pool cost tag (and purchase type)."),
    bq_table: str = typer.Option(None, "--bq-table", help="gcp: the billing export table "
                                 "PROJECT.DATASET.TABLE."),
    run_start: str = typer.Option(None, "--run-start", help="When the run started (UTC); "
                                  "default: the first period with a cost."),
    endpoint: str = typer.Option(None, "--endpoint", help="Override the API endpoint "
                                 "(mirrors, tests)."),
    cache: Path = typer.Option(None, "--cache", help="Spend cache file (default "
                               "$PTPLAN_SPEND_CACHE or spend.sqlite in the user cache)."),
    cached: bool = typer.Option(False, "--cached", help="Use the cached pull; call no API."),
    fmt: Format = typer.Option(Format.table, "--format", help="table, json or markdown."),
    output: Path = typer.Option(None, "-o", "--output", help="Write to FILE instead of stdout."),
    chart: Path = typer.Option(None, "--chart", help="Actual vs planned cumulative cost "
                               "(.png/.svg)."),
) -> None:
    """Actual cost of the run from the bill (by the plan's cost tags) vs the plan's expected
    cumulative cost; variance. Exit 3 when the pull fails (the cache keeps the last pull)."""

    def go() -> None:
        from ptplan.planfile.load import load_plan
        from ptplan.planfile.tags import group_tag_value
        from ptplan.report.charts import chart_suffix
        from ptplan.report.tables_spend import spend_chart, spend_markdown, spend_table
        from ptplan.spend.bill import parse_instant
        from ptplan.spend.curve import spend_report

        if chart is not None:
            chart_suffix(chart)
        if run_start is not None:
            parse_instant(run_start, "--run-start", "hour")
        plan = load_plan(plan_file)
        pull = pull_spend(plan, provider.value, by.value, group.value, since, until, bq_table,
                          endpoint, cache, cached)
        start = None
        if run_start is not None:
            from ptplan.spend.bill import iso

            start = iso(parse_instant(run_start, "--run-start", "hour"))
        report = spend_report(plan, pull, lambda p, a: group_tag_value(
            p, a.capacity_type, group.value, provider.value), start)
        if chart is not None:
            spend_chart(report, chart)
            info(f"wrote {chart}")
        _emit_as(fmt, output, lambda: dumps(report), lambda: spend_markdown(report),
                 lambda: spend_table(report, plan.spec_name))

    _run(go)
