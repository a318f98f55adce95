"""State a job or a file can poison (issue 22): measurements the planner learns from, plan
numbers the launch would crash on, ledger errors whose advice would throw the ledger away, and
the Python API answering what the CLI answers."""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path
from typing import Any

import pytest
import tomli_w

import gpucost
from gpucost.cli import main
from gpucost.profile import resolve_profile

WORKLOAD = "resnet50-v100-amp"  # an embedded example: measured on a V100 at batch 256, amp
ROOT = Path(__file__).resolve().parents[1]
LOCAL_PLAN = ROOT / "examples" / "plan.toml"  # runs examples/train_tiny.py on this machine
AWS_PLAN = ROOT / "tests" / "fixtures" / "preflight" / "good.toml"


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


# ---- plan numbers the launch would crash on ---------------------------------------------------
DOORS = [["explain"], ["preflight", "--today", "2026-11-30", "--format", "json"],
         ["launch", "--dry-run"], ["launch"]]


@pytest.mark.parametrize(("plan", "section", "key", "allowed"), [
    (LOCAL_PLAN, "job", "epochs", "allowed: > 0 and <= 1e+06"),  # ran epoch 1, then inf
    (LOCAL_PLAN, "safety", "timeout_hours", "allowed: > 0 and <= 87600"),  # crashed the launch
    (AWS_PLAN, "safety", "timeout_hours", "allowed: > 0 and <= 87600"),  # overflowed the dry run
])
@pytest.mark.parametrize("door", DOORS, ids=" ".join)
def test_every_door_refuses_a_plan_number_past_its_bound(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], _isolated_home: Path,
        plan: Path, section: str, key: str, allowed: str, door: list[str]) -> None:
    if plan == AWS_PLAN and door == ["launch"]:
        pytest.skip("a real AWS launch is not tried here; its dry run is")
    doc: dict[str, Any] = tomllib.loads(plan.read_text())
    doc[section][key] = 1e308
    shutil.copy(ROOT / "examples" / "train_tiny.py", tmp_path / "train_tiny.py")
    path = tmp_path / "plan.toml"
    path.write_text(tomli_w.dumps(doc))
    code = main([*door, str(path)])
    out, err = capsys.readouterr()
    assert code == 2, err
    if door[0] == "preflight":  # a report: the plan-file check fails with the same line
        check, = json.loads(out)["checks"]
        assert check["id"] == "plan-file" and check["status"] == "fail"
        err = f"gpucost: error: {check['message']} ({check['fix']})\n"
    assert err.count("\n") == 1 and err.startswith("gpucost: error: "), err
    assert f"[{section}] {key} = 1e+308 is out of range" in err and allowed in err, err
    assert not (_isolated_home / "runs").exists()  # nothing ran
