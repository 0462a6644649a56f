"""Live GCP Dynamic Workload Scheduler prices through the Cloud Billing Catalog (extra ``gcp``).

Source: the call of :mod:`ptplan.providers.gcp`, ``CloudCatalogClient.list_skus(parent=
"services/6F81-5844-456A", currency_code="USD")`` (Compute Engine), every page, with the same
credentials (Application Default Credentials; anonymous on a local ``--endpoint``), retries and
one-line faults (:class:`~ptplan.core.errors.ProviderError`, nothing written).

Kept SKUs: Compute GPU, CPU and RAM SKUs whose description names a DWS mode (the spellings of
the published SKU groups, e.g. https://cloud.google.com/skus/sku-groups/flex-start-mode-a3-vms):

* flex-start (capacity type ``flex_start``): ``DWS Defined Duration`` or ``DWS Flex Start`` —
  ``Nvidia H100 80GB GPU attached to DWS Defined Duration VMs running in Americas``,
  ``DWS Defined Duration A3 Core running in Americas``, ``DWS Defined Duration A3 Ram …``;
* calendar-mode future reservations (capacity type ``block``): ``Calendar Mode`` —
  ``Reserved Nvidia H100 80GB Mega GPU in Americas in Calendar Mode``.

With the mode's words removed, a SKU is keyed as :func:`ptplan.providers.gcp_skus.kind_of` keys the
on-demand ones (series label for vCPU/RAM, GPU name). A machine's price per region and mode is
GPU SKU × GPUs + vCPU SKU × vCPUs + RAM SKU × GiB with that mode's SKUs (A4: the slice × 8);
where the mode has the GPU SKU but not the series' vCPU or RAM SKU, the on-demand vCPU and RAM
SKUs of the same pull are used and the offer's note says so (an upper bound: the embedded
``providers/data/gcp_dws.csv`` does the same for A3 Mega). Terms
(https://cloud.google.com/compute/docs/instances/about-flex-start-vms,
.../future-reservations-calendar-mode-overview): flex-start runs at most 7 days, billed as
used, after a queue whose expected length Google does not publish (0 h here); calendar mode
books 1 to 90 days in 24-h units, up to 80 VMs per request, a start up to 60 days ahead.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from typing import Any

from ptplan.core.errors import ProviderError
from ptplan.core.hardware import canonical_gpu_name
from ptplan.providers.base import Offer
from ptplan.providers.cache import ProgressFn, utc_now
from ptplan.providers.cache_blocks import BlockPull
from ptplan.providers.gcp import NO_SDK, PAGE_SIZE, SERVICE, _client, _Index, _translate, _vm_price
from ptplan.providers.gcp import validate_regions as _regions
from ptplan.providers.gcp_machines import MACHINES, SERIES_LABELS
from ptplan.providers.gcp_skus import Category, SkuHead, kind_of, read_head, read_price

SOURCE = "GCP Cloud Billing Catalog DWS SKUs (list_skus services/6F81-5844-456A)"
FLEX_HOURS = 168.0
CALENDAR_UNIT_HOURS = 24.0
CALENDAR_MAX_HOURS = 90 * 24.0
CALENDAR_MAX_VMS = 80
CALENDAR_START_DAYS = 60
_CALENDAR = re.compile(r"\bcalendar mode\b", re.IGNORECASE)
_FLEX = re.compile(r"\bDWS (?:Defined Duration|Flex Start)\b", re.IGNORECASE)
_WORDS = re.compile(r"\battached to DWS (?:Defined Duration|Flex Start) VMs\b|\bDWS (?:Defined "
                    r"Duration|Flex Start|Calendar Mode)\b|\bin Calendar Mode\b|^\s*Reserved\b",
                    re.IGNORECASE)


def dws_kind(head: SkuHead) -> tuple[str, str, str] | None:
    """(mode, kind, key) of a DWS SKU: mode ``flex_start`` or ``block``; kind ``gpu``,
    ``cpu`` or ``ram`` and key as :func:`ptplan.providers.gcp_skus.kind_of`; None for any other
    SKU."""
    desc = head.description
    mode = "block" if _CALENDAR.search(desc) else "flex_start" if _FLEX.search(desc) else None
    if mode is None or head.category.usage_type.startswith("Commit"):
        return None
    plain = " ".join(_WORDS.sub(" ", desc).split())
    cat = head.category
    hit = kind_of(head.model_copy(update={"description": plain, "category": Category(
        resource_family=cat.resource_family, resource_group=cat.resource_group,
        usage_type="OnDemand")}))
    return None if hit is None else (mode, hit[0], hit[1])


def fetch_dws(regions: Iterable[str] = (), endpoint: str | None = None,
              progress: ProgressFn | None = None, now: dt.datetime | None = None,
              retry_timeout_s: float = 120.0, client: Any = None) -> BlockPull:
    """Every Compute Engine SKU page, read into DWS machine prices; a complete pull or raises."""
    regions = _regions(regions)
    as_of = utc_now(now)
    index = _Index({}, [])
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
        for pages, page in enumerate(pager.pages, start=1):
            for sku in page.skus:
                _add(index, sku, regions)
            if progress:
                progress(f"gcp SKU page {pages}", pages, None)
    except ProviderError:
        raise
    except ImportError:
        raise ProviderError(NO_SDK) from None
    except Exception as exc:  # every SDK/transport fault becomes one line, exit 3
        raise _translate(exc, f"list_skus ({SERVICE})") from None
    return _build(index, regions, as_of)


def _add(index: _Index, sku: Any, regions: tuple[str, ...]) -> None:
    head = read_head(sku)
    dws = dws_kind(head)
    if dws is not None:
        usage, kind, key = dws
    else:  # the on-demand vCPU and RAM SKUs: the fallback of a mode without its own
        plain = kind_of(head)
        if plain is None or plain[2] != "OnDemand" or plain[0] == "gpu":
            return
        kind, key, usage = plain
    price, unit = read_price(sku)
    if unit != ("GiBy.h" if kind == "ram" else "h"):
        return
    for region in head.service_regions:
        if not regions or region in regions:
            index.add(kind, key, usage, region, price, head.sku_id)


def _build(index: _Index, regions: tuple[str, ...], as_of: str) -> BlockPull:
    offers: list[Offer] = []
    exclusions: list[str] = []
    where = sorted({(k[2], k[3]) for k in index.prices if k[0] == "gpu" and k[2] != "OnDemand"})
    for itype, m in sorted(MACHINES.items()):
        gpu = canonical_gpu_name(m.accelerator)
        for mode, region in where:
            g = index.prices.get(("gpu", m.accelerator, mode, region))
            if g is None or gpu is None:
                continue
            total, parts = g[0] * m.gpus, f"{m.gpus} × {m.accelerator} {g[0]:g}"
            if m.series is None:
                parts += " (slice price includes vCPU and memory)"
            else:
                cpu = _vm_price(index, "cpu", m.series, mode, region)
                ram = _vm_price(index, "ram", m.series, mode, region)
                fallback = ""
                if cpu is None or ram is None:
                    cpu = _vm_price(index, "cpu", m.series, "OnDemand", region)
                    ram = _vm_price(index, "ram", m.series, "OnDemand", region)
                    fallback = (f"; no {mode} vCPU/RAM SKU for series "
                                f"{'/'.join(SERIES_LABELS[m.series])}: on-demand vCPU and RAM "
                                "(an upper bound)")
                if cpu is None or ram is None:
                    exclusions.append(f"gcp {itype} {region} {mode}: no vCPU/RAM SKU for series "
                                      f"{'/'.join(SERIES_LABELS[m.series])}")
                    continue
                total += cpu * m.vcpus + ram * m.memory_gib
                parts = (f"{m.vcpus:g} vCPU × {cpu:g} + {m.memory_gib:g} GiB × {ram:g} + "
                         f"{parts}{fallback}")
            offers.append(_offer(itype, m, gpu, region, mode, round(total, 6), parts, as_of))
    if not offers:
        raise ProviderError("the GCP Billing Catalog returned no DWS (flex-start or calendar "
                            "mode) GPU machine prices" + (f" for {', '.join(regions)}"
                                                          if regions else "")
                            + "; check --region; the cache is unchanged")
    offers.sort(key=lambda o: o.order)
    return BlockPull(provider="gcp", as_of=as_of, source=SOURCE, regions=regions,
                     offers=tuple(offers), exclusions=tuple(sorted(set(exclusions))))


def _offer(itype: str, m: Any, gpu: str, region: str, mode: str, usd: float, parts: str,
           as_of: str) -> Offer:
    common: dict[str, Any] = dict(
        provider="gcp", region=region, zone="", instance_type=itype, gpu=gpu,
        gpus_per_node=m.gpus, vcpus=float(m.vcpus), memory_gib=float(m.memory_gib),
        capacity_type=mode, usd_per_hour=usd, as_of=as_of, source=SOURCE)
    if mode == "block":
        return Offer(**common, max_nodes=CALENDAR_MAX_VMS, block_unit_hours=CALENDAR_UNIT_HOURS,
                     block_max_hours=CALENDAR_MAX_HOURS, max_start_days=CALENDAR_START_DAYS,
                     note=f"calendar-mode reservation in 24-h units, 1 to 90 days: {parts}")
    return Offer(**common, block_max_hours=FLEX_HOURS,
                 note=f"flex-start: billed as used, at most 7 days, expected wait not "
                      f"published (0 h): {parts}")
