"""Rendering plans that book capacity (issue #15, item 5): the AWS capacity block as Terraform
(the offering, then the purchase, tagged for Karpenter), a Karpenter NodePool of capacity type
``reserved`` whose EC2NodeClass selects that reservation, a Kueue flavor for it, and a GKE node
pool with DWS queued provisioning (flex-start); ``render --check`` passes on both."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from ptplan.cli.app import app

ROOT = Path(__file__).resolve().parent.parent
AWS = """as_of: 2026-11-01
name: awsblocks
offers:
  - {provider: aws, region: us-east-1, instance_type: p5.48xlarge, gpu: H100, gpus_per_node: 8,
     on_demand_usd_per_hour: 55.04, block_usd_per_hour: 20.0, block_unit_hours: 24, max_nodes: 8}
  - {provider: aws, region: us-east-1, zone: use1-az2, instance_type: g6e.12xlarge, gpu: L40S,
     gpus_per_node: 4, spot_usd_per_hour: 3.0, on_demand_usd_per_hour: 10.49, max_nodes: 8}
storage_tiers:
  - {provider: aws, region: us-east-1, tier: s3_standard, usd_per_gb_month: 0.023}
  - {provider: aws, region: us-east-1, tier: ebs_gp3, usd_per_gb_month: 0.08, access: block}
"""
GCP = """as_of: 2026-11-01
name: gcpflex
offers:
  - {provider: gcp, region: us-central1, instance_type: a3-highgpu-8g, gpu: H100, gpus_per_node: 8,
     on_demand_usd_per_hour: 88.25, flex_start_usd_per_hour: 40.0, flex_start_wait_hours: 1.5,
     max_nodes: 8}
  - {provider: gcp, region: us-central1, zone: us-central1-a, instance_type: g2-standard-48,
     gpu: L4, gpus_per_node: 4, spot_usd_per_hour: 1.5, on_demand_usd_per_hour: 4.0,
     max_nodes: 16}
storage_tiers:
  - {provider: gcp, region: us-central1, tier: gcs_standard, usd_per_gb_month: 0.02}
  - {provider: gcp, region: us-central1, tier: pd_balanced, usd_per_gb_month: 0.10, access: block}
