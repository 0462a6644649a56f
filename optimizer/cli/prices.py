"""``ptplan prices``: pull live prices into the local cache, show them, diff two catalogs.

* ``refresh --provider aws|gcp [--regions R,...] [--instance-type T]... [--endpoint URL]
  [--cache PATH]`` pulls through the provider SDK (``ptplan.providers.aws`` /
  ``ptplan.providers.gcp``) with a progress bar on stderr, then writes the complete pull into
  the cache in one transaction (``ptplan.providers.cache``). Faults exit 3 with one line and
  leave the cache as it was.
* ``show [--gpu G] [--provider P] [--region R] [--format table|json] [--catalog C]``: per
  (GPU, provider, instance type, region): on-demand, cheapest spot zone and the cheapest
  effective 1y/3y reserved rate per hour (JSON lists every reserved option with its upfront fee
  and hourly part), like ``sky gpus list``.
* ``savings-plans --instance-type T... [--regions R,...] [--endpoint URL] [-o FILE]``: live
  No Upfront Compute and EC2 Instance Savings Plans rates (``ptplan.providers.aws_savings``), as
  the rates file a portfolio's ``commitments[].rates_file`` reads (JSON), or a table.
* ``diff OLD NEW``: offers and reserved rates changed (with the % change), added and removed
  between two catalogs (``embedded``, ``cache``, a ``*.sqlite`` cache file or a catalog YAML).

The tables are :mod:`ptplan.report.tables_prices`'.
"""

from __future__ import annotations

import fnmatch
from enum import StrEnum
from pathlib import Path
from typing import Any

import typer

from ptplan.cli.common import ProgressBar, TableOrJson, _emit, _run, app, dumps, info
from ptplan.core.errors import InputError

prices_app = typer.Typer(no_args_is_help=True,
                         help="Live prices: refresh the local cache, show it, diff catalogs.")
app.add_typer(prices_app, name="prices")


class Provider(StrEnum):
    """Providers whose prices ``refresh`` pulls live."""

    aws = "aws"
    gcp = "gcp"


def _provider(value: str | Provider) -> Provider:
    """``--provider``: an unknown value is ptplan's one-line input error (exit 2), as every
    other bad input, not the usage panel."""
    try:
        return Provider(value)
    except ValueError:
        typer.echo(f"error: --provider: {value!r} is not supported; use "
                   f"{' or '.join(Provider)}", err=True)
        raise typer.Exit(InputError.exit_code) from None


def _split(values: list[str] | None) -> list[str]:
    return [v.strip() for item in values or [] for v in item.split(",") if v.strip()]


def _check_endpoint(endpoint: str | None) -> None:
    if endpoint is not None and not endpoint.startswith(("http://", "https://")):
        raise InputError(f"--endpoint: {endpoint!r} is not a URL; give http(s)://host[:port]")


@prices_app.command("savings-plans")
def savings_plans(
    instance_type: list[str] = typer.Option(..., "--instance-type", help="Instance types "
                                            "(repeatable or comma-separated)."),
    regions: list[str] = typer.Option(None, "--regions", help="Regions (comma-separated or "
                                      "repeated); default: every region returned."),
    endpoint: str = typer.Option(None, "--endpoint", help="Send SDK requests to this URL "
                                 "(private mirror, tests)."),
    output: Path = typer.Option(None, "-o", "--output", help="Write the rates file (JSON) "
                                "for a portfolio's commitments[].rates_file."),
) -> None:
    """Live AWS Savings Plans rates (No Upfront) per instance type, region, plan and term."""

    def go() -> None:
        from ptplan.providers.aws_savings import fetch_savings_plan_rates

        _check_endpoint(endpoint)
        data = fetch_savings_plan_rates(_split(regions), _split(instance_type), endpoint)
        if output is not None:
            _emit(dumps(data), output)
            return
        from ptplan.report.tables_prices import savings_plans_table

        typer.echo(savings_plans_table(data), nl=False)

    _run(go)


