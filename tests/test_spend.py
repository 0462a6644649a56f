"""``ptplan spend``: the bill by the plan's cost tags beside the planned cumulative cost,
through the real boto3 Cost Explorer client and the real google-cloud-bigquery client against
local servers speaking their protocols (tests/spend_fakes.py): request shape, pagination,
throttling, a failure mid-pull (exit 3, the cache keeps the last pull), missing credentials,
the figures by hand from the formula in optimizer/spend/curve.py."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from spend_fakes import FakeBigQuery, FakeCostExplorer, Item, run_items
from test_aws import SECRET, aws_env
from typer.testing import CliRunner

from ptplan.cli.app import app
from ptplan.planfile.identity import plan_prefix
from ptplan.planfile.load import load_plan
from ptplan.spend.curve import planned_cumulative

runner = CliRunner()
PLANS = Path(__file__).parent / "data" / "plans"
AWS_PLAN = str(PLANS / "grpo-aws.json")
GCP_PLAN = str(PLANS / "grpo-gcp.json")
TABLE = "billing-proj.billing.gcp_billing_export_v1_0000"
# grpo-aws.json: pools rollout (phases rollout, eval, weight_sync: 2 spot nodes at 2.4655 $/h),
# scoring (2 spot at 2.4655), update (update, checkpoint: 1 on-demand at 113.9328); all held
# the makespan, AWS_HOURS; disks 0.043835616, 0.043835616, 0.021917808 $/h; storage 17.02 $,
# network 0.00 $ (test_planned_curve_by_hand asserts these premises).
AWS_HOURS = 7.20466855326  # grpo-aws.json makespan_hours (issue #39 fixture, 2026-12-07)
# grpo-gcp.json: rollout (1 spot a3-edgegpu-8g-nolssd at 17.40688 $/h), scoring (1 spot at
# 17.40688), update (4 on-demand a3-edgegpu-8g-nolssd at 44.02255); all held GCP_HOURS; disks
# 0.02739726, 0.02739726, 0.109589041 $/h; storage 15.19 $, network 0.00 $
# (test_gcp_bigquery_query_and_result_pages asserts these premises).
GCP_HOURS = 4.27538092564  # grpo-gcp.json makespan_hours (issue #39 fixture)
PHASES = {"rollout-eval-weight_sync": ("Spot Instances", 5.0),
          "scoring": ("Spot Instances", 5.0),
          "update-checkpoint": ("On Demand Instances", 120.0)}
HOURS = 3


AWS_LABEL = plan_prefix(load_plan(AWS_PLAN))
GCP_LABEL = plan_prefix(load_plan(GCP_PLAN))
"""The plans' ``ptplan-plan`` values: the bill of each plan's own deployment."""


def items() -> list[Item]:
    """Both fixture plans' runs (one bill, two deployments), another project's and another
    plan's of the same project."""
    return run_items("grpo-7b-math", "rl", PHASES, HOURS, plans=(AWS_LABEL,)) + [
        i for i in run_items("grpo-7b-math", "rl", PHASES, HOURS, plans=(GCP_LABEL,))
        if ("ptplan-plan", GCP_LABEL) in i.tags]


@pytest.fixture
def ce(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeCostExplorer]:
    aws_env(monkeypatch, tmp_path)
    fake = FakeCostExplorer(items())
    yield fake
    fake.close()


@pytest.fixture
def bq() -> Iterator[FakeBigQuery]:
    fake = FakeBigQuery(items())
    yield fake
    fake.close()


def aws_spend(fake: Any, tmp_path: Path, *extra: str) -> Any:
    return runner.invoke(app, ["spend", AWS_PLAN, "--provider", "aws", "--since",
                               "2026-12-01T00", "--until", "2026-12-01T06", "--by", "hour",
                               "--endpoint", fake.url, "--cache", str(tmp_path / "s.sqlite"),
                               *extra])


