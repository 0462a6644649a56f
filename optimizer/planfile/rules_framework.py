"""``framework`` rules (schema 9): every pool, role and precision of the plan against the
capability table of the release it was made for (:mod:`ptplan.spec.frameworks`). A plan for
``any`` (or of a schema before 9) has nothing to hold it to.

* ``framework.known``: the release is one ptplan knows, and the plan's schema records it (9);
* ``framework.method``: the release runs the plan's method;
* ``framework.accelerator``: every pool's GPU is one the release's build runs on;
* ``framework.pipeline``: a rollout pool apart from the trainer only in a mode the release
  runs that way;
* ``framework.roles``: scoring on a pool apart from the trainer only for roles the release
  gives a pool of their own; an OPD teacher on its own pool where the release needs it;
* ``framework.precision``: each phase in a precision the release runs it in (scoring roles
  in the trainer's dtype where the release computes them there);
* ``framework.engine``: generation engines within a node where the release cannot span nodes;
* ``framework.layout``: tensor or pipeline parallel training only with a backend that has it.
"""

from __future__ import annotations

from ptplan.core.hardware import PRECISIONS, gpus
from ptplan.planfile.schema import Plan
from ptplan.spec.frameworks import CHOICES, release

FRAMEWORK_SCHEMA = 9


def check_framework(plan: Plan) -> list[str]:
    key = plan.framework
    if key is None:
        return []
    if key not in CHOICES:
        return [f"framework.known: {key!r} is not a framework ptplan plans for "
                f"({', '.join(CHOICES)})"]
    if plan.schema_version < FRAMEWORK_SCHEMA:
        return [f"framework.known: the framework needs schema {FRAMEWORK_SCHEMA}, the plan says "
                f"{plan.schema_version}"]
    rel = release(key)
    if rel is None:
        return []
    v: list[str] = []
    if plan.method not in rel.methods:
        v.append(f"framework.method: {rel.label} does not run method {plan.method}")
    table = gpus()
    off: dict[str, list[str]] = {}
    for p in plan.pools:
        vendor = table[p.gpu].vendor if p.gpu in table else "unknown"
        if vendor not in rel.accelerators:
            off.setdefault(f"{p.gpu} ({vendor})", []).append(p.name)
    for gpu, names in off.items():
        v.append(f"framework.accelerator: pool{'s' if len(names) > 1 else ''} "
                 f"{', '.join(names)} run{'' if len(names) > 1 else 's'} on {gpu}; {rel.label} "
                 f"runs on {', '.join(sorted(rel.accelerators))} GPUs "
                 f"({rel.cite('accelerators')})")
    phases = {ph.name: ph for ph in plan.phases}
    pools = {p.name: p for p in plan.pools}
    rollout, update, scoring = (phases.get(n) for n in ("rollout", "update", "scoring"))
    if rollout is not None and update is not None and rollout.pool != update.pool \
            and plan.pipeline_mode not in rel.separate_rollout_pipelines:
        v.append(f"framework.pipeline: rollout on pool {rollout.pool} apart from the trainer "
                 f"in a {plan.pipeline_mode} pipeline; {rel.label} runs a rollout pool of its "
                 f"own only {' or '.join(sorted(rel.separate_rollout_pipelines))} "
                 f"({rel.cite('separate_rollout')})")
    if scoring is not None and update is not None:
        roles = [m for m in scoring.models if m != "policy"]
        apart = scoring.pool != update.pool
        if apart:
            bad = [r for r in roles if r not in rel.own_pool_roles]
            if bad:
                v.append(f"framework.roles: {', '.join(bad)} scored on pool {scoring.pool}, "
                         f"apart from the trainer; {rel.label} runs "
                         f"{'them' if len(bad) > 1 else 'it'} on the trainer's pool "
                         f"({rel.cite('trainer_roles')})")
        if "teacher" in roles and rel.teacher_needs_own_pool and (
                not apart or (rollout is not None and scoring.pool == rollout.pool)):
            v.append(f"framework.roles: the OPD teacher shares pool {scoring.pool}; "
                     f"{rel.label} runs it on a pool of its own ({rel.cite('teacher_pool')})")
    upd_q = (update.precision,) if update is not None and update.precision else ()
    for ph in plan.phases:
        if ph.precision is None:
            continue
        if ph.name in ("rollout", "eval"):
            ok, what = rel.rollout_precisions, "rollout_precision"
        elif ph.name == "update":
            ok, what = rel.update_precisions, "update_precision"
        elif ph.name == "scoring":
            ok = frozenset(PRECISIONS)
            for role in (m for m in ph.models if m != "policy"):
                ok &= rel.scoring_allowed(role, upd_q or tuple(rel.update_precisions))
            what = "scoring_precision"
        else:
            continue
        if ph.precision not in ok:
            v.append(f"framework.precision: phase {ph.name} at {ph.precision}; {rel.label} runs "
                     f"it in {', '.join(sorted(ok)) or 'no precision'} ({rel.cite(what)})")
        pool = pools.get(ph.pool)
        if ph.name in ("rollout", "eval") and not rel.engine_spans_nodes and pool is not None \
                and ph.replica_gpus > pool.gpus_per_node:
            v.append(f"framework.engine: phase {ph.name}'s engine of {ph.replica_gpus} GPUs spans "
                     f"nodes of {pool.gpus_per_node}; {rel.label}'s engines stay within a node "
                     f"({rel.cite('engine_within_node')})")
    lay = update.parallel_layout if update is not None else None
    if lay is not None and (lay.tp > 1 or lay.pp > 1) \
            and "megatron" not in rel.train_backends.get(plan.method, frozenset()):
        v.append(f"framework.layout: the update uses tp {lay.tp}, pp {lay.pp}; {rel.label} "
                 f"trains {plan.method} with "
                 f"{', '.join(sorted(rel.train_backends.get(plan.method, ())))} only "
                 f"({rel.cite('train_backend')})")
    return v
