"""``ptplan models [--search TEXT]``, ``ptplan models show NAME`` and ``ptplan init``.

The presets are the embedded table :mod:`ptplan.spec.presets` reads (generated from each
model's own ``config.json`` by :mod:`ptplan.spec.presets_build`); ``init`` writes a
commented starter spec (:mod:`ptplan.spec.starter`) and checks that it loads before it is
written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from ptplan.cli.common import TableOrJson, _emit, _run, app, dumps
from ptplan.core.errors import InputError
from ptplan.report.tables import text_table
from ptplan.spec import presets, starter

models_app = typer.Typer(invoke_without_command=True,
                         help="The model presets: `ptplan models` lists them, `ptplan models "
                              "show NAME` gives one.")
app.add_typer(models_app, name="models")


def complete_model(incomplete: str) -> list[str]:
    low = incomplete.lower()
    return [p.name for p in presets.search(None) if p.name.lower().startswith(low)]


def _billions(n: int) -> str:
    return f"{n / 1e9:,.2f}B"


def _row(p: presets.Preset) -> list[str]:
    s = p.shape
    return [p.name, s.architecture, _billions(s.params),
            _billions(s.active_params) if s.is_moe else "dense", str(s.layers),
            f"{s.kv_bytes_per_token / 1024:,.0f}",
            f"{s.context_length:,}" if s.context_length else "-"]


@models_app.callback()
def models(
    ctx: typer.Context,
    search: str = typer.Option(None, "--search", help="Only presets whose name (or "
                               "architecture) holds every word, e.g. 'qwen3 moe' or 'llama'."),
    fmt: TableOrJson = typer.Option(TableOrJson.table, "--format"),
    output: Path = typer.Option(None, "-o", "--output", help="Write to FILE instead of stdout."),
) -> None:
    """List the model presets: name, total and active parameters, layers, KV cache per token
    (bf16, KiB) and context length. Use the name as `model: {preset: NAME}`."""
    if ctx.invoked_subcommand is not None:
        return

    def go() -> None:
        rows = presets.search(search)
        if not rows:
            raise InputError(f"--search: no preset matches {search!r}; "
                             f"{presets.unknown_message(search or '').split('; ', 1)[-1]}")
        if fmt == TableOrJson.json:
            _emit(dumps([p.summary() for p in rows]), output)
            return
        table = text_table(["name", "arch", "params", "active", "layers", "KV KiB/token",
                            "context"], [_row(p) for p in rows],
                           title=f"{len(rows)} model presets (from each model's config.json)")
        _emit(table, output)

    _run(go)


@models_app.command("show")
def show(
    name: str = typer.Argument(..., help="A preset's name (Hugging Face repository id, any "
                               "case), e.g. Qwen/Qwen2.5-7B.", autocompletion=complete_model),
    fmt: TableOrJson = typer.Option(TableOrJson.table, "--format"),
    output: Path = typer.Option(None, "-o", "--output", help="Write to FILE instead of stdout."),
) -> None:
    """One preset: its shape, parameter counts, KV bytes per token, the spec fields it sets,
    and the config.json it was generated from."""

    def go() -> None:
        try:
            p = presets.lookup(name)
        except InputError as exc:
            raise InputError(f"NAME: {exc}") from None
        d = p.summary()
        if fmt == TableOrJson.json:
            _emit(dumps(d), output)
            return
        _emit(text_table(["field", "value"], _show_rows(d), title=p.name), output)

    _run(go)


def _show_rows(d: dict[str, Any]) -> list[list[str]]:
    def fmt(v: Any) -> str:
        if isinstance(v, int) and not isinstance(v, bool):
            return f"{v:,}"
        return "-" if v is None else str(v)

    skip = {"name", "spec_fields", "kv_bytes_per_token_note"}
    rows = [[k, fmt(v)] for k, v in d.items() if k not in skip]
    rows.insert(rows.index(["kv_bytes_per_token", fmt(d["kv_bytes_per_token"])]) + 1,
                ["", d["kv_bytes_per_token_note"]])
    rows.append(["spec fields", ", ".join(f"{k}: {v}" for k, v in d["spec_fields"].items())])
    return rows


@app.command("init")
def init(
    method: str = typer.Option("rl", "--method", help="sft, rl (GRPO) or opd (on-policy "
                               "distillation).", autocompletion=lambda: list(starter.METHODS)),
    model: str = typer.Option(None, "--model", help="The trained model's preset (default: "
                              "rl Qwen/Qwen2.5-7B, sft meta-llama/Llama-3.1-8B, opd "
                              "Qwen/Qwen3-8B).", autocompletion=complete_model),
    teacher: str = typer.Option(None, "--teacher", help="opd: the teacher's preset (default "
                                "Qwen/Qwen3-32B).", autocompletion=complete_model),
    output: Path = typer.Option(None, "-o", "--output", help="Write to FILE instead of stdout."),
    force: bool = typer.Option(False, "--force", help="Replace FILE if it exists (a spec "
                               "already there is kept otherwise)."),
) -> None:
    """Write a commented starter spec for a method and models given by preset; it plans as
    written (`ptplan plan FILE`)."""

    def go() -> None:
        text = starter.starter(method, model, teacher)  # checked to load
        if output is not None and output.exists() and not force:
            raise InputError(f"-o: {output} exists; pass --force to replace it, or another "
                             "file name")
        _emit(text, output)

    _run(go)
