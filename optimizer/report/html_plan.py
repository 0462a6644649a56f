"""HTML report pages of a plan and of a cost-vs-deadline frontier (:mod:`ptplan.report.html`).

Every figure shown is one the plan JSON holds, formatted as the terminal table formats it
(:mod:`ptplan.report.tables`): dollars as the JSON's two-decimal strings, hours with two
decimals. A chart is built from the same rows as the table beside it.
"""

from __future__ import annotations

from typing import Any

from ptplan.planfile.schema import Plan
from ptplan.report.html import Chart, Doc, Section, Table
from ptplan.report.intervals import with_hours, with_usd
from ptplan.report.tables import pareto_rows, plan_rows

HOURS_PER_DAY = 24.0
HOURS_PER_MONTH = 730.0
"""As :mod:`ptplan.costs.storage` bills (GB-months of 730 h)."""


def h2(x: float | None) -> str:
    """Hours as the terminal shows them (``16.52``; ``-`` for none)."""
    return "-" if x is None else f"{x:,.2f}"


def usd(x: str | None) -> str:
    """A money string of the JSON, as the terminal's footers print it."""
    return "-" if x is None else f"${x}"


def vl(title: str, values: list[dict[str, Any]], body: dict[str, Any],
       width: int = 520, height: int | dict[str, int] | None = None) -> dict[str, Any]:
    """A Vega-Lite spec with inline data (no URL: nothing is fetched)."""
    spec: dict[str, Any] = {"title": {"text": title, "anchor": "start", "fontSize": 13},
                            "width": width, "data": {"values": values}}
    if height is not None:
        spec["height"] = height
    spec.update(body)
    spec.setdefault("config", {"view": {"stroke": None}, "axis": {"labelLimit": 260}})
    return spec


PALETTE = {"spot": "#54a24b", "on_demand": "#4c78a8", "reserved": "#b279a2",
           "compute": "#4c78a8", "disks": "#9d755d", "storage": "#f58518",
           "network": "#72b7b2"}
"""One colour per capacity type and cost part in every chart (spot green, on-demand blue)."""


def colours(present: list[str]) -> dict[str, Any]:
    """A colour scale giving each of ``present`` (in order) its :data:`PALETTE` colour."""
    domain = list(dict.fromkeys(present))
    return {"domain": domain, "range": [PALETTE.get(k, "#bab0ac") for k in domain]}


def tip(field: str, title: str, kind: str = "nominal", fmt: str | None = None) -> dict[str, Any]:
    t: dict[str, Any] = {"field": field, "type": kind, "title": title}
    if fmt:
        t["format"] = fmt
    return t


# --------------------------------------------------------------------------- plan


def _cost_chart(p: dict[str, Any]) -> Chart:
    """Cost by pool and capacity type, plus disks, storage and network: the total's parts."""
    rows: list[dict[str, Any]] = []
    for pool in p["pools"]:
        by: dict[str, float] = {}
        for a in pool["allocations"]:
            by[a["capacity_type"]] = by.get(a["capacity_type"], 0.0) + float(a["cost_usd"])
        rows += [{"item": f"pool {pool['name']}", "part": k, "usd": round(v, 2)}
                 for k, v in by.items()]
    rows += [{"item": name, "part": name, "usd": float(p[key])}
             for name, key in (("disks", "disk_cost_usd"), ("storage", "storage_cost_usd"),
                               ("network", "network_cost_usd"))]
    spec = vl(f"Cost by pool and capacity type (total ${p['total_cost_usd']})", rows, {
        "mark": {"type": "bar", "tooltip": True},
        "encoding": {
            "y": {"field": "item", "type": "nominal", "sort": None, "title": None},
            "x": {"field": "usd", "type": "quantitative", "title": "USD",
                  "axis": {"format": ",.2f"}},
            "color": {"field": "part", "type": "nominal", "title": "capacity / item",
                      "scale": colours([r["part"] for r in rows])},
            "tooltip": [tip("item", "item"), tip("part", "part"),
                        tip("usd", "USD", "quantitative", ",.2f")]}})
    table = Table("cost by pool and capacity type", ["item", "capacity / item", "cost $"],
                  [[r["item"], r["part"], f"{r['usd']:.2f}"] for r in rows]
                  + [["total", "", p["total_cost_usd"]]], numeric=(2,))
    return Chart("cost by pool and capacity type", spec, table)


