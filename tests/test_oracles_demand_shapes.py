"""Demand by hand for shapes the examples do not have: oversampled generation, two samples per
prompt (prefix caching), SFT eval prompts, and the decode batch a replica sustains. Expected
values are worked out from the spec and the formulas of ``docs/demand-model.md``."""

from __future__ import annotations

import dataclasses

import pytest
from conftest import EXAMPLES

from ptplan.core.hardware import gpus
from ptplan.demand import inference as inf
from ptplan.demand.decode import Conditions, decode_engine
from ptplan.demand.lengths import fixed
from ptplan.demand.model import build_demand
from ptplan.spec.project import load_spec


def _spec(tmp_path, example: str, old: str, new: str):
    text = (EXAMPLES / f"{example}.yaml").read_text(encoding="utf-8")
    assert old in text
    path = tmp_path / f"{example}.yaml"
    path.write_text(text.replace(old, new), encoding="utf-8")
    return load_spec(str(path))


def _tokens(demand, phase: str, kind: str, role: str = "policy") -> float:
    return sum(p.tokens for p in demand.parts if (p.phase, p.kind, p.role) == (phase, kind, role))


def test_oversampled_generation_by_hand(tmp_path) -> None:
    """GRPO with ``oversample_factor: 1.5``: 1.5 × the sequences are generated (and prefilled:
    one full 512-token prefill per prompt plus 7 × 16 tokens for its other samples), the
    trained and scored ones stay 300 × 256 × 8."""
    spec = _spec(tmp_path, "grpo-7b", "  samples_per_prompt: 8\n",
                 "  samples_per_prompt: 8\n  oversample_factor: 1.5\n")
    d = build_demand(spec)
    assert _tokens(d, "rollout", "decode") == pytest.approx(300 * 256 * 8 * 1.5 * 2048)
    assert _tokens(d, "rollout", "prefill") == pytest.approx(300 * 256 * 1.5 * (512 + 7 * 16))
    dec = next(p for p in d.parts if (p.phase, p.kind) == ("rollout", "decode"))
    assert dec.run_sequences == pytest.approx(256 * 8 * 1.5)
    assert _tokens(d, "update", "train") == 300 * 256 * 8 * (512 + 2048)
    assert _tokens(d, "scoring", "forward", "reference") == 300 * 256 * 8 * (512 + 2048)


def test_two_samples_share_a_prefix(tmp_path) -> None:
    """2 samples per prompt: 512 + (512 mod 16 + 16) = 528 prefill tokens per prompt."""
    spec = _spec(tmp_path, "grpo-7b", "  samples_per_prompt: 8\n  prompt_tokens",
                 "  samples_per_prompt: 2\n  prompt_tokens")
    d = build_demand(spec)
    assert _tokens(d, "rollout", "prefill") == pytest.approx(300 * 256 * 528)


def test_sft_eval_prompts_default_to_512() -> None:
    """examples/sft-8b.yaml's eval gives no prompt length: 4 runs × 1,000 prompts × 512."""
    d = build_demand(load_spec(str(EXAMPLES / "sft-8b.yaml")))
    assert _tokens(d, "eval", "prefill") == 4 * 1000 * 512


@pytest.fixture(scope="module")
def engine():
    spec = load_spec(str(EXAMPLES / "grpo-7b.yaml"))
    part = next(p for p in build_demand(spec).parts if (p.phase, p.kind) == ("rollout", "decode"))
    eng = decode_engine(part, gpus()["H100"], "fp8", spec, 0, Conditions(8))
    assert not isinstance(eng, str) and eng.batch_cap == 256
    return eng


@pytest.mark.parametrize(("capacity", "batch", "admitted"), [
    # fixed 2,048-token responses after 512-token prompts: a sequence peaks at 2,560 tokens
    (100_000.0, 39, 100_000 / 512),     # 100,000 / 2,560 = 39.06; prompts admit 195.3
    (500_000.0, 195, 256.0),            # 195.3 by KV; admission capped at max_num_seqs
    (1_000_000.0, 256, 256.0),          # 390.6 by KV: capped at 256
    (0.0, 0, 0.0),                      # no room for KV: nothing runs
])
def test_effective_batch_by_hand(engine, capacity: float, batch: int, admitted: float) -> None:
    eng = dataclasses.replace(engine, kv_capacity_tokens=capacity)
    ro = inf.Rollout(2048.0, 512.0, fixed(2048))
    got = inf.effective_batch(eng, ro)
    assert got[0] == batch
    assert got[1] == pytest.approx(admitted, rel=1e-12)


PPO_EDITS = [
    ("algorithm: grpo\n", "algorithm: ppo\n"),
    ("reference_model: true\n", "reference_model: true\nreward_model:\n  params_b: 1.5\n"
     "  layers: 28\n  hidden_size: 1536\n  heads: 12\n  kv_heads: 2\n  head_dim: 128\n"),
    ("  samples_per_prompt: 8\n  prompt_tokens",
     "  samples_per_prompt: 8\n  oversample_factor: 1.5\n  update_epochs: 2\n  prompt_tokens"),
]


