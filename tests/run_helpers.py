"""Shared by the executor tests: a plan for the tiny example, real launchers, and the processes
of a run found by the token in their environment."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import tomli_w

from gpucost.executor.local import token_processes
from gpucost.executor.rundir import RunDir
from gpucost.executor.runlock import LockBusy, RunLock

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
TRAIN = EXAMPLES / "train_tiny.py"


def write_plan(tmp_path: Path, *, provider: str = "local", gpu_count: int = 1, epochs: int = 2,
               samples: int = 2048, price_hr: float = 0.02, budget: float = 1.0,
               timeout_h: float = 0.25, throughput: float = 2000.0, margin: float = 100.0,
               action: str = "warn", policy: str = "destroy", est_hours: float = 0.001,
               est_cost: float = 0.0001, name: str = "tiny",
               command: list[str] | None = None) -> Path:
    plan: dict[str, Any] = {
        "schema": "gpucost-plan", "schema_version": 1, "created_at": "2026-11-30T20:00:00Z",
        "job": {"name": name,
                "command": command or ["python", str(TRAIN), "--epochs", str(epochs),
                                       "--samples-per-epoch", str(samples), "--width", "128"],
                "workdir": str(tmp_path), "epochs": float(epochs), "dataset_size": samples},
        "offer": {"provider": provider, "instance_type": "local-cpu", "gpu": "CPU",
                  "gpu_count": gpu_count, "price_hr": price_hr, "region": "local"},
        "workload": {"throughput": throughput},
        "safety": {"timeout_hours": timeout_h, "budget_cap_usd": budget,
                   "verify_margin_pct": margin, "verify_action": action},
        "checkpoint": {"enabled": True, "every_epochs": 1.0,
                       "target": f"local:{tmp_path / 'ckpt'}", "resume": True},
        "idle": {"policy": policy},
        "estimate": {"hours": est_hours, "cost_usd": est_cost},
    }
    path = tmp_path / "plan.toml"
    path.write_text(tomli_w.dumps(plan))
    return path


def wait_for(predicate: Any, timeout_s: float = 120.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def spawn_launcher(plan: Path, run_id: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "gpucost", "launch", str(plan),
                             "--run-id", run_id], stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def pids_with_token(token: str, *, rank0_worker: bool = False) -> list[int]:
    """Processes carrying the run's token, of this test's state folder (a run of the same id in
    another test session on this machine is not ours), optionally only rank 0 workers."""
    found = []
    for pid in token_processes(token):
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if not rank0_worker or b"RANK=0" in env:
            found.append(pid)
    return found


def epochs_in(run_dir: Path) -> list[int]:
    return [m["epoch"] for m in RunDir(run_dir).metrics()]


def cmdline_has(pid: int, needle: str) -> bool:
    try:
        return needle.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def kill_quietly(pids: list[int]) -> None:
    """SIGKILL what a failed test left behind (never a process it did not start)."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, 9)


def wait_for_epoch(run_id: str, launcher: subprocess.Popen[bytes],
                   timeout_s: float = 180.0) -> None:
    """Until the run reports an epoch; a launcher that exits first fails with what it said."""
    def reported() -> bool:
        if launcher.poll() is not None:
            err = launcher.stderr.read().decode() if launcher.stderr else ""
            raise AssertionError(f"the launcher exited {launcher.returncode}: {err}")
        return bool(epochs_in(RunDir.for_run(run_id).path))

    wait_for(reported, timeout_s, f"an epoch of {run_id}")


def job_lock_free(job: str) -> bool:
    """Whether the one-run-per-job lock of ``job`` can be taken now (and releases it)."""
    lock = RunLock([f"job:{job}"])
    try:
        lock.acquire("test")
    except LockBusy:
        return False
    lock.release()
    return True
