"""Predict a training step on any GPU and any node count from one measured step.

    p = gpucost.Profile.from_measurement(gpu="V100 SXM2 16GB", throughput=1200.0, batch_size=256,
                                         precision="amp", param_count=25.6e6)
    pred = gpucost.predict(p, gpu="A100 SXM4 80GB", gpus_per_node=8, nodes=2)
    pred.throughput, pred.step_time_s, pred.breakdown["communication"], pred.efficiency

The measured step is split into device compute (which translates across GPUs, see
``translate``), data loading and host time (which do not shrink on a faster GPU), and gradient
sync (re-predicted for the target group, see ``scaling``). Data parallel with the per-device
batch the profile's unless ``batch_size`` moves it: the group processes gpus_per_node * nodes *
batch * grad_accum_steps samples per optimizer step. At another batch each part of the step
grows with the batch, less what the step pays once whatever its batch
(``translate.batch_step_factors``), so a multiple of the batch never lowers throughput (one
sample more can open a row of GEMM tiles and run slower per sample, as on a GPU). A group of mixed
GPUs runs at its slowest member's pace.

This is on the planner's hot path (``gpucost compare`` calls it thousands of times), so it is
plain float math over cached catalog lookups and a calibration loaded once.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from gpucost.errors import InputError
from gpucost.model import scaling, translate
from gpucost.model.bands import Band, band_for
from gpucost.model.calibration import Calibration
from gpucost.model.memory import fit_memory

if TYPE_CHECKING:
    from gpucost.model.memory import MemoryFit
    from gpucost.profile import Profile

__all__ = ["Prediction", "TimeBreakdown", "predict", "using_calibration"]

_BREAKDOWN_KEYS = ("compute", "communication", "data", "host")


@dataclass(frozen=True, slots=True)
class TimeBreakdown:
    """Where one optimizer step goes on the target, seconds. Parts sum to the step time.

    Reads like a dict too: ``b["compute"]``, ``dict(b.items())``.
    """

    compute_s: float  # forward + backward + optimizer on the device (all micro-steps)
    communication_s: float  # gradient sync not hidden behind backward, and the wait for the
    # slowest GPU at it
    data_s: float  # waiting for input batches
    host_s: float  # Python / launch overhead the device waits on

    def __getitem__(self, key: str) -> float:
        if key not in _BREAKDOWN_KEYS:
            raise KeyError(key)
        return float(getattr(self, f"{key}_s"))

    def keys(self) -> tuple[str, ...]:
        return _BREAKDOWN_KEYS

    def __iter__(self) -> Iterator[str]:
        return iter(_BREAKDOWN_KEYS)

    def items(self) -> Iterator[tuple[str, float]]:
        return ((k, self[k]) for k in _BREAKDOWN_KEYS)

    def as_dict(self) -> dict[str, float]:
        return dict(self.items())


@dataclass(frozen=True, slots=True)
class Prediction:
    """A predicted optimizer step of one profile on one group of GPUs."""

    gpu: str  # canonical name (the slowest member for a mixed group)
    gpus_per_node: int
    nodes: int
    batch_size: int  # per device per micro-step (the profile's unless predict() was given one)
    grad_accum_steps: int
    step_time_s: float  # one optimizer step
    throughput: float  # samples/s over the whole group
    single_gpu_throughput: float  # samples/s of one target GPU alone
    # throughput / (GPUs x the fastest member's throughput alone), 1.0 = linear scaling of the
    # fastest GPU (a mixed group scores under 1.0 on one node: its pace is the slowest's)
    efficiency: float
    breakdown: TimeBreakdown
    allreduce_s: float  # full gradient all-reduce time before overlap with backward
    # what each sync waits for the slowest GPU (0 for one GPU), inside breakdown's communication
    straggler_wait_s: float
    step_time_cv: float  # the step's coefficient of variation that wait is of
    intra_busbw_gbs: float  # GB/s all-reduce bus bandwidth inside a node of gpus_per_node
    inter_busbw_gbs: float  # GB/s between nodes
    intra_node_link: str  # "nvlink" | "pcie" | "socket"
    member_gpus: tuple[str, ...]  # distinct GPU types in the group
    profile: Profile = field(repr=False, compare=False)
    # Set when the profile's per-device batch does not fit the target's memory and the
    # prediction runs at the largest batch that does (``batch_size`` above).
    batch_reduced_from: int | None = None
    # With batch_reduced_from: True when gradient accumulation keeps the global batch
    # (grad_accum_steps grew to match), False when the global batch shrinks with it.
    keeps_global_batch: bool = True

    @property
    def batch_note(self) -> str:
        """One line on the batch change, empty when the profile's batch was kept."""
        if self.batch_reduced_from is None:
            return ""
        how = (f"x {self.grad_accum_steps} accumulation steps keeps the global batch"
               if self.keeps_global_batch else "(global batch smaller, no accumulation)")
        return (f"batch {self.batch_reduced_from} does not fit {self.gpu}: predicted at the "
                f"largest that fits, {self.batch_size} per device {how}")

    @property
    def gpu_count(self) -> int:
        return self.gpus_per_node * self.nodes

    @property
    def band(self) -> Band:
        """Measured over predicted throughput for about eight in ten held-out predictions like
        this one (``gpucost.model.bands``): the throughput is likely within
        ``throughput * band.low`` .. ``throughput * band.high``."""
        measured_on = self.profile.band_gpu or self.profile.gpu
        source = None if measured_on == "CPU" else translate.gpu_spec(measured_on)
        return band_for(source, translate.gpu_spec(self.gpu), self.profile.batch_size,
                        self.batch_size, self.gpu_count,
                        measured_batches=1 + len(self.profile.other_batches), nodes=self.nodes,
                        link=self.intra_node_link)

    @property
    def samples_per_step(self) -> int:
        return self.gpu_count * self.batch_size * self.grad_accum_steps

    @property
    def memory(self) -> MemoryFit:
        """Predicted peak memory per GPU against the (smallest) member's capacity."""
        smallest = min((translate.gpu_spec(g) for g in self.member_gpus), key=lambda s: s.memory_gb)
        return fit_memory(self.profile, smallest, group_gpus=self.gpu_count,
                          batch_size=self.batch_size)


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(f"{name} must be a positive integer, got {value!r}")
    return value


