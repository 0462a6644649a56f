"""The deployment targets of ``ptplan render`` (a closed vocabulary: ``--target`` is a Typer
enum of these, and :data:`optimizer.render.targets.RENDERERS` has one renderer per member but
``all``). Kept apart from the renderers so the CLI can list them without importing those."""

from __future__ import annotations

from enum import StrEnum


class Target(StrEnum):
    skypilot = "skypilot"
    kuberay = "kuberay"
    karpenter = "karpenter"
    kueue = "kueue"
    terraform_aws = "terraform-aws"
    terraform_gcp = "terraform-gcp"
    lifecycle = "lifecycle"
    all = "all"
    """Every target that applies to the plan (the others are skipped with a note)."""
