"""A run's folder under $GPUCOST_HOME/runs/<run id>: what outsiders read to follow a run.

    status.json    state, epoch, ETA, cost so far, latest metrics (rewritten atomically by the
                   launcher on every poll, so at least once per epoch)
    progress.json  the training script's latest report (written atomically by gpucost.report)
    metrics.jsonl  one JSON line per report: the history
    train.log      the job's stdout and stderr
    launcher.log   what the launcher decided and why (verify-on-arrival, teardown, ...)

Readers never see half a file: JSON files are replaced through a rename, JSONL lines are
appended with one write each.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpucost import paths
from gpucost._io import atomic_write_json
from gpucost.errors import ExecutorError
from gpucost.executor import runfiles


class RunDir:
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    @classmethod
    def for_run(cls, run_id: str) -> RunDir:
        return cls(paths.runs_dir() / run_id)

    @property
    def status_path(self) -> Path:
        return self.path / "status.json"

    @property
    def progress_path(self) -> Path:
        return self.path / "progress.json"

    @property
    def metrics_path(self) -> Path:
        return self.path / "metrics.jsonl"

    @property
    def log_path(self) -> Path:
        return self.path / "train.log"

    @property
    def launcher_log_path(self) -> Path:
        return self.path / "launcher.log"

    @property
    def stop_request_path(self) -> Path:
        """Present when `gpucost stop` asks the run's launcher to stop the job."""
        return self.path / "stop-requested"

    @property
    def scratch_checkpoints(self) -> Path:
        """Where the job writes checkpoints before they are shipped to the plan's target."""
        return self.path / "checkpoints"

    def create(self) -> RunDir:
        paths.writable_dir(self.path)
        self.scratch_checkpoints.mkdir(exist_ok=True)
        for log in (self.log_path, self.launcher_log_path):
            if log.is_symlink():  # planted in a reused run folder: its target is outside it
                raise ExecutorError(f"{log} is a symbolic link; a run writes its logs only "
                                    "inside its run folder", hint="remove the link and launch "
                                    "again")
        os.close(os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o644))
        return self

    def write_status(self, status: runfiles.RunStatusFile | Mapping[str, Any]) -> None:
        """Replace status.json: a status read and changed (the guard, a view's end), or the
        launcher's poll, which assembles the document whole from the plan and the job."""
        document = status.document() if isinstance(status, runfiles.RunStatusFile) else status
        atomic_write_json(self.status_path, {**document, "updated_at": time.time()})

    def read_status(self) -> runfiles.RunStatusFile | None:
        """status.json, checked (RunFileError when damaged); None before the first write."""
        return runfiles.read_status(self.status_path)

    def read_progress(self) -> dict[str, Any] | None:
        """The latest report, checked; None when there is none or it is damaged (the
        launcher keeps supervising: the next report replaces it)."""
        try:
            return runfiles.read_report(self.progress_path)
        except runfiles.RunFileError:
            return None

    def metrics(self) -> list[dict[str, Any]]:
        """Every report so far, checked (RunFileError when a line is damaged)."""
        return runfiles.read_reports(self.metrics_path)

    def note(self, message: str) -> None:
        append_line(self.launcher_log_path,
                    time.strftime("%Y-%m-%dT%H:%M:%SZ ", time.gmtime()) + message)


def append_line(path: Path, line: str) -> None:
    """Append one line with a single write(2) on an O_APPEND descriptor (never interleaved)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        os.write(fd, (line.rstrip("\n") + "\n").encode("utf-8"))
    finally:
        os.close(fd)
