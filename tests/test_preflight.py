"""`gpucost preflight` on real plan files: one broken plan per check, its id, exit code and fix."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpucost.cli import main
from gpucost.preflight import CHECK_IDS
from gpucost.preflight.checks import continent

REPO_ROOT = Path(__file__).resolve().parents[1]
FIXTURES = REPO_ROOT / "tests" / "fixtures" / "preflight"
TODAY = "2026-11-30"


@pytest.fixture
def fx(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the fixtures as the working folder, so paths in reports are short and stable."""
    work = tmp_path / "fx"
    shutil.copytree(FIXTURES, work)
    monkeypatch.chdir(work)
    return work


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code = main(["preflight", *args, "--today", TODAY, "--format", "json"])
    out = capsys.readouterr().out
    return code, json.loads(out)


def _failed(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["id"]: c for c in report["checks"] if c["status"] == "fail"}


def test_good_plan_passes_every_check(fx: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, report = _run(capsys, "good.toml")
    assert code == 0
    assert _failed(report) == {}
    summary = report["summary"]
    assert isinstance(summary, dict)
    assert summary["status"] == "passed" and summary["passed"] >= 8
    assert [c["id"] for c in report["checks"]] == list(CHECK_IDS)


# plan, failing check id, exit code, severity, words the fix must contain
BROKEN = [
    ("over_budget.toml", "budget", 1, "error", "cheaper offer"),
    ("past_deadline.toml", "deadline", 1, "error", "faster GPU"),
    ("stale_prices.toml", "price-age", 3, "error", "refresh the price snapshot"),
    ("no_timeout.toml", "timeout", 2, "error", "add timeout_hours under [safety]"),
    ("out_of_memory.toml", "memory-fit", 1, "error", "accumulation steps"),
    ("small_disk.toml", "disk-size", 1, "error", "size_gb = 247"),
    ("spot_no_checkpoint.toml", "spot-checkpoint", 1, "error", "enabled = true"),
    ("spot_local_checkpoint.toml", "spot-checkpoint", 1, "error", 's3://'),
    ("arch_mismatch.toml", "cuda-arch", 1, "error", "torch 2.10.*+cu128"),
    ("no_main_guard.toml", "main-guard", 1, "error", 'under `if __name__ == "__main__":`'),
    ("missing_gpu.toml", "plan-file", 2, "error", "add `gpu = ...` under [offer]"),
    # warnings: reported, but the build passes
    ("lax_timeout.toml", "timeout", 0, "warning", "lower [safety] timeout_hours to about 5.4"),
    ("tight_disk.toml", "disk-size", 0, "warning", "size_gb = 247"),
    ("dataloader_bound.toml", "dataloader", 0, "warning", "raise DataLoader num_workers"),
    ("far_dataset.toml", "dataset-region", 0, "warning", "copy the data once"),
]


@pytest.mark.parametrize(("plan", "check", "exit_code", "severity", "fix"), BROKEN,
                         ids=[b[0] for b in BROKEN])
def test_each_broken_plan_fails_its_check(fx: Path, capsys: pytest.CaptureFixture[str],
                                          plan: str, check: str, exit_code: int,
                                          severity: str, fix: str) -> None:
    code, report = _run(capsys, plan)
    failed = _failed(report)
    assert set(failed) == {check}, failed  # exactly the one check the fixture breaks
    assert code == exit_code
    assert failed[check]["severity"] == severity
    assert fix in str(failed[check]["fix"])
    assert str(failed[check]["message"])  # says what was found


def test_a_rented_disk_sized_for_the_data_alone_cannot_boot(
        fx: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # One disk rule for plans and checks (economics.disk_need): a rented boot disk also holds
    # the OS and the training image, and the size the check asks for is the one `gpucost plan`
    # writes for the same job.
    from gpucost.model.economics import disk_size_gb

    text = (fx / "good.toml").read_text().replace("size_gb = 250.0", "size_gb = 170.0")
    (fx / "data_only.toml").write_text(text)
    code, report = _run(capsys, "data_only.toml")
    failed = _failed(report)
    assert set(failed) == {"disk-size"} and code == 1
    assert failed["disk-size"]["severity"] == "error"
    assert "OS and image 50 GB" in str(failed["disk-size"]["message"])
    planned = disk_size_gb(150.0, 0.2, checkpoints_kept=2, results_gb=1.0)
    assert f"size_gb = {planned:g} " in str(failed["disk-size"]["fix"])


def test_first_line_of_each_fixture_names_the_check_it_breaks() -> None:
    for plan, check, *_ in BROKEN:
        if check != "plan-file":
            assert check in (FIXTURES / plan).read_text().splitlines()[0], plan


def test_missing_field_message_names_it(fx: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, report = _run(capsys, "missing_gpu.toml")
    assert "[offer] gpu is missing" in str(_failed(report)["plan-file"]["message"])
    assert report["estimate"] is None


def test_unknown_gpu_is_an_input_error_with_suggestions(
        fx: Path, capsys: pytest.CaptureFixture[str]) -> None:
    Path("unknown_gpu.toml").write_text(
        Path("good.toml").read_text().replace('gpu = "A100 SXM4 40GB"', 'gpu = "A100 SMX 40"'))
    code, report = _run(capsys, "unknown_gpu.toml")
    failed = _failed(report)
    assert code == 2 and set(failed) == {"memory-fit"}
    assert "'A100 SXM4 40GB'" in str(failed["memory-fit"]["fix"])
    assert failed["memory-fit"]["line"] == 27


def test_unreadable_profile_warns_and_memory_falls_back(
        fx: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = Path("good.toml").read_text().replace('profile = "resnet50-v100-amp"',
                                                 'profile = "mine.json"')
    Path("no_profile.toml").write_text(text)
    code, report = _run(capsys, "no_profile.toml")
    failed = _failed(report)
    assert code == 0 and set(failed) == {"memory-fit", "dataloader"}
    assert all(f["severity"] == "warning" for f in failed.values())
    Path("no_profile.toml").write_text(text.replace('precision = "amp"',
                                                    'precision = "amp"\npeak_memory_gb = 52.0'))
    code, report = _run(capsys, "no_profile.toml")
    assert code == 1
    assert "52.0 GB" in str(_failed(report)["memory-fit"]["message"])


def test_hourly_rate_from_policy(fx: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, report = _run(capsys, "good.toml", "--policy", "policy_hourly.toml")
    assert code == 1
    failed = _failed(report)
    assert set(failed) == {"hourly-rate"}
    assert "32.77 USD/h" in str(failed["hourly-rate"]["message"])
    assert "fewer nodes" in str(failed["hourly-rate"]["fix"])


def test_baseline_reports_change_and_policy_limits_it(fx: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["preflight", "good.toml", "--today", TODAY, "--format", "json",
                 "--output", "old.json"]) == 0
    capsys.readouterr()
    code, report = _run(capsys, "pricier.toml", "--baseline", "old.json")
    assert code == 0  # without a threshold the change is information
    baseline = report["baseline"]
    assert isinstance(baseline, dict)
    assert baseline["cost_usd"] == pytest.approx(115.2)
    assert baseline["change_pct"] == pytest.approx((171.9 / 115.2 - 1) * 100)
    code, report = _run(capsys, "pricier.toml", "--baseline", "old.json",
                        "--policy", "policy_increase.toml")
    assert code == 1
    failed = _failed(report)
    assert set(failed) == {"cost-increase"}
    assert "+49.2 %" in str(failed["cost-increase"]["message"])


def test_bad_baseline_is_an_input_error(fx: Path, capsys: pytest.CaptureFixture[str]) -> None:
    Path("old.json").write_text('{"schema": "something-else"}')
    code, report = _run(capsys, "good.toml", "--baseline", "old.json")
    assert code == 2
    assert "not a gpucost preflight report" in str(_failed(report)["baseline"]["message"])


def test_policy_skip_needs_a_reason(fx: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, report = _run(capsys, "good.toml", "--policy", "policy_skip_without_reason.toml")
    assert code == 2
    failed = _failed(report)["policy-file"]
    assert "without reasons" in str(failed["message"]) and "[skip]" in str(failed["fix"])


def test_policy_skip_with_reason_is_shown(fx: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, report = _run(capsys, "no_main_guard.toml", "--policy", "policy_skip.toml")
    assert code == 0
    guard = next(c for c in report["checks"] if c["id"] == "main-guard")
    assert guard["status"] == "skip"
    assert guard["message"] == "skipped by policy: launched by torchrun only, no worker processes"


def test_policy_unknown_check_and_bad_numbers(fx: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    Path("p.toml").write_text('[skip]\nmain_guard = "typo"\n')
    code, report = _run(capsys, "good.toml", "--policy", "p.toml")
    assert code == 2 and "unknown check 'main_guard'" in str(report["checks"])
    Path("p.toml").write_text("max_job_usd = -5\n")
    code, report = _run(capsys, "good.toml", "--policy", "p.toml")
    assert code == 2 and "max_job_usd must be a number >= 0" in str(report["checks"])


def test_fail_on_warnings(fx: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, report = _run(capsys, "far_dataset.toml", "--policy", "policy_strict.toml")
    assert code == 1
    assert _failed(report)["dataset-region"]["exit_code"] == 1


def test_policy_price_age(fx: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = _run(capsys, "good.toml", "--policy", "policy_strict.toml")
    assert code == 0  # 10 days old, 14 allowed
    code = main(["preflight", "good.toml", "--policy", "policy_strict.toml", "--today",
                 "2026-12-10", "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 3 and set(_failed(report)) == {"price-age"}


def test_exit_priority_input_over_stale_over_policy(fx: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    text = Path("stale_prices.toml").read_text().replace("budget_usd = 500.0",
                                                         "budget_usd = 100.0")
    Path("both.toml").write_text(text)
    code, report = _run(capsys, "both.toml")
    assert set(_failed(report)) == {"budget", "price-age"} and code == 3


def test_report_written_to_file_before_exit(fx: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for fmt in ("json", "junit", "markdown", "table", "github"):
        out = Path(f"report.{fmt}")
        code = main(["preflight", "missing_gpu.toml", "--format", fmt, "--output", str(out)])
        assert code == 2
        assert "gpu" in out.read_text()
    assert "report in report.github" in capsys.readouterr().err
    assert not list(Path().glob(".report.*.tmp"))  # atomic writes leave no temp files


def test_missing_plan_file_still_writes_a_report(fx: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    code, report = _run(capsys, "nope.toml")
    assert code == 2
    assert "does not exist" in str(_failed(report)["plan-file"]["message"])


def test_usage_errors_exit_2(fx: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["preflight", "good.toml", "--today", "30/11/2026"]) == 2
    assert "YYYY-MM-DD" in capsys.readouterr().err
    assert main(["preflight", "good.toml", "--format", "xml"]) == 2
    assert "invalid choice: 'xml'" in capsys.readouterr().err


def test_github_format_appends_job_summary(fx: Path, capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    summary = Path("summary.md")
    summary.write_text("# earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    code = main(["preflight", "over_budget.toml", "--today", TODAY, "--format", "github"])
    out = capsys.readouterr().out
    assert code == 1
    assert out.startswith("::error file=over_budget.toml,line=")
    assert "title=gpucost preflight%3A budget::" in out
    text = summary.read_text()
    assert text.startswith("# earlier step\n")
    assert "## ❌ gpucost preflight: failed" in text and "| ❌ | `budget` |" in text


def test_installed_torch_is_used_when_not_pinned(fx: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    torch = pytest.importorskip("torch")
    text = Path("good.toml").read_text().replace('torch_version = "2.8.0+cu128"\n', "")
    Path("unpinned.toml").write_text(text)
    code, report = _run(capsys, "unpinned.toml")
    arch = next(c for c in report["checks"] if c["id"] == "cuda-arch")
    if torch.cuda.get_arch_list():  # a CUDA build: judged by its real arch list
        assert arch["details"]["basis"] == "installed"
    else:  # the CPU wheel says nothing about the job's build: a warning with the fix
        assert arch["status"] == "fail" and arch["severity"] == "warning" and code == 0
        assert "torch_version" in arch["fix"]


def test_local_disk_check_uses_free_space(fx: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = (REPO_ROOT / "examples" / "plan.toml").read_text()
    Path("huge_local.toml").write_text(text.replace("data_gb = 0.0", "data_gb = 1e6"))
    code, report = _run(capsys, "huge_local.toml")
    assert code == 1
    assert "free at" in str(_failed(report)["disk-size"]["message"])


def test_example_plan_passes(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["preflight", str(REPO_ROOT / "examples" / "plan.toml"), "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0, _failed(report)


def test_example_policy_loads(fx: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, report = _run(capsys, "good.toml", "--policy", str(REPO_ROOT / "examples" /
                                                              "policy.toml"))
    assert code == 0, _failed(report)
    assert report["policy"].endswith("policy.toml")


@pytest.mark.parametrize(("region", "where"), [
    ("us-east-1", "North America"), ("eastus2", "North America"), ("ca-central-1", "North America"),
    ("europe-west4", "Europe"), ("westeurope", "Europe"), ("eu-west-1", "Europe"),
    ("ap-southeast-2", "Oceania"), ("australiaeast", "Oceania"), ("ap-northeast-1", "Asia"),
    ("asia-east1", "Asia"), ("southeastasia", "Asia"), ("sa-east-1", "South America"),
    ("me-central-1", "Middle East"), ("af-south-1", "Africa"), ("mars-1", None),
])
def test_continent(region: str, where: str | None) -> None:
    assert continent(region) == where


@pytest.mark.slow
def test_cli_planning_path_imports_no_heavy_modules(fx: Path) -> None:
    """The real command in a fresh interpreter: exit code, and no torch/textual/boto3/pandas."""
    probe = ("import sys; from gpucost.cli import main; code = main(['preflight', "
             "'arch_mismatch.toml', '--today', '2026-11-30', '--format', 'github']); "
             "heavy = [m for m in ('torch', 'textual', 'boto3', 'pandas') if m in sys.modules]; "
             "print('HEAVY', heavy); sys.exit(code)")
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          env=env, timeout=60, check=False)
    assert done.returncode == 1, done.stderr
    assert "HEAVY []" in done.stdout
    assert "::error file=arch_mismatch.toml" in done.stdout


def test_spot_checkpoints_further_apart_than_interruptions_warn(
        fx: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spot = (Path("good.toml").read_text()
            .replace('market = "on-demand"', 'market = "spot"')
            .replace("interruption_rate_per_hr = 0.0", "interruption_rate_per_hr = 0.5"))
    Path("spot.toml").write_text(spot)  # every 10 of 90 epochs: 0.4 h apart, 2 h between
    code, report = _run(capsys, "spot.toml")
    assert code == 0 and _failed(report) == {}
    Path("spot.toml").write_text(spot.replace("every_epochs = 10.0", "interval_minutes = 180.0"))
    code, report = _run(capsys, "spot.toml")
    failed = _failed(report)
    assert code == 0 and set(failed) == {"spot-checkpoint"}
    assert failed["spot-checkpoint"]["severity"] == "warning"
    assert "interval_minutes" in failed["spot-checkpoint"]["fix"]


def test_a_broken_check_is_an_internal_error_not_a_traceback(
        fx: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from gpucost.preflight import checks

    def broken(c: checks.Check, ctx: checks.Context) -> checks.CheckResult:
        return c.ok(f"{1 / 0}")

    patched = tuple(dataclasses.replace(c, run=broken) if c.id == "deadline" else c
                    for c in checks.CHECKS)
    monkeypatch.setattr(checks, "CHECKS", patched)
    code, report = _run(capsys, "over_budget.toml")
    failed = _failed(report)
    assert code == 3 and set(failed) == {"deadline", "budget"}  # the others still ran
    assert "internal error: ZeroDivisionError" in failed["deadline"]["message"]
