"""Run records that match what happened (#22 item 7): the final state and last epoch come from
the job's own last report and the checkpoints on disk, and `status`, `ps --all`, `cleanup` and
the TUI's runs screen tell the same. Real launchers, guards and jobs, SIGKILLed for real; the
job is a small script whose epochs wait for a file the test writes, so the order of events is
the test's, not the machine's load."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from run_helpers import kill_quietly, pids_with_token, spawn_launcher, wait_for, write_plan

from gpucost.cli import main
from gpucost.executor.ledger import Ledger
from gpucost.executor.rundir import RunDir
from gpucost.executor.runfiles import RunStatusFile
from gpucost.tui.screens.runs import read_runs

# Reports epochs 1..N, each shipping a checkpoint; before epoch k it waits for the file
# <go>-k, when the test wrote one ("--hold k" per epoch that waits).
JOB = """\
import argparse, os, time
from pathlib import Path
import gpucost

p = argparse.ArgumentParser()
p.add_argument("--epochs", type=int)
p.add_argument("--go")
p.add_argument("--hold", type=int, action="append", default=[])
args = p.parse_args()
folder = Path(os.environ["GPUCOST_CHECKPOINT_DIR"])
folder.mkdir(parents=True, exist_ok=True)
for epoch in range(1, args.epochs + 1):
    if epoch in args.hold:
        while not Path(f"{args.go}-{epoch}").exists():
            time.sleep(0.05)
    path = folder / f"epoch-{epoch:06d}.pt"
    path.write_bytes(b"weights %d" % epoch)
    gpucost.report(epoch=epoch, metrics={"loss": 1.0 / epoch}, throughput=2000.0,
                   checkpoint=path)
"""
DEADLINE_S = 60.0  # each wait; a loaded 2-core box takes seconds where an idle one takes less


def job_plan(tmp_path: Path, name: str, *, epochs: int, hold: tuple[int, ...] = ()) -> Path:
    """A plan of job ``name`` in its own folder (one live run per job), running :data:`JOB`."""
    folder = tmp_path / name
    folder.mkdir()
    (folder / "job.py").write_text(JOB)
    command = ["python", str(folder / "job.py"), "--epochs", str(epochs),
               "--go", str(folder / "go")]
    for epoch in hold:
        command += ["--hold", str(epoch)]
    return write_plan(folder, name=name, epochs=epochs, command=command)


def release(plan: Path, epoch: int) -> None:
    """Let the job of ``plan`` go on to ``epoch``."""
    (plan.parent / f"go-{epoch}").touch()


def status_json(run_id: str) -> RunStatusFile:
    return RunDir.for_run(run_id).read_status() or RunStatusFile()


def checkpoint_of(plan: Path, name: str, epoch: int) -> str:
    return str(plan.parent / "ckpt" / name / f"epoch-{epoch:06d}.pt")


def kill_launcher(launcher: subprocess.Popen[bytes]) -> None:
    launcher.kill()
    launcher.wait()


def ledger_ended(run_id: str) -> bool:
    with Ledger() as ledger:
        return ledger.run(run_id).ended_at is not None


@pytest.mark.slow
def test_a_run_whose_launcher_was_killed_ends_at_the_jobs_last_epoch_and_checkpoint(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: the guard recorded "succeeded" over the launcher's last status.json, which said
    epoch 1 / 2 and the epoch-1 checkpoint though the job had written epoch 2."""
    plan = job_plan(tmp_path, "killed", epochs=2, hold=(2,))
    launcher = spawn_launcher(plan, "killed")
    try:
        wait_for(lambda: status_json("killed").epoch == 1, DEADLINE_S,
                 "the launcher to see epoch 1")
        kill_launcher(launcher)
        release(plan, 2)
        wait_for(lambda: ledger_ended("killed"), DEADLINE_S, "the guard to record the end")
        assert main(["status", "killed"]) == 0
        out = capsys.readouterr().out
        assert "state     succeeded\n" in out, out
        assert "epoch     2 / 2\n" in out, out
        assert f"ckpt      {checkpoint_of(plan, 'killed', 2)}\n" in out, out
        assert "loss      0.5\n" in out, out
        written = status_json("killed")  # the file outsiders read says the same
        assert (written.state, written.epoch, written.checkpoint, written.final) == (
            "succeeded", 2, checkpoint_of(plan, "killed", 2), True)
    finally:
        kill_launcher(launcher)
        kill_quietly(pids_with_token("gpucost-killed"))


