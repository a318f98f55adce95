"""The plan file: the contract between the advisor, the executor, the pre-flight check and the TUI.

A plan is one chosen offer and node count for one job, with every assumption behind its estimate
(prices and their date, throughput and its source, interruption rate, checkpoint interval, disk
size, idle policy) and the estimate's breakdown. It is TOML (read with :mod:`tomllib`, written
with ``tomli_w``), ``schema = "gpucost-plan"``, ``schema_version = 1``::

    [job]         name, command (argv list), workdir (relative to the plan file), job size ...
    [offer]       provider, region, instance_type, gpu, gpu_count (per node), nodes, market,
                  price_hr (USD/h per node)
    [workload]    profile, precision, batch_size (per device), throughput (samples/s, whole group)
    [safety]      timeout_hours and budget_cap_usd (both required: the executor's hard limits)
    [checkpoint]  enabled, every_epochs, interval_minutes, target (local:<dir> | s3://...), resume
    [spot]        interruption_rate_per_hr, max_wait_capacity_hours, fallback
    [disk]        size_gb (allocated), storage_gb_month, month_hours
    [idle]        policy (stop | destroy) after the job, expected_return_hours, breakeven_hours
    [estimate]    hours, cost_usd and its terms (compute, setup, storage, egress, ingress, spot)
    [assumptions] notes
    [marketplace] (schema_version 2; a marketplace provider's plans) the search that finds a
                  live machine like the planned one at launch: gpu_count, max_price_hr, region,
                  min_reliability, min_inet_down_mbps, min_disk_gb

Unknown keys are rejected rather than ignored: a misspelt ``budget_cap_usd`` must not silently
drop a safety limit. Every problem is a :class:`~gpucost.errors.PlanFileError` naming the
section, the field and how to fix it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import os
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpucost import providers
from gpucost._io import atomic_write_text, parse_toml, read_text
from gpucost.errors import InputError, PlanFileError
from gpucost.format import usd
from gpucost.jobname import NAME_HINT, job_name_problem
from gpucost.limits import (
    MAX_BUDGET_USD,
    MAX_DATA_GB,
    MAX_DEADLINE_HOURS,
    MAX_EPOCHS,
    MAX_GPU_MEMORY_GB,
    MAX_GPUS_PER_NODE,
    MAX_GRAD_ACCUM,
    MAX_INTERRUPTIONS_PER_HR,
    MAX_JOB_SAMPLES,
    MAX_NETWORK_GBPS,
    MAX_NODES,
    MAX_PLAN_BYTES,
    MAX_PRICE_HR_USD,
    MAX_STORAGE_USD_GB_MONTH,
)
from gpucost.measurements import MAX_SAMPLES_PER_S_PER_DEVICE

SCHEMA = "gpucost-plan"
# The first line of a plan exported as a SkyPilot task (how a later export knows it may replace it).
SKYPILOT_TASK_MARK = "# SkyPilot task written by gpucost"
SCHEMA_VERSION = 2  # 2 added [marketplace]; a plan without it is written as version 1
MARKETPLACE_SCHEMA_VERSION = 2

MARKETS = ("on-demand", "spot")
PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "amp")
# [safety] verify_action: what a slow run does (gpucost.executor.verify says each in full).
VERIFY_ACTIONS = ("warn", "stop-over-budget", "stop")
IDLE_POLICIES = ("stop", "destroy")
FALLBACKS = ("on-demand", "none")
# A disk holds the data, checkpoints and results (each at most MAX_DATA_GB) with headroom.
MAX_DISK_GB = 4 * MAX_DATA_GB
# Samples in one device's step: a million is past any batch that fits a GPU's memory, and the
# measurement store's own bound.
MAX_BATCH_PER_DEVICE = 1_000_000


def _m(
    *,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    choices: tuple[str, ...] = (),
    doc: str = "",
) -> dict[str, Any]:
    """Field metadata: the range or choices :func:`load_plan` enforces, and a hint for users."""
    return {"ge": ge, "gt": gt, "le": le, "choices": choices, "doc": doc}


@dataclass(frozen=True)
class JobSection:
    name: str = field(metadata=_m(doc="a short name for the run"))
    command: list[str] = field(metadata=_m(doc='an argv list, e.g. ["python", "train.py"]'))
    workdir: str = "."  # relative to the plan file
    entry_script: str | None = None  # the training script, for the __main__-guard check
    # Every number below is bounded by the planner's own input limits (gpucost.limits): a plan
    # past them is a damaged or hand-edited file, and the launch would overflow on it (1e308
    # epochs ran one epoch and then failed on inf) after explain and preflight had passed it.
    epochs: float | None = field(default=None, metadata=_m(gt=0, le=MAX_EPOCHS))
    dataset_size: float | None = field(  # samples per epoch
        default=None, metadata=_m(gt=0, le=MAX_JOB_SAMPLES))
    samples: float | None = field(  # epochs x dataset_size
        default=None, metadata=_m(gt=0, le=MAX_JOB_SAMPLES))
    steps: float | None = field(  # steps of the global batch
        default=None, metadata=_m(gt=0, le=MAX_JOB_SAMPLES))
    data_gb: float = field(  # dataset downloaded and kept
        default=0.0, metadata=_m(ge=0, le=MAX_DATA_GB))
    dataset_region: str | None = None
    checkpoint_gb: float = field(default=0.0, metadata=_m(ge=0, le=MAX_DATA_GB))  # one
    results_gb: float = field(  # copied off at the end
        default=0.0, metadata=_m(ge=0, le=MAX_DATA_GB))
    deadline_hours: float | None = field(default=None, metadata=_m(gt=0, le=MAX_DEADLINE_HOURS))
    budget_usd: float | None = field(default=None, metadata=_m(gt=0, le=MAX_BUDGET_USD))
    spot: bool = False  # whether spot capacity was allowed when planning


@dataclass(frozen=True)
class OfferSection:
    provider: str = field(metadata=_m(doc="a provider's name (gpucost.providers), e.g. aws, local"))
    instance_type: str = field(metadata=_m(doc="the provider's instance type"))
    gpu: str = field(metadata=_m(doc="canonical catalog name, e.g. A100 SXM4 40GB"))
    gpu_count: float = field(metadata=_m(gt=0, le=MAX_GPUS_PER_NODE, doc="GPUs per node"))
    # > 0 except on the user's own machine (provider "local"), which may cost nothing to run.
    price_hr: float = field(
        metadata=_m(ge=0, le=MAX_PRICE_HR_USD, doc="USD/h per node in the chosen market")
    )
    nodes: int = field(default=1, metadata=_m(ge=1, le=MAX_NODES))
    market: str = field(default="on-demand", metadata=_m(choices=MARKETS))
    region: str = ""
    zone: str = ""
    price_source: str = ""
    price_date: str = ""  # YYYY-MM-DD of the price data
    on_demand_price_hr: float | None = field(  # spot fallback
        default=None, metadata=_m(gt=0, le=MAX_PRICE_HR_USD)
    )
    network_gbps: float | None = field(default=None, metadata=_m(gt=0, le=MAX_NETWORK_GBPS))


@dataclass(frozen=True)
class WorkloadSection:
    # per device, the measurements' bound (gpucost.measurements): checked with the group's size
    throughput: float = field(metadata=_m(gt=0, doc="predicted samples/s, whole group"))
    profile: str = ""  # profile path or embedded example name
    profile_gpu: str = ""
    precision: str | None = field(default=None, metadata=_m(choices=PRECISIONS))
    batch_size: int | None = field(  # per device
        default=None, metadata=_m(ge=1, le=MAX_BATCH_PER_DEVICE))
    sample_unit: str = "samples"
    throughput_source: str = ""
    peak_memory_gb: float | None = field(  # per GPU
        default=None, metadata=_m(gt=0, le=MAX_GPU_MEMORY_GB))
    torch_version: str | None = None
    # How the batch fits the GPU (gpucost.planning.fit): per device per micro-step, micro-steps
    # per optimizer step, and "" (data parallel), "ZeRO-2" or "FSDP".
    micro_batch: int | None = field(default=None, metadata=_m(ge=1, le=MAX_BATCH_PER_DEVICE))
    grad_accum_steps: int = field(default=1, metadata=_m(ge=1, le=MAX_GRAD_ACCUM))
    sharding: str = field(default="", metadata=_m(choices=("", "ZeRO-2", "FSDP")))


# The executor warns, in the run's log and status.json, once the spend passes this share of
# [safety] budget_cap_usd: before the cap ends the run, while there is still time to act.
BUDGET_WARN_SHARE = 0.8


@dataclass(frozen=True)
class SafetySection:
    timeout_hours: float = field(metadata=_m(gt=0, le=MAX_DEADLINE_HOURS,
                                             doc="the executor's hard wall-clock limit"))
    budget_cap_usd: float = field(metadata=_m(gt=0, le=MAX_BUDGET_USD,
                                              doc="the executor stops the run when spent"))
    verify_margin_pct: float = field(default=25.0, metadata=_m(ge=0, le=100))
    verify_action: str = field(default="stop-over-budget", metadata=_m(choices=VERIFY_ACTIONS))


@dataclass(frozen=True)
class CheckpointSection:
    enabled: bool = False
    every_epochs: float | None = field(default=None, metadata=_m(gt=0, le=MAX_EPOCHS))
    interval_minutes: float | None = field(  # Young/Daly
        default=None, metadata=_m(gt=0, le=MAX_DEADLINE_HOURS * 60))
    target: str = "local:checkpoints"  # local:<dir> | s3://bucket/prefix
    resume: bool = True


@dataclass(frozen=True)
class SpotSection:
    interruption_rate_per_hr: float = field(default=0.0,
                                            metadata=_m(ge=0, le=MAX_INTERRUPTIONS_PER_HR))
    rate_source: str = ""
    max_wait_capacity_hours: float = field(default=0.0,
                                           metadata=_m(ge=0, le=MAX_DEADLINE_HOURS))
    fallback: str = field(default="on-demand", metadata=_m(choices=FALLBACKS))


@dataclass(frozen=True)
class DiskSection:
    size_gb: float = field(  # allocated, billed as such
        default=0.0, metadata=_m(ge=0, le=MAX_DISK_GB))
    storage_gb_month: float = field(  # USD per GB-month
        default=0.0, metadata=_m(ge=0, le=MAX_STORAGE_USD_GB_MONTH))
    month_hours: float = field(  # billing month: 730 or 720 (744: 31 days)
        default=730.0, metadata=_m(gt=0, le=744))


@dataclass(frozen=True)
class IdleSection:
    policy: str = field(default="destroy", metadata=_m(choices=IDLE_POLICIES))
    expected_return_hours: float | None = field(default=None,
                                                metadata=_m(ge=0, le=MAX_DEADLINE_HOURS))
    # computed (rebuild cost / storage per hour): cheap storage makes it long, so only finite
    breakeven_hours: float | None = field(default=None, metadata=_m(ge=0))


@dataclass(frozen=True)
class EstimateSection:
    # below [safety]'s limits, which must cover them
    hours: float = field(metadata=_m(gt=0, le=MAX_DEADLINE_HOURS,
                                     doc="wall-clock hours, setup included"))
    cost_usd: float = field(metadata=_m(ge=0, le=MAX_BUDGET_USD,
                                        doc="expected USD, the sum of the *_usd terms"))
    compute_usd: float = field(default=0.0, metadata=_m(ge=0, le=MAX_BUDGET_USD))
    setup_usd: float = field(default=0.0, metadata=_m(ge=0, le=MAX_BUDGET_USD))
    storage_usd: float = field(default=0.0, metadata=_m(ge=0, le=MAX_BUDGET_USD))
    egress_usd: float = field(default=0.0, metadata=_m(ge=0, le=MAX_BUDGET_USD))
    ingress_usd: float = field(default=0.0, metadata=_m(ge=0, le=MAX_BUDGET_USD))
    checkpoint_usd: float = field(default=0.0, metadata=_m(ge=0, le=MAX_BUDGET_USD))
    spot_rework_usd: float = field(default=0.0, metadata=_m(ge=0, le=MAX_BUDGET_USD))

    def terms(self) -> dict[str, float]:
        return {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.name.endswith("_usd") and f.name != "cost_usd"
        }


@dataclass(frozen=True)
class AssumptionsSection:
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class MarketplaceSection:
    """A marketplace (a provider that declares one) rents out machines that come and go: an
    offer id found while planning is usually gone by launch. The plan records the search
    instead; the executor runs it at launch and records which machine it got. The GPU is
    [offer] gpu."""

    gpu_count: int = field(metadata=_m(ge=1, doc="GPUs per machine"))
    max_price_hr: float = field(metadata=_m(gt=0, le=MAX_PRICE_HR_USD,
                                            doc="USD/h per machine, at most"))
    region: str = ""  # country code, e.g. "US"; empty = anywhere
    min_reliability: float = field(default=0.0, metadata=_m(ge=0, le=1))
    min_inet_down_mbps: float = field(default=0.0, metadata=_m(ge=0, le=MAX_NETWORK_GBPS * 1000))
    min_disk_gb: float = field(default=0.0, metadata=_m(ge=0, le=MAX_DISK_GB))


_SECTIONS: dict[str, type[Any]] = {
    "job": JobSection,
    "offer": OfferSection,
    "workload": WorkloadSection,
    "safety": SafetySection,
    "checkpoint": CheckpointSection,
    "spot": SpotSection,
    "disk": DiskSection,
    "idle": IdleSection,
    "estimate": EstimateSection,
    "assumptions": AssumptionsSection,
    "marketplace": MarketplaceSection,
}
_OPTIONAL_SECTIONS = frozenset({"marketplace"})  # absent = None


@dataclass(frozen=True)
class Plan:
    job: JobSection
    offer: OfferSection
    workload: WorkloadSection
    safety: SafetySection
    estimate: EstimateSection
    checkpoint: CheckpointSection = field(default_factory=CheckpointSection)
    spot: SpotSection = field(default_factory=SpotSection)
    disk: DiskSection = field(default_factory=DiskSection)
    idle: IdleSection = field(default_factory=IdleSection)
    assumptions: AssumptionsSection = field(default_factory=AssumptionsSection)
    marketplace: MarketplaceSection | None = None
    created_at: str = ""  # ISO 8601 UTC; filled by to_toml when blank

    def __post_init__(self) -> None:
        _validate_plan(self, origin="plan")

    @property
    def total_gpus(self) -> float:
        return self.offer.gpu_count * self.offer.nodes

    @property
    def total_samples(self) -> float | None:
        """Samples for the whole job, from whichever job size the plan gives."""
        job = self.job
        if job.samples is not None:
            return job.samples
        if job.epochs is not None and job.dataset_size is not None:
            return job.epochs * job.dataset_size
        if job.steps is not None and self.workload.batch_size is not None:
            return job.steps * self.workload.batch_size * self.total_gpus
        return None

    def budget_cap_text(self) -> str:
        """The budget cap in words, with where it comes from: "budget cap $300.00 (your
        budget), warned at 80 % ($240.00)"."""
        cap, budget, cost = (self.safety.budget_cap_usd, self.job.budget_usd,
                             self.estimate.cost_usd)
        if budget is not None and abs(cap - budget) < 0.01:
            basis = "your budget"
        else:
            ratio = cap / cost if cost > 0 else math.inf
            basis = (f"{ratio:.2f}x the expected {usd(cost, exact=True)}" if ratio < 100
                     else f"over 100x the expected {usd(cost, exact=True)}")
            if budget is not None:
                basis += f"; your budget is {usd(budget, exact=True)}"
        return (f"budget cap {usd(cap, exact=True)} ({basis}), warned at "
                f"{BUDGET_WARN_SHARE * 100:.0f} % ({usd(cap * BUDGET_WARN_SHARE, exact=True)})")

    def workdir(self, plan_path: str | os.PathLike[str]) -> Path:
        """The job's working folder: ``[job] workdir`` relative to the plan file's folder."""
        return (Path(plan_path).resolve().parent / self.job.workdir).resolve()

    def to_dict(self) -> dict[str, Any]:
        created = self.created_at or dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        doc: dict[str, Any] = {
            "schema": SCHEMA,
            # The oldest version that describes the file, so older readers keep reading plans
            # that use nothing newer.
            "schema_version": MARKETPLACE_SCHEMA_VERSION if self.marketplace else 1,
            "created_at": created,
        }
        for name in _SECTIONS:
            section = getattr(self, name)
            if section is None:
                continue
            doc[name] = {
                f.name: getattr(section, f.name)
                for f in dataclasses.fields(section)
                if getattr(section, f.name) is not None
            }
        return doc

    def to_toml(self) -> str:
        import tomli_w

        return str(tomli_w.dumps(self.to_dict()))


