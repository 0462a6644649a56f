"""``spec_match`` rules on what a plan records of its spec (``ptplan check --spec``), beyond the
per-phase demand of :func:`ptplan.planfile.verify.verify_against_spec`: the job (method,
algorithm, steps, budget, placement limits, spot model), the lifecycle the storage was priced
with (spec where set, else the plan's policy), the storage data classes (GB, retrieval, billed
GB-months at the plan's run time on each item's tier; a class is absent when the catalog has
no tier for it), the network flows (which exist and how many GB each moves) and the other
costs (lines, basis, rate, quantity). Everything is recomputed with the demand and cost models
under the policy the plan records; nothing reads the catalog or calls the planner.
"""

from __future__ import annotations

from typing import Any

from ptplan.costs.network import network_model
from ptplan.costs.storage import data_classes, lifecycle, weights_gb
from ptplan.planfile.rules_base import close
from ptplan.planfile.schema import Plan, usd
from ptplan.providers.base import Catalog, StorageTier


def check_spec_record(plan: Plan, spec: Any, demand: Any, policy: Any) -> list[str]:
    v: list[str] = []
    start = spec.sla.start_after  # schema 6: bookings start on the spec's date (when it has one)
    for b in plan.bookings if start is not None else []:
        if b.earliest_start != start.isoformat():
            v.append(f"spec_match: booking for pool {b.pool} starts {b.earliest_start}, the "
                     f"spec's sla.start_after is {start.isoformat()}")
    job = {"method": (plan.method, spec.method), "algorithm": (plan.algorithm, spec.algorithm),
           "steps": (plan.steps, demand.steps),
           "max_nodes_per_pool": (plan.max_nodes_per_pool, spec.placement.max_nodes_per_pool),
           "multi_node_training_min_gpus_per_node": (
               plan.multi_node_training_min_gpus_per_node,
               spec.placement.multi_node_training_min_gpus_per_node)}
    max_usd = spec.budget.max_usd
    job["budget_usd"] = (plan.budget_usd, usd(max_usd) if max_usd is not None else None)
    eff = spec.efficiency
    for name in ("lost_work_minutes", "restart_minutes", "checkpoint_minutes"):
        job[f"spot_model.{name}"] = (getattr(plan.spot_model, name), getattr(eff, name))
    if policy is not None:
        life = {"every_steps": spec.checkpoint_every_steps, **lifecycle(demand, policy)}
        recorded = plan.lifecycle.model_dump() if plan.lifecycle is not None else None
        if recorded is not None:
            for key, want in life.items():
                job[f"lifecycle.{key}"] = (recorded.get(key), want)
    for name, (got, want) in job.items():
        if got != want and not (isinstance(got, float) and isinstance(want, float)
                                and close(got, want)):
            v.append(f"spec_match: {name} {got} != spec {want}")
    if plan.framework_key != spec.framework_key:
        v.append(f"spec_match: the plan was made for framework {plan.framework_key}, the spec "
                 f"asks {spec.framework_key}; re-plan (`ptplan plan SPEC`) or set the spec's "
                 "framework")
    if spec.pipeline not in ("auto", plan.pipeline_mode):
        v.append(f"spec_match: pipeline {plan.pipeline_mode} but the spec asks {spec.pipeline}")
    rollout = any(p.name == "rollout" for p in plan.pools)
    want_w = demand.weight_sync_gb_per_step if spec.method != "sft" else 0.0  # 0 for generate
    if not close(plan.weight_sync_gb_per_node_step, want_w):
        v.append(f"spec_match: weight_sync_gb_per_node_step {plan.weight_sync_gb_per_node_step}"
                 f" != {want_w:.6g} (the policy's weights in bf16)")
    if policy is not None:
        v += _storage(plan, demand, policy)
        v += _network(plan, demand, policy, rollout)
    v += _calibration(plan, spec)
    v += _other_costs(plan, demand)
    from ptplan.planfile.rules_cpu import check_cpu_against_spec

    v += check_cpu_against_spec(plan, demand)
    return v


def _other_costs(plan: Plan, demand: Any) -> list[str]:
    """The spec's ``other_costs`` lines, recomputed (:mod:`ptplan.costs.other`): which lines,
    their basis, rate and quantity (per-hour lines: the plan's run hours, checked by
    ``check_other_costs``)."""
    from ptplan.costs.other import other_cost_model

    model = other_cost_model(demand)
    if model is None:
        return ["spec_match: the plan lists other costs, the spec has none"] \
            if plan.other_costs is not None else []
    if plan.other_costs is None:
        return ["spec_match: the spec has other_costs, the plan does not list them"]
    want = {ln.name: ln for ln in model.lines}
    got: dict[str, Any] = {i.name: i for i in plan.other_costs}
    v: list[str] = []
    if sorted(want) != sorted(got):
        v.append(f"spec_match: other costs {sorted(got)} != spec {sorted(want)}")
    for name in sorted(set(want) & set(got)):
        w, g = want[name], got[name]
        if g.basis != w.basis or not close(g.usd_per_unit, w.usd_per_unit):
            v.append(f"spec_match: other cost {name} {g.basis} ${g.usd_per_unit:g}/unit != spec "
                     f"{w.basis} ${w.usd_per_unit:g}/unit")
        if w.basis != "per_hour" and not close(g.quantity, w.quantity):
            v.append(f"spec_match: other cost {name} quantity {g.quantity:g} != spec "
                     f"{w.quantity:g}")
    return v


