"""Damaged and hostile files that gpucost reads (plans, profiles, policies, baselines): each one
is refused with one line naming the file, the field and what was expected, exit 2, never a
traceback (issue 16)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from gpucost import reporting
from gpucost.cli import main
from gpucost.errors import PlanFileError, ProfileError
from gpucost.executor.ledger import Ledger
from gpucost.executor.rundir import RunDir
from gpucost.executor.runfiles import RunFileError
from gpucost.planfile import load_plan
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
                             "(must be <= 4096)"),  # 1e23 as TOML's float reads it
    ("offer", "gpu_count", 1e308, "[offer] gpu_count = 1e+308 is out of range (must be <= 64)"),
    ("offer", "price_hr", 1e308, "[offer] price_hr = 1e+308 is out of range (must be <= 10000)"),
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


# ---- run files: status.json, progress.json, metrics.jsonl ---------------------------------------
def _run_with_status(home: Path, body: bytes) -> RunDir:
    rd = RunDir(home / "runs" / "tiny-1").create()
    with Ledger() as ledger:
        ledger.create_run(run_id="tiny-1", name="tiny", plan_path="p", provider="torchrun",
                          run_dir=str(rd.path), price_hr=0.02, nodes=1, budget_cap_usd=0.05)
    rd.status_path.write_bytes(body)
    return rd


@pytest.mark.parametrize(("status", "expect"), [
    ({"state": "running", "epochs": "ten"}, 'epochs should be a valid number, got "ten"'),
    ({"state": "running", "metrics": [1, 2]}, "metrics should be a valid dictionary"),
    ({"state": "running", "metrics": {"loss": "low"}}, "metrics.loss should be a valid number"),
    ({"state": "running", "throughput": "fast"}, "throughput should be a valid number"),
    ({"state": "running", "eta_s": {"h": 1}}, "eta_s should be a valid number"),
    ({"state": ["running"]}, "state should be a valid string"),
    ({"state": "running", "cost_usd": 1e999}, "1e999 is not a finite number"),
])
def test_status_with_wrong_types_is_one_line(
    _isolated_home: Path, capsys: pytest.CaptureFixture[str], status: dict[str, Any],
    expect: str,
) -> None:
    text = json.dumps(status).replace("Infinity", "1e999")
    rd = _run_with_status(_isolated_home, text.encode())
    _one_line_error(capsys, ["status", "tiny-1"], str(rd.status_path), expect)


def test_status_that_is_not_utf8_is_one_line(
    _isolated_home: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    rd = _run_with_status(_isolated_home, b'{"state": "runn\xffing"}')
    _one_line_error(capsys, ["status", "tiny-1"], str(rd.status_path), "is not UTF-8")


def test_the_runs_screen_skips_a_damaged_status(_isolated_home: Path) -> None:
    from gpucost.tui.screens.runs import read_runs

    _run_with_status(_isolated_home, b'{"state": "running", "epoch": "x"}')
    good = RunDir(_isolated_home / "runs" / "tiny-2").create()
    good.write_status({"state": "running", "epoch": 1})
    assert [r.run_id for r in read_runs()] == ["tiny-2"]


def test_metrics_history_refuses_a_damaged_line_but_skips_a_cut_last_one(tmp_path: Path) -> None:
    rd = RunDir(tmp_path).create()
    good = json.dumps({"time": 1.0, "epoch": 1, "metrics": {"loss": 0.5}})
    rd.metrics_path.write_text(good + "\n" + '{"time": 2.0, "epo')
    assert [m["epoch"] for m in rd.metrics()] == [1]
    rd.metrics_path.write_text(good + "\n" + json.dumps({"time": 2.0, "epoch": "two"}) + "\n")
    with pytest.raises(RunFileError, match=r"metrics.jsonl line 2: epoch should be a valid num"):
        rd.metrics()
    rd.progress_path.write_text('{"time": 1.0, "throughput": [1]}')
    assert rd.read_progress() is None  # the launcher carries on; the next report replaces it


TRAINING_LOOP = """
import math, sys, torch, gpucost
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(64, 4), torch.randn(64, 1)
for epoch in range(1, 4):
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    gpucost.report(epoch=epoch, throughput=float("nan") if epoch < 3 else 640.0,
                   metrics={"loss": loss.detach(), "acc": "n/a", "ppl": math.inf,
                            "lr": torch.tensor(0.1)})
    gpucost.report(epoch=epoch, metrics=[("loss", 1.0)], throughput="fast")