def _budget_chart(p: dict[str, Any]) -> Chart | None:
    """Total cost against the budget and its warn/stop thresholds."""
    if p["budget_usd"] is None:
        return None
    marks = [("total cost", p["total_cost_usd"]), ("budget warn", p["budget_warn_usd"]),
             ("budget stop", p["budget_stop_usd"]), ("budget", p["budget_usd"])]
    rows = [{"what": k, "usd": float(v)} for k, v in marks if v is not None]
    spec = vl("Total cost against the budget thresholds", rows, {
        "height": 70,
        "layer": [
            {"transform": [{"filter": "datum.what === 'total cost'"}],
             "mark": {"type": "bar", "tooltip": True, "color": "#4c78a8"},
             "encoding": {"x": {"field": "usd", "type": "quantitative", "title": "USD",
                                "axis": {"format": ",.0f"}},
                          "tooltip": [tip("what", "what"),
                                      tip("usd", "USD", "quantitative", ",.2f")]}},
            {"transform": [{"filter": "datum.what !== 'total cost'"}],
             "mark": {"type": "rule", "strokeWidth": 2, "tooltip": True},
             "encoding": {"x": {"field": "usd", "type": "quantitative"},
                          "color": {"field": "what", "type": "nominal", "title": "threshold",
                                    "scale": {"range": ["#e45756", "#f58518", "#b279a2"]}},
                          "tooltip": [tip("what", "what"),
                                      tip("usd", "USD", "quantitative", ",.2f")]}}]})
    table = Table("budget", ["what", "$"], [[k, v] for k, v in marks if v is not None],
                  numeric=(1,))
    return Chart("total cost against the budget thresholds", spec, table)


def _timeline_chart(p: dict[str, Any]) -> Chart:
    """Each pool's held hours (the whole run: billed) against its busy hours per phase."""
    held = [{"pool": pool["name"], "hours": pool["held_hours"], "what": "held"}
            for pool in p["pools"]]
    busy = [{"pool": ph["pool"], "hours": ph["busy_hours"], "what": ph["name"]}
            for ph in p["phases"]]
    layers: list[dict[str, Any]] = [
        {"transform": [{"filter": "datum.what === 'held'"}],
         "mark": {"type": "bar", "color": "#d0d7de", "height": {"band": 0.9},
                  "tooltip": True},
         "encoding": {"y": {"field": "pool", "type": "nominal", "sort": None, "title": None},
                      "x": {"field": "hours", "type": "quantitative",
                            "title": "hours from the start (held: whole bar; busy: by phase)"},
                      "tooltip": [tip("pool", "pool"), tip("what", "what"),
                                  tip("hours", "hours", "quantitative", ",.2f")]}},
        {"transform": [{"filter": "datum.what !== 'held'"}],
         "mark": {"type": "bar", "height": {"band": 0.5}, "tooltip": True},
         "encoding": {"y": {"field": "pool", "type": "nominal", "sort": None},
                      "x": {"field": "hours", "type": "quantitative", "stack": "zero"},
                      "color": {"field": "what", "type": "nominal", "title": "busy: phase"},
                      "tooltip": [tip("pool", "pool"), tip("what", "phase"),
                                  tip("hours", "busy hours", "quantitative", ",.2f")]}}]
    values = held + busy
    if p["deadline_hours"] is not None:
        values.append({"pool": None, "hours": p["deadline_hours"], "what": "deadline"})
        layers[1]["transform"] = [{"filter": "datum.what !== 'held' && "
                                             "datum.what !== 'deadline'"}]
        layers.append({"transform": [{"filter": "datum.what === 'deadline'"}],
                       "mark": {"type": "rule", "color": "#e45756", "strokeDash": [6, 3],
                                "tooltip": True},
                       "encoding": {"x": {"field": "hours", "type": "quantitative"},
                                    "tooltip": [tip("what", "what"),
                                                tip("hours", "hours", "quantitative", ",.2f")]}})
    spec = vl(f"Pools held vs busy per phase (makespan {h2(p['makespan_hours'])} h, deadline "
              f"{h2(p['deadline_hours'])} h)", values, {"layer": layers},
              height={"step": 44})
    rows = []
    for pool in p["pools"]:
        rows.append([pool["name"], "held (billed)", h2(pool["held_hours"])])
        rows += [[pool["name"], f"busy: {ph['name']}", h2(ph["busy_hours"])]
                 for ph in p["phases"] if ph["pool"] == pool["name"]]
        rows.append([pool["name"], "idle", h2(pool["idle_hours"])])
    rows.append(["run", "makespan", h2(p["makespan_hours"])])
    if p["deadline_hours"] is not None:
        rows.append(["run", "deadline", h2(p["deadline_hours"])])
    return Chart("pools held vs busy per phase", spec,
                 Table("held and busy hours", ["pool", "what", "hours"], rows, numeric=(2,)))


