"""The user's own measurements: every profile and on-arrival throughput, kept to teach the model.

They are stored in ``GPUCOST_HOME/measurements.json`` by :mod:`gpucost.measurement_store`
(its names are re-exported here, their old home). Predictions for a workload use all of its
single-GPU measurements at the same precision (:func:`source_for`):

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
import functools
import inspect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ParamSpec, cast

from gpucost.catalog import try_resolve_gpu_name
from gpucost.errors import GpuCostError, InputError
from gpucost.errors import (
    MeasurementStoreError as MeasurementStoreError,  # re-exported: its old home
)
from gpucost.measurement_store import (
    FORMAT,
    MAX_BYTES,
    MAX_RECORDS,
    MAX_SAMPLES_PER_S_PER_DEVICE,
    PEAK_FACTOR,
    SOURCES,
    VERSION,
    Measurement,
    Store,
    forget,
    problem,
    read_all,
    read_store,
    record,
    record_profile,
    store_path,
    stored,
    warn_once,
)
from gpucost.model.perf import Prediction
from gpucost.model.perf import predict as model_predict
from gpucost.model.translate import device_rates
from gpucost.profile import Profile, resolve_profile

if TYPE_CHECKING:
    from gpucost.model.bands import Band
    from gpucost.planfile import Plan

# The store's names are re-exported: callers and tests import them from here, their old home.
__all__ = ["FORMAT", "MAX_BYTES", "MAX_RECORDS", "MAX_SAMPLES_PER_S_PER_DEVICE", "PEAK_FACTOR",
           "SOURCES", "VERSION", "Learned", "Measurement", "MeasurementStoreError", "Source",
           "Store", "fit_mix", "forget", "learning", "predict", "problem", "read_all",
           "read_store", "record", "record_on_arrival", "record_profile", "source_for",
           "store_path", "stored"]

P = ParamSpec("P")


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


# ------------------------------------------------------------------ use in predictions --

@dataclass(frozen=True, slots=True)
class Source:
    """What a prediction starts from: a profile standing for the workload, and why."""

    profile: Profile
    used: tuple[Measurement, ...]  # the stored measurements behind it (empty: the profile alone)
    method: str  # "profile", "measured on the target", "translated from <GPU>" or
    # "compute/memory mix fitted on <GPUs>"


def _rates(gpu: str, precision: str) -> tuple[float, float]:
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


def _possible(m: Measurement, flops_per_sample: float | None) -> bool:
    """Whether ``m`` passes the store's check with the workload's flops known (it was stored
    without them); one warning naming it when not."""
    found = problem(dataclasses.asdict(m), flops_per_sample=flops_per_sample)
    if found is not None:
        warn_once(store_path(), m.id, f"skipped record {m.id} of {store_path()}: it {found} "
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
    # Names of the parameters a caller may pass by position, in order. Arguments are mapped to
    # names by hand: inspect's Signature.bind cost more than the model itself (30 of 50 us).
    positional = tuple(p.name for p in inspect.signature(model).parameters.values()
                       if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD)
    call_model = cast("Callable[..., Prediction]", model)

    @functools.wraps(model)
    def predict(*args: P.args, **kwargs: P.kwargs) -> Prediction:
        from gpucost.model.fabrics import check_transport, default_transport

        if len(args) > len(positional):
            raise TypeError(f"predict() takes at most {len(positional)} positional arguments "
                            f"but {len(args)} were given")
        arguments: dict[str, Any] = dict(zip(positional, args, strict=False))
        for name, value in kwargs.items():
            if name in arguments:
                raise TypeError(f"predict() got multiple values for argument {name!r}")
            arguments[name] = value
        # the model's own default is RDMA: the API and the CLI would answer one question twice
        arguments["inter_node_transport"] = (
            check_transport(arguments.get("inter_node_transport")) or default_transport())
        if arguments.get("member_gpus") is None and "profile" in arguments:
            arguments["profile"] = source_for(arguments["profile"], arguments.get("gpu")).profile
        return call_model(**arguments)

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
