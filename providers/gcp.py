"""Live GCP GPU prices through the Cloud Billing Catalog API (extra ``gcp``).

Source: ``google.cloud.billing_v1.CloudCatalogClient.list_skus(parent="services/6F81-5844-456A",
currency_code="USD")`` (Compute Engine), all pages. Credentials come from Application Default
Credentials only (``gcloud auth application-default login``, ``GOOGLE_APPLICATION_CREDENTIALS``,
the metadata server); with an ``--endpoint`` on ``127.0.0.1``/``localhost`` (tests, local
mirrors) the client uses ``AnonymousCredentials`` over the REST transport. Nothing secret is
logged or stored.

Each SKU is read and classified by :mod:`ptplan.providers.gcp_skus` (pydantic models of the SKU
shape):
vCPU, RAM and GPU SKUs of usage type ``OnDemand`` (→ on-demand offers), ``Preemptible`` (→ spot
offers), ``Commit1Yr``/``Commit3Yr`` (→ 1y/3y resource-based CUD rates, for ``ptplan reserve``;
never plan offers without holdings, DESIGN §3). A SKU's price applies to every region in its
``service_regions``.

A machine's hourly price per region and usage type is

    price = vCPU SKU × vCPUs + RAM SKU × GiB + GPU SKU × GPUs

with vCPU/RAM SKUs matched by the machine's series label and GPU SKUs by the GPU name. A4
(B200) is billed per GPU slice that already includes its share of vCPU and memory (``A4 Nvidia
B200 (1 gpu slice)``; the SkyPilot catalog's a4-highgpu VM row is 0.0), so its price is the
slice SKU × 8.

Machine shapes: :data:`ptplan.providers.gcp_machines.MACHINES` (shared with the embedded snapshot).
The
SKU series labels for A3 Mega (``A3Plus``) and A3 Ultra are taken from published SKU listings
and are not verified against a live pull: a machine whose SKUs are missing is excluded with its
reason, never priced partly. CPU machine types of CPU pools (issue #25): the N2 and C3 shapes of
:data:`ptplan.providers.gcp_machines.CPU_MACHINES`, vCPU × core SKU + GiB × RAM SKU, on-demand and
spot
(spot not capped in nodes), as CPU offers (``gpu`` none).

Billing Catalog prices are regional: offers have no zone, and a price in a region does not
promise capacity there. Spot interruption rates and capacity are not published: the embedded
default band and 8-node cap apply (assumptions, in each offer's note). Retries: exponential
backoff (1 s doubling to 16 s, ``retry_timeout_s`` in total) on 429/503/500/deadline errors;
then, or on any other fault, :class:`~ptplan.core.errors.ProviderError` before anything is
written.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from ptplan.core.errors import ProviderError
from ptplan.core.hardware import canonical_gpu_name
from ptplan.providers.base import Offer, ReservedRate, checked_regions
from ptplan.providers.cache import UNCHANGED, ProgressFn, Pull, utc_now
from ptplan.providers.cpu import CPU_GPU
from ptplan.providers.embedded import DEFAULT_SPOT_BAND, SPOT_NODES_PER_ZONE, band_hazard
from ptplan.providers.gcp_machines import CPU_MACHINES, MACHINES, SERIES_LABELS
from ptplan.providers.gcp_skus import USAGE_TYPES, kind_of, read_head, read_price

SERVICE = "services/6F81-5844-456A"
SOURCE = "GCP Cloud Billing Catalog (list_skus services/6F81-5844-456A)"
PAGE_SIZE = 5000
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
NO_SDK = "--provider gcp needs the Google Cloud Billing SDK: pip install 'ptplan[gcp]'"
_REGION_RE = re.compile(r"^[a-z]+-[a-z]+\d+$")


def validate_regions(regions: Iterable[str]) -> tuple[str, ...]:
    return checked_regions(regions, _REGION_RE, "a GCP region", "us-central1,europe-west4")


def _client(endpoint: str | None) -> Any:
    try:
        from google.cloud import billing_v1
    except ImportError:
        raise ProviderError(NO_SDK) from None
    if not endpoint:
        return billing_v1.CloudCatalogClient()
    from google.api_core.client_options import ClientOptions

    kwargs: dict[str, Any] = {"transport": "rest",
                              "client_options": ClientOptions(api_endpoint=endpoint)}
    if urlparse(endpoint).hostname in LOCAL_HOSTS:
        from google.auth.credentials import AnonymousCredentials

        kwargs["credentials"] = AnonymousCredentials()
    return billing_v1.CloudCatalogClient(**kwargs)


def _translate(exc: BaseException, what: str, *, api: str = "Cloud Billing API",
               unchanged: str = UNCHANGED) -> ProviderError:
    """A client fault as one line: what failed, why, the fix, and what was left as it was
    (``unchanged``: the price cache by default); ``api``: the API that must be enabled."""
    from google.api_core import exceptions as gexc
    from google.auth import exceptions as aexc

    if isinstance(exc, aexc.DefaultCredentialsError):
        return ProviderError(
            "no GCP credentials found by Application Default Credentials; run `gcloud auth "
            f"application-default login` or set GOOGLE_APPLICATION_CREDENTIALS; {unchanged}")
    if isinstance(exc, aexc.GoogleAuthError):
        return ProviderError(f"GCP credentials failed for {what} ({type(exc).__name__}); "
                             f"re-authenticate and retry; {unchanged}")
    if isinstance(exc, gexc.RetryError):
        cause = type(exc.cause).__name__ if exc.cause is not None else "timeout"
        return ProviderError(f"GCP {what} kept failing ({cause}) after retries with backoff; "
                             f"retry later; {unchanged}")
    if isinstance(exc, gexc.Unauthenticated | gexc.PermissionDenied | gexc.Unauthorized
                  | gexc.Forbidden):
        return ProviderError(f"GCP rejected the credentials for {what} ({exc.code} "
                             f"{type(exc).__name__}); check the account and that the {api} "
                             f"is enabled; {unchanged}")
    if isinstance(exc, gexc.GoogleAPICallError):
        message = re.sub(r"^[A-Z]+ \S+: ", "", str(exc.message or "").split("\n")[0])[:160]
        return ProviderError(f"GCP {what} failed ({exc.code} {type(exc).__name__}: {message}); "
                             f"{unchanged}")
    return ProviderError(f"GCP {what} failed ({type(exc).__name__}); check the network or "
                         f"--endpoint; {unchanged}")


@dataclass
class _Index:
    prices: dict[tuple[str, str, str, str], tuple[float, str]]
    conflicts: list[str]

    def add(self, kind: str, key: str, usage: str, region: str, price: float, sku: str) -> None:
        k = (kind, key, usage, region)
        old = self.prices.get(k)
        if old is not None and abs(old[0] - price) > 1e-12:
            self.conflicts.append(f"{key} {kind} {usage} in {region}: SKUs {old[1]} {old[0]} "
                                  f"and {sku} {price}; the higher is used")
            if price < old[0]:
                return
        self.prices[k] = (price, sku)


def fetch_gcp(regions: Iterable[str] = (), endpoint: str | None = None,
              progress: ProgressFn | None = None, now: dt.datetime | None = None,
              retry_timeout_s: float = 120.0, client: Any = None) -> Pull:
    """Pull every Compute Engine SKU page and build machine prices; a complete Pull or raises."""
    regions = validate_regions(regions)
    as_of = utc_now(now)
    try:
        client = client if client is not None else _client(endpoint)
        from google.api_core import exceptions as gexc
        from google.api_core import retry as gretry
        from google.cloud import billing_v1

        retry = gretry.Retry(
            initial=1.0, maximum=16.0, multiplier=2.0, timeout=retry_timeout_s,
            predicate=gretry.if_exception_type(
                gexc.TooManyRequests, gexc.ResourceExhausted, gexc.ServiceUnavailable,
                gexc.InternalServerError, gexc.DeadlineExceeded))
        pager = client.list_skus(
            request=billing_v1.ListSkusRequest(parent=SERVICE, currency_code="USD",
                                               page_size=PAGE_SIZE),
            retry=retry, timeout=60.0)
        index = _Index({}, [])
        pages = 0
        for page in pager.pages:
            pages += 1
            for sku in page.skus:
                head = read_head(sku)
                kind_key = kind_of(head)
                if kind_key is None:
                    continue
                price, unit = read_price(sku)
                kind, key, usage = kind_key
                expected = "GiBy.h" if kind == "ram" else "h"
                if unit != expected:
                    continue
                for region in head.service_regions:
                    if not regions or region in regions:
                        index.add(kind, key, usage, region, price, head.sku_id)
            if progress:
                progress(f"gcp SKU page {pages}", pages, None)
    except ProviderError:
        raise
    except ImportError:
        raise ProviderError(NO_SDK) from None
    except Exception as exc:  # every SDK/transport fault becomes one line, exit 3
        raise _translate(exc, f"list_skus ({SERVICE})") from None
    return _build(index, regions, as_of)


def _build(index: _Index, regions: tuple[str, ...], as_of: str) -> Pull:
    offers: list[Offer] = []
    rates: list[ReservedRate] = []
    exclusions: list[str] = []
    seen_regions = sorted({k[3] for k in index.prices if k[0] == "gpu"})
    for itype, m in sorted(MACHINES.items()):
        gpu = canonical_gpu_name(m.accelerator)
        if gpu is None:  # pragma: no cover - every accelerator above has a spec row
            continue
        for region in seen_regions:
            for usage in USAGE_TYPES:
                g = index.prices.get(("gpu", m.accelerator, usage, region))
                if g is None:
                    continue
                parts = f"{m.gpus} × {m.accelerator} {g[0]:g}"
                total = g[0] * m.gpus
                if m.series is not None:
                    cpu = _vm_price(index, "cpu", m.series, usage, region)
                    ram = _vm_price(index, "ram", m.series, usage, region)
                    if cpu is None or ram is None:
                        missing = " and ".join(n for n, v in (("vCPU", cpu), ("RAM", ram))
                                               if v is None)
                        exclusions.append(f"gcp {itype} {region}: no {usage} {missing} SKU for "
                                          f"series {'/'.join(SERIES_LABELS[m.series])}")
                        continue
                    total += cpu * m.vcpus + ram * m.memory_gib
                    parts = (f"{m.vcpus:g} vCPU × {cpu:g} + {m.memory_gib:g} GiB × {ram:g} + "
                             + parts)
                else:
                    parts += " (slice price includes vCPU and memory)"
                total = round(total, 6)
                common: dict[str, Any] = dict(
                    provider="gcp", region=region, zone="", instance_type=itype, gpu=gpu,
                    gpus_per_node=m.gpus, vcpus=float(m.vcpus), memory_gib=float(m.memory_gib),
                    as_of=as_of, source=SOURCE)
                if usage == "OnDemand":
                    offers.append(Offer(capacity_type="on_demand", usd_per_hour=total,
                                        note=parts, **common))
                elif usage == "Preemptible":
                    offers.append(Offer(
                        capacity_type="spot", usd_per_hour=total,
                        interruptions_per_hour=band_hazard(DEFAULT_SPOT_BAND),
                        max_nodes=SPOT_NODES_PER_ZONE,
                        note=f"{parts}; spot band {DEFAULT_SPOT_BAND} (default: GCP publishes "
                        f"no rates); capacity assumed {SPOT_NODES_PER_ZONE} nodes per region",
                        **common))
                else:
                    rates.append(ReservedRate(
                        provider="gcp", region=region, instance_type=itype,
                        term_years=1 if usage == "Commit1Yr" else 3, usd_per_hour=total,
                        source=f"{SOURCE} {usage}", assumption=False,
                        offering_class="resource-cud", purchase_option="No Upfront",
                        upfront_usd=0.0, recurring_usd_per_hour=total, as_of=as_of))
    if not offers:
        raise ProviderError("the GCP Billing Catalog returned no GPU machine prices"
                            + (f" for {', '.join(regions)}" if regions else "")
                            + f"; check --regions; {UNCHANGED}")
    offers += _cpu_offers(index, as_of, exclusions)
    notes = ["Billing Catalog prices are per region (no zones); a price is not a promise of "
             "capacity there",
             f"GCP spot capacity assumed {SPOT_NODES_PER_ZONE} nodes per region and the default "
             "interruption band (not published)"]
    if index.conflicts:
        notes.append(f"{len(index.conflicts)} SKU price conflicts resolved to the higher price "
                     f"(e.g. {index.conflicts[0]})")
    offers.sort(key=lambda o: o.order)
    rates.sort(key=lambda r: r.order)
    return Pull(provider="gcp", as_of=as_of, source=SOURCE, regions=regions,
                offers=tuple(offers), reserved_rates=tuple(rates),
                exclusions=tuple(sorted(set(exclusions))), notes=tuple(notes))


def _cpu_offers(index: _Index, as_of: str, exclusions: list[str]) -> list[Offer]:
    """CPU machine types (N2, C3: :data:`CPU_MACHINES`) for CPU pools, on-demand and spot, from
    their series' core and RAM SKUs in every region that has either; a machine whose series
    lacks one of the two there is excluded with the reason (never priced partly)."""
    out: list[Offer] = []
    for usage, capacity in (("OnDemand", "on_demand"), ("Preemptible", "spot")):
        for itype, m in sorted(CPU_MACHINES.items()):
            regions = sorted({k[3] for k in index.prices if k[0] in ("cpu", "ram")
                              and k[2] == usage and k[1] in SERIES_LABELS[m.series]})
            for region in regions:
                cpu = _vm_price(index, "cpu", m.series, usage, region)
                ram = _vm_price(index, "ram", m.series, usage, region)
                if cpu is None or ram is None:
                    missing = "vCPU" if cpu is None else "RAM"
                    exclusions.append(f"gcp {itype} {region}: no {usage} {missing} SKU for "
                                      f"series {m.series}")
                    continue
                note = f"{m.vcpus:g} vCPU × {cpu:g} + {m.memory_gib:g} GiB × {ram:g}"
                spot: dict[str, Any] = {}
                if capacity == "spot":
                    spot = {"interruptions_per_hour": band_hazard(DEFAULT_SPOT_BAND)}
                    note += (f"; spot band {DEFAULT_SPOT_BAND} (default: GCP publishes no "
                             "rates); CPU capacity not capped (assumed plentiful)")
                out.append(Offer(
                    provider="gcp", region=region, zone="", instance_type=itype, gpu=CPU_GPU,
                    gpus_per_node=0, vcpus=float(m.vcpus), memory_gib=float(m.memory_gib),
                    as_of=as_of, source=SOURCE, capacity_type=capacity,
                    usd_per_hour=round(cpu * m.vcpus + ram * m.memory_gib, 6), note=note,
                    **spot))
    return out


def _vm_price(index: _Index, kind: str, series: str, usage: str, region: str) -> float | None:
    for label in SERIES_LABELS[series]:
        hit = index.prices.get((kind, label, usage, region))
        if hit is not None:
            return hit[0]
    return None
