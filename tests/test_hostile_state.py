"""State a job or a file can poison (issue 22): measurements the planner learns from, plan
numbers the launch would crash on, ledger errors whose advice would throw the ledger away, and
the Python API answering what the CLI answers."""

from __future__ import annotations

import json

import pytest

import gpucost
from gpucost.cli import main
from gpucost.profile import resolve_profile

WORKLOAD = "resnet50-v100-amp"  # an embedded example: measured on a V100 at batch 256, amp


def test_the_python_api_predicts_what_the_cli_does_between_nodes(
        capsys: pytest.CaptureFixture[str]) -> None:
    """`gpucost predict` assumes TCP between nodes (no offer publishes this group's fabric);
    gpucost.predict took the model's RDMA default and answered the same question faster."""
    assert main(["predict", "-p", WORKLOAD, "--gpu", "T4", "-n", "4", "--format", "json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    assert cli["inter_node_transport"] == "tcp"
    api = gpucost.predict(resolve_profile(WORKLOAD), gpu="T4", nodes=4)
    assert api.throughput == pytest.approx(cli["throughput"], rel=1e-12)
    # naming the transport still works, and RDMA is faster: the default is the CLI's, not it
    rdma = gpucost.predict(resolve_profile(WORKLOAD), gpu="T4", nodes=4,
                           inter_node_transport="rdma")
    assert rdma.throughput > api.throughput
