"""Workload profiles: what one training step costs, measured or taken from a cited source.

A profile is a versioned JSON document (``profiles/schema.json`` is its JSON Schema). The
performance model reads it to predict throughput on other GPUs and node counts; the profiler
writes it; users may write one by hand or with :meth:`Profile.from_measurement`.

Units: seconds, bytes, GB (1e9 bytes), samples (the profile's ``sample_unit``: images,
sequences, tokens). ``batch_size`` is per device; ``throughput`` is samples/s over all
``device_count`` devices of the measurement.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from gpucost._io import atomic_write_json, parse_json, read_text
from gpucost.catalog import resolve_gpu_name
from gpucost.catalog.spec import HALF_MODEL_PRECISIONS, PRECISIONS, Precision
from gpucost.errors import ProfileError
from gpucost.jobname import name_from_label
from gpucost.limits import MAX_BATCH_SIZE, MAX_GPUS_PER_NODE, MAX_NODES, MAX_PROFILE_BYTES
from gpucost.measurement_store import record_profile
from gpucost.model.signature import from_spec
from gpucost.paths import embedded_profiles_dir

SCHEMA_VERSION = 1
SCHEMA_ID = "gpucost-profile"

VERDICTS = ("dataloader-bound", "host-bound", "compute-bound", "memory-bound", "unknown")


@dataclass(frozen=True, slots=True)
class StepBreakdown:
    """Where one optimizer step's wall time goes, seconds. Parts sum to about the step time."""

    data_s: float = 0.0  # waiting for the next batch (loader)
    host_s: float = 0.0  # Python and kernel-launch overhead the device waits on
    compute_s: float = 0.0  # forward + backward on the device
    optimizer_s: float = 0.0  # optimizer.step()
    communication_s: float = 0.0  # gradient sync not hidden behind backward

    @property
    def total_s(self) -> float:
        return self.data_s + self.host_s + self.compute_s + self.optimizer_s + self.communication_s


@dataclass(frozen=True, slots=True)
class OperatorStat:
    """One operator's share of a step, summed over its calls in one step."""

    name: str
    calls: int
    time_s: float
    flops: float = 0.0
    bytes_moved: float = 0.0


@dataclass(frozen=True, slots=True)
class Verdict:
    kind: str  # one of VERDICTS
    reason: str
    advice: str