def _phase_table(p: dict[str, Any]) -> Table:
    rows = [[ph["name"], ph["pool"], ph["precision"] or "-", f"{ph['tokens']:.3g}",
             h2(ph["busy_hours"]), h2(ph["latency_floor_hours"]), h2(ph["gpu_hours"]),
             ph["cost_usd"], ", ".join(ph["models"]) or "-",
             "yes" if ph["calibrated"] else ""] for ph in p["phases"]]
    return Table("per phase", ["phase", "pool", "precision", "tokens", "busy h",
                               "latency floor h", "GPU-h", "cost $", "models", "calibrated"],
                 rows, numeric=(3, 4, 5, 6, 7))


def _storage_chart(p: dict[str, Any]) -> Chart | None:
    """Each data class's billed lifetime (GB-months ÷ GB, in days) on its tier."""
    if not p["storage"]:
        return None
    rows = [{"data_class": i["data_class"], "tier": i["tier"],
             "days": round(i["gb_months"] / i["gb"] * HOURS_PER_MONTH / HOURS_PER_DAY, 2)
             if i["gb"] else 0.0, "gb": i["gb"], "usd": float(i["cost_usd"])}
            for i in p["storage"]]
    spec = vl("Storage lifecycle: days each GB is billed, by data class and tier", rows, {
        "mark": {"type": "bar", "tooltip": True},
        "encoding": {
            "y": {"field": "data_class", "type": "nominal", "sort": None, "title": None},
            "x": {"field": "days", "type": "quantitative", "scale": {"type": "symlog"},
                  "title": "days billed per GB (GB-months / GB; symlog scale)"},
            "color": {"field": "tier", "type": "nominal", "title": "tier"},
            "tooltip": [tip("data_class", "data class"), tip("tier", "tier"),
                        tip("days", "days", "quantitative", ",.1f"),
                        tip("gb", "GB", "quantitative", ",.1f"),
                        tip("usd", "USD", "quantitative", ",.2f")]}})
    life = p["lifecycle"]
    table = Table(
        "storage by data class (lifecycle: every "
        f"{life['every_steps']} steps a checkpoint, {life['keep_hot']} kept hot, every "
        f"{life['archive_every']}th archived, retained {life['retention_days']} days, rollout "
        f"logs {life['rollout_log_days']} days, archives {life['metrics_days']} days)",
        ["data class", "tier", "access", "GB", "GB-months", "days billed", "min days",
         "retrieval GB", "cost $"],
        [[i["data_class"], i["tier"], i["access"], f"{i['gb']:,.1f}", f"{i['gb_months']:,.1f}",
          f"{r['days']:,.1f}", f"{i['min_days']:g}", f"{i['retrieval_gb']:,.1f}", i["cost_usd"]]
         for i, r in zip(p["storage"], rows, strict=True)], numeric=(3, 4, 5, 6, 7, 8))
    return Chart("storage lifecycle", spec, table)


def _where(end: dict[str, Any]) -> str:
    return f"{end['provider']} {end['region']}" + (f"/{end['zone']}" if end.get("zone") else "")


def _network_chart(p: dict[str, Any]) -> Chart | None:
    if not p["network"]:
        return None
    rows = [{"flow": f"{i['flow']} {_where(i['src'])} -> {_where(i['dst'])}", "path": i["path"],
             "gb": i["gb"], "usd": float(i["cost_usd"])} for i in p["network"]]
    spec = vl(f"Network flows (total ${p['network_cost_usd']})", rows, {
        "mark": {"type": "bar", "tooltip": True},
        "encoding": {"y": {"field": "flow", "type": "nominal", "sort": None, "title": None},
                     "x": {"field": "gb", "type": "quantitative", "title": "GB moved",
                           "axis": {"format": ",.0f"}},
                     "color": {"field": "path", "type": "nominal", "title": "path"},
                     "tooltip": [tip("flow", "flow"), tip("path", "path"),
                                 tip("gb", "GB", "quantitative", ",.1f"),
                                 tip("usd", "USD", "quantitative", ",.2f")]}})
    table = Table("network flows", ["flow", "from", "to", "path", "nodes", "GB", "$/GB", "cost $",
                                    "note"],
                  [[i["flow"], _where(i["src"]), _where(i["dst"]), i["path"],
                    str(i["nodes"] or ""), f"{i['gb']:,.1f}", f"{i['usd_per_gb']:g}",
                    i["cost_usd"], i.get("note") or ""] for i in p["network"]],
                  numeric=(4, 5, 6, 7))
    return Chart("network flows", spec, table)


