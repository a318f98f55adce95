"""Run records that match what happened (#22 item 7): an orphan that `cleanup` or a relaunch
ended reads ended in `status`, not "launcher gone, run `gpucost cleanup`". Real launchers killed
with SIGKILL, the real CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
from run_helpers import kill_quietly, pids_with_token, spawn_launcher, wait_for_epoch, write_plan

from gpucost.cli import main
from gpucost.executor.rundir import RunDir


def killed_launcher_run(tmp_path: Path, run_id: str) -> None:
    launcher = spawn_launcher(write_plan(tmp_path, epochs=5000), run_id)
    try:
        wait_for_epoch(run_id, launcher)
    finally:
        launcher.kill()
        launcher.wait()


@pytest.mark.slow
@pytest.mark.parametrize("ender", ["cleanup", "relaunch"])
def test_an_orphan_once_ended_reads_ended_in_status(
        tmp_path: Path, ender: str, capsys: pytest.CaptureFixture[str]) -> None:
    try:
        killed_launcher_run(tmp_path, "orphan")
        assert main(["status", "orphan"]) == 0
        assert "hint      run `gpucost cleanup`" in capsys.readouterr().out  # true here
        if ender == "cleanup":
            assert main(["cleanup"]) == 0
            reason = "its launcher was gone; `gpucost cleanup` released its resources"
        else:
            assert main(["launch", str(write_plan(tmp_path, epochs=1)), "--run-id", "next"]) == 0
            reason = ("its launcher was gone; run next of the same job ended it before "
                      "starting; its resources were released")
        capsys.readouterr()
        assert main(["status", "orphan"]) == 0
        out = capsys.readouterr().out
        assert "state     orphaned\n" in out, out
        assert f"reason    {reason}\n" in out, out
        assert "launcher gone" not in out and "gpucost cleanup` to release" not in out
        status = RunDir.for_run("orphan").read_status()
        assert status is not None and (status.state, status.final) == ("orphaned", True)
    finally:
        kill_quietly(pids_with_token("gpucost-orphan") + pids_with_token("gpucost-next"))
