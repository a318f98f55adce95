"""The measurement store: ``GPUCOST_HOME/measurements.json``, read, validated and written.

Each record names the workload (the profile's name), the GPU, precision, per-device batch, device
count, throughput and where it came from ("profile", "on-arrival" or "probe": `gpucost probe`).
The file is written atomically and validated on every read. What predictions make of the
records is :mod:`gpucost.measurements`'s job; this module imports no profile and no model, so
:meth:`gpucost.profile.Profile.save` records a measured profile here without a cycle.

Recording never fails a command: an unwritable GPUCOST_HOME is reported on stderr and skipped,
so read-only commands work there.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import math
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpucost._io import atomic_write_json, parse_json, read_text
from gpucost.catalog import get_gpu, try_resolve_gpu_name
from gpucost.errors import InputError, MeasurementStoreError
from gpucost.paths import home

if TYPE_CHECKING:
    from gpucost.profile import Profile

FORMAT = "gpucost-measurements"
VERSION = 1
SOURCES = ("profile", "on-arrival", "probe")
MAX_BYTES = 4 * 1024 * 1024
MAX_RECORDS = 10_000
# The most samples per second one device can train, whatever the model. A training step
# launches tens of kernels at a few microseconds each, so even a tiny model takes ~100 us a
# step: 1e9 samples/s would need 1e5 samples in every device's step; and at the fastest GPUs'
# dense peak (~2e15 flop/s) it leaves 2e6 flops per sample, a model of ~3e5 parameters (6 flops
# per parameter per sample). Real runs report 1e2-1e4 images/s and up to ~1e6 tokens/s per GPU,
# so this is 1,000x above them, yet far below what prices a job at nothing (1e300).
MAX_SAMPLES_PER_S_PER_DEVICE = 1e9


@dataclass(frozen=True, slots=True)
class Measurement:
    id: str
    workload: str  # the profile's name
    gpu: str  # canonical catalog name
    precision: str
    batch_size: int  # per device
    device_count: int
    throughput: float  # samples/s over all devices
    source: str  # "profile" | "on-arrival" | "probe"
    recorded_at: str  # ISO 8601 UTC
    sample_unit: str = "samples"

    def describe(self) -> str:
        return (f"{self.id}: {self.throughput:,.1f} {self.sample_unit}/s on "
                f"{self.device_count} x {self.gpu} ({self.precision}, batch {self.batch_size}, "
                f"{self.source} {self.recorded_at[:10]})")


def store_path() -> Path:
    return home() / "measurements.json"


# A measured rate above the GPU's dense peak for the workload's flops is impossible; flops per
# sample are often estimated (a multiply-add counted as one flop or two, backward as twice the
# forward), so up to twice the peak is let through rather than refuse a real run.
PEAK_FACTOR = 2.0


def problem(raw: Any, *, flops_per_sample: float | None = None) -> str | None:
    """Why ``raw`` is not a measurement gpucost may learn from, or None: its fields, and its
    throughput finite, positive and physically possible (at most
    :data:`MAX_SAMPLES_PER_S_PER_DEVICE` per device and, with the workload's flops per sample,
    :data:`PEAK_FACTOR` x the GPU's peak)."""
    if not isinstance(raw, dict):
        return "is not an object"
    names = {f.name for f in dataclasses.fields(Measurement)}
    required = {f.name for f in dataclasses.fields(Measurement)
                if f.default is dataclasses.MISSING}
    unknown, missing = sorted(set(raw) - names), sorted(required - set(raw))
    if unknown or missing:
        return f"has unknown fields {unknown} or lacks {missing}"
    m = Measurement(**raw)
    text_ok = all(isinstance(v, str) and v and len(v) <= 200 for v in (
        m.id, m.workload, m.gpu, m.precision, m.source, m.recorded_at, m.sample_unit))
    ints_ok = all(isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 1_000_000
                  for v in (m.batch_size, m.device_count))
    number_ok = (isinstance(m.throughput, int | float) and not isinstance(m.throughput, bool)
                 and math.isfinite(m.throughput) and m.throughput > 0)
    if not (text_ok and ints_ok and number_ok and m.source in SOURCES):
        return f"has a wrong value (workload {str(raw.get('workload'))[:60]!r})"
    most = MAX_SAMPLES_PER_S_PER_DEVICE * m.device_count
    if m.throughput > most:
        return (f"has throughput {m.throughput:.3g} {m.sample_unit}/s on {m.device_count} "
                f"device(s), over the {MAX_SAMPLES_PER_S_PER_DEVICE:g} per device any GPU can "
                "train")
    if flops_per_sample and m.gpu != "CPU":
        gpu = try_resolve_gpu_name(m.gpu)
        if gpu is not None and m.precision in ("fp32", "tf32", "fp16", "bf16", "amp"):
            peak = get_gpu(gpu).tflops(m.precision) * 1e12 * m.device_count  # type: ignore[arg-type]
            if m.throughput * flops_per_sample > PEAK_FACTOR * peak:
                return (f"has throughput {m.throughput:.3g} {m.sample_unit}/s: at "
                        f"{flops_per_sample:.3g} flops per sample that is "
                        f"{m.throughput * flops_per_sample / peak:.3g}x the peak of "
                        f"{m.device_count} x {gpu} at {m.precision}")
    return None


def _check(raw: Any, where: str, *, flops_per_sample: float | None = None) -> Measurement:
    found = problem(raw, flops_per_sample=flops_per_sample)
    if found is not None:
        raise MeasurementStoreError(f"{where} {found}")
    return Measurement(**raw)


@dataclass(frozen=True, slots=True)
class Store:
    """What the store holds: the good measurements, and the records skipped with why."""

    measurements: tuple[Measurement, ...]
    skipped: tuple[tuple[str, str], ...]  # (id, what is wrong with it)
    raw: tuple[Any, ...]  # every record as stored, good or not (forget works on these)


def _record_id(raw: Any, index: int) -> str:
    """A record's id as `calibrate list` shows it and `forget` takes it: its own, or its place
    ("#3") when it has none."""
    rid = raw.get("id") if isinstance(raw, dict) else None
    return rid if isinstance(rid, str) and rid and len(rid) <= 200 else f"#{index + 1}"


_WARNED: set[tuple[str, str]] = set()


def warn_once(path: Path, key: str, message: str) -> None:
    """One line on stderr, once per process for each record or file."""
    if (str(path), key) not in _WARNED:
        _WARNED.add((str(path), key))
        print(f"gpucost: warning: {message}", file=sys.stderr)


def read_store(path: Path | None = None) -> Store:
    """The store, record by record: a bad record is skipped with one warning naming it (its id
    is what `gpucost calibrate forget` takes). A file that is not a store at all (cut off, not
    JSON) is moved aside to ``measurements.json.damaged-<time>``, never deleted, and said so;
    one from a newer gpucost is left alone and not used."""
    path = path or store_path()
    if not path.exists():
        return Store((), (), ())
    text = read_text(path, what="measurement store", error=MeasurementStoreError,
                     max_bytes=MAX_BYTES)
    try:  # the guarded parse: also deep nesting, NaN and text that is not Unicode
        doc = parse_json(text, origin=f"measurement store {path}", error=MeasurementStoreError)
    except MeasurementStoreError as err:
        return _set_aside(path, err.message)
    if isinstance(doc, dict) and doc.get("format") == FORMAT and isinstance(
            doc.get("version"), int) and doc["version"] > VERSION:
        raise MeasurementStoreError(
            f"measurement store {path} is version {doc['version']}, newer than this gpucost "
            f"reads ({VERSION})", hint="upgrade gpucost; the file is left as it is")
    if not (isinstance(doc, dict) and doc.get("format") == FORMAT
            and doc.get("version") == VERSION and isinstance(doc.get("measurements"), list)):
        return _set_aside(path, f"measurement store {path} is not a {FORMAT} v{VERSION} file")
    records = doc["measurements"]
    if len(records) > MAX_RECORDS:
        return _set_aside(path, f"measurement store {path} holds over {MAX_RECORDS} records")
    good: list[Measurement] = []
    skipped: list[tuple[str, str]] = []
    for i, raw in enumerate(records):
        found = problem(raw)
        if found is None:
            good.append(Measurement(**raw))
            continue
        rid = _record_id(raw, i)
        skipped.append((rid, found))
        warn_once(path, rid, f"skipped record {rid} of {path}: it {found} "
                             f"(`gpucost calibrate forget {rid}` removes it)")
    return Store(tuple(good), tuple(skipped), tuple(records))


def _set_aside(path: Path, reason: str) -> Store:
    """Move a damaged store out of the way (a rename keeps every byte) and say where."""
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S%fZ")
    aside = path.with_name(f"{path.name}.damaged-{stamp}")
    try:
        os.rename(path, aside)
    except OSError as err:
        raise MeasurementStoreError(
            f"{reason}; it could not be moved aside ({err.strerror or err})",
            hint=f"move it aside by hand (`mv {path} {path}.damaged`); a new store then starts "
                 "with the next measurement") from None
    _CACHE.clear()
    warn_once(path, "file", f"{reason}: moved aside to {aside} (nothing deleted; its "
                            "measurements are not used) and a new store starts with the next "
                            "measurement")
    return Store((), (), ())


def read_all(path: Path | None = None) -> tuple[Measurement, ...]:
    """Every good stored measurement, oldest first; none when the store does not exist."""
    return read_store(path).measurements


def _write(records: Sequence[Any], path: Path) -> None:
    _CACHE.clear()
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, {"format": FORMAT, "version": VERSION, "measurements": [
        dataclasses.asdict(m) if isinstance(m, Measurement) else m for m in records]})


