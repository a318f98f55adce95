"""The user's own measurements: every profile and on-arrival throughput, kept to teach the model.

Stored in ``GPUCOST_HOME/measurements.json`` (written atomically, validated on every read). Each
record names the workload (the profile's name), the GPU, precision, per-device batch, device
count, throughput and where it came from ("profile", "on-arrival" or "probe": `gpucost probe`).
Predictions for a workload use all of its single-GPU measurements at the same precision
(:func:`source_for`):

* the target GPU was measured: that measurement is the source;
* one GPU measured (the profile's own counts): translate from it;
* two or more GPUs measured: fit the workload's own compute/memory mix, time per sample =
  a / flops rate + c / bandwidth rate (a, c >= 0, least squares on relative error, the rates
  the calibrated model gives each GPU), and predict the target from it at the batch of the
  nearest measured GPU (nearest in flops and bandwidth rates).

Multi-GPU measurements are kept and listed but not used: their sync time belongs to their
group. The newest measurement of a GPU supersedes older ones.

Recording never fails a command: an unwritable GPUCOST_HOME is reported on stderr and skipped,
so read-only commands work there.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import hashlib
import inspect
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, cast

from gpucost._io import atomic_write_json, parse_json, read_text
from gpucost.catalog import get_gpu, try_resolve_gpu_name
from gpucost.errors import GpuCostError, InputError
from gpucost.errors import (
    MeasurementStoreError as MeasurementStoreError,  # re-exported: its old home
)
from gpucost.model.perf import Prediction
from gpucost.model.perf import predict as model_predict
from gpucost.paths import home
from gpucost.profile import resolve_profile

if TYPE_CHECKING:
    from gpucost.model.bands import Band
    from gpucost.planfile import Plan
    from gpucost.profile import Profile

P = ParamSpec("P")

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


def _warn(path: Path, key: str, message: str) -> None:
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
        _warn(path, rid, f"skipped record {rid} of {path}: it {found} "
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
    _warn(path, "file", f"{reason}: moved aside to {aside} (nothing deleted; its measurements "
                        "are not used) and a new store starts with the next measurement")
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


def record_on_arrival(plan: Plan, throughput: float, *,
                      source: str = "on-arrival") -> Measurement | None:
    """Keep the throughput a run measured on arrival (samples/s over the whole group), named
    after the plan's profile; a plan without precision or batch teaches nothing and is skipped.
    ``source``: "probe" for what `gpucost probe` measured."""
    from pathlib import PurePath

    work, offer = plan.workload, plan.offer
    devices = round(offer.gpu_count) * offer.nodes
    if not (work.profile and work.precision and work.batch_size) or devices < 1:
        return None
    # a profile path names its workload by file name, as `gpucost profile` saves it
    name = PurePath(work.profile).stem if work.profile.endswith(".json") else work.profile
    return record(workload=name, gpu=offer.gpu, precision=work.precision,
                  batch_size=work.batch_size, device_count=devices, throughput=throughput,
                  source=source, sample_unit=work.sample_unit,
                  flops_per_sample=_flops_per_sample(work.profile))


def _flops_per_sample(ref: str) -> float | None:
    """The plan's profile's flops per sample, for the peak check; None when it cannot be read
    (moved, damaged): the per-device bound still applies."""
    try:
        profile = resolve_profile(ref)
    except (InputError, OSError):
        return None
    return profile.flops_per_sample


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


# ------------------------------------------------------------------ use in predictions --

@dataclass(frozen=True, slots=True)
class Source:
    """What a prediction starts from: a profile standing for the workload, and why."""

    profile: Profile
    used: tuple[Measurement, ...]  # the stored measurements behind it (empty: the profile alone)
    method: str  # "profile", "measured on the target", "translated from <GPU>" or
    # "compute/memory mix fitted on <GPUs>"


def _rates(gpu: str, precision: str) -> tuple[float, float]:
    from gpucost.model.translate import device_rates

    r = device_rates(gpu, precision)
    return r.flops_per_s, r.bytes_per_s


def fit_mix(points: Sequence[tuple[float, float, float]]) -> tuple[float, float]:
    """(a, c) >= 0 with seconds per sample = a / flops rate + c / bandwidth rate, from
    (flops rate, bandwidth rate, seconds per sample) points, least squares on relative error."""
    import numpy as np

    design = np.array([[1.0 / (f * t), 1.0 / (b * t)] for f, b, t in points])
    target = np.ones(len(points))
    best: tuple[float, float] | None = None
    best_err = math.inf
    # the unconstrained solution if both terms stay >= 0, else the better one-term fit
    for cols in ((0, 1), (0,), (1,)):
        sol, *_ = np.linalg.lstsq(design[:, cols], target, rcond=None)
        if (sol < 0).any():
            continue
        coef = [0.0, 0.0]
        for c, v in zip(cols, sol, strict=True):
            coef[c] = float(v)
        err = float(np.sum((design @ np.array(coef) - target) ** 2))
        if err < best_err - 1e-12:
            best, best_err = (coef[0], coef[1]), err
    assert best is not None  # one-term fits are never negative
    return best


def _at(profile: Profile, gpu: str, throughput: float, batch_size: int,
        label: str) -> Profile:
    """``profile`` as if measured alone on ``gpu`` at ``throughput`` (breakdown and per-op
    times belong to the GPU they were measured on, so they are dropped)."""
    return dataclasses.replace(
        profile, gpu=gpu, batch_size=batch_size, step_time_s=batch_size / throughput,
        device_count=1, breakdown=None, operators=(), step_time_p10_s=None, step_time_p90_s=None,
        band_gpu=None, source=f"{profile.source}; {label}" if profile.source else label)


# GPUCOST_HOME -> (when checked, the file's (mtime, size) or None, its measurements).
# predict() runs per configuration: the file is checked at most once a second, and this
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
            _warn(path, "file", f"{err}; its measurements are not used")
            found = ()
    _CACHE[key] = (now, stamp, found)
    return found


def _possible(m: Measurement, flops_per_sample: float | None) -> bool:
    """Whether ``m`` passes the store's check with the workload's flops known (it was stored
    without them); one warning naming it when not."""
    found = problem(dataclasses.asdict(m), flops_per_sample=flops_per_sample)
    if found is not None:
        _warn(store_path(), m.id, f"skipped record {m.id} of {store_path()}: it {found} "
                                  f"(`gpucost calibrate forget {m.id}` removes it)")
    return found is None


def source_for(profile: Profile, gpu: str | None,
               measurements: Sequence[Measurement] | None = None) -> Source:
    """The profile a prediction on ``gpu`` should start from, given the workload's stored
    single-GPU measurements at the profile's precision (the store's when not given)."""
    if measurements is None:
        measurements = stored()
    if not measurements:
        return Source(profile, (), "profile")

    mine = [m for m in measurements if m.workload == profile.name
            and m.precision == profile.precision and m.device_count == 1
            and m.gpu != "CPU" and try_resolve_gpu_name(m.gpu) == m.gpu
            and _possible(m, profile.flops_per_sample)]
    target = try_resolve_gpu_name(gpu) if gpu is not None else profile.gpu
    if not mine or target is None or target == "CPU":
        return Source(profile, (), "profile")
    # newest measurement per GPU (and the profile's own, unless a stored one supersedes it)
    latest: dict[str, Measurement] = {}
    for m in sorted(mine, key=lambda m: m.recorded_at):
        latest[m.gpu] = m
    on_target = latest.get(target)
    if on_target is not None:
        return Source(_at(profile, target, on_target.throughput, on_target.batch_size,
                          f"measured {on_target.id}"), (on_target,), "measured on the target")
    points: dict[str, tuple[float, int]] = {g: (m.throughput, m.batch_size)
                                            for g, m in latest.items()}
    if profile.gpu != "CPU" and profile.device_count == 1:
        points.setdefault(profile.gpu, (profile.throughput, profile.batch_size))
    f_t, b_t = _rates(target, profile.precision)
    if len(points) == 1:
        (g, (thr, batch)), = points.items()
        return Source(_at(profile, g, thr, batch, f"measured on {g}"),
                      tuple(latest.values()), f"translated from {g}")
    rates = {g: _rates(g, profile.precision) for g in points}
    a, c = fit_mix([(rates[g][0], rates[g][1], 1.0 / thr) for g, (thr, _) in points.items()])
    # the nearest measured GPU's batch stands for the workload's
    nearest = min(points, key=lambda g: abs(math.log(rates[g][0] / f_t))
                  + abs(math.log(rates[g][1] / b_t)))
    predicted = 1.0 / (a / f_t + c / b_t)
    method = f"compute/memory mix fitted on {', '.join(sorted(points))}"
    # not a measurement on the target: banded as a translation from the nearest measured GPU
    fitted = dataclasses.replace(_at(profile, target, predicted, points[nearest][1], method),
                                 band_gpu=nearest)
    return Source(fitted, tuple(latest.values()), method)


def _from_measurements(model: Callable[P, Prediction]) -> Callable[P, Prediction]:
    """``model`` (the performance model's predict) with its parameters, started from the
    workload's own stored measurements."""
    signature = inspect.signature(model)
    call_model = cast("Callable[..., Prediction]", model)

    @functools.wraps(model)
    def predict(*args: P.args, **kwargs: P.kwargs) -> Prediction:
        from gpucost.model.fabrics import check_transport, default_transport

        given = signature.bind(*args, **kwargs)
        arguments = given.arguments
        # the model's own default is RDMA: the API and the CLI would answer one question twice
        arguments["inter_node_transport"] = (
            check_transport(arguments.get("inter_node_transport")) or default_transport())
        if arguments.get("member_gpus") is None:
            arguments["profile"] = source_for(arguments["profile"], arguments.get("gpu")).profile
        return call_model(*given.args, **given.kwargs)

    predict.__module__ = __name__
    predict.__doc__ = _PREDICT_DOC + (model.__doc__ or "")
    return predict


_PREDICT_DOC = """``gpucost.predict``: :func:`gpucost.model.perf.predict`, its parameters
declared there once, started from the workload's own stored measurements where there are any
(:func:`source_for`); a mixed group (``member_gpus``) starts from the profile as given. Between
nodes it assumes what `gpucost predict` does: TCP, the transport of a fabric no offer
publishes, unless ``inter_node_transport`` names one.

The model's own words:

"""

predict = _from_measurements(model_predict)


# ------------------------------------------------------------ what the measurements taught --

@dataclass(frozen=True, slots=True)
class Learned:
    """One GPU a workload ran on: its newest measurement there, what gpucost predicted for it
    before that GPU was measured, and the prediction's band then and now."""

    measurement: Measurement
    predicted: float | None  # samples/s, from what was stored before (None: no profile)
    method: str  # what that prediction started from ("translated from V100 SXM2 16GB", ...)
    band_before: Band | None
    band_now: Band | None  # what a prediction at the measured batch carries now
    predicted_now: float | None = None  # that prediction (samples/s)
    note: str = ""  # why there is no prediction, or why the band did not narrow

    @property
    def error_pct(self) -> float | None:
        """Measured over predicted, minus one, in percent."""
        if self.predicted is None:
            return None
        return (self.measurement.throughput / self.predicted - 1.0) * 100.0

    @property
    def inside_before(self) -> bool | None:
        """Whether the measurement fell inside the band predicted before it."""
        if self.predicted is None or self.band_before is None:
            return None
        m = self.measurement.throughput
        return self.predicted * self.band_before.low <= m <= self.predicted * self.band_before.high


def _profile_for(workload: str, profiles: Sequence[Profile]) -> Profile | None:
    """The profile standing for ``workload``: one given by name, else the example or file the
    name resolves to; None when none does."""
    for p in profiles:
        if p.name == workload:
            return p
    try:
        found = resolve_profile(workload)
    except (InputError, OSError):
        return None
    return found if found.name == workload else None


def learning(measurements: Sequence[Measurement] | None = None,
             profiles: Sequence[Profile] = ()) -> list[Learned]:
    """Per workload and per GPU it was measured on (newest measurement per GPU, precision and
    device count), the prediction made from what was stored before that GPU's first
    measurement (the profile and the workload's other GPUs, as :func:`source_for` chooses) and
    its band, against the band a prediction there carries now. A workload whose profile cannot
    be found (a file saved elsewhere: pass it in ``profiles``) gets no prediction."""

    if measurements is None:
        measurements = read_all()
    latest: dict[tuple[str, str, str, int], Measurement] = {}
    first: dict[tuple[str, str, str, int], str] = {}
    for m in sorted(measurements, key=lambda m: m.recorded_at):
        key = (m.workload, m.gpu, m.precision, m.device_count)
        latest[key] = m
        first.setdefault(key, m.recorded_at)
    found: list[Learned] = []
    for key in sorted(latest):
        m = latest[key]
        profile = _profile_for(m.workload, profiles)
        if profile is None:
            found.append(Learned(m, None, "", None, None, note=
                                 f"profile {m.workload!r} not found: give it with --profile"))
            continue
        if profile.precision != m.precision:
            found.append(Learned(m, None, "", None, None, note=
                                 f"measured at {m.precision}, the profile is {profile.precision}"))
            continue
        # before: what was stored before this GPU (at this group size) was first measured
        before = [x for x in measurements if x.recorded_at < first[key]
                  and (x.workload, x.gpu, x.precision, x.device_count) != key]
        try:
            was = model_predict(source_for(profile, m.gpu, before).profile, m.gpu,
                                gpus_per_node=m.device_count, batch_size=m.batch_size,
                                inter_node_transport="tcp")
            now = model_predict(source_for(profile, m.gpu, measurements).profile, m.gpu,
                                gpus_per_node=m.device_count, batch_size=m.batch_size,
                                inter_node_transport="tcp")
        except GpuCostError as err:  # a GPU this catalog no longer knows
            found.append(Learned(m, None, "", None, None, note=str(err)))
            continue
        method = source_for(profile, m.gpu, before).method
        note = ("" if m.device_count == 1 else
                f"a group of {m.device_count} (one node assumed): kept, not used by predictions")
        found.append(Learned(m, was.throughput, method, was.band, now.band, now.throughput, note))
    return found
