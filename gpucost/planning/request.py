"""The planning request: which workload, how much of it, on which offers, at what economics and
under which constraints. :func:`build_request` is the one place a request is assembled, for the
command line, the TUI and the Python API alike.
"""

from __future__ import annotations

import datetime as dt
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from gpucost.errors import InputError
from gpucost.format import count, usd
from gpucost.model.economics import JobParams
from gpucost.pricing.registry import DEFAULT_MAX_AGE_DAYS
from gpucost.pricing.snapshot import Snapshot
from gpucost.profile import Profile

Market = Literal["any", "on-demand", "spot"]
CpuArch = Literal["x86-64", "arm64", "any"]
CPU_ARCH_CHOICES = ("x86-64", "arm64", "any")
SortKey = Literal["cost", "time"]


@dataclass(frozen=True, slots=True)
class Job:
    """How much training: total samples (in the profile's sample unit)."""

    samples: float
    description: str
    epochs: float | None = None  # as given (the plan file records them); None: samples/steps
    dataset_size: float | None = None

    def __post_init__(self) -> None:
        from gpucost.limits import MAX_JOB_SAMPLES

        if not 0 < self.samples <= MAX_JOB_SAMPLES:  # NaN fails too
            raise InputError(
                f"the job is {self.samples:g} samples ({self.description}); at most "
                f"{MAX_JOB_SAMPLES:g} are planned",
                hint="check the units of --epochs, --dataset-size, --samples or --steps",
            )

    @classmethod
    def from_args(
        cls,
        profile: Profile,
        *,
        epochs: float | None = None,
        dataset_size: float | None = None,
        samples: float | None = None,
        steps: float | None = None,
    ) -> Job:
        given = [name for name, v in (("samples", samples), ("steps", steps)) if v is not None]
        if epochs is not None or dataset_size is not None:
            given.append("epochs/dataset-size")
        if len(given) > 1:
            raise InputError(
                f"give one job size, not {' and '.join(given)}",
                hint="use --epochs with --dataset-size, or --samples, or --steps",
            )
        unit = profile.sample_unit
        if samples is not None:
            check_positive("samples", samples)
            return cls(float(samples), f"{count(samples)} {unit}")
        if steps is not None:
            check_positive("steps", steps)
            global_batch = profile.batch_size * profile.device_count
            return cls(
                float(steps) * global_batch,
                f"{count(steps)} steps x {global_batch} {unit} (the profile's global batch)",
            )
        if epochs is None and dataset_size is None:
            if profile.epochs and profile.dataset_size:
                epochs, dataset_size = profile.epochs, profile.dataset_size
            else:
                raise InputError(
                    "no job size given and the profile has no default job",
                    hint="use --epochs with --dataset-size, or --samples, or --steps",
                )
        if epochs is None or dataset_size is None:
            missing = "--dataset-size" if dataset_size is None else "--epochs"
            if missing == "--dataset-size" and profile.dataset_size:
                dataset_size = profile.dataset_size
            elif missing == "--epochs" and profile.epochs:
                epochs = profile.epochs
            else:
                raise InputError(f"--epochs and --dataset-size go together: {missing} is missing")
        assert epochs is not None and dataset_size is not None
        check_positive("epochs", epochs)
        check_positive("dataset-size", dataset_size)
        return cls(
            float(epochs) * float(dataset_size),
            f"{count(epochs)} epochs x {count(dataset_size)} {unit}",
            float(epochs),
            float(dataset_size),
        )


def check_positive(name: str, value: float) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise InputError(f"{name} must be a positive number, got {value!r}")


@dataclass(frozen=True)
class Filters:
    """Which offers, markets and node counts a ranking considers. Your own machine
    (``--include-local``) is named explicitly, so the GPU, provider, region and GPU-count
    filters, which pick among cloud offers, leave it in."""

    gpus: tuple[str, ...] = ()  # canonical names; empty = all
    # each GPU name as given with the canonical names it matched (a family name: every variant);
    # read only while ``gpus`` is set (a relaxation that drops the GPU filter empties ``gpus``)
    gpu_matches: tuple[tuple[str, tuple[str, ...]], ...] = ()
    providers: tuple[str, ...] = ()
    regions: tuple[str, ...] = ()  # exact region names or prefixes ("us-", "europe")
    market: Market = "any"
    max_price_hr: float | None = None  # per node, in the plan's market
    min_gpu_memory_gb: float | None = None
    gpu_counts: tuple[float, ...] = ()
    max_nodes: int = 1
    cpu_arch: CpuArch = "x86-64"  # the host CPU a plan runs on; "any" takes both

    def describe(self) -> str:
        parts = []
        if self.min_gpu_memory_gb is not None:
            parts.append(f">= {self.min_gpu_memory_gb:g} GB per GPU")
        if self.regions:
            parts.append("regions " + ", ".join(self.regions))
        if self.gpus and self.gpu_matches:  # a family name with the variants it matched
            parts.append("GPUs " + ", ".join(
                f"{given} ({', '.join(names)})" if len(names) > 1 else names[0]
                for given, names in self.gpu_matches))
        elif self.gpus:
            parts.append("GPUs " + ", ".join(self.gpus))
        if self.providers:
            parts.append("providers " + ", ".join(self.providers))
        parts.append({"any": "spot allowed", "on-demand": "on-demand only",
                      "spot": "spot only"}[self.market])
        parts.append(f"up to {self.max_nodes} node{'s' if self.max_nodes > 1 else ''}")
        if self.cpu_arch != "x86-64":  # the default goes unsaid, as on-demand in plan does
            parts.append("any host CPU" if self.cpu_arch == "any" else f"{self.cpu_arch} hosts")
        return ", ".join(parts)


