"""Bucket lifecycle rules that implement a plan's storage tiers and retention (S3 and GCS).

The planner (:mod:`ptplan.costs.storage`) puts each data class on one tier and bills each object
for its lifetime (or the tier's minimum duration). Buckets only know *age-based* rules, so each
data class gets its own prefix (``<project>/checkpoints/``, ``archive/``, ``rollout_logs/``,
``eval/``, ``dataset/``, ``trajectories/``) and rules by age in whole days (agent trajectories:
expired after the days their storage item was priced for):

* day 0: move to the class's tier (same as uploading with that storage class);
* checkpoints: hot until deleted, ⌈keep_hot × checkpoint interval / 24 h⌉ + ``retention_days``
  days after their write (the interval is ``every_steps / steps × makespan``). The plan keeps
  the last ``keep_hot`` checkpoints hot to the end of the run and ``retention_days`` after;
  an age rule cannot tell them from earlier ones, so none is moved to a colder class (a colder
  retained tier is reported as a note). Rounding up to days and counting from each object's
  creation means a checkpoint is never deleted before the lifetime the plan priced (tested);
* archived checkpoints and eval outputs: deleted after ``metrics_days``; rollout logs after
  ``rollout_log_days`` (deleting before a tier's minimum duration is billed as if kept to it,
  as the plan priced);
* the dataset is never deleted (it is the user's input); incomplete multipart uploads under the
  project prefix are aborted after 7 days.

Bucket classes go only colder (S3's and GCS's transition order).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from ptplan.rendering.paths import PREFIX

if TYPE_CHECKING:
    from ptplan.planfile.schema import Plan
    from ptplan.rendering.facts import Facts

S3_CLASS = {"s3_standard": "STANDARD", "s3_standard_ia": "STANDARD_IA",
            "s3_onezone_ia": "ONEZONE_IA", "s3_glacier_instant": "GLACIER_IR",
            "s3_glacier_flexible": "GLACIER", "s3_glacier_deep_archive": "DEEP_ARCHIVE",
            "s3_intelligent_tiering": "INTELLIGENT_TIERING"}
GCS_CLASS = {"gcs_standard": "STANDARD", "gcs_nearline": "NEARLINE",
             "gcs_coldline": "COLDLINE", "gcs_archive": "ARCHIVE"}
ABORT_MULTIPART_DAYS = 7


S3_RANK = ["STANDARD", "INTELLIGENT_TIERING", "STANDARD_IA", "ONEZONE_IA", "GLACIER_IR",
           "GLACIER", "DEEP_ARCHIVE"]
GCS_RANK = ["STANDARD", "NEARLINE", "COLDLINE", "ARCHIVE"]


def lifecycle_rules(plan: Plan, facts: Facts, prefix: str) -> tuple[list[dict[str, Any]],
                                                                     list[str]]:
    """Age-based rules (one per object prefix) that never delete an object before the lifetime
    the plan priced. Returns (rules, notes); a rule is ``{id, prefix, classes, transitions:
    [(days, class)], expire_days}`` with provider storage-class names."""
    classes = S3_CLASS if plan.provider == "aws" else GCS_CLASS
    items = {s.data_class: s for s in plan.storage}
    notes: list[str] = []
    rules: list[dict[str, Any]] = []

    def cls(data_class: str) -> str | None:
        tier = items[data_class].tier
        if tier not in classes:
            notes.append(f"{data_class}: tier {tier} is not a bucket storage class; no rule")
            return None
        return classes[tier]

    def add(rule_id: str, data_classes: list[str], steps: list[tuple[int, str]],
            expire: int | None) -> None:
        moves = [(d, c) for d, c in steps if not (d == 0 and c == "STANDARD")]
        if moves or expire is not None:
            rules.append({"id": rule_id, "prefix": f"{prefix}/{PREFIX[data_classes[0]]}/",
                          "classes": data_classes, "transitions": moves,
                          "expire_days": expire})

    if "dataset" in items and (c := cls("dataset")):
        add("dataset", ["dataset"], [(0, c)], None)  # input data is never deleted by ptplan
    if "hot_checkpoints" in items and (hot := cls("hot_checkpoints")):
        every = facts.need("every_steps")
        hot_hours = facts.need("keep_hot") * every / max(plan.steps, 1) * plan.makespan_hours
        hot_days = max(1, math.ceil(hot_hours / 24.0))
        steps = [(0, hot)]
        names = ["hot_checkpoints"]
        # The plan keeps the last keep_hot checkpoints hot to the end of the run and
        # retention_days after it; a bucket rule sees only an object's age, not whether it is
        # among the last ones, so no checkpoint leaves the hot class before it expires.
        last_days = math.ceil(((facts.need("keep_hot") - 1) * every / max(plan.steps, 1)
                               * plan.makespan_hours) / 24.0 + facts.need("retention_days"))
        if "retained_checkpoints" in items and (ret := cls("retained_checkpoints")):
            names.append("retained_checkpoints")
            if ret != hot:
                notes.append(f"retained_checkpoints: priced {ret}, kept {hot} (an age rule "
                             f"cannot tell them from the last {facts.need('keep_hot')} "
                             f"checkpoints, which the plan prices {hot} to the end); storage "
                             "may cost a little more than planned")
        add("checkpoints", names, steps, max(hot_days + facts.need("retention_days"), last_days))
    for data_class, days in (("archived_checkpoints", facts.metrics_days),
                             ("rollout_logs", facts.rollout_log_days),
                             ("eval_outputs", facts.metrics_days)):
        if data_class in items and (c := cls(data_class)):
            add(data_class.replace("_", "-"), [data_class], [(0, c)], max(1, days))
    traj = items.get("agent_trajectories")
    if traj is not None and traj.gb > 0 and (c := cls("agent_trajectories")):
        # each trajectory was priced for max(trajectory_days, the tier's minimum) days
        # (GB-months = GB x days x 24 / 730): expire it then, never earlier
        days = math.ceil(traj.gb_months * 730.0 / (traj.gb * 24.0) - 1e-9)
        add("agent-trajectories", ["agent_trajectories"], [(0, c)], max(1, days))
    return rules, notes


def s3_lifecycle(rules: list[dict[str, Any]], prefix: str) -> dict[str, Any]:
    """``put_bucket_lifecycle_configuration``'s ``LifecycleConfiguration`` parameter."""
    out = []
    for r in rules:
        rule: dict[str, Any] = {"ID": r["id"], "Status": "Enabled",
                                "Filter": {"Prefix": r["prefix"]}}
        if r["transitions"]:
            rule["Transitions"] = [{"Days": d, "StorageClass": c} for d, c in r["transitions"]]
        if r["expire_days"] is not None:
            rule["Expiration"] = {"Days": r["expire_days"]}
        out.append(rule)
    out.append({"ID": "abort-incomplete-uploads", "Status": "Enabled",
                "Filter": {"Prefix": f"{prefix}/"},
                "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": ABORT_MULTIPART_DAYS}})
    return {"Rules": out}


def gcs_lifecycle(rules: list[dict[str, Any]], prefix: str) -> dict[str, Any]:
    """A bucket's ``lifecycle`` (storage.v1 JSON API; ``gcloud storage buckets update
    --lifecycle-file``)."""
    out: list[dict[str, Any]] = []
    for r in rules:
        for days, c in r["transitions"]:
            out.append({"action": {"type": "SetStorageClass", "storageClass": c},
                        "condition": {"age": days, "matchesPrefix": [r["prefix"]]}})
        if r["expire_days"] is not None:
            out.append({"action": {"type": "Delete"},
                        "condition": {"age": r["expire_days"], "matchesPrefix": [r["prefix"]]}})
    out.append({"action": {"type": "AbortIncompleteMultipartUpload"},
                "condition": {"age": ABORT_MULTIPART_DAYS, "matchesPrefix": [f"{prefix}/"]}})
    return {"lifecycle": {"rule": out}}
