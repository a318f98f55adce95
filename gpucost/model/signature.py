"""Workload signatures: what a training step is made of, by operator class.

A signature says, per flop of one sample, how a step splits over operator classes: the share of
its flops in tensor-core GEMMs (``gemm``), convolutions (``conv``), recurrent cells
(``recurrent``) and attention (``attention``), the device-memory bytes it moves (elementwise and
normalisation, embedding gathers and the optimizer move bytes, not flops), and how many kernels
it launches per step. The translation (``translate``) times each class by what bounds it on a
GPU: compute classes by the unit that runs them at the step's precision, memory classes by
bandwidth, launches by a per-kernel cost.

Built-in signatures (``signatures.json``) come from profiling real PyTorch model definitions on
CPU, one step under the profiler's operator census (``scripts/build_signatures.py``, which
records the model, its size and the torch version); nothing there is a throughput measurement.
A profile picks one by ``Profile.workload`` (a built-in name or an explicit mix), else by its
name and description (users name profiles after their models), else none.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from gpucost.errors import ProfileError

SIGNATURES_PATH = Path(__file__).with_name("signatures.json")

COMPUTE_CLASSES = ("gemm", "conv", "recurrent", "attention")
MEMORY_CLASSES = ("elementwise", "embedding", "optimizer")
OP_CLASSES = COMPUTE_CLASSES + MEMORY_CLASSES

# ATen operator names (torch.profiler's spelling) by class; everything else that moves bytes is
# elementwise/normalisation.
_OP_CLASS = {
    "aten::mm": "gemm", "aten::addmm": "gemm", "aten::bmm": "gemm", "aten::baddbmm": "gemm",
    "aten::linear": "gemm", "aten::matmul": "gemm", "aten::_scaled_mm": "gemm",
    "aten::convolution": "conv", "aten::convolution_backward": "conv",
    "aten::cudnn_convolution": "conv", "aten::_convolution": "conv",
    "aten::mkldnn_convolution": "conv",
    "aten::_cudnn_rnn": "recurrent", "aten::_cudnn_rnn_backward": "recurrent",
    "aten::mkldnn_rnn_layer": "recurrent", "aten::mkldnn_rnn_layer_backward": "recurrent",
    "aten::lstm": "recurrent", "aten::gru": "recurrent", "aten::_thnn_fused_lstm_cell": "recurrent",
    "aten::_thnn_fused_gru_cell": "recurrent",
    "aten::embedding": "embedding", "aten::embedding_dense_backward": "embedding",
    "aten::embedding_backward": "embedding", "aten::_embedding_bag": "embedding",
    "aten::_embedding_bag_backward": "embedding", "aten::index_select": "embedding",
    "aten::_embedding_bag_dense_backward": "embedding",
}
_ATTENTION_PREFIXES = ("aten::_scaled_dot_product", "aten::scaled_dot_product",
                       "aten::_flash_attention", "aten::_efficient_attention")
_OPTIMIZER_PREFIXES = ("aten::_foreach_", "aten::_fused_adam", "aten::_fused_sgd")


def op_class(name: str) -> str:
    """The class of an ATen operator (``aten::addmm`` -> ``gemm``)."""
    cls = _OP_CLASS.get(name)
    if cls is not None:
        return cls
    if name.startswith(_ATTENTION_PREFIXES):
        return "attention"
    if name.startswith(_OPTIMIZER_PREFIXES):
        return "optimizer"
    return "elementwise"


def by_class(counts: Mapping[str, float]) -> defaultdict[str, float]:
    """Per-operator counts (flops, bytes) summed per op class (0 for a class with none)."""
    totals: defaultdict[str, float] = defaultdict(float)
    for name, n in counts.items():
        totals[op_class(name)] += n
    return totals


@dataclass(frozen=True, slots=True)
class Signature:
    """A workload's op-class mix, per flop of one sample (forward + backward)."""

    name: str
    flops_share: Mapping[str, float]  # compute class -> share of the flops (sums to 1)
    bytes_per_flop: float  # device-memory bytes per flop that grow with the batch
    step_bytes_per_flop: float  # bytes a step moves once (optimizer), over flops per sample
    launches_per_step: float  # kernels one step launches (forward, backward, optimizer)
    flops_per_sample: float | None = None  # of the model the signature was profiled on
    match: tuple[str, ...] = ()  # name tokens that select it
    description: str = ""
    # What one sample adds to the profiled model's training-step peak, bytes in fp32 and in a
    # mixed-precision step as CUDA's autocast runs it (GEMM and convolution outputs in half
    # precision, layer norms, softmaxes and the loss in fp32), and its parameter count: the
    # activation estimate of a profile that measured no peak memory.
    activation_bytes_per_sample: float | None = None
    activation_bytes_per_sample_amp: float | None = None
    params: float | None = None
    # The GEMM-like and convolution work as (rows per sample, output columns, share of those
    # flops): how many output tiles a micro-batch gives a GPU (wave quantisation).
    gemm_shapes: tuple[tuple[float, float, float], ...] = ()
    # Of the launches, those a library starts inside one framework call (cuDNN's kernels per
    # RNN time step): they cost a driver launch, not the framework's Python and dispatch.
    library_launches_per_step: float = 0.0
    # Whether its data loader reads a whole batch per call (rows of a binary table: DLRM's
    # Criteo loaders) rather than one item per call with Python per sample (images, text,
    # audio): such a step pays no data-pipeline time per sample.
    batch_loaded: bool = False

    def __post_init__(self) -> None:
        unknown = sorted(set(self.flops_share) - set(COMPUTE_CLASSES))
        total = sum(self.flops_share.values())
        if unknown or not self.flops_share or any(v < 0 for v in self.flops_share.values()) \
                or abs(total - 1.0) > 1e-3:
            raise ProfileError(
                f"workload mix {dict(self.flops_share)} is not a share of flops per compute class",
                hint="give shares (summing to 1) over " + ", ".join(COMPUTE_CLASSES))
        if (self.bytes_per_flop < 0 or self.step_bytes_per_flop < 0 or self.launches_per_step < 0
                or not 0 <= self.library_launches_per_step <= self.launches_per_step):
            raise ProfileError(f"workload {self.name!r}: bytes and launches must be >= 0")

    def share(self, cls: str) -> float:
        return float(self.flops_share.get(cls, 0.0))

    @property
    def dispatched_launches_per_step(self) -> float:
        """Launches the framework dispatches itself, one operator each."""
        return self.launches_per_step - self.library_launches_per_step

    def launch_host_s(self, per_dispatch_s: float, per_launch_s: float) -> float:
        """Host seconds a step's launches cost: ``per_dispatch_s`` for each the framework
        dispatches, ``per_launch_s`` (a driver launch) for each a library starts."""
        return (self.dispatched_launches_per_step * per_dispatch_s
                + self.library_launches_per_step * per_launch_s)

    def to_dict(self) -> dict[str, Any]:
        return {"flops_share": dict(self.flops_share), "bytes_per_flop": self.bytes_per_flop,
                "step_bytes_per_flop": self.step_bytes_per_flop,
                "launches_per_step": self.launches_per_step}