@dataclass(frozen=True)
class Constraints:
    """What a plan must meet to be recommended (`gpucost plan`, the TUI)."""

    deadline_hours: float | None = None
    budget_usd: float | None = None

    def __post_init__(self) -> None:
        for name in ("deadline_hours", "budget_usd"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value > 0):
                raise InputError(
                    f"{name.replace('_', ' ')} must be a positive number, got {value!r}"
                )

    def describe(self) -> str:
        parts = []
        if self.deadline_hours is not None:
            parts.append(f"deadline {self.deadline_hours:g} h")
        if self.budget_usd is not None:
            parts.append(f"budget {usd(self.budget_usd, exact=True)}")
        return ", ".join(parts)


@dataclass(frozen=True)
class Request:
    """Everything a ranking and its advice depend on."""

    profile: Profile
    job: Job
    snapshots: tuple[Snapshot, ...]
    filters: Filters = Filters()
    economics: JobParams = field(default_factory=JobParams)
    constraints: Constraints = Constraints()
    sort: SortKey = "cost"
    stale_days: float = DEFAULT_MAX_AGE_DAYS
    now: dt.datetime | None = None
    # One node's GPUs when they differ (a mixed node, priced by the caller's one offer named
    # after its slowest member): the slowest sets the pace, the smallest memory the batch.
    node_gpus: tuple[str, ...] = ()
    # A network the caller names (`gpucost scale --network-gbps/--transport`) in place of every
    # offer's published fabric between nodes; None keeps each offer's own (fabrics.csv).
    inter_node_gbps: float | None = None
    inter_node_transport: str | None = None

    def describe(self) -> str:
        """The constraints and filters in words."""
        return ", ".join(p for p in (self.constraints.describe(), self.filters.describe()) if p)


def _as_tuple(value: Any) -> tuple[Any, ...]:
    if value is None:
        return ()
    if isinstance(value, str | int | float):
        return (value,)
    return tuple(value)


def make_filters(
    *,
    gpu: str | Sequence[str] | None = None,
    provider: str | Sequence[str] | None = None,
    region: str | Sequence[str] | None = None,
    market: str = "any",
    max_price_hr: float | None = None,
    min_gpu_memory_gb: float | None = None,
    gpu_count: float | Sequence[float] | None = None,
    max_nodes: int = 1,
    cpu_arch: str = "x86-64",
) -> Filters:
    """Validated filters; GPU names in any spelling the catalog resolves, a family name
    ("A100") meaning every variant of it (:func:`gpucost.catalog.match_gpu_names`)."""
    from gpucost.catalog import match_gpu_names

    if market not in ("any", "on-demand", "spot"):
        raise InputError(f"market must be any, on-demand or spot, got {market!r}")
    if cpu_arch not in CPU_ARCH_CHOICES:
        raise InputError(f"cpu arch must be {', '.join(CPU_ARCH_CHOICES)}, got {cpu_arch!r}",
                         hint="x86-64 or arm64 hosts, or any for both")
    for name, value in (
        ("max price per hour", max_price_hr),
        ("min GPU memory", min_gpu_memory_gb),
    ):
        if value is not None:
            check_positive(name, value)
    counts = _as_tuple(gpu_count)
    for c in counts:
        check_positive("GPU count", c)
    if isinstance(max_nodes, bool) or not isinstance(max_nodes, int) or max_nodes < 1:
        raise InputError(f"max nodes must be a positive integer, got {max_nodes!r}")
    matches = tuple((str(g), match_gpu_names(str(g))) for g in _as_tuple(gpu))
    return Filters(
        gpus=tuple(dict.fromkeys(name for _, names in matches for name in names)),
        gpu_matches=matches,
        providers=tuple(p.lower() for p in _as_tuple(provider)),
        regions=_as_tuple(region),
        market=market,  # type: ignore[arg-type]
        max_price_hr=max_price_hr,
        min_gpu_memory_gb=min_gpu_memory_gb,
        gpu_counts=tuple(float(c) for c in counts),
        max_nodes=max_nodes,
        cpu_arch=cpu_arch,  # type: ignore[arg-type]
    )