@dataclass(frozen=True, slots=True)
class Profile:
    """A training step's measured cost on one GPU type (see module docstring for units)."""

    gpu: str  # canonical catalog name, or "CPU"
    precision: Precision
    batch_size: int  # per device
    step_time_s: float  # median after warm-up
    param_count: float
    name: str = "unnamed"
    description: str = ""
    source: str = ""  # citation, or how it was measured
    sample_unit: str = "samples"
    device_count: int = 1
    step_time_p10_s: float | None = None
    step_time_p90_s: float | None = None
    flops_per_sample: float | None = None  # forward + backward
    bytes_per_step: float | None = None  # device memory traffic per step
    # the part of bytes_per_step that does not grow with the batch (weights read, weight
    # gradients, optimizer states, zero fills; the profiler's census); None: not counted
    step_bytes: float | None = None
    param_bytes: float | None = None
    grad_bytes: float | None = None  # bytes all-reduced per step
    peak_memory_gb: float | None = None
    breakdown: StepBreakdown | None = None
    operators: tuple[OperatorStat, ...] = ()
    verdict: Verdict | None = None
    max_batch_size: int | None = None  # from the batch probe
    dataset_size: int | None = None  # samples per epoch of the typical job (a default for compare)
    epochs: float | None = None  # epochs of the typical job (a default for compare)
    environment: Mapping[str, Any] = field(default_factory=dict)
    nvml: Mapping[str, Any] = field(default_factory=dict)
    measured_at: str | None = None  # ISO 8601
    steps_measured: int | None = None
    partial: bool = False  # True when the run ended before the planned steps
    # The op-class mix (gpucost.model.signature): a built-in architecture name ("vit",
    # "seq2seq-rnn"...) or an explicit mix of flops shares per class; None: matched by name.
    workload: str | Mapping[str, float] | None = None
    launches_per_step: float | None = None  # kernels one step launches (counted by the profiler)
    # (per-device batch, step seconds) measured on the same GPU and group at batches other than
    # batch_size: with them the step's fixed and per-sample parts are measured, not modelled.
    other_batches: tuple[tuple[int, float], ...] = ()
    # A profile that is itself a prediction (gpucost.measurements: a compute/memory mix fitted on
    # several measured GPUs) is banded as a translation from the nearest measured GPU, not as a
    # measurement on its own gpu; None: its own gpu.
    band_gpu: str | None = None

    def __post_init__(self) -> None:
        _validate(self)

    # ---- derived quantities -------------------------------------------------------------
    @property
    def throughput(self) -> float:
        """Samples per second over all devices of the measurement."""
        return self.batch_size * self.device_count / self.step_time_s

    @property
    def gradient_bytes(self) -> float:
        """Bytes each device all-reduces per step: as measured, else a gradient per parameter,
        in 2 bytes for a model in half precision (its gradients are), 4 otherwise."""
        if self.grad_bytes is not None:
            return self.grad_bytes
        return (2.0 if self.precision in HALF_MODEL_PRECISIONS else 4.0) * self.param_count

    @property
    def flops_per_step(self) -> float | None:
        if self.flops_per_sample is None:
            return None
        return self.flops_per_sample * self.batch_size

    # ---- construction -------------------------------------------------------------------
    @classmethod
    def from_measurement(
        cls,
        *,
        gpu: str,
        throughput: float,
        batch_size: int,
        precision: str,
        param_count: float,
        flops_per_sample: float | None = None,
        device_count: int = 1,
        name: str = "measurement",
        source: str = "user-supplied measurement",
        sample_unit: str = "samples",
        peak_memory_gb: float | None = None,
        workload: str | Mapping[str, float] | None = None,
        other_batches: Mapping[int, float] | None = None,
    ) -> Profile:
        """A profile from a published or hand-measured throughput (samples/s over all devices).

        ``batch_size`` is per device. The GPU name is resolved against the catalog.
        ``other_batches``: throughput (samples/s over all devices) measured on the same GPUs at
        other per-device batches, ``{64: 700.0}``; with one or more, a prediction at another
        batch uses the step's measured fixed and per-sample parts instead of modelled ones.

        ``precision`` is what the framework ran, as PyTorch runs it: ``"fp32"`` is PyTorch's
        default float32 (matmuls and linear layers on CUDA cores at the plain FP32 rate, cuDNN
        convolutions on TF32 tensor cores where the GPU has them); ``"tf32"`` is TF32 for
        both (``torch.backends.cuda.matmul.allow_tf32 = True`` or
        ``torch.set_float32_matmul_precision("high")``; NVIDIA's NGC containers set it);
        ``"amp"``/``"fp16"``/``"bf16"`` run matmuls and convolutions on the half-precision
        tensor cores: ``"amp"`` is autocast over fp32 weights (``torch.autocast``, Hugging Face's
        ``fp16=True``), whose gradients stay fp32; ``"fp16"``/``"bf16"`` the model itself in
        half precision (``model.half()``, apex's O2, DeepSpeed's fp16), whose activations and
        gradients take 2 bytes.

        ``workload`` says what the step is made of, so each part is translated by what bounds
        it on another GPU: a built-in architecture (``"cnn-classifier"``, ``"vit"``,
        ``"encoder-only"``, ``"decoder-only"``, ``"encoder-decoder"``, ``"seq2seq-rnn"``,
        ``"conv-tts"``, ``"flow-audio"``, ``"detection"``, ``"two-stage-detection"``,
        ``"unet"``, ``"mlp-recommender"``)
        or an explicit mix of flops shares per op class (``{"gemm": 0.6, "attention": 0.1,
        "recurrent": 0.3}``, optionally with ``bytes_per_flop`` and ``launches_per_step``).
        Without it the profile's ``name`` is matched against the built-ins ("resnet50",
        "my-gpt2-run").
        """
        if not (
            isinstance(throughput, int | float) and throughput > 0 and math.isfinite(throughput)
        ):
            raise ProfileError(
                f"throughput must be a positive number of samples/s, got {throughput!r}"
            )
        if not isinstance(batch_size, int) or batch_size <= 0:
            raise ProfileError(f"batch_size must be a positive integer, got {batch_size!r}")
        if not isinstance(device_count, int) or device_count <= 0:
            raise ProfileError(f"device_count must be a positive integer, got {device_count!r}")
        step = batch_size * device_count / float(throughput)
        others = []
        for batch, rate in (other_batches or {}).items():
            if not (isinstance(rate, int | float) and rate > 0 and math.isfinite(rate)):
                raise ProfileError(f"other_batches: throughput at batch {batch!r} must be a "
                                   f"positive number of samples/s, got {rate!r}")
            others.append((batch, batch * device_count / float(rate)))
        return cls(
            gpu=resolve_gpu_name(gpu),
            precision=_check_precision(precision),
            batch_size=batch_size,
            step_time_s=step,
            param_count=float(param_count),
            name=name,
            source=source,
            sample_unit=sample_unit,
            device_count=device_count,
            flops_per_sample=flops_per_sample,
            peak_memory_gb=peak_memory_gb,
            workload=workload,
            other_batches=tuple(sorted(others)),
        )

    def with_changes(self, **changes: Any) -> Profile:
        return replace(self, **changes)

    # ---- serialisation ------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        body = asdict(self)
        body["operators"] = [asdict(op) for op in self.operators]
        body["environment"] = dict(self.environment)
        body["nvml"] = dict(self.nvml)
        if isinstance(self.workload, Mapping):
            body["workload"] = dict(self.workload)
        body["throughput"] = self.throughput
        if self.band_gpu is None:  # only derived profiles carry it; saved files stay as they were
            del body["band_gpu"]
        if not self.other_batches:  # likewise: only profiles measured at several batches
            del body["other_batches"]
        if self.step_bytes is None:  # and only profiles whose census counted it
            del body["step_bytes"]
        return {"schema": SCHEMA_ID, "schema_version": SCHEMA_VERSION, **body}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, origin: str = "profile") -> Profile:
        if not isinstance(data, Mapping):
            raise ProfileError(f"{origin}: a profile must be a JSON object")
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise ProfileError(
                f"{origin}: schema_version {version!r} is not supported",
                hint=f"this gpucost reads schema_version {SCHEMA_VERSION}; re-create the profile",
            )
        body = {
            k: v for k, v in data.items() if k not in ("schema", "schema_version", "throughput")
        }
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(body) - known)
        if unknown:
            raise ProfileError(
                f"{origin}: unknown field(s) {', '.join(unknown)}",
                hint="see profiles/schema.json for the fields a profile may hold",
            )
        missing = [k for k in ("gpu", "precision", "batch_size", "param_count") if k not in body]
        if "step_time_s" not in body:
            if "throughput" in data and "batch_size" in body:
                try:
                    devices = int(body.get("device_count", 1))
                    body["step_time_s"] = (
                        int(body["batch_size"]) * devices / float(data["throughput"])
                    )
                except (TypeError, ValueError, ZeroDivisionError) as exc:
                    raise ProfileError(f"{origin}: throughput must be a positive number") from exc
            else:
                missing.append("step_time_s (or throughput)")
        if missing:
            raise ProfileError(
                f"{origin}: missing field(s) {', '.join(missing)}", hint="see profiles/schema.json"
            )
        try:
            if body.get("breakdown") is not None:
                body["breakdown"] = StepBreakdown(**body["breakdown"])
            body["operators"] = tuple(OperatorStat(**op) for op in body.get("operators") or ())
            body["other_batches"] = _batch_steps(body.get("other_batches") or ())
            if body.get("verdict") is not None:
                body["verdict"] = Verdict(**body["verdict"])
        except TypeError as exc:
            raise ProfileError(f"{origin}: malformed nested field: {exc}") from exc
        try:
            return cls(**body)
        except ProfileError as exc:
            raise ProfileError(f"{origin}: {exc.message}", hint=exc.hint) from None
        except TypeError as exc:
            raise ProfileError(f"{origin}: {exc}") from exc

    def save(self, path: str | os.PathLike[str]) -> Path:
        written = atomic_write_json(path, self.to_dict())
        if self.steps_measured is not None and not self.partial:  # measured by the profiler
            record_profile(self)  # the user's own runs teach the model
        return written

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Profile:
        text = read_text(
            path, what="profile file", error=ProfileError, max_bytes=MAX_PROFILE_BYTES,
            missing_hint="pass a path to a .json profile, or an example name: "
            + ", ".join(example_names()),
        )
        data = parse_json(text, origin=f"profile {path}", error=ProfileError)
        return cls.from_dict(data, origin=str(path))


