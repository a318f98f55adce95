"""One transport rule per offer: `predict`, `scale` and the ranking price the same network.

RDMA only where a provider publishes it (gpucost/model/fabrics.csv); a group no offer describes
(`gpucost predict`) is TCP unless --transport says otherwise. `scale`'s network flags change
the network between nodes, nothing else.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from gpucost.limits import node_limit


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUCOST_HOME", str(tmp_path / "home"))  # no stored measurements


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    from gpucost.cli import main

    assert main([*argv, "--format", "json"]) == 0
    body: dict[str, Any] = json.loads(capsys.readouterr().out)
    return body


def test_predict_and_scale_agree_on_32_single_t4_nodes(
        capsys: pytest.CaptureFixture[str]) -> None:
    curve = _json(capsys, "scale", "--gpu", "T4", "-k", "1", "-N", "32")
    last = curve["points"][-1]
    assert last["nodes"] == 32 and "(tcp)" in last["inter_node_fabric"]
    pred = _json(capsys, "predict", "--gpu", "T4", "-n", "32")
    assert math.isclose(pred["throughput"], last["throughput"], rel_tol=1e-9)
    assert pred["inter_node_transport"] == "tcp"


def test_predict_transport_changes_the_answer(capsys: pytest.CaptureFixture[str]) -> None:
    tcp = _json(capsys, "predict", "--gpu", "T4", "-n", "32", "--transport", "tcp")
    rdma = _json(capsys, "predict", "--gpu", "T4", "-n", "32", "--transport", "rdma")
    default = _json(capsys, "predict", "--gpu", "T4", "-n", "32")
    assert rdma["inter_node_transport"] == "rdma"
    assert rdma["throughput"] > tcp["throughput"] == default["throughput"]
    assert rdma["inter_busbw_gbs"] > tcp["inter_busbw_gbs"]
    # --network-gbps moves it too, and one node crosses no network at all
    slow = _json(capsys, "predict", "--gpu", "T4", "-n", "32", "--network-gbps", "5")
    assert slow["throughput"] < tcp["throughput"]
    one = [_json(capsys, "predict", "--gpu", "T4", "--transport", t)["throughput"]
           for t in ("tcp", "rdma")]
    assert one[0] == one[1]


@pytest.mark.parametrize("gpu", ["V100 SXM2 16GB", "H100 SXM5 80GB"])
def test_scale_one_node_row_ignores_the_network_flags(
        gpu: str, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["scale", "--gpu", gpu, "-N", "4", "--data-gb", "40"]
    runs = [_json(capsys, *base), _json(capsys, *base, "--network-gbps", "10")]
    assert runs[0]["points"][0] == runs[1]["points"][0]
    runs.append(_json(capsys, *base, "--network-gbps", "400", "--transport", "rdma"))
    first = [run["points"][0] for run in runs]
    assert all(p["nodes"] == 1 for p in first)
    # the offer's own setup time, hours and $/job, whatever the network between nodes is
    for key in ("job_hours", "job_usd", "setup_hours", "throughput"):
        assert {p[key] for p in first} == {first[0][key]}, key
    assert {run["setup_minutes"] for run in runs} == {runs[0]["setup_minutes"]}
    assert {run["price_source"] for run in runs} == {runs[0]["price_source"]}
    # while the groups do move with it
    assert runs[1]["points"][-1]["throughput"] < runs[2]["points"][-1]["throughput"]
    assert "10 Gbit/s (tcp)" in runs[1]["points"][-1]["inter_node_fabric"]
    assert "400 Gbit/s (rdma)" in runs[2]["points"][-1]["inter_node_fabric"]


def test_scale_defaults_to_one_gpu_per_node_as_help_says(
        capsys: pytest.CaptureFixture[str]) -> None:
    from gpucost.cli import main

    assert _json(capsys, "scale", "--gpu", "T4", "-N", "2")["gpus_per_node"] == 1
    # no offer has one V100 SXM2 32GB per node (AWS p3dn: 8): the fewest, and a note says so
    only_eight = _json(capsys, "scale", "--gpu", "V100 SXM2 32GB", "-N", "2")
    assert only_eight["gpus_per_node"] == 8
    assert any(n.startswith("-k not given") for n in only_eight["notes"])
    with pytest.raises(SystemExit):
        main(["scale", "--help"])
    assert "default 1" in " ".join(capsys.readouterr().out.split())


def test_scale_says_which_providers_it_left_out(capsys: pytest.CaptureFixture[str]) -> None:
    curve = _json(capsys, "scale", "--gpu", "A100 SXM4 40GB", "-k", "1", "-N", "4")
    provider = curve["price_source"].split()[0]
    assert node_limit(provider) >= 4
    (note,) = [n for n in curve["notes"] if "left out" in n]
    skipped = note.split("offers on ", 1)[1].split(" left out", 1)[0].split(", ")
    assert skipped and all(node_limit(p) == 1 for p in skipped)
    # the one-node plan it passed over is cheaper than the curve's first row, and compare has it
    cheaper = float(note.split(" is $", 1)[1].split("/job", 1)[0])
    assert cheaper < curve["points"][0]["job_usd"]
    ranking = _json(capsys, "compare", "--gpu", "A100 SXM4 40GB", "--gpu-count", "1",
                    "--on-demand")
    assert ranking["plans"][0]["provider"] in skipped
