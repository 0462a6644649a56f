"""Rendered SkyPilot tasks against SkyPilot's own task and resources schemas, always (no
``skypilot`` install needed): the schemas are vendored in ``tests/data/skypilot/`` with their
source and the command that regenerates them (``SOURCE.md``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from test_render import FIXTURES, _yaml_docs, rendered

DATA = Path(__file__).resolve().parent / "data" / "skypilot"


def _case_insensitive_enum(validator, enums, instance, schema):  # sky/utils/validator.py
    if instance.lower() not in [e.lower() for e in enums]:
        yield jsonschema.ValidationError(f"{instance!r} is not one of {enums!r}")


def _case_sensitive_enum(validator, enums, instance, schema):
    if instance not in enums:
        yield jsonschema.ValidationError(f"{instance!r} is not one of {enums!r}")


Validator = jsonschema.validators.extend(jsonschema.Draft7Validator, validators={
    "case_insensitive_enum": _case_insensitive_enum,
    "case_sensitive_enum": _case_sensitive_enum})


def _schema(name: str) -> dict[str, Any]:
    return json.loads((DATA / f"{name}_schema.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", FIXTURES)
def test_rendered_tasks_pass_skypilot_schemas(name: str) -> None:
    task_v, res_v = Validator(_schema("task")), Validator(_schema("resources"))
    # a job group: its header (name, execution, primary_tasks, termination_delay; loaded by
    # SkyPilot's job-group loader in test_render) and then one task per document
    tasks = [d for r, t in rendered(name) if r.startswith("skypilot/")
             for d in _yaml_docs(t)[1:]]
    assert tasks and all("run" in t for t in tasks)
    for t in tasks:  # as sky.Task.from_yaml_config: None fields dropped, then resources
        task_v.validate({k: v for k, v in t.items() if v is not None})
        res_v.validate({k: v for k, v in t["resources"].items() if v is not None})


def test_schemas_reject_what_skypilot_rejects() -> None:
    """The vendored schemas are not vacuous: an unknown task key, a wrong type and a bad
    resources value fail."""
    task_v, res_v = Validator(_schema("task")), Validator(_schema("resources"))
    with pytest.raises(jsonschema.ValidationError):
        task_v.validate({"name": "x", "nodes": 2})
    with pytest.raises(jsonschema.ValidationError):
        task_v.validate({"name": "x", "num_nodes": "two"})
    with pytest.raises(jsonschema.ValidationError):
        res_v.validate({"use_spot": "yes"})
