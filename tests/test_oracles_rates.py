"""Phase rates (``ptplan.demand.rates``) against a reference restated here (docs/testing.md,
mutation testing of ``rates.py``).

The reference restates, from the demand layer's per-phase cells
(``ptplan.demand.cells.phase_cell``) and the spec and policy, what ``phase_rates`` derives:
the precisions a phase may use on a GPU (the phase's own ∩ the spec's — eval following rollout
— ∩ the policy's ∩ the GPU's; the update bf16 by default, else fp16, else fp32), the
conditions it runs under (node size, colocation with training for RL only, the policy's fp8
KV cache, the policy's high-precision share of teacher scoring, synchronous generation only
when the layout waits for each step's longest response), whole replicas per node for
generation (``(gpn // g) · g`` usable GPUs) or several nodes per replica (``⌈g / gpn⌉``, the
cell re-made on that many nodes' GPUs, tensor parallel over all of them, so only where
vLLM can shard the heads over them — ``splits``: the policy's for generation, the teacher's
for scoring, none for the training engine's reference forwards; a precision that does not fit
is skipped, not the ones after it), and per node-hour figures (GPU-hours ÷ usable GPUs, the
floor in hours). Busy
hours on n nodes are the timing's seconds on n × usable GPUs ÷ 3600, or without a timing
max(node-hours ÷ n, floor).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import yaml
from conftest import EXAMPLES

from ptplan.core.hardware import resolve_gpu
from ptplan.demand.cells import Conditions, phase_cell
from ptplan.demand.model import build_demand
from ptplan.demand.rates import PhaseRate, allowed_precisions, gpu_precisions, phase_rates
from ptplan.policies.model import Policy, default_policy, parse_policy
from ptplan.spec.project import load_spec, parse_spec

ALL = ("fp32", "bf16", "fp16", "fp8", "int8")
TRAIN = ("fp32", "bf16", "fp16", "fp8")
GEN = ("rollout", "eval", "scoring")


def ref_precisions(demand: Any, phase: str, gpu: Any, policy: Policy) -> tuple[str, ...]:
    spec_p = demand.spec.precisions or {}
    own = spec_p.get(phase) or (spec_p.get("rollout") if phase == "eval" else None)
    rule = policy.phases.get(phase)
    pol = set(rule.precisions) if rule is not None and rule.precisions else None
    out = [q for q in (TRAIN if phase == "update" else ALL)
           if (own is None or q in own) and (pol is None or q in pol) and gpu.supports(q)]
    if phase == "update" and "update" not in spec_p:
        return ("bf16",) if "bf16" in out else tuple(q for q in out if q in ("fp16", "fp32"))[:1]
    return tuple(out)


def splits(m: Any, tp: int) -> bool:
    """vLLM's sharding rule, restated: the query heads split evenly; the KV heads split evenly
    or, fewer than the GPUs, replicate evenly; an MLA model has only its query heads."""
    if m.query_heads % tp:
        return False
    if m.kv_latent_dim is not None:
        return True
    return m.kv_heads % tp == 0 if m.kv_heads >= tp else tp % m.kv_heads == 0


def ref_rates(demand: Any, phase: str, gpu: Any, gpn: int, tail: bool, policy: Policy,
              colocated: bool) -> list[tuple[Any, ...]]:
    sync = tail if phase in GEN else True
    cond = Conditions(gpn, colocated and demand.spec.method not in ("sft", "generate"),
                      policy.kv_cache_fp8)
    fallback = ({str(k): v for k, v in policy.high_precision_fallback.items()}
                if phase == "scoring" else None)
    out = []
    for q in ref_precisions(demand, phase, gpu, policy):
        pc = phase_cell(demand, phase, gpu, q, fallback=fallback, cond=cond, synchronous=sync)
        if not pc.fits:
            continue
        g = pc.replica_gpus
        if phase in GEN and g <= gpn:
            npr, usable = 1, (gpn // g) * g
        elif phase in GEN:
            npr, usable = math.ceil(g / gpn), gpn
            models = ([demand.spec.model] if phase != "scoring" else
                      [p.model for p in demand.phase_parts(phase) if p.role == "teacher"])
            if not all(splits(m, npr * gpn) for m in models):
                continue  # vLLM's tensor parallel over whole nodes must split the heads
            pc = phase_cell(demand, phase, gpu, q, replica_gpus=npr * gpn, fallback=fallback,
                            cond=cond, synchronous=sync)
            if not pc.fits:
                continue
        else:
            npr, usable = math.ceil(g / gpn), gpn
        t = pc.timing
        out.append((phase, q, pc.gpu_hours / usable, npr, pc.replica_gpus, pc.gpu_hours,
                    pc.calibrated, t.floor_seconds * t.scale / 3600.0, usable, pc.layout,
                    pc.layout_multinode,
                    [float(x) for x in t.busy_seconds(np.array([0.5, 1.0, 3.0]) * usable)
                     / 3600.0]))
    return out


def got_rates(rates: list[PhaseRate]) -> list[tuple[Any, ...]]:
    return [(r.phase, r.precision, r.node_hours, r.nodes_per_replica, r.replica_gpus,
             r.gpu_hours, r.calibrated, r.floor_hours, r.usable_gpus, r.layout,
             r.layout_multinode, [r.busy(n) for n in (0.5, 1.0, 3.0)]) for r in rates]


def _big(params_b: float, heads: int = 128, kv_heads: int = 8) -> Any:
    """The generate example with a larger model (Llama-3.1-405B's shape, ``params_b`` B
    parameters): at 300 B no fp32 replica of at most 64 L4 GPUs holds it; at 150 B an fp32
    replica is 64 L4 GPUs, which on 3-GPU nodes becomes 22 nodes = 66 GPUs, over the cap. An
    engine over whole 3-GPU nodes cannot split 128 heads; 198 heads with one KV head (MQA) it
    can at 18 and 33 GPUs."""
    raw = yaml.safe_load((EXAMPLES / "generate-32b.yaml").read_text(encoding="utf-8"))
    raw["model"] = {"params_b": params_b, "layers": 126, "hidden_size": 16384, "heads": heads,
                    "kv_heads": kv_heads, "head_dim": 128}
    raw.pop("precisions")
    return build_demand(parse_spec(raw, "big"))


FP32_TOO = parse_policy("name: wide\nextends: default\nphases:\n  rollout:\n    precisions: "
                        "[fp32, bf16, fp16, fp8, int8]\n")
KV8 = parse_policy("name: kv8\nextends: default\nkv_cache_fp8: true\n")
TEACHER_HALF = parse_policy("name: half\nextends: default\nhigh_precision_fallback:\n"
                            "  teacher: 0.5\n")


def demand(name: str) -> Any:
    """A fresh demand of an example per test: ``phase_rates`` memoises on the demand, and a
    module-level one would carry un-mutated rates into mutmut's forked runs."""
    return build_demand(load_spec(str(EXAMPLES / f"{name}.yaml")))


