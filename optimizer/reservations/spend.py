"""Spend commitments of a portfolio (AWS Savings Plans, GCP flexible CUDs) as problem rows.

A commitment of C $/h is paid every hour of its term. Each node-hour of an eligible key k it
covers consumes c_k dollars of C and replaces s_k dollars of on-demand spend (AWS: c_k = the
plan's rate for the instance type, s_k = its on-demand price; GCP flexible CUDs: s_k = the
eligible vCPU + memory part of the price, c_k = s_k × (1 − discount)).

**The providers' order.** AWS applies instance reservations first, then EC2 Instance Savings
Plans, then Compute Savings Plans, each plan to the usage with the highest savings percentage
first; GCP applies resource-based CUDs before flexible CUDs. :mod:`ptplan.reservations.check`
bills in exactly that order. The MILP instead lets coverage go wherever it saves most; the two
agree whenever, for every pair of commitments P applied before Q that can cover a common key,
P covers no key Q cannot, pays s_k alike, and charges rates in one fixed ratio to Q's on all
of P's keys (then moving a covered node-hour between P and Q moves the same dollars on both
sides, so applying P first and fully costs nothing). Catalog discounts (one per kind and term)
always satisfy this; :func:`check_order` refuses rate files that do not, naming the pair, so the
purchase is never priced by an order the provider does not bill.
"""

from __future__ import annotations

import json
from pathlib import Path

from ptplan.core.errors import InputError
from ptplan.providers.embedded import SPEND_DISCOUNT, aws_family, gcp_vm_share
from ptplan.reservations.portfolio import Commitment
from ptplan.reservations.problem import HOURS_PER_WEEK, HOURS_PER_YEAR, Key, SpendRow, week_profile

PLAN_TYPE = {"ec2_instance_savings_plan": "EC2Instance", "compute_savings_plan": "Compute"}
RATIO_TOL = 1e-6


def _rates_file(path: Path, where: str) -> dict[tuple[str, int, str, str], float]:
    """(plan type, term years, region, instance type) → No Upfront $/h, from a file written by
    ``ptplan prices savings-plans``."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        out: dict[tuple[str, int, str, str], float] = {}
        for r in data["rates"]:
            if r["payment_option"] != "No Upfront":
                continue
            rate = float(r["usd_per_hour"])
            if not rate > 0:
                raise ValueError(f"usd_per_hour {rate} is not positive")
            out[(r["plan_type"], int(r["term_years"]), r["region"], r["instance_type"])] = rate
        return out
    except OSError as exc:
        raise InputError(f"{where}.rates_file: cannot read {str(path)!r} "
                         f"({exc.strerror or exc})") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{where}.rates_file: {str(path)!r} is not a rates file of `ptplan "
                         f"prices savings-plans` ({type(exc).__name__}: {exc})") from None


def spend_rows(commitments: list[Commitment], keys: dict[Key, int],
               on_demand: dict[int, float], demand_keys: set[int], weeks: int,
               buy_weeks: list[int], base_dir: Path, warnings: list[str]) -> list[SpendRow]:
    """One row per commitment and purchase week, in the order they are applied."""
    rows: list[SpendRow] = []
    for n, cm in enumerate(commitments):
        where = f"commitments[{n}]"
        provider = "gcp" if cm.kind == "flexible_cud" else "aws"
        table = None if cm.rates_file is None else _rates_file(
            Path(cm.rates_file) if Path(cm.rates_file).is_absolute()
            else base_dir / cm.rates_file, where)
        discount = cm.discount if cm.discount is not None else SPEND_DISCOUNT[(cm.kind,
                                                                              cm.term_years)]
        assumed = table is None and cm.discount is None
        rates: dict[int, tuple[float, float]] = {}
        for k, i in sorted(keys.items()):
            prov, region, itype = k
            if i not in demand_keys or prov != provider or i not in on_demand:
                continue
            if cm.kind == "ec2_instance_savings_plan" and (
                    region != cm.region or aws_family(itype) != cm.family):
                continue
            od = on_demand[i]
            if table is not None:
                rate = table.get((PLAN_TYPE[cm.kind], cm.term_years, region, itype))
                if rate is None:
                    warnings.append(f"{where} ({cm.name}): its rates file has no No Upfront "
                                    f"{cm.term_years}-year rate for {'/'.join(k)}; not covered")
                    continue
                rates[i] = (rate, od)
            elif cm.kind == "flexible_cud":
                share = cm.eligible_share or gcp_vm_share(region, itype)
                if share is None:
                    raise InputError(f"{where}.eligible_share: the embedded catalog has no "
                                     f"vCPU/memory split for {'/'.join(k)}; give the share of "
                                     "its price a flexible CUD covers")
                rates[i] = (od * share * (1 - discount), od * share)
            else:
                rates[i] = (od * (1 - discount), od)
        if not rates:
            warnings.append(f"{where} ({cm.name}): no demand it may cover; not offered")
            continue
        if assumed:
            warnings.append(f"{where} ({cm.name}): discount {discount:.0%} is the catalog's "
                            "planner default (an assumption); give discount or rates_file "
                            "before buying")
        source = (f"rates file {cm.rates_file}" if table is not None else
                  f"portfolio discount {discount:g}" if cm.discount is not None else
                  "providers/embedded.py SPEND_DISCOUNT (REFERENCE_FACTS.md, U: assumption)")
        scope = (f"aws {cm.family} in {cm.region}" if cm.region else f"every {provider} region")
        for t in buy_weeks:
            rows.append(SpendRow(
                name=cm.name if t == 0 else f"{cm.name}@w{t}", kind=cm.kind, provider=provider,
                term_years=cm.term_years, rates=rates, step=cm.step_usd_per_hour, source=source,
                assumption=assumed, buy_week=t, scope=scope,
                active=week_profile(weeks, t * HOURS_PER_WEEK, HOURS_PER_YEAR * cm.term_years)))
    rows.sort(key=lambda r: (r.rank, r.buy_week))
    check_order(rows, commitments)
    return rows


def check_order(rows: list[SpendRow], commitments: list[Commitment]) -> None:
    """Refuse commitments whose provider order could bill more than the best use of them
    (see the module docstring): P before Q sharing a key must have keys(P) ⊆ keys(Q), equal
    replaced spend and one ratio of rates on P's keys."""
    for a, p in enumerate(rows):
        for q in rows[a + 1:]:
            shared = set(p.rates) & set(q.rates)
            if not shared or p.name.split("@")[0] == q.name.split("@")[0]:
                continue
            ratios = [q.rates[k][0] / p.rates[k][0] for k in shared]
            same_s = all(abs(q.rates[k][1] - p.rates[k][1]) <= RATIO_TOL * q.rates[k][1]
                         for k in shared)
            if set(p.rates) <= set(q.rates) and same_s and \
                    max(ratios) - min(ratios) <= RATIO_TOL * max(ratios):
                continue
            raise InputError(
                f"commitments {p.name} and {q.name}: their rates are not in one ratio on the "
                "usage both may cover, so the provider's order (the first applied before the "
                "second) may bill more than the model can price exactly; drop one of them or "
                "give both discounts")

