"""The planning request: which workload, how much of it, on which offers, at what economics and
under which constraints.

A request is given as plain values, :class:`RequestArgs`: the one declaration of its keywords,
composed of :class:`JobArgs`, :class:`FilterArgs`, :class:`ConstraintArgs`,
:class:`EconomicsArgs` and :class:`SourceArgs`. :meth:`RequestArgs.build` validates them into the
:class:`Request` a ranking reads (a :class:`Job`, :class:`Filters`, the economics and
:class:`Constraints`). :func:`build_request`, ``gpucost.compare``, ``gpucost.plan`` and the
command line's options take exactly these keywords (:func:`keywords_of` derives their
signatures), and the TUI's form fills them.
"""

from __future__ import annotations

import datetime as dt
import inspect
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, Field, dataclass, field, fields
from typing import Any, Literal, ParamSpec, TypeVar

from gpucost.catalog import match_gpu_names
from gpucost.errors import InputError
from gpucost.format import count, usd
from gpucost.limits import MAX_JOB_SAMPLES
from gpucost.local import local_snapshot, machine
from gpucost.model.economics import JobParams
from gpucost.model.fabrics import check_transport
from gpucost.pricing.registry import DEFAULT_MAX_AGE_DAYS
from gpucost.pricing.snapshot import Snapshot, load_snapshots
from gpucost.profile import Profile, resolve_profile

Market = Literal["any", "on-demand", "spot"]
CpuArch = Literal["x86-64", "arm64", "any"]
CPU_ARCH_CHOICES = ("x86-64", "arm64", "any")
SortKey = Literal["cost", "time"]

P = ParamSpec("P")
A = TypeVar("A")
T = TypeVar("T")

# Field metadata of the request's keywords: the command line's attribute (argparse dest) that
# holds one, where it is not the keyword's own name (--budget fills budget_usd), "" for a
# keyword only the Python API takes (:func:`option_dest`).
CLI_DEST = "cli_dest"
API_ONLY: Mapping[str, str] = {CLI_DEST: ""}


def cli_dest(name: str) -> Mapping[str, str]:
    return {CLI_DEST: name}


