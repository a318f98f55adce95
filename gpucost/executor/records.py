"""A run's record as every view tells it: its state, last epoch and checkpoint.

`gpucost status`, `ps --all`, `cleanup` (and the guard, when it writes an end its launcher could
not) and the TUI's runs screen all read a run through :func:`reconcile`, so they cannot
disagree. Three sources, each the authority for its part:

- the ledger, for whether the run has ended and how (its launcher, the guard, the watchdog,
  `cleanup` and `down` all end a run there first) and whether its launcher lives;
- status.json, for a live run's state between ledger writes (provisioning, verifying,
  running), its cost, ETA and warnings as the launcher last saw them;
- the job's own reports (progress.json, metrics.jsonl) and the checkpoints on disk, for the
  last epoch, metrics, throughput and checkpoint. status.json copies them at each of the
  launcher's polls: a launcher killed between two polls leaves it behind the job (the run
  ended at epoch 2 while status.json said epoch 1 and its checkpoint).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpucost.executor.ledger import RunRow
from gpucost.executor.rundir import RunDir
from gpucost.executor.runfiles import RunFileError, RunStatusFile


@dataclass(frozen=True)
class RunRecord:
    run_id: str
    state: str  # what every view shows
    final: bool  # the run has ended
    launcher_alive: bool | None  # None: the run is not in the ledger
    status: RunStatusFile  # status.json with the state, the end and the reports folded in


def reconcile(run: RunRow | None, rundir: RunDir, status: RunStatusFile | None) -> RunRecord:
    """The record of the run in ``rundir`` from its ledger row (None: the ledger does not know
    it, and status.json is all there is) and its status.json as read (None: absent)."""
    status = with_reports(status or RunStatusFile(), rundir)
    run_id = run.run_id if run is not None else status.run_id or rundir.path.name
    if run is None:
        state, final, alive = status.state or "unknown", status.final, None
    elif run.ended_at is not None:
        state, final, alive = run.state, True, run.owner_alive
    elif run.owner_alive:
        state, final, alive = status.state or run.state, False, True
    else:  # neither its launcher nor anyone after it has recorded an end
        state = f"orphaned (was {status.state or run.state}; launcher gone)"
        final, alive = False, False
    status = status.replaced(state=state, final=final, **({"eta_s": None} if final else {}))
    return RunRecord(run_id, state, final, alive, status)


def read_record(run: RunRow, *, damaged_status_ok: bool = False) -> RunRecord:
    """:func:`reconcile` of a run in the ledger, reading its folder. A damaged status.json is
    a RunFileError, or with ``damaged_status_ok`` read as absent (a listing of every run goes
    on; `gpucost status RUN` names the damage)."""
    rundir = RunDir(run.run_dir)
    try:
        status = rundir.read_status()
    except RunFileError:
        if not damaged_status_ok:
            raise
        status = None
    return reconcile(run, rundir, status)


def with_reports(status: RunStatusFile, rundir: RunDir) -> RunStatusFile:
    """``status`` with the epoch, metrics and throughput of the job's last report and the
    newest checkpoint it shipped that is still there, else the newest it named (unchanged
    where the job reported none)."""
    report, checkpoint = job_position(rundir, status.checkpoint)
    return status.replaced(**report_fields(report), checkpoint=checkpoint)


def report_fields(report: dict[str, Any] | None) -> dict[str, Any]:
    """What status.json copies from the job's report: its epoch, metrics and throughput
    (nothing when it made none)."""
    if report is None:
        return {}
    return {"epoch": report.get("epoch"), "metrics": report.get("metrics") or {},
            "throughput": report.get("throughput")}


def job_position(rundir: RunDir, named_before: str | None
                 ) -> tuple[dict[str, Any] | None, str | None]:
    """The job's last report (None: it made none) and the checkpoint to resume from: the
    newest it shipped that is still there, else the newest it named, else ``named_before``
    (what status.json last said)."""
    report, history = _last_report(rundir)
    candidates = [report.get("checkpoint") if report else None]
    if not _present(candidates[0]):
        history = history if history is not None else _reports(rundir)
        candidates += [r.get("checkpoint") for r in reversed(history)]
    candidates.append(named_before)
    named = [c for c in candidates if isinstance(c, str) and c]
    # The newest still on disk; where none can be found here (a cloud node's own disk), the
    # newest the job named, at its word.
    return report, next((c for c in named if _present(c)), named[0] if named else None)


def _last_report(rundir: RunDir) -> tuple[dict[str, Any] | None, list[dict[str, Any]] | None]:
    """progress.json (the job's last report), else the last line of metrics.jsonl (a damaged
    or missing progress.json); with the history when it had to be read."""
    if (progress := rundir.read_progress()) is not None:
        return progress, None
    history = _reports(rundir)
    return (history[-1] if history else None), history


def _reports(rundir: RunDir) -> list[dict[str, Any]]:
    try:
        return rundir.metrics()
    except RunFileError:  # a damaged history: the last report and status.json remain
        return []


def _present(checkpoint: Any) -> bool:
    """A checkpoint named, and on disk where it is a local file (an s3:// or other location
    cannot be checked from here, and is taken at its word)."""
    if not isinstance(checkpoint, str) or not checkpoint:
        return False
    path = Path(checkpoint)
    try:
        return not path.is_absolute() or path.is_file()
    except (OSError, ValueError):  # a name no file system holds (too long, a NUL in it)
        return False
