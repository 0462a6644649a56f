"""Deployment templates (jinja2) and the one function that renders them.

Safety contract. Templates receive plain JSON-able data built by :mod:`ptplan.rendering.context`
and may print a value only through a quoting filter:

==========  ==================================================================================
filter      emits
==========  ==================================================================================
``q``       a JSON literal (strings double-quoted with escapes; lists/maps as flow JSON). JSON
            is valid YAML 1.2 flow syntax, so it is safe in YAML and JSON files.
``hcl``     an HCL literal: like ``q``, with ``${`` and ``%{`` escaped as ``$${`` / ``%%{`` so
            that no user string opens a Terraform template sequence; maps as ``{ "k" = v }``.
``sh``      one POSIX-shell word (:func:`shell_word`, the one quoting function).
``text``    a single line for comments: control characters (newlines) replaced by spaces.
==========  ==================================================================================

A ``finalize`` hook rejects any other string reaching the output (numbers pass as they are):
a template that forgets a filter fails at render time instead of emitting an unquoted user
string. Undefined names raise (``StrictUndefined``); autoescape is off (the outputs are not
HTML). Keys are written literally in the templates, never taken from data, except label maps,
which go through ``q``/``hcl`` as whole maps.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, TemplateError


class Emitted(str):
    """A string produced by a quoting filter: safe to place in the output."""


def _json_ok(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        raise TemplateError(f"non-finite number {value!r} cannot be emitted")
    return value


def q(value: Any) -> Emitted:
    """JSON literal (safe in YAML and JSON)."""
    return Emitted(json.dumps(value, ensure_ascii=True, sort_keys=True, allow_nan=False))


def _hcl_string(s: str) -> str:
    return json.dumps(s, ensure_ascii=True).replace("${", "$${").replace("%{", "%%{")


def hcl(value: Any) -> Emitted:
    """HCL literal: strings, numbers, booleans, lists and maps (keys always quoted)."""
    if isinstance(value, bool):
        return Emitted("true" if value else "false")
    if isinstance(value, int | float):
        return Emitted(json.dumps(_json_ok(value), allow_nan=False))
    if isinstance(value, str):
        return Emitted(_hcl_string(value))
    if isinstance(value, list | tuple):
        return Emitted("[" + ", ".join(hcl(v) for v in value) + "]")
    if isinstance(value, dict):
        items = sorted(value.items())
        return Emitted("{ " + ", ".join(f"{_hcl_string(str(k))} = {hcl(v)}" for k, v in items)
                       + " }" if items else "{}")
    raise TemplateError(f"cannot emit {type(value).__name__} as HCL")


def shell_word(value: Any) -> str:
    """``value`` as one POSIX-shell word: THE quoting function of every rendered command.

    Every value ptplan writes into a shell command (``sh -c`` strings, launch scripts, SkyPilot
    ``setup``/``run``, CronJob ``args``, RayJob entrypoints) passes through here: the ``sh``
    filter in templates, :func:`shell_join` in Python code. A word of only ``[A-Za-z0-9_@%+=:,
    ./-]`` stays as it is; any other is single-quoted (``'`` written as ``'"'"'``), so ``;``,
    ``$()``, backticks, quotes, ``#``, newlines and U+2028 stay inside the word."""
    return shlex.quote(str(value))


def shell_join(words: Any) -> str:
    """``words`` as one shell command line, each through :func:`shell_word`."""
    return " ".join(shell_word(w) for w in words)


def sh(value: Any) -> Emitted:
    """One shell word (:func:`shell_word`)."""
    return Emitted(shell_word(value))


_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]+")


def text(value: Any) -> Emitted:
    """A one-line comment text (no newlines or other control characters)."""
    return Emitted(_CONTROL.sub(" ", str(value)))


def tojson_str(value: Any) -> str:
    """Canonical JSON text of a value (a plain string: still needs ``q`` to be emitted)."""
    return json.dumps(value, ensure_ascii=True, sort_keys=True, allow_nan=False)


def combine_queue(labels: dict[str, str], queue: str) -> dict[str, str]:
    """Labels plus Kueue's ``kueue.x-k8s.io/queue-name``."""
    return {**labels, "kueue.x-k8s.io/queue-name": queue}


def _finalize(value: Any) -> Any:
    if isinstance(value, Emitted):
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TemplateError(f"unquoted value {value!r}: pass it through q, hcl, sh or text")
    return _json_ok(value)


_ENV: Environment | None = None


def environment() -> Environment:
    global _ENV
    if _ENV is None:
        env = Environment(loader=PackageLoader("ptplan.templates", "."), undefined=StrictUndefined,
                          autoescape=False, keep_trailing_newline=True, trim_blocks=True,
                          lstrip_blocks=True, finalize=_finalize)
        env.filters.update(q=q, hcl=hcl, sh=sh, text=text, tojson_str=tojson_str,
                           combine_queue=combine_queue)
        _ENV = env
    return _ENV


def render(name: str, **context: Any) -> str:
    """Render template ``name`` (e.g. ``"kuberay/rayjob.yaml.j2"``) with ``context``."""
    return environment().get_template(name).render(**context)