@lru_cache(maxsize=4096)
def _links(gpu: str, gpus_per_node: int, intra_node_gbps: float | None,
           inter_node_gbps: float | None, intra_node_link: str | None,
           inter_node_transport: str | None = None, tcp_stream_gbps: float | None = None,
           tcp_streams: int = 1) -> scaling.Links:
    cal = translate.calibration().scaling
    return scaling.resolve_links(translate.gpu_spec(gpu), cal, intra_node_gbps=intra_node_gbps,
                                 inter_node_gbps=inter_node_gbps, intra_node_link=intra_node_link,
                                 gpus_per_node=gpus_per_node,
                                 inter_node_transport=inter_node_transport,
                                 tcp_stream_gbps=tcp_stream_gbps, tcp_streams=tcp_streams)


def default_intra_node_link(gpu: str, gpus_per_node: int) -> str:
    """The link (``scaling.LINK_KINDS``) ``gpus_per_node`` x ``gpu`` meet over in one node
    when nothing says otherwise: the catalog's for the GPU, as :func:`predict` takes it."""
    return _links(gpu, gpus_per_node, None, None, None).intra_kind


# p90 - p10 of a normal distribution, in standard deviations.
_P10_P90_SIGMAS = 2.0 * 1.2815515655446004


def measured_step_time_cv(profile: Profile) -> float | None:
    """Coefficient of variation of the profile's step on one GPU, from the p10 and p90 of the
    step times it measured; None where it has none to say (no percentiles, a CPU's steps, or a
    group's, which already waited for its slowest)."""
    p10, p90 = profile.step_time_p10_s, profile.step_time_p90_s
    if p10 is None or p90 is None or profile.gpu == "CPU" or profile.device_count != 1:
        return None
    return (p90 - p10) / _P10_P90_SIGMAS / profile.step_time_s


def step_time_cv(profile: Profile) -> float:
    """Coefficient of variation of one rank's step: the profile's measured one, else the
    calibration's."""
    measured = measured_step_time_cv(profile)
    return translate.calibration().scaling.straggler_cv if measured is None else measured


