"""What ``phase_rates`` memoises on a demand (docs/testing.md, mutation testing of
``rates.py``): a phase's rates once per (phase, GPU, node size, synchronous, colocated,
policy content), and a policy's JSON (part of that key) once per policy object (``e0ddac8``).

The planner asks for the same rates thousands of times; a memo that is never hit, or a
policy serialised on every call, gives the same numbers but not the work the module promises.
These tests count the work: calls of the rates' computation and of the policy's
``model_dump_json``. Everything is built inside each test (mutmut forks its runs from a parent
that imported this module).
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import EXAMPLES

import ptplan.demand.rates as rates_mod
from ptplan.core.hardware import resolve_gpu
from ptplan.demand.model import build_demand
from ptplan.demand.rates import phase_rates
from ptplan.policies.model import Policy, parse_policy
from ptplan.spec.project import load_spec


def _demand(name: str) -> Any:
    return build_demand(load_spec(str(EXAMPLES / f"{name}.yaml")))


def _count_rate_computations(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    calls: list[tuple[Any, ...]] = []
    real = rates_mod._phase_rates

    def counting(*args: Any) -> Any:
        calls.append(args[1:4])  # phase, gpu, gpn
        return real(*args)

    monkeypatch.setattr(rates_mod, "_phase_rates", counting)
    return calls


def test_a_policys_json_is_computed_once_per_policy_object(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Three calls with one policy object serialise it once; an equal policy parsed again is
    another object (serialised once more) with the same content, so the same memoised rates."""
    text = "name: kv8\nextends: default\nkv_cache_fp8: true\n"
    pol, twin = parse_policy(text), parse_policy(text)
    assert pol is not twin and pol == twin
    dumped: list[Policy] = []
    real = Policy.model_dump_json

    def counting(self: Policy, *args: Any, **kwargs: Any) -> str:
        dumped.append(self)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Policy, "model_dump_json", counting)
    d, h100 = _demand("grpo-7b"), resolve_gpu("H100", "gpu")
    first = phase_rates(d, "rollout", h100, 8, True, pol)
    phase_rates(d, "update", h100, 8, True, pol)
    phase_rates(d, "rollout", h100, 8, False, pol)
    assert [p is pol for p in dumped] == [True]
    again = phase_rates(d, "rollout", h100, 8, True, twin)
    assert [p is twin for p in dumped] == [False, True]
    assert len(again) == len(first) > 0
    assert all(a is b for a, b in zip(again, first, strict=True))  # the memo's own objects
    # another demand has its own memo: the policy is serialised for it once more
    phase_rates(_demand("grpo-7b"), "rollout", h100, 8, True, pol)
    assert len(dumped) == 3


def test_rates_are_computed_once_per_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same question twice is answered from the memo (the same rate objects, a fresh
    list); a synchronous and an asynchronous layout share the update's rates (training always
    waits for its step) but not the rollout's; another node size or GPU is another key."""
    calls = _count_rate_computations(monkeypatch)
    d, h100, l4 = _demand("grpo-7b"), resolve_gpu("H100", "gpu"), resolve_gpu("L4", "gpu")
    pol = parse_policy("name: p\nextends: default\n")
    a = phase_rates(d, "update", h100, 8, True, pol)
    b = phase_rates(d, "update", h100, 8, True, pol)
    assert a is not b and len(a) == len(b) > 0 and all(x is y for x, y in zip(a, b, strict=True))
    assert len(calls) == 1
    phase_rates(d, "update", h100, 8, False, pol)  # training: synchronous either way
    assert len(calls) == 1
    phase_rates(d, "rollout", h100, 8, True, pol)
    phase_rates(d, "rollout", h100, 8, False, pol)
    phase_rates(d, "rollout", h100, 8, False, pol)
    assert len(calls) == 3
    phase_rates(d, "update", h100, 4, True, pol)
    phase_rates(d, "update", l4, 8, True, pol)
    assert [(c[0], c[1].name, c[2]) for c in calls] == [
        ("update", "H100", 8), ("rollout", "H100", 8), ("rollout", "H100", 8),
        ("update", "H100", 4), ("update", "L4", 8)]
