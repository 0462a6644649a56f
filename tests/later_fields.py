"""A spec field added after plans were made keeps their digests (``planfile/digest.py``,
``LATER_EFFICIENCY_DEFAULTS`` and the top-level defaults): at its default it is left out of the
digest, so a spec that does not set it still matches the plans made from it; set, it changes
the digest. Shared by the tests of each such field."""

from __future__ import annotations

from typing import Any

from ptplan.planfile.digest import spec_digest
from ptplan.spec.project import ProjectSpec


def assert_left_out_at_default(plain: ProjectSpec, changed: ProjectSpec, *path: str) -> None:
    """``plain`` leaves the field at ``path`` (``"efficiency", "rollout_tp"`` or a top-level
    name) at its default; ``changed`` sets it."""
    dump = plain.model_dump(mode="json")

    def without(d: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
        head, *rest = keys
        if not rest:
            return {k: v for k, v in d.items() if k != head}
        return {**d, head: without(d[head], tuple(rest))}

    assert spec_digest(dump) == spec_digest(without(dump, path))
    assert spec_digest(changed.model_dump(mode="json")) != spec_digest(dump)