print("trained", flush=True)
"""


@pytest.mark.slow
def test_report_never_raises_into_a_training_loop(tmp_path: Path) -> None:
    rd = RunDir(tmp_path / "run").create()
    script = tmp_path / "train.py"
    script.write_text(TRAINING_LOOP)
    env = {**os.environ, "GPUCOST_RUN_DIR": str(rd.path), "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "trained\n"
    warnings = done.stderr.splitlines()
    assert all(w.startswith("gpucost.report: warning: ") for w in warnings), done.stderr
    assert len(warnings) == 4, done.stderr  # throughput, metrics.acc, metrics.ppl, metrics
    history = rd.metrics_path.read_text()
    assert "NaN" not in history and "Infinity" not in history
    reports = rd.metrics()  # every line passes the run-file model
    assert [r["epoch"] for r in reports] == [1, 1, 2, 2, 3, 3]
    assert [r["throughput"] for r in reports] == [None, None, None, None, 640.0, None]
    assert set(reports[0]["metrics"]) == {"loss", "lr"} and reports[1]["metrics"] == {}
    assert rd.read_progress() == reports[-1]


def test_report_into_a_vanished_run_folder_warns_and_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    import gpucost

    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("GPUCOST_RUN_DIR", str(blocker / "run"))
    monkeypatch.setattr(reporting, "_warned", set())
    for epoch in (1, 2):
        gpucost.report(epoch=epoch, metrics={"loss": 0.1})
    err = capsys.readouterr().err
    assert err.count("gpucost.report: warning: progress not recorded") == 1, err


# ---- the state folder --------------------------------------------------------------------------
def _unusable_homes(tmp_path: Path) -> list[tuple[str, str]]:
    """(GPUCOST_HOME, the path the message must name). Tests run as root, which ignores mode
    bits: a file, /dev/null and a path under a file are what root cannot write either."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    return [(os.devnull, os.devnull), (str(blocker), str(blocker)),
            (str(blocker / "home"), str(blocker))]


@pytest.mark.parametrize("argv", [["ps"], ["status", "x"], ["cleanup"], ["down", "--all"],
                                  ["launch", str(EXAMPLES / "plan.toml")],
                                  ["prices", "import", "skypilot-catalog",
                                   str(REPO_ROOT / "tests" / "fixtures" / "skypilot" / "flat")]])
def test_an_unusable_state_folder_is_one_line_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    argv: list[str],
) -> None:
    for home, named in _unusable_homes(tmp_path):
        monkeypatch.setenv("GPUCOST_HOME", home)
        _one_line_error(capsys, argv, f"state folder cannot be used: {named} is not a folder",
                        "point GPUCOST_HOME at a folder you can write to")


