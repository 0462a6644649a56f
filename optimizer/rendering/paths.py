"""Where a run's data lives in the bucket: one prefix per storage data class (the only copy of
this map; :mod:`ptplan.rendering.lifecycle` builds its rules from it, the launch commands write
under it).

Every pod and task mounts the project's part of the bucket, ``<bucket>/<project>``, at
:data:`MOUNT` (SkyPilot ``file_mounts`` source, the KubeRay PVC ``subPath``); an object at
``MOUNT/<prefix>/…`` is the bucket key ``<project>/<prefix>/…``, which is what the lifecycle
rule of its data class filters on.
"""

from __future__ import annotations

PREFIX = {"dataset": "dataset", "hot_checkpoints": "checkpoints",
          "retained_checkpoints": "checkpoints", "archived_checkpoints": "archive",
          "rollout_logs": "rollout_logs", "eval_outputs": "eval",
          "agent_trajectories": "trajectories"}
"""Object prefix (under the project prefix) of each storage data class."""

MOUNT = "/checkpoints"
"""Mount point, in every pod and task, of the project's prefix of the bucket."""


def launch_path(data_class: str, *sub: str) -> str:
    """The directory a launch writes ``data_class`` objects to (``sub`` appended)."""
    return "/".join([MOUNT, PREFIX[data_class], *sub])


def bucket_key(path: str, mount_root: str = "") -> str:
    """The bucket key prefix (with a trailing ``/``) of a path under :data:`MOUNT`, for a mount
    that holds the bucket under ``mount_root`` (``""`` = the bucket root)."""
    rel = path[len(MOUNT):].strip("/")
    return "/".join(p for p in (mount_root.strip("/"), rel) if p) + "/"
