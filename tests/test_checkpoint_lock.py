"""One live run per checkpoint folder, whatever state folder launched it (#22 item 2).

The one-run-per-job locks live in GPUCOST_HOME; two homes (two users, a CI runner and a laptop
on one checkpoint disk) launching one plan ran two trainers into one folder. Real launchers, real
processes, two real state folders."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from run_helpers import (
    epochs_in,
    kill_quietly,
    pids_with_token,
    spawn_launcher,
    wait_for,
    wait_for_epoch,
    write_plan,
)

from gpucost import paths
from gpucost.cli import main
from gpucost.errors import InputError
from gpucost.executor.ledger import Ledger
from gpucost.executor.runlock import FOLDER_LOCK_NAME, FolderLock


def launch_from(home: Path, plan: Path, run_id: str,
                timeout_s: float = 120.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpucost", "launch", str(plan), "--run-id",
                           run_id], env={**os.environ, "GPUCOST_HOME": str(home)},
                          capture_output=True, text=True, timeout=timeout_s)


def pids_in_home(home: Path, token: str) -> list[int]:
    with pytest.MonkeyPatch.context() as env:
        env.setenv("GPUCOST_HOME", str(home))
        return pids_with_token(token)


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.mark.slow
def test_a_second_home_cannot_train_into_a_checkpoint_folder_in_use(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = write_plan(tmp_path, epochs=500)
    folder = tmp_path / "ckpt" / "tiny"
    other_home = tmp_path / "other-home"
    first = spawn_launcher(plan, "first")
    try:
        wait_for_epoch("first", launcher=first)
        refused = launch_from(other_home, plan, "second")
        assert refused.returncode == 2, refused.stderr
        line = one_line(refused.stderr)
        assert f"the checkpoint folder {folder} is in use by run first" in line, line
        assert f"on {socket.gethostname()}, GPUCOST_HOME={paths.home()})" in line, line
        assert "one live run per checkpoint folder" in line
        assert f"`GPUCOST_HOME={paths.home()} gpucost down first`" in line
        # The launcher killed outright: its guard, and the job, hold the folder on.
        first.kill()
        first.wait()
        assert pids_with_token("gpucost-first")
        refused = launch_from(other_home, plan, "second")
        assert refused.returncode == 2, refused.stderr
        assert "in use by run first" in one_line(refused.stderr)
        with Ledger() as ledger:  # the refused launches left no run in either home
            assert [r.run_id for r in ledger.runs()] == ["first"]
        assert not (other_home / "runs" / "second").exists()
        written = max(epochs_in(paths.runs_dir() / "first"))
        # Once the first run is gone, the lock file it leaves blocks nothing.
        assert main(["cleanup"]) == 0
        capsys.readouterr()
        wait_for(lambda: not pids_with_token("gpucost-first"), 60, "the first run to end")
        assert (folder / FOLDER_LOCK_NAME).exists()
        done = launch_from(other_home, write_plan(tmp_path, epochs=written + 1), "second",
                           timeout_s=300)
        assert done.returncode == 0, done.stderr
        assert "second succeeded" in done.stdout
        log = (other_home / "runs" / "second" / "train.log").read_text()
        assert "resumed from" in log
        owner = json.loads((folder / FOLDER_LOCK_NAME).read_text())
        assert (owner["run_id"], owner["gpucost_home"]) == ("second", str(other_home))
    finally:
        first.kill()
        kill_quietly(pids_with_token("gpucost-first") + pids_in_home(other_home,
                                                                      "gpucost-second"))


HOLDER = """
import sys, time
from gpucost.executor.runlock import FolderLock
from pathlib import Path
FolderLock(Path(sys.argv[1])).acquire("holder")
print("held", flush=True)
time.sleep(600)
"""


def test_a_lock_file_whose_holder_died_blocks_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "ck" / "job"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(InputError) as refused:
            FolderLock(folder).acquire("mine")
        assert "in use by run holder of user " in str(refused.value)
        assert f"(pid {holder.pid} on {socket.gethostname()}" in str(refused.value)
        os.kill(holder.pid, signal.SIGKILL)  # the kernel drops its flock; the file stays
        holder.wait()
        fd = FolderLock(folder).acquire("mine")
        os.close(fd)
        assert json.loads((folder / FOLDER_LOCK_NAME).read_text())["run_id"] == "mine"
    finally:
        holder.kill()
        holder.wait()


def test_a_lock_file_that_is_a_link_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "job"
    folder.mkdir()
    (folder / FOLDER_LOCK_NAME).symlink_to(tmp_path / "elsewhere")
    with pytest.raises(InputError, match="is a symbolic link"):
        FolderLock(folder).acquire("mine")
    assert not (tmp_path / "elsewhere").exists()
