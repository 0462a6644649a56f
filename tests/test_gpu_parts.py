"""GPU parts with a scale-up domain or a vendor of their own (GB200/GB300 NVL72, AMD Instinct).

Their rows in ``core/data/gpu_specs.csv`` are read back against the vendors' own figures (NVIDIA
states the NVL72 racks' totals with sparsity, so one GPU's dense peak is the total ÷ 72 ÷ 2), the
older rows keep their node size and NIC, ``--cluster`` takes an NVL72 part's NVLink domain as its
node unless told otherwise, and an AMD part's estimate says what its figures rest on.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import EXAMPLES, example_dict
from typer.testing import CliRunner

from ptplan.cli.app import app
from ptplan.core.cluster_option import DEFAULT_GPUS_PER_NODE, cluster_request
from ptplan.core.errors import InputError
from ptplan.core.hardware import canonical_gpu_name, gpus
from ptplan.providers.embedded import embedded_catalog

runner = CliRunner()
GRPO = str(EXAMPLES / "grpo-7b.yaml")
NEW_PARTS = ("GB200", "GB300", "MI300X", "MI325X", "MI355X")


def _run(*args: str) -> dict[str, Any]:
    r = runner.invoke(app, ["estimate", *args, "--format", "json"])
    assert r.exit_code == 0, (r.exit_code, r.output)
    return dict(json.loads(r.stdout))["cluster_run"]


# --------------------------------------------------------------------------- the table's rows


def test_nvl72_rows_are_nvidias_rack_figures_per_gpu() -> None:
    """GB200 NVL72: FP16/BF16 360 PF, FP8 720 PF, INT8 720 POPS, TF32 180 PF (sparse), 13.4 TB
    HBM3e at 576 TB/s, 130 TB/s NVLink, for 72 GPUs (nvidia.com/en-us/data-center/gb200-nvl72)."""
    g = gpus()["GB200"]
    assert g.peak_tflops["bf16"] == pytest.approx(360e3 / 72 / 2)
    assert g.peak_tflops["fp8"] == pytest.approx(720e3 / 72 / 2)
    assert g.peak_tflops["int8"] == pytest.approx(720e3 / 72 / 2)
    assert g.mem_bw_tbps == pytest.approx(576 / 72)
    assert g.memory_gb == pytest.approx(13.4e3 / 72, abs=0.2)
    assert g.scaleup_gb_per_s * 2 * 72 == pytest.approx(130e3, rel=0.01)  # bidirectional
    assert (g.scaleup_domain, g.architecture, g.vendor) == (72, "Blackwell", "NVIDIA")
    b = gpus()["B200"]  # the same die at 1,200 W: ~11 % more compute, the same bandwidth
    assert g.peak_tflops["bf16"] / b.peak_tflops["bf16"] == pytest.approx(1.11, abs=0.005)
    assert g.mem_bw_tbps == b.mem_bw_tbps
    u = gpus()["GB300"]  # Blackwell Ultra: the FP8/BF16 of GB200, INT8 cut, 288 GB class HBM
    assert (u.peak_tflops["bf16"], u.peak_tflops["fp8"]) == (g.peak_tflops["bf16"],
                                                             g.peak_tflops["fp8"])
    assert u.peak_tflops["int8"] < u.peak_tflops["bf16"] / 10
    assert 270 <= u.memory_gb <= 288 and u.scaleup_domain == 72


def test_amd_rows() -> None:
    x, x325, x355 = (gpus()[n] for n in ("MI300X", "MI325X", "MI355X"))
    assert {x.vendor, x325.vendor, x355.vendor} == {"AMD"}
    assert x.peak_tflops["fp8"] == pytest.approx(2 * x.peak_tflops["bf16"], rel=1e-3)
    assert (x.memory_gb, x.mem_bw_tbps) == (192, 5.3)
    assert x325.peak_tflops == x.peak_tflops  # the same CDNA 3 die, more and faster HBM
    assert (x325.memory_gb, x325.mem_bw_tbps) == (256, 6.0)
    assert (x355.memory_gb, x355.mem_bw_tbps) == (288, 8.0)
    assert x355.peak_tflops["bf16"] > 1.9 * x.peak_tflops["bf16"]
    assert x.scaleup_gb_per_s == 448.0  # 7 links x 128 GB/s both ways, one direction
    assert all(g.scaleup_domain == DEFAULT_GPUS_PER_NODE for g in (x, x325, x355))


def test_nic_per_gpu_stated_where_it_differs_and_the_rule_elsewhere() -> None:
    table = gpus()
    assert table["GB200"].scaleout_gb_per_s == 50.0    # ConnectX-7, 400 Gb/s per GPU
    assert table["GB300"].scaleout_gb_per_s == 100.0   # ConnectX-8, 800 Gb/s per GPU
    assert table["MI300X"].scaleout_gb_per_s == 50.0
    # rows written before these parts keep what the architecture rule gave them
    assert [table[n].scaleout_gb_per_s for n in ("H100", "B200", "A100-80GB", "L4")] == \
        [50.0, 50.0, 25.0, 12.5]
    assert {table[n].scaleup_domain for n in table if n not in NEW_PARTS} == {8}


@pytest.mark.parametrize(("name", "canon"), [
    ("GB200", "GB200"), ("gb200-nvl72", "GB200"), ("GB300 NVL72", "GB300"),
    ("Instinct MI300X", "MI300X"), ("mi325x", "MI325X"), ("MI355X", "MI355X"),
    ("A100-SXM4-40GB", "A100-40GB"), ("H100 SXM5 80GB", "H100"), ("H20-96GB", "H20"),
    ("A800-80GB", "A800"), ("h200-sxm", "H200"), ("HGX-B200", "B200")])
def test_names_papers_and_nvidia_smi_use(name: str, canon: str) -> None:
    assert canonical_gpu_name(name) == canon


@pytest.mark.parametrize(("printed", "canon"), [
    ("NVIDIA H100 80GB HBM3", "H100"), ("NVIDIA A100-SXM4-80GB", "A100-80GB"),
    ("NVIDIA A100-SXM4-40GB", "A100-40GB"), ("NVIDIA A100 80GB PCIe", "A100-PCIe-80GB"),
    ("NVIDIA H100 PCIe", "H100-PCIe"), ("NVIDIA H200 141GB HBM3e", "H200"),
    ("NVIDIA A800-SXM4-80GB", "A800"), ("NVIDIA GB200", "GB200"), ("Tesla T4", "T4"),
    ("AMD Instinct MI300X", "MI300X"), ("AMD Instinct MI300X OAM", "MI300X"),
    ("a100_80gb", "A100-80GB"), ("NVIDIA_GB200_NVL72", "GB200"), ("  h100  sxm5  ", "H100")])
def test_the_names_nvidia_smi_and_rocm_smi_print(printed: str, canon: str) -> None:
    assert canonical_gpu_name(printed) == canon


@pytest.mark.parametrize("other", ["NVIDIA H100 NVL", "NVIDIA", "HBM3", "NVIDIA V100-SXM2-32GB"])
def test_other_parts_stay_unknown(other: str) -> None:
    """H100 NVL is a 94 GB part of its own: no prefix or suffix rule makes it an H100."""
    assert canonical_gpu_name(other) is None


def test_no_cloud_in_the_embedded_catalog_sells_them() -> None:
    """So no plan on the embedded catalog changed when they were added."""
    sold = {o.gpu for o in embedded_catalog().offers}
    assert not sold & set(NEW_PARTS)


# --------------------------------------------------------------------------- --cluster


def test_an_nvl72_cluster_is_one_node_of_its_nvlink_domain() -> None:
    req = cluster_request("16xGB200", None, None, None, "rl", "auto")
    assert (req.gpu, req.gpus, req.gpus_per_node) == ("GB200", 16, 72)
    assert cluster_request("144xGB300", None, None, None, "rl", "auto").gpus_per_node == 72
    assert cluster_request("16xGB200", 4, None, None, "rl", "auto").gpus_per_node == 4
    assert cluster_request("16xB200", None, None, None, "rl", "auto").gpus_per_node == 8
    assert cluster_request("16xMI300X", None, None, None, "rl", "auto").gpus_per_node == 8
    with pytest.raises(InputError, match=r"--cluster 100xGB200: 100 GPUs are not whole nodes of "
                       r"72 \(GB200's NVLink domain\); give a multiple of 72, or "
                       r"--gpus-per-node"):
        cluster_request("100xGB200", None, None, None, "rl", "auto")
    with pytest.raises(InputError, match="not whole nodes of 8; give"):
        cluster_request("12xH100", None, None, None, "rl", "auto")


def test_estimate_on_gb200_from_the_command_line() -> None:
    run = _run(GRPO, "--cluster", "16xGB200")
    assert (run["gpu"], run["gpus"], run["gpus_per_node"]) == ("GB200", 16, 72)
    b200 = _run(GRPO, "--cluster", "16xB200", "--gpus-per-node", "16")
    # the same bandwidth and more compute and memory: no phase is slower on GB200
    slower = {p["name"]: (p["seconds_per_step"], q["seconds_per_step"])
              for p, q in zip(run["phases"], b200["phases"], strict=True)
              if p["seconds_per_step"] > q["seconds_per_step"] * (1 + 1e-9)}
    assert not slower, slower
    assert run["seconds_per_step"] < b200["seconds_per_step"]
    out = runner.invoke(app, ["estimate", GRPO, "--cluster", "16xGB200"]).stdout
    assert "on 16 x GB200 (nodes of 72), colocated" in out


def test_an_amd_estimate_says_what_its_figures_rest_on(tmp_path: Path) -> None:
    def spec(framework: str) -> str:
        d = example_dict("grpo-7b.yaml")
        d["framework"] = framework
        path = tmp_path / f"{framework.replace('=', '')}.yaml"
        path.write_text(json.dumps(d), encoding="utf-8")
        return str(path)

    run = _run(spec("verl==0.9"), "--cluster", "8xMI300X")
    (note,) = [n for n in run["notes"] if "AMD part" in n]
    plain_text = ("MI300X is an AMD part: its figures apply the efficiency factors fitted on "
                  "NVIDIA runs (docs/validation.md), so they assume its software reaches the "
                  "same share of its peaks")
    assert note == (plain_text + "; framework verl==0.9 as ptplan pins and renders it runs "
                    "NVIDIA builds (verl 0.9.1 verl/plugin/platform/platform_cuda.py:28), so "
                    "plan never buys this part for it")
    (plain,) = [n for n in _run(spec("any"), "--cluster", "8xMI300X")["notes"]
                if "AMD part" in n]
    assert plain == plain_text
    assert not [n for n in _run(spec("verl==0.9"), "--cluster", "8xH100")["notes"]
                if "AMD part" in n]
    assert _run(spec("any"), "--cluster", "8xMI355X")["seconds_per_step"] \
        < _run(spec("any"), "--cluster", "8xMI300X")["seconds_per_step"]
    # every part no fitted run used says so, AWS Trainium as well; NVIDIA parts do not
    (trn,) = [n for n in _run(spec("any"), "--cluster", "32xTrainium1", "--gpus-per-node",
                              "16")["notes"] if "fitted on NVIDIA runs" in n]
    assert trn.startswith("Trainium1 is an AWS part")
