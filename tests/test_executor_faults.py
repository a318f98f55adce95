"""The executor under faults a user meets: a corrupt ledger, hostile job names, a truncated
checkpoint, an unreachable provider during cleanup. Real launches, real files, real exit codes."""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from run_helpers import (
    cmdline_has,
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
from gpucost.executor import PROVIDERS
from gpucost.executor.checkpoints import CheckpointStore
from gpucost.executor.guard import KILL_WAIT_S, STOP_GRACE_S, TORCHRUN_GRACE_S
from gpucost.executor.ledger import Ledger
from gpucost.executor.rundir import RunDir
from gpucost.executor.skypilot import SkyPilotProvider


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# -- an unreadable ledger ---------------------------------------------------------------------
@pytest.mark.parametrize("damage", ["garbage", "truncated", "foreign-tables"])
def test_an_unreadable_ledger_is_one_line_exit_2_in_every_command(
        tmp_path: Path, damage: str, capsys: pytest.CaptureFixture[str]) -> None:
    ledger = paths.ledger_path()
    with Ledger() as good:  # a real ledger with a run in it, then damaged
        good.create_run(run_id="r1", name="tiny", plan_path="p", provider="local",
                        run_dir=str(tmp_path), price_hr=1.0, nodes=1, budget_cap_usd=1.0)
    if damage == "garbage":
        ledger.write_bytes(b"this is not a database\n" * 100)
    elif damage == "truncated":
        with open(ledger, "r+b") as f:
            f.truncate(100)
    else:
        ledger.unlink()
        with sqlite3.connect(ledger) as db:
            db.execute("CREATE TABLE runs (id INTEGER, what TEXT)")
    for suffix in ("-wal", "-shm"):
        Path(str(ledger) + suffix).unlink(missing_ok=True)
    before = ledger.read_bytes()
    plan = write_plan(tmp_path)
    for argv in (["ps"], ["ps", "--all"], ["status", "r1"], ["cleanup"], ["down", "--all"],
                 ["down", "r1"], ["stop", "r1"], ["launch", str(plan)],
                 ["launch", str(plan), "--detach"]):
        assert main(argv) == 2, argv
        line = one_error_line(capsys.readouterr().err)
        assert f"the ledger {ledger} is unreadable" in line, line
        assert f"mv {ledger} {ledger}.broken" in line
    assert ledger.read_bytes() == before  # reported, never "repaired" or overwritten
    assert not paths.runs_dir().exists() or not any(paths.runs_dir().iterdir())


def test_the_watchdog_reports_an_unreadable_ledger_in_one_line(tmp_path: Path) -> None:
    # The SkyPilot watchdog writes into launcher.log: a damaged ledger is one line there and exit
    # 3 (it cannot guard the run), not a traceback.
    paths.ledger_path().parent.mkdir(parents=True, exist_ok=True)
    paths.ledger_path().write_bytes(b"this is not a database\n" * 100)
    done = subprocess.run([sys.executable, "-m", "gpucost.executor.watchdog", "r1",
                           f"--timeout-at={time.time() + 60!r}"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 3, done.stderr
    line = one_error_line(done.stderr)
    assert "the watchdog of run r1 stopped" in line and "is unreadable" in line, line


# -- job names --------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["../../victim", "team/exp1", "a\\b", "nul\x00byte",
                                  "bell\x07", "", ".."])
def test_a_job_name_that_is_a_path_is_refused_by_launch_and_preflight(
        tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    plan = write_plan(tmp_path, name=name)
    assert main(["launch", str(plan)]) == 2
    assert "[job] name" in one_error_line(capsys.readouterr().err)
    assert main(["preflight", str(plan)]) != 0
    out = capsys.readouterr()
    assert "[job] name" in out.out + out.err
    with Ledger() as ledger:
        assert ledger.runs() == []
    assert not any(tmp_path.parent.glob("victim*")) and not (tmp_path / "ckpt").exists()


def test_a_checkpoint_store_never_leaves_its_target(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="refused"):
        CheckpointStore(f"local:{tmp_path}", namespace="../../x")
    store = CheckpointStore(f"local:{tmp_path / 'ck'}", namespace="team-exp1")
    assert store.resolved_target == f"local:{tmp_path / 'ck'}"
    # What the job is told (target + namespace) is the folder the launcher resumes from.
    again = CheckpointStore(store.resolved_target, namespace="team-exp1")
    assert again.local_dir == store.local_dir == tmp_path / "ck" / "team-exp1"


def test_a_hostile_run_id_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["launch", str(write_plan(tmp_path)), "--run-id", "../../escape"]) == 2
    assert "run id '../../escape' is refused" in one_error_line(capsys.readouterr().err)


# -- resume from the newest readable checkpoint --------------------------------------------------
@pytest.mark.slow
def test_a_truncated_newest_checkpoint_resumes_from_the_one_before(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = write_plan(tmp_path, epochs=3)
    assert main(["launch", str(plan), "--run-id", "first"]) == 0
    folder = tmp_path / "ckpt" / "tiny"
    newest = folder / "epoch-000003.pt"
    size = newest.stat().st_size
    with open(newest, "r+b") as f:  # a disk that filled up, a copy cut short
        f.truncate(size // 2)
    plan = write_plan(tmp_path, epochs=4)
    assert main(["launch", str(plan), "--run-id", "second"]) == 0
    capsys.readouterr()
    rd = RunDir.for_run("second")
    assert f"resumed from {folder / 'epoch-000002.pt'}" in rd.log_path.read_text()
    notes = rd.launcher_log_path.read_text()
    assert (f"checkpoint epoch-000003.pt is unreadable ({size // 2} bytes where {size} were "
            "shipped (truncated))") in notes
    assert epochs_in(rd.path) == [3, 4]


def test_a_checkpoint_without_manifest_is_checked_as_a_zip(tmp_path: Path) -> None:
    import torch

    store = CheckpointStore(f"local:{tmp_path}", namespace="job")
    assert store.local_dir is not None
    store.local_dir.mkdir(parents=True)
    for epoch in (1, 2):  # written by hand (or by an older gpucost): no manifests
        torch.save({"epoch": epoch}, store.local_dir / f"epoch-00000{epoch}.pt")
    whole = store.local_dir / "epoch-000002.pt"
    data = whole.read_bytes()
    whole.write_bytes(data[: len(data) // 2])
    skipped: list[str] = []
    assert store.fetch_latest(tmp_path, skipped=skipped.append) == store.local_dir / (
        "epoch-000001.pt")
    assert skipped == ["checkpoint epoch-000002.pt is unreadable (a zip archive (torch.save) "
                       "cut short); trying the one before"]


# -- cleanup past an unreachable provider --------------------------------------------------------
def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ledger_run_of_a_dead_launcher(run_id: str, provider: str, config: dict[str, object],
                                  resource_id: str | None) -> None:
    """A run whose launcher died (a real process that recorded it and exited), with a resource
    the provider named (``resource_id``) or only the intent to create one (None)."""
    code = (
        "from gpucost.executor.ledger import Ledger\n"
        "from gpucost.executor.base import Resource\n"
        "import json, sys\n"
        "l = Ledger()\n"
        f"l.create_run(run_id={run_id!r}, name={run_id!r}, plan_path='p', "
        f"provider={provider!r}, run_dir='/nonexistent', price_hr=1.0, nodes=1, "
        "budget_cap_usd=1.0)\n"
        f"row = l.intent(run_id={run_id!r}, provider={provider!r}, token='t-{run_id}', "
        f"kind='instance', region='', config={config!r})\n")
    if resource_id is not None:
        code += (f"l.record(row, [Resource(provider={provider!r}, resource_id={resource_id!r}, "
                 f"token='t-{run_id}')], 'running')\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


class UnreachableApiServer:
    """SkyPilot's SDK with its API server gone: every call is refused by a closed port."""

    def __getattr__(self, name: str) -> Callable[..., None]:
        def call(*_args: object, **_kwargs: object) -> None:
            socket.create_connection(("127.0.0.1", closed_port()), timeout=2).close()

        return call


class SkyPilotUnreachable(SkyPilotProvider):
    def __init__(self, cloud: str = "", managed: bool = False) -> None:
        super().__init__(cloud, managed, client_factory=UnreachableApiServer)


@pytest.mark.slow
@pytest.mark.parametrize("command", [["cleanup"], ["down", "--all"]])
def test_one_unreachable_provider_does_not_stop_cleanup_of_the_rest(
        tmp_path: Path, command: list[str], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(PROVIDERS, "skypilot", (__name__, "SkyPilotUnreachable"))
    # A SkyPilot cluster whose API server refuses connections, listed before the local orphan.
    ledger_run_of_a_dead_launcher("a-unreachable", "skypilot", {"cloud": "aws"},
                                  "gpucost-a-unreachable")
    plan = write_plan(tmp_path, epochs=50)
    launcher = spawn_launcher(plan, "b-orphan")
    wait_for_epoch("b-orphan", launcher)
    launcher.kill()
    launcher.wait()
    assert pids_with_token("gpucost-b-orphan")
    assert main(command) == 3
    captured = capsys.readouterr()
    assert "b-orphan: destroy local process" in captured.out
    errors = captured.err.strip().splitlines()
    assert "Traceback" not in captured.err
    assert any("a-unreachable: cannot destroy skypilot instance gpucost-a-unreachable: skypilot "
               "status: ConnectionRefusedError" in e for e in errors), errors
    assert "skypilot failed" in errors[-1] and "gpucost cleanup" in errors[-1]
    wait_for(lambda: not pids_with_token("gpucost-b-orphan"), 30, "the orphan to be gone")
    with Ledger() as ledger:
        live = ledger.resources(live_only=True)
        assert [r.run_id for r in live] == ["a-unreachable"]  # kept for the next try
        assert ledger.run("a-unreachable").ended_at is None


def test_cleanup_with_nothing_to_do_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cleanup"]) == 0
    assert capsys.readouterr().out.strip() == "nothing to clean up"
    assert os.path.exists(paths.ledger_path())


def test_detach_fails_when_its_launcher_cannot_start_the_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_plan(tmp_path)
    path.write_text(path.read_text().replace(f'workdir = "{tmp_path}"',
                                             f'workdir = "{tmp_path / "missing"}"'))
    assert main(["launch", str(path), "--detach"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # no run id for a run that does not exist
    line = one_error_line(captured.err)
    assert "workdir" in line and "does not exist" in line
    with Ledger() as ledger:
        assert ledger.runs() == []


# -- every process of the job is reached -------------------------------------------------------
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.mark.slow
@pytest.mark.parametrize("killed", [["agent"], ["guard", "agent"]], ids=["agent", "guard+agent"])
def test_torchrun_agent_sigkilled_leaves_no_worker_after_cleanup(
        tmp_path: Path, killed: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    plan = write_plan(tmp_path, provider="torchrun", gpu_count=2, epochs=500)
    launcher = spawn_launcher(plan, "agentkill")
    token = "gpucost-agentkill"
    try:
        wait_for_epoch("agentkill", launcher)
        workers = pids_with_token(token, rank0_worker=True)
        assert workers
        launcher.kill()  # as the OOM killer would: nothing of gpucost's runs its teardown
        launcher.wait()
        for what in killed:
            guard = [p for p in pids_with_token(token) if cmdline_has(p, "executor.guard")]
            agent = [p for p in pids_with_token(token) if p not in guard
                     and cmdline_has(p, "torch.distributed.run")]
            (pid,) = guard if what == "guard" else agent
            os.kill(pid, signal.SIGKILL)
        assert main(["cleanup"]) == 0
        assert "agentkill: destroy torchrun process" in capsys.readouterr().out
        assert pids_with_token(token) == []
        with Ledger() as ledger:
            assert ledger.resources(live_only=True) == []
    finally:
        kill_quietly(pids_with_token(token))


@pytest.mark.slow
@pytest.mark.parametrize(("limits", "state"), [
    # Long enough for torchrun to start both workers on a busy machine.
    ({"timeout_h": 60.0 / 3600, "est_hours": 1.0 / 3600}, "timed-out"),
    ({"price_hr": 3600.0, "budget": 60.0, "est_cost": 1.0}, "budget-exceeded"),
], ids=["timeout", "budget"])
def test_workers_ignoring_sigterm_are_gone_within_the_grace_and_only_then_is_the_run_ended(
        tmp_path: Path, limits: dict[str, float], state: str) -> None:
    plan = write_plan(tmp_path, provider="torchrun", gpu_count=2,
                      command=["python", str(FIXTURES / "ignores_sigterm.py")], **limits)
    launcher = spawn_launcher(plan, "stubborn")
    token = "gpucost-stubborn"
    try:
        wait_for(lambda: len(pids_with_token(token, rank0_worker=True)) == 1, 120,
                 "the workers")
        rd = RunDir.for_run("stubborn")
        start = time.monotonic()
        limit_hit: float | None = None
        with Ledger() as ledger:
            while launcher.poll() is None:
                ended = ledger.run("stubborn").ended_at
                alive = pids_with_token(token)
                assert ended is None or not alive, f"run ended while {alive} live"
                assert time.monotonic() - start < 60 + STOP_GRACE_S + 2 * KILL_WAIT_S + 60
                if limit_hit is None and ("stopping the run" in rd.launcher_log_path.read_text()
                                          or "ending the job" in rd.log_path.read_text()):
                    limit_hit = time.monotonic()  # the first SIGTERM is sent about now
                time.sleep(0.2)
            assert launcher.returncode == 1
            assert pids_with_token(token) == []
            assert ledger.run("stubborn").state == state
        # The workers ignored SIGTERM: they were SIGKILLed once the grace, which is no shorter
        # than torchrun's own, had passed.
        assert limit_hit is not None
        assert time.monotonic() - limit_hit >= TORCHRUN_GRACE_S - 1.0
    finally:
        launcher.kill()
        kill_quietly(pids_with_token(token))


@pytest.mark.slow
@pytest.mark.parametrize(("limits", "note", "state"), [
    # Long enough for the first epoch on a loaded 2-core machine: both limits count from launch.
    ({"timeout_h": 120.0 / 3600, "est_hours": 1.0 / 3600}, "the hard timeout is reached",
     "timed-out"),
    # 3600 USD/h is 1 USD/s: the 120 USD cap is reached about 120 s after the create.
    ({"price_hr": 3600.0, "budget": 120.0, "est_cost": 1.0}, "the budget cap is reached",
     "budget-exceeded"),
], ids=["timeout", "budget"])
def test_the_limits_end_the_job_after_the_launcher_is_sigkilled(
        tmp_path: Path, limits: dict[str, float], note: str, state: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    plan = write_plan(tmp_path, epochs=5000, **limits)
    launcher = spawn_launcher(plan, "headless")
    token = "gpucost-headless"
    try:
        rd = RunDir.for_run("headless")
        wait_for_epoch("headless", launcher)
        launcher.kill()
        launcher.wait()
        assert pids_with_token(token), "the job outlives its launcher until its limit"
        wait_for(lambda: not pids_with_token(token), 120 + 60, "the limit to end it")
        assert f"{note}: ending the job" in rd.log_path.read_text()
        assert max(epochs_in(rd.path)) < 5000
        # The guard recorded the end: no `gpucost cleanup` is needed for ps and status.
        with Ledger() as ledger:
            run = ledger.run("headless")
            assert (run.state, run.ended_at is not None) == (state, True)
            assert all(s.ended_at is not None for s in run.segments)
            assert ledger.resources(live_only=True) == []
        status = rd.read_status()
        assert status is not None and (status.state, status.final) == (state, True)
        assert "launcher was gone" in (status.reason or "")
        capsys.readouterr()
        assert main(["ps"]) == 0 and capsys.readouterr().out.strip() == "no live resources"
        assert main(["status", "headless"]) == 0
        out = capsys.readouterr().out
        assert f"state     {state}" in out and "orphaned" not in out
        assert f"reason    {note}; its launcher was gone" in out
    finally:
        kill_quietly(pids_with_token(token))


# -- one live run per job --------------------------------------------------------------------
@pytest.mark.slow
def test_two_launches_of_one_plan_make_one_run(tmp_path: Path) -> None:
    plan = write_plan(tmp_path, epochs=3)
    first, second = spawn_launcher(plan, "one"), spawn_launcher(plan, "two")
    try:
        codes = {"one": first.wait(timeout=300), "two": second.wait(timeout=300)}
        errs = {"one": first.stderr.read().decode() if first.stderr else "",
                "two": second.stderr.read().decode() if second.stderr else ""}
        assert sorted(codes.values()) == [0, 2], (codes, errs)
        loser = "one" if codes["one"] == 2 else "two"
        winner = "two" if loser == "one" else "one"
        line = one_error_line(errs[loser])
        assert "is in use by" in line and "one live run per job" in line
        with Ledger() as ledger:
            assert [r.run_id for r in ledger.runs()] == [winner]
        assert epochs_in(RunDir.for_run(winner).path) == [1, 2, 3]
    finally:
        first.kill()
        second.kill()
        kill_quietly(pids_with_token("gpucost-one") + pids_with_token("gpucost-two"))


@pytest.mark.slow
def test_a_second_launch_of_a_live_run_refuses_and_a_relaunch_over_an_orphan_ends_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = write_plan(tmp_path, epochs=500)
    launcher = spawn_launcher(plan, "orphan")
    try:
        wait_for_epoch("orphan", launcher)
        assert main(["launch", str(plan), "--run-id", "refused"]) == 2
        line = one_error_line(capsys.readouterr().err)
        assert "in use by run orphan" in line and "`gpucost stop orphan`" in line
        launcher.kill()
        launcher.wait()
        orphan_pids = pids_with_token("gpucost-orphan")
        assert orphan_pids  # training on, holding the job
        done = write_plan(tmp_path, epochs=2)  # the relaunch resumes past the last epoch
        assert main(["launch", str(done), "--run-id", "relaunch"]) == 0
        captured = capsys.readouterr()
        assert "ending orphan first: an orphaned run of job 'tiny'" in captured.err
        assert "ending orphan first" in RunDir.for_run("relaunch").launcher_log_path.read_text()
        assert pids_with_token("gpucost-orphan") == []
        with Ledger() as ledger:
            assert {r.run_id: r.state for r in ledger.runs()} == {
                "orphan": "orphaned", "relaunch": "succeeded"}
        log = RunDir.for_run("relaunch").log_path.read_text()
        assert "resumed from" in log
    finally:
        launcher.kill()
        kill_quietly(pids_with_token("gpucost-orphan"))
