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
from gpucost.executor.runfiles import RunFileError


@dataclass(frozen=True)
class RunRecord:
    run_id: str
    state: str  # what every view shows
    final: bool  # the run has ended
    launcher_alive: bool | None  # None: the run is not in the ledger
    status: dict[str, Any]  # status.json with the state, the end and the reports folded in

    @property
    def epoch(self) -> float | None:
        epoch = self.status.get("epoch")
        return float(epoch) if isinstance(epoch, int | float) else None

    @property
    def epochs(self) -> float | None:
        epochs = self.status.get("epochs")
        return float(epochs) if isinstance(epochs, int | float) else None

    @property
    def checkpoint(self) -> str | None:
        checkpoint = self.status.get("checkpoint")
        return checkpoint if isinstance(checkpoint, str) else None


def reconcile(run: RunRow | None, rundir: RunDir, status: dict[str, Any] | None) -> RunRecord:
    """The record of the run in ``rundir`` from its ledger row (None: the ledger does not know
    it, and status.json is all there is) and its status.json as read (None: absent)."""
    status = with_reports(dict(status or {}), rundir)
    run_id = run.run_id if run is not None else str(status.get("run_id") or rundir.path.name)
    if run is None:
        state, final, alive = str(status.get("state") or "unknown"), bool(status.get("final")), None
    elif run.ended_at is not None:
        state, final, alive = run.state, True, run.owner_alive
    elif run.owner_alive:
        state, final, alive = str(status.get("state") or run.state), False, True
    else:  # neither its launcher nor anyone after it has recorded an end
        state = f"orphaned (was {status.get('state') or run.state}; launcher gone)"
        final, alive = False, False
    status.update(state=state, final=final)
    if final:
        status["eta_s"] = None
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


def with_reports(status: dict[str, Any], rundir: RunDir) -> dict[str, Any]:
    """``status`` with the epoch, metrics and throughput of the job's last report and the
    newest checkpoint it shipped that is still there, else the newest it named (unchanged
    where the job reported none)."""
    report, history = _last_report(rundir)
    if report is not None:
        status.update(epoch=report.get("epoch"), metrics=report.get("metrics") or {},
                      throughput=report.get("throughput"))
    candidates = [report.get("checkpoint") if report else None]
    if not _present(candidates[0]):
        history = history if history is not None else _reports(rundir)
        candidates += [r.get("checkpoint") for r in reversed(history)]
    candidates.append(status.get("checkpoint"))
    named = [c for c in candidates if isinstance(c, str) and c]
    # The newest still on disk; where none can be found here (a cloud node's own disk), the
    # newest the job named, at its word.
    status["checkpoint"] = next((c for c in named if _present(c)), named[0] if named else None)
    return status


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
