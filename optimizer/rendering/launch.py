"""Launch commands (veRL 0.9, OpenRLHF 0.11), all from the plan and the spec's run settings.

The framework module of ``facts.framework`` (:mod:`ptplan.rendering.frameworks`) turns the plan
into :class:`~ptplan.rendering.frameworks.Setting` rows (field → key → value, the table of
``docs/render.md``) and the rows into the command words. What a framework cannot express is a
note (stderr and the launch file's header). Without the spec the run settings are unknown: the
launch then refuses to start (one line naming ``--spec``) instead of running the framework's
defaults.
"""

from __future__ import annotations

from typing import Any

from ptplan.planfile.names import dns_name
from ptplan.planfile.schema import REGENERATE, Plan
from ptplan.rendering.archive import archive_roots, archive_words
from ptplan.rendering.facts import Facts
from ptplan.rendering.frameworks import openrlhf_0_11, pool, verl_0_9
from ptplan.templates import shell_word

MODULES = {"verl": verl_0_9, "openrlhf": openrlhf_0_11}
NO_SPEC = ("ptplan: rendered without --spec: the run settings the plan was priced with (batch, "
           "samples, lengths, eval, checkpoint contents) are not in the plan; re-render with "
           "--spec SPEC")

NO_GENERATE = ("ptplan: no launch for method generate: veRL 0.9 and OpenRLHF 0.11 launch "
               "trainers, not offline sampling jobs; start your generation script (e.g. vLLM "
               "LLM.generate) on the rendered pools yourself")


def _pool(plan: Plan, name: str | None) -> Any:
    return pool(plan, name)


def launch_args(plan: Plan, facts: Facts) -> dict[str, Any]:
    """The launch of ``facts.framework`` for this plan (see the module docstring)."""
    from ptplan.rendering.frameworks import geometry

    fw = facts.framework
    geo = geometry(plan)
    slug = dns_name(plan.spec_name, 30)
    notes: list[str] = []
    out: dict[str, Any] = {"update_pool": geo.upool.name, "rollout_pool": geo.rpool.name,
                           "notes": notes, "framework": fw.name, "version": fw.pin,
                           "line": fw.line, "install": fw.install, "tp": geo.tp,
                           "engines": geo.engines,
                           "env": _required_env(plan.method, facts.run is not None and
                                                facts.run.agent is not None)}
    if facts.every_steps is None:
        notes.append("the checkpoint cadence is not recorded in this plan (schema 1): "
                     "trainer.save_freq / --ckpt.save_steps left out; pass --spec SPEC, or "
                     f"{REGENERATE}")
    notes.append(f"image: the launch scripts, the SkyPilot setup and the RayJob's runtime "
                 f"environment (pip) install {fw.spec}; an --image that already holds it saves "
                 "that install at each start")
    if plan.method == "generate":
        notes.append(NO_GENERATE)
        out.update(module=None, torchrun=False, settings=[], config_name=None, ray_roles={},
                   words=["sh", "-c", f"echo {shell_word(NO_GENERATE)} >&2; exit 2"])
    elif facts.run is None:
        notes.append(NO_SPEC)
        out.update(module=None, torchrun=False, settings=[], config_name=None, ray_roles={},
                   words=["sh", "-c", f"echo {shell_word(NO_SPEC)} >&2; exit 2"])
    else:
        out.update(MODULES[fw.name].command(plan, facts, slug, notes))
    out["run_words"] = out["words"]
    if out.get("module") and facts.archive_every and facts.every_steps:
        every = facts.every_steps * facts.archive_every
        roots = archive_roots(fw.name, plan.method, plan.algorithm == "ppo")
        out["run_words"] = archive_words(out["words"], roots, every)
        notes.append(f"archive: every {facts.archive_every}th checkpoint (steps that are "
                     f"multiples of {every}) is priced as archived; {fw.name} {fw.line} keeps "
                     f"the last {facts.keep_hot} only, so the launch runs inside a wrapper that "
                     f"copies each such checkpoint, once complete, to "
                     f"{', '.join(a for _, a in roots)} (docs/render.md, 'Archived "
                     "checkpoints')")
    if out.get("ray_roles"):
        from ptplan.rendering.deploy import ray_resource

        notes.append("ray pools: the launch runs through ptplan's pinning launcher (base64 of "
                     "optimizer/rendering/frameworks/raypin.py), so each role's GPU bundles ask "
                     "for its pool's resource: " + ", ".join(
                         f"{r}: {ray_resource(p)}" for r, p in sorted(out["ray_roles"].items()))
                     + " (docs/render.md, 'Ray custom resources')")
    # the launch file for the chosen framework; the other framework's slot stays empty
    out["verl"] = out["words"] if fw.name == "verl" else None
    out["openrlhf"] = out["words"] if fw.name == "openrlhf" else None
    return out


def verl_words(launch: dict[str, Any], slug: str, nproc: int) -> list[str]:
    """The launch command as words (kept for the template context; the framework module
    built them with the project ``slug`` and ``nproc`` GPUs per node)."""
    del slug, nproc
    return list(launch["words"])


def _required_env(method: str, agent: bool = False) -> dict[str, str]:
    """Environment a launch reads and the plan cannot name (weights, data, reward code): the
    RayJob's runtime environment and the SkyPilot head task declare them (empty: to be given).
    An agentic RL plan adds AGENT_PATH (veRL: the tools' config YAML; OpenRLHF: the agent .py,
    which also scores the episode)."""
    names = ["MODEL_PATH", "TRAIN_FILES", "VAL_FILES"]
    if method == "rl":
        names.append("REWARD_FN")
    if method == "rl" and agent:
        names.append("AGENT_PATH")
    if method == "opd":
        names.append("TEACHER_PATH")
    return dict.fromkeys(names, "")