def pools_of(plan: Any) -> list[tuple[str, list[tuple[str, int, float, float]], float, float]]:
    """Per pool: name, its allocations (capacity type, nodes, $/h, hours), disk $/h, held h:
    the figures the by-hand formulas below are written from."""
    return [(p.name, [(a.capacity_type.value, a.nodes, a.usd_per_hour, a.hours)
                      for a in p.allocations], p.disk_usd_per_hour, p.held_hours)
            for p in plan.pools]


def test_planned_curve_by_hand() -> None:
    """P(2 h) of grpo-aws from the formula: compute + disks + storage spread over the
    makespan."""
    plan = load_plan(AWS_PLAN)
    # the premises: the fixture's pools, prices, hours and storage as the comment at the top
    h = AWS_HOURS
    assert pools_of(plan) == [("rollout", [("spot", 2, 2.4655, h)], 0.043835616, h),
                              ("scoring", [("spot", 2, 2.4655, h)], 0.043835616, h),
                              ("update", [("on_demand", 1, 113.9328, h)], 0.021917808, h)]
    assert (plan.makespan_hours, plan.storage_cost_usd, plan.network_cost_usd) == (
        h, "17.02", "0.00")
    by_hand = (2 * (2 * 2.4655 + 2 * 2.4655 + 1 * 113.9328)
               + 2 * (0.043835616 + 0.043835616 + 0.021917808)
               + 17.02 * 2 / AWS_HOURS)
    assert planned_cumulative(plan, 2.0) == pytest.approx(by_hand, abs=1e-9)
    assert by_hand == pytest.approx(252.5335, abs=1e-4)
    assert planned_cumulative(plan, 0) == 0
    # capped at the makespan: the plan's total, up to the cents each item was rounded to
    for name in ("grpo-aws", "grpo-gcp", "opd-aws-mixed", "opd-gcp-mixed", "sft-gcp"):
        p = load_plan(PLANS / f"{name}.json")
        assert planned_cumulative(p, p.makespan_hours + 5) == pytest.approx(
            float(p.total_cost_usd), abs=0.01 * (3 + sum(len(x.allocations) for x in p.pools)))


def test_aws_hourly_request_pages_and_variance(ce: FakeCostExplorer, tmp_path: Path) -> None:
    res = aws_spend(ce, tmp_path, "--format", "json")
    assert res.exit_code == 0, res.output
    r = json.loads(res.stdout)
    # the request: tag filter of the run, grouped by the phase tag and purchase type, hourly
    req = ce.requests[0]
    assert req["Granularity"] == "HOURLY" and req["Metrics"] == ["UnblendedCost"]
    assert req["TimePeriod"] == {"Start": "2026-12-01T00:00:00Z", "End": "2026-12-01T06:00:00Z"}
    assert req["Filter"] == {"And": [
        {"Tags": {"Key": "ptplan-method", "Values": ["rl"], "MatchOptions": ["EQUALS"]}},
        {"Tags": {"Key": "ptplan-plan", "Values": [AWS_LABEL], "MatchOptions": ["EQUALS"]}},
        {"Tags": {"Key": "ptplan-project", "Values": ["grpo-7b-math"],
                  "MatchOptions": ["EQUALS"]}}]}
    assert req["GroupBy"] == [{"Type": "TAG", "Key": "ptplan-phase"},
                              {"Type": "DIMENSION", "Key": "PURCHASE_TYPE"}]
    # 6 hourly periods in pages of 2: three calls, the second and third with the token
    assert [q.get("NextPageToken") for q in ce.requests] == [None, "2", "4"]
    assert all("AKIAFAKEFORTESTS0000" in c["headers"]["authorization"]
               for c in ce.local.calls)
    # the other project's and the other plan's 999 $/h, and the GCP plan's run, are filtered
    # out: 130 $/h of this run; the hours after it stopped are periods without cost, so the
    # curve goes flat
    assert [p["actual_usd"] for p in r["periods"]] == [130.0] * HOURS + [0.0] * 3
    assert [p["hours"] for p in r["periods"]] == [1, 2, 3, 4, 5, 6]
    assert r["run_start"] == "2026-12-01T00:00:00Z"
    second = r["periods"][1]
    planned = (2 * (4 * 2.4655 + 113.9328) + 2 * 0.109589040 + 17.02 * 2 / AWS_HOURS)
    assert second["hours"] == 2
    assert second["planned_cumulative_usd"] == round(planned, 2) == 252.53
    assert second["variance_usd"] == round(260 - planned, 2) == 7.47
    assert second["variance_pct"] == round(100 * (260 - planned) / planned, 2)
    assert r["actual_usd"] == 390.0 and r["hours"] == 6
    groups = {g["group"]: g for g in r["groups"]}
    assert groups["update-checkpoint"]["by_purchase_type"] == {"On Demand Instances": 360.0}
    assert groups["update-checkpoint"]["planned_usd"] == round(
        6 * 113.9328 + 6 * 0.021917808, 2)
    assert groups["scoring"]["actual_usd"] == 15.0
    assert SECRET not in res.output