MAX_OTHER_BATCHES = 16


def _batch_steps(value: object) -> tuple[tuple[int, float], ...]:
    """``other_batches`` as a tuple of (batch, step seconds) pairs, from JSON's lists."""
    if not isinstance(value, list | tuple) or len(value) > MAX_OTHER_BATCHES:
        raise ProfileError(f"other_batches must be a list of at most {MAX_OTHER_BATCHES} "
                           "[batch, step seconds] pairs")
    pairs = []
    for item in value:
        if not isinstance(item, list | tuple) or len(item) != 2:
            raise ProfileError(f"other_batches entry {item!r} is not a [batch, step seconds] pair")
        pairs.append((item[0], item[1]))
    return tuple(pairs)


def _check_other_batches(p: Profile) -> None:
    seen = {p.batch_size}
    for batch, step in _batch_steps(p.other_batches):
        if (isinstance(batch, bool) or not isinstance(batch, int)
                or not 0 < batch <= MAX_BATCH_SIZE or batch in seen):
            raise ProfileError(f"other_batches: batch {batch!r} must be a positive integer other "
                               "than batch_size and the other entries'")
        _positive(f"other_batches step time at batch {batch}", step)
        seen.add(batch)


def _check_precision(value: object) -> Precision:
    if value not in PRECISIONS:
        raise ProfileError(f"precision {value!r} is not one of {', '.join(PRECISIONS)}")
    return value