def _storage(plan: Plan, demand: Any, policy: Any) -> list[str]:
    from ptplan.costs.storage import class_cost

    classes = {c.name: c for c in data_classes(demand, policy)}
    items = {s.data_class: s for s in plan.storage}
    v: list[str] = []
    unknown = sorted(set(items) - set(classes))
    if unknown:  # a class the catalog has no eligible tier for is left out, not invented
        v.append(f"spec_match: storage lists {unknown}, not data classes of the spec "
                 f"({', '.join(sorted(classes))})")
    for name, item in items.items():
        c = classes.get(name)
        if c is None:
            continue
        if not close(item.gb, c.gb) or not close(item.retrieval_gb, c.retrieval_gb) \
                or item.access != c.access:
            v.append(f"spec_match: storage {name} {item.gb:.6g} GB (retrieval "
                     f"{item.retrieval_gb:.6g}, {item.access}) != spec {c.gb:.6g} GB "
                     f"(retrieval {c.retrieval_gb:.6g}, {c.access})")
        tier = StorageTier(item.provider, item.region, item.tier, item.usd_per_gb_month,
                           item.min_days, item.retrieval_usd_per_gb, item.access, "", "")
        gb_months, _ = class_cost(c, tier, plan.makespan_hours)
        if not close(item.gb_months, float(gb_months)):
            v.append(f"spec_match: storage {name} billed {item.gb_months:.6g} GB-months != "
                     f"{float(gb_months):.6g} over the run on its tier's minimum duration")
    return v


def _network(plan: Plan, demand: Any, policy: Any, rollout: bool) -> list[str]:
    classes = {c.name: c for c in data_classes(demand, policy)}
    archived = classes.get("archived_checkpoints")
    dataset = classes.get("dataset")
    net = network_model(demand, Catalog(name="", as_of="", offers=()),
                        int(archived.groups[0].count) if archived else 0, weights_gb(demand),
                        dataset.gb if dataset is not None else 0.0)
    want: dict[str, float] = {}
    if rollout and net.steps * net.experience_gb_per_step > 0:
        want["experience"] = net.steps * net.experience_gb_per_step
    if net.dataset_gb > 0:
        want["dataset_staging"] = net.dataset_gb
    if net.copy_to and net.checkpoint_copy_gb > 0:
        want["checkpoint_copies"] = net.checkpoint_copy_gb
    got: dict[str, float] = {}
    for item in plan.network:
        if item.flow != "weight_sync":
            flow = str(item.flow)  # the value, not the enum's repr, in the line below
            got[flow] = got.get(flow, 0.0) + item.gb
    v: list[str] = []
    if sorted(got) != sorted(want):
        v.append(f"spec_match: network flows {sorted(got)} != the spec's {sorted(want)}")
    for flow, gb in sorted(got.items()):
        if flow in want and not close(gb, want[flow]):
            v.append(f"spec_match: network {flow} moves {gb:.6g} GB, the spec {want[flow]:.6g}")
    return v


def _calibration(plan: Plan, spec: Any) -> list[str]:
    measured = {(c.phase, c.gpu, c.precision): c.tokens_per_second_per_gpu
                for c in spec.calibration}
    rates = {(c.phase, c.gpu, c.precision): c.run_rates or [] for c in spec.calibration}
    v: list[str] = []
    for rec in plan.calibration:
        key = (rec.phase, rec.gpu, rec.measured_precision)
        if key in rates and (len(rec.run_rates) != len(rates[key]) or not all(
                close(a, b) for a, b in zip(rec.run_rates, rates[key], strict=False))):
            v.append(f"spec_match: calibration {rec.phase}/{rec.gpu} run rates "
                     f"{rec.run_rates} are not the spec's ({rates[key]})")
        want = measured.get((rec.phase, rec.gpu, rec.measured_precision))
        if want is None or not close(want, rec.measured_tokens_per_second_per_gpu):
            v.append(f"spec_match: calibration {rec.phase}/{rec.gpu}/{rec.measured_precision} "
                     f"{rec.measured_tokens_per_second_per_gpu} is not the spec's ({want})")
        if rec.modelled_tokens_per_second_per_gpu <= 0 or not close(
                rec.factor, rec.measured_tokens_per_second_per_gpu
                / rec.modelled_tokens_per_second_per_gpu, rel=1e-6, abs_=1e-9):
            v.append(f"spec_match: calibration {rec.phase}/{rec.gpu} factor {rec.factor} != "
                     "measured / modelled")
    return v