@pytest.mark.parametrize(("group", "key", "expect"), [
    ("capacity_type", "ptplan-capacity-type", {"spot", "on-demand"}),
    ("pool", "ptplan-pool", {"rollout", "scoring", "update"}),
])
def test_group_tag_matches_what_render_puts_on_nodes(ce: FakeCostExplorer, tmp_path: Path,
                                                       group: str, key: str,
                                                       expect: set[str]) -> None:
    res = aws_spend(ce, tmp_path, "--group", group, "--format", "json")
    assert res.exit_code == 0, res.output
    assert ce.requests[0]["GroupBy"][0] == {"Type": "TAG", "Key": key}
    r = json.loads(res.stdout)
    # the planned groups are the tag values render writes (render/context.py group labels)
    assert {g["group"] for g in r["groups"] if g["planned_usd"] > 0} - {"storage+network"} \
        == expect


def test_daily_table_markdown_and_chart(ce: FakeCostExplorer, tmp_path: Path) -> None:
    res = runner.invoke(app, ["spend", AWS_PLAN, "--provider", "aws", "--since", "2026-12-01",
                              "--until", "2026-12-03", "--endpoint", ce.url, "--cache",
                              str(tmp_path / "s.sqlite"), "--run-start", "2026-12-01T00:00Z",
                              "--format", "markdown", "--chart", str(tmp_path / "c.svg")])
    assert res.exit_code == 0, res.output
    assert ce.requests[0]["Granularity"] == "DAILY"
    assert ce.requests[0]["TimePeriod"] == {"Start": "2026-12-01", "End": "2026-12-03"}
    # P(24 h) = P(makespan) = the sum of unrounded items of grpo-aws.json: 909.71 (the plan's
    # items, each rounded to the cent, total 909.71); variance 390 - 909.71
    p24 = (AWS_HOURS * (4 * 2.4655 + 113.9328 + 0.043835616 + 0.043835616 + 0.021917808)
           + 17.02)
    assert round(p24, 2) == 909.71 and float(load_plan(AWS_PLAN).total_cost_usd) == 909.71
    assert "| 2026-12-01T00:00:00Z | 24 | 390.00 | 390.00 | 909.71 | -519.71 |" in res.stdout
    svg = (tmp_path / "c.svg").read_text()
    assert svg.startswith("<?xml") and "<svg" in svg


def test_throttling_is_retried_then_exit_3(ce: FakeCostExplorer, tmp_path: Path) -> None:
    ce.throttle = 1
    assert aws_spend(ce, tmp_path).exit_code == 0
    ce.throttle = 10
    res = aws_spend(ce, tmp_path)
    assert res.exit_code == 3
    assert "throttled" in res.output and "LimitExceededException" in res.output
    assert "spend cache is unchanged" in res.output


def test_rejected_credentials_name_the_permission(ce: FakeCostExplorer, tmp_path: Path) -> None:
    ce.denied = True
    res = aws_spend(ce, tmp_path)
    assert res.exit_code == 3, res.output
    assert "rejected the credentials" in res.output and "(ce:GetCostAndUsage)" in res.output
    assert "pricing:GetProducts" not in res.output  # the price refresh's actions, not spend's
    assert "spend cache is unchanged" in res.output