@pytest.mark.slow
def test_ps_all_shows_a_running_run_as_running(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: the ledger's state, written once at the start, so `starting` all run long."""
    plan = job_plan(tmp_path, "live", epochs=2, hold=(2,))
    launcher = spawn_launcher(plan, "live")
    try:
        wait_for(lambda: status_json("live").epoch == 1, DEADLINE_S, "epoch 1")
        assert main(["ps", "--all"]) == 0
        out = capsys.readouterr().out
        row = next(line for line in out.splitlines() if line.startswith("live "))
        assert row.split()[2] == "running", out
        assert main(["ps", "--all", "--format", "json"]) == 0
        [run] = json.loads(capsys.readouterr().out)["runs"]
        assert (run["state"], run["epoch"], run["final"]) == ("running", 1, False)
        release(plan, 2)
        assert launcher.wait(timeout=DEADLINE_S) == 0
    finally:
        kill_launcher(launcher)
        kill_quietly(pids_with_token("gpucost-live"))


def four_views(capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, tuple[Any, ...]]]:
    """View -> run id -> (state, epoch, checkpoint) as `status --format json`, `ps --all
    --format json` and the TUI's runs screen tell it."""
    views: dict[str, dict[str, tuple[Any, ...]]] = {"status": {}, "ps": {}, "tui": {}}
    capsys.readouterr()
    assert main(["ps", "--all", "--format", "json"]) == 0
    for run in json.loads(capsys.readouterr().out)["runs"]:
        views["ps"][run["run_id"]] = (run["state"], run.get("epoch"), run.get("checkpoint"))
        assert main(["status", run["run_id"], "--format", "json"]) == 0
        status = json.loads(capsys.readouterr().out)["status"]
        views["status"][run["run_id"]] = (status["state"], status["epoch"], status["checkpoint"])
    for tui_run in read_runs():
        s = tui_run.status
        views["tui"][tui_run.run_id] = (tui_run.state, s.epoch, s.checkpoint)
    return views