def save_plan(plan: Plan, path: str | os.PathLike[str]) -> Path:
    """Write the plan as TOML, atomically."""
    if not isinstance(plan, Plan):
        raise InputError(f"save_plan writes a Plan, got {type(plan).__name__}",
                         hint="make one from gpucost.plan()'s advice: "
                         "gpucost.save_plan(gpucost.plan_file(advice), 'plan.toml')")
    return atomic_write_text(path, plan.to_toml())


def load_plan(path: str | os.PathLike[str]) -> Plan:
    """Read and validate a plan file; any problem is a PlanFileError naming the field."""
    return parse_plan(read_plan_text(path), origin=str(path))


def read_plan_text(path: str | os.PathLike[str]) -> str:
    """A plan file's text (size and encoding checked), for :func:`parse_plan`."""
    return read_text(path, what="plan file", error=PlanFileError, max_bytes=MAX_PLAN_BYTES,
                     missing_hint="write one with `gpucost plan ... -o plan.toml`")


def parse_plan(text: str, *, origin: str = "plan") -> Plan:
    return plan_from_dict(parse_toml(text, origin=origin, error=PlanFileError), origin=origin)


def plan_from_dict(raw: Mapping[str, Any], *, origin: str = "plan") -> Plan:
    schema = raw.get("schema")
    if schema != SCHEMA:
        raise PlanFileError(
            f"{origin}: schema is {schema!r}, expected {SCHEMA!r}",
            hint=f'a plan file starts with schema = "{SCHEMA}"',
        )
    version = raw.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise PlanFileError(
            f"{origin}: schema_version is missing or not an integer",
            hint=f"add schema_version = {SCHEMA_VERSION}",
        )
    if version > SCHEMA_VERSION:
        raise PlanFileError(
            f"{origin}: schema_version {version} is newer than this gpucost "
            f"understands ({SCHEMA_VERSION})",
            hint="upgrade gpucost",
        )
    if version < 1:
        raise PlanFileError(f"{origin}: schema_version must be 1 or more, got {version}")
    created = raw.get("created_at", "")
    if isinstance(created, dt.datetime):  # TOML's unquoted datetime
        created = created.strftime("%Y-%m-%dT%H:%M:%SZ")
    if not isinstance(created, str):
        raise PlanFileError(f"{origin}: created_at must be an ISO 8601 string")
    unknown = set(raw) - {"schema", "schema_version", "created_at", *_SECTIONS}
    if unknown:
        raise PlanFileError(
            f"{origin}: unknown top-level key(s) {_names(unknown)}",
            hint="sections are " + ", ".join(f"[{s}]" for s in _SECTIONS),
        )
    sections: dict[str, Any] = {}
    for name, cls in _SECTIONS.items():
        body = raw.get(name)
        if body is None and name in _OPTIONAL_SECTIONS:
            continue
        if name == "marketplace" and version < MARKETPLACE_SCHEMA_VERSION:
            raise PlanFileError(
                f"{origin}: [marketplace] needs schema_version = {MARKETPLACE_SCHEMA_VERSION}",
                hint=f"set schema_version = {MARKETPLACE_SCHEMA_VERSION}",
            )
        if body is None:
            if _has_required(cls):
                raise PlanFileError(
                    f"{origin}: section [{name}] is missing",
                    hint=f"add [{name}] with {_required_names(cls)}",
                )
            body = {}
        if not isinstance(body, dict):
            raise PlanFileError(f"{origin}: [{name}] must be a table")
        sections[name] = _section_from_dict(cls, name, body, origin)
    try:
        return Plan(created_at=created, **sections)
    except PlanFileError as err:
        raise PlanFileError(err.message.replace("plan:", f"{origin}:", 1), hint=err.hint) from None


