"""A plan as a SkyPilot task (``gpucost plan --export skypilot`` and the skypilot engine's
``launch --dry-run``), checked as data here without SkyPilot; tests/test_skypilot_engine.py loads
the same tasks through SkyPilot's own loader and catalogs where SkyPilot is installed."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from goldens import assert_golden as _golden

from gpucost.cli import main
from gpucost.errors import InputError
from gpucost.executor.ledger import Ledger
from gpucost.executor.skypilot_task import (
    not_enforced,
    skypilot_gpu,
    task_config,
    task_yaml,
)
from gpucost.paths import embedded_snapshots_dir
from gpucost.planfile import load_plan
from gpucost.pricing.snapshot import latest_snapshot_paths, read_snapshot
from gpucost.providers.vast import accelerator as vast_gpu

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


def test_vast_accelerator_names_are_those_of_skypilots_vast_catalog() -> None:
    """Every GPU of SkyPilot's Vast catalog (embedded), from its instance type and, for a plan
    made from `prices refresh vast` (an ask id), from the GPU name alone, is spelt as the
    catalog's AcceleratorName column (the importer's record of it)."""
    (path,) = [p for p in latest_snapshot_paths([embedded_snapshots_dir()])
               if p.parent.name == "skypilot-vast"]
    snapshot = read_snapshot(path)
    spelt = {gpu: name for name, gpus in snapshot.provenance["gpu_names"].items() for gpu in gpus}
    rows = snapshot.offers.to_records()
    assert len(rows) > 50 and len(set(spelt.values())) > 10
    for r in rows:
        assert vast_gpu(r["gpu"], r["instance_type"]) == spelt[r["gpu"]], r["instance_type"]
        if r["gpu"] != "RTX PRO 6000":  # Vast sells an S and a WS card under that name
            assert vast_gpu(r["gpu"], "24768912") == spelt[r["gpu"]], r["gpu"]
    assert vast_gpu("RTX 4070S Ti", "2x-RTX_4070S_Ti-32-65536") == "RTX4070"
    assert vast_gpu("Tesla V100", "8x-Tesla_V100-32-65536") == "V100"


def vast_plan(tmp_path: Path, **offer: Any) -> Path:
    path = plan_file(tmp_path, provider="vast", nodes=1, market="on-demand", gpu="RTX 3060 Ti")
    doc = tomllib.loads(path.read_text())
    doc["schema_version"] = 2
    doc["offer"].update({"instance_type": "2x-RTX_3060_Ti-32-65536", "region": "Quebec, CA, NA",
                         "zone": "", "gpu_count": 2, "price_hr": 0.2, **offer})
    doc["marketplace"] = {"gpu_count": 2, "max_price_hr": 0.25, "region": "CA",
                          "min_reliability": 0.95, "min_inet_down_mbps": 800.0,
                          "min_disk_gb": 600.0}
    path.write_text(tomli_w.dumps(doc))
    return path


def test_a_vast_task_asks_for_a_machine_like_the_planned_one(tmp_path: Path) -> None:
    path = vast_plan(tmp_path)
    plan = load_plan(path)
    task = task_config(plan, path)
    res = task["resources"]
    assert res == {"cloud": "vast", "region": "Quebec, CA, NA", "accelerators": "RTX3060:2",
                   "use_spot": False, "disk_size": 600,
                   "autostop": {"idle_minutes": 10, "down": True}}  # no instance type
    # SkyPilot mounts no bucket on Vast: the job fetches its newest checkpoint itself
    assert "file_mounts" not in task
    assert "fetch_latest" in task["run"] and "ls -1" not in task["run"]
    said = not_enforced(plan)
    assert any("any card Vast lists under it may come, not only the planned RTX 3060 Ti" in line
               for line in said)
    assert any("last two letters (NA, the continent), so the country CA" in line
               for line in said)
    for words in ("max 0.25 USD/h is not enforced", "reliability >= 0.95 is not enforced",
                  "bandwidth >= 800 Mbit/s is not enforced", "SkyPilot mounts no object store",
                  "counting spend at the plan's 0.2 USD/h"):
        assert any(words in line for line in said), words
    assert all(f"# {line}" in task_yaml(plan, path) for line in said)


def test_a_vast_plan_outside_skypilots_regions_asks_for_any(tmp_path: Path) -> None:
    plan = load_plan(vast_plan(tmp_path, region="CA-Quebec", instance_type="24768912",
                               market="spot"))
    res = task_config(plan)["resources"]
    assert res["infra"] == "vast" and "region" not in res and "instance_type" not in res
    assert res["use_spot"] is True and res["accelerators"] == "RTX3060:2"
    said = "\n".join(not_enforced(plan))
    assert "the plan's country CA is not asked for" in said
    assert "minimum bid" in said


def test_a_multi_node_vast_plan_is_refused_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = vast_plan(tmp_path, nodes=2)
    assert main(["launch", str(path), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "SkyPilot launches no multi-node cluster on vast" in err and len(err.splitlines()) == 1


def test_vast_launch_dry_run_says_what_skypilot_does_not_enforce(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = vast_plan(tmp_path)
    assert main(["launch", str(path), "--dry-run", "--run-id", "v-1"]) == 0
    out = capsys.readouterr().out
    assert "skypilot would submit this task as cluster gpucost-v-1" in out
    assert "# vast: max 0.25 USD/h is not enforced" in out


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
    assert 'needs SkyPilot: install gpucost[skypilot] (pip install "gpucost[skypilot]"' in err
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
