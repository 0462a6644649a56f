"""Campaigns (issue #18, part 3): one MILP over the stages' cost–time frontiers.

The MILP's choice is checked against brute force over every combination of frontier points (on
random small campaigns, and on the example's real frontiers with its real hand-over prices); an
impossible deadline names the stage path that binds (exit 1); the campaign JSON holds verified
stage plans that ``check`` accepts and whose tampering it catches; ``render`` writes each stage.
"""

from __future__ import annotations

import copy
import itertools
import json
import random
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from ptplan.campaign.handover import Pricer, output
from ptplan.campaign.milp import Point, choose, longest_path
from ptplan.cli.app import app
from ptplan.spec.project import load_spec

ROOT = Path(__file__).resolve().parent.parent
EX = ROOT / "examples" / "campaign-cheap-teacher.yaml"
STAGES = ROOT / "examples" / "campaign-cheap-teacher"
runner = CliRunner()


def _brute(stages, after, points, own, pair, deadline, budget):
    best = None
    for combo in itertools.product(*(range(len(points[s])) for s in stages)):
        pick = dict(zip(stages, combo, strict=True))
        span, _, _ = longest_path(stages, after, {s: points[s][pick[s]].hours for s in stages})
        if span > deadline + 1e-9:
            continue
        cost = sum(points[s][pick[s]].cost + own(s, pick[s]) for s in stages)
        cost += sum(pair(u, pick[u], s, pick[s]) for s in stages for u in after.get(s, []))
        if budget is not None and cost > budget + 1e-9:
            continue
        if best is None or cost < best - 1e-9:
            best = cost
    return best


