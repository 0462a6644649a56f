"""The deployment targets of ``ptplan render`` (a closed vocabulary: ``--target`` is a Typer
enum of these, and :data:`ptplan.rendering.targets.RENDERERS` has one renderer per member but
``all``; ``guard`` and ``budgets`` are opt-in, outside ``all``). Kept apart from the
renderers so the CLI can list them without importing those."""

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
    guard = "guard"
    """The budget guard as a CronJob with its RBAC (opt-in: not part of ``all``)."""
    budgets = "budgets"
    """The provider's budget (AWS Budgets / Cloud Billing budget) as Terraform (opt-in)."""
    all = "all"
    """Every target that applies to the plan (the others are skipped with a note)."""