def test_failure_mid_pull_keeps_the_cache(ce: FakeCostExplorer, tmp_path: Path) -> None:
    first = aws_spend(ce, tmp_path, "--format", "json")
    assert first.exit_code == 0
    before = (tmp_path / "s.sqlite").read_bytes()
    ce.items = [*ce.items, Item(0, (("ptplan-project", "grpo-7b-math"),
                                    ("ptplan-method", "rl")), "On Demand Instances", 1.0)]
    ce.fail_token = "4"  # the third page fails after two were read
    res = aws_spend(ce, tmp_path, "--format", "json")
    assert res.exit_code == 3, res.output
    assert "InvalidNextTokenException" in res.output and res.stdout == ""
    assert (tmp_path / "s.sqlite").read_bytes() == before
    calls = len(ce.requests)
    cached = aws_spend(ce, tmp_path, "--format", "json", "--cached")
    assert cached.exit_code == 0 and len(ce.requests) == calls  # no API call
    assert json.loads(cached.stdout)["periods"] == json.loads(first.stdout)["periods"]
    with sqlite3.connect(tmp_path / "s.sqlite") as con:
        assert con.execute("SELECT count(*) FROM pulls").fetchone() == (1,)
        assert SECRET not in con.execute("SELECT body FROM pulls").fetchone()[0]


def test_malformed_amount_is_exit_3(ce: FakeCostExplorer, tmp_path: Path) -> None:
    ce.malformed = True
    res = aws_spend(ce, tmp_path)
    assert res.exit_code == 3 and "malformed" in res.output
    assert not (tmp_path / "s.sqlite").exists()


def test_missing_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    aws_env(monkeypatch, tmp_path, credentials=False)
    fake = FakeCostExplorer(items())
    try:
        res = aws_spend(fake, tmp_path)
    finally:
        fake.close()
    assert res.exit_code == 3 and "no AWS credentials" in res.output
    assert fake.requests == []


def test_input_errors(tmp_path: Path) -> None:
    base = ["spend", AWS_PLAN, "--provider", "aws", "--cache", str(tmp_path / "s.sqlite")]
    for extra, needle in ((["--since", "yesterday"], "--since: 'yesterday' is not a date"),
                          (["--since", "2026-12-05", "--until", "2026-12-01"], "not before"),
                          (["--cached", "--since", "2026-12-01", "--until", "2026-12-02"],
                           "run without --cached first"),
                          (["--chart", str(tmp_path / "c.gif")], "use .png or .svg")):
        res = runner.invoke(app, [*base, *extra])
        assert res.exit_code == 2 and needle in res.output, res.output
        assert res.output.count("\n") == 1
    res = runner.invoke(app, ["spend", GCP_PLAN, "--provider", "gcp", "--bq-table", "nope"])
    assert res.exit_code == 2 and "--bq-table: 'nope' is not PROJECT.DATASET.TABLE" in res.output


def gcp_spend(fake: Any, tmp_path: Path, *extra: str) -> Any:
    return runner.invoke(app, ["spend", GCP_PLAN, "--provider", "gcp", "--bq-table", TABLE,
                               "--since", "2026-12-01T00", "--until", "2026-12-01T04", "--by",
                               "hour", "--endpoint", fake.url, "--cache",
                               str(tmp_path / "s.sqlite"), *extra])


