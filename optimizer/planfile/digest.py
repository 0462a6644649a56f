"""The spec digest a plan records (``spec_digest``): sha256 of the normalised spec, with the
fields added after a plan schema left out when unset, so that plans made before them still
match their specs, and its floats rounded to 12 significant digits (:mod:`ptplan.core.numbers`):
a spec the planner derives (a campaign stage's deadline, a frontier point's) has the same digest
on any CPU, and the spec read back from the plan's figures matches it. A spec written by hand
has no float with more digits, so its digest is the one it always had; plans recorded before
with the digest of such a derived spec at full precision still match (:func:`digest_matches`).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ptplan.core.numbers import round_floats

LATER_SPEC_FIELDS = ("generated_by", "prompts", "prep_cpu_hours", "prep_hours")
"""``data`` fields added with schema 5 (and 7: data preparation): left out of the digest when
unset, so that the plans made before them still match their specs."""
LATER_TOP_FIELDS = ("agent", "other_costs", "reward")
"""Top-level spec sections added with schema 6 and 7 (issue #25): left out of the digest when
unset, so that a spec without them keeps its digest."""
LATER_MODEL_FIELDS = ("preset", "hf_config", "kv_latent_dim", "sliding_window",
                      "sliding_window_layers")
"""Model-block fields added with issue #42 (presets, configs, MLA and sliding windows): left
out of the digest when unset, so that a spec typed by hand keeps its digest."""
MODEL_BLOCKS = ("model", "teacher", "reward_model", "critic")
LATER_EFFICIENCY_DEFAULTS = {"moe_load_imbalance": 1.5, "sequence_packing": True,
                             "zero3_overlap_comm": True, "colocated_refit_gb_per_s": 17.8,
                             "generation_batching": "continuous", "rollout_tp": None,
                             "pad_responses_to_cap": False}
"""``efficiency`` fields added with schema 8 and after (issue #39): left out of the digest at
their default, so that a spec that does not set them keeps its digest."""
FORMER_EFFICIENCY_DEFAULTS = {"eager_launch_us_per_layer": 45.0}
"""``efficiency`` fields whose default became "unset, per model" (issue #39): unset, they enter
the digest as the value plans recorded before, so that a spec that does not set them keeps its
digest (the one spec it cannot tell apart: the same value set by hand)."""


def spec_digest(spec_dump: dict[str, Any], *, rounded: bool = True) -> str:
    """``sha256:`` and the hex digest of the normalised ``spec_dump`` (``rounded=False``: its
    floats at full precision, as plans recorded before rounding)."""
    if any(k in spec_dump and spec_dump[k] is None for k in LATER_TOP_FIELDS):
        spec_dump = {k: v for k, v in spec_dump.items()
                     if not (k in LATER_TOP_FIELDS and v is None)}
    if spec_dump.get("max_staleness_steps") == 1:
        # issue #39: left out at its default, so that specs keep their digest
        spec_dump = {k: v for k, v in spec_dump.items() if k != "max_staleness_steps"}
    if "framework" in spec_dump:
        # schema 9 (issue #40): never in the digest (earlier plans still match their specs,
        # and a plan made with `plan --framework` matches its spec file); the plan records
        # the framework and `check --spec` compares it with the spec's (rules_spec)
        spec_dump = {k: v for k, v in spec_dump.items() if k != "framework"}
    sla = spec_dump.get("sla")
    if isinstance(sla, dict) and "start_after" in sla:
        # schema 6 (issue #15): never in the digest (earlier plans still match their specs,
        # and a plan made with `plan --start-after` matches its spec file); the bookings
        # record it and `check --spec` compares them with it (rules_spec)
        spec_dump = {**spec_dump, "sla": {k: v for k, v in sla.items() if k != "start_after"}}
    sla = spec_dump.get("sla")
    if isinstance(sla, dict) and "deadline" in sla and sla["deadline"] is None:
        # issue #15: a date deadline; left out when unset, so that specs keep their digest
        spec_dump = {**spec_dump, "sla": {k: v for k, v in sla.items() if k != "deadline"}}
    spec_dump = _without_unset(spec_dump, "data", LATER_SPEC_FIELDS)
    eff = spec_dump.get("efficiency")
    if isinstance(eff, dict):
        spec_dump = {**spec_dump, "efficiency": _efficiency_as_recorded(eff)}
    for key in MODEL_BLOCKS:
        spec_dump = _without_unset(spec_dump, key, LATER_MODEL_FIELDS)
    cal = spec_dump.get("calibration")
    if isinstance(cal, list) and any(isinstance(c, dict) and "run_rates" in c for c in cal):
        # schema 8: an entry's run_rates, left out when unset (specs keep their digests)
        spec_dump = {**spec_dump, "calibration": [
            {k: v for k, v in c.items() if not (k == "run_rates" and v is None)}
            if isinstance(c, dict) else c for c in cal]}
    canonical = json.dumps(round_floats(spec_dump) if rounded else spec_dump, sort_keys=True,
                           separators=(",", ":"), default=str)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def _efficiency_as_recorded(eff: dict[str, Any]) -> dict[str, Any]:
    """The ``efficiency`` block as plans made before its later fields recorded it: a later
    field at its default left out, a former default that became "unset" as its old value."""
    out: dict[str, Any] = {}
    for k, v in eff.items():
        if k in LATER_EFFICIENCY_DEFAULTS and v == LATER_EFFICIENCY_DEFAULTS[k]:
            continue
        out[k] = FORMER_EFFICIENCY_DEFAULTS[k] if v is None and k in FORMER_EFFICIENCY_DEFAULTS \
            else v
    return out


def _without_unset(spec_dump: dict[str, Any], section: str,
                   later: tuple[str, ...]) -> dict[str, Any]:
    """``spec_dump`` with the ``later`` fields of block ``section`` left out where unset."""
    block = spec_dump.get(section)
    if not isinstance(block, dict) or not any(k in block and block[k] is None for k in later):
        return spec_dump
    return {**spec_dump, section: {k: v for k, v in block.items()
                                   if not (k in later and v is None)}}


def digest_matches(spec_dump: dict[str, Any], recorded: str) -> bool:
    """The plan's recorded digest is the spec's: rounded as plans record it, or at full
    precision as plans recorded before rounding."""
    return recorded in (spec_digest(spec_dump), spec_digest(spec_dump, rounded=False))
