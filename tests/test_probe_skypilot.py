"""`gpucost probe` on the SkyPilot engine, and a slow SkyPilot run stopped under its plan's
verify_action (#23's done-when), against the recording SDK stand-ins of test_skypilot_engine
(run in the gpucost[skypilot] environment: .ci/run builds one; the main environment skips this
module). The stand-in's jobs print the GPUCOST-METRIC lines gpucost.report() prints under
SkyPilot, at a throughput set per instance type, and run until cancelled."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.skypilot

if importlib.util.find_spec("sky") is None:
    pytest.skip("SkyPilot is not installed (gpucost[skypilot])", allow_module_level=True)

from run_helpers import job_lock_free  # noqa: E402
from test_skypilot_engine import (  # noqa: E402 (after the skip; seeds SkyPilot's catalogs)
    FAKE_SKY,
    PLANS,
    FakeCloud,
    no_network,  # noqa: F401 (autouse: only loopback)
    planned,
)

from gpucost.cli import main  # noqa: E402
from gpucost.executor.ledger import Ledger  # noqa: E402
from gpucost.executor.markers import format_marker  # noqa: E402
from gpucost.executor.rundir import RunDir  # noqa: E402
from gpucost.executor.runner import Runner  # noqa: E402
from gpucost.executor.skypilot import FIRST_CHECK_AFTER, SkyPilotProvider  # noqa: E402
from gpucost.executor.verify import verify_throughput  # noqa: E402
from gpucost.measurements import read_all  # noqa: E402
from gpucost.planfile import Plan, load_plan  # noqa: E402


class MarkerCloud(FakeCloud):
    """The recording stand-in, whose jobs report ``rates[instance type]`` samples/s in
    :data:`FIRST_CHECK_AFTER` marker lines and run until cancelled."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, rates: dict[str, float]) -> None:
        super().__init__(monkeypatch)
        self.rates = rates
        self.instance: dict[str, str] = {}

    def _launch(self, task: Any, cluster_name: str, **_: Any) -> str:
        request = super()._launch(task, cluster_name)
        self.jobs[(cluster_name, 1)] = ["RUNNING"]
        (res,) = list(task.resources)
        self.instance[cluster_name] = res.instance_type
        return request

    def _tail_logs(self, cluster_name: str, job_id: int, follow: bool,
                   output_stream: Any = None, **_: Any) -> int:
        rate = self.rates[self.instance[cluster_name]]
        for epoch in range(1, FIRST_CHECK_AFTER + 1):
            report = {"time": time.time(), "epoch": float(epoch), "metrics": {"loss": 1.0},
                      "throughput": rate, "checkpoint": None}
            output_stream.write(f"(head, rank=0, pid=9) {format_marker(report)}\n")
        return 0


def three_plans(tmp_path: Path) -> list[tuple[Plan, Path]]:
    return [planned(tmp_path / name, *PLANS[key])
            for name, key in (("a", "aws on-demand"), ("b", "lambda"), ("c", "runpod"))]


def mkdirs(tmp_path: Path) -> None:
    for name in "abc":
        (tmp_path / name).mkdir()


