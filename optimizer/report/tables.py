"""Text renderings (table via rich, markdown) of reports and plans. JSON is the source of truth;
these functions only format it, so every figure shown is one the JSON holds.

The one table builder of ptplan: :func:`text_table` (a rich table as plain text) and
:func:`md_table` (a Markdown table), both from a header and rows of strings; :func:`_table` is
a titled text table with footer lines. Every command's table and Markdown output uses them."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console
from rich.table import Table

from ptplan.report.intervals import hours_range, plan_lines, usd_range


def _console_text(*renderables: Any) -> str:
    buf = io.StringIO()
    console = Console(file=buf, width=160, color_system=None, force_terminal=False,
                      soft_wrap=False)
    for r in renderables:
        console.print(r)
    return buf.getvalue()


def _fmt_hours(value: float | None) -> str:
    if value is None:
        return "does not fit"
    return f"{value:,.1f}" if value >= 10 else f"{value:,.2f}"


def estimate_rows(report: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    gpus = list(report["totals"]["gpu_hours"])
    header = ["phase", "tokens", "PFLOPs", *[f"{g} GPU-h" for g in gpus]]
    rows: list[list[str]] = []
    for ph in report["phases"]:
        row = [ph["name"], f"{ph['tokens']:.3g}", f"{ph['flops'] / 1e15:,.1f}"]
        for g in gpus:
            cell = ph["by_gpu"][g]
            if cell["fits"]:
                row.append(f"{_fmt_hours(cell['gpu_hours'])} ({cell['precision']}, "
                           f"{_how(cell)})")
            else:
                row.append("n/a: " + cell["reason"][:40])
        rows.append(row)
    ck = report["checkpoint"]
    rows.append(["checkpoint", f"{ck['count']} x {ck['gb_each']:.0f} GB", "0",
                 *[_fmt_hours(ck["gpu_hours"][g]) for g in gpus]])
    rows.append(["total", "", f"{report['totals']['flops'] / 1e15:,.1f}",
                 *[_fmt_hours(report["totals"]["gpu_hours"][g]) for g in gpus]])
    return header, rows


def _how(cell: dict[str, Any]) -> str:
    """How the phase runs at its reference pool: training layout, or engine and drain."""
    lay = cell.get("layout")
    if lay:
        text = f"tp{lay['tp']} cp{lay['cp']} pp{lay['pp']} dp{lay['dp']} z{lay['zero_stage']}"
        return text + (" +offload" if lay["optimizer_offload"] else "")
    dec = cell.get("decode")
    if dec:
        return (f"tp{dec['replica_gpus']} x {dec['replicas']:g}, drain "
                f"{100 * dec['drain_share']:.0f} %")
    return f"{cell['replica_gpus']}/replica"


REFERENCE_NOT_CLUSTER = (
    "GPU-hours here are each phase's at its most efficient pool, not what a cluster would "
    "consume (idle GPUs, drain tails, barriers): for the job on your cluster, `ptplan estimate "
    "SPEC --cluster NxGPU`")
"""The line under the reference-pool estimate (issue #39)."""


def _footer(report: dict[str, Any]) -> list[str]:
    lines = [REFERENCE_NOT_CLUSTER,
             f"step unit: {report['step_unit']}; steps: {report['steps']}",
             f"precision: {report['precision']}; pipeline assumed: {report['pipeline_assumed']}",
             "each phase at its reference pool (every generation replica's batch full); "
             "training: its parallel layout there; generation: engine size x replicas and the "
             "share of each step spent draining (JSON: by_gpu.*.decode / layout)"]
    lines += [f"note: {n}" for n in report["notes"]]
    lines.append("defaults applied: " + "; ".join(report["defaults_applied"]))
    return lines


def text_table(header: list[str], rows: list[list[str]], title: str | None = None) -> str:
    """A table as plain text (rich box drawing, 160 columns, no colour); long cells fold."""
    table = Table(title=title)
    for h in header:
        table.add_column(h, overflow="fold")
    for r in rows:
        table.add_row(*r)
    return _console_text(table)


def _table(title: str, header: list[str], rows: list[list[str]], footer: list[str]) -> str:
    """A titled :func:`text_table` followed by its footer lines."""
    return text_table(header, rows, title) + "".join(line + "\n" for line in footer)


def estimate_table(report: dict[str, Any]) -> str:
    return _table(f"ptplan estimate: {report['spec_name']} ({report['method']})",
                  *estimate_rows(report), _footer(report))


def md_table(header: list[str], rows: list[list[str]]) -> str:
    """A Markdown table (``|`` in cells escaped, newlines folded to spaces)."""

    def esc(s: str) -> str:
        return s.replace("|", "\\|").replace("\n", " ")

    out = ["| " + " | ".join(esc(h) for h in header) + " |",
           "|" + "---|" * len(header)]
    out += ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows]
    return "\n".join(out) + "\n"


def estimate_markdown(report: dict[str, Any]) -> str:
    header, rows = estimate_rows(report)
    return (f"# ptplan estimate: {report['spec_name']}\n\n" + md_table(header, rows) + "\n"
            + "\n".join(f"- {line}" for line in _footer(report)) + "\n")


