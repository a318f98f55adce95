"""Memory fit: will one device's share of a step fit in the target GPU's memory?

Peak per GPU = model states + activations. Model states with Adam are 16 bytes per parameter
in both fp32 and mixed precision (weights 4 + gradients 4 + two Adam moments 8; mixed
precision keeps fp32 master weights, and its fp16 copies are transient). Activations scale with
the per-device batch: taken from the measured peak when the profile has one, else from its
workload signature (what one sample adds to the peak of a training step of the signature's
model code, in fp32 or mixed precision, measured by ``scripts/build_signatures.py``, moved to
the profile's size: see ``activation_gb_per_sample``), else from the flops per sample by a
rough rule. A profile with none of these has no activation estimate: its memory is "unknown",
never "fits". When it does not fit, the advice is a smaller micro-batch with gradient
accumulation (same optimizer step), or sharding optimizer state and gradients across the group
(ZeRO-2), or everything (FSDP / ZeRO-3).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpucost.catalog.spec import HALF_MODEL_PRECISIONS, GpuSpec
from gpucost.model.signature import Signature
from gpucost.model.translate import gpu_spec, workload_signature
from gpucost.profile import Profile

STATE_BYTES_PER_PARAM = 16.0  # Adam: weights 4 + grads 4 + moments 8 (fp32 or mixed precision)
UNSHARDED_BYTES_PER_PARAM = 4.0  # ZeRO-2 keeps a full fp32 weight copy; grads + moments shard
# Activation bytes per sample per (flop per parameter), mixed precision: ResNet-50 at batch 256
# fits a 16 GB V100 (<= ~6e4) and BERT-large at sequence 384 needs ~2.6e5 (Korthikanti et al.'s
# per-layer formula); this sits between. fp32 activations take twice the bytes. An estimate is
# also capped at the source GPU's usable memory: the measured step ran there.
ACTIVATION_BYTES_PER_FLOP_PER_PARAM = 1.0e5
RESERVED_GB = 1.0  # CUDA context, cuDNN/cuBLAS workspaces, allocator fragmentation
USABLE_FRACTION = 0.95
# GPU memory is sold in DRAM's binary sizes: a marketed "80 GB" is 80 GiB (nvidia-smi: 81920
# MiB on an A100 80GB, 24576 MiB on an RTX 3090), 7.4 % more than 80e9 bytes.
BYTES_PER_MARKETED_GB = 2.0**30


@dataclass(frozen=True, slots=True)
class MemoryFit:
    """Predicted peak memory of one GPU against its capacity, with advice when it does not fit."""

    gpu: str
    capacity_gb: float  # as marketed (GiB: BYTES_PER_MARKETED_GB)
    usable_gb: float  # what a training process can allocate
    peak_gb: float | None  # predicted peak per GPU; None when activations cannot be estimated
    states_gb: float  # weights + gradients + optimizer state
    activations_gb: float | None
    basis: str  # "measured" | "estimated" | "states only"
    fits: bool
    micro_batch: int | None  # largest per-device batch that fits (with accumulation), if < batch
    grad_accum_steps: int | None  # accumulation steps that keep the optimizer step's batch
    advice: str

    @property
    def headroom_gb(self) -> float | None:
        return None if self.peak_gb is None else self.usable_gb - self.peak_gb


# Half-precision steps. "amp" is autocast over fp32 weights: GEMM and convolution outputs in
# half precision, its layer norms, softmaxes and loss in fp32, which a signature measures in a
# step of its own. "fp16"/"bf16" is the model itself in half precision (HALF_MODEL_PRECISIONS):
# every kept tensor in 2 bytes, half the fp32 figure. The rule on flops, with nothing measured,
# halves the fp32 figure.
_HALF = ("amp", *HALF_MODEL_PRECISIONS)


def signature_activation_bytes(sig: Signature, param_count: float,
                               flops_per_sample: float | None, *,
                               precision: str = "fp32") -> float | None:
    """Activation bytes per sample of a model of ``param_count`` parameters (and
    ``flops_per_sample``, when known) with ``sig``'s architecture at ``precision`` (the half
    ones: see ``_HALF``); None when the signature records none.

    What a layer keeps is proportional to tokens (or pixels) x width x depth, its flops to
    tokens x width^2 x depth and its parameters to width^2 x depth: activations are flops over
    the width. Families grow width and depth together (depth about width / 64 for transformers,
    so width ~ parameters^(1/3)), hence activations ~ flops / parameters^(1/3). Unknown flops
    are the signature's at the same tokens per sample: flops ~ parameters.
    """
    measured = sig.activation_bytes_per_sample
    if precision in _HALF and measured is not None:
        measured = (sig.activation_bytes_per_sample_amp
                    if sig.activation_bytes_per_sample_amp is not None and precision == "amp"
                    else measured / 2.0)
    if measured is None or not sig.flops_per_sample or not sig.params:
        return None
    size = max(param_count, 1.0) / sig.params
    flops_ratio = (flops_per_sample / sig.flops_per_sample if flops_per_sample
                   else size)
    return float(measured * flops_ratio / size ** (1.0 / 3.0))


def model_states_gb(profile: Profile) -> float:
    """Weights, gradients and Adam's moments of one unsharded device, GB."""
    return profile.param_count * STATE_BYTES_PER_PARAM / 1e9