def test_three_skypilot_candidates_are_probed_measured_and_re_ranked(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    mkdirs(tmp_path)
    plans = three_plans(tmp_path)
    factors = (0.5, 1.2, 1.0)  # the cheapest predicted runs at half its prediction
    rates = {p.offer.instance_type: p.workload.throughput * f
             for (p, _), f in zip(plans, factors, strict=True)}
    cloud = MarkerCloud(monkeypatch, rates)
    capsys.readouterr()
    code = main(["probe", *[a for _, path in plans for a in ("--plan", str(path))],
                 "--probe-budget-usd", "200", "--minutes", "5", "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0, doc
    outcomes = doc["outcomes"]
    assert [o["state"] for o in outcomes] == ["probed"] * 3
    # one short cluster each, launched under the probe's name and downed after
    clusters = [args["cluster_name"] for name, args in cloud.calls if name == "launch"]
    assert clusters == [f"gpucost-{o['run_id']}" for o in outcomes]
    assert sorted(args["cluster_name"] for name, args in cloud.calls if name == "down") \
        == sorted(clusters)
    assert cloud.clusters == {}
    kept = {m.id: m for m in read_all()}
    assert len(kept) == 3 and {m.source for m in kept.values()} == {"probe"}
    by_path = {str(path): plan for plan, path in plans}
    costs = {}
    for o, probe in zip(outcomes, doc["probes"], strict=True):
        plan = by_path[probe["source"]]
        m = kept[o["measurement_id"]]
        assert (m.gpu, m.throughput) == (plan.offer.gpu, rates[plan.offer.instance_type])
        costs[o["candidate"]] = verify_throughput(plan, m.throughput).reestimated_cost_usd
    assert [r["candidate"] for r in doc["ranked"]] == sorted(costs, key=costs.__getitem__)
    with Ledger() as ledger:
        assert ledger.resources(live_only=True) == []
        assert {ledger.run(o["run_id"]).state for o in outcomes} == {"probed"}
        assert sum(ledger.run(o["run_id"]).cost_usd() for o in outcomes) \
            == pytest.approx(doc["spent_usd"])
    assert job_lock_free("resnet50-v100-amp-probe")


def test_a_half_speed_skypilot_run_is_stopped_and_the_next_predict_uses_its_measurement(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A whole run (runner, watchdog, stand-in cloud) under verify_action = "stop" whose job
    reports half the predicted throughput: warned about at the first check (the third report),
    stopped, the cluster downed, the measurement kept, and `gpucost predict` starts from it."""
    # a short job: one H100 is the cheapest (a prediction starts from one-GPU measurements)
    plan, path = planned(tmp_path, *PLANS["lambda"], "--samples", "100000")
    assert plan.offer.gpu_count == 1 and plan.offer.nodes == 1
    path.write_text(path.read_text().replace('verify_action = "stop-over-budget"',
                                             'verify_action = "stop"'))
    plan = load_plan(path)
    assert plan.safety.verify_action == "stop"
    half = plan.workload.throughput / 2
    cloud = MarkerCloud(monkeypatch, {plan.offer.instance_type: half})
    runner = Runner(plan, path, provider=SkyPilotProvider("lambda"), poll_s=0.01,
                    run_id="slow-1")
    result = runner.launch()
    assert result.state == "verify-failed" and result.exit_code == 1
    assert [n for n in cloud.names() if n in ("cancel", "down")] == ["cancel", "down"]
    assert cloud.clusters == {}
    run_dir = RunDir(result.run_dir)
    assert len(run_dir.metrics()) == FIRST_CHECK_AFTER  # stopped at the first check
    status = run_dir.read_status()
    assert status is not None and status.state == "verify-failed"
    assert "(-50%), outside the prediction's band" in (status.throughput_warning or "")
    assert any("verify_action = stop: stopping the run" in m for m in result.messages)
    (kept,) = read_all()
    assert (kept.gpu, kept.throughput, kept.source) == (plan.offer.gpu, half, "on-arrival")
    capsys.readouterr()
    assert main(["predict", "-p", "resnet50-v100-amp", "--gpu", plan.offer.gpu,
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["throughput"] == pytest.approx(half)
    assert doc["measurements"]["method"] == "measured on the target"


def test_a_skypilot_probe_whose_launcher_is_sigkilled_is_cleaned_up(tmp_path: Path) -> None:
    """The shared-file stand-in (a launcher and its watchdog in other processes): the probe's
    launcher is SIGKILLed while its job runs; the cluster stays up under the watchdog until
    `gpucost cleanup` downs it, and then no cluster, process or lock is left."""
    mkdirs(tmp_path)
    plans = three_plans(tmp_path)
    cloud = tmp_path / "cloud.json"
    env = {**os.environ, "FAKE_SKY_STATE": str(cloud),
           "PYTHONPATH": os.pathsep.join([str(FAKE_SKY), os.environ.get("PYTHONPATH", "")])}

    def state() -> dict[str, Any]:
        return json.loads(cloud.read_text()) if cloud.exists() else {}

    def wait_for(what: str, done: Callable[[], bool], limit_s: float) -> None:
        deadline = time.monotonic() + limit_s
        while not done():
            assert time.monotonic() < deadline, f"no {what} after {limit_s:g} s"
            time.sleep(0.2)

    # the stand-in's job prints no report: the probe would run its 30 minutes
    launcher = subprocess.Popen(
        [sys.executable, "-m", "gpucost", "probe", "--minutes", "30", "--probe-budget-usd",
         "200", *[a for _, path in plans for a in ("--plan", str(path))]],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with Ledger() as ledger:
            wait_for("running probe job", lambda: any(
                r.kind == "job" and r.state == "running"
                for r in ledger.resources(live_only=True)), 120)
            (run,) = ledger.runs()
        assert run.run_id.startswith("probe-1-resnet50-v100-amp-")
        launcher.send_signal(signal.SIGKILL)
        launcher.wait()
        assert state()["clusters"] == {f"gpucost-{run.run_id}": "UP"}
        assert not job_lock_free("resnet50-v100-amp-probe")  # the watchdog holds it
        cleanup = subprocess.run([sys.executable, "-m", "gpucost", "cleanup"], env=env,
                                 capture_output=True, text=True, timeout=120)
        assert cleanup.returncode == 0, cleanup.stderr
        assert state()["clusters"] == {}
        with Ledger() as ledger:
            assert ledger.resources(live_only=True) == []
            assert [r.run_id for r in ledger.runs()] == [run.run_id]  # no later probe began
            assert ledger.run(run.run_id).ended_at is not None
        wait_for("lock released by the watchdog",
                 lambda: job_lock_free("resnet50-v100-amp-probe"), 30)
    finally:
        launcher.kill()