def _headline(p: dict[str, Any]) -> list[tuple[str, str, str]]:
    deadline = p["deadline_hours"]
    span = f"{h2(p['makespan_hours'])} h"
    if deadline is not None:
        span += f" of {deadline:g} h deadline ({100 * p['makespan_hours'] / deadline:.0f} %)"
    budget = "-"
    if p["budget_usd"] is not None:
        budget = (f"${p['budget_usd']} (warn ${p['budget_warn_usd']}, stop "
                  f"${p['budget_stop_usd']}; total is "
                  f"{100 * float(p['total_cost_usd']) / float(p['budget_usd']):.1f} %)")
    cat = p["catalog"]
    u = p.get("uncertainty")  # schema 8: the 80 % interval of the total and the makespan
    span = with_hours(span, u)
    return [("total", with_usd(usd(p["total_cost_usd"]), u), "total_cost_usd"),
            ("compute (of which idle)", f"${p['compute_cost_usd']} (${p['idle_cost_usd']})",
             "compute_cost_usd"),
            ("disks / storage / network", f"${p['disk_cost_usd']} / ${p['storage_cost_usd']} / "
             f"${p['network_cost_usd']}", "other_cost_usd"),
            *([("CPU pools", "; ".join(f"{c['name']} {c['nodes']} x {c['instance_type']} "
                                       f"{c['capacity_type']} ${c['cost_usd']}"
                                       for c in p["cpu_pools"]) + f" = ${p['cpu_cost_usd']}",
                "cpu_cost_usd")] if p.get("cpu_pools") else []),
            ("makespan", span, "makespan_hours"),
            ("budget", budget, "budget_usd"),
            ("pipeline", f"{p['pipeline_mode']} ({p['layout']})", "layout"),
            ("where", f"{p['provider']} {p['region']}" + (f" ({p['zone']})" if p["zone"] else ""),
             "site"),
            ("catalog", f"{cat['name']} as of {p['catalog_as_of']} ({cat['age_days']} days old, "
             f"{cat['offers']} offers)", "catalog"),
            ("status", f"{p['status']} ({p['solver']['name']}, gap {p['solver']['gap']:g}; "
             f"cross-check {p['solver']['cross_check']})", "status")]


def _assumptions(p: dict[str, Any]) -> list[str]:
    sm = p["spot_model"]
    lines = [f"spot model: {sm['lost_work_minutes']:g} min of work lost and "
             f"{sm['restart_minutes']:g} min restart per interruption, checkpoint "
             f"{sm['checkpoint_minutes']:g} min",
             f"policy {p['policy']['name']}; max nodes per pool {p['max_nodes_per_pool']}; "
             f"weight sync {p['weight_sync_gb_per_node_step']:g} GB per rollout node and step",
             *(f"catalog: {n}" for n in p["catalog"]["notes"])]
    notes = sorted({f"{a['instance_type']} {a['capacity_type']}: {a['note']}"
                    for pool in p["pools"] for a in pool["allocations"] if a.get("note")})
    return lines + [f"offer: {n}" for n in notes]


def _explain(p: dict[str, Any]) -> Section:
    ex = p["explain"]
    price = p.get("framework_price")  # schema 9, with --explain or --format html
    lines = ([f"framework: {price['statement']}"] if price else []) + (
        [f"why: {s}" for s in ex["summary"]] + [f"binding: {s}" for s in ex["binding"]]
             + [f"marginal: {s}" for s in ex["marginal"]]
             + ([f"uncertainty: {p['uncertainty']['basis']}"] if p.get("uncertainty")
                else []))
    alt = Table("best plan per pipeline layout",
                ["layout", "status", "total $", "makespan h", "where"],
                [[a["layout"], a["status"], a["total_cost_usd"] or "infeasible",
                  h2(a["makespan_hours"]),
                  "-" if a["provider"] is None else f"{a['provider']} {a['region']}"]
                 for a in ex["alternatives"]], numeric=(2, 3))
    return Section("Explain", tables=[alt] if ex["alternatives"] else [],
                   lines=lines or ["no explanation recorded in this plan"])


