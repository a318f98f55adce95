"""No process of a run outlives its guard's death (#22 item 1).

The guard is a subreaper; SIGKILLed (the OOM killer, kill -9) it hands what the job started to
init. A torchrun agent and its workers carried the run's token but the launcher, seeing its guard
gone, released nothing and `cleanup` found the run ended; a daemon started with a clean
environment carried no token at all. The guard's process record (pid + start time) and the token
find them now. Real launchers, real torchrun (gloo on the CPU), real SIGKILLs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from run_helpers import (
    cmdline_has,
    kill_quietly,
    pids_with_token,
    spawn_launcher,
    wait_for,
    wait_for_epoch,
    write_plan,
)

from gpucost import paths
from gpucost.cli import main
from gpucost.executor.containment import PROCESS_RECORD, read_record, write_record
from gpucost.executor.ledger import Ledger, process_start

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def gone(identities: list[str]) -> bool:
    """None of these processes (pid + start time) is alive any more."""
    return all(process_start(int(i.split(":")[0])) != i for i in identities)


def the_guard(token: str) -> int:
    (guard,) = [p for p in pids_with_token(token) if cmdline_has(p, "executor.guard")]
    return guard


@pytest.mark.slow
def test_a_sigkilled_guard_of_a_torchrun_run_leaves_no_process(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = write_plan(tmp_path, provider="torchrun", gpu_count=2, epochs=20000)
    launcher = spawn_launcher(plan, "guardkill")
    token = "gpucost-guardkill"
    try:
        wait_for_epoch("guardkill", launcher)
        assert pids_with_token(token, rank0_worker=True)
        guard = the_guard(token)
        run = [i for p in pids_with_token(token) if p != guard and (i := process_start(p))]
        assert len(run) >= 3  # the agent and its two workers
        os.kill(guard, signal.SIGKILL)  # the launcher lives: it sees its guard gone
        assert launcher.wait(timeout=180) == 3
        assert main(["cleanup"]) == 0
        capsys.readouterr()
        wait_for(lambda: gone(run), 60, "the agent and workers to end")
        assert pids_with_token(token) == []
        assert main(["ps"]) == 0
        assert capsys.readouterr().out.strip() == "no live resources"
    finally:
        launcher.kill()
        kill_quietly(pids_with_token(token))


@pytest.mark.slow
def test_a_clean_environment_daemon_of_the_job_is_ended_by_cleanup_after_the_guard_dies(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pidfile = tmp_path / "daemon.pid"
    plan = write_plan(tmp_path, command=["python", str(FIXTURES / "clean_env_daemon.py"),
                                         str(pidfile)])
    launcher = spawn_launcher(plan, "daemon")
    token = "gpucost-daemon"
    daemon = 0
    try:
        daemon = int(wait_for(lambda: pidfile.exists() and pidfile.read_text(), 60,
                              "the daemon to start"))
        identity = process_start(daemon)
        assert identity is not None
        assert b"GPUCOST_TOKEN" not in Path(f"/proc/{daemon}/environ").read_bytes()
        record = paths.runs_dir() / "daemon" / PROCESS_RECORD
        wait_for(lambda: identity in read_record(record), 60, "the guard to record it")
        launcher.kill()
        launcher.wait()
        guard = the_guard(token)
        os.kill(guard, signal.SIGKILL)
        wait_for(lambda: process_start(guard) is None, 60, "the guard to die")
        assert process_start(daemon) == identity  # alive, out of every tree of the run
        capsys.readouterr()
        assert main(["ps"]) == 0
        listed = [line for line in capsys.readouterr().out.splitlines()
                  if "leftover process" in line]
        assert any(f" {daemon} " in line for line in listed), listed
        assert main(["cleanup"]) == 0
        assert "daemon: destroy local process" in capsys.readouterr().out
        wait_for(lambda: process_start(daemon) is None, 60, "the daemon to end")
        assert pids_with_token(token) == []
    finally:
        launcher.kill()
        kill_quietly(pids_with_token(token) + ([daemon] if daemon else []))


def test_cleanup_ends_recorded_processes_of_a_run_the_ledger_calls_ended(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Whatever the ledger says: a run that ended, with no live resource, whose guard's record
    names a live process. A recorded pid now held by another process is never signalled."""
    run_dir = tmp_path / "runs" / "ended"
    run_dir.mkdir(parents=True)
    leftover = subprocess.Popen(["sleep", "600"], env={})
    stranger = subprocess.Popen(["sleep", "600"], env={})
    try:
        mine = process_start(leftover.pid)
        assert mine is not None
        reused = f"{stranger.pid}:1"  # this pid, another (older) process's start time
        write_record(run_dir / PROCESS_RECORD, [mine, reused])
        code = ("from gpucost.executor.ledger import Ledger\n"
                "l = Ledger()\n"
                "l.create_run(run_id='ended', name='ended', plan_path='p', provider='local', "
                f"run_dir={str(run_dir)!r}, price_hr=0.0, nodes=1, budget_cap_usd=1.0)\n"
                "l.set_run_state('ended', 'failed', ended=True)\n")
        subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
        with Ledger() as ledger:
            assert ledger.resources(live_only=True) == []
        assert main(["ps", "--format", "json"]) == 0
        out = capsys.readouterr().out
        assert f'"resource_id": "{leftover.pid}"' in out
        assert f'"{stranger.pid}"' not in out
        assert main(["cleanup"]) == 0
        assert (capsys.readouterr().out.strip()
                == f"ended: ended 1 process(es) its guard left running ({leftover.pid})")
        assert leftover.wait(timeout=60) == -signal.SIGTERM
        assert stranger.poll() is None
        assert main(["cleanup"]) == 0
        assert capsys.readouterr().out.strip() == "nothing to clean up"
    finally:
        for proc in (leftover, stranger):
            proc.kill()
            proc.wait()