def _has_required(cls: type[Any]) -> bool:
    return any(_is_required(f) for f in dataclasses.fields(cls))


def _is_required(f: dataclasses.Field[Any]) -> bool:
    return f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING


def _required_names(cls: type[Any]) -> str:
    return ", ".join(f.name for f in dataclasses.fields(cls) if _is_required(f))


def _section_from_dict(cls: type[Any], section: str, body: Mapping[str, Any], origin: str) -> Any:
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = set(body) - set(fields)
    if unknown:
        raise PlanFileError(
            f"{origin}: unknown field(s) in [{section}]: {_names(unknown)}",
            hint="known: " + ", ".join(fields),
        )
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for name, f in fields.items():
        where = f"[{section}] {name}"
        if name not in body:
            if _is_required(f):
                doc = f.metadata.get("doc", "")
                raise PlanFileError(
                    f"{origin}: {where} is missing",
                    hint=f"add `{name} = ...` under [{section}]" + (f" ({doc})" if doc else ""),
                )
            continue
        values[name] = _coerce(body[name], hints[name], f"{origin}: {where}")
    return cls(**values)


def _coerce(value: Any, annotation: Any, where: str) -> Any:
    """Check a TOML value against a field's type; ints are accepted for floats."""
    args = typing.get_args(annotation)
    if isinstance(annotation, types.UnionType):  # "X | None"; None cannot come from TOML
        annotation = next(a for a in args if a is not type(None))
    if annotation is bool:
        if isinstance(value, bool):
            return value
        raise PlanFileError(f"{where} must be true or false, got {_short(value)}")
    if annotation is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise PlanFileError(f"{where} must be an integer, got {_short(value)}")
    if annotation is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        raise PlanFileError(f"{where} must be a number, got {_short(value)}")
    if annotation is str:
        if isinstance(value, str):
            return _no_nul(value, where)
        raise PlanFileError(f"{where} must be a string, got {_short(value)}")
    # list[str]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [_no_nul(v, where) for v in value]
    raise PlanFileError(f"{where} must be a list of strings, got {_short(value)}")


