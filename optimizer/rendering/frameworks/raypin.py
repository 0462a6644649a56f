"""ptplan Ray pool pinning (runs on the cluster; stdlib and Ray only).

Every Ray worker of a pool advertises the custom resource ptplan_pool_<pool>, one unit per GPU.
This launcher makes veRL 0.9 / OpenRLHF 0.11 ask for it: each placement-group bundle of a role
that holds a GPU also requests one unit of its planned pool's resource, so Ray can place the
role on that pool's nodes only. Usage (the rendered launch):

  python3 -c "exec(__import__('base64').b64decode(__import__('sys').argv[1]))" \
      <this file, base64> <role=resource,...> <module> <module args...>

It patches ray.util.placement_group.placement_group (the function both frameworks import) in
this process and, through the runtime environment's worker_process_setup_hook that the patched
ray.init adds, in every Ray worker of the job; then runs <module> as __main__. See
docs/render.md, "Ray custom resources".
"""

import os
import runpy
import sys

ROLES_ENV = "PTPLAN_RAY_ROLES"
PREFIX = "ptplan_pool_"
ACCELERATORS = ("GPU", "NPU", "neuron_cores")
VERL_POOLS = (("rollout_pool_reward_", "reward"), ("rollout_pool_teacher_", "teacher"),
              ("rollout_pool_", "rollout"), ("global_pool", "trainer"),
              ("trainer_pool", "trainer"), ("reward_pool", "reward"),
              ("teacher_pool", "teacher"))
OPENRLHF_ACTORS = {"PolicyModelActor": "trainer", "CriticModelActor": "critic",
                   "ReferenceModelActor": "reference", "RewardModelActor": "reward"}
_WARNED: set = set()


def parse_roles(text):
    roles = {}
    for item in filter(None, text.split(",")):
        role, sep, resource = item.partition("=")
        if not sep or not role or not resource.startswith(PREFIX):
            raise SystemExit(f"ptplan raypin: bad role entry {item!r} (role=ptplan_pool_<pool>)")
        roles[role] = resource
    return roles


def role_of(name, frame):
    """The planned role a placement group is for: veRL names each group after its resource pool
    (RayResourcePool.get_placement_groups: name_prefix + 'verl_group_...'); OpenRLHF's groups
    are unnamed and known by the function creating them."""
    for prefix, role in VERL_POOLS:
        if name and name.startswith(prefix):
            return role
    while frame is not None:
        path = frame.f_code.co_filename.replace("\\", "/")
        func = frame.f_code.co_name
        if path.endswith("openrlhf/trainer/ray/vllm_engine.py") and func == "create_vllm_engines":
            return "rollout"
        if path.endswith("openrlhf/cli/train_ppo_ray.py") and func == "train":
            # the actor(+ref) group is created before actor_model, the critic(+reward) after
            return "critic" if "actor_model" in frame.f_locals else "trainer"
        if path.endswith("openrlhf/trainer/ray/launcher.py") and func == "_initiate_actors":
            return OPENRLHF_ACTORS.get(actor_name(frame.f_locals["self"].ray_actor_type))
        frame = frame.f_back
    return None


def actor_name(actor_type):
    meta = getattr(actor_type, "__ray_metadata__", None)
    name = getattr(meta, "class_name", None) or getattr(actor_type, "__name__", "")
    return name.rsplit(".", 1)[-1]


def pin_bundles(bundles, resource):
    """Each bundle holding accelerators also asks for as many units of ``resource``."""
    out = []
    for bundle in bundles:
        bundle = dict(bundle)
        units = sum(bundle.get(k, 0) for k in ACCELERATORS)
        held = {k: v for k, v in bundle.items() if k.startswith(PREFIX)}
        if held and set(held) != {resource}:
            raise RuntimeError(f"ptplan raypin: bundle {bundle} already asks for {sorted(held)}, "
                               f"its role's pool is {resource}")
        if units and not held:
            bundle[resource] = units
        out.append(bundle)
    return out


def wrap_placement_group(original, roles):
    def placement_group(bundles, strategy="PACK", name="", *args, **kwargs):
        role = role_of(name, sys._getframe(1))
        if any(sum(b.get(k, 0) for k in ACCELERATORS) for b in bundles):
            if role in roles:
                bundles = pin_bundles(bundles, roles[role])
            elif (role, name) not in _WARNED:
                _WARNED.add((role, name))
                print(f"ptplan raypin: placement group {name or '(unnamed)'} (role {role}) "
                      "names no planned pool; not pinned", file=sys.stderr)
        return original(bundles, strategy, name, *args, **kwargs)

    placement_group.ptplan_original = original
    return placement_group


def install(roles):
    """Patch the placement_group function everywhere it is bound (idempotent)."""
    import ray.util
    import ray.util.placement_group

    module = sys.modules["ray.util.placement_group"]
    original = getattr(module.placement_group, "ptplan_original", module.placement_group)
    patched = wrap_placement_group(original, roles)
    module.placement_group = patched
    ray.util.placement_group = patched
    for name in ("verl.single_controller.ray.base", "openrlhf.trainer.ray.launcher",
                 "openrlhf.trainer.ray.vllm_engine", "openrlhf.cli.train_ppo_ray"):
        if getattr(sys.modules.get(name), "placement_group", None) is not None:
            sys.modules[name].placement_group = patched
    return patched


def setup_hook():
    """Ray worker_process_setup_hook: the same patch in every worker of the job."""
    install(parse_roles(os.environ.get(ROLES_ENV, "")))


def install_init(spec):
    """ray.init adds the setup hook and the roles to the job's runtime environment."""
    import ray

    original = getattr(ray.init, "ptplan_original", ray.init)

    def init(*args, **kwargs):
        env = dict(kwargs.get("runtime_env") or {})
        if env.get("worker_process_setup_hook"):
            raise RuntimeError("ptplan raypin: the runtime environment already has a "
                               "worker_process_setup_hook")
        env["worker_process_setup_hook"] = setup_hook
        env["env_vars"] = {**(env.get("env_vars") or {}), ROLES_ENV: spec}
        kwargs["runtime_env"] = env
        return original(*args, **kwargs)

    init.ptplan_original = original
    ray.init = init


def install_openrlhf_groups(roles):
    """OpenRLHF's RayActorGroup takes custom resources (``resources``,
    ``num_resources_per_node``; openrlhf/trainer/ray/launcher.py) that train_ppo_ray never
    passes: a group that makes its own placement (no shared ``pg``) gets its role's."""
    import inspect

    from openrlhf.trainer.ray.launcher import RayActorGroup

    original = getattr(RayActorGroup.__init__, "ptplan_original", RayActorGroup.__init__)
    signature = inspect.signature(original)

    def __init__(self, *args, **kwargs):
        bound = signature.bind(self, *args, **kwargs)
        role = OPENRLHF_ACTORS.get(actor_name(bound.arguments["ray_actor_type"]))
        if bound.arguments.get("pg") is None and not bound.arguments.get("resources") \
                and role in roles:
            bound.arguments["resources"] = {roles[role]: 1}
            bound.arguments["num_resources_per_node"] = 1
        original(*bound.args, **bound.kwargs)

    __init__.ptplan_original = original
    RayActorGroup.__init__ = __init__


def main(argv):
    if len(argv) < 4:
        raise SystemExit("ptplan raypin: usage: <source> <role=resource,...> <module> [args]")
    spec, module = argv[2], argv[3]
    roles = parse_roles(spec)
    install(roles)
    install_init(spec)
    if module.startswith("openrlhf."):
        install_openrlhf_groups(roles)
    sys.argv = [module, *argv[4:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv)
