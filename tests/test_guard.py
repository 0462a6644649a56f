"""``ptplan guard``: the decision table by hand (optimizer/spend/guard.py formulas), the CLI
with a spend file and JSONL metrics (the run ledger's reader), and ``--act`` through the real
kubernetes, boto3 (autoscaling) and google-cloud-container clients against local fakes
(tests/act_fakes.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from act_fakes import TOKEN, FakeAutoScaling, FakeGKE, FakeKube
from test_aws import SECRET, aws_env
from typer.testing import CliRunner

from ptplan.cli.app import app
from ptplan.core.errors import InputError
from ptplan.planfile.load import load_plan
from ptplan.planfile.schema import Plan
from ptplan.spend import act as act_mod
from ptplan.spend import act_clouds
from ptplan.spend.guard import billed_edge, cumulative_at, decide, parse_target, trend

runner = CliRunner()
PLANS = Path(__file__).parent / "data" / "plans"
# grpo-aws: 300 steps, makespan MAKESPAN h; budget set here to 1000 (warn 800)
MAKESPAN = load_plan(PLANS / "grpo-aws.json").makespan_hours  # 7.20849383898 h since issue #39
SERIES = [(float(h), 130.0 * h) for h in range(1, 11)]  # 130 $/h


def plan(name: str = "grpo-aws") -> Plan:
    p = load_plan(PLANS / f"{name}.json")
    return p.model_copy(update={"budget_usd": "1000.00", "budget_warn_usd": "800.00",
                                "budget_stop_usd": "1000.00"})


GOAL = parse_target("val-core/reward/mean@1>=0.8")


def test_burn_rate_and_interpolation_by_hand() -> None:
    s = [(1.0, 100.0), (2.0, 200.0), (3.0, 400.0)]
    assert cumulative_at(s, 1.5) == 150.0 and cumulative_at(s, 0) == 0
    assert cumulative_at(s, 9) == 400.0
    # the bill's edge: the last period whose cost rose; later empty periods are lag
    assert billed_edge([*s, (4.0, 400.0), (5.0, 400.0)], 5.0) == 3.0
    r = decide(plan(), [*s, (4.0, 400.0), (5.0, 400.0)], 5.0, None, window=2)
    assert (r["burn_usd_per_hour"], r["billed_to_hours"]) == (150.0, 3.0)
    assert any("over the last 2 h of billed cost (to hour 3)" in x for x in r["reasons"])
    r = decide(plan(), s, 3.0, None, window=2)
    assert r["burn_usd_per_hour"] == (400 - 100) / 2
    r = decide(plan(), s, 3.0, None, window=1.5)
    assert r["burn_usd_per_hour"] == pytest.approx((400 - 150) / 1.5, abs=1e-4)
    assert trend([(10, 0.2), (20, 0.3), (30, 0.4), (40, 0.5), (50, 0.6)], 300) == \
        pytest.approx(3.1)
    assert trend([(10, 0.5)], 300) is None


# the decision table: (case, hours, steps done, target points, decision, forecast by hand)
CASES = [
    # on track: left = (300 - 150) * 3 / 150 = 3 h; F = 390 + 130 * 3 = 780 < warn 800
    ("on track", 3.0, 150, None, "ok", 390 + 130 * 3),
    # over burn (warn): left = 180 * 3 / 120 = 4.5 h; F = 390 + 585 = 975 in [800, 1000)
    ("over burn, warn", 3.0, 120, None, "warn", 390 + 130 * 4.5),
    # over burn (stop): left = 200 * 3 / 100 = 6 h; F = 390 + 780 = 1170 >= stop 1000
    ("over burn, stop", 3.0, 100, None, "stop", 390 + 130 * 6),
    # target reached early: F = 1170 would stop, but the run has what it was for: only warn
    ("target reached early", 3.0, 100, [(50, 0.5), (100, 0.85)], "warn", 390 + 130 * 6),
    # target missed at the threshold: spent 130 * 8 = 1040 >= 1000, latest 0.6 < 0.8
    ("target missed at stop", 8.0, 250, [(200, 0.55), (250, 0.6)], "stop",
     1040 + 130 * 50 * 8 / 250),
    # no progress data: the plan's hours left, MAKESPAN - 3 (grpo-aws.json: 7.2085 - 3);
    # F = 390 + 130 * 4.2085 = 937.10 in [800, 1000)
    ("no progress data", 3.0, None, None, "warn", 390 + 130 * (MAKESPAN - 3)),
]


@pytest.mark.parametrize(("case", "hours", "done", "points", "decision", "forecast"), CASES,
                         ids=[c[0] for c in CASES])
def test_decision_table(case: str, hours: float, done: int | None,
                        points: list[tuple[int, float]] | None, decision: str,
                        forecast: float) -> None:
    r = decide(plan(), SERIES, hours, done, GOAL if points else None, points, window=2)
    assert r["decision"] == decision, r["reasons"]
    assert r["exit_code"] == {"ok": 0, "warn": 10, "stop": 11}[decision]
    assert r["forecast_usd"] == round(forecast, 2)
    assert r["burn_usd_per_hour"] == 130.0
    assert all(line.count("\n") == 0 for line in r["reasons"])
    assert r["reasons"][0].startswith(("ok:", "warn:", "stop:"))


def test_reasons_name_the_figures() -> None:
    r = decide(plan(), SERIES, 3.0, 100, None, None, window=2)
    assert r["reasons"] == [
        "stop: forecast $1,170.00 ≥ stop $1,000.00 (the plan's budget): spent $390.00 in 3 h, "
        "burn $130.00/h over the last 2 h of billed cost, forecast $1,170.00 at completion "
        "(100/300 steps in "
        "3 h)"]
    r = decide(plan(), SERIES, 8.0, 250, GOAL, [(200, 0.55), (250, 0.6)], window=2)
    assert r["reasons"][0] == ("stop: spent $1,040.00 ≥ stop $1,000.00 (the plan's budget) "
                               "without the target")
    assert any("trajectory reaches" in x for x in r["reasons"])
    # the line through (200, 0.55), (250, 0.6) reaches 0.65 at step 300: short of 0.8
    assert r["target"]["projected_at_completion"] == pytest.approx(0.65)


def test_an_empty_bill_is_a_warning() -> None:
    r = decide(plan(), [], 0.0, None, window=2)
    assert r["decision"] == "warn" and r["spent_usd"] == 0
    assert any("no cost of the plan's tags in the bill yet" in x for x in r["reasons"])


def test_plan_without_budget_uses_its_total() -> None:
    p = load_plan(PLANS / "grpo-aws.json").model_copy(update={
        "budget_usd": None, "budget_warn_usd": None, "budget_stop_usd": None})
    r = decide(p, SERIES, 3.0, 150, window=2)
    # the plan's total (grpo-aws.json: 910.19) x policy warn_at 0.8 / stop_at 1.0
    total = float(p.total_cost_usd)
    assert (r["warn_usd"], r["stop_usd"]) == (round(total * 0.8, 2), total)
    assert "no budget in the plan" in r["thresholds_from"]


def test_target_parsing() -> None:
    assert parse_target("loss<=0.5").op == "<=" and parse_target("a/b@1 >= 1e-1").value == 0.1
    for bad in ("reward", "reward>0.8", ">=0.8", "reward>=x"):
        with pytest.raises(InputError, match="--target"):
            parse_target(bad)


def spend_file(tmp_path: Path, hours: int) -> Path:
    f = tmp_path / "spend.json"
    f.write_text(json.dumps({"hours": float(hours), "periods": [
        {"hours": float(h), "actual_cumulative_usd": 130.0 * h} for h in range(1, hours + 1)]}))
    return f


def metrics_file(tmp_path: Path, steps: int, reward: float) -> Path:
    f = tmp_path / "metrics.jsonl"
    lines = [{"step": s, "data": {"timing_s/gen": 20.0, "val-core/reward/mean@1":
                                  reward * s / steps}} for s in range(10, steps + 1, 10)]
    f.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return f


def plan_file(tmp_path: Path, name: str = "grpo-aws") -> str:
    f = tmp_path / f"{name}.json"
    f.write_text(plan(name).model_dump_json())
    return str(f)


def test_cli_stop_json_and_lines(tmp_path: Path) -> None:
    args = ["guard", plan_file(tmp_path), "--spend-from", str(spend_file(tmp_path, 3)),
            "--metrics", f"jsonl:{metrics_file(tmp_path, 100, 0.6)}", "--target",
            "val-core/reward/mean@1>=0.8", "--window", "2"]
    res = runner.invoke(app, [*args, "--format", "json"])
    assert res.exit_code == 11, res.output
    r = json.loads(res.stdout)
    assert (r["steps_done"], r["spent_usd"], r["forecast_usd"]) == (100, 390.0, 1170.0)
    assert r["target"]["latest"] == pytest.approx(0.6) and not r["target"]["reached"]
    res = runner.invoke(app, args)
    assert res.exit_code == 11
    assert res.stdout.splitlines()[0] == "stop: grpo-7b-math"
    assert res.stdout.splitlines()[1].startswith("stop: forecast $1,170.00 ≥ stop $1,000.00")


def test_cli_ok_and_input_errors(tmp_path: Path) -> None:
    p = plan_file(tmp_path)
    res = runner.invoke(app, ["guard", p, "--spend-from", str(spend_file(tmp_path, 3)),
                              "--metrics", str(metrics_file(tmp_path, 150, 0.5)),
                              "--window", "2"])
    assert res.exit_code == 0 and res.stdout.startswith("ok: grpo-7b-math"), res.output
    for extra, needle in (
            (["--target", "val-core/nope>=1", "--metrics", str(tmp_path / "metrics.jsonl")],
             "--target: no metric 'val-core/nope'"),
            (["--metrics", "mlflow:abc"], "mlflow:RUN_ID@TRACKING_URI"),
            (["--metrics", str(tmp_path / "missing")], "does not exist"),
            (["--dry-run"], "--dry-run: only with --act")):
        res = runner.invoke(app, ["guard", p, "--spend-from", str(spend_file(tmp_path, 3)),
                                  *extra])
        assert res.exit_code == 2 and needle in res.output, res.output
    bad = tmp_path / "bad.json"
    bad.write_text('{"periods": 3}')
    res = runner.invoke(app, ["guard", p, "--spend-from", str(bad)])
    assert res.exit_code == 2 and "not the JSON of `ptplan spend --format json`" in res.output


# ---- --act ---------------------------------------------------------------------------------
def _targets(name: str) -> Any:
    return act_mod.targets_for(plan(name), "training", "ptplan", "my-proj")


GOLDEN_PLANS = sorted((Path(__file__).parent / "golden" / "cli").glob("plan-*.json"))


@pytest.mark.parametrize("path", [*sorted(PLANS.glob("*.json")), *GOLDEN_PLANS],
                         ids=lambda p: p.stem)
def test_act_targets_are_the_names_render_gives(path: Path) -> None:
    """``guard --act`` stops the objects by the names render gave them, found without rendering
    (:mod:`ptplan.planfile.deployment`): the RayJob, every Karpenter NodePool with its GPU resource,
    every GKE node pool, in render's order; the run's tags as render writes them, the plan's
    prefix as every object's ``ptplan-plan`` label."""
    from ptplan.rendering.context import build_context
    from ptplan.rendering.facts import facts_for

    p = load_plan(path)
    ctx = build_context(p, facts_for(p, None), cluster="c1")
    t = act_mod.targets_for(p, "training", "c1", None)
    assert t.rayjob == t.prefix == ctx["project"]["prefix"]
    assert t.karpenter_nodepools == tuple((g["full_name"], g["gpu_resource"])
                                          for g in ctx["groups"])
    assert t.gke_node_pools == tuple(g["full_name"] for g in ctx["groups"])
    platform = p.provider if p.provider in ("aws", "gcp") else "k8s"
    labels = ctx["labels"][platform]
    assert t.tags == {k: labels[k] for k in ("ptplan-plan", "ptplan-project", "ptplan-method")}
    assert all(g["labels"][platform]["ptplan-plan"] == t.prefix for g in ctx["groups"])
    # every name within its platform's limits, the digest whole in each
    digest = t.prefix.rsplit("-", 1)[1]
    assert len(t.rayjob) <= 47  # KubeRay's RayJob name limit
    for name in (*t.gke_node_pools, *(n for n, _ in t.karpenter_nodepools)):
        assert len(name) <= 40 and f"-{digest}-" in name and name[0].isalpha(), name