def test_gcp_bigquery_query_and_result_pages(bq: FakeBigQuery, tmp_path: Path) -> None:
    res = gcp_spend(bq, tmp_path, "--format", "json")
    assert res.exit_code == 0, res.output
    q = bq.queries[0]
    params = {p["name"]: p["parameterValue"]["value"] for p in q["queryParameters"]}
    assert params["group_key"] == "ptplan-phase"
    assert {params[f"k{i}"]: params[f"v{i}"] for i in range(3)} == {
        "ptplan-method": "rl", "ptplan-plan": GCP_LABEL, "ptplan-project": "grpo-7b-math"}
    assert f"FROM `{TABLE}`" in q["query"] and q["useLegacySql"] is False
    assert "TIMESTAMP_TRUNC(usage_start_time, HOUR)" in q["query"]
    # 9 rows (3 hours x 3 phases) in pages of 2: jobs.query, then getQueryResults by token
    tokens = [c["path"] for c in bq.local.calls if "/queries/" in c["path"]]
    assert len(tokens) == 4 and all("pageToken=" in t for t in tokens)
    r = json.loads(res.stdout)
    assert [p["actual_usd"] for p in r["periods"]] == [130.0] * HOURS + [0.0]
    groups = {g["group"]: g for g in r["groups"]}
    assert groups["scoring"]["by_purchase_type"] == {"Spot": 15.0}
    assert groups["update-checkpoint"]["by_purchase_type"] == {"On Demand": 360.0}
    # grpo-gcp at 1 h: compute 17.40688 + 17.40688 + 4 x 44.02255, disks, storage 15.19 over
    # the makespan; the premises first (the comment at the top)
    plan, h = load_plan(GCP_PLAN), GCP_HOURS
    assert pools_of(plan) == [("rollout", [("spot", 1, 17.40688, h)], 0.02739726, h),
                              ("scoring", [("spot", 1, 17.40688, h)], 0.02739726, h),
                              ("update", [("on_demand", 4, 44.02255, h)], 0.109589041, h)]
    assert (plan.makespan_hours, plan.storage_cost_usd, plan.network_cost_usd) == (
        h, "15.19", "0.00")
    plan_1h = (17.40688 + 17.40688 + 4 * 44.02255
               + 0.02739726 + 0.02739726 + 0.109589041 + 15.19 / GCP_HOURS)
    assert r["periods"][0]["planned_cumulative_usd"] == round(plan_1h, 2) == 214.62


def test_gcp_failed_page_keeps_the_cache(bq: FakeBigQuery, tmp_path: Path) -> None:
    assert gcp_spend(bq, tmp_path).exit_code == 0
    before = (tmp_path / "s.sqlite").read_bytes()
    bq.status = {2: 403}
    res = gcp_spend(bq, tmp_path)
    assert res.exit_code == 3 and "rejected the credentials" in res.output, res.output
    # the API the query needs, and the cache it leaves as it was (not the price cache's words)
    assert "BigQuery API is enabled" in res.output and "spend cache is unchanged" in res.output
    assert (tmp_path / "s.sqlite").read_bytes() == before
    bq.status = {0: 400}
    res = gcp_spend(bq, tmp_path)
    assert res.exit_code == 3 and "spend cache is unchanged" in res.output


def test_gcp_rate_limit_is_retried(bq: FakeBigQuery, tmp_path: Path) -> None:
    bq.rate_limited = 1
    res = gcp_spend(bq, tmp_path, "--format", "json")
    assert res.exit_code == 0, res.output
    posts = [c for c in bq.local.calls if c["method"] == "POST"]
    assert len(posts) == 2 and json.loads(res.stdout)["actual_usd"] == 390.0


def test_gcp_missing_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "no-such-key.json"))
    res = runner.invoke(app, ["spend", GCP_PLAN, "--provider", "gcp", "--bq-table", TABLE,
                              "--since", "2026-12-01", "--until", "2026-12-02", "--cache",
                              str(tmp_path / "s.sqlite")])
    assert res.exit_code == 3, res.output
    assert "no GCP credentials found by Application Default Credentials" in res.output
    assert not (tmp_path / "s.sqlite").exists()


