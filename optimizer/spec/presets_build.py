"""Generate the embedded model presets (``data/model_presets.json``) from the models' own
``config.json`` files (``data/hf_configs/``) and where each was read (``sources.csv``).

Run ``python -m ptplan.spec.presets_build`` after adding a config and its sources row;
``--check`` exits 1 if the shipped table differs from what the files give (a test runs it)."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ptplan.spec.hf_config import read_config

DATA = Path(__file__).parent / "data"
CONFIGS = DATA / "hf_configs"
TABLE = DATA / "model_presets.json"
COLUMNS = ("name", "file", "source", "read_on", "notes")


def sources(folder: Path = CONFIGS) -> list[dict[str, str]]:
    """The rows of ``sources.csv``: one per preset, naming its config file."""
    text = (folder / "sources.csv").read_text("utf-8")
    rows = list(csv.DictReader(io.StringIO(text)))
    for r in rows:
        if tuple(r) != COLUMNS:
            raise ValueError(f"sources.csv: columns {tuple(r)} != {COLUMNS}")
    return rows


def build(folder: Path = CONFIGS) -> str:
    """The table's text: rows sorted by name, each with its shape and provenance."""
    models: list[dict[str, Any]] = []
    for r in sorted(sources(folder), key=lambda r: r["name"].lower()):
        raw = (folder / r["file"]).read_bytes()
        shape = read_config(json.loads(raw), f"{r['file']}")
        models.append({"name": r["name"], "config": f"hf_configs/{r['file']}",
                       "config_sha256": hashlib.sha256(raw).hexdigest(),
                       "source": r["source"], "read_on": r["read_on"],
                       "shape": asdict(shape)})
    names = [str(m["name"]).lower() for m in models]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"sources.csv: duplicate names {dupes}")
    doc = {"generated_by": "python -m ptplan.spec.presets_build",
           "about": "Model presets generated from each model's own config.json "
                    "(hf_configs/, sources in hf_configs/sources.csv); parameter counts "
                    "computed by ptplan.spec.hf_config", "models": models}
    return json.dumps(doc, indent=1, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    text = build()
    if "--check" in args:
        same = TABLE.exists() and TABLE.read_text("utf-8") == text
        print("model_presets.json is up to date" if same else
              "model_presets.json differs from the configs: run python -m "
              "ptplan.spec.presets_build")
        return 0 if same else 1
    TABLE.write_text(text, "utf-8")
    print(f"wrote {TABLE.name}: {len(json.loads(text)['models'])} presets")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