def activation_gb_per_sample(profile: Profile) -> tuple[float | None, str]:
    """Activation memory per sample (GB) and where the figure comes from: "measured" (the
    profile's peak), "signature" (its workload signature's measured activations), "estimated"
    (a rule on flops per parameter) or "states only" (no estimate: memory unknown)."""
    states_gb = model_states_gb(profile)
    if profile.peak_memory_gb is not None:
        return max(profile.peak_memory_gb - states_gb, 0.0) / profile.batch_size, "measured"
    sig = workload_signature(profile)
    kept = (signature_activation_bytes(sig, profile.param_count, profile.flops_per_sample,
                                       precision=profile.precision)
            if sig is not None else None)
    if kept is not None:
        per_sample, basis = kept / 1e9, "signature"
    elif profile.flops_per_sample is not None:
        per_param = profile.flops_per_sample / profile.param_count
        per_sample = (ACTIVATION_BYTES_PER_FLOP_PER_PARAM * per_param * 2.0
                      * (0.5 if profile.precision in _HALF else 1.0) / 1e9)
        basis = "estimated"
    else:
        return None, "states only"
    if profile.gpu != "CPU":
        # The measured step ran there at its batch: it cannot have kept more than that room.
        room = usable_gb(gpu_spec(profile.gpu)) - states_gb
        if room > 0.0:
            per_sample = min(per_sample, room / profile.batch_size)
    return per_sample, basis


MEMORY_UNKNOWN = "memory: unknown"
ESTIMATE_HINT = "add peak_memory_gb, flops_per_sample or a workload"


def unknown_memory_note(profile: Profile) -> str | None:
    """For a profile with no activation estimate, one line saying so and what its plans were
    checked against (their model states alone); None when it has an estimate."""
    if activation_gb_per_sample(profile)[0] is not None:
        return None
    states = model_states_gb(profile)
    return (f"{MEMORY_UNKNOWN}: profile {profile.name!r} has no activation estimate "
            f"({ESTIMATE_HINT}), so batch {profile.batch_size} was checked against each GPU "
            f"for its model states ({states:.1f} GB) alone and may not fit")


def total_gb(spec: GpuSpec) -> float:
    """All of ``spec``'s memory, GB (1e9 bytes), from the binary gigabytes it is sold in."""
    return spec.memory_gb * BYTES_PER_MARKETED_GB / 1e9


def usable_gb(spec: GpuSpec) -> float:
    """What a training process can allocate on ``spec``, GB (1e9 bytes)."""
    return total_gb(spec) * USABLE_FRACTION - RESERVED_GB


def fit_memory(profile: Profile, spec: GpuSpec | str, *, group_gpus: int = 1,
               batch_size: int | None = None) -> MemoryFit:
    """Does ``profile``'s per-device batch (or ``batch_size``) fit on ``spec`` (a GPU or its
    name, any common spelling, as ``predict`` takes it)?

    ``group_gpus`` is the data-parallel group size, used to size sharded-state advice.
    """
    if isinstance(spec, str):
        spec = gpu_spec(spec)
    batch = profile.batch_size if batch_size is None else batch_size
    usable = usable_gb(spec)
    states = model_states_gb(profile)
    per_sample, basis = activation_gb_per_sample(profile)
    activations = None if per_sample is None else per_sample * batch
    peak = None if activations is None else states + activations
    need = states if peak is None else peak
    if need <= usable:
        advice = (f"fits: {need:.1f} of {usable:.1f} GB usable" if peak is not None else
                  f"{MEMORY_UNKNOWN} (model states {states:.1f} of {usable:.1f} GB usable; "
                  f"activations not estimated: {ESTIMATE_HINT})")
        return MemoryFit(spec.name, spec.memory_gb, usable, peak, states, activations, basis, True,
                         None, None, advice)
    micro = None
    accum = None
    options: list[str] = []
    if per_sample is not None and per_sample > 0.0 and states < usable:
        micro = max(math.floor((usable - states) / per_sample), 0)
        if micro >= 1:
            accum = math.ceil(batch / micro)
            options.append(f"micro-batch {micro} x {accum} accumulation steps")
    if micro is None or micro < 1:
        micro = None
    n = max(group_gpus, 1)
    sharded = STATE_BYTES_PER_PARAM - UNSHARDED_BYTES_PER_PARAM
    zero2 = profile.param_count * (UNSHARDED_BYTES_PER_PARAM + sharded / n) / 1e9
    fsdp = states / n
    act = activations or 0.0
    if n > 1 and zero2 + act <= usable:
        options.append(f"ZeRO-2 over {n} GPUs ({zero2 + act:.1f} GB per GPU)")
    elif n > 1 and fsdp + act <= usable:
        options.append(f"FSDP/ZeRO-3 over {n} GPUs ({fsdp + act:.1f} GB per GPU)")
    elif n == 1:
        options.append("shard optimizer state over more GPUs (ZeRO-2 or FSDP)")
    advice = (f"does not fit: needs {need:.1f} GB, {usable:.1f} GB usable on {spec.name}; try "
              + (" or ".join(options) if options else "a GPU with more memory"))
    return MemoryFit(spec.name, spec.memory_gb, usable, peak, states, activations, basis, False,
                     micro, accum, advice)