def _source_parts(profile: Profile, gamma: float) -> tuple[float, float, float]:
    """(device compute, data, host) seconds of one measured step on its source GPU
    (``gamma``: the overlap exponent, to take a multi-GPU measurement's sync back out)."""
    b = profile.breakdown
    if profile.gpu == "CPU":
        # Device time is recomputed from the counted flops on each target; a GPU host's launch
        # cost replaces the CPU's own host time; data loading is what the loader measured.
        return 0.0, (b.data_s if b is not None else 0.0), translate.host_s_per_step(profile)
    if b is not None:
        compute = b.compute_s + b.optimizer_s
        if compute <= 0.0:
            compute = max(profile.step_time_s - b.data_s - b.host_s - b.communication_s, 0.0)
        return compute, b.data_s, b.host_s
    # No measured breakdown: the step is device time and the calibrated host share of it.
    kappa, eta = translate.workload_mix(profile)
    device_per_flop = translate.time_per_flop_s(
        translate.device_rates(profile.gpu, profile.precision, translate.profile_mix(profile),
                               profile.batch_size),
        kappa)
    host_share = eta / (device_per_flop + eta)
    step = profile.step_time_s
    if profile.device_count > 1:
        # A multi-GPU measurement includes gradient sync, which backward partly hid, and the
        # wait for its slowest GPU: take out what the model says they cost (one node of
        # device_count GPUs on the source's default link), as predict() puts them in.
        links = _links(profile.gpu, profile.device_count, None, None, None)
        sync = scaling.allreduce_time_s(profile.gradient_bytes, profile.device_count, 1, links)
        wait_share = step_time_cv(profile) * scaling.expected_max_normal(profile.device_count)
        step = scaling.compute_given_step_s(step, sync, gamma, wait_share)
    host = step * host_share
    return step - host, 0.0, host


# (id(profile), overlap exponent) -> (profile, source compute s, data s, host s, {target gpu:
# compute s}, {(target gpu, other batch): (compute s, data s, host s)}); profiles are immutable,
# and holding the profile keeps its id from being reused while cached. The exponent is in the
# key because a multi-GPU measurement's source compute depends on it (the sync taken back out).
_CacheEntry = tuple["Profile", float, float, float, dict[str, float],
                    dict[tuple[str, int], tuple[float, float, float]]]
_CACHE: dict[tuple[int, float], _CacheEntry] = {}
_CACHE_SIZE = 64


def _entry(profile: Profile, gamma: float) -> _CacheEntry:
    key = (id(profile), gamma)
    entry = _CACHE.get(key)
    if entry is not None and entry[0] is profile:
        return entry
    if len(_CACHE) >= _CACHE_SIZE:
        _CACHE.pop(next(iter(_CACHE)))
    compute, data, host = _source_parts(profile, gamma)
    entry = (profile, compute, data, host, {}, {})
    _CACHE[key] = entry
    return entry


def _target_compute_s(profile: Profile, source_compute_s: float, gpu: str) -> float:
    """Device compute of one micro-step on ``gpu`` (canonical name)."""
    mix = translate.profile_mix(profile)
    rates = translate.device_rates(gpu, profile.precision, mix, profile.batch_size)
    kappa, _ = translate.workload_mix(profile)
    if profile.gpu == "CPU":
        return translate.compute_from_flops_s(profile, rates, kappa)
    if gpu == profile.gpu:
        return source_compute_s
    source = translate.device_rates(profile.gpu, profile.precision, mix, profile.batch_size)
    return source_compute_s * translate.compute_ratio(profile, source, rates, kappa)


# How many standard errors a line measured through several batches must read steeper than the
# model's per-step costs allow before it is believed: two, the usual 95 % bound.
LINE_STANDARD_ERRORS = 2.0


def _measured_line(profile: Profile) -> tuple[float, float] | None:
    """(fixed share, its standard error) at the profile's batch of the least-squares line
    step(b) = fixed + b x per_sample through the step times measured at several per-device
    batches, each measured step taken to vary with the step's coefficient of variation
    (``step_time_cv``); the share is unclamped (below 0 where the step grew faster than the
    batch), and ``MAX_FIXED_SHARE`` with no error where it did not grow at all."""
    if not profile.other_batches or profile.gpu == "CPU":
        return None
    points = [(float(profile.batch_size), profile.step_time_s),
              *((float(b), s) for b, s in profile.other_batches)]
    n = len(points)
    mean_b = sum(b for b, _ in points) / n
    mean_s = sum(s for _, s in points) / n
    spread = sum((b - mean_b) ** 2 for b, _ in points)
    slope = sum((b - mean_b) * (s - mean_s) for b, s in points) / spread
    if slope <= 0.0:  # noise around a step that barely grows with the batch
        return translate.MAX_FIXED_SHARE, 0.0
    at_batch = mean_s + slope * (profile.batch_size - mean_b)
    if at_batch <= 0.0:  # the line is below zero there: a step growing faster than the batch
        return 0.0, 0.0
    cv = step_time_cv(profile)
    slope_error = math.sqrt(sum(((b - mean_b) * cv * s) ** 2 for b, s in points)) / spread
    share = 1.0 - slope * profile.batch_size / at_batch
    return share, slope_error * profile.batch_size / at_batch


