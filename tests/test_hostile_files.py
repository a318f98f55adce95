"""Damaged and hostile files that gpucost reads (plans, profiles, policies, baselines): each one
is refused with one line naming the file, the field and what was expected, exit 2, never a
traceback (issue 16)."""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from gpucost.cli import main
from gpucost.errors import PlanFileError, ProfileError
from gpucost.plan import load_plan
from gpucost.profile import Profile

REPO_ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = REPO_ROOT / "examples"
PROFILE = REPO_ROOT / "profiles" / "resnet50-v100-amp.json"


def _one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str], *words: str) -> str:
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("gpucost: error: ") and err.count("\n") == 1, err
    for word in words:
        assert word in err, err
    return err


@pytest.fixture
def plan_doc() -> dict[str, Any]:
    return tomllib.loads((EXAMPLES / "plan.toml").read_text())


def _write_plan(folder: Path, doc: dict[str, Any]) -> Path:
    shutil.copy(EXAMPLES / "train_tiny.py", folder / "train_tiny.py")
    path = folder / "plan.toml"
    path.write_text(tomli_w.dumps(doc))
    return path


# ---- plans -------------------------------------------------------------------------------------
@pytest.mark.parametrize(("section", "key", "value", "expect"), [
    ("offer", "nodes", 1e23, "[offer] nodes = 99999999999999991611392 is out of range "
                             "(must be <= 1024)"),  # 1e23 as TOML's float reads it
    ("offer", "gpu_count", 1e308, "[offer] gpu_count = 1e+308 is out of range (must be <= 64)"),
    ("offer", "price_hr", 1e308, "[offer] price_hr = 1e+308 is out of range (must be <= 1000)"),
    ("offer", "price_hr", -0.0, "[offer] price_hr is -0"),
    ("offer", "on_demand_price_hr", 0.0, "[offer] on_demand_price_hr = 0.0 is out of range"),
])
def test_absurd_counts_and_prices_are_refused(
    tmp_path: Path, plan_doc: dict[str, Any], capsys: pytest.CaptureFixture[str],
    section: str, key: str, value: float, expect: str,
) -> None:
    plan_doc[section][key] = value
    path = _write_plan(tmp_path, plan_doc)
    _one_line_error(capsys, ["explain", str(path)], str(path), expect)


def test_a_rented_machine_at_price_zero_is_refused_but_your_own_may_be_free(
    tmp_path: Path, plan_doc: dict[str, Any],
) -> None:
    plan_doc["offer"]["price_hr"] = 0.0
    plan_doc["estimate"].update(cost_usd=0.0, compute_usd=0.0)
    assert load_plan(_write_plan(tmp_path, plan_doc)).offer.price_hr == 0.0  # provider local
    plan_doc["offer"]["provider"] = "aws"
    with pytest.raises(PlanFileError, match=r"\[offer\] price_hr = 0 for a aws machine"):
        load_plan(_write_plan(tmp_path, plan_doc))


@pytest.mark.parametrize("argv", [["explain"], ["preflight"], ["launch", "--dry-run"]])
def test_a_nul_in_the_job_name_is_refused_when_the_plan_loads(
    tmp_path: Path, plan_doc: dict[str, Any], capsys: pytest.CaptureFixture[str],
    argv: list[str],
) -> None:
    plan_doc["job"]["name"] = "tiny\x00local"
    path = _write_plan(tmp_path, plan_doc)
    code = main([*argv, str(path)])
    out, err = capsys.readouterr()
    assert code == 2
    assert "[job] name contains a NUL character" in out + err


def test_a_nul_in_the_command_is_refused(tmp_path: Path, plan_doc: dict[str, Any]) -> None:
    plan_doc["job"]["command"] = ["python", "train_tiny.py\x00"]
    with pytest.raises(PlanFileError, match=r"\[job\] command contains a NUL character"):
        load_plan(_write_plan(tmp_path, plan_doc))


