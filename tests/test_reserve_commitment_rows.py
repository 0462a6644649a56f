"""The ``reserve`` report's spend-commitment rows by hand (docs/testing.md, mutation testing of
``reserve/report.py``, 2026-12-05): every field of a commitment row, and the spend-covered
figures of the scenario and coverage rows, on the closed-form case of
``test_reserve_commitments.py``: 3 p5.48xlarge nodes all year in aws/us-east-1 (on demand
$55.04/h), an EC2 Instance Savings Plan at 50 % off bought for 3 × 55.04 × 0.5 = $82.56/h,
a Compute Savings Plan (30 % off, the embedded assumption) not bought; 52 weeks × 168 h =
8,736 paid hours.
"""

from __future__ import annotations

from typing import Any

from test_reserve_commitments import P5, solve


def _report() -> dict[str, Any]:
    r = solve({"demand": [{**P5, "nodes": 3}],
               "products": [{"name": "ri", **P5, "term_years": 1}],
               "commitments": [
                   {"name": "isp", "kind": "ec2_instance_savings_plan", "region": "us-east-1",
                    "family": "p5", "term_years": 1, "discount": 0.5},
                   {"name": "csp", "kind": "compute_savings_plan", "term_years": 1}]})
    rep: dict[str, Any] = r.report
    return rep


def test_commitment_rows_field_by_field() -> None:
    """The bought plan: $82.56/h × 8,736 h = $721,244.16, fully used (utilisation 1.0);
    the other: $0/h, no utilisation (nothing paid), its rate the embedded assumption."""
    isp, csp = _report()["commitments"]
    assert isp == {
        "commitment": "isp", "kind": "ec2_instance_savings_plan", "provider": "aws",
        "term_years": 1, "buy_week": 0, "scope": "aws p5 in us-east-1",
        "usd_per_hour": 82.56, "step_usd_per_hour": 0.001,
        "covers": ["aws/us-east-1/p5.48xlarge"], "discount_min": 0.5, "discount_max": 0.5,
        "expected_utilization": 1.0, "horizon_cost_usd": "721244.16",
        "paid_hours_in_horizon": 8736.0, "rate_source": "portfolio discount 0.5",
        "rate_assumed": False}
    assert type(isp["expected_utilization"]) is float
    assert (csp["commitment"], csp["usd_per_hour"], csp["expected_utilization"],
            csp["horizon_cost_usd"], csp["paid_hours_in_horizon"], csp["rate_assumed"],
            csp["covers"], csp["provider"], csp["discount_min"]) == (
        "csp", 0.0, None, "0.00", 8736.0, True, ["aws/us-east-1/p5.48xlarge"], "aws", 0.3)
    assert csp["rate_source"].startswith("providers/embedded.py SPEND_DISCOUNT")


def test_spend_covered_node_hours_and_nodes() -> None:
    """All 3 nodes of every week are covered by the plan: 3 × 8,736 = 26,208 node-hours in
    the scenario row (as floats), 3.0 nodes in each of the 52 coverage rows."""
    rep = _report()
    (sc,) = rep["scenarios"]
    assert sc["spend_covered_node_hours"] == 26208.0 == sc["demand_node_hours"]
    assert type(sc["spend_covered_node_hours"]) is float
    rows = rep["coverage"]
    assert len(rows) == 52 and [r["week"] for r in rows] == list(range(52))
    assert all(r["spend_covered_nodes"] == 3.0 and type(r["spend_covered_nodes"]) is float
               for r in rows)


def test_one_flexible_cud_over_two_machine_types() -> None:
    """A GCP flexible CUD (28 % off the vCPU + memory part, 20 % of each price) over 2 nodes of
    a $10/h type and 1 node of a $4/h type: it consumes 2 × 2 × 0.72 + 0.8 × 0.72 = $3.456/h
    and leaves both GPU parts on demand, 2 × 8 + 3.2 = $19.2/h: (3.456 + 19.2) × 8,736 h =
    $197,922.82 for the year (each class's on-demand remainder counted)."""
    gcp = {"provider": "gcp", "region": "us-central1"}
    r = solve({"demand": [
        {**gcp, "instance_type": "a3-highgpu-8g", "on_demand_usd_per_hour": 10.0, "nodes": 2},
        {**gcp, "instance_type": "g2-standard-48", "on_demand_usd_per_hour": 4.0, "nodes": 1}],
        "products": [],
        "commitments": [{"name": "flex", "kind": "flexible_cud", "term_years": 1,
                         "eligible_share": 0.2, "discount": 0.28}]})
    (c,) = r.report["commitments"]
    assert c["usd_per_hour"] == 3.456
    assert sorted(c["covers"]) == ["gcp/us-central1/a3-highgpu-8g",
                                   "gcp/us-central1/g2-standard-48"]
    assert r.report["expected_total_cost_usd"] == "197922.82"