def _from_entry(name: str, entry: Mapping[str, Any]) -> Signature:
    return Signature(
        name=name,
        flops_share={k: float(v) for k, v in entry["flops_share"].items()},
        bytes_per_flop=float(entry["bytes_per_flop"]),
        step_bytes_per_flop=float(entry.get("step_bytes_per_flop", 0.0)),
        launches_per_step=float(entry.get("launches_per_step", 0.0)),
        flops_per_sample=(float(entry["flops_per_sample"]) if "flops_per_sample" in entry
                          else None),
        match=tuple(entry.get("match", ())),
        description=str(entry.get("description", "")),
        activation_bytes_per_sample=(float(entry["activation_bytes_per_sample"])
                                     if "activation_bytes_per_sample" in entry else None),
        activation_bytes_per_sample_amp=(float(entry["activation_bytes_per_sample_amp"])
                                         if "activation_bytes_per_sample_amp" in entry else None),
        params=(float(entry["profiled"]["params"]) if "params" in entry.get("profiled", {})
                else None),
        gemm_shapes=tuple((float(r), float(c), float(w))
                          for r, c, w in entry.get("gemm_shapes", ())),
        library_launches_per_step=float(entry.get("library_launches_per_step", 0.0)),
        batch_loaded=bool(entry.get("batch_loaded", False)),
    )


@cache
def builtin() -> dict[str, Signature]:
    """The shipped signatures by architecture name."""
    with SIGNATURES_PATH.open(encoding="utf-8") as fh:
        data: dict[str, Any] = json.load(fh)
    return {name: _from_entry(name, entry) for name, entry in data["signatures"].items()}


def from_spec(spec: str | Mapping[str, Any]) -> Signature:
    """A built-in signature by name, or one from an explicit mix: ``{"gemm": 0.7, "attention":
    0.3}`` (flops shares) with optional ``bytes_per_flop``, ``step_bytes_per_flop`` and
    ``launches_per_step`` (missing ones: the built-ins' medians) and ``flops_per_sample``."""
    signatures = builtin()
    if isinstance(spec, str):
        sig = signatures.get(spec)
        if sig is None:
            raise ProfileError(f"unknown workload {spec!r}",
                               hint="built-in workloads: " + ", ".join(sorted(signatures)))
        return sig
    if not isinstance(spec, Mapping):
        raise ProfileError(f"workload must be a built-in name or a mapping, got {spec!r}")
    extras = ("bytes_per_flop", "step_bytes_per_flop", "launches_per_step", "flops_per_sample")
    shares = {k: v for k, v in spec.items() if k not in extras}
    for key, value in spec.items():
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise ProfileError(f"workload mix: {key!r} must be a number, got {value!r}")

    def median(attr: str) -> float:
        values = sorted(float(getattr(s, attr)) for s in signatures.values())
        return values[len(values) // 2]

    return Signature(
        name="custom",
        flops_share={k: float(v) for k, v in shares.items()},
        bytes_per_flop=float(spec.get("bytes_per_flop", median("bytes_per_flop"))),
        step_bytes_per_flop=float(spec.get("step_bytes_per_flop",
                                           median("step_bytes_per_flop"))),
        launches_per_step=float(spec.get("launches_per_step", median("launches_per_step"))),
        flops_per_sample=(float(spec["flops_per_sample"]) if "flops_per_sample" in spec
                          else None),
    )


def matched(text: str, param_count: float | None = None) -> Signature | None:
    """The built-in whose match token occurs earliest in ``text`` (a profile's name and
    description: "ssd300-resnet50" is a detector, "resnet50" a classifier), the longer token on
    a tie ("transformer-xl base" before "transformer-xl"); between sizes of one family that tie
    still, the one profiled nearest ``param_count`` (in ratio), else the largest (its
    activations over-estimate a smaller model's memory rather than under-estimate a larger
    one's); None when none occurs."""
    text = text.lower()
    best: tuple[tuple[int, int, float, float], Signature] | None = None
    for sig in builtin().values():
        size_gap = (abs(math.log(max(param_count, 1.0) / sig.params))
                    if param_count and sig.params else 0.0)
        for token in sig.match:
            at = text.find(token)
            key = (at, -len(token), size_gap, -(sig.params or 0.0))
            if at >= 0 and (best is None or key < best[0]):
                best = (key, sig)
    return None if best is None else best[1]
