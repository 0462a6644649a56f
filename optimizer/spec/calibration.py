"""A spec with a calibration file (``ptplan plan --calibration FILE``).

The file holds a ``calibration:`` list, as ``ptplan runs calibrate`` writes it (each entry:
phase, gpu, precision, tokens_per_second_per_gpu, and optionally the ledger ``runs`` behind it,
their ``spread`` and ``steps``). Its entries are added to the spec's own; an entry for a cell
(phase, GPU, precision) the spec also measures replaces the spec's, and entries for phases this
job does not run (a team file holds every method's cells) are left out.
"""

from __future__ import annotations

from pathlib import Path

from ptplan.core.errors import InputError
from ptplan.core.yamlio import quoted, read_mapping, validate
from ptplan.spec.project import Calibration, ProjectSpec, parse_spec


def load_spec_calibrated(path: str, calibration: str) -> ProjectSpec:
    data = read_mapping(path, "spec")
    where = f"--calibration {quoted(calibration)}"
    extra = read_mapping(calibration, "--calibration").get("calibration")
    if not isinstance(extra, list) or not all(isinstance(e, dict) for e in extra):
        raise InputError(f"{where}: expected a calibration: list of entries (phase, gpu, "
                         "precision, tokens_per_second_per_gpu); make it with "
                         "`ptplan runs calibrate`")
    entries = [validate(Calibration, e, f"{where}: calibration[{i}]")
               for i, e in enumerate(extra)]
    base = parse_spec({**data, "calibration": []}, f"spec {quoted(path)}", Path(path).parent)
    own = data.get("calibration") or []
    if not isinstance(own, list):
        return parse_spec(data, f"spec {quoted(path)}", Path(path).parent)  # the spec's own error
    cells = {(c.phase, c.gpu, c.precision): c
             for c in (validate(Calibration, e, f"spec {quoted(path)}: calibration[{i}]")
                       for i, e in enumerate(own))}
    cells.update({(c.phase, c.gpu, c.precision): c for c in entries
                  if c.phase in base.phase_names})
    merged = [c.model_dump(exclude_defaults=True) for c in cells.values()]
    return parse_spec({**data, "calibration": merged}, f"spec {quoted(path)} with {where}",
                      Path(path).parent)