def test_guard_pulls_the_bill_itself(ce: FakeCostExplorer, tmp_path: Path) -> None:
    """guard --spend-from aws: the same pull as spend (cached), then the decision; grpo-aws's
    budget is $25,000, so 130 $/h for 3 h with no progress data is on track:
    F = 390 + 130 * (AWS_HOURS - 3) = 390 + 130 * (7.20466855326 - 3) = 936.61."""
    def guard(until: str) -> dict[str, Any]:
        res = runner.invoke(app, ["guard", AWS_PLAN, "--spend-from", "aws", "--since",
                                  "2026-12-01T00", "--until", until, "--endpoint", ce.url,
                                  "--cache", str(tmp_path / "s.sqlite"), "--window", "2",
                                  "--format", "json"])
        assert res.exit_code == 0, res.output
        return dict(json.loads(res.stdout))

    r = guard("2026-12-01T03")
    assert (r["decision"], r["spent_usd"], r["burn_usd_per_hour"]) == ("ok", 390.0, 130.0)
    assert r["forecast_usd"] == round(390 + 130 * (AWS_HOURS - 3), 2) == 936.61
    assert ce.requests[0]["Granularity"] == "HOURLY"
    # three hours later with no cost yet (the bill lags, or the run stopped): the burn is the
    # last billed one, to hour 3; the plan's hours left are AWS_HOURS - 6 = 7.2047 - 6
    r = guard("2026-12-01T06")
    assert (r["hours"], r["billed_to_hours"], r["burn_usd_per_hour"]) == (6, 3, 130.0)
    assert r["forecast_usd"] == round(390 + 130 * (AWS_HOURS - 6), 2) == 546.61


def test_names_that_sanitise_alike_never_share_a_bill(monkeypatch: pytest.MonkeyPatch,
                                                      tmp_path: Path) -> None:
    """``grpo#7b#math`` is not ``grpo-7b-math``: a tag value that had to change carries a hash of
    the original, on every platform, so the bill pulled for one plan never holds the other's."""
    from ptplan.planfile.names import aws_tag, gcp_label, k8s_label, short_hash
    from ptplan.planfile.tags import run_cost_tags

    for f in (aws_tag, gcp_label, k8s_label):
        assert f("grpo-7b-math") == "grpo-7b-math"
        assert f("grpo#7b#math") == f"grpo-7b-math-{short_hash('grpo#7b#math')}"
    names = ["grpo-7b-math", "grpo#7b#math", "grpo 7b math", "GRPO-7b-math", "grpo-7b-math.",
             "x" * 80, "x" * 80 + "y", "###", "@@@"]
    for f in (aws_tag, gcp_label, k8s_label):
        assert len({f(n) for n in names}) == len(names), f.__name__
    aws_env(monkeypatch, tmp_path)
    real = load_plan(AWS_PLAN)
    hashed = real.model_copy(update={"spec_name": "grpo#7b#math"})
    (tmp_path / "hashed.json").write_text(hashed.model_dump_json())
    tags = {p.spec_name: run_cost_tags(p, "aws") for p in (real, hashed)}
    assert tags["grpo-7b-math"]["ptplan-project"] != tags["grpo#7b#math"]["ptplan-project"]
    assert tags["grpo-7b-math"]["ptplan-plan"] != tags["grpo#7b#math"]["ptplan-plan"]
    bill = []
    for name, usd in (("grpo-7b-math", (1.0, 1.0, 10.0)), ("grpo#7b#math", (2.0, 2.0, 20.0))):
        t = tags[name]
        phases = dict(zip(PHASES, [(ptype, x) for (ptype, _), x in zip(PHASES.values(), usd,
                                                                       strict=True)],
                          strict=True))
        bill += [i for i in run_items(t["ptplan-project"], "rl", phases, HOURS,
                                      plans=(t["ptplan-plan"],))
                 if ("ptplan-plan", t["ptplan-plan"]) in i.tags]
    fake = FakeCostExplorer(bill)
    try:
        got = {}
        for name, path in (("grpo-7b-math", AWS_PLAN), ("grpo#7b#math",
                                                         str(tmp_path / "hashed.json"))):
            res = runner.invoke(app, ["spend", path, "--provider", "aws", "--since",
                                      "2026-12-01T00", "--until", "2026-12-01T03", "--by",
                                      "hour", "--endpoint", fake.url, "--cache",
                                      str(tmp_path / f"{len(got)}.sqlite"), "--format", "json"])
            assert res.exit_code == 0, res.output
            got[name] = json.loads(res.stdout)["actual_usd"]
    finally:
        fake.close()
    assert got == {"grpo-7b-math": 12.0 * HOURS, "grpo#7b#math": 24.0 * HOURS}