def _ppo(tmp_path, extra: tuple[str, str] | None = None):
    text = (EXAMPLES / "grpo-7b.yaml").read_text(encoding="utf-8")
    for old, new in PPO_EDITS + ([extra] if extra else []):
        assert old in text, old
        text = text.replace(old, new, 1)
    path = tmp_path / "ppo.yaml"
    path.write_text(text, encoding="utf-8")
    return load_spec(str(path))


def test_ppo_parts_by_hand(tmp_path) -> None:
    """PPO on the GRPO example's data with a 1.5 B reward model, the critic of the policy's
    shape, oversampling 1.5 and 2 update epochs. Trained sequences T = 300 × 256 × 8 =
    614,400, generated G = 1.5 T; a sequence is 512 + 2,048 = 2,560 tokens, the longest
    512 + 8,192 = 8,704. Eval: 300 / 25 = 12 runs × 500 prompts × 4 samples."""
    d = build_demand(_ppo(tmp_path))
    T, G, seq, longest = 300 * 256 * 8, 300 * 256 * 8 * 1.5, 2560, 8704
    got = {(p.phase, p.name): (p.role, p.kind, p.tokens, p.seq_tokens, p.max_seq_tokens)
           for p in d.parts}
    assert got == {
        ("rollout", "prefill"): ("policy", "prefill", 300 * 384 * (512 + 7 * 16), 512, 0),
        ("rollout", "decode"): ("policy", "decode", G * 2048, longest, 0),
        ("scoring", "reference"): ("reference", "forward", T * seq, seq, longest),
        ("scoring", "reward"): ("reward", "forward", G * seq, seq, longest),
        ("update", "old_logprob"): ("policy", "forward", T * seq, seq, longest),
        ("update", "actor"): ("policy", "train", 2 * T * seq, seq, longest),
        ("update", "critic_values"): ("critic", "forward", T * seq, seq, longest),
        ("update", "critic"): ("critic", "train", 2 * T * seq, seq, longest),
        ("eval", "prefill"): ("policy", "prefill", 12 * 2000 * 512, 512, 0),
        ("eval", "decode"): ("policy", "decode", 12 * 2000 * 2048, 2560, 0),
    }
    reward = next(p for p in d.parts if p.name == "reward")
    assert reward.model.params_b == 1.5
    actor = next(p for p in d.parts if p.name == "actor")
    assert actor.lora_rank is None
    ev = next(p for p in d.parts if (p.phase, p.name) == ("eval", "decode"))
    assert (ev.context_tokens, ev.run_sequences, ev.runs, ev.prompt_tokens) == (
        512 + 1024, 2000, 12, 512)
    assert ev.lengths is not None and ev.lengths.mean == 2048


def test_eval_every_300_of_300_steps_runs_once(tmp_path) -> None:
    d = build_demand(_ppo(tmp_path, ("  every_steps: 25\n  prompts: 500", "  every_steps: 300\n"
                                                                       "  prompts: 500")))
    assert d.eval_runs == 1
    assert _tokens(d, "eval", "decode") == 2000 * 2048


def test_eval_less_often_than_the_run_has_steps(tmp_path) -> None:
    d = build_demand(_ppo(tmp_path, ("  every_steps: 25\n  prompts: 500", "  every_steps: 400\n"
                                                                       "  prompts: 500")))
    assert not [p for p in d.parts if p.phase == "eval"]
    assert "eval.every_steps 400 exceeds the 300 steps: no eval runs" in d.notes


def test_histogram_lengths_are_clipped_to_one_and_the_cap() -> None:
    """Bins at 0, 1,000 and 9,000 tokens (shares 1 : 2 : 1) under a 4,096.5 cap: lengths 1,
    1,000 and 4,096.5, weights ¼, ½, ¼, cap rounded up to 4,097; mean (1 + 2,000 + 4,096.5) / 4."""
    from ptplan.demand.lengths import from_histogram

    d = from_histogram([(0.0, 1.0), (1000.0, 2.0), (9000.0, 1.0)], 4096.5)
    assert d.lengths.tolist() == [1.0, 1000.0, 4096.5]
    assert d.weights.tolist() == [0.25, 0.5, 0.25]
    assert d.cap == 4097 and d.shape == "histogram"
    assert d.mean == pytest.approx((1 + 2000 + 4096.5) / 4)


def test_quantile_lengths_are_clipped_to_one_and_the_cap() -> None:
    """A quantile function from 0 at u = 0 to 10,000 at u = 1, capped at 4,096: no length below
    1 or above 4,096; the median point (u = 0.5 ± half a step) sits near 5,000 → 4,096."""
    from ptplan.demand.lengths import from_quantiles

    d = from_quantiles([(0.0, 0.0), (1.0, 10000.0)], 4096.0)
    assert d.lengths.min() >= 1.0 and d.lengths.max() == 4096.0
    assert d.cap == 4096 and d.shape == "quantiles"
    assert d.lengths[0] == pytest.approx(max(1.0, 10000.0 * 0.5 / len(d.lengths)))


