"""Charts (``--chart FILE`` of ``whatif`` and ``reserve``): matplotlib with the Agg backend,
PNG or SVG by suffix. SVG output is byte-deterministic: a fixed ``svg.hashsalt``, glyphs as
paths, no date metadata; PNG carries no software tag."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ptplan.core.atomic import write_atomic
from ptplan.core.errors import InputError


def chart_suffix(path: Path) -> str:
    """``.png`` or ``.svg``; anything else is a one-line input error."""
    suffix = path.suffix.lower()
    if suffix not in (".png", ".svg"):
        raise InputError(f"--chart: {str(path)!r} has suffix {suffix or 'none'}; use .png or "
                         ".svg")
    return suffix


@contextlib.contextmanager
def pyplot(salt: str) -> Iterator[Any]:
    """``matplotlib.pyplot`` on the Agg backend, inside deterministic SVG settings."""
    try:
        import matplotlib
    except ImportError:
        raise InputError("--chart needs matplotlib; install the extra: pip install "
                         "'ptplan[chart]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with matplotlib.rc_context({"svg.hashsalt": salt, "svg.fonttype": "path"}):
        yield plt


def save(plt: Any, fig: Any, path: Path) -> None:
    """Write ``fig`` to ``path`` (format from the suffix) atomically and close it."""
    suffix = chart_suffix(path)
    buf = io.BytesIO()
    try:
        meta = {"Date": None} if suffix == ".svg" else {"Software": None}
        fig.savefig(buf, format=suffix[1:], dpi=100, metadata=meta)
    finally:
        plt.close(fig)
    # atomic, never through a link or over an input unless --force (ptplan.core.atomic)
    write_atomic(path, buf.getvalue(), option="--chart")