def _positive(name: str, value: object, *, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ProfileError(f"{name} must be a positive number, got {value!r}")


# The longest a profile's text fields may be, characters.
_TEXT_LIMITS = {"name": 200, "description": 2000, "source": 2000, "sample_unit": 64}


def _validate(p: Profile) -> None:
    if not isinstance(p.gpu, str) or not p.gpu:
        raise ProfileError("gpu must be a GPU name such as 'A100 SXM4 80GB' (or 'CPU')")
    if p.gpu != "CPU":
        canonical = resolve_gpu_name(p.gpu)
        if canonical != p.gpu:
            object.__setattr__(p, "gpu", canonical)
    if p.band_gpu is not None:
        if not isinstance(p.band_gpu, str) or not p.band_gpu or p.band_gpu == "CPU":
            raise ProfileError("band_gpu must be a GPU name such as 'A100 SXM4 80GB', or null")
        object.__setattr__(p, "band_gpu", resolve_gpu_name(p.band_gpu))
    _check_precision(p.precision)
    if (isinstance(p.batch_size, bool) or not isinstance(p.batch_size, int)
            or not 0 < p.batch_size <= MAX_BATCH_SIZE):
        raise ProfileError(f"batch_size must be a positive integer (per device) of at most "
                           f"{MAX_BATCH_SIZE:,}, got {p.batch_size!r}")
    if (
        isinstance(p.device_count, bool)
        or not isinstance(p.device_count, int)
        or not 0 < p.device_count <= MAX_NODES * MAX_GPUS_PER_NODE
    ):
        raise ProfileError(f"device_count must be a positive integer of at most "
                           f"{MAX_NODES * MAX_GPUS_PER_NODE:,}, got {p.device_count!r}")
    _positive("step_time_s", p.step_time_s)
    _positive("param_count", p.param_count)
    if p.workload is not None:
        from_spec(p.workload)  # raises ProfileError naming the built-ins
    if p.launches_per_step is not None:
        _positive("launches_per_step", p.launches_per_step)
    _check_other_batches(p)
    for name in (
        "step_time_p10_s",
        "step_time_p90_s",
        "flops_per_sample",
        "bytes_per_step",
        "param_bytes",
        "grad_bytes",
        "peak_memory_gb",
    ):
        _positive(name, getattr(p, name), allow_none=True)
    if (p.step_time_p10_s is not None and p.step_time_p90_s is not None
            and p.step_time_p90_s < p.step_time_p10_s):
        raise ProfileError(f"step_time_p90_s ({p.step_time_p90_s!r}) is below step_time_p10_s "
                           f"({p.step_time_p10_s!r}): the 90th percentile of the step times "
                           "cannot be shorter than the 10th")
    # 0 is a count: a step that moves no parameter-shaped tensor (its parameters unused)
    if p.step_bytes is not None and (
            isinstance(p.step_bytes, bool) or not isinstance(p.step_bytes, int | float)
            or not 0.0 <= p.step_bytes <= (p.bytes_per_step or 0.0) * (1 + 1e-9)):
        raise ProfileError(f"step_bytes must be between 0 and bytes_per_step "
                           f"({p.bytes_per_step!r}), got {p.step_bytes!r}",
                           hint="step_bytes is the part of bytes_per_step that does not grow "
                           "with the batch")
    _positive("dataset_size", p.dataset_size, allow_none=True)
    _positive("epochs", p.epochs, allow_none=True)
    if p.max_batch_size is not None and (
        not isinstance(p.max_batch_size, int) or p.max_batch_size <= 0
    ):
        raise ProfileError(f"max_batch_size must be a positive integer, got {p.max_batch_size!r}")
    for name in ("name", "description", "source", "sample_unit"):
        if not isinstance(getattr(p, name), str):
            raise ProfileError(f"{name} must be a string, got {type(getattr(p, name)).__name__}")
        # Every plan's notes and table cells repeat these: a 100,000-character unit made compare
        # quadratic. The bounds are far above any real unit, name or citation.
        if len(getattr(p, name)) > _TEXT_LIMITS[name]:
            raise ProfileError(f"{name} is {len(getattr(p, name)):,} characters; at most "
                               f"{_TEXT_LIMITS[name]:,} are allowed",
                               hint=f"shorten the profile's {name}")
    if p.measured_at is not None and not isinstance(p.measured_at, str):
        raise ProfileError("measured_at must be an ISO 8601 string")
    if not isinstance(p.partial, bool):
        raise ProfileError(f"partial must be true or false, got {p.partial!r}")
    if p.steps_measured is not None and (
        isinstance(p.steps_measured, bool) or not isinstance(p.steps_measured, int)
    ):
        raise ProfileError(f"steps_measured must be an integer, got {p.steps_measured!r}")
    for name in ("environment", "nvml"):
        if not isinstance(getattr(p, name), Mapping):
            raise ProfileError(f"{name} must be an object")
    for i, op in enumerate(p.operators):
        if not isinstance(op.name, str) or isinstance(op.calls, bool) \
                or not isinstance(op.calls, int) or op.calls < 0:
            raise ProfileError(f"operators[{i}] needs a name (string) and calls (integer >= 0)")
        for part in ("time_s", "flops", "bytes_moved"):
            _non_negative(f"operators[{i}].{part}", getattr(op, part))
    if p.verdict is not None and not all(
        isinstance(v, str) for v in (p.verdict.kind, p.verdict.reason, p.verdict.advice)
    ):
        raise ProfileError("verdict.kind, verdict.reason and verdict.advice must be strings")
    if p.verdict is not None and p.verdict.kind not in VERDICTS:
        raise ProfileError(f"verdict.kind {p.verdict.kind!r} is not one of {', '.join(VERDICTS)}")
    if p.breakdown is not None:
        for part, value in asdict(p.breakdown).items():
            _non_negative(f"breakdown.{part}", value)


def _non_negative(name: str, value: object) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
    ):
        raise ProfileError(f"{name} must be a number >= 0, got {value!r}")


def default_profile_path(name: str) -> Path:
    """Where a profile named ``name`` is written unless told: ``profiles/<name>.json``, the name
    (a label: "GNMT v2", "bert-large/squad") made one file's name that stays in profiles/."""
    return Path("profiles") / f"{name_from_label(name, 'profile')}.json"


def resolve_profile(ref: str | os.PathLike[str] | None) -> Profile:
    """A profile from a path, or from the name of an example in the embedded ``profiles/``."""
    if ref is None:
        ref = DEFAULT_PROFILE
    path = Path(ref)
    if path.suffix == ".json" or path.exists():
        return Profile.load(path)
    candidate = embedded_profiles_dir() / f"{ref}.json"
    if candidate.exists():
        return Profile.load(candidate)
    raise ProfileError(
        f"no profile file or example named {str(ref)!r}",
        hint="examples: " + ", ".join(example_names()),
    )


def example_names() -> list[str]:
    """The names of the example profiles shipped with gpucost (`--profile NAME`)."""
    return sorted(p.stem for p in embedded_profiles_dir().glob("*.json") if p.stem != "schema")


DEFAULT_PROFILE = "resnet50-v100-amp"
