"""The chart of docs/validation.md: predicted ÷ reported for every published run in validation/.

    python docs/scripts/validation_chart.py            # writes docs/assets/validation.png

The figures are those of ``python benchmarks/validation.py`` (the demand model on each case's
cluster, with the factors fitted on the suite): one row per case, its ratio as a dot on a log
scale and its band as a bar; the dashed line is the geometric mean of the ratios. The PNG
carries no date or software tag, so the same figures give the same bytes."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "docs" / "assets" / "validation.png"


def _validation_rows() -> list[dict]:
    spec = importlib.util.spec_from_file_location("validation_bench",
                                                  ROOT / "benchmarks" / "validation.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up while the class is made
    spec.loader.exec_module(mod)
    return mod.rows()


def draw(rows: list[dict], out: Path) -> None:
    rows = sorted(rows, key=lambda r: r["ratio"])
    gm = math.exp(sum(math.log(r["ratio"]) for r in rows) / len(rows))
    fig, ax = plt.subplots(figsize=(9, 0.42 * len(rows) + 1.6), dpi=100)
    for y, r in enumerate(rows):
        lo, hi = r["band"]
        colour = "#2f6db5" if r["in_band"] else "#c0392b"
        ax.plot([lo, hi], [y, y], color="#c8d3e0", linewidth=6, solid_capstyle="butt",
                zorder=1)
        ax.plot([r["ratio"]], [y], "o", color=colour, markersize=7, zorder=3)
        ax.annotate(f"{r['ratio']:.2f}", (r["ratio"], y), textcoords="offset points",
                    xytext=(7, 4), fontsize=8)
    ax.axvline(1.0, color="#333333", linewidth=1)
    ax.axvline(gm, color="#e67e22", linewidth=1, linestyle="--",
               label=f"geometric mean {gm:.2f}")
    ax.set_xscale("log")
    left = min([0.25] + [r["ratio"] * 0.8 for r in rows])  # every dot on the chart
    ax.set_xlim(left, 4.0)
    ticks = [t for t in (0.15, 0.2, 0.25, 0.33, 0.5, 0.67, 1.0, 1.5, 2.0, 3.0, 4.0) if t >= left]
    ax.set_xticks(ticks)
    ax.set_xticklabels([f"{t:g}" for t in ticks])
    ax.minorticks_off()
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"{r['id']} ({r['metric'].replace('_', ' ')})" for r in rows],
                       fontsize=8)
    ax.set_xlabel("predicted ÷ reported (log scale); bar: the case's band")
    ax.set_title(f"ptplan's demand model on {len(rows)} published runs: "
                 f"{sum(r['in_band'] for r in rows)} in band")
    ax.grid(axis="x", color="#eeeeee", zorder=0)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, metadata={"Software": None})
    plt.close(fig)


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else OUT
    draw(_validation_rows(), out)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
