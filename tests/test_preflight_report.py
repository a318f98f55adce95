"""Report formats: golden files for each, and properties of the exit code and the escaping.

Regenerate the goldens after an intended change with GPUCOST_UPDATE_GOLDENS=1 (tests/goldens.py).
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from goldens import assert_golden
from hypothesis import given
from hypothesis import strategies as st

from gpucost import __version__
from gpucost._io import atomic_write_text
from gpucost.preflight import CheckResult, PreflightReport, render, run_preflight
from gpucost.preflight.report import _gh_data, render_github, render_markdown

REPO_ROOT = Path(__file__).resolve().parents[1]
FIXTURES = REPO_ROOT / "tests" / "fixtures" / "preflight"
TODAY = dt.date(2026, 11, 30)
NOW = dt.datetime(2026, 11, 30, 21, 0, 0, tzinfo=dt.UTC)
SUFFIX = {"table": "txt", "json": "json", "markdown": "md", "github": "github.txt",
          "junit": "junit.xml"}


@pytest.fixture
def fx(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    work = tmp_path / "fx"
    shutil.copytree(FIXTURES, work)
    monkeypatch.chdir(work)
    return work


def _mixed_report() -> PreflightReport:
    """Over budget (error), tight disk and far dataset (warnings), against a dearer baseline."""
    before = run_preflight("pricier.toml", today=TODAY, now=NOW)
    atomic_write_text("old.json", render(before, "json"))
    return run_preflight("mixed.toml", baseline_path="old.json", today=TODAY, now=NOW)


def _normalised(text: str) -> str:
    return text.replace(f'"gpucost_version": "{__version__}"', '"gpucost_version": "<version>"')




@pytest.mark.parametrize("fmt", list(SUFFIX))
def test_golden_mixed_report(fx: Path, fmt: str) -> None:
    report = _mixed_report()
    assert report.exit_code == 1
    assert_golden(f"preflight/mixed.{SUFFIX[fmt]}", _normalised(render(report, fmt)))


@pytest.mark.parametrize("fmt", ["json", "junit", "github"])
def test_golden_input_error_report(fx: Path, fmt: str) -> None:
    report = run_preflight("missing_gpu.toml", today=TODAY, now=NOW)
    assert report.exit_code == 2
    assert_golden(f"preflight/missing_gpu.{SUFFIX[fmt]}", _normalised(render(report, fmt)))


def test_json_is_versioned_and_complete(fx: Path) -> None:
    doc = json.loads(render(_mixed_report(), "json"))
    assert doc["schema"] == "gpucost-preflight" and doc["schema_version"] == 1
    assert doc["summary"] == {"status": "failed", "exit_code": 1, "passed": 7, "errors": 1,
                              "warnings": 2, "skipped": 3}
    assert doc["baseline"]["cost_usd"] == pytest.approx(171.9)
    assert doc["estimate"]["cost_usd"] == pytest.approx(115.2)
    assert doc["baseline"]["change_pct"] == pytest.approx((115.2 / 171.9 - 1) * 100)
    for check in doc["checks"]:
        assert set(check) == {"id", "title", "status", "severity", "message", "fix",
                              "exit_code", "file", "line", "details"}


def test_junit_counts_match_the_report(fx: Path) -> None:
    report = _mixed_report()
    root = ET.fromstring(render(report, "junit"))
    suite = root.find("testsuite")
    assert suite is not None
    assert suite.get("tests") == str(len(report.results))
    assert suite.get("failures") == "1" and suite.get("errors") == "0"
    assert suite.get("skipped") == "3"
    failure = suite.find("testcase[@name='budget']/failure")
    assert failure is not None and failure.text is not None and "Fix:" in failure.text
    assert suite.find("testcase[@name='dataset-region']/system-out") is not None


def _result(status: str, severity: str, code: int, message: str = "m") -> CheckResult:
    return CheckResult("x", "X", status, severity, message, "f", code)  # type: ignore[arg-type]


def _report(results: list[CheckResult]) -> PreflightReport:
    return PreflightReport("p.toml", "defaults", TODAY, NOW, None, None, tuple(results))


RESULTS = st.builds(_result, st.sampled_from(["pass", "fail", "skip"]),
                    st.sampled_from(["error", "warning"]), st.sampled_from([0, 1, 2, 3]))


@given(st.lists(RESULTS, max_size=12))
def test_exit_code_priority(results: list[CheckResult]) -> None:
    codes = {r.exit_code for r in results}
    expected = 2 if 2 in codes else 3 if 3 in codes else 1 if 1 in codes else 0
    report = _report(results)
    assert report.exit_code == expected
    assert sum(report.counts().values()) == len(results)


def _gh_decode(text: str) -> str:
    return text.replace("%0A", "\n").replace("%0D", "\r").replace("%25", "%")


@given(st.text())
def test_github_escaping_round_trips(text: str) -> None:
    escaped = _gh_data(text)
    assert "\n" not in escaped and "\r" not in escaped
    assert _gh_decode(escaped) == text


@given(st.text(alphabet=st.characters(exclude_categories=["Cs"]), min_size=1))
def test_any_message_stays_one_annotation_and_one_table_row(message: str) -> None:
    report = _report([_result("fail", "error", 1, message)])
    lines = render_github(report).splitlines()
    assert len(lines) == 2 and lines[0].startswith("::error ")
    rows = [line for line in render_markdown(report).splitlines() if line.startswith("| ❌")]
    assert len(rows) == 1
    assert rows[0].replace("\\|", "").count("|") == 5
