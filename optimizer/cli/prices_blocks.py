"""``ptplan prices blocks``: live AWS EC2 Capacity Blocks for ML offerings for one request.

``--provider aws --region R --instance-type T --count N --duration-hours H [--start-after
DATE] [--endpoint URL] [--format table|json] [-o FILE]``: every offering AWS quotes
(:mod:`providers.aws_blocks`), cheapest upfront fee first: zone, start and end, the fee and the
fee per instance-hour. Bad requests (a length AWS does not sell, more than 64 instances, a start
more than 8 weeks ahead) exit 2 with one line; provider faults exit 3.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import typer

from optimizer.cli.common import TableOrJson, _emit, _run, dumps
from optimizer.cli.prices import _check_endpoint, prices_app
from optimizer.core.errors import InputError


def _date(text: str | None) -> dt.date | None:
    if text is None:
        return None
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise InputError(f"--start-after: {text!r} is not a date; use YYYY-MM-DD") from None


@prices_app.command("blocks")
def blocks(
    provider: str = typer.Option("aws", "--provider", help="aws (EC2 Capacity Blocks for ML)."),
    region: str = typer.Option(..., "--region", help="The region to ask, e.g. us-east-1."),
    instance_type: str = typer.Option(..., "--instance-type", help="e.g. p5.48xlarge."),
    count: int = typer.Option(..., "--count", help="Instances in the block (1-64)."),
    duration_hours: int = typer.Option(..., "--duration-hours", help="24-336 in 24-h steps, "
                                       "then 168-h steps up to 4368."),
    start_after: str = typer.Option(None, "--start-after", help="Earliest start, YYYY-MM-DD "
                                    "(at most 8 weeks ahead)."),
    endpoint: str = typer.Option(None, "--endpoint", help="Send SDK requests to this URL "
                                 "(private mirror, tests)."),
    fmt: TableOrJson = typer.Option(TableOrJson.table, "--format"),
    output: Path = typer.Option(None, "-o", "--output", help="Write to FILE instead of stdout."),
) -> None:
    """Capacity block offerings AWS quotes now for one request, cheapest first."""

    def go() -> None:
        if provider != "aws":
            raise InputError(f"--provider: {provider!r}: blocks are read from aws only (GCP "
                             "calendar-mode reservations are not built yet)")
        _check_endpoint(endpoint)
        from providers.aws_blocks import fetch_block_offerings

        data = fetch_block_offerings(region, instance_type, count, duration_hours,
                                     _date(start_after), endpoint)
        if fmt is TableOrJson.json:
            _emit(dumps(data), output)
            return
        from optimizer.report.tables import text_table

        rows = [[o["zone"], o["start"], o["end"], str(o["duration_hours"]), str(o["count"]),
                 f"{float(o['upfront_fee_usd']):,.2f}", f"{o['usd_per_instance_hour']:.4f}",
                 o["offering_id"]] for o in data["offerings"]]
        caption = (f"capacity blocks: {count} x {instance_type} for {duration_hours} h in "
                   f"{data['region']} ({data['source']}; as_of {data['as_of']})")
        text = text_table(["zone", "start", "end", "hours", "count", "upfront $",
                           "$/instance-h", "offering"], rows or [["-"] * 8], caption)
        if not rows:
            text += "no offering for this request now: try another length, count or start\n"
        _emit(text, output)

    _run(go)
