"""Per-step metrics from where teams keep them, mapped to the plan's phases.

Sources: an MLflow tracking store (a local ``file:``/``sqlite:`` store or a server URL, read
with the ``mlflow`` client), TensorBoard event files (read record by record with the
``tensorboardX`` protobufs: TFRecord framing, ``simple_value`` and scalar ``tensor`` summaries)
and JSONL dumps of the metric dicts veRL and OpenRLHF log (veRL's ``file`` logger writes
``{"step": N, "data": {...}}`` per line, verl/utils/tracking.py ``FileLogger``; a flat dict
with ``step``, ``global_step`` or ``train/global_step`` is read too).

The mapping (:data:`NAMES`, documented in docs/ledger.md) sends each framework metric to a
phase and a kind: ``seconds`` (time spent in the phase that step), ``step_seconds``,
``throughput`` (tokens/s per GPU), ``tokens`` (per step), ``response_length`` and ``eval``.
Metrics that map to nothing are not stored; a source none of whose metrics map is refused.

Readers never trace back and never write: a step that is not a whole number ≥ 0 (NaN, 1e400,
-1, 2.5), a file that is not UTF-8 and a record that is not an event are one line naming the
place; values that are not finite numbers are skipped, as a logged NaN loss is. An MLflow
``sqlite:`` store must already be an MLflow database (never created or migrated here, so a
ledger or another program's file given by mistake is left alone), and tracking URLs are shown
with their password masked.
"""

from __future__ import annotations

import json
import math
import re
import struct
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ptplan.core.errors import InputError
from ptplan.core.owned_db import sqlite_tables
from ptplan.core.redact import redact, redact_value
from ptplan.ledger.records import Metric

NAMES: dict[str, tuple[str | None, str]] = {
    # veRL 0.9 (verl/trainer/ppo/ray_trainer.py marked_timer names -> timing_s/NAME,
    # verl/trainer/ppo/metric_utils.py compute_timing_metrics / compute_throughout_metrics)
    "timing_s/gen": ("rollout", "seconds"),
    "timing_s/reward": ("scoring", "seconds"),
    "timing_s/old_log_prob": ("scoring", "seconds"),
    "timing_s/ref": ("scoring", "seconds"),
    "timing_s/values": ("scoring", "seconds"),
    "timing_s/adv": ("update", "seconds"),
    "timing_s/update_critic": ("update", "seconds"),
    "timing_s/update_actor": ("update", "seconds"),
    "timing_s/update_weights": ("weight_sync", "seconds"),
    "timing_s/save_checkpoint": ("checkpoint", "seconds"),
    "timing_s/testing": ("eval", "seconds"),
    "timing_s/step": (None, "step_seconds"),
    "perf/time_per_step": (None, "step_seconds"),
    "perf/throughput": (None, "throughput"),
    "perf/total_num_tokens": (None, "tokens"),
    "response_length/mean": ("rollout", "response_length"),
    # OpenRLHF 0.11 (openrlhf/trainer/ppo_trainer.py status["timing/..."]; logged to
    # wandb/TensorBoard under "train/")
    "timing/generation": ("rollout", "seconds"),
    "timing/make_experience": ("scoring", "seconds"),
    "timing/ppo_train": ("update", "seconds"),
    "timing/broadcast": ("weight_sync", "seconds"),
    "timing/step_total": (None, "step_seconds"),
    "rollout/response_length_mean": ("rollout", "response_length"),
    "response_length": ("rollout", "response_length"),
}
EVAL = re.compile(r"^(val-core/|val-aux/|val/|eval/|eval_)")
"""Evaluation metrics (veRL ``val-core/...``, OpenRLHF ``eval_*``/``eval/...``): stored as
``eval`` under their own name."""
STEP_KEYS = ("step", "global_step", "train/global_step", "_step")
SOURCES = ("mlflow", "tensorboard", "jsonl")