def plan_rows(plan: Any) -> tuple[list[str], list[list[str]]]:
    """One row per pool (its offers summarised) and a total line."""
    header = ["pool", "phases", "capacity", "instances", "GPU", "nodes", "$/h", "held h",
              "busy h", "cost $", "idle $"]
    rows: list[list[str]] = []
    for pool in plan.pools:
        prec = {ph.name: ph.precision for ph in plan.phases if ph.pool == pool.name
                and ph.precision}
        kinds: dict[str, int] = {}
        for a in pool.allocations:
            kinds[a.capacity_type] = kinds.get(a.capacity_type, 0) + a.nodes
        where = ", ".join(f"{a.nodes} {a.instance_type} @ {a.zone or a.region}"
                          for a in pool.allocations)
        rows.append([
            pool.name, ", ".join(f"{k}:{v}" for k, v in prec.items()),
            " + ".join(f"{k} {n}" for k, n in kinds.items()), where,
            f"{pool.gpu} x {pool.gpus_per_node}", str(pool.nodes), f"{pool.usd_per_hour:,.4g}",
            f"{pool.held_hours:,.2f}", f"{pool.busy_hours:,.2f}", pool.cost_usd,
            pool.idle_cost_usd,
        ])
    disked = [p for p in plan.pools if p.boot_disk_gb]
    if disked:
        tiers = sorted({p.disk_tier or "no block tier" for p in disked})
        sizes = "/".join(str(g) for g in sorted({p.boot_disk_gb for p in disked}))
        rows.append(["disks", f"{len(disked)} pools", "",
                     f"{sum(p.nodes for p in disked)} x {sizes} GB {', '.join(tiers)}", "", "",
                     "", "", "", plan.disk_cost_usd, ""])
    if plan.storage:
        tiers = sorted({i.tier for i in plan.storage})
        rows.append(["storage", f"{len(plan.storage)} data classes", "", ", ".join(tiers), "",
                     "", "", "", "", plan.storage_cost_usd, ""])
    if plan.network:
        flows = sorted({f"{i.flow} {i.path}" for i in plan.network})
        rows.append(["network", f"{len(plan.network)} flows", "", ", ".join(flows), "", "", "",
                     "", "", plan.network_cost_usd, ""])
    for c in getattr(plan, "cpu_pools", None) or []:
        rows.append([f"cpu:{c.name}", POOL_ROLE.get(c.name, ""), c.capacity_type,
                     c.instance_type, f"CPU {c.vcpus_per_node:g} vCPU", str(c.nodes),
                     f"{c.usd_per_hour:,.4g}", f"{c.node_hours / c.nodes:,.2f}", "", c.cost_usd,
                     ""])
    if getattr(plan, "other_costs", None):
        names = ", ".join(f"{i.name} ${i.cost_usd}" for i in plan.other_costs)
        rows.append(["other", f"{len(plan.other_costs)} lines", "", names, "", "", "", "", "",
                     plan.other_cost_usd, ""])
    where = f"{plan.provider} {plan.region}" + (f" ({plan.zone})" if plan.zone else "")
    rows.append(["total", "", "", where, "",
                 str(sum(p.nodes for p in plan.pools)), "", f"{plan.makespan_hours:,.2f}", "",
                 plan.total_cost_usd, plan.idle_cost_usd])
    return header, rows


POOL_ROLE = {"sandbox": "agent sandboxes", "reward": "reward (CPU)",
             "prep": "data preparation"}
"""What each CPU pool serves (plan table)."""


def _other_term(plan: Any) -> str:
    """`` + other $X`` for a plan with the spec's other costs (schema 6), `` + CPU $Y`` with CPU
    pools (schema 7), else nothing."""
    other = getattr(plan, "other_cost_usd", None)
    cpu = getattr(plan, "cpu_cost_usd", None)
    return (f" + other ${other}" if other is not None else "") \
        + (f" + CPU ${cpu}" if cpu is not None else "")


