"""A SkyPilot run's throughput comes home in its log: the marker lines gpucost.report() prints
under GPUCOST_REPORT_TO_LOG, and the launcher's side that turns them into the run folder's
metrics.jsonl / progress.json, a measurement and the band check. No SkyPilot needed: the log
stream is driven through SkyPilotProvider's own follower with a fake tail."""

from __future__ import annotations

import json
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


def _plan_file(tmp_path: Path, *, verify_action: str = "warn", gpu_count: int = 1) -> Path:
    (tmp_path / "code").mkdir(exist_ok=True)
    plan: dict[str, Any] = {
        "schema": "gpucost-plan", "schema_version": 1,
        "job": {"name": "ft", "command": ["python", "train.py"], "workdir": "code",
                "samples": 1e7},
        "offer": {"provider": "aws", "region": "us-east-1", "instance_type": "p4de.24xlarge",
                  "gpu": "A100 SXM4 80GB", "gpu_count": gpu_count, "nodes": 1,
                  "market": "on-demand",
                  "price_hr": 40.0, "price_source": "skypilot-aws"},
        "workload": {"throughput": 1000.0, "profile": "resnet50", "profile_gpu": "H100 SXM5 80GB",
                     "precision": "bf16", "batch_size": 64},
        "safety": {"timeout_hours": 5.0, "budget_cap_usd": 400.0, "verify_action": verify_action},
        "estimate": {"hours": 3.0, "cost_usd": 120.0, "compute_usd": 120.0},
    }
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
    assert status is not None and status["throughput_warning"] == warning


def test_the_band_decides_not_a_fixed_margin(tmp_path: Path) -> None:
    """Eight GPUs predicted from one: the held-out clusters' spread makes the band reach
    below half the prediction (0.32 x), so half is no surprise there."""
    plan = load_plan(_plan_file(tmp_path, gpu_count=8))
    provider, run_dir = _provider(tmp_path, plan, _Clock())
    _stream(provider, run_dir, _log([500.0] * FIRST_CHECK_AFTER))
    assert provider.status_fields()["throughput_warning"] is None
    assert [m.throughput for m in read_all(store_path())] == [500.0]


def test_a_slow_run_under_verify_action_stop_is_stopped(tmp_path: Path) -> None:
    plan = load_plan(_plan_file(tmp_path, verify_action="stop"))
    provider, run_dir = _provider(tmp_path, plan, _Clock())
    _stream(provider, run_dir, _log([500.0] * (FIRST_CHECK_AFTER - 1)))
    assert provider.stop_reason() is None  # not before the first check
    _stream(provider, run_dir, _log([500.0]))
    reason = provider.stop_reason()
    assert reason is not None and reason.endswith("verify_action = stop: stopping the run")


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
