"""``ptplan whatif``: price scenarios, sweeps and break-even prices, rendered as tables,
markdown, JSON and charts. One function per mode (:mod:`optimizer.whatif.scenarios`,
:mod:`optimizer.whatif.sweep`, :mod:`optimizer.whatif.breakeven`); the rule language in
:mod:`optimizer.whatif.pricerules`. This module parses options, calls them and formats the
results (every figure shown is one the JSON holds)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from optimizer.cli.common import Format, Objective, _emit_as, _run, app, dumps
from optimizer.core.errors import InputError
from optimizer.core.kinds import Solver

# --------------------------------------------------------------------------- rendering


def _h(x: float | None) -> str:
    return "-" if x is None else f"{x:,.2f}"


def _signed(x: str | None) -> str:
    if x is None:
        return "-"
    return x if x.startswith("-") else "+" + x


def _where(plan: dict[str, Any] | None) -> str:
    return "-" if plan is None else f"{plan['provider']} {plan['region']}"


def _pools(summary_or_plan: dict[str, Any] | None) -> str:
    if summary_or_plan is None:
        return "-"
    if "pools" in summary_or_plan and summary_or_plan["pools"] and \
            isinstance(summary_or_plan["pools"][0], str):
        return "; ".join(summary_or_plan["pools"])
    from optimizer.plan.schema import Plan
    from optimizer.whatif.analysis import pool_label

    p = Plan.model_validate(summary_or_plan)
    return "; ".join(pool_label(pool) for pool in p.pools)


def whatif_rows(report: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    header = ["scenario", "rules", "total $", "delta $", "delta %", "makespan h", "delta h",
              "layout", "where", "pools"]
    base = report["baseline"]
    rows = [["baseline", "(catalog prices)", base["total_cost_usd"] if base else "infeasible",
             "", "", _h(base["makespan_hours"]) if base else "-", "",
             base["layout"] if base else "-", _where(base), _pools(base)]]
    for s in report["scenarios"]:
        p, ch = s["plan"], s["changes"]
        rows.append([
            s["name"], "; ".join(s["rules"]), p["total_cost_usd"] if p else "infeasible",
            _signed(s["delta_usd"]),
            "-" if not ch or ch["total"]["delta_percent"] is None
            else f"{ch['total']['delta_percent']:+.2f}",
            _h(p["makespan_hours"]) if p else "-",
            f"{ch['makespan_hours']['delta']:+,.2f}" if ch else "-",
            p["layout"] if p else "-", _where(p), _pools(p)])
    return header, rows


def change_rows(changes: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    header = ["item", "baseline", "scenario", "baseline $", "scenario $", "delta $"]
    rows: list[list[str]] = []
    for r in changes["pools"]:
        rows.append([f"pool {r['pool']}", r["baseline"] or "-", r["scenario"] or "-",
                     r["baseline_cost_usd"] or "-", r["scenario_cost_usd"] or "-",
                     _signed(r["delta_usd"])])
    for r in changes["phases"]:
        def ph(pool: str | None, prec: str | None, busy: float | None) -> str:
            return "-" if pool is None else f"{pool}, {prec or '-'}, {_h(busy)} h busy"

        rows.append([f"phase {r['phase']}",
                     ph(r["baseline_pool"], r["baseline_precision"], r["baseline_busy_hours"]),
                     ph(r["scenario_pool"], r["scenario_precision"], r["scenario_busy_hours"]),
                     r["baseline_cost_usd"] or "-", r["scenario_cost_usd"] or "-",
                     _signed(r["delta_usd"])])
    for r in changes["storage"]:
        if r["baseline_tier"] != r["scenario_tier"] or r["delta_usd"] != "0.00":
            rows.append([f"storage {r['data_class']}", r["baseline_tier"] or "-",
                         r["scenario_tier"] or "-", "", "", _signed(r["delta_usd"])])
    return header, rows


def _whatif_footer(report: dict[str, Any]) -> list[str]:
    lines = []
    if report["baseline_error"]:
        lines.append(f"baseline: no feasible plan: {report['baseline_error']}")
    for s in report["scenarios"]:
        for e in s["effects"]:
            lines.append(f"{s['name']}: {e['rule']}: {e['matched']} {e['kind']} price(s) "
                         f"{_range(e['price_before'])} -> {_range(e['price_after'])} {e['unit']}")
        if s["error"]:
            lines.append(f"{s['name']}: no feasible plan: {s['error']}")
        lines += [f"{s['name']}: note: {n}" for n in s["notes"]]
    lines.append(f"catalog {report['catalog']} as of {report['catalog_as_of']}; policy "
                 f"{report['policy']}; objective {report['objective']}; {report['method']}")
    return lines


def _range(pair: list[float]) -> str:
    lo, hi = pair
    return f"{lo:.6g}" if lo == hi else f"{lo:.6g}..{hi:.6g}"


def whatif_table(report: dict[str, Any]) -> str:
    from optimizer.report.tables import _table, text_table

    out = _table(f"ptplan whatif: {report['spec_name']}", *whatif_rows(report),
                 _whatif_footer(report))
    for s in report["scenarios"]:
        if s["changes"] is None:
            continue
        out += "\n" + text_table(*change_rows(s["changes"]), f"changes: {s['name']} vs baseline")
        out += "".join(f"  {line}\n" for line in s["changes"]["statements"])
    return out


def whatif_markdown(report: dict[str, Any]) -> str:
    from optimizer.report.tables import md_table

    out = f"# ptplan whatif: {report['spec_name']}\n\n" + md_table(*whatif_rows(report))
    out += "\n" + "".join(f"- {line}\n" for line in _whatif_footer(report))
    for s in report["scenarios"]:
        if s["changes"] is None:
            continue
        out += f"\n## {s['name']} vs baseline\n\n" + md_table(*change_rows(s["changes"]))
        out += "\n" + "".join(f"- {line}\n" for line in s["changes"]["statements"])
    return out


def sweep_rows(report: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    header = ["value", "switch", "solved", "total $", "delta $", "makespan h", "layout", "where",
              "pools", f"matched {report['matched_quantity_unit']}"]
    rows = []
    for p in report["points"]:
        s = p["summary"]
        rows.append([f"{p['value']:.6g}", "*" if p["switch"] else "",
                     "yes" if p["solved"] else "",
                     p["total_cost_usd"] or "infeasible", _signed(p["delta_usd"]),
                     _h(p["makespan_hours"]), s["layout"] if s else "-",
                     f"{s['provider']} {s['region']}" if s else "-", _pools(s),
                     "-" if p["matched_quantity"] is None else f"{p['matched_quantity']:,.2f}"])
    return header, rows


def _sweep_footer(report: dict[str, Any]) -> list[str]:
    b = report["baseline"]
    lines = [f"swept: {report['swept']} VALUE ({report['value_unit']}); {report['matched']} "
             "items matched" + (f"; applied first: {'; '.join(report['base_rules'])}"
                                if report["base_rules"] else ""),
             ("baseline: " + (f"${b['total_cost_usd']} over {_h(b['makespan_hours'])} h, "
                              f"{b['summary']['layout']} in {b['summary']['provider']} "
                              f"{b['summary']['region']}" if b["total_cost_usd"]
                              else f"no feasible plan: {b['error']}"))]
    for sw in report["switches"]:
        lo, hi = sw["between"]
        lines.append(f"switch between {lo:.6g} and {hi:.6g}: " + "; ".join(sw["changes"]))
    for p in report["points"]:
        if p["error"]:
            lines.append(f"value {p['value']:.6g}: no feasible plan: {p['error']}")
    lines += [f"note: {n}" for n in report["notes"]]
    return lines


def sweep_table(report: dict[str, Any]) -> str:
    from optimizer.report.tables import _table

    return _table(f"ptplan whatif sweep: {report['spec_name']} ({report['swept']} VALUE)",
                  *sweep_rows(report), _sweep_footer(report))


def _markdown(title: str, rows: tuple[list[str], list[list[str]]], footer: list[str]) -> str:
    from optimizer.report.tables import md_table

    return f"# {title}\n\n" + md_table(*rows) + "\n" + "".join(f"- {line}\n" for line in footer)


def sweep_markdown(report: dict[str, Any]) -> str:
    return _markdown(f"ptplan whatif sweep: {report['spec_name']}", sweep_rows(report),
                     _sweep_footer(report))


def _prices(d: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.6g}" for k, v in sorted(d.items())) or "none used"


def break_even_rows(report: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    header = ["direction", "multiplier bracket", "crossing", "matched prices (same plan)",
              "matched prices (changed plan)", "changed plan"]
    rows = []
    for s in report["sides"]:
        if not s["found"]:
            rows.append([s["direction"], "-", "-", "-", "-", s["note"]])
            continue
        pc = s["plan_changed"]
        changed = (f"${pc['total_cost_usd']}, {pc['layout']} in {pc['provider']} "
                   f"{pc['region']}: {_pools(pc)}" if pc else
                   f"no feasible plan: {s['error_changed']}")
        cross = s["crossing_multiplier"]
        rows.append([s["direction"],
                     f"[{s['bracket'][0]:.6g}, {s['bracket'][1]:.6g}]",
                     "-" if cross is None else f"{cross:.6g}",
                     _prices(s["prices_same"]), _prices(s["prices_changed"]), changed])
    return header, rows


def _be_footer(report: dict[str, Any]) -> list[str]:
    b = report["baseline"]
    use = b["use"]
    lines = [f"selector {report['selector']} matches {report['matched']} items; prices in "
             f"{report['price_unit']}; tolerance {report['tolerance']:g} on the multiplier; "
             f"{report['solves']} exact re-solves",
             f"baseline: ${b['total_cost_usd']}, {b['summary']['layout']} in "
             f"{b['summary']['provider']} {b['summary']['region']}; matched items used: "
             + (", ".join(f"{x[0]} {x[1]}" + (f" x{x[2]}" if x[2] else "") for x in use["items"])
                or "none")]
    if report["base_rules"]:
        lines.append("applied first: " + "; ".join(report["base_rules"]))
    for s in report["sides"]:
        if s["found"] and s["changes"]:
            lines.append(f"{s['direction']}: from the plan at {s['multiplier_same']:.6g} to the "
                         f"plan at {s['multiplier_changed']:.6g}: "
                         + "; ".join(s["changes"]["statements"]))
    lines.append("method: " + report["method"])
    return lines


def break_even_table(report: dict[str, Any]) -> str:
    from optimizer.report.tables import _table

    return _table(f"ptplan whatif break-even: {report['spec_name']} ({report['selector']})",
                  *break_even_rows(report), _be_footer(report))


def break_even_markdown(report: dict[str, Any]) -> str:
    return _markdown(f"ptplan whatif break-even: {report['spec_name']}",
                     break_even_rows(report), _be_footer(report))


def sweep_chart(report: dict[str, Any], path: Path) -> None:
    """Cost against the swept value, plan switches marked (PNG or SVG by suffix;
    deterministic SVG: fixed hash salt, no date)."""
    from optimizer.report.charts import chart_suffix, pyplot, save

    chart_suffix(path)
    xs = [p["value"] for p in report["points"] if p["total_cost_usd"] is not None]
    ys = [float(p["total_cost_usd"]) for p in report["points"] if p["total_cost_usd"] is not None]
    with pyplot("ptplan-whatif") as plt:
        fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
        ax.plot(xs, ys, marker="o", markersize=3, linewidth=1.5, color="#1f77b4",
                label="total cost")
        for n, sw in enumerate(report["switches"], start=1):
            x = sum(sw["between"]) / 2
            ax.axvline(x, color="#d62728", linestyle="--", linewidth=1,
                       label="plan switch" if n == 1 else None)
            ax.annotate(str(n), (x, 1.0), xycoords=("data", "axes fraction"),
                        textcoords="offset points", xytext=(2, -12), color="#d62728")
        b = report["baseline"]["total_cost_usd"]
        if b is not None:
            ax.axhline(float(b), color="grey", linestyle=":", linewidth=1, label="baseline")
        ax.set_xlabel(f"{report['swept']} VALUE ({report['value_unit']})")
        ax.set_ylabel("total cost (USD)")
        ax.set_title(f"{report['spec_name']}: cost vs {report['swept']}")
        ax.grid(True, alpha=0.3)
        ax.legend(loc="best")
        fig.tight_layout()
        save(plt, fig, path)
    typer.echo(f"wrote {path}", err=True)


# --------------------------------------------------------------------------- modes


def _mode_of(price: list[str] | None, scenario: list[str] | None, sweep_rule: str | None,
             break_even_sel: str | None, start: float | None, stop: float | None,
             chart: Path | None) -> list[str]:
    """The mode the options ask for (``[]``: price scenarios), or a one-line error."""
    modes = [m for m, on in (("--sweep", sweep_rule), ("--break-even", break_even_sel))
             if on is not None]
    if len(modes) > 1:
        raise InputError("--sweep and --break-even: give one of them per call")
    if modes and scenario:
        raise InputError(f"--scenario cannot be combined with {modes[0]}; use --price for "
                         "rules applied before the sweep or search")
    if not modes and not price and not scenario:
        raise InputError("whatif: nothing to compare; give --price RULE, --scenario "
                         "'RULE; RULE', --sweep 'SELECTOR OP' or --break-even SELECTOR")
    if not modes and (start is not None or stop is not None):
        raise InputError("--from/--to: only with --sweep or --break-even")
    if chart is not None and modes != ["--sweep"]:
        raise InputError("--chart: only with --sweep (cost against the swept value)")
    return modes


def _scenarios_mode(setup: Any, runner: Any, base_rules: tuple, texts: list[str], fmt: Format,
                    output: Path | None) -> None:
    """Price scenarios: ``--price`` rules (one scenario) and each ``--scenario``."""
    from optimizer.whatif.scenarios import run_scenarios, scenarios_from

    report = run_scenarios(setup, scenarios_from(base_rules, texts), runner)
    _emit_as(fmt, output, lambda: dumps(report), lambda: whatif_markdown(report),
             lambda: whatif_table(report))


def _sweep_mode(setup: Any, runner: Any, sweep_rule: str, start: float | None,
                stop: float | None, steps: int, every_point: bool, base_rules: tuple,
                fmt: Format, output: Path | None, chart: Path | None) -> None:
    """``--sweep 'SELECTOR OP' --from A --to B --steps N``."""
    from optimizer.whatif.pricerules import parse_partial
    from optimizer.whatif.sweep import linspace, run_sweep

    if start is None or stop is None:
        raise InputError("--sweep needs --from A --to B (and --steps N, default 11)")
    sel, op = parse_partial(sweep_rule)
    report = run_sweep(setup, sel, op, linspace(start, stop, steps), runner, base_rules,
                       every_point)
    if chart is not None:
        sweep_chart(report, chart)
    _emit_as(fmt, output, lambda: dumps(report), lambda: sweep_markdown(report),
             lambda: sweep_table(report))


def _break_even_mode(setup: Any, runner: Any, selector: str, start: float | None,
                     stop: float | None, tolerance: float, base_rules: tuple, fmt: Format,
                     output: Path | None) -> None:
    """``--break-even SELECTOR`` between multipliers ``--from`` (0) and ``--to`` (10)."""
    from optimizer.whatif.breakeven import break_even
    from optimizer.whatif.pricerules import parse_selector

    report = break_even(setup, parse_selector(selector), runner,
                        0.0 if start is None else start, 10.0 if stop is None else stop,
                        tolerance, base_rules)
    _emit_as(fmt, output, lambda: dumps(report), lambda: break_even_markdown(report),
             lambda: break_even_table(report))


# --------------------------------------------------------------------------- command


@app.command()
def whatif(
    spec: Path = typer.Argument(..., help="Project spec YAML."),
    price: list[str] = typer.Option(None, "--price", help="Price rule 'SELECTOR OP VALUE' "
                                    "(repeatable; together one scenario, applied in order; "
                                    "with --sweep/--break-even: applied first)."),
    scenario: list[str] = typer.Option(None, "--scenario", help="'[NAME:] RULE; RULE' "
                                       "(repeatable): one more scenario."),
    sweep_rule: str = typer.Option(None, "--sweep", help="'SELECTOR OP': sweep VALUE from "
                                   "--from to --to in --steps points."),
    start: float = typer.Option(None, "--from", help="Sweep start; break-even: lowest "
                                "multiplier searched (default 0)."),
    stop: float = typer.Option(None, "--to", help="Sweep end; break-even: highest multiplier "
                               "searched (default 10)."),
    steps: int = typer.Option(11, "--steps", help="Sweep points, ends included."),
    every_point: bool = typer.Option(False, "--every-point", help="Sweep: re-solve every "
                                     "point (default: solve until each gap's two ends have "
                                     "the same optimal plan, which is then optimal inside)."),
    break_even_sel: str = typer.Option(None, "--break-even", help="'SELECTOR': the price "
                                       "multipliers where the plan's use of the matched "
                                       "offers (or storage tiers) changes."),
    tolerance: float = typer.Option(1e-3, "--tolerance", help="Break-even: bracket width on "
                                    "the multiplier."),
    catalog: str = typer.Option("embedded", "--catalog", help="embedded or a catalog YAML path."),
    policy: Path = typer.Option(None, "--policy", help="Policy YAML (default: "
                                "policies/default.yaml)."),
    objective: Objective = typer.Option(Objective.cost, "--objective"),
    solver: Solver = typer.Option(Solver.highs, "--solver", help="MILP solver."),
    workers: int = typer.Option(None, "--workers", help="Local worker processes (default "
                                "min(2, CPUs); 1 solves in this process)."),
    ray_address: str = typer.Option(None, "--ray", help="Run on a Ray cluster at ADDRESS "
                                    "(auto, ray://host:10001, or local); needs the ray extra."),
    fmt: Format = typer.Option(Format.table, "--format"),
    output: Path = typer.Option(None, "-o", "--output", help="Write to FILE instead of stdout."),
    chart: Path = typer.Option(None, "--chart", help="With --sweep: cost vs value chart "
                               "(.png or .svg)."),
    timings: bool = typer.Option(True, "--timings/--no-timings",
                                 help="--no-timings zeroes solver.seconds for byte-identical "
                                 "output."),
) -> None:
    """What-if prices: baseline vs scenarios, sweeps of one price, break-even prices.

    RULE is 'SELECTOR OP VALUE': SELECTOR is * or comma-separated KEY=GLOB, KEY one of
    provider, region, zone, instance_type, gpu, capacity_type (offers; $/node-hour),
    storage.provider, storage.region, storage.tier, storage.access ($/GB-month) or
    egress.provider, egress.path ($/GB); OP is *= (scale), += (add) or = (set).
    Example: --price "capacity_type=spot *= 1.4" --price "provider=gcp,gpu=H100 = 9.5".
    """

    def go() -> None:
        from optimizer.spec.project import load_spec
        from optimizer.whatif.pricerules import parse_rule
        from optimizer.whatif.runner import Runner, Setup
        from policies.model import load_policy
        from providers.registry import load_catalog

        modes = _mode_of(price, scenario, sweep_rule, break_even_sel, start, stop, chart)
        base_rules = tuple(parse_rule(r) for r in price or [])
        s = load_spec(str(spec))
        pol = load_policy(str(policy) if policy else None)
        cat = load_catalog(catalog)
        setup = Setup(s, cat, pol, objective.value, solver.value, timings)

        def progress(done: int, total: int) -> None:
            if total >= 10 and (done == total or done % max(1, total // 10) == 0):
                typer.echo(f"solved {done}/{total}", err=True)

        with Runner(setup, workers, ray_address, progress) as runner:
            typer.echo(f"what-if on {s.name}: catalog {cat.name} ({len(cat.offers)} offers), "
                       f"policy {pol.name}, {runner.backend} backend, {runner.workers} "
                       "worker(s)...", err=True)
            if modes == ["--sweep"]:
                _sweep_mode(setup, runner, sweep_rule, start, stop, steps, every_point,
                            base_rules, fmt, output, chart)
            elif modes == ["--break-even"]:
                _break_even_mode(setup, runner, break_even_sel, start, stop, tolerance,
                                 base_rules, fmt, output)
            else:
                _scenarios_mode(setup, runner, base_rules, scenario or [], fmt, output)

    _run(go)
