"""What each provider sells: consumption options per instance type and region, and locations
that need an opt-in.

A price in a catalog does not mean the capacity can be bought that way: the GCP price list has
an on-demand SKU for every A3 High size, yet ``a3-highgpu-{1,2,4}g`` are sold only as Spot or
flex-start VMs; AWS Local Zones (``use1-atl2-az1``) and Wavelength zones carry prices but must
be opted into (and need their own subnet). The consumption options are data
(``providers/data/buyability.csv``: provider, instance-type globs, region globs, options,
source, as-of date; the first matching row wins), read from the providers' documentation.

Options: ``on_demand``, ``spot``, ``reservation`` (capacity the organisation reserves or holds:
Capacity Reservations and Capacity Blocks on AWS, reservations on GCP) and ``flex_start``
(GCP's Dynamic Workload Scheduler). A plan capacity type is buyable when its option is sold:
``on_demand`` → ``on_demand``, ``spot`` → ``spot``, ``reserved`` → ``reservation``.

Opt-in locations (:func:`opt_in`): AWS Local Zones (zone IDs ``<region>-<metro><n>-az<n>``,
e.g. ``use1-atl2-az1``) and Wavelength zones (``…-wl1-…``): "Before you can use a Local Zone,
you must opt in" (AWS Local Zones User Guide, Getting started). The planner uses them only when
the policy sets ``allow_opt_in_zones: true``.
"""

from __future__ import annotations

import csv
import fnmatch
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

OPTIONS = ("on_demand", "spot", "reservation", "flex_start")
CAPACITY_OPTION = {"on_demand": "on_demand", "spot": "spot", "reserved": "reservation",
                   "block": "reservation", "flex_start": "flex_start"}
"""Plan capacity type → the consumption option that must be sold for it."""
AS_OF = "2026-12-03"

_LOCAL_ZONE = re.compile(r"^[a-z]{2,4}[0-9]+-[a-z]+[0-9]+[a-z]?-az[0-9]+$")
_WAVELENGTH = re.compile(r"-wl[0-9]+-")


@dataclass(frozen=True)
class Rule:
    provider: str
    instance_types: tuple[str, ...]
    regions: tuple[str, ...]
    options: frozenset[str]
    source: str
    as_of: str

    def matches(self, provider: str, instance_type: str, region: str) -> bool:
        return (provider == self.provider
                and any(fnmatch.fnmatchcase(instance_type, g) for g in self.instance_types)
                and any(fnmatch.fnmatchcase(region, g) for g in self.regions))


@cache
def rules() -> tuple[Rule, ...]:
    text = resources.files("ptplan.providers").joinpath("data/buyability.csv").read_text("utf-8")
    out = []
    for row in csv.DictReader(text.splitlines()):
        options = frozenset(row["options"].split())
        unknown = options - set(OPTIONS)
        if unknown:
            raise ValueError(f"buyability.csv: unknown option(s) {sorted(unknown)}")
        out.append(Rule(row["provider"], tuple(row["instance_types"].split()),
                        tuple(row["regions"].split()), options, row["source"], row["as_of"]))
    return tuple(out)


@cache  # the rules are fixed data: a plan asks for every offer of the catalog
def rule_for(provider: str, instance_type: str, region: str) -> Rule | None:
    """The first rule that covers (provider, instance type, region); None: nothing recorded
    (custom catalogs' own providers), which sells every option."""
    return next((r for r in rules() if r.matches(provider, instance_type, region)), None)


def sold(provider: str, instance_type: str, region: str, capacity_type: str) -> bool:
    """Whether ``capacity_type`` (a plan capacity type) can be bought for this type/region."""
    rule = rule_for(provider, instance_type, region)
    return rule is None or CAPACITY_OPTION.get(capacity_type, capacity_type) in rule.options


def opt_in(provider: str, zone: str) -> str | None:
    """Why ``zone`` needs an opt-in (None: it does not)."""
    if provider != "aws" or not zone:
        return None
    if _WAVELENGTH.search(zone):
        return f"{zone} is an AWS Wavelength zone (opt-in, carrier network)"
    if _LOCAL_ZONE.match(zone):
        return f"{zone} is an AWS Local Zone (opt-in per zone group, its own subnet)"
    return None