def test_short_quantile_lengths_are_at_least_one_token() -> None:
    """0 to 10 tokens over u: the lowest points (10 × 0.5 / K < 1) are raised to 1 token."""
    from ptplan.demand.lengths import from_quantiles

    d = from_quantiles([(0.0, 0.0), (1.0, 10.0)], 4096.0)
    assert d.lengths.min() == 1.0 and d.lengths.max() < 10.0


def test_opd_teacher_scores_every_trained_sequence() -> None:
    """examples/opd-8b-from-32b.yaml: the 32.7621 B teacher scores 150 × 256 × 4 sequences of
    1,024 + 4,096 tokens; the longest is 1,024 + 16,384."""
    d = build_demand(load_spec(str(EXAMPLES / "opd-8b-from-32b.yaml")))
    t = next(p for p in d.parts if (p.phase, p.name) == ("scoring", "teacher"))
    assert (t.role, t.kind, t.tokens, t.seq_tokens, t.max_seq_tokens) == (
        "teacher", "forward", 150 * 256 * 4 * 5120, 5120, 1024 + 16384)
    assert t.model.params_b == 32.7621


def test_no_eval_block_no_eval_runs() -> None:
    from planner_fixtures import small_spec

    spec = small_spec()
    assert spec.eval is None
    assert build_demand(spec).eval_runs == 0


def test_run_on_cluster_names_bad_inputs() -> None:
    """``run_on_cluster`` (``ptplan estimate --cluster``): an unknown mode, sync or async
    pools that lack rollout or update GPUs, and an unknown GPU are one-line input errors
    (without pools at all, the split with the shortest step is taken)."""
    from ptplan.core.errors import InputError
    from ptplan.demand.cluster import run_on_cluster

    spec = load_spec(str(EXAMPLES / "grpo-7b.yaml"))
    with pytest.raises(InputError) as exc:
        run_on_cluster(spec, "H100", 16, 8, "pipelined")
    assert str(exc.value) == "mode 'pipelined': use colocated, sync or async"
    for mode in ("sync", "async"):
        for pools in ({"rollout": 8}, {"update": 8}):
            with pytest.raises(InputError) as exc:
                run_on_cluster(spec, "H100", 16, 8, mode, pools)
            assert str(exc.value) == ("pools: sync and async runs need GPUs per pool for "
                                      "rollout and update (scoring defaults to the update pool)")
    with pytest.raises(InputError) as exc:
        run_on_cluster(spec, "NoSuchGPU", 16, 8, "colocated")
    assert str(exc.value).startswith("gpu: unknown GPU 'NoSuchGPU'")


def test_run_on_cluster_async_and_sync_both_run() -> None:
    spec = load_spec(str(EXAMPLES / "grpo-7b.yaml"))
    from ptplan.demand.cluster import run_on_cluster

    for mode in ("sync", "async"):
        r = run_on_cluster(spec, "H100", 16, 8, mode, {"rollout": 8, "update": 8})
        assert r.step_seconds > 0, mode


def test_ppo_checkpoint_holds_the_critic_too(tmp_path) -> None:
    """Policy and critic (same 7.6156 B shape), bf16 weights + optimizer state: (7.6156 + 7.6156) ×
    (2 + 16 − 4) = 213.2368 GB per checkpoint."""
    from ptplan.demand.model import checkpoint_gb

    assert checkpoint_gb(_ppo(tmp_path)) == pytest.approx(213.2368, rel=1e-12)


def test_checkpoint_without_extra_optimizer_bytes(tmp_path) -> None:
    """``adam_bytes_per_param: 4`` leaves no optimizer state beyond the weights' 4 bytes: an SFT
    checkpoint is the bf16 weights alone, 8.0303 × 2 GB."""
    from ptplan.demand.model import checkpoint_gb

    spec = _spec(tmp_path, "sft-8b", "\neval:\n", "\nefficiency:\n  adam_bytes_per_param: 4\n"
                 "eval:\n")
    assert checkpoint_gb(spec) == pytest.approx(8.0303 * 2, rel=1e-12)


def test_lora_adapter_sizes_by_hand(tmp_path) -> None:
    """GRPO with a rank-16 LoRA: the adapter has ≈ 20 · r · h · L = 20 × 16 × 3,584 × 28 =
    32,112,640 parameters; a checkpoint holds them at 2 + (16 − 4) = 14 bytes each (bf16 weights
    and optimizer state), 0.44957696 GB, of which the weights are 2 bytes: 0.06422528 GB; the
    actor trains at rank 16."""
    from ptplan.costs.storage import weights_gb

    spec = _spec(tmp_path, "grpo-7b", "  finetune: full\n", "  finetune: lora\n  lora_rank: 16\n")
    d = build_demand(spec)
    params = 20 * 16 * 3584 * 28
    assert params == 32_112_640
    assert d.checkpoint_gb == pytest.approx(params * 14 / 1e9, rel=1e-12)
    assert weights_gb(d) == pytest.approx(params * 2 / 1e9, rel=1e-12)
    actor = next(p for p in d.parts if p.name == "actor")
    assert actor.lora_rank == 16
    full = build_demand(load_spec(str(EXAMPLES / "grpo-7b.yaml")))
    assert weights_gb(full) == pytest.approx(7.6156 * 2, rel=1e-12)