def _no_nul(text: str, where: str) -> str:
    # No file name, argument or environment variable can hold a NUL: refuse it here, not when
    # the job starts.
    if "\0" in text:
        raise PlanFileError(f"{where} contains a NUL character", hint="remove it")
    return text


def _names(keys: set[str]) -> str:
    """Key names for a message: plain ones as they are, odd ones (spaces, newlines) quoted."""
    return ", ".join(k if k.isidentifier() else repr(k) for k in sorted(keys))


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."



def _check_field(section: Any, f: dataclasses.Field[Any], where: str) -> None:
    value = getattr(section, f.name)
    if value is None or isinstance(value, bool):
        return
    meta = f.metadata
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise PlanFileError(f"{where} must be a finite number, got {_short(value)}")
        if value == 0 and math.copysign(1.0, value) < 0:
            raise PlanFileError(f"{where} is -0", hint="write 0, or the value meant")
        for key, words in (("ge", ">="), ("gt", ">"), ("le", "<=")):
            limit = meta.get(key)
            if limit is None:
                continue
            ok = value >= limit if key == "ge" else value > limit if key == "gt" else value <= limit
            if not ok:
                allowed = " and ".join(f"{w} {meta[k]:g}" for k, w in (
                    ("ge", ">="), ("gt", ">"), ("le", "<=")) if meta.get(k) is not None)
                doc = meta.get("doc")
                raise PlanFileError(
                    f"{where} = {_short(value)} is out of range (must be {words} {limit:g})",
                    hint=f"allowed: {allowed}" + (f"; {doc}" if doc else ""),
                )
    choices = meta.get("choices")
    if choices and value not in choices:
        raise PlanFileError(f"{where} = {_short(value)} is not one of {', '.join(choices)}")


