"""State a job or a file can poison (issue 22): measurements the planner learns from, plan
numbers the launch would crash on, ledger errors whose advice would throw the ledger away, and
the Python API answering what the CLI answers."""

from __future__ import annotations

import json
import shutil
import sqlite3
import tomllib
from pathlib import Path
from typing import Any

import pytest
import tomli_w

import gpucost
from gpucost import measurement_store, measurements
from gpucost.cli import main
from gpucost.errors import InputError
from gpucost.executor.ledger import Ledger, LedgerError
from gpucost.profile import resolve_profile

WORKLOAD = "resnet50-v100-amp"  # an embedded example: measured on a V100 at batch 256, amp
ROOT = Path(__file__).resolve().parents[1]
LOCAL_PLAN = ROOT / "examples" / "plan.toml"  # runs examples/train_tiny.py on this machine
AWS_PLAN = ROOT / "tests" / "fixtures" / "preflight" / "good.toml"


def test_the_python_api_predicts_what_the_cli_does_between_nodes(
        capsys: pytest.CaptureFixture[str]) -> None:
    """`gpucost predict` assumes TCP between nodes (no offer publishes this group's fabric);
    gpucost.predict took the model's RDMA default and answered the same question faster."""
    assert main(["predict", "-p", WORKLOAD, "--gpu", "T4", "-n", "4", "--format", "json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    assert cli["inter_node_transport"] == "tcp"
    api = gpucost.predict(resolve_profile(WORKLOAD), gpu="T4", nodes=4)
    assert api.throughput == pytest.approx(cli["throughput"], rel=1e-12)
    # naming the transport still works, and RDMA is faster: the default is the CLI's, not it
    rdma = gpucost.predict(resolve_profile(WORKLOAD), gpu="T4", nodes=4,
                           inter_node_transport="rdma")
    assert rdma.throughput > api.throughput


# ---- plan numbers the launch would crash on ---------------------------------------------------
DOORS = [["explain"], ["preflight", "--today", "2026-11-30", "--format", "json"],
         ["launch", "--dry-run"], ["launch"]]


@pytest.mark.parametrize(("plan", "section", "key", "allowed"), [
    (LOCAL_PLAN, "job", "epochs", "allowed: > 0 and <= 1e+06"),  # ran epoch 1, then inf
    (LOCAL_PLAN, "safety", "timeout_hours", "allowed: > 0 and <= 87600"),  # crashed the launch
    (AWS_PLAN, "safety", "timeout_hours", "allowed: > 0 and <= 87600"),  # overflowed the dry run
])
@pytest.mark.parametrize("door", DOORS, ids=" ".join)
def test_every_door_refuses_a_plan_number_past_its_bound(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], _isolated_home: Path,
        plan: Path, section: str, key: str, allowed: str, door: list[str]) -> None:
    if plan == AWS_PLAN and door == ["launch"]:
        pytest.skip("a real AWS launch is not tried here; its dry run is")
    doc: dict[str, Any] = tomllib.loads(plan.read_text())
    doc[section][key] = 1e308
    shutil.copy(ROOT / "examples" / "train_tiny.py", tmp_path / "train_tiny.py")
    path = tmp_path / "plan.toml"
    path.write_text(tomli_w.dumps(doc))
    code = main([*door, str(path)])
    out, err = capsys.readouterr()
    assert code == 2, err
    if door[0] == "preflight":  # a report: the plan-file check fails with the same line
        check, = json.loads(out)["checks"]
        assert check["id"] == "plan-file" and check["status"] == "fail"
        err = f"gpucost: error: {check['message']} ({check['fix']})\n"
    assert err.count("\n") == 1 and err.startswith("gpucost: error: "), err
    assert f"[{section}] {key} = 1e+308 is out of range" in err and allowed in err, err
    assert not (_isolated_home / "runs").exists()  # nothing ran


# ---- ledger errors that are not a damaged ledger ----------------------------------------------
def _one_run(ledger: Ledger, run_id: str) -> None:
    ledger.create_run(run_id=run_id, name="tiny", plan_path="plan.toml", provider="local",
                      run_dir=f"/tmp/{run_id}", price_hr=0.01, nodes=1, budget_cap_usd=1.0)


class _FullDisk:
    """A connection on a full disk: reads work, every write fails as SQLite says it."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        if sql.lstrip().upper().startswith(("INSERT", "UPDATE")):
            raise sqlite3.OperationalError("database or disk is full")
        return self._db.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)

    def __setattr__(self, name: str, value: Any) -> None:  # row_factory is the connection's
        if name == "_db":
            object.__setattr__(self, name, value)
        else:
            setattr(self._db, name, value)


def test_a_full_disk_says_so_and_keeps_the_ledger(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        tmp_path: Path) -> None:
    with Ledger() as ledger:
        _one_run(ledger, "kept-1")
    shutil.copy(ROOT / "examples" / "train_tiny.py", tmp_path / "train_tiny.py")
    shutil.copy(LOCAL_PLAN, tmp_path / "plan.toml")
    connect = sqlite3.connect
    with monkeypatch.context() as full:
        full.setattr(sqlite3, "connect", lambda *a, **k: _FullDisk(connect(*a, **k)))
        with Ledger() as ledger, pytest.raises(LedgerError) as caught:
            _one_run(ledger, "new-1")
        text = str(caught.value)
        assert "disk holding the ledger" in text and "is full" in text
        assert "free some space" in text and "move it aside with" not in text
        # the same through a launch: one line, exit 2, no advice to throw the ledger away
        assert main(["launch", str(tmp_path / "plan.toml")]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "is full" in err and "mv " not in err, err
    with Ledger() as ledger:  # what it recorded is all there
        assert [r.run_id for r in ledger.runs()] == ["kept-1"]


def test_a_reused_run_id_says_so_and_keeps_the_ledger() -> None:
    with Ledger() as ledger:
        _one_run(ledger, "run-7")
        with pytest.raises(LedgerError) as caught:
            _one_run(ledger, "run-7")
        text = str(caught.value)
        assert "run id 'run-7' is already in the ledger" in text
        assert "gpucost status run-7" in text and "mv " not in text
        assert [r.run_id for r in ledger.runs()] == ["run-7"]


def test_only_a_damaged_ledger_is_told_to_be_moved_aside(_isolated_home: Path) -> None:
    with Ledger() as ledger:
        path = ledger.path
    path.write_bytes(b"not a database, just bytes" * 100)
    with pytest.raises(LedgerError, match=r"is unreadable .*move it aside with `mv "):
        Ledger()


# ---- measurements the planner learns from ------------------------------------------------------
def _bad(rid: str, throughput: float) -> dict[str, Any]:
    return {"id": rid, "workload": WORKLOAD, "gpu": "A100 SXM4 40GB", "precision": "amp",
            "batch_size": 256, "device_count": 1, "throughput": throughput,
            "source": "on-arrival", "recorded_at": "2026-11-30T20:00:00Z"}


def test_an_impossible_throughput_is_refused_at_the_door(
        capsys: pytest.CaptureFixture[str]) -> None:
    """gpucost.report(throughput=1e300) on arrival was stored and priced ResNet-50 at $0.08."""
    assert measurements.record(workload=WORKLOAD, gpu="A100 SXM4 40GB", precision="amp",
                               batch_size=256, device_count=1, throughput=1e300,
                               source="on-arrival") is None
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "measurement refused" in err and "1e+300" in err, err
    assert not measurements.store_path().exists()
    # with the workload's flops known, over twice the GPU's peak is refused too
    flops = resolve_profile(WORKLOAD).flops_per_sample
    assert flops
    assert measurements.record(workload=WORKLOAD, gpu="A100 SXM4 40GB", precision="amp",
                               batch_size=256, device_count=1, throughput=2.1 * 312e12 / flops,
                               source="profile", flops_per_sample=flops) is None
    assert "the peak of 1 x A100 SXM4 40GB" in capsys.readouterr().err
    with pytest.raises(InputError):  # exit 2 where it is asked for directly
        measurement_store._check(_bad("a", 1e300), "measurement")


def test_a_bad_stored_record_is_skipped_named_and_forgotten_alone(
        capsys: pytest.CaptureFixture[str]) -> None:
    good = measurements.record(workload=WORKLOAD, gpu="T4", precision="amp", batch_size=256,
                               device_count=1, throughput=250.0, source="profile")
    assert good is not None
    path = measurements.store_path()
    doc = json.loads(path.read_text())
    doc["measurements"] += [_bad("deadbeef", 1e308), _bad("cafef00d", 1e300)]
    path.write_text(json.dumps(doc))
    capsys.readouterr()
    # compare ran and priced with them; now each is skipped with one line naming it
    assert main(["compare", "-p", WORKLOAD, "--gpu", "A100", "-n", "3"]) == 0
    err = capsys.readouterr().err
    for rid in ("deadbeef", "cafef00d"):
        line, = [x for x in err.splitlines() if rid in x]
        assert str(path) in line and f"gpucost calibrate forget {rid}" in line
    assert measurements.read_all() == (good,)
    assert main(["calibrate", "list"]) == 0
    assert "skipped deadbeef" in capsys.readouterr().out
    assert main(["calibrate", "forget", "deadbeef"]) == 0
    left = [r["id"] for r in json.loads(path.read_text())["measurements"]]
    assert left == [good.id, "cafef00d"]


def test_a_damaged_store_is_moved_aside_not_deleted(
        capsys: pytest.CaptureFixture[str]) -> None:
    path = measurements.store_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"format": "gpucost-measurements", "version": 1, "measurements": [')
    assert main(["calibrate", "list"]) == 0
    err = capsys.readouterr().err
    aside, = path.parent.glob("measurements.json.damaged-*")
    assert err.count("\n") == 1 and str(aside) in err and "nothing deleted" in err, err
    assert aside.read_text().endswith('"measurements": [') and not path.exists()
    assert measurements.record(workload=WORKLOAD, gpu="T4", precision="amp", batch_size=256,
                               device_count=1, throughput=250.0, source="profile") is not None
    assert len(measurements.read_all()) == 1  # a new store started