PHASES = {n: demand(n).phases for n in ("grpo-7b", "opd-8b-from-32b", "generate-32b", "sft-8b")}
CASES = [
    (n, ph, g, gpn, tail, pol, col)
    for n in PHASES for ph in PHASES[n]
    for g in ("H100", "L4") for gpn in (1, 3, 8) for tail in (True, False)
    for pol in ("default", "kv8") for col in (False, True)
    if (gpn == 8 or (tail and pol == "default" and not col))
] + [(n, "scoring", g, gpn, True, "teacher_half", False)
     for n in ("opd-8b-from-32b",) for g in ("H100", "L4") for gpn in (1, 3, 8)
     ] + [("generate-32b", "rollout", g, 2, True, "default", False) for g in ("H100", "L4")
          ] + [("generate-32b", "rollout", g, gpn, False, "default", False)  # async, replica
               for g in ("H100", "L4") for gpn in (1, 3)]                      # over the node
POLICIES = {"default": default_policy(), "kv8": KV8, "teacher_half": TEACHER_HALF,
            "fp32": FP32_TOO}


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
def test_phase_rates_equal_the_reference(case: tuple[Any, ...]) -> None:
    name, phase, g, gpn, tail, pol, col = case
    gpu, policy = resolve_gpu(g, "gpu"), POLICIES[pol]
    d = demand(name)
    got = got_rates(phase_rates(d, phase, gpu, gpn, tail, policy, colocated=col))
    assert got == ref_rates(d, phase, gpu, gpn, tail, policy, col)


