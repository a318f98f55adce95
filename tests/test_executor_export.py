"""A plan as a SkyPilot task (``gpucost plan --export skypilot`` and the skypilot engine's
``launch --dry-run``), checked as data here without SkyPilot; tests/test_skypilot_engine.py loads
the same tasks through SkyPilot's own loader and catalogs where SkyPilot is installed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from goldens import assert_golden as _golden

from gpucost.cli import main
from gpucost.errors import InputError
from gpucost.executor.ledger import Ledger
from gpucost.executor.skypilot_task import skypilot_gpu, task_config, task_yaml
from gpucost.planfile import load_plan

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def plan_file(tmp_path: Path, *, provider: str = "aws", nodes: int = 2, market: str = "spot",
              gpu: str = "A100 SXM4 80GB", policy: str = "destroy",
              target: str = "s3://b/ck") -> Path:
    (tmp_path / "code").mkdir(exist_ok=True)
    plan: dict[str, Any] = {
        "schema": "gpucost-plan", "schema_version": 1,
        "job": {"name": "llm-ft", "command": ["python", "train.py", "--lr", "3e-4"],
                "workdir": "code", "samples": 1e6},
        "offer": {"provider": provider, "region": "us-east-1", "zone": "use1-az2",
                  "instance_type": "p4de.24xlarge", "gpu": gpu, "gpu_count": 8, "nodes": nodes,
                  "market": market, "price_hr": 13.1, "price_source": "skypilot-aws"},
        "workload": {"throughput": 5000.0, "torch_version": "2.13.0+cu128"},
        "safety": {"timeout_hours": 3.0, "budget_cap_usd": 90.0},
        "checkpoint": {"enabled": True, "every_epochs": 1.0, "target": target},
        "disk": {"size_gb": 512.5},
        "idle": {"policy": policy},
        "estimate": {"hours": 2.0, "cost_usd": 60.0},
    }
    path = tmp_path / "plan.toml"
    path.write_text(tomli_w.dumps(plan))
    return path


def test_skypilot_accelerator_names() -> None:
    assert skypilot_gpu("H100 SXM5 80GB") == "H100"
    assert skypilot_gpu("A100 SXM4 40GB") == "A100"
    assert skypilot_gpu("A100 SXM4 80GB") == "A100-80GB"
    assert skypilot_gpu("RTX 4090") == "RTX4090"
    assert skypilot_gpu("T4") == "T4"
    assert skypilot_gpu("L40S") == "L40S"


def test_local_plans_are_not_skypilot_tasks() -> None:
    with pytest.raises(InputError, match="SkyPilot cannot launch on provider 'local'"):
        task_yaml(load_plan(EXAMPLES / "plan.toml"))


def test_a_spot_plan_is_a_managed_job_that_resumes_from_the_mounted_bucket(
        tmp_path: Path) -> None:
    path = plan_file(tmp_path)
    task = task_config(load_plan(path), path, run_id="r1")
    res = task["resources"]
    # pinned to the offer; the AWS zone id (use1-az2) names no zone, so the region is the pin
    assert res["infra"] == "aws/us-east-1" and res["instance_type"] == "p4de.24xlarge"
    assert res["accelerators"] == "A100-80GB:8" and res["use_spot"] is True
    assert res["disk_size"] == 513 and task["num_nodes"] == 2
    assert res["job_recovery"] == {"strategy": "FAILOVER", "max_restarts_on_errors": 0}
    assert "autostop" not in res  # the managed job's cluster goes when the job ends
    assert task["workdir"] == str(tmp_path / "code")
    assert task["file_mounts"] == {"/gpucost/checkpoints": {"source": "s3://b/ck",
                                                            "mode": "MOUNT_CACHED"}}
    assert task["envs"]["GPUCOST_CHECKPOINT_DIR"] == "/gpucost/checkpoints/llm-ft"
    assert "pip install torch==2.13.0" in task["setup"]
    run = task["run"]
    assert 'GPUCOST_RESUME_FROM="$(ls -1 /gpucost/checkpoints/llm-ft/epoch-*.pt' in run
    assert ("timeout --signal=TERM --kill-after=60 10800 python3 -m torch.distributed.run "
            '--nnodes="$SKYPILOT_NUM_NODES" --node-rank="$SKYPILOT_NODE_RANK" '
            '--nproc-per-node="$SKYPILOT_NUM_GPUS_PER_NODE" '
            '--master-addr="$(echo "$SKYPILOT_NODE_IPS" | head -n1)"') in run
    assert run.rstrip().endswith("train.py --lr 3e-4")
    for script in (task["setup"], run):
        syntax = subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True,
                                check=False)
        assert syntax.returncode == 0, syntax.stderr


@pytest.mark.parametrize(("policy", "down"), [("destroy", True), ("stop", False)])
def test_the_idle_policy_becomes_autostop_or_autodown(tmp_path: Path, policy: str,
                                                      down: bool) -> None:
    path = plan_file(tmp_path, market="on-demand", policy=policy, target="local:ck")
    task = task_config(load_plan(path), path)
    assert task["resources"]["autostop"] == {"idle_minutes": 10, "down": down}
    assert "file_mounts" not in task and "job_recovery" not in task["resources"]


def test_launch_dry_run_prints_the_task_without_skypilot(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = plan_file(tmp_path, nodes=1, market="on-demand")
    assert main(["launch", str(path), "--dry-run", "--run-id", "dry-1"]) == 0
    out = capsys.readouterr().out
    assert "skypilot would submit this task as cluster gpucost-dry-1 (`sky launch`):" in out
    assert out.split("(`sky launch`):\n", 1)[1] == task_yaml(load_plan(path), path,
                                                              run_id="dry-1")


def test_the_planning_path_and_a_dry_run_import_no_skypilot(tmp_path: Path) -> None:
    path = plan_file(tmp_path)
    code = ("import sys; from gpucost.cli import main; "
            f"main(['launch', {str(path)!r}, '--dry-run']); "
            "main(['compare']); assert 'sky' not in sys.modules, 'sky imported'")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False, timeout=120)
    assert done.returncode == 0, done.stderr


def test_a_cloud_launch_without_skypilot_says_how_to_install_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import importlib.util

    if importlib.util.find_spec("sky") is not None:
        pytest.skip("SkyPilot is installed here")
    path = plan_file(tmp_path, nodes=1, market="on-demand")
    assert main(["launch", str(path)]) == 2
    err = capsys.readouterr().err
    assert 'SkyPilot, which is not installed (pip install "gpucost[skypilot]"' in err
    assert len(err.strip().splitlines()) == 1
    with Ledger() as ledger:  # refused before anything was written
        assert ledger.runs() == []


def test_skypilot_export_format_is_stable(tmp_path: Path) -> None:
    plan = load_plan(plan_file(tmp_path, nodes=1, market="on-demand", gpu="H100 SXM5 80GB",
                               policy="stop"))
    _golden("executor_skypilot_task.yaml", task_yaml(plan))


def test_status_format_is_stable(capsys: pytest.CaptureFixture[str]) -> None:
    from gpucost.cli import main
    from gpucost.executor.ledger import Ledger
    from gpucost.executor.rundir import RunDir

    rd = RunDir.for_run("tiny-20261130-200000-abcd").create()
    with Ledger() as ledger:
        ledger.create_run(run_id="tiny-20261130-200000-abcd", name="tiny", plan_path="p",
                          provider="torchrun", run_dir=str(rd.path), price_hr=0.02, nodes=1,
                          budget_cap_usd=0.05)
    rd.write_status({"state": "running", "epoch": 3, "epochs": 10.0, "eta_s": 754.0,
                     "elapsed_s": 300.0, "cost_usd": 0.00166, "throughput": 1843.2,
                     "planned_throughput": 2000.0, "metrics": {"loss": 0.1234567},
                     "checkpoint": "/ck/tiny/epoch-000003.pt", "final": False})
    assert main(["status", "tiny"]) == 0
    _golden("executor_status.txt", capsys.readouterr().out)
