"""What a deployment must add to a plan so that it runs and bills as the plan priced it: the zone
every pool sits in, the restarts the job may take, the deadlines that bound it, how fast it is
torn down, boot disks, EFA, and the Ray resource that pins each role to its pool.

* **Zone.** The plan prices weight sync and the trainer's traffic as same-zone ($0) unless a
  network item says otherwise, so every node lives in the zone its allocation names, and an
  allocation without a zone (region-level on-demand or reserved rows) in the plan's ``zone``
  (the trainer's). A plan without a zone (no spot node anywhere) gets one zone that offers every
  instance type of the plan in the embedded catalog (first by name), with a note
  (:func:`ptplan.planfile.deployment.site_zone`).
* **Restarts** (RayJob ``backoffLimit``): the plan prices E = Σ nodes × λ × hours interruptions
  of its spot nodes, each costing restart time and lost work, after which the job resumes from
  its last checkpoint (``trainer.resume_mode=auto``). Any Ray worker lost fails the driver, so
  each interruption is one RayJob retry; the limit is the Poisson tail E + 3√E, rounded up,
  plus one retry for a non-spot failure.
* **Deadlines.** ``activeDeadlineSeconds`` = the plan's deadline (or 1.5 × its makespan when it
  has none): a job still running then is stopped, so the spend is bounded by that time × the
  plan's $/h. ``preRunningDeadlineSeconds`` = :data:`CAPACITY_WAIT_SECONDS`: capacity that does
  not arrive within an hour ends the attempt instead of billing the nodes that did arrive.
* **Teardown.** The plan bills nodes for the makespan only: the RayCluster is deleted as soon
  as the job ends (``ttlSecondsAfterFinished: 0``), Karpenter removes empty nodes after
  :data:`CONSOLIDATE_AFTER` and GKE pools scale to zero.
* **Boot disks** are the size the plan priced them at (its pools' ``boot_disk_gb``, the
  policy's; scratch goes to instance-store NVMe where the type has it), on the volume type of
  the catalog's block tier (gp3, pd-balanced; SkyPilot ``disk_tier: medium`` is the same pair).
  A plan of schema < 4 did not price them: they get the default policy's size and a note.
* **Ray placement.** Worker groups advertise ``ptplan_pool_<pool>`` (one unit per GPU) and the
  Ray launch runs through :mod:`ptplan.rendering.pinning`'s launcher, which makes every GPU
  bundle of a role ask for one unit of its planned pool's resource: a role can only be placed
  on its own pool's nodes (``render --check`` rule ``roles``).
* **GPUDirect on GKE.** A multi-node trainer on A3 High / Mega gets GPUDirect-TCPX / TCPXO
  (:mod:`ptplan.rendering.gpudirect`).
"""

from __future__ import annotations

import math
from typing import Any

from ptplan.planfile.names import dns_name
from ptplan.planfile.schema import Plan

CAPACITY_WAIT_SECONDS = 3600
"""How long a RayJob may wait for its nodes before the attempt fails (preRunningDeadline)."""
RAYJOB_TTL_SECONDS = 0
"""RayCluster deleted as soon as the job finishes (the plan bills no tail)."""
CONSOLIDATE_AFTER = "30s"
"""Karpenter removes an empty node after this (a node idles at most 30 s after the job)."""
NO_DEADLINE_FACTOR = 1.5
EFA_INTERFACES = {"p4d.24xlarge": 4, "p4de.24xlarge": 4, "p5.48xlarge": 32, "p5e.48xlarge": 32,
                  "p5en.48xlarge": 16, "p6-b200.48xlarge": 8, "trn1.32xlarge": 8,
                  "trn1n.32xlarge": 16, "trn2.48xlarge": 16}
"""Maximum EFA interfaces per instance type (EC2 ``describe-instance-types``
``NetworkInfo.EfaInfo.MaximumEfaInterfaces``; AWS EC2 User Guide, "EFA supported instance
types"). A multi-node trainer is priced at its GPUs' scale-out bandwidth (the reference system's
InfiniBand), which on AWS only EFA gives: its pods request ``vpc.amazonaws.com/efa``."""


def restart_budget(plan: Plan) -> tuple[int, float]:
    """(RayJob backoffLimit, expected interruptions E the plan priced)."""
    expected = sum(a.nodes * (a.interruptions_per_hour or 0.0) * a.hours
                   for p in plan.pools for a in p.allocations)
    return math.ceil(expected + 3.0 * math.sqrt(expected)) + 1, expected


def deadlines(plan: Plan) -> dict[str, int]:
    hours = plan.deadline_hours or NO_DEADLINE_FACTOR * plan.makespan_hours
    return {"active": max(3600, math.ceil(hours * 3600)), "pre_running": CAPACITY_WAIT_SECONDS}


def boot_disk_gb(plan: Plan, pool: Any) -> int:
    """The boot disk written for a pool's nodes: the size the plan priced (schema 4), else the
    default policy's."""
    if pool.boot_disk_gb > 0:
        return int(pool.boot_disk_gb)
    from ptplan.policies.model import default_policy

    return default_policy().boot_disk_gb


def boot_disk_note(plan: Plan) -> str:
    if plan.schema_version >= 4 and all(p.boot_disk_gb > 0 for p in plan.pools):
        sizes = sorted({p.boot_disk_gb for p in plan.pools})
        tiers = sorted({p.disk_tier for p in plan.pools if p.disk_tier}) or ["no block tier"]
        return (f"boot disks: {'/'.join(map(str, sizes))} GB per node on {', '.join(tiers)}, "
                f"priced in the plan (${plan.disk_cost_usd} of its ${plan.total_cost_usd})")
    size = boot_disk_gb(plan, plan.pools[0])
    return (f"boot disks: {size} GB per node (the default policy's); this plan (schema "
            f"{plan.schema_version}) does not price them: re-plan to include them in its total")


def ray_resource(pool: str) -> str:
    """The Ray custom resource that marks the nodes of ``pool`` (one unit per GPU)."""
    return "ptplan_pool_" + dns_name(pool, 40).replace("-", "_")


def efa_count(plan: Plan, pool: Any, instance_type: str) -> int:
    """EFA interfaces a trainer pod asks for: multi-node pools running the update on AWS."""
    if plan.provider != "aws" or "update" not in pool.phases or pool.nodes < 2:
        return 0
    return EFA_INTERFACES.get(instance_type, 0)