@pytest.mark.parametrize(("params_b", "gpn", "heads", "expected"), [
    (300, 8, (128, 8), [("bf16", 64, 8), ("fp16", 64, 8), ("fp8", 32, 4), ("int8", 32, 4)]),
    (300, 3, (198, 1), [("fp8", 33, 11), ("int8", 33, 11)]),
    (150, 3, (198, 1), [("bf16", 33, 11), ("fp16", 33, 11), ("fp8", 18, 6), ("int8", 18, 6)]),
    (300, 3, (128, 8), []),
    (150, 3, (198, 2), [("fp8", 18, 6), ("int8", 18, 6)]),
])
def test_a_precision_that_does_not_fit_is_skipped(params_b: float, gpn: int,
                                                  heads: tuple[int, int],
                                                  expected: list[tuple[str, int, int]]) -> None:
    """fp32 first in the precision order does not fit (no replica, or a replica of ⌈64 / 3⌉ =
    22 nodes over the 64-GPU cap); the precisions after it are still rated. bf16 at 300 B on
    3-GPU nodes: 64 GPUs → 22 nodes = 66 GPUs, over the cap too. On 3-GPU nodes an engine of
    whole nodes must still split the heads: 128 heads split over none; with 2 KV heads, 33
    GPUs do not replicate them evenly (33 % 2) while 18 do."""
    demand, gpu = _big(params_b, *heads), resolve_gpu("L4", "gpu")
    rates = phase_rates(demand, "rollout", gpu, gpn, True, FP32_TOO)
    assert [(r.precision, r.replica_gpus, r.nodes_per_replica) for r in rates] == expected
    assert got_rates(rates) == ref_rates(demand, "rollout", gpu, gpn, True, FP32_TOO, False)


def test_the_conditions_matter_in_these_cases() -> None:
    """Each condition the reference passes changes some rate above (so passing it wrong is
    caught): a synchronous layout, colocation (RL only), fp8 KV, the teacher's share."""
    h100, pol = resolve_gpu("H100", "gpu"), default_policy()
    grpo, gen = demand("grpo-7b"), demand("generate-32b")

    def hours(d: Any, phase: str, gpn: int = 8, tail: bool = True, policy: Policy = pol,
              col: bool = False) -> list[float]:
        return [r.node_hours for r in phase_rates(d, phase, h100, gpn, tail, policy, col)]

    assert hours(grpo, "rollout") != hours(grpo, "rollout", tail=False)
    assert hours(grpo, "eval") != hours(grpo, "eval", tail=False)
    assert hours(grpo, "update", tail=False) == hours(grpo, "update")  # training: always sync
    assert hours(grpo, "rollout", col=True) != hours(grpo, "rollout")
    assert hours(gen, "rollout", col=True) == hours(gen, "rollout")  # no training to share
    assert hours(grpo, "rollout", policy=KV8) != hours(grpo, "rollout")
    opd = demand("opd-8b-from-32b")
    assert hours(opd, "scoring", policy=TEACHER_HALF) != hours(opd, "scoring")
    # the default is not colocated
    assert phase_rates(grpo, "rollout", h100, 8, True) == phase_rates(grpo, "rollout", h100, 8,
                                                                      True, pol, False)


