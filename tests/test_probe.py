"""`gpucost probe` (#23 item 2) on this machine's engines, with real processes: three local and
three torchrun candidates (examples/train_tiny.py, torchrun with gloo on CPU) are probed,
measured, recorded and re-ranked, and nothing is left behind (no process, no live ledger row, no
lock), a SIGKILLed probe launcher included. The SkyPilot engine's probes are in
test_probe_skypilot.py (the gpucost[skypilot] environment)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from run_helpers import (
    TRAIN,
    cmdline_has,
    job_lock_free,
    kill_quietly,
    pids_with_token,
    wait_for,
)

from gpucost.cli import main
from gpucost.executor.ledger import Ledger
from gpucost.executor.verify import verify_throughput
from gpucost.measurements import read_all
from gpucost.planfile import load_plan


def candidate_plan(folder: Path, *, provider: str = "local", price_hr: float, gpu_count: int = 1,
                   command: list[str] | None = None, name: str = "tiny") -> Path:
    """A plan for the tiny example whose workload names a profile, precision and batch (so a
    probe's measurement is kept), 50 epochs: a probe ends it at its third report."""
    folder.mkdir(parents=True, exist_ok=True)
    hours = 50 * 2048 / 2000.0 / 3600  # no setup on this machine
    plan: dict[str, Any] = {
        "schema": "gpucost-plan", "schema_version": 1,
        "job": {"name": name,
                "command": command or ["python", str(TRAIN), "--epochs", "50",
                                       "--samples-per-epoch", "2048", "--width", "64"],
                "workdir": str(folder), "epochs": 50.0, "dataset_size": 2048.0},
        "offer": {"provider": provider, "instance_type": "local-cpu", "gpu": "CPU",
                  "gpu_count": gpu_count, "price_hr": price_hr, "region": "local"},
        "workload": {"throughput": 2000.0, "profile": "tiny-mlp", "precision": "fp32",
                     "batch_size": 64},
        "safety": {"timeout_hours": 1.0, "budget_cap_usd": max(1.0, price_hr)},
        "checkpoint": {"enabled": True, "target": f"local:{folder / 'ckpt'}", "resume": True},
        "estimate": {"hours": hours, "cost_usd": hours * price_hr,
                     "compute_usd": hours * price_hr},
    }
    path = folder / "plan.toml"
    path.write_text(tomli_w.dumps(plan))
    return path


def plan_args(plans: list[Path]) -> list[str]:
    return [arg for p in plans for arg in ("--plan", str(p))]


def assert_nothing_left(run_ids: list[str]) -> None:
    with Ledger() as ledger:
        assert ledger.resources(live_only=True) == []
        for run_id in run_ids:
            assert ledger.run(run_id).ended_at is not None
    for run_id in run_ids:
        assert pids_with_token(f"gpucost-{run_id}") == []
    assert job_lock_free("tiny-probe")


def probe_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    code = main(["probe", *args, "--format", "json"])
    out = capsys.readouterr().out
    return code, json.loads(out) if out else {}


# -- what a probe would do -----------------------------------------------------------------------

def test_dry_run_lists_the_overlapping_candidates_and_their_cost_and_runs_nothing(
        capsys: pytest.CaptureFixture[str]) -> None:
    from gpucost.planning.advice import advise
    from gpucost.planning.request import build_request

    code, doc = probe_json(capsys, "--epochs", "10", "--dry-run", "--top", "3")
    assert code == 0 and doc["schema"] == "gpucost-probe" and doc["dry_run"] is True
    probes = doc["probes"]
    # the plan `gpucost plan --epochs 10` would pick comes first; the others overlap its band
    advice = advise(build_request(None, epochs=10, market="on-demand"))
    assert advice.cheapest is not None
    first = advice.cheapest.row
    assert probes[0]["label"] == first.label()
    assert 2 <= len(probes) <= 3
    for p in probes[1:]:
        assert p["cost_low_usd"] <= first.cost_high_usd
    assert len({p["label"].split(", ")[1] for p in probes}) == len(probes)  # one per GPU config
    for p in probes:  # at most: setup + 5 min at the plan's price
        assert p["refused"] is None
        assert p["probe_hours"] == pytest.approx(p["setup_hours"] + 5 / 60)
    assert doc["expected_cost_usd"] == pytest.approx(sum(p["probe_cost_usd"] for p in probes))
    home = Path(os.environ["GPUCOST_HOME"])
    assert not (home / "runs").exists() and not (home / "probes").exists()


def test_a_probe_over_the_probe_budget_is_refused(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    cheap = candidate_plan(tmp_path / "a", price_hr=1.0)
    dear = candidate_plan(tmp_path / "b", price_hr=600.0)  # 5 min: 50 USD
    code, doc = probe_json(capsys, "--plan", str(cheap), "--plan", str(dear), "--dry-run",
                           "--probe-budget-usd", "10")
    assert code == 0
    refused = [p["refused"] for p in doc["probes"]]
    assert refused[0] is None
    assert refused[1] is not None and "over the probe budget 10 USD" in refused[1]
    assert doc["probes"][1]["probe_cost_usd"] == pytest.approx(600 * 5 / 60)
    code = main(["probe", "--plan", str(dear), "--probe-budget-usd", "10"])
    assert code == 1  # nothing may run
    assert "no probe fits the probe budget of 10 USD" in capsys.readouterr().err
    assert not (Path(os.environ["GPUCOST_HOME"]) / "runs").exists()


def test_plans_of_different_jobs_are_refused(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    a = candidate_plan(tmp_path / "a", price_hr=1.0)
    b = candidate_plan(tmp_path / "b", price_hr=1.0, name="other")
    assert main(["probe", "--plan", str(a), "--plan", str(b), "--dry-run"]) == 2
    assert "the plans name different jobs: other, tiny" in capsys.readouterr().err


# -- probes that run -----------------------------------------------------------------------------

def check_three_probes(doc: dict[str, Any], plans: list[Path], devices: list[int]) -> None:
    """Three probes ran to their third report; three measurements are kept; the candidates are
    re-ranked by the $/job their measured throughput projects; nothing is left."""
    outcomes = doc["outcomes"]
    assert [o["state"] for o in outcomes] == ["probed"] * 3, outcomes
    assert all(o["run_id"].startswith(f"probe-{k}-tiny-") for k, o in enumerate(outcomes, 1))
    kept = read_all()
    assert len(kept) == 3 and {m.source for m in kept} == {"probe"}
    assert sorted(m.device_count for m in kept) == sorted(devices)
    by_id = {m.id: m for m in kept}
    costs = {}
    for o in outcomes:
        assert len(o["reports"]) == 3
        m = by_id[o["measurement_id"]]
        assert m.throughput == pytest.approx(sorted(o["reports"])[1])  # their median
        candidate = load_plan(plans[o["candidate"] - 1])  # the plans sorted cheapest first
        costs[o["candidate"]] = verify_throughput(candidate, m.throughput).reestimated_cost_usd
        assert o["measured_cost_usd"] == pytest.approx(costs[o["candidate"]])
    ranked = doc["ranked"]
    assert [r["candidate"] for r in ranked] == sorted(costs, key=costs.__getitem__)
    assert all(r["measured"] for r in ranked)
    assert doc["settled_usd"] == pytest.approx(ranked[1]["cost_usd"] - ranked[0]["cost_usd"])
    with Ledger() as ledger:
        spent = sum(ledger.run(o["run_id"]).cost_usd() for o in outcomes)
        assert {ledger.run(o["run_id"]).name for o in outcomes} == {"tiny-probe"}
    assert doc["spent_usd"] == pytest.approx(spent) and spent > 0
    assert_nothing_left([o["run_id"] for o in outcomes])


@pytest.mark.slow
def test_three_local_candidates_are_probed_measured_and_re_ranked(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plans = [candidate_plan(tmp_path / name, price_hr=price)
             for name, price in (("a", 0.01), ("b", 0.02), ("c", 0.04))]
    code, doc = probe_json(capsys, *plan_args(plans),
                           "--minutes", "2")
    assert code == 0, doc
    check_three_probes(doc, plans, [1, 1, 1])
    # the real job's lock and checkpoints were never touched
    assert job_lock_free("tiny") and not (tmp_path / "a" / "ckpt").exists()


@pytest.mark.slow
def test_three_torchrun_candidates_are_probed_with_gloo_and_re_ranked(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plans = [candidate_plan(tmp_path / name, provider="torchrun", price_hr=price,
                            gpu_count=procs)
             for name, price, procs in (("a", 0.01, 1), ("b", 0.02, 2), ("c", 0.03, 2))]
    code, doc = probe_json(capsys, *plan_args(plans),
                           "--minutes", "3")
    assert code == 0, doc
    check_three_probes(doc, plans, [1, 2, 2])


@pytest.mark.slow
def test_a_job_that_never_reports_is_ended_at_the_probes_minutes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    silent = tmp_path / "silent.py"
    silent.write_text("import time\nwhile True:\n    time.sleep(1)\n")
    plan = candidate_plan(tmp_path / "a", price_hr=0.0, command=["python", str(silent)])
    code, doc = probe_json(capsys, "--plan", str(plan), "--minutes", "0.1")
    assert code == 0
    (outcome,) = doc["outcomes"]
    assert outcome["state"] == "probed" and outcome["throughput"] is None
    assert "made no throughput report" in outcome["note"]
    assert read_all() == () and doc["ranked"][0]["measured"] is False
    assert_nothing_left([outcome["run_id"]])


@pytest.mark.slow
def test_a_probe_whose_launcher_is_sigkilled_leaves_nothing_after_cleanup(
        tmp_path: Path) -> None:
    silent = tmp_path / "silent.py"  # never reports: the probe runs until its (long) minutes
    silent.write_text("import time\nwhile True:\n    time.sleep(1)\n")
    plans = [candidate_plan(tmp_path / name, price_hr=price, command=["python", str(silent)])
             for name, price in (("a", 0.01), ("b", 0.02), ("c", 0.04))]
    launcher = subprocess.Popen([sys.executable, "-m", "gpucost", "probe", "--minutes", "30",
                                 *plan_args(plans)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    job_pids: list[int] = []
    try:
        def running_job() -> str | None:
            if launcher.poll() is not None:
                raise AssertionError(launcher.stderr.read().decode() if launcher.stderr else "")
            with Ledger() as ledger:
                return next((r.run_id for r in ledger.resources(live_only=True)
                             if r.kind == "process" and r.state == "running"), None)

        run_id = wait_for(running_job, 120, "a running probe")
        job_pids = wait_for(lambda: [p for p in pids_with_token(f"gpucost-{run_id}")
                                     if cmdline_has(p, "silent.py")], 60, "the job's process")
        launcher.send_signal(signal.SIGKILL)  # nothing of gpucost's runs its teardown
        launcher.wait()
        assert pids_with_token(f"gpucost-{run_id}")  # the job runs on under its guard
        assert not job_lock_free("tiny-probe")
        assert main(["cleanup"]) == 0
        assert_nothing_left([run_id])
        with Ledger() as ledger:
            assert [r.run_id for r in ledger.runs()] == [run_id]  # no later probe began
            assert ledger.run(run_id).state == "orphaned"
    finally:
        launcher.kill()
        kill_quietly(job_pids)