def kube_objects(t: Any, label: str | None = None) -> dict[str, dict[str, Any]]:
    """The RayJob and NodePools at ``t``'s names, labelled ``ptplan-plan: label`` (default:
    the plan's own prefix)."""
    meta = {"labels": {"ptplan-plan": t.prefix if label is None else label}}
    objs = {f"/apis/ray.io/v1/namespaces/{t.namespace}/rayjobs/{t.rayjob}": {
        "apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": t.rayjob, **meta},
        "spec": {"suspend": False}}}
    for name, res in t.karpenter_nodepools:
        objs[f"/apis/karpenter.sh/v1/nodepools/{name}"] = {
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": name, **meta}, "spec": {"limits": {res: "16", "nodes": "2"}}}
    return objs


def other_plan(name: str = "grpo-aws") -> Plan:
    """The same spec re-planned with another budget: another plan, another prefix."""
    return plan(name).model_copy(update={"budget_usd": "2000.00", "budget_warn_usd": "1600.00",
                                         "budget_stop_usd": "2000.00"})


@pytest.fixture
def aws_act(monkeypatch: pytest.MonkeyPatch, tmp_path: Path
            ) -> Iterator[tuple[FakeKube, FakeAutoScaling, str]]:
    aws_env(monkeypatch, tmp_path)
    t = _targets("grpo-aws")
    kube = FakeKube(kube_objects(t))
    asg = FakeAutoScaling({
        "eks-gpu-a": {"tags": t.tags, "min": 0, "max": 4, "desired": 2},
        "eks-gpu-b": {"tags": t.tags, "min": 1, "max": 2, "desired": 1},
        "other-team": {"tags": {"ptplan-project": "else"}, "min": 1, "max": 3, "desired": 3}})
    yield kube, asg, kube.kubeconfig(tmp_path / "kubeconfig")
    kube.close()
    asg.close()


def test_act_aws_suspends_rayjob_zeroes_nodepools_and_asgs(
        aws_act: tuple[FakeKube, FakeAutoScaling, str], tmp_path: Path) -> None:
    kube, asg, kubeconfig = aws_act
    t = _targets("grpo-aws")
    args = ["guard", plan_file(tmp_path), "--spend-from", str(spend_file(tmp_path, 8)),
            "--act", "--namespace", "training", "--kubeconfig", kubeconfig,
            "--act-endpoint", asg.url, "--format", "json"]
    dry = runner.invoke(app, [*args, "--dry-run"])
    assert dry.exit_code == 11, dry.output
    assert kube.patches == [] and asg.actions == []
    calls = json.loads(dry.stdout)["actions"]["calls"]
    assert calls[:2] == [
        f"kubernetes: GET rayjobs.ray.io/v1 training/{t.rayjob} (must carry ptplan-plan="
        f"{t.prefix})",
        f'kubernetes: PATCH rayjobs.ray.io/v1 training/{t.rayjob} {{"spec": {{"suspend": true}}}}']
    res = runner.invoke(app, args)
    assert res.exit_code == 11, res.output
    path, ctype, body = kube.patches[0]
    assert path == f"/apis/ray.io/v1/namespaces/training/rayjobs/{t.rayjob}"
    assert ctype == "application/merge-patch+json" and body == {"spec": {"suspend": True}}
    pools = kube.patches[1:]
    assert len(pools) == 3 and all(b["spec"]["limits"]["nodes"] == "0" for _, _, b in pools)
    assert kube.objects[path]["spec"]["suspend"] is True
    assert {n: (g["min"], g["max"], g["desired"]) for n, g in asg.groups.items()} == {
        "eks-gpu-a": (0, 0, 0), "eks-gpu-b": (0, 0, 0), "other-team": (1, 3, 3)}
    described = [a for a in asg.actions if a["Action"] == "DescribeAutoScalingGroups"]
    assert [described[0][f"Filters.member.{i}.Name"] for i in (1, 2, 3)] == [
        "tag:ptplan-method", "tag:ptplan-plan", "tag:ptplan-project"]
    assert len(described) == 2  # one group per page: NextToken followed
    acts = json.loads(res.stdout)["actions"]
    assert acts["complete"] and acts["failed"] == [] and acts["plan_label"] == t.prefix
    done = {d["change"]: d["undo"] for d in acts["done"]}
    assert done[f"suspended RayJob training/{t.rayjob}"] == (
        f"kubectl --kubeconfig {kubeconfig} patch rayjobs.ray.io {t.rayjob} -n training --type "
        "merge -p '{\"spec\":{\"suspend\":false}}'")
    pool = t.karpenter_nodepools[0][0]
    assert done[f'NodePool {pool}: limits 0 (were {{"nodes":"2","nvidia.com/gpu":"16"}})'] == (
        f"kubectl --kubeconfig {kubeconfig} patch nodepools.karpenter.sh {pool} --type merge "
        "-p '{\"spec\":{\"limits\":{\"nodes\":\"2\",\"nvidia.com/gpu\":\"16\"}}}'")
    assert done["Auto Scaling group eks-gpu-b: 0 instances (was min 1, max 2, desired 1)"] == (
        "aws autoscaling update-auto-scaling-group --region us-east-1 "
        "--auto-scaling-group-name eks-gpu-b --min-size 1 --max-size 2 --desired-capacity 1")
    assert SECRET not in res.output and TOKEN not in res.output


def test_act_leaves_another_plans_objects_alone(monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path) -> None:
    """Two plans of one spec in one cluster and account: the guard of one stops its own objects
    and no object of the other, even where the other's sit at its names (a pre-prefix
    deployment, a collision) or a listing answers the other's Auto Scaling groups too."""
    aws_env(monkeypatch, tmp_path)
    mine, theirs = _targets("grpo-aws"), act_mod.targets_for(other_plan(), "training",
                                                                 "ptplan", "my-proj")
    assert mine.prefix != theirs.prefix and mine.rayjob != theirs.rayjob
    assert {n for n, _ in mine.karpenter_nodepools}.isdisjoint(
        n for n, _ in theirs.karpenter_nodepools)
    kube = FakeKube({**kube_objects(mine), **kube_objects(theirs)})
    asg = FakeAutoScaling({
        "mine": {"tags": mine.tags, "min": 1, "max": 2, "desired": 2},
        "theirs": {"tags": theirs.tags, "min": 1, "max": 2, "desired": 2},
        "untagged": {"tags": {}, "min": 1, "max": 1, "desired": 1}}, filter_tags=False)
    args = ["guard", plan_file(tmp_path), "--spend-from", str(spend_file(tmp_path, 8)), "--act",
            "--namespace", "training", "--kubeconfig", kube.kubeconfig(tmp_path / "kc"),
            "--act-endpoint", asg.url, "--format", "json"]
    try:
        res = runner.invoke(app, args)
        touched = {p for p, _, _ in kube.patches}
        theirs_paths = set(kube_objects(theirs))
        assert touched == set(kube_objects(mine)) and touched.isdisjoint(theirs_paths)
        assert all(kube.objects[p] == kube_objects(theirs)[p] for p in theirs_paths)
        assert [(g["min"], g["max"], g["desired"]) for g in asg.groups.values()] == [
            (0, 0, 0), (1, 2, 2), (1, 1, 1)]
        # the listing answered all three; the two not carrying this plan's tag are refused
        assert res.exit_code == 12, res.output
        acts = json.loads(res.stdout)["actions"]
        assert [f["what"] for f in acts["failed"]] == ["scale Auto Scaling group theirs to 0",
                                                       "scale Auto Scaling group untagged to 0"]
        assert f"ptplan-plan='{theirs.prefix}', not ptplan-plan='{mine.prefix}'" in \
            acts["failed"][0]["error"]
        # the other plan's objects at this plan's names (a deployment from before the prefix)
        kube.close()
        kube = FakeKube(kube_objects(mine, label=theirs.prefix))
        asg.groups = {"theirs": {"tags": theirs.tags, "min": 1, "max": 2, "desired": 2}}
        asg.filter_tags = True
        res = runner.invoke(app, [*args[:-6], "--kubeconfig", kube.kubeconfig(tmp_path / "k2"),
                                  *args[-4:]])
        assert res.exit_code == 12, res.output
        assert kube.patches == [] and asg.groups["theirs"]["desired"] == 2
        acts = json.loads(res.stdout)["actions"]
        assert acts["done"] == [] and len(acts["failed"]) == 4  # the RayJob, three NodePools
        assert all("not this plan's, left untouched" in f["error"] for f in acts["failed"])
        assert acts["unchanged"] == [f"no Auto Scaling group carries ptplan-plan={mine.prefix} "
                                     "and the run's tags (Karpenter nodes go with the NodePool "
                                     "limits)"]
    finally:
        kube.close()
        asg.close()


def test_partial_act_reports_what_was_done_and_how_to_undo_it(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The RayJob suspended and the NodePools zeroed, then an Auto Scaling update is denied:
    the report lists the changes with their undo commands, the failure with its error, the
    group after it is still stopped, and the exit is 12, never \"nothing was changed\"."""
    aws_env(monkeypatch, tmp_path)
    t = _targets("grpo-aws")
    kube = FakeKube(kube_objects(t))
    asg = FakeAutoScaling({"eks-gpu-a": {"tags": t.tags, "min": 0, "max": 4, "desired": 2},
                           "eks-gpu-b": {"tags": t.tags, "min": 1, "max": 2, "desired": 1}},
                          fail_update=("eks-gpu-a",))
    args = ["guard", plan_file(tmp_path), "--spend-from", str(spend_file(tmp_path, 8)), "--act",
            "--namespace", "training", "--kubeconfig", kube.kubeconfig(tmp_path / "kc"),
            "--act-endpoint", asg.url]
    try:
        res = runner.invoke(app, args)
        js = runner.invoke(app, [*args, "--format", "json"])
    finally:
        kube.close()
        asg.close()
    assert res.exit_code == 12, res.output
    lines = res.stdout.splitlines()
    done = [ln for ln in lines if ln.startswith("done: ")]
    assert done[0] == f"done: suspended RayJob training/{t.rayjob}"
    assert len(done) == 5  # the RayJob, three NodePools, eks-gpu-b
    undo = [ln for ln in lines if ln.startswith("  undo: ")]
    assert len(undo) == 5 and undo[0].startswith("  undo: kubectl ") and \
        "'{\"spec\":{\"suspend\":false}}'" in undo[0]
    (failed,) = [ln for ln in lines if ln.startswith("failed: ")]
    assert failed.startswith("failed: scale Auto Scaling group eks-gpu-a to 0: AWS rejected the "
                             "credentials for Auto Scaling group update of eks-gpu-a "
                             "(AccessDenied: ")
    assert "that call changed nothing" in failed and "nothing was changed" not in res.output
    assert lines[-1] == "act: incomplete: 5 change(s) done (undo above), 1 failed or refused"
    assert "error: guard --act: 1 of the stop's actions failed or were refused, 5 done" in \
        res.output
    assert SECRET not in res.output and TOKEN not in res.output
    r = json.loads(js.stdout)
    assert js.exit_code == 12 and r["exit_code"] == 12 and r["decision"] == "stop"
    assert r["actions"]["complete"] is False and len(r["actions"]["failed"]) == 1
    # the second run finds everything already stopped but the denied group
    assert len(r["actions"]["unchanged"]) == 5 and r["actions"]["done"] == []


def test_failed_act_errors_are_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    report = act_mod.ActReport()
    report.fail("scale X", "GET https://guard:hunter2@k8s.example/apis failed; token=abc123")
    assert report.failed == [{"what": "scale X", "error": "GET https://guard:***@k8s.example/"
                                                          "apis failed; token=***"}]


def test_act_only_on_stop_and_kube_errors(aws_act: tuple[FakeKube, FakeAutoScaling, str],
                                          tmp_path: Path) -> None:
    kube, asg, kubeconfig = aws_act
    t = _targets("grpo-aws")
    ok = runner.invoke(app, ["guard", plan_file(tmp_path), "--spend-from",
                             str(spend_file(tmp_path, 1)), "--act", "--kubeconfig", kubeconfig,
                             "--act-endpoint", asg.url, "--metrics",
                             str(metrics_file(tmp_path, 290, 0.9))])
    assert ok.exit_code == 0 and kube.patches == [], ok.output
    # the RayJob is not in the namespace given: 404, reported; the cluster-scoped NodePools
    # and the Auto Scaling groups are still stopped; exit 12
    res = runner.invoke(app, ["guard", plan_file(tmp_path), "--spend-from",
                              str(spend_file(tmp_path, 8)), "--act", "--kubeconfig",
                              kubeconfig, "--act-endpoint", asg.url, "--namespace", "other"])
    assert res.exit_code == 12, res.output
    assert f"failed: suspend RayJob other/{t.rayjob}: reading RayJob other/{t.rayjob} failed " \
        "(404 Not Found)" in res.output, res.output
    assert len(kube.patches) == 3 and asg.groups["eks-gpu-a"]["desired"] == 0


def test_act_gke_node_pools(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(act_clouds, "POLL_SECONDS", 0.0)
    t = _targets("grpo-gcp")
    theirs = act_mod.targets_for(other_plan("grpo-gcp"), "training", "ptplan", "my-proj")
    kube = FakeKube(kube_objects(t))
    # the plan's region (grpo-gcp.json: northamerica-northeast2 since issue #39)
    region = plan("grpo-gcp").region
    base = f"projects/my-proj/locations/{region}/clusters/ptplan/nodePools"
    assert t.region == region
    gke = FakeGKE({
        **{f"{base}/{n}": {"autoscaling": True, "size": 2, "labels": {"ptplan-plan": t.prefix}}
           for n in t.gke_node_pools},
        **{f"{base}/{n}": {"autoscaling": True, "size": 2,
                           "labels": {"ptplan-plan": theirs.prefix}}
           for n in theirs.gke_node_pools}})
    try:
        res = runner.invoke(app, ["guard", plan_file(tmp_path, "grpo-gcp"), "--spend-from",
                                  str(spend_file(tmp_path, 8)), "--act", "--namespace",
                                  "training", "--kubeconfig", kube.kubeconfig(tmp_path / "kc"),
                                  "--gcp-project", "my-proj", "--act-endpoint", gke.url])
    finally:
        kube.close()
        gke.close()
    assert res.exit_code == 11, res.output
    assert all(gke.pools[f"{base}/{n}"] == {"autoscaling": False, "size": 0,
                                            "labels": {"ptplan-plan": t.prefix}}
               for n in t.gke_node_pools)
    assert all(gke.pools[f"{base}/{n}"]["size"] == 2 for n in theirs.gke_node_pools)
    verbs = [(m, u.rsplit(":", 1)[-1] if ":" in u else "op" if "/operations/" in u else "pool")
             for m, u, _ in gke.requests]
    assert verbs[:4] == [("GET", "pool"), ("POST", "setAutoscaling"), ("GET", "op"),
                         ("POST", "setSize")]
    assert len(t.gke_node_pools) >= 3 and f"done: GKE node pool {t.gke_node_pools[0]}: " \
        "autoscaling off, 0 nodes" in res.stdout
    assert f"  undo: gcloud container node-pools update {t.gke_node_pools[0]} --cluster ptplan " \
        f"--region {region} --project my-proj --enable-autoscaling --total-min-nodes 0 " \
        "--total-max-nodes 4 --location-policy ANY" in res.stdout


def test_act_without_kubernetes_configuration(monkeypatch: pytest.MonkeyPatch,
                                              tmp_path: Path) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))
    res = runner.invoke(app, ["guard", plan_file(tmp_path), "--spend-from",
                              str(spend_file(tmp_path, 8)), "--act"])
    assert res.exit_code == 3 and "no Kubernetes configuration" in res.output, res.output
    assert "nothing was changed" in res.output
    assert res.output.count("error:") == 1