def plan_doc(plan: dict[str, Any]) -> Doc:
    """The report of one plan (the JSON of ``ptplan plan --format json``)."""
    p = plan
    header, rows = plan_rows(Plan.model_validate(p))
    pools = Table("pools (as the terminal table)", header, rows, numeric=(5, 6, 7, 8, 9, 10))
    charts = [c for c in (_cost_chart(p), _budget_chart(p)) if c is not None]
    sections = [Section("Cost", charts=charts, tables=[pools]),
                Section("Pool timeline", charts=[_timeline_chart(p)]),
                Section("Phases", tables=[_phase_table(p)])]
    st = _storage_chart(p)
    sections.append(Section("Storage lifecycle", charts=[st] if st else [],
                            lines=[] if st else ["not priced (no tiers in the catalog)"]))
    nw = _network_chart(p)
    sections.append(Section("Network", charts=[nw] if nw else [],
                            lines=[] if nw else ["no flows"]))
    sections += [
        Section("Warnings and assumptions",
                lines=[f"warning: {w}" for w in p["warnings"]] + _assumptions(p)),
        Section("Defaults applied", lines=p["defaults_applied"] or ["none"]),
        _explain(p)]
    return Doc("plan", f"ptplan plan: {p['spec_name']} ({p['method']})", _headline(p), sections,
               subtitle=f"objective {p['objective']}; spec {p['spec_digest']}")


# --------------------------------------------------------------------------- pareto


def pareto_doc(report: dict[str, Any], chosen: dict[str, Any] | None = None) -> Doc:
    """The frontier (``ptplan pareto --format json``), with ``chosen`` (a plan of the same
    spec: the one ``ptplan plan`` makes) marked on the curve."""
    values: list[dict[str, Any]] = [
        {"hours": pt["makespan_hours"], "usd": float(pt["total_cost_usd"]),
         "what": "frontier", "layout": pt["layout"],
         "where": f"{pt['provider']} {pt['region']}"} for pt in report["points"]]
    layers: list[dict[str, Any]] = [
        {"transform": [{"filter": "datum.what === 'frontier'"}],
         "mark": {"type": "line", "point": True, "interpolate": "step-after", "tooltip": True},
         "encoding": {"x": {"field": "hours", "type": "quantitative", "title": "makespan (h)",
                            "scale": {"type": "log"}},
                      "y": {"field": "usd", "type": "quantitative", "title": "total cost (USD)",
                            "axis": {"format": ",.0f"}},
                      "tooltip": [tip("hours", "makespan h", "quantitative", ",.2f"),
                                  tip("usd", "USD", "quantitative", ",.2f"),
                                  tip("layout", "layout"), tip("where", "where")]}}]
    lines = [report["note"]]
    if chosen is not None:
        values.append({"hours": chosen["makespan_hours"], "usd": float(chosen["total_cost_usd"]),
                       "what": "chosen plan", "layout": chosen["layout"],
                       "where": f"{chosen['provider']} {chosen['region']}"})
        layers.append({"transform": [{"filter": "datum.what === 'chosen plan'"}],
                       "mark": {"type": "point", "shape": "diamond", "size": 220,
                                "filled": True, "color": "#e45756", "tooltip": True},
                       "encoding": {"x": {"field": "hours", "type": "quantitative"},
                                    "y": {"field": "usd", "type": "quantitative"},
                                    "tooltip": [tip("what", "what"),
                                                tip("hours", "makespan h", "quantitative",
                                                    ",.2f"),
                                                tip("usd", "USD", "quantitative", ",.2f")]}})
        lines.append(f"chosen plan (red diamond): ${chosen['total_cost_usd']} over "
                     f"{h2(chosen['makespan_hours'])} h, {chosen['layout']} in "
                     f"{chosen['provider']} {chosen['region']} (deadline "
                     f"{h2(chosen['deadline_hours'])} h)")
    else:
        lines.append("no plan of this spec given: the chosen plan is not marked")
    spec = vl(f"Cost vs makespan: {report['spec_name']}", values, {"layer": layers}, height=320)
    header, rows = pareto_rows(report)
    table = Table("frontier (as the terminal table)", header, rows, numeric=(0, 1, 2))
    chart = Chart("cost vs deadline frontier", spec, table)
    head = [("cheapest", usd(report["cheapest_usd"]), "cheapest_usd"),
            ("fastest", f"{h2(report['fastest_hours'])} h", "fastest_hours"),
            ("points", str(len(report["points"])), "points"),
            ("budget", usd(report["budget_usd"]), "budget_usd"),
            ("catalog", f"{report['catalog']} as of {report['catalog_as_of']}", "catalog")]
    if chosen is not None:
        head.insert(0, ("chosen plan", f"${chosen['total_cost_usd']} over "
                        f"{h2(chosen['makespan_hours'])} h", "chosen_total_cost_usd"))
    sections = [Section("Cost vs deadline", charts=[chart], lines=lines),
                Section("Warnings", lines=[f"warning: {w}" for w in report["warnings"]]
                        or ["none"]),
                Section("Defaults applied", lines=report["defaults_applied"] or ["none"])]
    return Doc("pareto", f"ptplan pareto: {report['spec_name']} (cost vs deadline)", head,
               sections)
