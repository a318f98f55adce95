"""``gpucost.report(...)``: how a training script tells the launcher where it is.

Call it once per epoch (rank 0 only is recorded)::

    gpucost.report(epoch=3, metrics={"loss": 0.41}, throughput=1840.0, checkpoint="ckpt.pt")

Inside a gpucost run (``GPUCOST_RUN_DIR`` set by the launcher) it appends the report to
``metrics.jsonl``, replaces ``progress.json`` atomically and, when the plan asks for it every N
epochs, ships ``checkpoint`` to the plan's checkpoint target (local folder or S3). Outside a run
it does nothing and costs a dictionary lookup, so scripts can call it unconditionally.
Under SkyPilot (``GPUCOST_REPORT_TO_LOG=1``, set by the task) each report is also printed to
stdout as one marker line (:mod:`gpucost.executor.markers`): the log streams home, the node's
run folder does not.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpucost._io import atomic_write_json
from gpucost.executor.checkpoints import CheckpointStore
from gpucost.executor.markers import MARKER_ENV, format_marker
from gpucost.executor.rundir import RunDir, append_line
from gpucost.executor.runfiles import Report, problem

RUN_DIR_ENV = "GPUCOST_RUN_DIR"

_warned: set[str] = set()


def report(*, epoch: int | None = None, metrics: Mapping[str, float] | None = None,
           checkpoint: str | os.PathLike[str] | None = None,
           throughput: float | None = None) -> None:
    """Record progress. ``throughput`` is samples/s over all processes for the last epoch.

    It never raises into the training loop: a value that is not a finite number (NaN, a
    string, a list) is dropped with a warning on stderr, once per field, and a report that
    cannot be written (a full disk, a vanished run folder) is a warning too.
    """
    run_dir = os.environ.get(RUN_DIR_ENV)
    if not run_dir or os.environ.get("RANK", "0") != "0":
        return
    try:
        _record(Path(run_dir), epoch, metrics, checkpoint, throughput)
    except Exception as err:  # the training must go on; say why, once per kind of failure
        _warn_once(type(err).__name__, f"progress not recorded ({type(err).__name__}: {err})")


def _record(run_dir: Path, epoch: Any, metrics: Any, checkpoint: Any, throughput: Any) -> None:
    if metrics is not None and not isinstance(metrics, Mapping):
        _warn_once("metrics", f"metrics must be a mapping of name to number, got "
                              f"{type(metrics).__name__}: dropped")
        metrics = None
    entry: dict[str, Any] = {
        "time": time.time(),
        "epoch": _number(epoch),
        "metrics": {str(k): _number(v) for k, v in (metrics or {}).items()},
        "throughput": _number(throughput),
        "checkpoint": None,
    }
    # The run-file model is the one rule for what a report may hold: drop what it refuses.
    # Each turn drops one value (to None, which every field but time and metrics allows), so
    # the loop ends.
    while (found := problem(Report, entry)) is not None:
        loc, expected = found
        where = ".".join(map(str, loc))
        _warn_once(where, f"{where} {expected}: dropped")
        if loc[0] == "metrics" and len(loc) > 1:
            del entry["metrics"][loc[1]]
        else:
            entry[str(loc[0])] = {} if loc[0] == "metrics" else None
    if checkpoint is not None and entry["epoch"] is not None:
        try:
            entry["checkpoint"] = _ship(Path(checkpoint), entry["epoch"])
        except Exception as err:  # the report is still worth recording
            _warn_once("checkpoint", f"checkpoint not shipped ({type(err).__name__}: {err})")
    write_report(run_dir, entry)

    if os.environ.get(MARKER_ENV) == "1":
        print(format_marker(entry), flush=True)


def write_report(run_dir: Path, entry: Mapping[str, Any]) -> None:
    """Append one checked report to the run folder's metrics.jsonl and make it progress.json:
    the job does it on its node, the SkyPilot launcher for each marker its log brings home."""
    rd = RunDir(run_dir)
    append_line(rd.metrics_path, json.dumps(entry, allow_nan=False))
    atomic_write_json(rd.progress_path, dict(entry))


def _number(value: Any) -> Any:
    """A float from anything that is one (numpy scalars, 0-d tensors); anything else as is,
    for the model to refuse by name."""
    if isinstance(value, bool | str | bytes | int) or value is None:
        return value  # an epoch of 2 stays 2
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return value


def _warn_once(key: str, message: str) -> None:
    if key in _warned:
        return
    _warned.add(key)
    with contextlib.suppress(OSError, ValueError):  # stderr closed: nothing more to say
        print(f"gpucost.report: warning: {message} (warned once)", file=sys.stderr, flush=True)


def _ship(path: Path, epoch: float) -> str | None:
    every = float(os.environ.get("GPUCOST_CHECKPOINT_EVERY", "1") or 1)
    if not os.environ.get("GPUCOST_CHECKPOINT_TARGET") or epoch % max(1, round(every)) != 0:
        return None

    return CheckpointStore.from_env().ship(path, int(epoch))
