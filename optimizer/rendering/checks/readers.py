"""Reading rendered files back for ``render --check``: YAML documents, Terraform (python-hcl2),
the RayJob."""

from __future__ import annotations

from typing import Any

import yaml


def _docs(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]


def _hcl(text: str) -> dict[str, Any]:
    import hcl2
    from hcl2 import SerializationOptions

    return dict(hcl2.loads(text, serialization_options=SerializationOptions(
        strip_string_quotes=True, explicit_blocks=False)))


def _resources(doc: dict[str, Any], kind: str) -> list[tuple[str, dict[str, Any]]]:
    return [(name, body) for r in doc.get("resource", []) for k, b in r.items() if k == kind
            for name, body in b.items()]


def _rayjob(files: dict[str, str]) -> dict[str, Any] | None:
    text = files.get("kuberay/rayjob.yaml")
    return next((d for d in _docs(text) if d["kind"] == "RayJob"), None) if text else None
