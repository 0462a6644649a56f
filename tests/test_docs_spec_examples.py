"""docs/spec.md §13 says each minimal example "validates and runs with `ptplan estimate FILE
--gpu H100`": every YAML block there is estimated, and the blocks name their models by preset
where a real model is meant (issue #42)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

import ptplan
from ptplan.spec.project import parse_spec

DOC = Path(__file__).resolve().parent.parent / "docs" / "spec.md"


def _blocks() -> list[str]:
    text = DOC.read_text()
    section = text[text.index("## 13. Minimal examples"):text.index("## 14.")]
    return re.findall(r"```yaml\n(.*?)```", section, re.S)


def test_the_section_has_its_examples() -> None:
    assert len(_blocks()) >= 5


@pytest.mark.parametrize("block", _blocks(), ids=lambda b: b.split("\n", 1)[0])
def test_minimal_example_estimates_on_h100(block: str) -> None:
    data = yaml.safe_load(block)
    spec = parse_spec(data, "docs/spec.md example")
    out = ptplan.estimate(spec, gpus=["H100"])
    assert out["phases"]
    assert "preset" in data["model"]