def profile_cpu_arch(profile: Profile) -> str | None:
    """The host CPU the profile was measured on, from its environment's platform string
    (``platform.platform()``: "Linux-6.8.0-x86_64-with-glibc2.39"); None when it records none."""
    text = str(profile.environment.get("platform", "")).casefold()
    if "aarch64" in text or "arm64" in text:
        return "arm64"
    if "x86_64" in text or "amd64" in text:
        return "x86-64"
    return None


@dataclass(frozen=True)
class LocalMachineArgs:
    """`--include-local`: this machine (detected) or one described, and what it costs to run."""

    gpu: str | None = None  # a catalog name or "CPU"; None: detect this machine
    gpu_count: int = 1
    power_w: float | None = None
    electricity_usd_kwh: float = 0.20
    amortisation_usd_hr: float = 0.0

    def snapshot(self) -> Snapshot:
        from gpucost.local import local_snapshot, machine

        return local_snapshot(
            machine(self.gpu, self.gpu_count, power_w=self.power_w),
            electricity_usd_kwh=self.electricity_usd_kwh,
            amortisation_usd_hr=self.amortisation_usd_hr,
        )


def build_request(
    profile: Profile | str | os.PathLike[str] | None = None,
    *,
    epochs: float | None = None,
    dataset_size: float | None = None,
    samples: float | None = None,
    steps: float | None = None,
    gpu: str | Sequence[str] | None = None,
    provider: str | Sequence[str] | None = None,
    region: str | Sequence[str] | None = None,
    market: str = "any",
    max_price_hr: float | None = None,
    min_gpu_memory_gb: float | None = None,
    gpu_count: float | Sequence[float] | None = None,
    max_nodes: int = 1,
    cpu_arch: str | None = None,
    deadline_hours: float | None = None,
    budget_usd: float | None = None,
    data_gb: float = 0.0,
    checkpoint_gb: float = 0.0,
    results_gb: float = 0.0,
    setup_minutes: float | None = None,
    interruption_rate_per_hr: float | None = None,
    p_no_capacity: float = 0.0,
    max_wait_capacity_hours: float = 2.0,
    prices: Sequence[str | os.PathLike[str]] | None = None,
    snapshots: Sequence[Snapshot] | None = None,
    include_local: bool | LocalMachineArgs = False,
    sort: str = "cost",
    stale_days: float = DEFAULT_MAX_AGE_DAYS,
    now: dt.datetime | None = None,
    inter_node_gbps: float | None = None,
    inter_node_transport: str | None = None,
) -> Request:
    """One validated request from plain values: what every front end calls.

    ``profile``: a :class:`Profile`, a profile JSON path or an embedded example's name (default
    the ResNet-50 example). The job is ``epochs`` with ``dataset_size``, or ``samples``, or
    ``steps`` (default: the profile's job). ``snapshots`` are used as given; otherwise
    ``prices`` (files or folders; default the newest snapshot per source) are loaded.
    ``include_local`` adds this machine (True) or a described one. ``cpu_arch``: the host CPU
    ("x86-64", "arm64" or "any"; default the profile's, x86-64 where it records none).
    ``inter_node_gbps`` and
    ``inter_node_transport`` replace every offer's network between nodes (default: each offer's
    published fabric, TCP where none is published).
    """
    from gpucost.model.fabrics import check_transport
    from gpucost.pricing.snapshot import load_snapshots
    from gpucost.profile import resolve_profile

    prof = profile if isinstance(profile, Profile) else resolve_profile(profile)
    job = Job.from_args(prof, epochs=epochs, dataset_size=dataset_size, samples=samples,
                        steps=steps)
    if sort not in ("cost", "time"):
        raise InputError(f"sort must be 'cost' or 'time', got {sort!r}")
    check_transport(inter_node_transport)
    if inter_node_gbps is not None:
        check_positive("inter-node network Gbit/s", inter_node_gbps)
    filters = make_filters(gpu=gpu, provider=provider, region=region, market=market,
                           max_price_hr=max_price_hr, min_gpu_memory_gb=min_gpu_memory_gb,
                           gpu_count=gpu_count, max_nodes=max_nodes,
                           cpu_arch=cpu_arch or profile_cpu_arch(prof) or "x86-64")
    economics = JobParams(
        data_gb=data_gb,
        checkpoint_gb=checkpoint_gb,
        results_gb=results_gb,
        setup_minutes=setup_minutes,
        interruption_rate_per_hr=interruption_rate_per_hr,
        p_no_capacity=p_no_capacity,
        max_wait_capacity_hours=max_wait_capacity_hours,
    )
    constraints = Constraints(deadline_hours=deadline_hours, budget_usd=budget_usd)
    loaded = list(snapshots) if snapshots is not None else load_snapshots(prices)
    if include_local:
        local = include_local if isinstance(include_local, LocalMachineArgs) else LocalMachineArgs()
        loaded.append(local.snapshot())
    return Request(prof, job, tuple(loaded), filters, economics, constraints,
                   sort,  # type: ignore[arg-type]
                   stale_days, now, inter_node_gbps=inter_node_gbps,
                   inter_node_transport=inter_node_transport)