def _modelled_parts(profile: Profile, gpu: str, parts: tuple[float, float, float],
                    batch_size: int) -> tuple[float, float, float]:
    """(compute, data, host) at another per-device batch as the model grows them: data loading
    with the batch, device and host time with it less their per-step share
    (``translate.batch_step_factors``)."""
    compute, data, host = parts
    mix = translate.profile_mix(profile)
    device_f, host_f = translate.batch_step_factors(
        translate.workload_terms(profile),
        translate.device_rates(gpu, profile.precision, mix, profile.batch_size),
        translate.device_rates(gpu, profile.precision, mix, batch_size),
        profile.batch_size, batch_size)
    return compute * device_f, data * batch_size / profile.batch_size, host * host_f


def _modelled_fixed_share(profile: Profile) -> float:
    """The share of the profile's step on its own GPU that the model pays once per step
    (weights and optimizer state, launches, GEMMs too small to fill the GPU): 2 - step(2b) /
    step(b)."""
    _, compute, data, host, _, _ = _entry(profile, translate.calibration().scaling.overlap_gamma)
    doubled = sum(_modelled_parts(profile, profile.gpu, (compute, data, host),
                                  2 * profile.batch_size))
    return 2.0 - doubled / (compute + data + host)


def measured_fixed_share(profile: Profile) -> float | None:
    """The share of the profile's step that does not grow with the batch, from its step times
    measured at several per-device batches (``other_batches``): the least-squares line
    through them, at the profile's batch; None when only one batch was measured, or measured
    on the CPU (a GPU's step is recomputed from the counted flops: the CPU's split says nothing
    of it). A line steeper than the model's per-step costs allow by less than
    ``LINE_STANDARD_ERRORS`` of its standard error reads the model's share: the step pays those
    costs whatever its batch, and two close batches cannot tell a steeper line from noise
    (a 1.4x pair of 3 %-noisy steps puts a tenth of the step in doubt). A step that grew faster
    than the batch beyond that (memory pressure) reads 0."""
    line = _measured_line(profile)
    if line is None:
        return None
    share, error = line
    modelled = _modelled_fixed_share(profile)
    if 0.0 < modelled - share < LINE_STANDARD_ERRORS * error:
        share = modelled
    return min(max(share, 0.0), translate.MAX_FIXED_SHARE)


def _at_batch(profile: Profile, gpu: str, parts: tuple[float, float, float],
              batch_size: int) -> tuple[float, float, float]:
    """(compute, data, host) seconds of one micro-step on ``gpu`` at another per-device batch,
    from ``parts`` at the profile's: as the model grows them (``_modelled_parts``), or, for a
    profile measured at several batches, every part with the measured line
    (``measured_fixed_share``)."""
    share = measured_fixed_share(profile)
    if share is None:
        return _modelled_parts(profile, gpu, parts, batch_size)
    # Measured at several batches: the whole step is the measured line through them.
    grow = (1.0 - share) * batch_size / profile.batch_size + share
    compute, data, host = parts
    return compute * grow, data * grow, host * grow


_FIT_BATCH = ("accumulate", "shrink", "keep")
# (id(profile), GPUs, group size) -> (profile, largest batch that fits or None); profiles are
# immutable and held so their ids are not reused while cached.
_FITS: dict[tuple[int, tuple[str, ...], int], tuple[Profile, int | None]] = {}


def _batch_that_fits(profile: Profile, members: tuple[str, ...], group: int) -> int | None:
    """The largest per-device batch that fits the smallest member when the profile's does not
    (None: it fits, or no smaller batch would)."""
    key = (id(profile), members, group)
    cached = _FITS.get(key)
    if cached is not None and cached[0] is profile:
        return cached[1]

    smallest = min((translate.gpu_spec(g) for g in members), key=lambda sp: sp.memory_gb)
    fit = fit_memory(profile, smallest, group_gpus=group)
    micro = None if fit.fits else fit.micro_batch
    if len(_FITS) >= 4096:
        _FITS.clear()
    _FITS[key] = (profile, micro)
    return micro