@prices_app.command("refresh")
def refresh(
    provider: Provider = typer.Option(..., "--provider", parser=_provider,
                                      help="aws or gcp."),
    regions: list[str] = typer.Option(None, "--regions", help="Regions to pull (comma-separated "
                                      "or repeated); default: every region with prices. Only "
                                      "these regions' rows are replaced."),
    instance_type: list[str] = typer.Option(None, "--instance-type", help="aws: instance types "
                                            "(repeatable); default: the GPU and Trainium "
                                            "families."),
    endpoint: str = typer.Option(None, "--endpoint", help="Send SDK requests to this URL "
                                 "(private mirror, tests); http://127.0.0.1 or localhost: "
                                 "anonymous credentials for gcp."),
    cache: Path = typer.Option(None, "--cache", help="Cache file (default: $PTPLAN_CACHE or the "
                               "user cache directory)."),
) -> None:
    """Pull live prices through the provider SDK into the local cache (atomic)."""

    def go() -> None:
        from ptplan.providers.cache import resolve_cache_path, store_pull

        _check_endpoint(endpoint)
        region_list = _split(regions)
        types = _split(instance_type)
        target = resolve_cache_path(cache)
        info(f"pulling {provider} prices" + (f" for {', '.join(region_list)}"
                                             if region_list else " (all regions)")
             + f" into {target}...")
        with ProgressBar(f"pulling {provider} prices") as bar:

            def step(label: str, done: int, total: int | None) -> None:
                bar(done, total, label)

            if provider is Provider.aws:
                from ptplan.providers.aws import fetch_aws

                pull = fetch_aws(region_list, types, endpoint=endpoint, progress=step)
            else:
                if types:
                    raise InputError("--instance-type applies to aws only; gcp pulls every "
                                     "A2/A3/A4/G2 machine type")
                from ptplan.providers.gcp import fetch_gcp

                pull = fetch_gcp(region_list, endpoint=endpoint, progress=step)
        store_pull(pull, target)
        od = sum(o.capacity_type == "on_demand" for o in pull.offers)
        spot = sum(o.capacity_type == "spot" for o in pull.offers)
        regions_done = sorted({o.region for o in pull.offers})
        typer.echo(f"{provider}: {len(pull.offers)} offers ({od} on-demand, {spot} spot) and "
                   f"{len(pull.reserved_rates)} reserved rates in {len(regions_done)} regions, "
                   f"{len(pull.exclusions)} exclusions; as_of {pull.as_of}; cache {target}")

    _run(go)


def _load(ref: str) -> Any:
    from ptplan.providers.registry import load_catalog

    return load_catalog(ref)


def _gpu_filter(name: str | None) -> str | None:
    if name is None:
        return None
    from ptplan.core.hardware import canonical_gpu_name, unknown_gpu_message

    canon = canonical_gpu_name(name)
    if canon is None:
        raise InputError(f"--gpu: {unknown_gpu_message(name)}")
    return canon


def show_rows(catalog: Any, gpu: str | None, provider: str | None, region: str | None
              ) -> list[dict[str, Any]]:
    """One row per (gpu, provider, instance type, region) with its prices per hour."""
    rows: dict[tuple[str, str, str, str], dict[str, Any]] = {}

    def keep(p: str, r: str) -> bool:
        return ((provider is None or p == provider)
                and (region is None or fnmatch.fnmatchcase(r, region)))

    types: dict[tuple[str, str], tuple[str, int]] = {}
    for o in catalog.offers:
        types[(o.provider, o.instance_type)] = (o.gpu, o.gpus_per_node)
        if (gpu is not None and o.gpu != gpu) or not keep(o.provider, o.region):
            continue
        row = rows.setdefault((o.gpu, o.provider, o.instance_type, o.region), {
            "gpu": o.gpu, "gpus_per_node": o.gpus_per_node, "provider": o.provider,
            "instance_type": o.instance_type, "region": o.region, "on_demand_usd_per_hour": None,
            "spot_usd_per_hour": None, "spot_zone": None, "reserved": [], "as_of": o.as_of})
        row["as_of"] = min(row["as_of"], o.as_of)
        if o.capacity_type == "on_demand":
            row["on_demand_usd_per_hour"] = o.usd_per_hour
        elif o.capacity_type == "spot" and (row["spot_usd_per_hour"] is None
                                            or o.usd_per_hour < row["spot_usd_per_hour"]):
            row["spot_usd_per_hour"], row["spot_zone"] = o.usd_per_hour, o.zone
    for r in catalog.reserved_rates:
        g = types.get((r.provider, r.instance_type))
        if g is None or (gpu is not None and g[0] != gpu) or not keep(r.provider, r.region):
            continue
        hit = rows.get((g[0], r.provider, r.instance_type, r.region))
        if hit is None:
            continue
        hit["reserved"].append({
            "term_years": r.term_years, "offering_class": r.offering_class,
            "purchase_option": r.purchase_option, "effective_usd_per_hour": r.usd_per_hour,
            "upfront_usd": r.upfront_usd, "recurring_usd_per_hour": r.recurring_usd_per_hour,
            "assumption": r.assumption, "source": r.source})
    out = []
    for key in sorted(rows, key=lambda k: (k[0], k[1], rows[k]["on_demand_usd_per_hour"]
                                           or float("inf"), k[2], k[3])):
        row = rows[key]
        row["reserved"].sort(key=lambda x: (x["term_years"], x["effective_usd_per_hour"],
                                            x["offering_class"], x["purchase_option"]))
        out.append(row)
    return out


