"""`gpucost plan --export skypilot`: the SkyPilot task YAML, validated by the real `skypilot`
package's loader (in this interpreter, or the one named by GPUCOST_SKYPILOT_PYTHON, since
skypilot pins versions this project's environment does not want)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from goldens import assert_golden as _golden

from gpucost.errors import InputError
from gpucost.executor.export import export_skypilot, skypilot_gpu
from gpucost.plan import load_plan

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

_LOADER = """
import json, sys
import sky
import yaml
from sky.utils import common_utils, schemas

config = yaml.safe_load(open(sys.argv[1]))
try:
    common_utils.validate_schema(config, schemas.get_task_schema(), "invalid task: ")
    task = sky.Task.from_yaml(sys.argv[1])
except Exception as err:
    print(json.dumps({"error": str(err)[:300]}))
    sys.exit(0)
(res,) = list(task.resources)
print(json.dumps({"name": task.name, "num_nodes": task.num_nodes, "envs": task.envs,
                  "accelerators": res.accelerators, "use_spot": res.use_spot,
                  "cloud": str(res.cloud), "region": res.region,
                  "instance_type": res.instance_type, "disk_size": res.disk_size,
                  "autostop_down": res.autostop_config.down, "run": task.run,
                  "workdir": task.workdir}))
"""


def plan_file(tmp_path: Path, *, provider: str = "aws", nodes: int = 2, market: str = "spot",
              gpu: str = "A100 SXM4 80GB", policy: str = "destroy") -> Path:
    (tmp_path / "code").mkdir(exist_ok=True)
    plan: dict[str, Any] = {
        "schema": "gpucost-plan", "schema_version": 1,
        "job": {"name": "llm-ft", "command": ["python", "train.py", "--lr", "3e-4"],
                "workdir": "code", "samples": 1e6},
        "offer": {"provider": provider, "region": "us-east-1", "instance_type": "p4de.24xlarge",
                  "gpu": gpu, "gpu_count": 8, "nodes": nodes, "market": market,
                  "price_hr": 13.1, "price_source": "skypilot-aws"},
        "workload": {"throughput": 5000.0},
        "safety": {"timeout_hours": 3.0, "budget_cap_usd": 90.0},
        "checkpoint": {"enabled": True, "every_epochs": 1.0, "target": "s3://b/ck"},
        "disk": {"size_gb": 512.5},
        "idle": {"policy": policy},
        "estimate": {"hours": 2.0, "cost_usd": 60.0},
    }
    path = tmp_path / "plan.toml"
    path.write_text(tomli_w.dumps(plan))
    return path


def skypilot_python() -> str:
    if importlib.util.find_spec("sky") is not None:
        return sys.executable
    configured = os.environ.get("GPUCOST_SKYPILOT_PYTHON", "")
    if configured and Path(configured).exists():
        return configured
    pytest.skip("skypilot is not installed (pip install skypilot, or point "
                "GPUCOST_SKYPILOT_PYTHON at an interpreter that has it)")


def load_with_skypilot(yaml_text: str, tmp_path: Path) -> dict[str, Any]:
    task = tmp_path / "task.yaml"
    task.write_text(yaml_text)
    done = subprocess.run([skypilot_python(), "-c", _LOADER, str(task)], capture_output=True,
                          text=True, timeout=300, check=False,
                          env={**os.environ, "HOME": str(tmp_path / "home")})
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_skypilot_accelerator_names() -> None:
    assert skypilot_gpu("H100 SXM5 80GB") == "H100"
    assert skypilot_gpu("A100 SXM4 40GB") == "A100"
    assert skypilot_gpu("A100 SXM4 80GB") == "A100-80GB"
    assert skypilot_gpu("RTX 4090") == "RTX4090"
    assert skypilot_gpu("T4") == "T4"
    assert skypilot_gpu("L40S") == "L40S"


def test_local_plans_cannot_be_exported() -> None:
    with pytest.raises(InputError, match="SkyPilot cannot launch on provider 'local'"):
        export_skypilot(load_plan(EXAMPLES / "plan.toml"))


def test_run_block_verifies_then_runs_under_the_timeout(tmp_path: Path) -> None:
    text = export_skypilot(load_plan(plan_file(tmp_path)), tmp_path / "plan.toml")
    run = text.split("run: |\n", 1)[1]
    script = "\n".join(line[2:] for line in run.splitlines())
    assert "budget cap 90.00 USD is NOT enforced by SkyPilot" in text
    assert 'device="cuda"' in script
    assert "timeout --signal=TERM --kill-after=60 10800 python3 -m torch.distributed.run" in script
    assert script.rstrip().endswith("train.py --lr 3e-4")
    syntax = subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True,
                            check=False)
    assert syntax.returncode == 0, syntax.stderr


@pytest.mark.slow
def test_the_real_skypilot_loader_accepts_the_export(tmp_path: Path) -> None:
    path = plan_file(tmp_path)
    task = load_with_skypilot(export_skypilot(load_plan(path), path), tmp_path)
    assert "error" not in task, task
    assert task["name"] == "llm-ft" and task["num_nodes"] == 2
    assert task["accelerators"] == {"A100-80GB": 8}
    assert task["use_spot"] is True and task["cloud"] == "AWS"
    assert task["region"] == "us-east-1" and task["instance_type"] == "p4de.24xlarge"
    assert task["disk_size"] == 513 and task["autostop_down"] is True
    assert task["envs"]["GPUCOST_CHECKPOINT_TARGET"] == "s3://b/ck"
    assert task["workdir"] == str(tmp_path / "code")
    assert "SKYPILOT_NODE_RANK" in task["run"]
    # The same loader rejects a task with a misspelt field: the check above is a real one.
    broken = export_skypilot(load_plan(path), path).replace("use_spot:", "use_spotty:")
    assert "error" in load_with_skypilot(broken, tmp_path)




def test_skypilot_export_format_is_stable(tmp_path: Path) -> None:
    plan = load_plan(plan_file(tmp_path, nodes=1, market="on-demand", gpu="H100 SXM5 80GB",
                               policy="stop"))
    _golden("executor_skypilot_task.yaml", export_skypilot(plan))


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
