"""Reports carried home in the job's log: one marker line per ``gpucost.report()``.

A SkyPilot job writes its reports into a run folder on the node, which the launcher never sees;
the job's stdout, though, streams back into the local run folder's train.log. So under
SkyPilot (the task sets :data:`MARKER_ENV`) each report is also printed as one line::

    GPUCOST-METRIC {"time": 1767225600.0, "epoch": 3.0, "metrics": {"loss": 0.41}, ...}

holding the same document as a line of metrics.jsonl (:class:`~gpucost.executor.runfiles.Report`).
The launcher parses each streamed line with :func:`parse_marker`, which never raises: a line is
a report only if it is one JSON object the Report model accepts, with plausible numbers. Junk,
a line cut short, NaN or a throughput of 1e300 is not a report, and is left in train.log only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from gpucost._io import parse_json
from gpucost.errors import InputError
from gpucost.executor.runfiles import Report, problem
from gpucost.limits import MAX_EPOCHS

MARKER_ENV = "GPUCOST_REPORT_TO_LOG"
PREFIX = "GPUCOST-METRIC "
MAX_MARKER_BYTES = 4096  # a report with a few metrics is ~200 bytes
MAX_METRICS = 64
# Plausible bounds: 2000-01-01 .. 2100-01-01, and a throughput no machine reaches (an H100 does
# ~1e6 small images/s; the bound is a million times that).
MIN_TIME, MAX_TIME = 946_684_800.0, 4_102_444_800.0
MAX_THROUGHPUT = 1e12


def format_marker(report: Mapping[str, Any]) -> str:
    """The marker line (no newline) for one report document, at most MAX_MARKER_BYTES: what
    does not fit (many metrics, a long checkpoint path) is left out, throughput never."""
    doc = dict(report)
    metrics = dict(list((doc.get("metrics") or {}).items())[:MAX_METRICS])
    doc["metrics"] = metrics
    for drop in ("metrics", "checkpoint"):
        line = PREFIX + json.dumps(doc, allow_nan=False, separators=(",", ":"))
        if len(line.encode("utf-8")) <= MAX_MARKER_BYTES:
            return line
        doc[drop] = {} if drop == "metrics" else None
    return PREFIX + json.dumps(doc, allow_nan=False, separators=(",", ":"))


def parse_marker(line: str) -> dict[str, Any] | None:
    """The report a log line carries, checked; None when it carries none (never raises).

    The prefix may be preceded by what SkyPilot puts before a node's output ("(head, rank=0,
    pid=42) ") but nothing may follow the JSON object.
    """
    if len(line) > 2 * MAX_MARKER_BYTES:  # the bound before any parsing (chars, not bytes)
        return None
    at = line.find(PREFIX)
    if at < 0:
        return None
    text = line[at + len(PREFIX):].strip()
    if len(text.encode("utf-8", "replace")) > MAX_MARKER_BYTES:
        return None
    try:
        doc = parse_json(text, origin="marker", error=InputError)
    except (InputError, ValueError, RecursionError):  # ValueError: an int of 5000 digits
        return None
    if not isinstance(doc, dict) or problem(Report, doc) is not None:
        return None
    metrics = doc.get("metrics") or {}
    if len(metrics) > MAX_METRICS or any(len(k) > 200 for k in metrics):
        return None
    if not MIN_TIME <= doc["time"] <= MAX_TIME:
        return None
    if doc.get("throughput") is not None and doc["throughput"] > MAX_THROUGHPUT:
        return None
    if doc.get("epoch") is not None and doc["epoch"] > MAX_EPOCHS:
        return None
    fields = ("time", "epoch", "metrics", "throughput", "checkpoint")
    return {"epoch": None, "metrics": {}, "throughput": None, "checkpoint": None,
            **{k: v for k, v in doc.items() if k in fields}}