"""


@pytest.fixture(autouse=True)
def _today(monkeypatch):
    monkeypatch.setenv("PTPLAN_TODAY", "2026-12-04")


def _plan_and_render(tmp_path: Path, provider: str, catalog: str) -> tuple[dict, Path]:
    spec = yaml.safe_load((ROOT / "examples" / "grpo-7b.yaml").read_text())
    spec["placement"]["providers"] = [provider]
    spec["data"]["steps"] = 3000
    spec_path, cat_path = tmp_path / "spec.yaml", tmp_path / "cat.yaml"
    spec_path.write_text(yaml.safe_dump(spec))
    cat_path.write_text(catalog)
    out = tmp_path / "plan.json"
    runner = CliRunner()
    res = runner.invoke(app, ["-q", "plan", str(spec_path), "--catalog", str(cat_path),
                              "--start-after", "2026-12-10", "--format", "json",
                              "--no-timings", "-o", str(out)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["-q", "render", str(out), "--target", "all", "-o",
                              str(tmp_path / "r"), "--spec", str(spec_path), "--check"])
    assert res.exit_code == 0, res.output
    return json.loads(out.read_text()), tmp_path / "r"


def test_aws_block_renders_as_terraform_karpenter_reserved_and_a_kueue_flavor(tmp_path):
    plan, out = _plan_and_render(tmp_path, "aws", AWS)
    (b,) = plan["bookings"]
    assert (b["capacity_type"], b["instance_type"], b["units"]) == ("block", "p5.48xlarge", 3)
    tf = (out / "terraform-aws" / "capacity_blocks.tf").read_text()
    assert 'data "aws_ec2_capacity_block_offering"' in tf
    assert f"instance_count          = {b['nodes']}" in tf
    assert f"capacity_duration_hours = {round(b['duration_hours'])}" in tf
    assert 'start_date_range        = "2026-12-10T00:00:00Z"' in tf
    assert 'resource "aws_ec2_capacity_block_reservation"' in tf
    docs = list(yaml.safe_load_all((out / "karpenter" / "nodepools.yaml").read_text()))
    pools = [d for d in docs if d["kind"] == "NodePool"
             and d["spec"]["template"]["metadata"]["labels"]["ptplan.io/capacity-type"]
             == "block"]
    (pool,) = pools
    req = {r["key"]: r["values"] for r in pool["spec"]["template"]["spec"]["requirements"]}
    assert req["karpenter.sh/capacity-type"] == ["reserved"]
    assert pool["spec"]["limits"]["nodes"] == str(b["nodes"])
    cls = next(d for d in docs if d["kind"] == "EC2NodeClass"
               and d["metadata"]["name"] == pool["metadata"]["name"])
    (term,) = cls["spec"]["capacityReservationSelectorTerms"]
    assert term["tags"]["ptplan.io/group"] == pool["metadata"]["name"]
    assert f'"ptplan.io/group"        = "{pool["metadata"]["name"]}"' in tf
    kueue = list(yaml.safe_load_all(next((out / "kueue").iterdir()).read_text()))
    flavors = [d for d in kueue if d["kind"] == "ResourceFlavor"
               and d["spec"].get("nodeLabels") == {"ptplan.io/capacity-type": "block"}]
    assert len(flavors) == 1


def test_gcp_flex_start_renders_a_queued_provisioning_node_pool(tmp_path):
    plan, out = _plan_and_render(tmp_path, "gcp", GCP)
    assert [b["capacity_type"] for b in plan["bookings"]] == ["flex_start"]
    b = plan["bookings"][0]
    assert f"--max-run-duration {math.ceil(b['held_hours'])}h" in b["how_to_book"]  # never short
    tf = (out / "terraform-gcp" / "node_pools.tf").read_text()
    assert "queued_provisioning {\n    enabled = true\n  }" in tf
    assert 'consume_reservation_type = "NO_RESERVATION"' in tf


def test_plans_without_bookings_render_as_before():
    """The render goldens (tests/test_render.py) are unchanged; here the reserved path: a
    plan's held reservation still selects by the discovery tag alone."""
    text = (ROOT / "templates" / "karpenter" / "nodepools.yaml.j2").read_text()
    assert '{"karpenter.sh/discovery": project.cluster}|q' in text


GCP_CALENDAR = GCP.replace("name: gcpflex", "name: gcpcalendar").replace(
    "flex_start_usd_per_hour: 40.0, flex_start_wait_hours: 1.5",
    "block_usd_per_hour: 20.0, block_unit_hours: 24")


def test_gcp_calendar_mode_renders_the_request_and_a_node_pool_consuming_it(tmp_path):
    """A GCP calendar-mode booking: the plan states the exact ``gcloud compute
    future-reservations create`` request (calendar mode, the reservation it delivers named),
    and the Terraform node pool consumes that reservation by name (a request made with
    --require-specific-reservation is not consumed by ANY_RESERVATION)."""
    plan, out = _plan_and_render(tmp_path, "gcp", GCP_CALENDAR)
    (b,) = plan["bookings"]
    assert (b["capacity_type"], b["instance_type"]) == ("block", "a3-highgpu-8g")
    name = "ptplan-a3-highgpu-8g-20261210"
    days = round(b["duration_hours"] / 24)
    for flag in (f"future-reservations create {name} ", f"--total-count {b['nodes']} ",
                 "--start-time 2026-12-10T00:00:00Z ",
                 f"--end-time 2026-12-{10 + days:02d}T00:00:00Z ",
                 "--reservation-mode CALENDAR ", f"--reservation-name {name} "):
        assert flag in b["how_to_book"]
    tf = (out / "terraform-gcp" / "node_pools.tf").read_text()
    assert 'consume_reservation_type = "SPECIFIC_RESERVATION"' in tf
    assert 'key                      = "compute.googleapis.com/reservation-name"' in tf
    assert f'values                   = ["{name}"]' in tf