def record(*, workload: str, gpu: str, precision: str, batch_size: int, device_count: int,
           throughput: float, source: str, sample_unit: str = "samples",
           flops_per_sample: float | None = None, now: dt.datetime | None = None,
           path: Path | None = None) -> Measurement | None:
    """Add one measurement; returns it, or None when it was refused or could not be stored
    (said on stderr in one line: a run's launcher log). A measurement equal to a stored one
    (same workload, GPU, precision, batch, devices and throughput) is not stored twice."""
    path = path or store_path()
    when = (now or dt.datetime.now(dt.UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    key = f"{workload}|{gpu}|{precision}|{batch_size}|{device_count}|{throughput:.6g}"
    try:
        new = _check({"id": hashlib.sha256(f"{key}|{when}".encode()).hexdigest()[:8],
                      "workload": workload, "gpu": gpu, "precision": precision,
                      "batch_size": batch_size, "device_count": device_count,
                      "throughput": float(throughput), "source": source,
                      "recorded_at": when, "sample_unit": sample_unit},
                     "measurement refused: it", flops_per_sample=flops_per_sample)
    except (InputError, OverflowError) as err:
        print(f"gpucost: warning: {err} (not kept in {path})", file=sys.stderr)
        return None
    try:
        store = read_store(path)
        for m in store.measurements:
            if (f"{m.workload}|{m.gpu}|{m.precision}|{m.batch_size}|{m.device_count}|"
                    f"{m.throughput:.6g}") == key:
                return m
        _write([*store.raw, new][-MAX_RECORDS:], path)
        return new
    except (OSError, InputError) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        print(f"gpucost: note: measurement not kept in {path}: {reason}", file=sys.stderr)
        return None


def record_profile(profile: Profile) -> Measurement | None:
    """Keep a measured profile (not a CPU one: it teaches nothing about GPUs)."""
    if profile.gpu == "CPU":
        return None
    return record(workload=profile.name, gpu=profile.gpu, precision=profile.precision,
                  batch_size=profile.batch_size, device_count=profile.device_count,
                  throughput=profile.throughput, source="profile",
                  sample_unit=profile.sample_unit, flops_per_sample=profile.flops_per_sample)


def forget(ids: Sequence[str] = (), *, everything: bool = False,
           path: Path | None = None) -> tuple[dict[str, Any], ...]:
    """Remove the records with these ids (as `gpucost calibrate list` shows them, bad ones
    included), or all; returns the records removed, each with its id. A damaged store was
    moved aside on reading, so this never deletes one."""
    path = path or store_path()
    store = read_store(path)
    have = [_record_id(r, i) for i, r in enumerate(store.raw)]
    gone = [({**r, "id": rid} if isinstance(r, dict) else {"id": rid, "record": r})
            for r, rid in zip(store.raw, have, strict=True) if everything or rid in ids]
    if everything:
        if path.exists():
            path.unlink()
        _CACHE.clear()
        return tuple(gone)
    missing = sorted(set(ids) - set(have))
    if missing:
        raise InputError(f"no stored measurement with id {', '.join(missing)}",
                         hint="`gpucost calibrate list` shows the ids")
    _write([r for r, rid in zip(store.raw, have, strict=True) if rid not in ids], path)
    return tuple(gone)


# GPUCOST_HOME -> (when checked, the file's (mtime, size) or None, its measurements).
# measurements.predict runs per configuration: the file is checked at most once a second, and this
# process's own writes clear the cache at once.
_CACHE: dict[str, tuple[float, tuple[int, int] | None, tuple[Measurement, ...]]] = {}
_RECHECK_S = 1.0


def stored() -> tuple[Measurement, ...]:
    """The store's measurements, re-read only when the file changes; none when it is missing
    or unreadable (`gpucost calibrate list` reports that)."""
    key = os.environ.get("GPUCOST_HOME", "")
    now = time.monotonic()
    hit = _CACHE.get(key)
    if hit is not None and now - hit[0] < _RECHECK_S:
        return hit[2]
    path = store_path()
    try:
        st = os.stat(path)
        stamp: tuple[int, int] | None = (st.st_mtime_ns, st.st_size)
    except OSError:
        stamp = None
    if hit is not None and hit[1] == stamp:
        found = hit[2]
    elif stamp is None:
        found = ()
    else:
        try:
            found = read_all(path)
        except InputError as err:  # a newer version's, or one that could not be moved aside
            warn_once(path, "file", f"{err}; its measurements are not used")
            found = ()
    _CACHE[key] = (now, stamp, found)
    return found