@pytest.mark.parametrize("seed", range(12))
def test_milp_matches_brute_force(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randint(2, 4)
    stages = [f"s{i}" for i in range(n)]
    after = {s: [u for u in stages[:i] if rng.random() < 0.6] for i, s in enumerate(stages)}
    points = {}
    region = {}
    for s in stages:  # a frontier: faster costs more
        k = rng.randint(2, 4)
        hours = sorted(rng.uniform(1, 20) for _ in range(k))
        costs = sorted((rng.uniform(10, 200) for _ in range(k)), reverse=True)
        points[s] = [Point(c, h) for c, h in zip(costs, hours, strict=True)]
        region[s] = [rng.choice("abc") for _ in range(k)]

    def own(s: str, i: int) -> float:
        return 0.5 * i if any(s in v for v in after.values()) else 0.0

    def pair(u: str, i: int, v: str, j: int) -> float:
        return 0.0 if region[u][i] == region[v][j] else 7.0

    fastest = {s: min(p.hours for p in points[s]) for s in stages}
    slowest = {s: max(p.hours for p in points[s]) for s in stages}
    lo = longest_path(stages, after, fastest)[0]
    hi = longest_path(stages, after, slowest)[0]
    for deadline in (lo, (lo + hi) / 2, hi + 1):
        for budget in (None, 250.0):
            want = _brute(stages, after, points, own, pair, deadline, budget)
            got = choose(stages, after, points, own, pair, deadline, budget)
            if want is None:
                assert got.status == "infeasible"
                continue
            assert got.status == "optimal"
            assert got.cost == pytest.approx(want, abs=1e-6)
            span, _, start = longest_path(stages, after,
                                          {s: points[s][got.pick[s]].hours for s in stages})
            assert span <= deadline + 1e-6
            assert start == got.start


def test_longest_path_by_hand() -> None:
    """a (2 h) -> b (5 h) -> d (1 h) and a -> c (3 h) -> d: the path a, b, d takes 8 h; d
    starts at max(2 + 5, 2 + 3) = 7 h."""
    stages = ["a", "b", "c", "d"]
    after = {"b": ["a"], "c": ["a"], "d": ["b", "c"]}
    span, path, start = longest_path(stages, after, {"a": 2, "b": 5, "c": 3, "d": 1})
    assert span == 8 and path == ["a", "b", "d"] and start["d"] == 7 and start["c"] == 2


def test_handover_sizes_by_hand() -> None:
    """Generated data: 20,000 prompts x 4 samples x (512 + 1536) tokens x 4 B = 0.65536 GB;
    the LoRA teacher hands its adapters' bf16 weights: 20 r h L x 2 B = 20 x 64 x 5120 x 40 x 2
    = 0.524288 GB."""
    what, gb = output(load_spec(str(STAGES / "generate.yaml")))
    assert what == "generated data" and gb == pytest.approx(0.65536)
    what, gb = output(load_spec(str(STAGES / "sft-teacher.yaml")))
    assert what == "final LoRA adapters" and gb == pytest.approx(20 * 64 * 5120 * 40 * 2 / 1e9)
    what, gb = output(load_spec(str(STAGES / "opd-student.yaml")))  # full: bf16 weights
    # the student is the Qwen3-8B preset: 8,190,735,360 parameters (its config.json)
    assert what == "final weights" and gb == pytest.approx(8.1907 * 2)


def test_egress_prices_by_hand() -> None:
    """0.5 GB from aws us-east-1: to us-west-2 inter_region, to eu-west-1 inter_continent (the
    catalog's inter_continent row, else its inter_region one), to gcp the internet; the same
    region is same_zone. Each costs GB x the catalog's rate for that path from aws."""
    from ptplan.costs.network import egress_rate, egress_rows
    from ptplan.providers.registry import load_catalog

    cat = load_catalog("embedded")
    pricer = Pricer(cat, 24.0)
    rows = egress_rows(cat)
    for dst, path in ((("aws", "us-west-2"), "inter_region"),
                      (("aws", "eu-west-1"), "inter_continent"),
                      (("gcp", "us-central1"), "internet"), (("aws", "us-east-1"), "same_zone")):
        eg = pricer.egress(("aws", "us-east-1"), dst, 0.5)
        rate = egress_rate(rows, "aws", path)
        assert eg.path == path
        assert eg.cost == pytest.approx(0.5 * (rate.usd_per_gb if rate else 0.0))
    assert pricer.egress(("aws", "us-east-1"), ("gcp", "us-central1"), 0.5).cost > 0


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("c") / "campaign.json"
    result = runner.invoke(app, ["-q", "plan", str(EX), "--format", "json", "-o", str(out)])
    assert result.exit_code == 0, result.output
    return json.loads(out.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def tight_campaign(campaign: dict, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The example with a deadline that binds: 60 % of the longest path through each stage's
    slowest (cheapest) frontier point, so that the brute force has a real choice to make (the
    example's own 24 h no longer binds since issue #39's demand model: every stage's cheapest
    point now fits it)."""
    st = campaign["stages"]
    after = {s["name"]: s["after"] for s in st}
    slow = {s["name"]: max(r["makespan_hours"] for r in s["frontier"]) for s in st}
    hours = round(0.6 * longest_path([s["name"] for s in st], after, slow)[0], 2)
    raw = yaml.safe_load(EX.read_text(encoding="utf-8"))
    raw["deadline_hours"] = hours
    for stage in raw["stages"]:
        stage["spec"] = str((EX.parent / stage["spec"]).resolve())
    tmp = tmp_path_factory.mktemp("tight")
    path = tmp / "campaign.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    out = tmp / "campaign.json"
    result = runner.invoke(app, ["-q", "plan", str(path), "--format", "json", "-o", str(out)])
    assert result.exit_code == 0, result.output
    return json.loads(out.read_text(encoding="utf-8"))


def test_example_campaign_is_optimal_over_its_frontiers(tight_campaign: dict) -> None:
    """Brute force over the example's real frontiers with its real hand-over prices, under a
    deadline that binds."""
    campaign = tight_campaign
    from ptplan.providers.registry import load_catalog

    st = campaign["stages"]
    names = [s["name"] for s in st]
    after = {s["name"]: s["after"] for s in st}
    points = {s["name"]: [Point(float(r["total_cost_usd"]), r["makespan_hours"])
                          for r in s["frontier"]] for s in st}
    pricer = Pricer(load_catalog("embedded"), campaign["deadline_hours"])
    gb = {s["name"]: s["output"]["gb"] for s in st}
    place = {s["name"]: [(r["provider"], r["region"]) for r in s["frontier"]] for s in st}
    consumers = {n: [s for s in names if n in after[s]] for n in names}

    def own(s: str, i: int) -> float:
        return pricer.storage(*place[s][i], gb[s]).cost if consumers[s] else 0.0

    def pair(u: str, i: int, v: str, j: int) -> float:
        return pricer.egress(place[u][i], place[v][j], gb[u]).cost

    want = _brute(names, after, points, own, pair, campaign["deadline_hours"],
                  campaign["budget_usd"])
    got = sum(points[s["name"]][s["point"]].cost + own(s["name"], s["point"]) for s in st)
    got += sum(pair(u, st[names.index(u)]["point"], s["name"], s["point"])
               for s in st for u in s["after"])
    assert got == pytest.approx(want, abs=1e-6)
    # the deadline binds: the cheapest point of every stage would be too slow
    slow = {s["name"]: max(p.hours for p in points[s["name"]]) for s in st}
    assert longest_path(names, after, slow)[0] > campaign["deadline_hours"]
    assert campaign["makespan_hours"] <= campaign["deadline_hours"]
    assert campaign["critical_path"] == ["generate", "teacher", "student"]


def test_campaign_json_checks_and_tampering_fails(campaign: dict, tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_text(json.dumps(campaign), encoding="utf-8")
    res = runner.invoke(app, ["check", str(good)])
    assert res.exit_code == 0 and res.output.startswith("ok:"), res.output
    from ptplan.campaign.check import stage_spec_problems

    for s in campaign["stages"]:  # every stage's plan is a verified plan of its spec
        assert stage_spec_problems(s) == [], s["name"]
        bad = copy.deepcopy(s)
        bad["plan"]["phases"][0]["tokens"] *= 2
        assert any("spec_match" in x for x in stage_spec_problems(bad))
    breaks = {
        "schedule": lambda r: r["stages"][2].__setitem__("start_hours", 0.0),
        "deadline": lambda r: r.__setitem__("deadline_hours", r["makespan_hours"] / 2),
        "handover": lambda r: r["handovers"][0].__setitem__("cost_usd", 99.0),
        "totals": lambda r: r.__setitem__("total_cost_usd", r["total_cost_usd"] + 1),
        "budget": lambda r: r.__setitem__("budget_usd", 1.0),
        "stage teacher": lambda r: r["stages"][1]["plan"].__setitem__("makespan_hours", 0.001),
    }
    for word, brk in breaks.items():
        bad = copy.deepcopy(campaign)
        brk(bad)
        f = tmp_path / "bad.json"
        f.write_text(json.dumps(bad), encoding="utf-8")
        res = runner.invoke(app, ["check", str(f)])
        assert res.exit_code == 1, (word, res.output)
        assert any(x.startswith(f"violation: {word}") for x in res.output.splitlines()), \
            (word, res.output)


def test_render_writes_every_stage(campaign: dict, tmp_path: Path) -> None:
    f = tmp_path / "c.json"
    f.write_text(json.dumps(campaign), encoding="utf-8")
    res = runner.invoke(app, ["-q", "render", str(f), "-t", "skypilot", "-o",
                              str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    for s in ("generate", "teacher", "student"):
        assert list((tmp_path / "out" / s / "skypilot").glob("*.yaml")), s
    assert "no launch for method generate" in res.output


def _campaign_file(tmp_path: Path, body: str) -> Path:
    f = tmp_path / "c.yaml"
    f.write_text(body.replace("DIR", str(STAGES)), encoding="utf-8")
    return f


def test_impossible_deadline_names_the_binding_path(tmp_path: Path) -> None:
    f = _campaign_file(tmp_path, "name: x\ndeadline_hours: 0.05\npoints: 2\nstages:\n"
                       "  - {name: generate, spec: DIR/generate.yaml}\n"
                       "  - {name: teacher, spec: DIR/sft-teacher.yaml, after: [generate]}\n"
                       "  - {name: student, spec: DIR/opd-student.yaml, after: [generate]}\n")
    res = runner.invoke(app, ["-q", "plan", str(f)])
    assert res.exit_code == 1, res.output
    line = res.output.strip()
    assert len(line.splitlines()) == 1 and "deadline 0.05 h cannot be met" in line
    assert "the stage path generate -> student needs" in line, line


@pytest.mark.parametrize(("body", "words"), [
    ("name: x\ndeadline_hours: 5\nstages:\n  - {name: a, spec: DIR/generate.yaml, after: [b]}\n"
     "  - {name: b, spec: DIR/generate.yaml, after: [a]}\n", "cycle"),
    ("name: x\ndeadline_hours: 5\nstages:\n  - {name: a, spec: DIR/generate.yaml, after: [z]}\n",
     "not a stage"),
    ("name: x\ndeadline_hours: 5\nstages:\n  - {name: a, spec: DIR/generate.yaml}\n"
     "  - {name: a, spec: DIR/generate.yaml}\n", "named twice"),
    ("name: x\ndeadline_hours: 5\nstages:\n  - {name: a, spec: DIR/missing.yaml}\n",
     "not found"),
    ("name: x\ndeadline_hours: -1\nstages:\n  - {name: a, spec: DIR/generate.yaml}\n",
     "deadline_hours"),
    ("name: x\ndeadline_hours: 5\nstages: []\n", "stages"),
    ("name: x\ndeadline_hours: 5\nstages:\n  - {name: t, spec: DIR/sft-teacher.yaml}\n",
     "no stage of the campaign"),
    ("name: x\ndeadline_hours: 5\nstages:\n  - {name: g, spec: DIR/generate.yaml}\n"
     "  - {name: t, spec: DIR/sft-teacher.yaml}\n", "does not run after it"),
])
def test_bad_campaign_files_are_one_line_exit_2(tmp_path: Path, body: str, words: str) -> None:
    res = runner.invoke(app, ["-q", "plan", str(_campaign_file(tmp_path, body))])
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], res.output