@lru_cache(maxsize=1024)
def _canonical(name: str) -> str:
    return translate.gpu_spec(name).name


def _clear_caches() -> None:
    _CACHE.clear()
    _FITS.clear()
    _links.cache_clear()


@contextmanager
def using_calibration(cal: Calibration | Mapping[str, Any]) -> Iterator[None]:
    """Predict with other coefficients inside the block (a refit, or a test's hand-set values);
    a mapping of calibration.json's shape is parsed and checked first."""
    previous = translate.set_calibration(cal)
    _clear_caches()
    try:
        yield
    finally:
        translate.set_calibration(previous)
        _clear_caches()


def predict(
    profile: Profile,
    gpu: str | None = None,
    gpus_per_node: int = 1,
    nodes: int = 1,
    intra_node_gbps: float | None = None,
    inter_node_gbps: float | None = None,
    *,
    intra_node_link: str | None = None,
    grad_accum_steps: int = 1,
    member_gpus: Sequence[str] | None = None,
    overlap_gamma: float | None = None,
    batch_size: int | None = None,
    inter_node_transport: str | None = None,
    fit_batch: str = "accumulate",
    tcp_stream_gbps: float | None = None,
    tcp_streams: int = 1,
) -> Prediction:
    """Predict one optimizer step of ``profile`` on ``nodes`` x ``gpus_per_node`` GPUs.

    ``gpu``: target GPU (catalog name or alias); ``None`` keeps the profile's GPU.
    ``intra_node_gbps``: GPU-to-GPU line rate inside a node, Gbit/s per direction (``None``:
    the catalog's NVLink, else PCIe). ``inter_node_gbps``: each node's network, Gbit/s, as in the
    offers' ``network_gbps`` (``None``: the calibrated default). ``intra_node_link``: "nvlink",
    "pcie" or "" (unknown) from the offers' ``intra_node_link``, or "socket": one container per
    GPU that NCCL sees as a host of its own (Kubernetes pods), so GPUs of a node exchange
    gradients over TCP sockets through the host. ``grad_accum_steps``: micro-steps
    per optimizer step (only the last syncs). ``member_gpus``: the GPU of each of the
    ``gpus_per_node * nodes`` members of a mixed group. ``overlap_gamma``: Pollux's overlap
    exponent (>= 1; ``None``: fitted value). ``batch_size``: per-device batch per micro-step on
    the target (``None``: the profile's); a multiple of it never lowers throughput.
    ``fit_batch``: what happens when ``batch_size`` is not given and the profile's batch does
    not fit the target's memory (``gpucost.model.memory``): "accumulate" (default) predicts at
    the largest batch that fits with gradient accumulation keeping the global batch, "shrink"
    at that batch without accumulation, "keep" at the profile's batch regardless; the
    prediction says what it did (``batch_reduced_from``, ``keeps_global_batch``,
    ``batch_note``).
    ``inter_node_transport``: "rdma" or "tcp", the fabric's transport (an offer's comes from
    :func:`gpucost.model.fabrics.resolve_fabrics`; ``None``: RDMA coefficients).
    ``tcp_stream_gbps``: the network's cap on one TCP stream, Gbit/s (AWS: 5 between instances
    outside a cluster placement group, 10 inside one; ``None``: no cap), and ``tcp_streams``
    the streams NCCL spreads a connection over (NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD:
    1 by default, 16 where NCCL sees an AWS ENA NIC, which a container on a bridge or overlay
    network hides): sockets between nodes carry at most their product.
    """
    k = _positive_int("gpus_per_node", gpus_per_node)
    n = _positive_int("nodes", nodes)
    s = _positive_int("grad_accum_steps", grad_accum_steps)
    b = profile.batch_size if batch_size is None else _positive_int("batch_size", batch_size)
    if fit_batch not in _FIT_BATCH:
        raise InputError(f"fit_batch must be one of {', '.join(_FIT_BATCH)}, got {fit_batch!r}")
    cal = translate.calibration().scaling
    gamma = cal.overlap_gamma if overlap_gamma is None else float(overlap_gamma)
    if not gamma >= 1.0:
        raise InputError(f"overlap_gamma must be >= 1 (1 = no overlap), got {overlap_gamma!r}")
    if member_gpus is not None:
        if len(member_gpus) != k * n:
            raise InputError(f"member_gpus lists {len(member_gpus)} GPUs for a group of {k * n}",
                             hint="give one GPU name per member (gpus_per_node x nodes)")
        members = tuple(dict.fromkeys(_canonical(g) for g in member_gpus))
    else:
        if gpu is None:
            if profile.gpu == "CPU":
                raise InputError("a CPU-measured profile needs a target gpu", hint="pass gpu=...")
            gpu = profile.gpu
        members = (_canonical(gpu),)

    entry = _entry(profile, gamma)
    _, source_compute, source_data, source_host, per_gpu, per_batch = entry
    reduced_from = None
    if batch_size is None and fit_batch != "keep":
        fitting = _batch_that_fits(profile, members, k * n)
        if fitting is not None and fitting < b:
            reduced_from = b
            if fit_batch == "accumulate":
                # The same optimizer step split evenly (as the planning core's memory rule
                # does): 112 on a GPU that holds 30 runs as 28 x 4, not 30 x 4 = 120 samples.
                steps = math.ceil(reduced_from / fitting)
                s *= steps
                b = math.ceil(reduced_from / steps)
            else:
                b = fitting
    slowest = members[0]
    fastest_micro_s = math.inf  # the fastest member's micro-step alone
    compute = -1.0
    data, host = source_data, source_host
    links: scaling.Links | None = None
    for member in members:
        c = per_gpu.get(member)
        if c is None:
            c = _target_compute_s(profile, source_compute, member)
            per_gpu[member] = c
        d, h = source_data, source_host
        if b != profile.batch_size:
            parts = per_batch.get((member, b))
            if parts is None:
                parts = _at_batch(profile, member, (c, d, h), b)
                per_batch[(member, b)] = parts
            c, d, h = parts
        fastest_micro_s = min(fastest_micro_s, d + h + c)
        if c > compute:
            compute, slowest, data, host = c, member, d, h
        member_links = _links(member, k, intra_node_gbps, inter_node_gbps, intra_node_link,
                              inter_node_transport, tcp_stream_gbps, tcp_streams)
        if links is None or member_links.intra_busbw_Bps < links.intra_busbw_Bps:
            links = member_links
    assert links is not None
    micro_s = data + host + compute
    single = b / micro_s

    sync = scaling.allreduce_time_s(profile.gradient_bytes, k, n, links) if k * n > 1 else 0.0
    # The s micro-steps' variations add up (their spread grows as sqrt(s)) before the one sync
    # that waits for the slowest rank.
    cv = step_time_cv(profile)
    wait = scaling.straggler_wait_s(micro_s, cv * math.sqrt(s), k * n)
    # Backward's sync runs on its own stream while the host launches the rest of backward and
    # the device computes, so it hides behind both (the overlap exponent was fitted so, against
    # whole measured steps), not behind device time alone.
    busy = host + compute
    exposed = scaling.overlapped_s(busy, sync, gamma) - busy + wait
    step = s * micro_s + exposed
    samples = k * n * b * s
    throughput = samples / step
    return Prediction(
        gpu=slowest,
        gpus_per_node=k,
        nodes=n,
        batch_size=b,
        grad_accum_steps=s,
        step_time_s=step,
        throughput=throughput,
        single_gpu_throughput=single,
        # Against the fastest member alone: a mixed group paced by its slowest member is
        # not "100 % efficient" on one node (its fast GPUs wait).
        efficiency=throughput / (k * n * b / fastest_micro_s),
        # Waiting for the slowest rank is time inside the sync, as a profiler shows it.
        breakdown=TimeBreakdown(compute_s=s * compute, communication_s=exposed,
                                data_s=s * data, host_s=s * host),
        allreduce_s=sync,
        straggler_wait_s=wait,
        step_time_cv=cv,
        intra_busbw_gbs=scaling.node_busbw_Bps(links, k) / 1e9,
        inter_busbw_gbs=links.inter_busbw_Bps / 1e9,
        intra_node_link=links.intra_kind,
        member_gpus=members,
        profile=profile,
        batch_reduced_from=reduced_from,
        keeps_global_batch=reduced_from is None or fit_batch == "accumulate",
    )