def classify(name: str) -> tuple[str | None, str] | None:
    """(phase, kind) of a framework metric name, or None when it maps to nothing."""
    bare = name.removeprefix("train/")
    if bare in NAMES:
        return NAMES[bare]
    if EVAL.match(name) and not name.endswith("global_step"):
        return ("eval", "eval")
    return None


def _metric(source: str, name: str, step: int, value: Any) -> Metric | None:
    hit = classify(name)
    if hit is None or isinstance(value, bool):
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(v):
        return None
    try:
        return Metric.model_validate({"name": name, "step": int(step), "source": source,
                                      "phase": hit[0], "kind": hit[1], "value": v})
    except ValidationError:
        raise InputError(f"{source}: metric {name[:80]!r} at step {step}: a name of at most "
                         "200 characters and a step within ±2^31 are stored") from None


def _keep(source: str, where: str, triples: list[tuple[str, int, Any]]) -> list[Metric]:
    out: dict[tuple[str, int], Metric] = {}
    names: set[str] = set()
    for name, step, value in triples:
        names.add(name)
        m = _metric(source, name, step, value)
        if m is not None:
            out[(m.name, m.step)] = m  # the last value logged for a step wins
    if not out:
        shown = ", ".join(sorted(names)[:6]) + (" ..." if len(names) > 6 else "")
        raise InputError(f"{where}: no metric maps to a phase or an eval ({shown or 'none'}); "
                         "expected veRL (timing_s/gen, timing_s/update_actor, perf/throughput"
                         " ...) or OpenRLHF (timing/generation, timing/ppo_train ...) names, "
                         "see docs/ledger.md")
    return [out[k] for k in sorted(out)]


# ---- JSONL --------------------------------------------------------------------------------
def read_jsonl(path: Path) -> list[Metric]:
    where = f"--jsonl {str(path)!r}"
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise InputError(f"{where}: cannot read ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{where}: not UTF-8 text (byte {exc.start}); give the JSONL the "
                         "framework wrote") from None
    triples: list[tuple[str, int, Any]] = []
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{where}: line {n} is not JSON ({exc.msg})") from None
        if not isinstance(obj, dict):
            raise InputError(f"{where}: line {n} is not a JSON object")
        data = obj["data"] if isinstance(obj.get("data"), dict) else obj
        step = next((obj[k] for k in STEP_KEYS if isinstance(obj.get(k), int | float)), None)
        if step is None:
            step = next((data[k] for k in STEP_KEYS if isinstance(data.get(k), int | float)),
                        None)
        if step is None:
            raise InputError(f"{where}: line {n} has no step (step, global_step or "
                             "train/global_step)")
        if isinstance(step, bool) or not math.isfinite(step) or step < 0 or step != int(step):
            raise InputError(f"{where}: line {n}: step {step!r} is not a whole number ≥ 0")
        triples += [(k, int(step), v) for k, v in data.items() if k not in STEP_KEYS]
    return _keep("jsonl", where, triples)


# ---- TensorBoard --------------------------------------------------------------------------
def _records(data: bytes, where: str) -> list[bytes]:
    """TFRecord framing: u64 length, u32 masked CRC, payload, u32 masked CRC."""
    out, i = [], 0
    while i < len(data):
        if i + 12 > len(data):
            raise InputError(f"{where}: truncated event file")
        (n,) = struct.unpack("<Q", data[i:i + 8])
        if i + 12 + n + 4 > len(data):
            raise InputError(f"{where}: truncated event file")
        out.append(data[i + 12:i + 12 + n])
        i += 12 + n + 4
    return out