def keywords_of(args_type: Callable[P, A], build: Callable[[A], T], name: str,
                doc: str) -> Callable[P, T]:
    """A function named ``name`` taking exactly ``args_type``'s arguments (its signature, typed
    and shown by ``help()``) and returning ``build`` of them: how :func:`build_request`,
    :func:`make_filters`, ``gpucost.compare`` and ``gpucost.plan`` take the request's keywords
    without spelling them again."""
    init = f"{getattr(args_type, '__qualname__', name)}.__init__()"

    def call(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            values = args_type(*args, **kwargs)
        except TypeError as err:  # a keyword it lacks: name the function called
            raise TypeError(str(err).replace(init, f"{name}()")) from None
        return build(values)

    call.__name__ = call.__qualname__ = name
    call.__module__ = build.__module__
    call.__doc__ = doc
    call.__signature__ = inspect.signature(args_type).replace(  # type: ignore[attr-defined]
        return_annotation=inspect.signature(build).return_annotation)
    return call


@dataclass(frozen=True, slots=True)
class Job:
    """How much training: total samples (in the profile's sample unit)."""

    samples: float
    description: str
    epochs: float | None = None  # as given (the plan file records them); None: samples/steps
    dataset_size: float | None = None

    def __post_init__(self) -> None:
        if not 0 < self.samples <= MAX_JOB_SAMPLES:  # NaN fails too
            raise InputError(
                f"the job is {self.samples:g} samples ({self.description}); at most "
                f"{MAX_JOB_SAMPLES:g} are planned",
                hint="check the units of --epochs, --dataset-size, --samples or --steps",
            )

    @classmethod
    def from_args(cls, profile: Profile, **size: float | None) -> Job:
        """The job of ``size`` (the keywords of :class:`JobArgs`) for ``profile``."""
        return JobArgs(**size).job(profile)


@dataclass(frozen=True, kw_only=True)
class JobArgs:
    """The job size as given: ``epochs`` with ``dataset_size``, or ``samples``, or ``steps``
    (optimizer steps of the profile's global batch); none: the profile's typical job."""

    epochs: float | None = None
    dataset_size: float | None = None
    samples: float | None = None
    steps: float | None = None

    def job(self, profile: Profile) -> Job:
        """The validated job, in the profile's sample unit."""
        epochs, dataset_size, samples, steps = (self.epochs, self.dataset_size, self.samples,
                                                self.steps)
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
            return Job(float(samples), f"{count(samples)} {unit}")
        if steps is not None:
            check_positive("steps", steps)
            global_batch = profile.batch_size * profile.device_count
            return Job(
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
        return Job(
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


@dataclass(frozen=True, kw_only=True)
class FilterArgs:
    """Which offers, as given: GPU names in any spelling the catalog resolves, a family name
    ("A100") meaning every variant of it (:func:`gpucost.catalog.match_gpu_names`); providers;
    region names or prefixes; the market ("any", "on-demand" or "spot"); the most $/h per node;
    the least memory per GPU, GB; GPUs per node; the most nodes; the host CPU ("x86-64",
    "arm64" or "any"; None: x86-64, or in a request the profile's)."""

    gpu: str | Sequence[str] | None = None
    provider: str | Sequence[str] | None = None
    region: str | Sequence[str] | None = None
    market: str = "any"
    max_price_hr: float | None = None
    min_gpu_memory_gb: float | None = field(default=None, metadata=cli_dest("min_gpu_memory"))
    gpu_count: float | Sequence[float] | None = None
    max_nodes: int = 1
    cpu_arch: str | None = None

    def filters(self, default_cpu_arch: str = "x86-64") -> Filters:
        """The validated filters (``default_cpu_arch`` where no ``cpu_arch`` is given)."""
        market, max_nodes = self.market, self.max_nodes
        cpu_arch = self.cpu_arch or default_cpu_arch
        if market not in ("any", "on-demand", "spot"):
            raise InputError(f"market must be any, on-demand or spot, got {market!r}")
        if cpu_arch not in CPU_ARCH_CHOICES:
            raise InputError(f"cpu arch must be {', '.join(CPU_ARCH_CHOICES)}, got {cpu_arch!r}",
                             hint="x86-64 or arm64 hosts, or any for both")
        for name, value in (
            ("max price per hour", self.max_price_hr),
            ("min GPU memory", self.min_gpu_memory_gb),
        ):
            if value is not None:
                check_positive(name, value)
        counts = _as_tuple(self.gpu_count)
        for c in counts:
            check_positive("GPU count", c)
        if isinstance(max_nodes, bool) or not isinstance(max_nodes, int) or max_nodes < 1:
            raise InputError(f"max nodes must be a positive integer, got {max_nodes!r}")
        matches = tuple((str(g), match_gpu_names(str(g))) for g in _as_tuple(self.gpu))
        return Filters(
            gpus=tuple(dict.fromkeys(name for _, names in matches for name in names)),
            gpu_matches=matches,
            providers=tuple(p.lower() for p in _as_tuple(self.provider)),
            regions=_as_tuple(self.region),
            market=market,  # type: ignore[arg-type]
            max_price_hr=self.max_price_hr,
            min_gpu_memory_gb=self.min_gpu_memory_gb,
            gpu_counts=tuple(float(c) for c in counts),
            max_nodes=max_nodes,
            cpu_arch=cpu_arch,  # type: ignore[arg-type]
        )


make_filters = keywords_of(
    FilterArgs, FilterArgs.filters, "make_filters",
    """Validated filters from the keywords of :class:`FilterArgs`.""")


@dataclass(frozen=True, kw_only=True)
class ConstraintArgs:
    """What a recommended plan must meet: finish within ``deadline_hours``, spend at most
    ``budget_usd`` (:class:`Constraints`)."""

    deadline_hours: float | None = None
    budget_usd: float | None = field(default=None, metadata=cli_dest("budget"))

    def constraints(self) -> Constraints:
        return Constraints(**_group_values(self, ConstraintArgs))


@dataclass(frozen=True, kw_only=True)
class EconomicsArgs:
    """What the job moves and how its machines behave, as :class:`JobParams` names them: the
    dataset downloaded onto each node, one checkpoint and the results copied off, GB; setup
    minutes (None: per provider and instance family); spot interruptions per node-hour (None:
    the sourced rates); the chance spot capacity is still gone after the longest wait for it,
    and that wait in hours."""

    data_gb: float = 0.0
    checkpoint_gb: float = 0.0
    results_gb: float = 0.0
    setup_minutes: float | None = field(default=None, metadata=cli_dest("setup_min"))
    interruption_rate_per_hr: float | None = field(default=None,
                                                   metadata=cli_dest("interruption_rate"))
    p_no_capacity: float = 0.0
    max_wait_capacity_hours: float = field(default=2.0, metadata=cli_dest("max_wait_hours"))

    def economics(self) -> JobParams:
        return JobParams(**_group_values(self, EconomicsArgs))

    @staticmethod
    def keywords(params: JobParams) -> dict[str, Any]:
        """The request keywords that give ``params``'s economics (the TUI's)."""
        return _group_values(params, EconomicsArgs)


def _group_values(values: Any, group: type[Any]) -> dict[str, Any]:
    """``values``' fields named as ``group``'s: the resolved type (Constraints, JobParams) and
    its keywords share their names."""
    return {f.name: getattr(values, f.name) for f in fields(group)}


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
        return local_snapshot(
            machine(self.gpu, self.gpu_count, power_w=self.power_w),
            electricity_usd_kwh=self.electricity_usd_kwh,
            amortisation_usd_hr=self.amortisation_usd_hr,
        )


@dataclass(frozen=True, kw_only=True)
class SourceArgs:
    """Which prices: ``snapshots`` as given, else ``prices`` (files or folders; default the
    newest snapshot per source) loaded; ``include_local`` adds this machine (True) or a
    described one; data older than ``stale_days`` is flagged, as of ``now`` (default: now)."""

    prices: Sequence[str | os.PathLike[str]] | None = None
    snapshots: Sequence[Snapshot] | None = field(default=None, metadata=API_ONLY)
    include_local: bool | LocalMachineArgs = False
    stale_days: float = DEFAULT_MAX_AGE_DAYS
    now: dt.datetime | None = field(default=None, metadata=API_ONLY)


# Bases in reverse: a dataclass lists its bases' fields from the last base on, so the keywords
# read job, filters, constraints, economics, sources.
@dataclass(frozen=True)
class RequestArgs(SourceArgs, EconomicsArgs, ConstraintArgs, FilterArgs, JobArgs):
    """A planning request as plain values: the keywords of :func:`build_request`,
    ``gpucost.compare`` and ``gpucost.plan``, which the command line's options and the TUI's
    form fill. ``profile``: a :class:`Profile`, a profile JSON path or an embedded example's
    name (default the ResNet-50 example). ``sort``: "cost" or "time". ``inter_node_gbps`` and
    ``inter_node_transport`` replace every offer's network between nodes (default: each offer's
    published fabric, TCP where none is published)."""

    profile: Profile | str | os.PathLike[str] | None = None
    _: KW_ONLY
    sort: str = "cost"
    inter_node_gbps: float | None = field(default=None, metadata=cli_dest("network_gbps"))
    inter_node_transport: str | None = field(default=None, metadata=cli_dest("transport"))

    def build(self) -> Request:
        """The validated request."""
        profile = self.profile
        prof = profile if isinstance(profile, Profile) else resolve_profile(profile)
        job = self.job(prof)
        if self.sort not in ("cost", "time"):
            raise InputError(f"sort must be 'cost' or 'time', got {self.sort!r}")
        check_transport(self.inter_node_transport)
        if self.inter_node_gbps is not None:
            check_positive("inter-node network Gbit/s", self.inter_node_gbps)
        filters = self.filters(profile_cpu_arch(prof) or "x86-64")
        economics = self.economics()
        constraints = self.constraints()
        loaded = (list(self.snapshots) if self.snapshots is not None
                  else load_snapshots(self.prices))
        if self.include_local:
            local = (self.include_local if isinstance(self.include_local, LocalMachineArgs)
                     else LocalMachineArgs())
            loaded.append(local.snapshot())
        return Request(prof, job, tuple(loaded), filters, economics, constraints,
                       self.sort,  # type: ignore[arg-type]
                       self.stale_days, self.now, inter_node_gbps=self.inter_node_gbps,
                       inter_node_transport=self.inter_node_transport)


build_request = keywords_of(
    RequestArgs, RequestArgs.build, "build_request",
    """One validated request from the plain values of :class:`RequestArgs`: what every front
    end calls. The job is ``epochs`` with ``dataset_size``, or ``samples``, or ``steps``
    (default: the profile's job); ``cpu_arch`` defaults to the profile's host CPU, x86-64 where
    it records none.""")


def option_dest(f: Field[Any]) -> str:
    """The command line's attribute (argparse dest) holding the keyword ``f``; "" for a keyword
    only the Python API takes."""
    return str(f.metadata.get(CLI_DEST, f.name))