def _validate_plan(plan: Plan, *, origin: str) -> None:
    for name in _SECTIONS:
        section = getattr(plan, name)
        if section is None:
            continue
        for f in dataclasses.fields(section):
            _check_field(section, f, f"{origin}: [{name}] {f.name}")
    job, offer = plan.job, plan.offer
    if not job.command or not all(job.command):
        raise PlanFileError(
            f"{origin}: [job] command is empty",
            hint='give an argv list, e.g. command = ["python", "train.py"]',
        )
    if problem := job_name_problem(job.name):
        raise PlanFileError(f"{origin}: [job] name = {job.name!r} is refused: {problem}",
                            hint=NAME_HINT)
    if plan.total_samples is None:
        raise PlanFileError(
            f"{origin}: [job] has no job size",
            hint="give samples, or epochs with dataset_size, or steps with [workload] batch_size",
        )
    if plan.total_samples > MAX_JOB_SAMPLES:
        raise PlanFileError(
            f"{origin}: [job] size is {plan.total_samples:.3g} samples, over the "
            f"{MAX_JOB_SAMPLES:g} a plan may hold",
            hint="the largest published training runs are ~1.5e13 tokens: check the job size",
        )
    most = MAX_SAMPLES_PER_S_PER_DEVICE * plan.total_gpus
    if plan.workload.throughput > most:
        raise PlanFileError(
            f"{origin}: [workload] throughput = {plan.workload.throughput:.3g} is out of range "
            f"(must be <= {most:g} for {plan.total_gpus:g} GPU(s))",
            hint=f"allowed: > 0 and <= {MAX_SAMPLES_PER_S_PER_DEVICE:g} samples/s per GPU",
        )
    target = plan.checkpoint.target
    if not (target.startswith("local:") or target.startswith("s3://")):
        raise PlanFileError(
            f"{origin}: [checkpoint] target = {target!r} is not understood",
            hint="use local:<dir> or s3://bucket/prefix",
        )
    if offer.price_hr == 0 and offer.provider != "local":
        raise PlanFileError(
            f"{origin}: [offer] price_hr = 0 for a {offer.provider} machine",
            hint="a rented machine is not free: give its USD/h per node",
        )
    if offer.market == "spot" and offer.provider == "local":
        raise PlanFileError(
            f"{origin}: [offer] market = 'spot' makes no sense for provider 'local'",
            hint='use market = "on-demand"',
        )
    search = plan.marketplace
    if search is not None and offer.provider not in providers.marketplaces():
        raise PlanFileError(
            f"{origin}: [marketplace] is for {' and '.join(providers.marketplaces())} plans, not "
            f"{offer.provider!r}",
            hint="remove [marketplace]: this provider's instance_type names the machine",
        )
    if search is not None and search.gpu_count != round(offer.gpu_count):
        raise PlanFileError(
            f"{origin}: [marketplace] gpu_count = {search.gpu_count} but [offer] gpu_count = "
            f"{offer.gpu_count:g}",
            hint="search for machines like the planned one: make them equal",
        )
    est = plan.estimate
    terms = est.terms()
    total = sum(terms.values())
    # Terms are optional (a hand-written plan may give only the total), but if given they
    # must add up: a total edited without its terms would mislead the budget checks.
    if total > 0 and abs(total - est.cost_usd) > 0.01 + 0.005 * est.cost_usd:
        raise PlanFileError(
            f"{origin}: [estimate] cost_usd = {est.cost_usd:g} but its terms add up to {total:.2f}",
            hint="make cost_usd the sum of the *_usd terms, or regenerate the "
            "plan with `gpucost plan`",
        )
    if plan.safety.budget_cap_usd < est.cost_usd:
        raise PlanFileError(
            f"{origin}: [safety] budget_cap_usd = {plan.safety.budget_cap_usd:g} "
            f"is below the estimate's cost_usd = {est.cost_usd:g}",
            hint="raise budget_cap_usd: the executor would stop the run before it could finish",
        )
    if plan.safety.timeout_hours < est.hours:
        raise PlanFileError(
            f"{origin}: [safety] timeout_hours = {plan.safety.timeout_hours:g} "
            f"is below the estimate's hours = {est.hours:g}",
            hint="raise timeout_hours: the run would be killed before it ends",
        )
