"""What ``ptplan prices`` prints: the price table of ``show``, the catalog diff, the live
Savings Plans rates, capacity block offerings and GCP DWS prices (every figure is one the
command's JSON holds)."""

from __future__ import annotations

from typing import Any

from ptplan.report.tables import _table, text_table


def money(value: float | None) -> str:
    return "-" if value is None else f"{value:,.4f}" if value < 10 else f"{value:,.2f}"


def _best(row: dict[str, Any], years: int) -> str:
    opts = [r for r in row["reserved"] if r["term_years"] == years]
    if not opts:
        return "-"
    best = opts[0]
    label = ", ".join(x for x in (best["offering_class"], best["purchase_option"]) if x)
    assumed = "assumption" if best["assumption"] else ""
    notes = "; ".join(x for x in (label, assumed) if x)
    return money(best["effective_usd_per_hour"]) + (f" ({notes})" if notes else "")


def show_table(catalog: Any, rows: list[dict[str, Any]]) -> str:
    header = ["GPU", "QTY", "PROVIDER", "INSTANCE_TYPE", "REGION", "ON-DEMAND $/h",
              "SPOT $/h (zone)", "1Y RESERVED eff. $/h", "3Y RESERVED eff. $/h"]
    body = [[r["gpu"], str(r["gpus_per_node"]), r["provider"], r["instance_type"], r["region"],
             money(r["on_demand_usd_per_hour"]),
             money(r["spot_usd_per_hour"]) + (f" ({r['spot_zone']})" if r["spot_zone"] else ""),
             _best(r, 1), _best(r, 3)] for r in rows]
    age = catalog.age_days()
    footer = [f"catalog {catalog.name}, as_of {catalog.as_of}"
              + (f" ({age} days old)" if age is not None else ""),
              "reserved: cheapest effective rate = hourly + upfront / term hours (every option, "
              "with upfront fee and hourly part: --format json); for buying, not used by `plan`"]
    stale = catalog.staleness_warning()
    if stale:
        footer.append(f"warning: {stale}")
    return _table(f"ptplan prices: {len(rows)} instance types x regions", header, body, footer)


def diff_table(d: dict[str, Any]) -> str:
    body: list[list[str]] = []
    for label in ("offers", "reserved_rates"):
        part = d[label]
        for c in part["changed"]:
            pct = "" if c["change_pct"] is None else f"{c['change_pct']:+.2f} %"
            body.append([label, "changed", c["key"], money(c["old_usd_per_hour"]),
                         money(c["new_usd_per_hour"]), pct])
        for c in part["added"]:
            body.append([label, "added", c["key"], "-", money(c["usd_per_hour"]), ""])
        for c in part["removed"]:
            body.append([label, "removed", c["key"], money(c["usd_per_hour"]), "-", ""])
    footer = [f"{label}: {len(d[label]['changed'])} changed, {len(d[label]['added'])} added, "
              f"{len(d[label]['removed'])} removed, {d[label]['unchanged']} unchanged"
              for label in ("offers", "reserved_rates")]
    title = (f"ptplan prices diff: {d['old']['name']} ({d['old']['as_of']}) -> "
             f"{d['new']['name']} ({d['new']['as_of']})")
    return _table(title, ["WHAT", "CHANGE", "KEY", "OLD $/h", "NEW $/h", "CHANGE %"], body,
                  footer)


def savings_plans_table(data: dict[str, Any]) -> str:
    """``prices savings-plans`` without ``-o``: the live rates, one row per plan, term, region
    and instance type."""
    rows = [[r["plan_type"], f"{r['term_years']}y", r["region"], r["instance_type"],
             f"{r['usd_per_hour']:.6g}"] for r in data["rates"]]
    return text_table(["plan", "term", "region", "instance", "$/h (No Upfront)"], rows,
                      f"AWS Savings Plans rates ({data['source']}; as_of {data['as_of']})")


def capacity_blocks_table(data: dict[str, Any], count: int, instance_type: str,
                          duration_hours: int) -> str:
    """``prices blocks --provider aws``: the offerings AWS quoted, cheapest upfront fee first."""
    rows = [[o["zone"], o["start"], o["end"], str(o["duration_hours"]), str(o["count"]),
             f"{float(o['upfront_fee_usd']):,.2f}", f"{o['usd_per_instance_hour']:.4f}",
             o["offering_id"]] for o in data["offerings"]]
    caption = (f"capacity blocks: {count} x {instance_type} for {duration_hours} h in "
               f"{data['region']} ({data['source']}; as_of {data['as_of']})")
    text = text_table(["zone", "start", "end", "hours", "count", "upfront $",
                       "$/instance-h", "offering"], rows or [["-"] * 8], caption)
    if not rows:
        text += "no offering for this request now: try another length, count or start\n"
    return text


def dws_prices_table(data: dict[str, Any], count: int | None,
                     duration_hours: int | None) -> str:
    """``prices blocks --provider gcp``: the DWS prices per machine type and mode, and with a
    count and a duration what they cost."""
    rows = data["prices"]
    head = ["region", "machine type", "mode", "$/machine-h", "unit h", "longest h"]
    body = [[r["region"], r["instance_type"], "calendar" if r["capacity_type"] == "block"
             else "flex-start", f"{r['usd_per_hour']:.4f}",
             f"{r['unit_hours']:g}" if r["unit_hours"] else "as used", f"{r['max_hours']:g}"]
            for r in rows]
    if count is not None:
        head += [f"{count} x {duration_hours} h $"]
        for line, r in zip(body, rows, strict=True):
            line.append("over the longest" if r["cost_usd"] is None
                        else f"{r['cost_usd']:,.2f}")
    caption = (f"GCP DWS prices ({data['source']}; as_of {data['as_of']}); stored in "
               f"{data['cache']}")
    return text_table(head, body or [["-"] * len(head)], caption)
