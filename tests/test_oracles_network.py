"""Network flows across regions worked out by hand (``optimizer/costs/network.py`` docstring):
a rollout pool in another region (``split_regions``), dataset staging from ``data.source``,
checkpoint copies to ``checkpoints.copy_to``, and what is priced at 0."""

from __future__ import annotations

from dataclasses import replace

import pytest
from planner_fixtures import small_catalog, small_spec

from ptplan.costs.network import network_model
from ptplan.demand.model import build_demand
from ptplan.providers.base import EgressRate

W = 1.54 * 2  # GB of bf16 weights per rollout node per step (small_spec: 1.54 B params)
STEPS = 200
EGRESS = (EgressRate("lab", "inter_region", 0.02, "t", "U"),
          EgressRate("lab", "inter_continent", 0.05, "t", "U"),
          EgressRate("lab", "cross_zone", 0.01, "t", "U"),
          EgressRate("other", "internet", 0.09, "t", "U"))
TRAINER = ("lab", "us-east-1", "us-east-1a")


def _net(dataset_gb: float = 2.0, copy_gb: float = 3.0, **spec):
    demand = build_demand(small_spec(**spec))
    cat = replace(small_catalog(), egress=EGRESS)
    return demand, network_model(demand, cat, archived=2, archived_gb=copy_gb,
                                 dataset_gb=dataset_gb)


def test_rollout_in_another_continent_by_hand() -> None:
    """Trainer in us-east-1, rollout in eu-west-1 (inter_continent, $0.05/GB): each rollout
    node pays 200 × 3.08 GB × 0.05 = $30.80; the experience data and the dataset (2 GB from
    data.source us-east-1, staged where the rollout reads it) pay the same rate; a trainer-side
    plan would stage the dataset for free, so the difference is the dataset's egress."""
    _, net = _net(data={"source": "lab:us-east-1"})
    exp_gb = net.experience_gb_per_step * STEPS  # 12 B × every sampled sequence's tokens
    assert exp_gb == pytest.approx(STEPS * 256 * 8 * (512 + 2048) * 12 / 1e9, rel=1e-12)
    path, per_node, fixed = net.cross_region_terms(TRAINER, ("lab", "eu-west-1"))
    assert path == "inter_continent"
    assert per_node == pytest.approx(STEPS * W * 0.05, rel=1e-12)
    assert fixed == pytest.approx(exp_gb * 0.05 + 2.0 * 0.05, rel=1e-12)
    # the same place as a rollout region in the same continent: inter_region at $0.02
    path, per_node, fixed = net.cross_region_terms(TRAINER, ("lab", "us-west-2"))
    assert (path, per_node) == ("inter_region", pytest.approx(STEPS * W * 0.02, rel=1e-12))
    assert fixed == pytest.approx(exp_gb * 0.02 + 2.0 * 0.02, rel=1e-12)


def test_dataset_staging_goes_where_it_is_read() -> None:
    """RL: the rollout pool reads the dataset, so a rollout region receives it; the flow's
    ends are region-level places (no zone)."""
    _, net = _net(data={"source": "lab:us-east-1"})
    [flow] = [f for f in net.fixed_flows(TRAINER, ("lab", "eu-west-1", ""))
              if f.name == "dataset_staging"]
    assert (flow.src, flow.dst) == (("lab", "us-east-1", ""), ("lab", "eu-west-1", ""))
    assert (flow.path, flow.gb, flow.usd_per_gb, flow.note) == ("inter_continent", 2.0, 0.05,
                                                                 "")
    [home] = [f for f in net.fixed_flows(TRAINER) if f.name == "dataset_staging"]
    assert (home.src, home.dst, home.path, home.cost) == (
        ("lab", "us-east-1", ""), ("lab", "us-east-1", ""), "same_zone", 0.0)
    assert net.fixed_cost(TRAINER, ("lab", "eu-west-1", "")) == pytest.approx(2.0 * 0.05)
    assert net.fixed_cost(TRAINER) == 0.0


def test_dataset_without_source_is_staged_in_region_for_free() -> None:
    _, net = _net()
    [flow] = [f for f in net.fixed_flows(TRAINER, ("lab", "eu-west-1", ""))
              if f.name == "dataset_staging"]
    assert (flow.src, flow.dst, flow.path, flow.cost) == (
        ("lab", "eu-west-1", ""), ("lab", "eu-west-1", ""), "same_zone", 0.0)
    assert flow.note == "data.source not set: staged in-region"
    assert net.missing == set()  # a free same-zone path is not a missing rate


def test_checkpoint_copies_by_hand() -> None:
    """copy_to another provider: the 2 archived checkpoints and the final one, 3 GB each,
    leave lab's region by the internet path: lab has no internet row, so $0 and recorded."""
    _, net = _net(checkpoints={"copy_to": "other:far-1"})
    [flow] = [f for f in net.fixed_flows(TRAINER) if f.name == "checkpoint_copies"]
    assert (flow.src, flow.dst) == (("lab", "us-east-1", ""), ("other", "far-1", ""))
    assert (flow.path, flow.gb, flow.cost) == ("internet", 9.0, 0.0)
    assert net.missing == {"lab internet"}
    _, net = _net(checkpoints={"copy_to": "lab:eu-west-1"}, copy_gb=0.5)
    [flow] = [f for f in net.fixed_flows(TRAINER) if f.name == "checkpoint_copies"]
    assert (flow.path, flow.gb) == ("inter_continent", 1.5)
    assert flow.cost == pytest.approx(1.5 * 0.05, rel=1e-12)


