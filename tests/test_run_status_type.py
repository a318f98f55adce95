"""status.json read once into its typed model (#24 item 2): every field by attribute with its
declared type, the file's own keys (and those of a newer launcher) kept as they were when it is
written back, and a wrong-typed field refused in one line that names the field and the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpucost.executor.records import reconcile
from gpucost.executor.rundir import RunDir
from gpucost.executor.runfiles import RunFileError, RunStatusFile, Verification

# What a launcher writes, with one field only a newer gpucost knows.
WRITTEN = {"run_id": "r-1", "name": "tiny", "state": "running", "provider": "local",
           "elapsed_s": 300.0, "cost_usd": 0.5, "budget_cap_usd": 2.0, "timeout_s": 3600.0,
           "epoch": 3, "epochs": 10, "eta_s": 754.0, "metrics": {"loss": 0.125},
           "throughput": 1843.2, "planned_throughput": 2000.0, "launcher_pid": 4242,
           "final": False, "checkpoint": "/ck/tiny/epoch-000003.pt",
           "verify": {"deviation_pct": -3.5, "within_margin": True},
           "budget_warning": None, "from_a_newer_launcher": {"zone": "b"}}


def test_a_status_file_reads_into_the_type_and_writes_back_the_same_keys(tmp_path: Path) -> None:
    rd = RunDir(tmp_path).create()
    rd.write_status(WRITTEN)
    status = rd.read_status()
    assert isinstance(status, RunStatusFile)
    assert (status.state, status.epoch, status.epochs, status.launcher_pid) == (
        "running", 3.0, 10.0, 4242)
    assert status.metrics == {"loss": 0.125} and status.final is False
    assert status.verify == Verification(deviation_pct=-3.5, within_margin=True)
    assert isinstance(status.updated_at, float)  # set by write_status
    on_disk = json.loads(rd.status_path.read_text())
    assert status.document() == on_disk  # no field added, the unknown one kept
    rd.write_status(status.replaced(state="succeeded", final=True))
    again = json.loads(rd.status_path.read_text())
    assert set(again) == set(on_disk)
    assert {k: v for k, v in again.items() if k not in ("state", "final", "updated_at")} == {
        k: v for k, v in on_disk.items() if k not in ("state", "final", "updated_at")}
    assert (again["state"], again["final"]) == ("succeeded", True)


def test_an_old_sparse_status_file_reads_with_defaults_and_keeps_its_shape(
        tmp_path: Path) -> None:
    rd = RunDir(tmp_path).create()
    rd.status_path.write_text('{"state": "running", "epoch": 1}')  # a launcher that died early
    status = rd.read_status()
    assert status is not None and (status.epoch, status.epochs, status.metrics) == (1.0, None, {})
    assert status.document() == {"state": "running", "epoch": 1.0}
    record = reconcile(None, rd, status)  # handed on as the type, the ends folded in
    assert (record.state, record.final, record.status.state) == ("running", False, "running")
    assert set(record.status.document()) == {"state", "epoch", "final", "checkpoint"}


@pytest.mark.parametrize(("body", "field"), [
    ({"state": "running", "epoch": "3"}, "epoch"),
    ({"state": "running", "final": "yes"}, "final"),
    ({"state": "running", "launcher_pid": 1.5}, "launcher_pid"),
    ({"state": "running", "verify": {"deviation_pct": 1.0, "within_margin": 1}},
     "verify.within_margin"),
])
def test_a_wrong_typed_field_is_refused_in_one_line_naming_it_and_the_file(
        tmp_path: Path, body: dict[str, object], field: str) -> None:
    rd = RunDir(tmp_path).create()
    rd.status_path.write_text(json.dumps(body))
    with pytest.raises(RunFileError) as caught:
        rd.read_status()
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{rd.status_path}: {field} should be"), message


def test_a_change_to_a_field_that_does_not_exist_is_refused() -> None:
    """It would otherwise be kept as a newer launcher's field and written to status.json."""
    with pytest.raises(TypeError, match=r"no field eta$"):
        RunStatusFile().replaced(eta=None)