@prices_app.command("show")
def show(
    gpu: str = typer.Option(None, "--gpu", help="Only this GPU (aliases accepted)."),
    provider: str = typer.Option(None, "--provider", help="Only this provider."),
    region: str = typer.Option(None, "--region", help="Only this region (glob, e.g. 'us-*')."),
    fmt: TableOrJson = typer.Option(TableOrJson.table, "--format"),
    catalog: str = typer.Option("cache", "--catalog", help="cache (default), embedded, a cache "
                                "file (*.sqlite) or a catalog YAML."),
    output: Path = typer.Option(None, "-o", "--output", help="Write to FILE instead of stdout."),
) -> None:
    """On-demand, spot and reserved prices per hour, per GPU and instance type."""

    def go() -> None:
        canon = _gpu_filter(gpu)
        cat = _load(catalog)
        rows = show_rows(cat, canon, provider, region)
        if not rows:
            raise InputError(
                f"no prices match (--gpu {gpu or '*'}, --provider {provider or '*'}, "
                f"--region {region or '*'}) in catalog {cat.name}; GPUs there: "
                f"{', '.join(cat.gpus())}; providers: "
                f"{', '.join(sorted({o.provider for o in cat.offers}))}")
        if fmt == "json":
            _emit(dumps({"catalog": {"name": cat.name, "as_of": cat.as_of,
                                     "age_days": cat.age_days(), "notes": list(cat.notes)},
                         "filters": {"gpu": canon, "provider": provider, "region": region},
                         "rows": rows}), output)
        else:
            from ptplan.report.tables_prices import show_table

            _emit(show_table(cat, rows), output)

    _run(go)


DIFF_TOLERANCE_USD = 5e-5
"""Prices closer than this ($/h, below the 4-decimal display) count as unchanged."""


def diff_catalogs(old: Any, new: Any, provider: str | None = None) -> dict[str, Any]:
    """What changed between two catalogs: offers by key, reserved rates by option."""

    def offers(c: Any) -> dict[str, Any]:
        return {o.key: o for o in c.offers if provider is None or o.provider == provider}

    def rates(c: Any) -> dict[str, Any]:
        return {r.key: r for r in c.reserved_rates if provider is None or r.provider == provider}

    out: dict[str, Any] = {"old": {"name": old.name, "as_of": old.as_of},
                           "new": {"name": new.name, "as_of": new.as_of}}
    for label, a, b in (("offers", offers(old), offers(new)),
                        ("reserved_rates", rates(old), rates(new))):
        changed = []
        for k in sorted(a.keys() & b.keys()):
            x, y = a[k].usd_per_hour, b[k].usd_per_hour
            if abs(x - y) >= DIFF_TOLERANCE_USD:
                changed.append({"key": k, "old_usd_per_hour": x, "new_usd_per_hour": y,
                                "change_pct": round((y - x) / x * 100, 2) if x else None})
        out[label] = {
            "changed": changed,
            "added": [{"key": k, "usd_per_hour": b[k].usd_per_hour}
                      for k in sorted(b.keys() - a.keys())],
            "removed": [{"key": k, "usd_per_hour": a[k].usd_per_hour}
                        for k in sorted(a.keys() - b.keys())],
            "unchanged": sum(1 for k in a.keys() & b.keys()
                             if abs(a[k].usd_per_hour - b[k].usd_per_hour) < DIFF_TOLERANCE_USD),
        }
    return out


@prices_app.command("diff")
def diff(
    old: str = typer.Argument(..., help="Old catalog: embedded, cache, a cache file (*.sqlite) "
                              "or a catalog YAML."),
    new: str = typer.Argument(..., help="New catalog (same forms)."),
    provider: str = typer.Option(None, "--provider", help="Only this provider."),
    fmt: TableOrJson = typer.Option(TableOrJson.table, "--format"),
    output: Path = typer.Option(None, "-o", "--output", help="Write to FILE instead of stdout."),
) -> None:
    """What changed between two catalogs: prices changed (with %), offers added and removed."""

    def go() -> None:
        from ptplan.report.tables_prices import diff_table

        d = diff_catalogs(_load(old), _load(new), provider)
        _emit(dumps(d) if fmt == "json" else diff_table(d), output)

    _run(go)
