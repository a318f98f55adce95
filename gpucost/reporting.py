"""``gpucost.report(...)``: how a training script tells the launcher where it is.

Call it once per epoch (rank 0 only is recorded)::

    gpucost.report(epoch=3, metrics={"loss": 0.41}, throughput=1840.0, checkpoint="ckpt.pt")

Inside a gpucost run (``GPUCOST_RUN_DIR`` set by the launcher) it appends the report to
``metrics.jsonl``, replaces ``progress.json`` atomically and, when the plan asks for it every N
epochs, ships ``checkpoint`` to the plan's checkpoint target (local folder or S3). Outside a run
it does nothing and costs a dictionary lookup, so scripts can call it unconditionally.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

RUN_DIR_ENV = "GPUCOST_RUN_DIR"


def report(*, epoch: int | None = None, metrics: Mapping[str, float] | None = None,
           checkpoint: str | os.PathLike[str] | None = None,
           throughput: float | None = None) -> None:
    """Record progress. ``throughput`` is samples/s over all processes for the last epoch."""
    run_dir = os.environ.get(RUN_DIR_ENV)
    if not run_dir or os.environ.get("RANK", "0") != "0":
        return
    from gpucost._io import atomic_write_json
    from gpucost.executor.rundir import RunDir, append_line

    rd = RunDir(run_dir)
    shipped = None
    if checkpoint is not None and epoch is not None:
        shipped = _ship(Path(checkpoint), epoch)
    entry: dict[str, Any] = {
        "time": time.time(),
        "epoch": epoch,
        "metrics": {k: float(v) for k, v in (metrics or {}).items()
                    if math.isfinite(float(v))},
        "throughput": throughput,
        "checkpoint": shipped,
    }
    append_line(rd.metrics_path, json.dumps(entry))
    atomic_write_json(rd.progress_path, entry)


def _ship(path: Path, epoch: int) -> str | None:
    every = float(os.environ.get("GPUCOST_CHECKPOINT_EVERY", "1") or 1)
    if not os.environ.get("GPUCOST_CHECKPOINT_TARGET") or epoch % max(1, round(every)) != 0:
        return None
    from gpucost.executor.checkpoints import CheckpointStore

    return CheckpointStore.from_env().ship(path, epoch)