@pytest.mark.slow
def test_status_ps_cleanup_and_the_tui_tell_the_same_runs_alike(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Four runs: one running under its launcher, one whose launcher was killed and whose job
    then finished, one orphaned (launcher killed, job running) that cleanup then ends, one that
    succeeded. Before: ps said `starting` for the live run and the orphan, the TUI `running`
    for the orphan, status `orphaned`; the killed one read epoch 1 with its epoch-1
    checkpoint everywhere."""
    plans = {"live": job_plan(tmp_path, "live", epochs=3, hold=(3,)),
             "killed": job_plan(tmp_path, "killed", epochs=2, hold=(2,)),
             "orphan": job_plan(tmp_path, "orphan", epochs=3, hold=(3,)),
             "done": job_plan(tmp_path, "done", epochs=2)}
    assert main(["launch", str(plans["done"]), "--run-id", "done"]) == 0
    launchers = {name: spawn_launcher(plans[name], name) for name in ("live", "killed", "orphan")}
    try:
        for name, epoch in (("live", 2), ("killed", 1), ("orphan", 2)):
            wait_for(lambda n=name, e=epoch: status_json(n).epoch == e, DEADLINE_S,
                     f"{name} at epoch {epoch}")
        kill_launcher(launchers["killed"])
        kill_launcher(launchers["orphan"])
        release(plans["killed"], 2)
        wait_for(lambda: ledger_ended("killed"), DEADLINE_S, "the guard to record the end")

        def ckpt(name: str, epoch: int) -> str:
            return checkpoint_of(plans[name], name, epoch)

        expected = {
            "live": ("running", 2, ckpt("live", 2)),
            "killed": ("succeeded", 2, ckpt("killed", 2)),
            "orphan": ("orphaned (was running; launcher gone)", 2, ckpt("orphan", 2)),
            "done": ("succeeded", 2, ckpt("done", 2)),
        }
        views = four_views(capsys)
        for view, seen in views.items():
            assert seen == expected, (view, seen)

        assert main(["cleanup"]) == 0
        said = capsys.readouterr().out
        assert (f"orphan: ended orphaned at epoch 2 / 3; last checkpoint {ckpt('orphan', 2)}"
                in said.splitlines()), said
        assert "live" not in said and "killed" not in said and "done" not in said, said
        expected["orphan"] = ("orphaned", 2, ckpt("orphan", 2))
        views = four_views(capsys)
        for view, seen in views.items():
            assert seen == expected, (view, seen)
        assert all(r.final == (r.run_id != "live") for r in read_runs())

        release(plans["live"], 3)
        assert launchers["live"].wait(timeout=DEADLINE_S) == 0
        expected["live"] = ("succeeded", 3, ckpt("live", 3))
        assert four_views(capsys)["status"] == expected
    finally:
        for launcher in launchers.values():
            kill_launcher(launcher)
        kill_quietly([pid for name in plans for pid in pids_with_token(f"gpucost-{name}")])


def test_status_names_the_newest_checkpoint_still_on_disk(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The job shipped epochs 1 to 3 and the epoch-3 file is gone (deleted by hand, a target
    cleaned): status names epoch 2, the one a resume would take; before, status.json's
    epoch-3 path. An s3:// checkpoint cannot be checked from here and is taken as reported."""
    rd = RunDir.for_run("ck").create()
    with Ledger() as ledger:
        ledger.create_run(run_id="ck", name="ck", plan_path="p", provider="local",
                          run_dir=str(rd.path), price_hr=0.01, nodes=1, budget_cap_usd=1.0)
    shipped = [tmp_path / f"epoch-{epoch:06d}.pt" for epoch in (1, 2, 3)]
    reports = [{"time": 1.0 + epoch, "epoch": epoch, "metrics": {}, "checkpoint": str(path)}
               for epoch, path in enumerate(shipped, 1)]
    for path in shipped[:2]:
        path.write_bytes(b"weights")
    rd.metrics_path.write_text("".join(json.dumps(r) + "\n" for r in reports))
    rd.progress_path.write_text(json.dumps(reports[-1]))
    rd.write_status({"state": "running", "epoch": 3, "epochs": 3.0,
                     "checkpoint": str(shipped[2])})
    assert main(["status", "ck"]) == 0
    out = capsys.readouterr().out
    assert f"ckpt      {shipped[1]}\n" in out and "epoch     3 / 3\n" in out, out
    rd.progress_path.write_text(json.dumps({**reports[-1], "checkpoint": "s3://b/ck/x.pt"}))
    assert main(["status", "ck"]) == 0
    assert "ckpt      s3://b/ck/x.pt\n" in capsys.readouterr().out


@pytest.mark.slow
def test_down_of_an_orphan_leaves_a_final_status(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`gpucost down` of a run whose launcher was killed: before, the ledger said destroyed
    and status.json went on saying running, not final (what `logs -f` and outside readers
    follow)."""
    plan = job_plan(tmp_path, "gone", epochs=2, hold=(2,))
    launcher = spawn_launcher(plan, "gone")
    try:
        wait_for(lambda: status_json("gone").epoch == 1, DEADLINE_S, "epoch 1")
        kill_launcher(launcher)
        assert main(["down", "gone"]) == 0
        written = status_json("gone")
        assert (written.state, written.final, written.epoch) == ("destroyed", True, 1)
        assert "`gpucost down` destroyed its resources" in (written.reason or "")
        capsys.readouterr()
        assert main(["status", "gone"]) == 0
        out = capsys.readouterr().out
        assert "state     destroyed\n" in out and "hint" not in out, out
    finally:
        kill_launcher(launcher)
        kill_quietly(pids_with_token("gpucost-gone"))
