"""ptplan: cheapest GPU cluster plans for LLM post-training.

The public Python API is what this package exports (:data:`__all__`): the loaders
(:func:`load_spec`, :func:`load_catalog`, :func:`load_policy`, :func:`load_plan`), one function
per command (:func:`estimate`, :func:`plan`, :func:`pareto`, :func:`verify`, :func:`render`,
:func:`whatif`, :func:`reserve`, :func:`simulate`, :func:`compare`), the main types
(:class:`ProjectSpec`, :class:`Plan`, :class:`Catalog`, :class:`Policy`), the errors to catch
and :data:`__version__`. They are defined in :mod:`ptplan.api`; everything else is internal.

``import ptplan`` stays cheap: the names are imported on first use (PEP 562), so the ``ptplan``
command, which imports this package first, pays nothing for them.

Five entry points share their names with subpackages: ``plan``, ``render``, ``whatif``,
``reserve`` and ``compare`` (``ptplan.plan.schema``, ``ptplan.render.targets``, ...). Here they
are the functions, whatever was imported before; each forwards the attributes it does not have
as a function to its subpackage, so ``import ptplan.plan.schema as schema`` and
``ptplan.plan.schema`` keep working. The layers are described in ``docs/architecture.md``.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

from ptplan.core.version import __version__

if TYPE_CHECKING:
    from ptplan.api import (
        compare,
        estimate,
        load_catalog,
        load_plan,
        load_policy,
        load_spec,
        pareto,
        plan,
        render,
        reserve,
        simulate,
        verify,
        whatif,
    )
    from ptplan.core.errors import InfeasibleError, InputError, PlannerError, ProviderError
    from ptplan.plan.schema import Plan
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
    "load_catalog",
    "load_plan",
    "load_policy",
    "load_spec",
    "pareto",
    "plan",
    "render",
    "reserve",
    "simulate",
    "verify",
    "whatif",
]

_HOME = {
    **dict.fromkeys(("compare", "estimate", "load_catalog", "load_plan", "load_policy",
                     "load_spec", "pareto", "plan", "render", "reserve", "simulate", "verify",
                     "whatif"), "ptplan.api"),
    **dict.fromkeys(("InfeasibleError", "InputError", "PlannerError", "ProviderError"),
                    "ptplan.core.errors"),
    "Plan": "ptplan.plan.schema",
    "Policy": "ptplan.policies.model",
    "Catalog": "ptplan.providers.base",
    "ProjectSpec": "ptplan.spec.project",
}
"""Where each exported name is defined (imported on first use)."""
_SHARED = ("compare", "plan", "render", "reserve", "whatif")
"""Entry points named like a subpackage of ptplan."""


def __getattr__(name: str) -> Any:
    """PEP 562: import an exported name on first use (and keep it)."""
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'ptplan' has no attribute {name!r}")
    value = _Shared(name) if name in _SHARED else getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names (the subpackages are internal)."""
    return sorted(__all__)


class _Shared:
    """The entry point ``ptplan.NAME`` where ``ptplan.NAME`` is also a subpackage: calling it
    calls :func:`ptplan.api.NAME` (its signature, docstring and annotations are the
    function's); any other attribute is the subpackage's (``ptplan.plan.schema``)."""

    __slots__ = ("_name",)
    _FUNCTION_ATTRS = frozenset({"__wrapped__", "__name__", "__qualname__", "__annotations__",
                                 "__defaults__", "__kwdefaults__", "__type_params__"})

    def __init__(self, name: str) -> None:
        object.__setattr__(self, "_name", name)

    def _function(self) -> Any:
        return getattr(importlib.import_module("ptplan.api"), self._name)

    def _package(self) -> types.ModuleType:
        return importlib.import_module(f"ptplan.{self._name}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._function()(*args, **kwargs)

    @property
    def __doc__(self) -> str | None:  # type: ignore[override]
        return self._function().__doc__

    @property
    def __module__(self) -> str:  # type: ignore[override]
        return str(self._function().__module__)

    def __getattr__(self, attr: str) -> Any:
        if attr == "__wrapped__":  # inspect.signature and typing.get_type_hints follow it
            return self._function()
        if attr in self._FUNCTION_ATTRS:
            return getattr(self._function(), attr)
        return getattr(self._package(), attr)

    def __setattr__(self, attr: str, value: Any) -> None:
        setattr(self._package(), attr, value)

    def __delattr__(self, attr: str) -> None:
        delattr(self._package(), attr)

    def __dir__(self) -> list[str]:
        return sorted(set(dir(self._package())) | self._FUNCTION_ATTRS)

    def __repr__(self) -> str:
        return f"<function ptplan.{self._name} (and subpackage ptplan.{self._name})>"

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (_shared, (self._name,))


def _shared(name: str) -> _Shared:
    """The entry point ``ptplan.NAME`` (what a pickled one loads as)."""
    entry = getattr(sys.modules[__name__], name)
    assert isinstance(entry, _Shared), name
    return entry


class _Package(types.ModuleType):
    """This module's class: the import system's ``setattr(ptplan, NAME, <subpackage>)`` on
    first importing ``ptplan.plan`` (and the others of :data:`_SHARED`) keeps the entry point,
    which forwards to the subpackage."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _SHARED and isinstance(value, types.ModuleType) \
                and value.__name__ == f"ptplan.{name}":
            return
        super().__setattr__(name, value)


globals().update({name: _Shared(name) for name in _SHARED})
sys.modules[__name__].__class__ = _Package