def read_tensorboard(path: Path) -> list[Metric]:
    try:
        from tensorboardX.proto import event_pb2
    except ModuleNotFoundError:
        raise InputError("--tensorboard: reading event files needs tensorboardX; "
                         "pip install 'ptplan[metrics]'") from None
    where = f"--tensorboard {str(path)!r}"
    files = sorted(path.rglob("*tfevents*")) if path.is_dir() else [path]
    if not files or not all(f.is_file() for f in files):
        raise InputError(f"{where}: no event files (*tfevents*) there")
    triples: list[tuple[str, int, Any]] = []
    for f in files:
        for raw in _records(f.read_bytes(), where):
            ev = event_pb2.Event()
            try:
                ev.ParseFromString(raw)
            except Exception:  # protobuf's DecodeError
                raise InputError(f"{where}: {f.name} holds a record that is not an event") \
                    from None
            for v in ev.summary.value:
                if v.HasField("simple_value"):
                    triples.append((v.tag, ev.step, v.simple_value))
                elif v.HasField("tensor") and v.tensor.float_val:
                    triples.append((v.tag, ev.step, v.tensor.float_val[0]))
                elif v.HasField("tensor") and v.tensor.double_val:
                    triples.append((v.tag, ev.step, v.tensor.double_val[0]))
    return _keep("tensorboard", where, triples)


# ---- MLflow -------------------------------------------------------------------------------
def read_mlflow(tracking_uri: str, run_id: str) -> list[Metric]:
    try:
        from mlflow.exceptions import MlflowException
        from mlflow.tracking import MlflowClient
    except ModuleNotFoundError:
        raise InputError("--mlflow: reading MLflow needs the mlflow client; "
                         "pip install 'ptplan[metrics]'") from None
    where = f"--mlflow {redact(repr(redact_value(tracking_uri)))} run {run_id!r}"
    _check_mlflow_store(tracking_uri, where)
    try:
        client = MlflowClient(tracking_uri=tracking_uri)
        run = client.get_run(run_id)
        triples: list[tuple[str, int, Any]] = []
        for key in sorted(run.data.metrics):
            triples += [(key, m.step, m.value) for m in client.get_metric_history(run_id, key)]
    except MlflowException as exc:
        text = str(exc.message).strip()
        raise InputError(f"{where}: {redact(text.splitlines()[0] if text else 'error')}") \
            from None
    except Exception as exc:  # the store's own errors (HTTP, SQL): one line, no secret
        text = str(exc).strip()
        raise InputError(f"{where}: {type(exc).__name__}: "
                         f"{redact(text.splitlines()[0] if text else '')[:200]}") from None
    return _keep("mlflow", where, triples)


MLFLOW_TABLES = frozenset({"experiments", "runs", "metrics"})
"""Tables every MLflow SQL store holds (mlflow/store/tracking/dbmodels/models.py)."""


def _check_mlflow_store(tracking_uri: str, where: str) -> None:
    """An MLflow ``sqlite:`` store must exist and be MLflow's: the MLflow client would
    otherwise create (or migrate) its schema in whatever file the URI names."""
    if not tracking_uri.startswith("sqlite:"):
        return
    raw = tracking_uri.removeprefix("sqlite:")
    path = Path(raw[3:] if raw.startswith("///") else raw.lstrip("/"))
    if not path.is_file():
        raise InputError(f"{where}: no MLflow store at {str(path)!r}; ptplan reads an "
                         "existing store and never creates one")
    tables = sqlite_tables(path, "--mlflow")
    if not tables >= MLFLOW_TABLES or "run_costs" in tables:
        raise InputError(f"{where}: {str(path)!r} is not an MLflow tracking database; "
                         "nothing was changed: give the store MLflow writes to")


# ---- per-phase aggregates -----------------------------------------------------------------
def phase_seconds_per_step(metrics: list[Metric]) -> dict[str, tuple[float, int]]:
    """Per phase: the mean over recorded steps of the phase's seconds in a step (the names of
    one phase summed within a step), and the number of steps."""
    per: dict[str, dict[int, float]] = {}
    for m in metrics:
        if m.kind == "seconds" and m.phase is not None:
            per.setdefault(m.phase, {}).setdefault(m.step, 0.0)
            per[m.phase][m.step] += m.value
    return {p: (sum(s.values()) / len(s), len(s)) for p, s in sorted(per.items()) if s}
