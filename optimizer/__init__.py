"""ptplan: cheapest GPU cluster plans for LLM post-training.

The public Python API is what this package exports (:data:`__all__`): the loaders
(:func:`load_spec`, :func:`load_catalog`, :func:`load_policy`, :func:`load_plan`), one function
per command (:func:`estimate`, :func:`plan`, :func:`pareto`, :func:`verify`, :func:`render`,
:func:`whatif`, :func:`reserve`, :func:`simulate`, :func:`compare`, :func:`models`,
:func:`model_preset`, :func:`init_spec`), the main types
(:class:`ProjectSpec`, :class:`Plan`, :class:`Catalog`, :class:`Policy`), the errors to catch
and :data:`__version__`. They are defined in :mod:`ptplan.api`; everything else is internal.

``import ptplan`` stays cheap: the names are imported on first use (PEP 562), so the ``ptplan``
command, which imports this package first, pays nothing for them.

No subpackage shares a name with an entry point (the plan file is :mod:`ptplan.planfile`,
rendering :mod:`ptplan.rendering`, what-if :mod:`ptplan.scenarios`, purchasing
:mod:`ptplan.reservations`, method comparison :mod:`ptplan.comparison`), so ``ptplan.plan`` is
always the function. The layers are described in ``docs/architecture.md``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ptplan.core.version import __version__

if TYPE_CHECKING:
    from ptplan.api import (
        compare,
        estimate,
        init_spec,
        load_catalog,
        load_plan,
        load_policy,
        load_spec,
        model_preset,
        models,
        pareto,
        plan,
        render,
        reserve,
        simulate,
        verify,
        whatif,
    )
    from ptplan.core.errors import InfeasibleError, InputError, PlannerError, ProviderError
    from ptplan.planfile.schema import Plan
    from ptplan.policies.model import Policy
    from ptplan.providers.base import Catalog
    from ptplan.spec.project import ProjectSpec

__all__ = [
    "Catalog",
    "InfeasibleError",
    "InputError",
    "Plan",
    "PlannerError",
    "Policy",
    "ProjectSpec",
    "ProviderError",
    "__version__",
    "compare",
    "estimate",
    "init_spec",
    "load_catalog",
    "load_plan",
    "load_policy",
    "load_spec",
    "model_preset",
    "models",
    "pareto",
    "plan",
    "render",
    "reserve",
    "simulate",
    "verify",
    "whatif",
]

_HOME = {
    **dict.fromkeys(("compare", "estimate", "init_spec", "load_catalog", "load_plan",
                     "load_policy", "load_spec", "model_preset", "models", "pareto", "plan",
                     "render", "reserve", "simulate", "verify", "whatif"), "ptplan.api"),
    **dict.fromkeys(("InfeasibleError", "InputError", "PlannerError", "ProviderError"),
                    "ptplan.core.errors"),
    "Plan": "ptplan.planfile.schema",
    "Policy": "ptplan.policies.model",
    "Catalog": "ptplan.providers.base",
    "ProjectSpec": "ptplan.spec.project",
}
"""Where each exported name is defined (imported on first use)."""


def __getattr__(name: str) -> Any:
    """PEP 562: import an exported name on first use (and keep it)."""
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'ptplan' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names (the subpackages are internal)."""
    return sorted(__all__)
