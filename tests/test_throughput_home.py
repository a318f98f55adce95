"""A SkyPilot run's throughput comes home in its log: the marker lines gpucost.report() prints
under GPUCOST_REPORT_TO_LOG, and the launcher's side that turns them into the run folder's
metrics.jsonl / progress.json, a measurement and the band check. No SkyPilot needed: the log
stream is driven through SkyPilotProvider's own follower with a fake tail."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from gpucost import reporting
from gpucost.executor.markers import MAX_MARKER_BYTES, PREFIX, format_marker, parse_marker
from gpucost.executor.rundir import RunDir
from gpucost.executor.runfiles import read_status
from gpucost.executor.skypilot import FIRST_CHECK_AFTER, RECHECK_S, SkyPilotProvider
from gpucost.executor.skypilot_task import task_config
from gpucost.executor.verify import (
    arrival_stop,
    band_limits,
    plan_band,
    verify_throughput,
)
from gpucost.measurements import read_all, store_path
from gpucost.planfile import Plan, load_plan

T0 = 1_767_225_600.0  # 2026-01-01
REPORT = {"time": T0, "epoch": 2.0, "metrics": {"loss": 0.41}, "throughput": 1840.5,
          "checkpoint": None}


def test_a_marker_round_trips_even_behind_skypilots_line_prefix() -> None:
    line = format_marker(REPORT)
    assert line.startswith(PREFIX) and "\n" not in line
    assert parse_marker(line) == REPORT
    assert parse_marker(f"(head, rank=0, pid=4242) {line}  ") == REPORT


def test_a_report_too_big_for_a_marker_loses_its_metrics_not_its_throughput() -> None:
    big = {**REPORT, "metrics": {f"m{i}": float(i) for i in range(60)},
           "checkpoint": "s3://" + "x" * 5000}
    line = format_marker(big)
    assert len(line.encode()) <= MAX_MARKER_BYTES
    parsed = parse_marker(line)
    assert parsed == {**REPORT, "metrics": {}, "checkpoint": None}


@pytest.mark.parametrize("line", [
    "epoch 3 loss 0.41",
    PREFIX,
    PREFIX + "{",  # cut short
    PREFIX + "[1, 2]",
    PREFIX + '{"epoch": 1}',  # no time
    PREFIX + '{"time": NaN, "throughput": 5}',
    PREFIX + '{"time": 1767225600, "throughput": Infinity}',
    PREFIX + '{"time": 1767225600, "throughput": 1e999}',
    PREFIX + '{"time": 1767225600, "throughput": 1e300}',  # absurd
    PREFIX + '{"time": 1767225600, "throughput": -5}',
    PREFIX + '{"time": 1767225600, "throughput": "5"}',
    PREFIX + '{"time": 1767225600, "throughput": true}',
    PREFIX + '{"time": 1767225600, "epoch": 1e12}',
    PREFIX + '{"time": 12, "throughput": 5}',  # 1970
    PREFIX + '{"time": 1767225600, "metrics": {"loss": "low"}}',
    PREFIX + '{"time": ' + "9" * 5000 + "}",  # past Python's int-digit limit
    PREFIX + '{"time": 1767225600} trailing',
    PREFIX + '{"time": 1767225600, "metrics": {"m": ' + "1" * MAX_MARKER_BYTES + "}}",
    PREFIX + "[" * 10_000 + "]" * 10_000,
    PREFIX + '{"time": 1767225600, "throughput": 5, "x": ' + "[" * 200 + "]" * 200 + "}",
])
def test_hostile_lines_are_not_reports(line: str) -> None:
    assert parse_marker(line) is None


def test_report_prints_a_marker_under_skypilot_and_only_there(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("GPUCOST_RUN_DIR", str(tmp_path))
    reporting.report(epoch=1, throughput=100.0, metrics={"loss": 1.5})
    assert PREFIX not in capsys.readouterr().out  # a local run: the run folder is enough
    monkeypatch.setenv("GPUCOST_REPORT_TO_LOG", "1")
    reporting.report(epoch=2, throughput=120.0, metrics={"loss": 1.2})
    (line,) = capsys.readouterr().out.splitlines()
    assert parse_marker(line) == RunDir(tmp_path).metrics()[-1]


def test_the_skypilot_task_asks_for_markers(tmp_path: Path) -> None:
    plan = load_plan(_plan_file(tmp_path))
    assert task_config(plan, run_id="r")["envs"]["GPUCOST_REPORT_TO_LOG"] == "1"


def _plan_file(tmp_path: Path, *, verify_action: str | None = "warn", gpu_count: int = 1,
               profile: str = "resnet50", precision: str = "bf16", nodes: int = 1) -> Path:
    (tmp_path / "code").mkdir(exist_ok=True)
    plan: dict[str, Any] = {
        "schema": "gpucost-plan", "schema_version": 1,
        "job": {"name": "ft", "command": ["python", "train.py"], "workdir": "code",
                "samples": 1e7},
        "offer": {"provider": "aws", "region": "us-east-1", "instance_type": "p4de.24xlarge",
                  "gpu": "A100 SXM4 80GB", "gpu_count": gpu_count, "nodes": nodes,
                  "market": "on-demand",
                  "price_hr": 40.0, "price_source": "skypilot-aws"},
        "workload": {"throughput": 1000.0, "profile": profile, "profile_gpu": "H100 SXM5 80GB",
                     "precision": precision, "batch_size": 64},
        "safety": {"timeout_hours": 5.0, "budget_cap_usd": 400.0},
        "estimate": {"hours": 3.0, "cost_usd": 120.0, "compute_usd": 120.0},
    }
    if verify_action is not None:  # None: the plan file leaves it out (the default)
        plan["safety"]["verify_action"] = verify_action
    path = tmp_path / "plan.toml"
    path.write_text(tomli_w.dumps(plan))
    return path


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _provider(tmp_path: Path, plan: Plan, clock: _Clock) -> tuple[SkyPilotProvider, RunDir]:
    run_dir = RunDir(tmp_path / "run").create()
    provider = SkyPilotProvider(client_factory=lambda: pytest.fail("no SDK call expected"))
    provider.bind(plan, tmp_path / "plan.toml", "ft-1", run_dir.log_path)
    assert provider.watch is not None
    provider.watch._clock = clock
    return provider, run_dir


def _stream(provider: SkyPilotProvider, run_dir: RunDir, chunks: list[str]) -> None:
    """What sky.tail_logs does: write the job's output to the stream it is given, in pieces
    that need not end at line ends."""
    def tail(out: Any) -> None:
        for chunk in chunks:
            out.write(chunk)

    provider._follow(run_dir.log_path, tail)
    for thread in provider._log_threads:
        thread.join(timeout=30)


def _log(throughputs: list[float], *, prefix: str = "(head, rank=0, pid=7) ") -> list[str]:
    lines = ["Running setup...\n", "epoch 0 loss 2.3\n", PREFIX + "{not json\n"]
    for i, tp in enumerate(throughputs):
        marker = format_marker({**REPORT, "time": T0 + i, "epoch": float(i + 1),
                                "throughput": tp})
        lines.append(prefix + marker + "\n")
    text = "".join(lines)
    return [text[i:i + 37] for i in range(0, len(text), 37)]  # split mid-line


def test_markers_in_the_streamed_log_become_the_run_folders_reports(tmp_path: Path) -> None:
    plan = load_plan(_plan_file(tmp_path))
    provider, run_dir = _provider(tmp_path, plan, _Clock())
    _stream(provider, run_dir, _log([990.0, 1010.0, 1000.0]))
    reports = run_dir.metrics()
    assert [r["throughput"] for r in reports] == [990.0, 1010.0, 1000.0]
    assert run_dir.read_progress() == reports[-1]  # what the runner's status.json reads
    assert "epoch 0 loss 2.3" in run_dir.log_path.read_text()  # the log is all still there
    (measured,) = read_all(store_path())
    assert (measured.throughput, measured.gpu, measured.source) == (1000.0, "A100 SXM4 80GB",
                                                                    "on-arrival")
    assert provider.status_fields() == {"throughput_warning": None}
    assert not run_dir.launcher_log_path.exists() and provider.stop_reason() is None


def test_half_the_predicted_throughput_is_warned_about_and_recorded(tmp_path: Path) -> None:
    plan = load_plan(_plan_file(tmp_path))
    provider, run_dir = _provider(tmp_path, plan, _Clock())
    _stream(provider, run_dir, _log([500.0] * FIRST_CHECK_AFTER))
    warning = provider.status_fields()["throughput_warning"]
    assert warning is not None and "measured 500.0 samples/s vs predicted 1000.0 (-50%)" in warning
    assert "outside the prediction's band" in warning
    (line,) = run_dir.launcher_log_path.read_text().splitlines()
    assert line.endswith(warning)
    assert [m.throughput for m in read_all(store_path())] == [500.0]
    assert provider.stop_reason() is None  # verify_action = warn
    # the declared status field holds it (the runner merges status_fields into status.json)
    run_dir.write_status({"state": "running", **provider.status_fields()})
    status = read_status(run_dir.status_path)
    assert status is not None and status.throughput_warning == warning


def test_the_band_decides_not_a_fixed_margin(tmp_path: Path) -> None:
    """Sixteen GPUs on two nodes predicted from one: the held-out clusters' spread makes the
    band reach far below the verify margin, so a rate between the two is no surprise there."""
    plan = load_plan(_plan_file(tmp_path, gpu_count=8, nodes=2))
    provider, run_dir = _provider(tmp_path, plan, _Clock())
    margin_low = 1.0 - plan.safety.verify_margin_pct / 100.0
    band = plan_band(plan)
    assert band.low < margin_low - 0.1
    measured = plan.workload.throughput * (band.low + margin_low) / 2
    _stream(provider, run_dir, _log([measured] * FIRST_CHECK_AFTER))
    assert provider.status_fields()["throughput_warning"] is None
    assert [m.throughput for m in read_all(store_path())] == [measured]


def test_one_nvlink_node_is_checked_against_its_links_band(tmp_path: Path) -> None:
    """Eight NVLink GPUs in one node sync as Lambda's held-out one-machine runs did, not as
    the Sia pods across nodes: their band is the narrower one-node band."""
    one = plan_band(load_plan(_plan_file(tmp_path, gpu_count=8)))
    two = plan_band(load_plan(_plan_file(tmp_path, gpu_count=8, nodes=2)))
    assert "8 GPUs in one node over nvlink" in one.key
    assert "16 GPUs (held-out clusters)" in two.key
    assert two.low < one.low <= one.high < two.high


def test_a_local_run_on_arrival_reads_the_band_a_skypilot_run_reads(tmp_path: Path) -> None:
    """The runner's on-arrival decision (local, torchrun) and a SkyPilot run's checks read one
    band: under verify_action = stop, a rate inside the band but outside the verify margin goes
    on, as under SkyPilot, and one below the band stops. A plan without a profile GPU (a
    hand-written throughput) has no band: its margin decides."""
    plan = load_plan(_plan_file(tmp_path, verify_action="stop", gpu_count=8, nodes=2))
    limits = band_limits(plan, plan_band(plan))
    margin_low = 1.0 - plan.safety.verify_margin_pct / 100.0
    planned = plan.workload.throughput
    inside = verify_throughput(plan, planned * (limits[0] / planned + margin_low) / 2)
    assert not inside.within_margin and arrival_stop(plan, inside, limits) is None
    assert "inside the prediction's band" in inside.message(limits)
    below = verify_throughput(plan, limits[0] * 0.9)
    why = arrival_stop(plan, below, limits)
    assert why is not None and why.startswith("verify_action = stop")
    handwritten = replace(plan, workload=replace(plan.workload, profile_gpu=""))
    assert band_limits(handwritten, plan_band(handwritten)) == pytest.approx(
        (planned * margin_low, planned * (2 - margin_low)))


def test_a_slow_run_under_verify_action_stop_is_stopped(tmp_path: Path) -> None:
    plan = load_plan(_plan_file(tmp_path, verify_action="stop"))
    provider, run_dir = _provider(tmp_path, plan, _Clock())
    _stream(provider, run_dir, _log([500.0] * (FIRST_CHECK_AFTER - 1)))
    assert provider.stop_reason() is None  # not before the first check
    _stream(provider, run_dir, _log([500.0]))
    reason = provider.stop_reason()
    assert reason is not None and "verify_action = stop: stopping the run" in reason
    # the plan's profile ("resnet50") is no example: the stop says it could not re-rank
    assert "no re-ranking (no profile file or example named 'resnet50'" in reason
    assert reason.endswith("this plan at the measured rate: 231.11 USD/job")  # 5.78 h x 40 USD/h


def test_the_throughput_is_checked_again_every_few_minutes(tmp_path: Path) -> None:
    plan = load_plan(_plan_file(tmp_path))
    clock = _Clock()
    provider, run_dir = _provider(tmp_path, plan, clock)
    _stream(provider, run_dir, _log([1000.0] * FIRST_CHECK_AFTER))
    assert provider.status_fields()["throughput_warning"] is None
    clock.now = RECHECK_S - 1
    _stream(provider, run_dir, _log([400.0]))
    assert provider.status_fields()["throughput_warning"] is None  # not due yet
    clock.now = RECHECK_S + 1
    _stream(provider, run_dir, _log([420.0]))
    warning = provider.status_fields()["throughput_warning"]
    assert warning is not None and "measured 410.0 samples/s" in warning  # median since last
    assert sorted(m.throughput for m in read_all(store_path())) == [410.0, 1000.0]
    clock.now = 2 * RECHECK_S + 2
    _stream(provider, run_dir, _log([1005.0]))  # back within the band
    assert provider.status_fields()["throughput_warning"] is None
    assert len(run_dir.launcher_log_path.read_text().splitlines()) == 1


def test_a_status_file_schema_declares_the_warning() -> None:
    schema = json.loads((Path(__file__).parents[1] / "docs/schemas/run-status.schema.json")
                        .read_text())
    assert "throughput_warning" in schema["properties"]


def _example_plan(tmp_path: Path, verify_action: str | None) -> Plan:
    """A plan whose profile is an example, so that a stop can re-rank its job."""
    return load_plan(_plan_file(tmp_path, verify_action=verify_action,
                                profile="resnet50-v100-amp", precision="amp"))


def test_by_default_a_run_projected_over_its_budget_cap_is_stopped_naming_the_cheaper_plan(
        tmp_path: Path) -> None:
    """No verify_action in the plan: half the prediction projects 231 USD, under the 400 USD
    cap (a warning only); a quarter projects 453 USD, which the cap would end unfinished."""
    from gpucost.planning.ranking import rank
    from gpucost.planning.request import build_request

    plan = _example_plan(tmp_path, None)
    assert plan.safety.verify_action == "stop-over-budget"
    provider, run_dir = _provider(tmp_path, plan, _Clock())
    _stream(provider, run_dir, _log([500.0] * FIRST_CHECK_AFTER))
    assert provider.status_fields()["throughput_warning"] is not None
    assert provider.stop_reason() is None

    (tmp_path / "slower").mkdir()
    plan = _example_plan(tmp_path / "slower", None)
    provider, run_dir = _provider(tmp_path / "slower", plan, _Clock())
    _stream(provider, run_dir, _log([250.0] * FIRST_CHECK_AFTER))
    reason = provider.stop_reason()
    assert reason is not None
    assert ("projected $/job 453.33 USD at the measured 250.0 samples/s exceeds the budget cap "
            "400.00 USD; verify_action = stop-over-budget: stopping the run") in reason
    warning = provider.status_fields()["throughput_warning"]
    assert warning is not None and warning.endswith("over the budget cap 400.00 USD")
    # the cheaper plan is the job re-ranked now, with the measurements stored (this plan's
    # offer left out: it is priced from the measurement itself)
    ranking = rank(build_request("resnet50-v100-amp", samples=1e7, market="on-demand"))
    best = next(r for r in ranking.plans.rows() if r.instance_type != "p4de.24xlarge")
    assert f"cheaper now: {best.label()} at " in reason
    assert reason.endswith("this plan at the measured rate: 453.33 USD/job")


def test_verify_action_warn_keeps_a_run_projected_over_its_cap_going(tmp_path: Path) -> None:
    plan = _example_plan(tmp_path, "warn")
    provider, run_dir = _provider(tmp_path, plan, _Clock())
    _stream(provider, run_dir, _log([250.0] * FIRST_CHECK_AFTER))
    warning = provider.status_fields()["throughput_warning"]
    assert warning is not None and warning.endswith("over the budget cap 400.00 USD")
    assert provider.stop_reason() is None


def test_a_projection_over_the_cap_inside_the_band_still_warns_and_stops(tmp_path: Path) -> None:
    """Inside the band but over the cap: a cap of 125 USD over a 120 USD estimate and a run
    10 % slow (133 USD)."""
    path = _plan_file(tmp_path, verify_action=None)
    path.write_text(path.read_text().replace("budget_cap_usd = 400.0", "budget_cap_usd = 125.0"))
    plan = load_plan(path)
    provider, run_dir = _provider(tmp_path, plan, _Clock())
    _stream(provider, run_dir, _log([900.0] * FIRST_CHECK_AFTER))
    warning = provider.status_fields()["throughput_warning"]
    assert warning is not None and "inside the prediction's band" in warning
    reason = provider.stop_reason()
    assert reason is not None and "exceeds the budget cap 125.00 USD" in reason


def test_a_half_speed_run_is_stopped_recorded_and_the_next_predict_uses_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """#23's done-when, on the SkyPilot engine's log follower: half the predicted throughput is
    warned about at the first check (FIRST_CHECK_AFTER reports), stopped under
    verify_action = "stop", kept in measurements.json, and `gpucost predict` for the workload
    on that GPU starts from it."""
    from gpucost.cli import main

    plan = _example_plan(tmp_path, "stop")
    provider, run_dir = _provider(tmp_path, plan, _Clock())
    _stream(provider, run_dir, _log([500.0] * FIRST_CHECK_AFTER))
    assert provider.status_fields()["throughput_warning"] is not None
    reason = provider.stop_reason()
    assert reason is not None and "verify_action = stop: stopping the run" in reason
    (kept,) = read_all(store_path())
    assert (kept.workload, kept.gpu, kept.throughput) == ("resnet50-v100-amp",
                                                          "A100 SXM4 80GB", 500.0)
    capsys.readouterr()
    assert main(["predict", "-p", "resnet50-v100-amp", "--gpu", "A100 SXM4 80GB",
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["throughput"] == pytest.approx(500.0)
    assert doc["measurements"]["method"] == "measured on the target"
    assert doc["measurements"]["used"][0].startswith(kept.id)


@pytest.mark.slow
@pytest.mark.parametrize(("action", "state"), [("stop-over-budget", "verify-failed"),
                                                ("warn", "succeeded")])
def test_a_local_run_projected_over_its_cap_on_arrival_stops_unless_told_to_warn(
        tmp_path: Path, action: str, state: str) -> None:
    """A real local run planned at 1e9 samples/s: its first report projects a $/job far over
    the 1 USD cap (the estimate's 0.1 USD x 1e9 / measured, over the cap at any speed below
    1e8 samples/s; with an estimate of 0.0001 USD a fast CPU measured 107k samples/s, projected
    0.93 USD and ran on)."""
    from run_helpers import write_plan

    from gpucost.executor.runner import Runner

    plan_path = write_plan(tmp_path, epochs=2, throughput=1e9, margin=100.0, action=action,
                           est_cost=0.1)
    result = Runner(load_plan(plan_path), plan_path, poll_s=0.1).launch()
    assert result.state == state
    stops = [m for m in result.messages if "exceeds the budget cap 1.00 USD" in m]
    if state == "verify-failed":
        (stop,) = stops
        assert "verify_action = stop-over-budget: stopping the run" in stop
        assert "no re-ranking (the plan names no [workload] profile)" in stop
    else:
        assert not stops