def test_a_home_that_cannot_hold_the_state_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("GPUCOST_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "a-file"))
    (tmp_path / "a-file").write_text("")
    _one_line_error(capsys, ["ps"], f"{tmp_path / 'a-file'} is not a folder",
                    "or set GPUCOST_HOME to a folder you can write to")
    if Path("/sys").is_dir():  # sysfs refuses mkdir even to root
        monkeypatch.setenv("GPUCOST_HOME", "/sys/gpucost-test")
        _one_line_error(capsys, ["ps"], "/sys does not let gpucost create /sys/gpucost-test")


def test_a_ledger_that_is_not_a_file_is_one_line(
    _isolated_home: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    (_isolated_home / "ledger.sqlite").mkdir()
    _one_line_error(capsys, ["ps"], f"{_isolated_home / 'ledger.sqlite'} is not a regular file",
                    "move it aside")


@pytest.mark.parametrize("argv", [
    ["compare"],
    ["predict", "-p", "resnet50-v100-amp", "--gpu", "A100"],
    ["scale", "-p", "resnet50-v100-amp", "--gpu", "A100", "-N", "4"],
    ["explain", str(EXAMPLES / "plan.toml")],
    ["breakeven", "--running-hr", "3.4", "--disk-gb", "250", "--gb-month", "0.2",
     "--setup-min", "15"],
])
def test_commands_that_only_read_need_no_state_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    argv: list[str],
) -> None:
    for home, _ in _unusable_homes(tmp_path):
        monkeypatch.setenv("GPUCOST_HOME", home)
        assert main(argv) == 0, capsys.readouterr().err
        assert capsys.readouterr().out


# ---- preflight reads the entry script only inside the workdir ----------------------------------
def _main_guard(capsys: pytest.CaptureFixture[str], plan: Path) -> dict[str, Any]:
    main(["preflight", str(plan), "--format", "json"])
    checks = json.loads(capsys.readouterr().out)["checks"]
    found: dict[str, Any] = next(c for c in checks if c["id"] == "main-guard")
    return found


def test_an_entry_script_outside_the_workdir_is_not_read(
    tmp_path: Path, plan_doc: dict[str, Any], capsys: pytest.CaptureFixture[str],
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    secret = tmp_path / "credentials"
    (work / "link.py").symlink_to(secret)
    answers = []
    for entry in (str(secret), "../credentials", "link.py"):
        plan_doc["job"]["entry_script"] = entry
        plan = _write_plan(work, plan_doc)
        for content in ("[default]\naws_secret_access_key = x\n", "x = 1\n", None):
            if content is None:
                secret.unlink()
            else:
                secret.write_text(content)
            result = _main_guard(capsys, plan)
            assert result["status"] == "fail" and result["exit_code"] == 2, result
            assert "outside the plan's workdir" in result["message"]
            answers.append({k: v for k, v in result.items() if k != "message"})
    assert all(a == answers[0] for a in answers)  # parses, does not parse, absent: one answer
    plan_doc["job"]["entry_script"] = "train_tiny.py"
    assert _main_guard(capsys, _write_plan(work, plan_doc))["status"] == "pass"


def test_the_published_run_file_schemas_match_the_models() -> None:
    from goldens import UPDATE_ENV, updating

    from gpucost.executor.runfiles import json_schemas

    folder = REPO_ROOT / "docs" / "schemas"
    for name, text in json_schemas().items():
        if updating():
            (folder / name).write_text(text)
        assert (folder / name).read_text() == text, f"rerun with {UPDATE_ENV}=1"


def test_a_status_the_launcher_writes_passes_the_published_schema(tmp_path: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((REPO_ROOT / "docs" / "schemas" / "run-status.schema.json").read_text())
    rd = RunDir(tmp_path).create()
    rd.write_status({"run_id": "r", "state": "running", "epoch": 1, "epochs": 2.0,
                     "metrics": {"loss": 0.5}, "verify": {"deviation_pct": -3.0,
                                                          "within_margin": True}})
    status = rd.read_status()
    assert status is not None
    jsonschema.validate(status.document(), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**status.document(), "metrics": {"loss": "low"}}, schema)


def test_a_status_without_a_state_is_shown(
    _isolated_home: Path, capsys: pytest.CaptureFixture[str],
) -> None:  # found by the fuzz suite: a KeyError
    _run_with_status(_isolated_home, b'{"epoch": 1}')
    assert main(["status", "tiny-1"]) == 0
    assert "epoch     1" in capsys.readouterr().out


def test_a_deeply_nested_measurement_store_is_one_line(
    _isolated_home: Path, capsys: pytest.CaptureFixture[str],
) -> None:  # found while adding the store to the fuzz suite: a RecursionError
    (_isolated_home / "measurements.json").write_text(
        '{"format": "gpucost-measurements", "version": 1, "measurements": '
        + "[" * 100_000 + "]" * 100_000 + "}")
    # a damaged store is moved aside (nothing deleted) in one warning line; the command goes on
    assert main(["calibrate", "list"]) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nested deeper than 32" in err and "moved aside" in err
    assert not (_isolated_home / "measurements.json").exists()
    assert list(_isolated_home.glob("measurements.json.damaged-*"))


def _ledger_with(home: Path, run_values: str) -> None:
    """A ledger whose runs table has gpucost's columns but not its constraints, holding one
    row as a damaged page can read back."""
    import sqlite3

    from gpucost.executor.ledger import _COLUMNS, _SCHEMA

    db = sqlite3.connect(home / "ledger.sqlite")
    db.execute(f"CREATE TABLE runs ({', '.join(sorted(_COLUMNS['runs']))})")
    db.executescript(_SCHEMA)
    columns = ", ".join(sorted(_COLUMNS["runs"]))
    db.execute(f"INSERT INTO runs ({columns}) VALUES ({run_values})")
    db.commit()
    db.close()


@pytest.mark.parametrize(("values", "expect"), [
    # budget_cap_usd, ended_at, launcher_pid, launcher_start, name, nodes, plan_path, price_hr,
    # provider, run_dir, run_id, started_at, state
    ("1.0, NULL, 1, '1:?', 'x', 1, 'p', 0.1, 'local', 'r', 'r1', NULL, 'running'",
     "a RunRow row holds started_at = 'None'"),
    ("1.0, NULL, 1, '1:?', 'x', 'two', 'p', 0.1, 'local', 'r', 'r1', 1.0, 'running'",
     "a RunRow row holds nodes = 'two'"),
])
def test_a_ledger_row_of_the_wrong_types_is_one_line(
    _isolated_home: Path, capsys: pytest.CaptureFixture[str], values: str, expect: str,
) -> None:  # found by the fuzz suite: TypeError and UnicodeDecodeError tracebacks
    _ledger_with(_isolated_home, values)
    _one_line_error(capsys, ["ps", "--all"], "ledger.sqlite is unreadable", expect)


def test_a_ledger_whose_schema_is_not_utf8_is_one_line(
    _isolated_home: Path, capsys: pytest.CaptureFixture[str],
) -> None:  # found by the fuzz suite: a UnicodeDecodeError traceback
    import sqlite3

    path = _isolated_home / "ledger.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE runs (zzzz)")
    db.commit()
    db.close()
    # SQLite's own message about the broken schema then quotes bytes that are not UTF-8.
    path.write_bytes(path.read_bytes().replace(b"zzzz)", b"'\x80\xff  "))
    _one_line_error(capsys, ["ps"], "ledger.sqlite is unreadable",
                    "it holds text that is not UTF-8")


@pytest.mark.parametrize(("field", "value"), [("batch_size", 2**63), ("device_count", 2**63)])
def test_an_impossible_batch_or_device_count_is_one_line_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str, value: int) -> None:
    """The fuzz suite's find: batch_size 2**63 made compare exit 3 with "internal error:
    OverflowError" (numpy's integers in the ranking)."""
    body = json.loads((REPO_ROOT / "profiles" / "resnet50-v100-amp.json").read_text())
    (tmp_path / "p.json").write_text(json.dumps({**body, field: value}))
    for argv in (["compare", "-p", str(tmp_path / "p.json"), "-n", "3"],
                 ["predict", "-p", str(tmp_path / "p.json"), "--gpu", "A100"]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"{field} must be a positive integer" in err, err
