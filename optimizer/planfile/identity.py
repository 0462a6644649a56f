"""Which plan a deployed object belongs to: the plan's *prefix* ``<slug>-<digest>``, computed
from the plan (never stored in it), carried by the name of every object ``render`` writes and by
its ``ptplan-plan`` label or tag, and checked by ``guard --act`` before it touches an object.

* slug: :func:`project_slug`, the spec name as a DNS label of at most 30 characters (a name that
  had to change carries a hash of the original, so ``grpo#7b#math`` is not ``grpo-7b-math``);
* digest: :func:`plan_digest`, the first 6 hex digits of the sha256 of the plan's identity,
  :func:`plan_identity`: ``ptplan-plan/1``, the spec name, the spec digest and the sha256 of
  the plan's own content, one per line. The content is the plan as ``load_plan`` reads it,
  dumped to JSON with sorted keys, no spaces, every float at 12 significant digits
  (:func:`ptplan.core.numbers.round_floats`, as every plan file is written); so two plans of
  the same spec with any figure apart (a budget, a pool, another catalog) are two deployments,
  and a plan file read back, or copied into the guard's ConfigMap, is the same one.

Names longer than a platform allows keep the digest whole and cut the slug
(:func:`ptplan.planfile.names.prefixed`): every group's name is at most 40 characters, GKE's
limit for node pools, and serves as the Karpenter NodePool and the GKE node pool alike.
"""

from __future__ import annotations

import hashlib
import json

from ptplan.core.numbers import round_floats
from ptplan.planfile.names import dns_name, prefixed, short_hash
from ptplan.planfile.schema import Plan

PLAN_LABEL = "ptplan-plan"
"""The label (Kubernetes, GCP) or tag (AWS) every rendered object carries: the plan's prefix."""
IDENTITY_VERSION = "ptplan-plan/1"
GROUP_NAME_CHARS = 40
"""A group's deployed name: GKE node pool names are at most 40 characters."""


def project_slug(plan: Plan) -> str:
    """The project's name as a DNS label: the part of every deployed name before the digest,
    and the checkpoint path (``<bucket>/<slug>/``), which re-plans of a spec share."""
    return dns_name(plan.spec_name, 30)


def content_digest(plan: Plan) -> str:
    """sha256 (hex) of the plan's canonical JSON (module doc)."""
    doc = round_floats(plan.model_dump(mode="json"))
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def plan_identity(plan: Plan) -> str:
    """What the plan digest is the hash of: version, spec name, spec digest, content digest."""
    return "\n".join((IDENTITY_VERSION, plan.spec_name, plan.spec_digest,
                      "sha256:" + content_digest(plan)))


def plan_digest(plan: Plan) -> str:
    """6 hex digits of the sha256 of :func:`plan_identity`."""
    return short_hash(plan_identity(plan))


def plan_prefix(plan: Plan) -> str:
    """``<slug>-<digest>``: the RayJob's name, the head of every other deployed name, and the
    value of the ``ptplan-plan`` label on every object."""
    return prefixed(project_slug(plan), plan_digest(plan))


def plan_name(plan: Plan, rest: str, n: int = 63) -> str:
    """``<slug>-<digest>-<rest>`` in at most ``n`` characters, the slug cut to fit."""
    return prefixed(project_slug(plan), plan_digest(plan), rest, n)
