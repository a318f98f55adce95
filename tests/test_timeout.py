"""The executor's hard limit holds the job's start as well as its estimate, and preflight holds
plan's rule: a short job on your own machine is not stopped before its first step."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest

from gpucost.cli import main
from gpucost.planning.planbuild import STARTUP_ALLOWANCE_HOURS, TIMEOUT_FACTOR

LOCAL_PLAN = ["plan", "--include-local", "--local-gpu", "RTX 4090", "--provider", "local",
              "--samples", "1000", "-o", "plan.toml"]


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_job_of_seconds_gets_its_start_in_the_limit_and_preflight_agrees(
        workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(LOCAL_PLAN) == 0
    plan = tomllib.loads((workdir / "plan.toml").read_text())
    hours = plan["estimate"]["hours"]
    assert hours < 0.01  # seconds: the setup is nothing on your own machine
    assert plan["safety"]["timeout_hours"] >= hours * TIMEOUT_FACTOR + STARTUP_ALLOWANCE_HOURS
    capsys.readouterr()
    assert main(["preflight", "plan.toml", "--format", "json"]) == 0
    assert '"timeout_hours"' in capsys.readouterr().out


@pytest.mark.slow
def test_a_job_longer_than_one_and_a_half_estimates_but_short_runs_to_its_end(
        workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Its estimate is a fraction of a second; the job takes some 5 s to start and finish, as a
    real one takes to import torch and reach its first step. Under 1.5x the estimate alone
    (3.6 s, the limit rounded up) the guard stopped it as timed out."""
    (workdir / "train.py").write_text(
        "import time\nimport gpucost\ntime.sleep(5)\n"
        "gpucost.report(epoch=0, throughput=100.0)\nprint('done')\n")
    assert main([*LOCAL_PLAN, "--command", f"{sys.executable} train.py"]) == 0
    capsys.readouterr()
    assert main(["launch", "plan.toml"]) == 0
    out = capsys.readouterr()
    assert "timed-out" not in out.out + out.err
    assert main(["ps", "--all"]) == 0
    assert "timed-out" not in capsys.readouterr().out