def test_precisions_by_hand() -> None:
    """The OPD example lists rollout [bf16, fp8] and no eval: eval follows rollout; scoring
    its own [bf16, fp8]. The SFT example lists none: the default policy's rollout, scoring and
    eval bf16, fp16, fp8, int8 and update bf16, fp16, fp32 (in the order fp32, bf16, fp16, fp8,
    int8)."""
    opd, grpo, sft = demand("opd-8b-from-32b"), demand("grpo-7b"), demand("sft-8b")
    h100, t4 = resolve_gpu("H100", "gpu"), resolve_gpu("T4", "gpu")
    assert allowed_precisions(opd, "eval") == ("bf16", "fp8")
    assert allowed_precisions(opd, "scoring") == ("bf16", "fp8")
    assert allowed_precisions(sft, "eval") == ("bf16", "fp16", "fp8", "int8")
    assert allowed_precisions(sft, "update") == ("fp32", "bf16", "fp16")
    # a policy without precisions: the phase's own (training formats for the update)
    bare = parse_policy("name: bare\n")
    assert allowed_precisions(sft, "update", bare) == ("fp32", "bf16", "fp16", "fp8")
    assert allowed_precisions(sft, "rollout", bare) == ("fp32", "bf16", "fp16", "fp8", "int8")
    only_fp8 = parse_policy("name: q\nextends: default\nphases:\n  rollout:\n    precisions: "
                            "[fp8]\n  update:\n    precisions: [fp32]\n")
    assert allowed_precisions(grpo, "rollout", only_fp8) == ("fp8",)
    assert allowed_precisions(grpo, "eval", only_fp8) == ("bf16", "fp8")
    # the update without a spec entry: bf16, else fp16 (T4), else fp32 (a policy of fp32 only)
    assert gpu_precisions(sft, "update", h100) == ("bf16",)
    assert gpu_precisions(sft, "update", t4) == ("fp16",)
    assert gpu_precisions(sft, "update", h100, only_fp8) == ("fp32",)
    assert gpu_precisions(grpo, "update", t4) == ()  # the spec's bf16 only; a T4 has none
    assert gpu_precisions(grpo, "rollout", h100, only_fp8) == ("fp8",)


def test_busy_hours_without_a_timing_and_layouts_by_hand() -> None:
    """Without a timing, busy hours on n nodes are max(node-hours / n, floor): 12 node-hours
    and a 2 h floor give 6 h on 2 nodes, 2 h on 8; node-hours at n are busy × n."""
    r = PhaseRate("update", "bf16", 12.0, 1, 8, 96.0, False, floor_hours=2.0)
    assert [r.busy(n) for n in (1.0, 2.0, 8.0)] == [12.0, 6.0, 2.0]
    assert r.busy_array(np.array([3.0, 0.5])).tolist() == [4.0, 24.0]
    assert r.node_hours_at(2.0) == 12.0 and r.node_hours_at(8.0) == 16.0
    assert r.layout_for(3.0) is None  # no timing: the recorded layout (none)
    # generation: the engine's tensor-parallel size and whole replicas (at least one)
    gen = demand("generate-32b")
    (bf16, _fp8) = phase_rates(gen, "rollout", resolve_gpu("H100", "gpu"), 8, True)
    assert bf16.replica_gpus == 2
    assert [bf16.layout_for(n) for n in (0.125, 0.25, 0.5, 1.0)] == [
        {"tp": 2, "dp": 1}, {"tp": 2, "dp": 1}, {"tp": 2, "dp": 2}, {"tp": 2, "dp": 4}]
    assert bf16.busy(2.0) == pytest.approx(
        float(bf16.timing.busy_seconds(np.array([16.0]))[0]) / 3600.0, rel=1e-12)
    # training: the layout the cell picks on that many GPUs
    update = phase_rates(demand("grpo-7b"), "update", resolve_gpu("H100", "gpu"), 8, True)[0]
    assert update.layout_for(1.0)["dp"] == 8 and update.layout_for(0.5)["dp"] == 4
    scoring = phase_rates(demand("grpo-7b"), "scoring", resolve_gpu("H100", "gpu"), 8, True)[0]
    assert scoring.layout_for(1.0) is None  # forward passes only


def test_calibrated_rates_equal_the_reference() -> None:
    """A measured rollout throughput on H100 rescales the phase's time (the timing's scale
    = modelled ÷ measured), the latency floor with it."""
    raw = yaml.safe_load((EXAMPLES / "grpo-7b.yaml").read_text(encoding="utf-8"))
    raw["calibration"] = [{"phase": "rollout", "gpu": "H100", "precision": "bf16",
                           "tokens_per_second_per_gpu": 900.0}]
    d, gpu, pol = build_demand(parse_spec(raw, "calibrated")), resolve_gpu("H100", "gpu"), \
        default_policy()
    rates = phase_rates(d, "rollout", gpu, 8, True, pol)
    assert all(r.calibrated and r.timing is not None and r.timing.scale != 1.0 for r in rates)
    assert got_rates(rates) == ref_rates(d, "rollout", gpu, 8, True, pol, False)