def _plan_footer(plan: Any, explain: bool) -> list[str]:
    lines = [
        f"status {plan.status} ({plan.solver.name}, gap {plan.solver.gap:g}, "
        f"{plan.solver.seconds:g} s); objective {plan.objective}; pipeline "
        f"{plan.pipeline_mode} ({plan.layout})"
        + (f"; framework {plan.framework}" if getattr(plan, "framework", None) else ""),
        f"makespan {plan.makespan_hours:,.2f} h (deadline "
        f"{'-' if plan.deadline_hours is None else f'{plan.deadline_hours:g} h'}); total "
        f"${plan.total_cost_usd} = compute ${plan.compute_cost_usd} (of which idle "
        f"${plan.idle_cost_usd}) + disks ${plan.disk_cost_usd} + storage "
        f"${plan.storage_cost_usd} + network ${plan.network_cost_usd}"
        f"{_other_term(plan)}; budget "
        f"{'-' if plan.budget_usd is None else '$' + plan.budget_usd}",
        "disks: " + ("; ".join(
            f"{p.name} {p.nodes} x {p.boot_disk_gb} GB on {p.disk_tier or 'no block tier'} "
            f"(${p.disk_usd_per_gb_month:g}/GB-month, ${p.disk_usd_per_hour:.4f}/h x "
            f"{p.held_hours:,.2f} h = ${p.disk_cost_usd})" for p in plan.pools
            if p.boot_disk_gb) or "not priced (plan schema < 4)"),
        "storage: " + ("; ".join(
            f"{i.data_class} {i.gb:,.1f} GB on {i.tier} ({i.gb_months:,.1f} GB-months billed"
            + (f" + retrieval {i.retrieval_gb:,.1f} GB x ${i.retrieval_usd_per_gb:g}/GB = "
               f"${i.retrieval_gb * i.retrieval_usd_per_gb:,.2f}" if i.retrieval_gb else "")
            + f"; ${i.cost_usd})" for i in plan.storage) or "not priced (no tiers in the catalog)"),
        "network: " + ("; ".join(
            f"{i.flow} {i.src.region}{'/' + i.src.zone if i.src.zone else ''} -> "
            f"{i.dst.region}{'/' + i.dst.zone if i.dst.zone else ''} {i.path}"
            f"{f' ({i.nodes} nodes)' if i.nodes else ''} {i.gb:,.1f} GB x ${i.usd_per_gb:g}/GB = "
            f"${i.cost_usd}" for i in plan.network) or "no flows"),
        f"catalog {plan.catalog['name']} as of {plan.catalog_as_of}; "
        f"{plan.solver.offers_considered} offers, {plan.solver.options_considered} pool options "
        "evaluated, "
        f"{plan.solver.options_pruned} pruned as dominated, {plan.solver.milp_options} in the "
        f"MILP; cross-check {plan.solver.cross_check}",
    ]
    lines[2:2] = plan_lines(plan, explain)
    lines += [f"warning: {w}" for w in plan.warnings]
    if explain:
        price = getattr(plan, "framework_price", None)
        if price is not None:
            lines += ["framework:", f"  {price.statement}"]
        lines += ["why:"] + [f"  {s}" for s in plan.explain.summary]
        lines += ["binding:"] + [f"  {s}" for s in plan.explain.binding]
        lines += ["marginal:"] + [f"  {s}" for s in plan.explain.marginal]
        lines += ["alternatives (best plan per pipeline layout):"]
        for a in plan.explain.alternatives:
            if a.total_cost_usd is None:
                lines.append(f"  {a.layout}: infeasible")
            else:
                lines.append(f"  {a.layout}: ${a.total_cost_usd} over {a.makespan_hours:,.2f} h "
                             f"in {a.provider} {a.region}")
    lines.append("defaults applied: " + "; ".join(plan.defaults_applied))
    return lines


def plan_table(plan: Any, explain: bool = False) -> str:
    return _table(f"ptplan plan: {plan.spec_name} ({plan.method})", *plan_rows(plan),
                  _plan_footer(plan, explain))


def plan_markdown(plan: Any, explain: bool = False) -> str:
    header, rows = plan_rows(plan)
    return (f"# ptplan plan: {plan.spec_name}\n\n" + md_table(header, rows) + "\n"
            + "\n".join(f"- {line}" for line in _plan_footer(plan, explain)) + "\n")


def pareto_rows(report: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    header = ["makespan h", "cost $", "$ per hour saved", "pipeline", "where", "pools"]
    rows = []
    for p in report["points"]:
        saved = p.get("usd_per_hour_saved")
        u = p.get("uncertainty")  # pareto schema 3: the point's 80 % interval
        rows.append([f"{p['makespan_hours']:,.2f}" + (f" ({hours_range(u)})" if u else ""),
                     p["total_cost_usd"] + (f" ({usd_range(u)})" if u else ""), saved or "-",
                     p["layout"], f"{p['provider']} {p['region']}"
                     + (f" ({p['zone']})" if p.get("zone") else ""), "; ".join(p["pools"])])
    return header, rows


def _pareto_footer(report: dict[str, Any]) -> list[str]:
    ranged = ["(80 %: ...) is the point's plan's 80 % interval (the demand model's, from its "
              "leave-one-out errors on published runs: plan --format json, uncertainty.basis)"]
    return [report["note"], *(ranged if any("uncertainty" in p for p in report["points"])
                              else []), *(f"warning: {w}" for w in report["warnings"]),
            "defaults applied: " + "; ".join(report["defaults_applied"])]


def pareto_table(report: dict[str, Any]) -> str:
    return _table(f"ptplan pareto: {report['spec_name']} (cost vs deadline)",
                  *pareto_rows(report), _pareto_footer(report))


def pareto_markdown(report: dict[str, Any]) -> str:
    header, rows = pareto_rows(report)
    return (f"# ptplan pareto: {report['spec_name']}\n\n" + md_table(header, rows) + "\n"
            + "\n".join(f"- {line}" for line in _pareto_footer(report)) + "\n")
