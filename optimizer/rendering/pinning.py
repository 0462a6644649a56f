"""Ray custom resources that pin each framework role to the pool the plan gave it.

Every Ray worker of pool P starts with ``ptplan_pool_<P>`` = its GPUs per node
(:func:`ptplan.rendering.deploy.ray_resource`; KubeRay ``rayStartParams.resources``, SkyPilot
``ray start --resources``). Neither pinned framework asks for it by itself, and no option of
either does: veRL 0.9.1 builds every placement-group bundle in
``verl/single_controller/ray/base.py`` ``RayResourcePool.get_placement_groups`` as
``{"CPU": max_colocate_count, "GPU": 1}`` (its only extra key, ``accelerator_type``, is never
passed by ``ResourcePoolManager.create_resource_pool``); OpenRLHF 0.11.2 writes
``{"GPU": 1, "CPU": 1}`` in ``openrlhf/cli/train_ppo_ray.py``, ``openrlhf/trainer/ray/
launcher.py`` (``RayActorGroup``, whose ``resources`` argument ``train_ppo_ray`` never passes)
and ``openrlhf/trainer/ray/vllm_engine.py`` (``create_vllm_engines``).

So the Ray launch starts through :mod:`ptplan.rendering.frameworks.raypin` (sent inline,
base64, as ``python3 -c BOOT <source> <roles> <module> <args>``): it wraps Ray's
``placement_group`` so that each bundle holding a GPU of role R also asks for one unit of R's
pool resource, in the driver and, through the runtime environment's
``worker_process_setup_hook``, in every Ray worker (veRL builds its groups in the TaskRunner
actor). :func:`roles` is the role → pool map, the same the framework modules size the roles
from; ``render --check`` (rule ``roles``, :mod:`ptplan.rendering.checks.roles`) re-derives it
from the plan's phases and checks the rendered Ray nodes against it.
"""

from __future__ import annotations

import base64
import functools
from pathlib import Path
from typing import Any

from ptplan.rendering.deploy import ray_resource

BOOT = "exec(__import__('base64').b64decode(__import__('sys').argv[1]))"
"""``python3 -c`` program that runs the launcher source given as the first argument (no
whitespace or double quotes: the RayJob entrypoint stays plain text through the shells)."""
SOURCE = Path(__file__).resolve().parent / "frameworks" / "raypin.py"


@functools.cache
def source_b64() -> str:
    return base64.b64encode(SOURCE.read_bytes()).decode("ascii")


def roles(plan: Any, framework: str) -> dict[str, str]:
    """Role → plan pool of every role whose placement groups the framework creates (veRL:
    the names of its resource pools; OpenRLHF: its actor groups and vLLM engines), as the
    framework modules render them (``verl_0_9.rl_settings``, ``openrlhf_0_11.command``)."""
    from ptplan.rendering.frameworks import geometry, scoring_models

    geo = geometry(plan)
    models = scoring_models(plan)
    out = {"trainer": geo.upool.name, "rollout": geo.rpool.name if geo.separate
           else geo.upool.name}
    spool = geo.spool
    if framework == "verl":
        own = spool is not None and spool.name not in (geo.upool.name, geo.rpool.name)
        if "reward" in models:  # reward_pool only with enable_resource_pool (its own pool)
            out["reward"] = spool.name if own and spool is not None else geo.upool.name
        if plan.method == "opd" and spool is not None and spool.name != geo.upool.name:
            out["teacher"] = spool.name
    else:
        if "reference" in models:
            out["reference"] = spool.name if spool is not None else geo.upool.name
        if plan.algorithm == "ppo":
            out["critic"] = geo.upool.name
    return out


def roles_word(pools: dict[str, str]) -> str:
    return ",".join(f"{role}={ray_resource(pool)}" for role, pool in sorted(pools.items()))


def launcher_words(module: str, pools: dict[str, str]) -> list[str]:
    """``python3 -m module`` through the pinning launcher."""
    return ["python3", "-c", BOOT, source_b64(), roles_word(pools), module]


def parse_launch(words: list[str]) -> tuple[str, dict[str, str]] | None:
    """(module, role → resource) of a launch that goes through the launcher, else None."""
    for i, w in enumerate(words[:-3]):
        if w == BOOT:
            spec = dict(item.partition("=")[::2] for item in words[i + 2].split(",") if item)
            return words[i + 3], spec
    return None