def test_nothing_to_move_makes_no_flow() -> None:
    _, net = _net(dataset_gb=0.0, copy_gb=0.0, checkpoints={"copy_to": "lab:eu-west-1"},
                  data={"source": "lab:us-east-1"})
    assert net.fixed_flows(TRAINER) == []


def test_sft_moves_no_weights_and_stages_at_the_trainer() -> None:
    """SFT has no rollout pool: no weight sync, no experience; the trainer reads the dataset;
    copy_to copies the archived checkpoints plus the final one (examples/sft-8b.yaml writes 4)."""
    from conftest import example_dict

    from ptplan.spec.project import parse_spec

    d = example_dict("sft-8b.yaml")
    d["data"]["source"] = "lab:eu-west-1"
    d["checkpoints"]["copy_to"] = "lab:eu-west-1"
    demand = build_demand(parse_spec(d))
    assert demand.checkpoints == 4
    net = network_model(demand, replace(small_catalog(), egress=EGRESS), archived=1,
                        archived_gb=2.0, dataset_gb=1.0)
    assert (net.weight_gb, net.experience_gb_per_step, net.dataset_reader) == (0.0, 0.0,
                                                                               "update")
    flows = {f.name: f for f in net.fixed_flows(TRAINER, ("lab", "us-west-2", ""))}
    assert flows["dataset_staging"].dst == ("lab", "us-east-1", "")
    assert flows["dataset_staging"].cost == pytest.approx(1.0 * 0.05, rel=1e-12)
    assert flows["checkpoint_copies"].gb == pytest.approx((1 + 1) * 2.0, rel=1e-12)


def test_no_checkpoint_written_adds_no_final_copy() -> None:
    """A run shorter than one checkpoint interval writes none: only the archived ones given
    are copied (here 2 × 3 GB), no final one."""
    demand, net = _net(checkpoints={"every_steps": 500, "copy_to": "lab:eu-west-1"})
    assert demand.checkpoints == 0
    assert net.checkpoint_copy_gb == pytest.approx(2 * 3.0, rel=1e-12)
    demand, net = _net(checkpoints={"every_steps": 200, "copy_to": "lab:eu-west-1"})
    assert demand.checkpoints == 1
    assert net.checkpoint_copy_gb == pytest.approx(3 * 3.0, rel=1e-12)


@pytest.mark.parametrize(("region", "continent"), [
    ("us-east-1", "north_america"), ("ca-central-1", "north_america"),
    ("northamerica-northeast1", "north_america"), ("mx-central-1", "north_america"),
    ("sa-east-1", "south_america"), ("southamerica-east1", "south_america"),
    ("eu-west-1", "europe"), ("europe-west4", "europe"), ("me-south-1", "middle_east"),
    ("il-central-1", "middle_east"), ("af-south-1", "africa"), ("africa-south1", "africa"),
    ("ap-southeast-2", "oceania"), ("ap-southeast-4", "oceania"),
    ("australia-southeast1", "oceania"), ("ap-southeast-1", "asia"), ("ap-northeast-1", "asia"),
    ("asia-east1", "asia"), ("onprem-lab", "unknown"),
])
def test_continents_of_region_names(region: str, continent: str) -> None:
    """AWS and GCP region names by continent (Sydney and Melbourne are Oceania, the rest of
    ap- Asia); a name no prefix matches is unknown (priced inter_continent)."""
    from ptplan.costs.network import continent as continent_of

    assert continent_of(region) == continent


def test_staging_difference_when_the_trainer_region_also_pays() -> None:
    """data.source in a third region (us-west-2) and copy_to set: a trainer-side plan pays the
    dataset's inter-region egress into us-east-1 too, so a rollout pool in eu-west-1 adds only
    the difference, 2 GB × (0.05 − 0.02); checkpoint copies leave the trainer's region either
    way and cancel out. Copies smaller than 1 GB still make a flow."""
    _, net = _net(data={"source": "lab:us-west-2"}, copy_gb=0.25,
                  checkpoints={"copy_to": "lab:eu-west-1"})
    assert net.checkpoint_copy_gb == pytest.approx(0.75, rel=1e-12)  # 2 archived + the final
    home = net.fixed_cost(TRAINER)
    assert home == pytest.approx(2.0 * 0.02 + 0.75 * 0.05, rel=1e-12)
    _, _, fixed = net.cross_region_terms(TRAINER, ("lab", "eu-west-1"))
    exp = net.experience_gb_per_step * STEPS * 0.05
    assert fixed == pytest.approx(exp + 2.0 * (0.05 - 0.02), rel=1e-12)
