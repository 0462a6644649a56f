"""A seeded ledger of 20 runs across SFT / RL / OPD on three model families, with repairs
(one chain), forgetting, a missed target, over-budget and off-plan runs; the review figures
in tests/test_ledger_review.py are computed by hand from these numbers."""

from __future__ import annotations

from ptplan.ledger.records import Cost, Result, RunRecord


def _run(i: str, method: str, family: str, actual: dict[str, str], planned: str | None,
         target: tuple[float, float] | None = None, general: tuple[float, float] | None = None,
         repairs: str | None = None, outcome: str = "kept", budget: str | None = None,
         hours: tuple[float, float] | None = (10.0, 10.0), algorithm: str | None = None
         ) -> RunRecord:
    costs = [Cost(phase=k.split("/")[0], capacity_type=k.split("/")[1], usd=v)
             for k, v in sorted(actual.items())]
    results = ([Result(kind="target", name="gsm8k", before=target[0], after=target[1])]
               if target else []) + \
              ([Result(kind="general", name="mmlu", before=general[0], after=general[1])]
               if general else [])
    return RunRecord(id=i, recorded_on="2026-11-01", project=f"{family}-{method}",
                     method=method, algorithm=algorithm, model_family=family, outcome=outcome,
                     repairs=repairs, planned_cost_usd=planned,
                     planned_hours=hours[0] if hours and planned else None,
                     wall_hours=hours[1] if hours else None, budget_usd=budget, costs=costs,
                     results=results)


SEED = [
    # llama-8b
    _run("s1", "sft", "llama-8b", {"update/spot": "1000.00", "eval/on_demand": "100.00"},
         "1000.00", (60, 66), (65, 62), budget="1500.00", hours=(10.0, 11.0)),
    _run("s2", "sft", "llama-8b", {"update/spot": "1200.00", "eval/on_demand": "100.00"},
         "1000.00", (60, 64), (65, 61), budget="1200.00"),
    _run("s3", "sft", "llama-8b", {"update/spot": "850.00", "eval/on_demand": "50.00"},
         "1000.00", (60, 65), (65, 64)),
    _run("s1r", "sft", "llama-8b", {"update/spot": "500.00"}, "500.00", None, (62, 65),
         repairs="s1"),
    _run("s2r", "sft", "llama-8b", {"update/spot": "700.00"}, "600.00", None, (61, 65),
         repairs="s2"),
    _run("s2rr", "sft", "llama-8b", {"update/spot": "200.00"}, "200.00", None, (65, 65),
         repairs="s2r"),
    _run("o1", "opd", "llama-8b", {"rollout-scoring/spot": "1200.00",
                                   "update/on_demand": "800.00"}, "2000.00", (60, 67),
         (65, 65)),
    _run("o2", "opd", "llama-8b", {"rollout-scoring/spot": "1500.00",
                                   "update/on_demand": "900.00"}, "2000.00", (60, 68),
         (65, 64.5)),
    _run("r1", "rl", "llama-8b", {"rollout/spot": "2000.00", "update/on_demand": "1000.00"},
         "3000.00", (60, 70), (65, 65.5), algorithm="grpo"),
    _run("r2", "rl", "llama-8b", {"rollout/spot": "3000.00", "update/on_demand": "1000.00"},
         "3000.00", (60, 59), (65, 65), outcome="rolled_back", algorithm="grpo"),
    # qwen-7b
    _run("q-s1", "sft", "qwen-7b", {"update/spot": "800.00"}, "800.00", (50, 55), (70, 69)),
    _run("q-s2", "sft", "qwen-7b", {"update/spot": "1000.00"}, "800.00", (50, 54), (70, 67.5)),
    _run("q-s3", "sft", "qwen-7b", {"update/spot": "400.00"}, "800.00", None, None,
         outcome="abandoned"),
    _run("q-s2r", "sft", "qwen-7b", {"update/spot": "300.00"}, None, None, (67.5, 70),
         repairs="q-s2", hours=None),
    _run("q-o1", "opd", "qwen-7b", {"all/mixed": "1500.00"}, "1500.00", (50, 57), (70, 70)),
    _run("q-r1", "rl", "qwen-7b", {"all/mixed": "2250.00"}, "2500.00", (50, 58), (70, 70.5),
         algorithm="ppo"),
    _run("q-r2", "rl", "qwen-7b", {"all/mixed": "2500.00"}, "2500.00", (50, 56), (70, 70),
         algorithm="dapo"),
    # mistral-7b
    _run("m-o1", "opd", "mistral-7b", {"all/mixed": "1300.00"}, "1200.00", (40, 45)),
    _run("m-s1", "sft", "mistral-7b", {"update/spot": "600.00"}, "600.00", (40, 43), (60, 58.5)),
    _run("m-r1", "rl", "mistral-7b", {"all/mixed": "2100.00"}, "2000.00", (40, 44),
         algorithm="grpo"),
]
