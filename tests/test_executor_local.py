"""The executor on this machine: real training runs via `local` and `torchrun` (gloo, 2 processes),
killed and resumed, launcher killed and cleaned up, and the hard limits (budget cap, timeout,
verify-on-arrival, SIGTERM) enforced with teardown."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from run_helpers import EXAMPLES, epochs_in, pids_with_token, spawn_launcher, wait_for, write_plan

from gpucost.cli import main
from gpucost.executor.checkpoints import CheckpointStore
from gpucost.executor.ledger import Ledger, process_start
from gpucost.executor.local import LocalProvider
from gpucost.executor.rundir import RunDir
from gpucost.executor.runfiles import RunStatusFile
from gpucost.executor.runner import Runner
from gpucost.executor.verify import verify_throughput
from gpucost.planfile import load_plan


# -- unit: verification arithmetic, report, ledger, checkpoints ---------------------------------
def test_verify_throughput_reestimates_cost_from_measured_speed(tmp_path: Path) -> None:
    plan = load_plan(write_plan(tmp_path, samples=3600, epochs=1, throughput=100.0,
                                price_hr=3.6, est_hours=0.01, est_cost=0.036, margin=25.0))
    slow = verify_throughput(plan, 50.0)  # half the planned speed: 72 s instead of 36 s
    assert slow.deviation_pct == pytest.approx(-50.0)
    assert not slow.within_margin
    assert slow.reestimated_hours == pytest.approx(72.0 / 3600.0)
    assert slow.reestimated_cost_usd == pytest.approx(0.072)
    close = verify_throughput(plan, 110.0)
    assert close.within_margin and close.deviation_pct == pytest.approx(10.0)
    assert close.reestimated_cost_usd < plan.estimate.cost_usd


@settings(max_examples=60, deadline=None)
@given(planned=st.floats(1.0, 1e5), ratio=st.floats(0.05, 20.0), nodes=st.integers(1, 16),
       price=st.floats(0.01, 100.0), setup_h=st.floats(0.0, 2.0),
       margin=st.floats(0.0, 100.0))
def test_reestimate_matches_the_plan_at_planned_speed_and_falls_with_speed(
        tmp_path_factory: pytest.TempPathFactory, planned: float, ratio: float, nodes: int,
        price: float, setup_h: float, margin: float) -> None:
    samples = 1e6
    compute_h = samples / planned / 3600
    compute, setup = nodes * price * compute_h, nodes * price * setup_h
    plan = load_plan(write_plan(
        tmp_path_factory.mktemp("p"), throughput=planned, price_hr=price, margin=margin,
        est_hours=compute_h + setup_h, est_cost=compute + setup + 1.0, budget=1e9,
        timeout_h=8e4))
    plan = dataclasses.replace(
        plan, job=dataclasses.replace(plan.job, epochs=None, dataset_size=None, samples=samples),
        offer=dataclasses.replace(plan.offer, nodes=nodes),
        estimate=dataclasses.replace(plan.estimate, compute_usd=compute + setup, setup_usd=0.0,
                                     storage_usd=1.0))
    same = verify_throughput(plan, planned)
    assert same.within_margin and same.reestimated_cost_usd == pytest.approx(
        plan.estimate.cost_usd, rel=1e-9)
    other = verify_throughput(plan, planned * ratio)
    assert other.within_margin == (abs(ratio - 1) * 100 <= margin)
    faster = ratio > 1
    assert (other.reestimated_cost_usd < same.reestimated_cost_usd) == faster or ratio == 1
    # Only compute scales: the fixed 1 USD (storage) and the setup hours stay.
    assert other.reestimated_cost_usd >= 1.0 + setup - 1e-9
    assert other.reestimated_hours == pytest.approx(setup_h + compute_h / ratio)


@settings(max_examples=40, deadline=None)
@given(epochs=st.lists(st.integers(0, 10**6), min_size=1, max_size=12))
def test_local_store_resumes_from_the_highest_epoch_shipped(
        tmp_path_factory: pytest.TempPathFactory, epochs: list[int]) -> None:
    base = tmp_path_factory.mktemp("store")
    store = CheckpointStore("local:t", namespace="job", base_dir=base)
    src = base / "c.pt"
    for epoch in epochs:
        src.write_bytes(str(epoch).encode())
        store.ship(src, epoch)
    assert store.latest_epoch() == max(epochs)
    kept = sorted(p.name for p in (base / "t" / "job").iterdir())
    shipped = [n for n in kept if n.endswith(".pt")]
    assert len(shipped) <= 3 and not [n for n in kept if n.startswith(".")]
    assert kept == sorted(shipped + [n + ".json" for n in shipped])  # each with its manifest
    latest = store.fetch_latest(base)
    assert latest is not None and latest.read_bytes() == str(store.latest_epoch()).encode()


def test_report_is_a_no_op_outside_runs_and_on_other_ranks(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    import gpucost

    monkeypatch.delenv("GPUCOST_RUN_DIR", raising=False)
    gpucost.report(epoch=1, metrics={"loss": 1.0})
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setenv("GPUCOST_RUN_DIR", str(tmp_path))
    monkeypatch.setenv("RANK", "1")
    gpucost.report(epoch=1, metrics={"loss": 1.0})
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setenv("RANK", "0")
    gpucost.report(epoch=1, metrics={"loss": 0.5, "bad": float("nan")}, throughput=10.0)
    gpucost.report(epoch=2, metrics={"loss": 0.25}, throughput=12.0)
    rd = RunDir(tmp_path)
    assert [m["metrics"] for m in rd.metrics()] == [{"loss": 0.5}, {"loss": 0.25}]
    assert rd.read_progress() is not None and rd.read_progress()["epoch"] == 2  # type: ignore[index]


def test_report_ships_checkpoints_every_n_epochs(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import gpucost

    monkeypatch.setenv("GPUCOST_RUN_DIR", str(tmp_path / "run"))
    (tmp_path / "run").mkdir()
    monkeypatch.setenv("GPUCOST_CHECKPOINT_TARGET", f"local:{tmp_path / 'target'}")
    monkeypatch.setenv("GPUCOST_CHECKPOINT_NAMESPACE", "job")
    monkeypatch.setenv("GPUCOST_CHECKPOINT_EVERY", "2")
    for epoch in range(1, 6):
        ckpt = tmp_path / f"e{epoch}.pt"
        ckpt.write_bytes(bytes([epoch]) * 100)
        gpucost.report(epoch=epoch, checkpoint=ckpt)
    store = CheckpointStore(f"local:{tmp_path / 'target'}", namespace="job")
    assert store.latest_epoch() == 4
    assert sorted(p.name for p in (tmp_path / "target" / "job").glob("*.pt")) == [
        "epoch-000002.pt", "epoch-000004.pt"]
    latest = store.fetch_latest(tmp_path)
    assert latest is not None and latest.read_bytes() == bytes([4]) * 100


def test_local_checkpoint_store_keeps_the_newest_three(tmp_path: Path) -> None:
    store = CheckpointStore("local:ck", namespace="n", base_dir=tmp_path)
    src = tmp_path / "c.pt"
    for epoch in (1, 2, 3, 4, 10):
        src.write_bytes(str(epoch).encode())
        store.ship(src, epoch)
    assert store.latest_epoch() == 10
    assert sorted(p.name for p in (tmp_path / "ck" / "n").iterdir()) == [
        "epoch-000003.pt", "epoch-000003.pt.json", "epoch-000004.pt", "epoch-000004.pt.json",
        "epoch-000010.pt", "epoch-000010.pt.json"]


def test_ledger_records_intent_before_the_id_and_knows_dead_owners(tmp_path: Path) -> None:
    from gpucost.executor.base import Resource

    with Ledger(tmp_path / "l.sqlite") as ledger:
        run = ledger.create_run(run_id="r1", name="n", plan_path="p", provider="aws",
                                run_dir="d", price_hr=2.0, nodes=3, budget_cap_usd=5.0)
        assert run.owner_alive  # this test process
        row = ledger.intent(run_id="r1", provider="aws", token="t", kind="instance",
                            config={"region": "us-east-1"})
        (pending,) = ledger.resources(live_only=True)
        assert pending.state == "requested" and pending.resource_id is None
        ids = ledger.record(row, [Resource("aws", f"i-{n}", "t") for n in range(3)], "pending")
        assert [r.resource_id for r in ledger.resources("r1")] == ["i-0", "i-1", "i-2"]
        assert all(r.config == {"region": "us-east-1"} for r in ledger.resources())
        ledger.set_state(ids[1], "destroyed")
        assert len(ledger.resources(live_only=True)) == 2
        assert run.cost_usd(run.started_at + 1800) == 0.0  # nothing billed before a create
        ledger.open_segment("r1", price_hr=2.0, nodes=3)
        billed = ledger.run("r1")
        (segment,) = billed.segments
        assert billed.cost_usd(segment.started_at + 1800) == pytest.approx(3.0)  # 3 x 2 $/h x 0.5 h
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    assert process_start(int(dead.stdout)) is None


def test_spend_is_the_sum_of_billed_segments_without_capacity_waits(tmp_path: Path) -> None:
    with Ledger(tmp_path / "l.sqlite") as ledger:
        ledger.create_run(run_id="r1", name="n", plan_path="p", provider="aws", run_dir="d",
                          price_hr=3600.0, nodes=2, budget_cap_usd=100.0)
        time.sleep(0.3)  # waiting for spot capacity: nothing is billed
        ledger.open_segment("r1", price_hr=3600.0, nodes=2)  # spot: 2 x 1 USD/s
        time.sleep(0.3)
        ledger.open_segment("r1", price_hr=7200.0, nodes=2)  # on-demand fallback: 2 x 2 USD/s
        time.sleep(0.3)
        ledger.set_run_state("r1", "succeeded", ended=True)
        run = ledger.run("r1")
        spot, fallback = run.segments
        assert spot.ended_at == fallback.started_at and fallback.ended_at == run.ended_at
        expected = (2 * (spot.ended_at - spot.started_at)
                    + 4 * (run.ended_at - fallback.started_at))
        assert run.cost_usd() == pytest.approx(expected)
        # at least 0.6 + 1.2 (the sleeps can only overrun): the wait before the first segment
        # is not billed, which the formula above checks exactly
        assert 1.8 <= run.cost_usd() < 10.0
        assert run.cost_usd(run.ended_at + 3600) == run.cost_usd()  # an ended run costs no more


# -- CLI front door -------------------------------------------------------------------------------
def test_dry_run_of_the_example_plan_describes_limits_and_creates_nothing(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["launch", str(EXAMPLES / "plan.toml"), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "timeout 0.25 h, budget cap 0.05 USD" in out
    assert "local does not support spot" in out
    assert "after the job: destroy (local cannot stop" in out
    assert not (Path(os.environ["GPUCOST_HOME"]) / "ledger.sqlite").exists()
    assert main(["ps"]) == 0
    assert capsys.readouterr().out.strip() == "no live resources"


def test_launch_refuses_a_plan_without_a_budget_cap(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    path = write_plan(tmp_path)
    text = "\n".join(line for line in path.read_text().splitlines()
                     if not line.startswith("budget_cap_usd"))
    path.write_text(text)
    assert main(["launch", str(path)]) == 2
    err = capsys.readouterr().err
    assert "budget_cap_usd is missing" in err and "Traceback" not in err
    with Ledger() as ledger:
        assert ledger.runs() == []


def test_unknown_run_is_an_input_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "nope"]) == 2
    assert "no run 'nope'" in capsys.readouterr().err


# -- real runs ------------------------------------------------------------------------------------
@pytest.mark.slow
def test_launch_runs_the_example_to_completion_and_leaves_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = write_plan(tmp_path, epochs=2, policy="stop")
    assert main(["launch", str(plan)]) == 0
    run_id, state = capsys.readouterr().out.split()
    assert state == "succeeded"
    rd = RunDir.for_run(run_id)
    status = rd.read_status()
    assert status is not None and status.state == "succeeded" and status.final
    assert status.epoch == 2 and status.metrics["loss"] > 0
    assert epochs_in(rd.path) == [1, 2]
    assert "epoch 2/2" in rd.log_path.read_text()
    notes = rd.launcher_log_path.read_text()
    assert "CPU matmul ok" in notes and "CUDA was not checked" in notes
    assert "verify: measured" in notes
    store = CheckpointStore(f"local:{tmp_path / 'ckpt'}", namespace="tiny")
    assert store.latest_epoch() == 2
    with Ledger() as ledger:
        assert ledger.resources(live_only=True) == []  # local cannot stop: idle policy destroys
    assert main(["ps"]) == 0
    assert capsys.readouterr().out.strip() == "no live resources"
    assert main(["status", run_id]) == 0
    out = capsys.readouterr().out
    assert "succeeded" in out and "epoch     2 / 2" in out


@pytest.mark.slow
@pytest.mark.parametrize(("provider", "nproc"), [("local", 1), ("torchrun", 2)])
def test_training_killed_mid_run_resumes_losing_at_most_one_epoch(
        tmp_path: Path, provider: str, nproc: int, capsys: pytest.CaptureFixture[str]) -> None:
    epochs = 6
    plan = write_plan(tmp_path, provider=provider, gpu_count=nproc, epochs=epochs, samples=4096)
    launcher = spawn_launcher(plan, "killed")
    rd = RunDir.for_run("killed")
    wait_for(lambda: len(epochs_in(rd.path)) >= 2, what="two reported epochs")
    # SIGKILL the training process (rank 0 under torchrun), as a spot reclaim or OOM would.
    victim = pids_with_token("gpucost-killed", rank0_worker=provider == "torchrun")
    assert victim, "no training process found"
    os.kill(victim[-1], signal.SIGKILL)
    reported_before_kill = max(epochs_in(rd.path))
    assert launcher.wait(timeout=120) == 3  # the job failed; the launcher tore down and exited
    assert (rd.read_status() or RunStatusFile()).state == "failed"
    reported = max(epochs_in(rd.path))
    assert reported < epochs, "the job finished before it was killed; make epochs longer"
    wait_for(lambda: not pids_with_token("gpucost-killed"), 30, "workers to exit")

    assert main(["launch", str(plan), "--run-id", "resumed"]) == 0
    capsys.readouterr()
    resumed = RunDir.for_run("resumed")
    log = resumed.log_path.read_text()
    assert f"resumed from {tmp_path / 'ckpt' / 'tiny'}" in log
    first = epochs_in(resumed.path)[0]
    # Checkpoints ship with every report, so at most the epoch in progress is lost.
    assert first - 1 >= reported >= reported_before_kill
    assert epochs_in(resumed.path) == list(range(first, epochs + 1))
    with Ledger() as ledger:
        assert ledger.resources(live_only=True) == []
        assert {r.run_id: r.state for r in ledger.runs()} == {"killed": "failed",
                                                              "resumed": "succeeded"}


@pytest.mark.slow
def test_launcher_sigkilled_leaves_a_job_that_cleanup_finds_and_kills(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = write_plan(tmp_path, epochs=50)
    launcher = spawn_launcher(plan, "orphan")
    rd = RunDir.for_run("orphan")
    wait_for(lambda: epochs_in(rd.path), what="a reported epoch")
    launcher.kill()
    launcher.wait()
    assert pids_with_token("gpucost-orphan"), "the job should outlive its launcher"
    assert main(["ps"]) == 0
    assert "gone: `gpucost cleanup`" in capsys.readouterr().out
    assert main(["status", "orphan"]) == 0
    assert "orphaned" in capsys.readouterr().out
    assert main(["cleanup"]) == 0
    assert "orphan: destroy local process" in capsys.readouterr().out
    assert not pids_with_token("gpucost-orphan")
    assert LocalProvider().find("gpucost-orphan") == []
    assert main(["ps"]) == 0
    assert capsys.readouterr().out.strip() == "no live resources"


@pytest.mark.slow
def test_sigterm_to_the_launcher_tears_the_job_down(tmp_path: Path) -> None:
    plan = write_plan(tmp_path, epochs=50)
    launcher = spawn_launcher(plan, "termed")
    rd = RunDir.for_run("termed")
    wait_for(lambda: epochs_in(rd.path), what="a reported epoch")
    launcher.send_signal(signal.SIGTERM)
    assert launcher.wait(timeout=60) == 130
    assert (rd.read_status() or RunStatusFile()).state == "interrupted"
    assert not pids_with_token("gpucost-termed")
    with Ledger() as ledger:
        assert ledger.resources(live_only=True) == []


@pytest.mark.slow
@pytest.mark.parametrize(("limits", "state", "note"), [
    # 3600 USD/h is 1 USD/s: the 2 USD cap is reached within seconds.
    ({"price_hr": 3600.0, "budget": 2.0, "est_cost": 1.0}, "budget-exceeded", "budget cap"),
    ({"timeout_h": 2.0 / 3600, "est_hours": 1.0 / 3600}, "timed-out", "timeout"),
    ({"throughput": 1e9, "margin": 25.0, "action": "stop"}, "verify-failed", "verify_action"),
], ids=["budget", "timeout", "verify"])
def test_hard_limits_stop_the_run_and_tear_down(tmp_path: Path, limits: dict[str, Any],
                                                state: str, note: str) -> None:
    plan_path = write_plan(tmp_path, epochs=50, **limits)
    runner = Runner(load_plan(plan_path), plan_path, poll_s=0.1)
    result = runner.launch()
    assert result.state == state and result.exit_code == 1
    assert any(note in m for m in result.messages)
    assert not pids_with_token(runner.token)
    status = json.loads(RunDir.for_run(result.run_id).status_path.read_text())
    assert status["state"] == state and status["final"]
    if state == "budget-exceeded":
        assert status["cost_usd"] >= 2.0
    with Ledger() as ledger:
        assert ledger.resources(live_only=True) == []


@pytest.mark.slow
def test_detach_status_logs_stop_resume_and_down_as_a_user_would(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = write_plan(tmp_path, epochs=40)
    assert main(["launch", str(plan), "--detach"]) == 0
    first = capsys.readouterr().out.strip()
    rd = RunDir.for_run(first)
    wait_for(lambda: epochs_in(rd.path), what="a reported epoch")
    assert main(["status", first]) == 0
    assert "state     running" in capsys.readouterr().out
    assert main(["logs", first]) == 0
    assert "epoch 1/40" in capsys.readouterr().out
    assert main(["stop", first]) == 0
    assert f"{first}: stopped by its launcher" in capsys.readouterr().out
    assert (rd.read_status() or RunStatusFile()).state == "stopped"
    assert not pids_with_token(f"gpucost-{first}")

    assert main(["launch", str(plan), "--detach"]) == 0
    second = capsys.readouterr().out.strip()
    rd2 = RunDir.for_run(second)
    wait_for(lambda: epochs_in(rd2.path), what="an epoch of the resumed run")
    assert "resumed from" in rd2.log_path.read_text()
    assert epochs_in(rd2.path)[0] > max(epochs_in(rd.path)) - 1
    assert main(["down", "--all"]) == 0
    assert f"{second}: interrupted; its launcher tore it down" in capsys.readouterr().out
    assert (rd2.read_status() or RunStatusFile()).state == "interrupted"
    assert not pids_with_token(f"gpucost-{second}")
    assert main(["ps"]) == 0
    assert capsys.readouterr().out.strip() == "no live resources"


def test_unknown_provider_is_refused_before_anything_is_created(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_plan(tmp_path)
    path.write_text(path.read_text().replace('provider = "local"', 'provider = "nimbus"'))
    assert main(["launch", str(path)]) == 2
    err = capsys.readouterr().err
    assert "unknown provider or source 'nimbus'" in err and "local, torchrun" in err
    with Ledger() as ledger:
        assert ledger.runs() == []


def test_a_missing_workdir_is_an_input_error(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    path = write_plan(tmp_path)
    path.write_text(path.read_text().replace(f'workdir = "{tmp_path}"',
                                             f'workdir = "{tmp_path / "missing"}"'))
    assert main(["launch", str(path)]) == 2
    err = capsys.readouterr().err
    assert "workdir" in err and "does not exist" in err and "Traceback" not in err
    with Ledger() as ledger:
        assert ledger.runs() == []


def test_a_command_that_cannot_start_fails_cleanly(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = write_plan(tmp_path, command=["no-such-tool", "--epochs", "1"])
    assert main(["launch", str(path)]) == 3
    captured = capsys.readouterr()
    assert captured.out.split()[1] == "failed"
    assert "cannot start 'no-such-tool'" in captured.err and "Traceback" not in captured.err
    with Ledger() as ledger:
        assert ledger.resources(live_only=True) == []