def test_deeply_nested_toml_plan_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / "plan.toml"
    path.write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")
    _one_line_error(capsys, ["explain", str(path)], str(path), "nested deeper than 32 levels")
    code = main(["preflight", str(path), "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 2
    assert "nested deeper" in report["checks"][0]["message"]


def test_a_plan_that_is_not_utf8_or_too_large_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / "plan.toml"
    path.write_bytes(b'schema = "gpucost-plan"\nname = "\xff\xfe"\n')
    _one_line_error(capsys, ["explain", str(path)], str(path), "is not UTF-8")
    path.write_bytes(b"# " + b"x" * (2 << 20))
    _one_line_error(capsys, ["explain", str(path)], str(path), "is larger than 1024 KiB")
    _one_line_error(capsys, ["explain", str(tmp_path)], str(tmp_path), "cannot read plan file")


# ---- profiles ----------------------------------------------------------------------------------
def _profile_doc() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(PROFILE.read_text())
    return doc


def test_a_profile_that_is_not_utf8_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / "p.json"
    path.write_bytes(PROFILE.read_bytes().replace(b'"name": "', b'"name": "\xe9', 1))
    _one_line_error(capsys, ["compare", "--profile", str(path)], str(path), "is not UTF-8")


def test_a_deeply_nested_profile_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / "p.json"
    doc = _profile_doc()
    path.write_text(json.dumps(doc)[:-1] + ', "environment": ' + "[" * 100_000
                    + "]" * 100_000 + "}")
    _one_line_error(capsys, ["predict", "-p", str(path), "--gpu", "A100"], str(path),
                    "nested deeper than 32 levels")


@pytest.mark.parametrize(("key", "value", "expect"), [
    ("step_time_s", "1e999", "1e999 is not a finite number"),
    ("operators", '[{"name": "mm", "calls": "many", "time_s": 1}]', "operators[0] needs a name"),
    ("operators", '[{"name": "mm", "calls": 1, "time_s": -1}]', "operators[0].time_s must be"),
    ("operators", '"abc"', "malformed nested field"),
    ("breakdown", "[1, 2]", "malformed nested field"),
    ("environment", "[1]", "environment must be an object"),
    ("name", "{}", "name must be a string"),
    ("partial", '"yes"', "partial must be true or false"),
    ("verdict", '{"kind": "unknown", "reason": 1, "advice": "x"}', "verdict.kind, verdict.reason"),
])
def test_wrongly_typed_profile_fields_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str, value: str, expect: str,
) -> None:
    doc = _profile_doc()
    doc[key] = "@@"
    path = tmp_path / "p.json"
    path.write_text(json.dumps(doc).replace('"@@"', value))
    _one_line_error(capsys, ["compare", "--profile", str(path)], str(path), expect)
    with pytest.raises(ProfileError):
        Profile.load(path)


# ---- policies and baselines --------------------------------------------------------------------
def test_a_damaged_policy_or_baseline_is_a_preflight_input_problem(
    tmp_path: Path, plan_doc: dict[str, Any], capsys: pytest.CaptureFixture[str],
) -> None:
    plan = _write_plan(tmp_path, plan_doc)
    policy = tmp_path / "policy.toml"
    for body, expect in ((b"max_job_usd = " + b"[" * 3000 + b"]" * 3000, "nested deeper"),
                         (b"max_job_usd = 1\n# \xff\n", "is not UTF-8"),
                         (b"max_job_usd = nan\n", "max_job_usd must be a number >= 0")):
        policy.write_bytes(body)
        code = main(["preflight", str(plan), "--policy", str(policy), "--format", "json"])
        report = json.loads(capsys.readouterr().out)
        assert code == 2
        problem = report["checks"][0]
        assert problem["id"] == "policy-file" and expect in problem["message"], problem
    baseline = tmp_path / "old.json"
    baseline.write_text(json.dumps({"schema": "gpucost-preflight", "estimate": ["x"]}))
    code = main(["preflight", str(plan), "--baseline", str(baseline), "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 2
    assert "has no estimate.cost_usd" in report["checks"][0]["message"]
