"""Cross-GPU translation: how long one device's share of a training step takes on another GPU.

The model is a two-term roofline with calibrated efficiencies and a board-power limit. On GPU
g at precision p a workload of F flops that moves kappa * F bytes of device memory takes

    t(g) = sum_c s_c * F / (peak(g, unit_c) * eff(g, unit_c) * r_c)
           + F / (tdp(g) * eps(gen(g), p)) + kappa * F / (mem_bw(g) * eff_bw(g))

of device time, plus host time (Python, kernel launches) that is the same on every GPU. The
flops split over op classes c (GEMM, convolution, recurrent cells, attention; shares s_c from
the workload's signature, ``gpucost.model.signature``), each on the unit that runs it at p
(``math_unit``: PyTorch's fp32 runs matmuls on CUDA cores and convolutions on TF32 tensor
cores; tf32 runs both on TF32; amp/fp16/bf16 on the half-precision tensor cores), r_c a class's
efficiency relative to a GEMM on tensor cores (recurrent cells fill them poorly); on tensor
cores GEMM-like classes take a GEMM efficiency of their own for ``eff`` (``gemm_efficiency``),
convolutions the fitted (convolution) one. Every compute class runs at the step's tile
utilisation u(b) at its per-device batch b (``gemm_utilisation``: from the signature's GEMM
shapes and the GPU's SM count, a small GEMM fills few SMs), so its rate is peak x eff x u(b).
What a step pays once whatever its batch b (optimizer and weight traffic, per-kernel
launches) is spread over the batch: kappa = kappa_sample + mu / b and eta = eta_sample + nu / b,
so a small batch runs slower per sample; a workload never fitted takes mu from its
signature's bytes per parameter at its own parameters per flop, plus mixed precision's casts
and gradient scaling (``signature_step_bytes_per_flop``). ``eff`` and ``eff_bw`` are achievable
fractions of the spec sheet, fitted per compute capability (GeForce apart) and unit on public
training benchmarks (``calibration.json``, written by ``scripts/fit_calibration.py``), eps
(sustained flops per joule) per generation (compute capability major) and unit; kappa (bytes per
flop, the compute/memory mix) and eta, with their per-step parts, are fitted per model family of
the benchmarks (a member measured on one GPU pays the family's per-step seconds and bytes, at
its own parameters, per flop of the work its measured step leaves: ``measured_flops_per_sample``,
so ResNet-18 on CIFAR is not ResNet-50 on ImageNet scaled down whole); any other workload takes
them from its signature (counted bytes and kernel
launches at fitted global scales), and kappa comes from the profile when it counts both flops
and bytes. A profile that measured its host time (``breakdown``) uses that instead of eta; a
CPU-measured one pays a GPU host's cost per launch (``host_s_per_step``). The device part of a
measured step is translated by the ratio t(target) / t(source), so the same GPU reproduces the
measurement exactly. With a per-operator table each operator is translated by what bounds it on
each GPU (its arithmetic intensity against the GPU's ridge point, i.e. the larger of flops/rate
and bytes/bandwidth, with a per-launch floor for small kernels).
"""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from gpucost.catalog import all_entries, get_gpu
from gpucost.catalog.spec import GpuSpec
from gpucost.errors import ProfileError
from gpucost.model import signature
from gpucost.model.calibration import Calibration
from gpucost.model.signature import Signature
from gpucost.profile import Profile

CALIBRATION_PATH = Path(__file__).with_name("calibration.json")

# Which tensor unit a profile's precision runs on; fp16 and amp share the fp16 tensor cores.
PRECISION_CLASS: dict[str, str] = {
    "fp32": "fp32", "tf32": "tf32", "fp16": "fp16", "amp": "fp16", "bf16": "bf16",
}


# The public tables measure fp16/amp and fp32 only: bf16 runs on the same tensor cores at the
# fp16 rate on every GPU that has it, and tf32 is what fp32 training mostly runs on.
_BORROWED_CLASS = {"bf16": "fp16", "tf32": "fp32"}


def fitted_class(precision: str, keys: Iterable[str]) -> str:
    """The precision class to look ``keys`` ("...|class") up under: the precision's own when any
    key has it, else the one it borrows from."""
    pclass = PRECISION_CLASS[precision]
    if any(k.endswith(f"|{pclass}") for k in keys):
        return pclass
    return _BORROWED_CLASS.get(pclass, pclass)


@cache
def shipped_calibration_data() -> Mapping[str, Any]:
    """``calibration.json`` as its JSON mapping, loaded once: what a refit merges its own
    coefficients into (``bench/prediction_accuracy.py``)."""
    with CALIBRATION_PATH.open(encoding="utf-8") as fh:
        data: dict[str, Any] = json.load(fh)
    return data


@cache
def shipped_calibration() -> Calibration:
    """The fitted coefficients of ``calibration.json``, parsed and checked once."""
    return Calibration.parse(shipped_calibration_data(), CALIBRATION_PATH.name)


# Set by gpucost.model.perf.using_calibration (tests, refits); None: the shipped file.
_active: Calibration | None = None


def calibration() -> Calibration:
    """The coefficients in force."""
    return shipped_calibration() if _active is None else _active


def set_calibration(cal: Calibration | Mapping[str, Any] | None) -> Calibration | None:
    """Put ``cal`` (None: the shipped file; a mapping of calibration.json's shape is parsed
    here) in force and return the one it replaces; callers clear their own caches that depend
    on it."""
    global _active
    if cal is not None and not isinstance(cal, Calibration):
        cal = Calibration.parse(cal, "the calibration given")
    previous, _active = _active, cal
    device_rates.cache_clear()
    return previous


@lru_cache(maxsize=1024)
def gpu_spec(name: str) -> GpuSpec:
    """Catalog lookup, cached: the planner asks for the same few GPUs thousands of times."""
    return get_gpu(name)


# GeForce cards: their tensor cores run fp32-accumulate math at half rate, and what training
# reaches of that listed rate differs from the datacenter/pro parts of the same chip.
_GEFORCE_PREFIXES = ("GTX ", "RTX 20", "RTX 30", "RTX 40", "RTX 50")
GEFORCE_SUFFIX = "g"


def device_class(spec: GpuSpec) -> str:
    """The key efficiencies are fitted under: compute capability (GA100 "8.0" vs GA102 "8.6"),
    with a "g" for GeForce cards ("8.6g"), or the architecture name for non-NVIDIA parts."""
    if spec.compute_capability is None:
        return spec.arch
    geforce = spec.name.startswith(_GEFORCE_PREFIXES)
    return spec.compute_capability + (GEFORCE_SUFFIX if geforce else "")


@dataclass(frozen=True, slots=True)
class DeviceRates:
    """What one GPU achieves at one precision, in SI units."""

    flops_per_s: float  # achievable arithmetic rate
    bytes_per_s: float  # achievable device-memory bandwidth


def _capability(cls: str) -> tuple[int, int] | None:
    major, _, minor = cls.removesuffix(GEFORCE_SUFFIX).partition(".")
    return (int(major), int(minor)) if major.isdigit() and minor.isdigit() else None


def _hpc_chip(capability: tuple[int, int]) -> bool:
    """Whether a compute capability is one of NVIDIA's HPC chips (P100, V100, A100, H100, B200
    and B300: 6.0, 7.0, 8.0, 9.0, 10.x, with HBM and the largest tensor cores) rather than a
    graphics chip (GeForce, workstation and inference cards: 6.1, 7.5, 8.6, 8.9, 12.x)."""
    major, minor = capability
    return major == 10 or (6 <= major <= 9 and minor == 0)


def _nearest_class(spec: GpuSpec, fitted: Iterable[str]) -> str | None:
    """The fitted class closest below ``spec``'s compute capability on its own line of chips
    (its predecessor: an RTX PRO 6000, 12.0, follows the RTX 6000 Ada, 8.9, not the B200, 10.0,
    whose convolutions reach 7 % of a listed peak four times its own), GeForce to GeForce where
    possible, for GPUs the benchmarks never measured; None for non-NVIDIA parts."""
    own_class = device_class(spec)
    own = _capability(own_class)
    if own is None:
        return None
    geforce = own_class.endswith(GEFORCE_SUFFIX)
    older = [(_hpc_chip(cap) == _hpc_chip(own), c.endswith(GEFORCE_SUFFIX) == geforce, cap, c)
             for c in fitted if (cap := _capability(c)) is not None and cap <= own]
    return max(older)[3] if older else None


def cuda_core_peak(spec: GpuSpec, precision: str) -> bool:
    """Whether ``spec``'s peak at ``precision`` is its plain FP32 rate (no tensor cores for it):
    such peaks are reached far more closely than tensor-core ones."""
    return peak_tflops(spec, precision) <= spec.fp32_tflops * 1.01


def efficiencies(spec: GpuSpec, precision: str,
                 cal: Calibration | None = None) -> tuple[float, float]:
    """(compute, memory) efficiency of ``spec``: per GPU if fitted, else its class, else the
    nearest older class, else the median over classes (over classes whose peak was a CUDA-core
    rate, when this GPU's is too: Pascal and older); bf16 and tf32 take fp16's and fp32's
    when the calibration has none of their own."""
    cal = calibration() if cal is None else cal
    by_class = cal.compute_efficiency_class
    pclass = fitted_class(precision, by_class)
    eff = cal.compute_efficiency_gpu.get(f"{spec.name}|{pclass}")
    if eff is None:
        fitted = [k.partition("|")[0] for k in by_class if k.endswith(f"|{pclass}")]
        cls = device_class(spec) if device_class(spec) in fitted else _nearest_class(spec, fitted)
        eff = by_class[f"{cls}|{pclass}"] if cls is not None else None
    if eff is None and cuda_core_peak(spec, precision):
        eff = cal.compute_efficiency_default_cuda_core
    if eff is None:
        eff = cal.compute_efficiency_default[pclass]
    eff_bw = cal.memory_efficiency_gpu.get(spec.name)
    if eff_bw is None:
        mem_class = cal.memory_efficiency_class
        cls = (device_class(spec) if device_class(spec) in mem_class
               else _nearest_class(spec, mem_class))
        eff_bw = mem_class[cls] if cls is not None else cal.memory_efficiency_default
    return float(eff), float(eff_bw)


def peak_tflops(spec: GpuSpec, precision: str) -> float:
    """The spec-sheet rate of the unit ``precision`` names (``math_unit``): plain FP32 for
    "fp32", TF32 tensor cores for "tf32" (FP32 where the GPU has none), fp16/bf16 tensor
    cores for "amp"/"fp16"/"bf16"."""
    return spec.tflops(precision)  # type: ignore[arg-type]


@cache
def _matmul_share_by_capability() -> dict[str, float]:
    """Median share of the listed FP32 rate the measured best fp32 matmul reaches, per compute
    capability with two or more measured GPUs (one SM design: the same issue limits)."""
    shares: dict[str, list[float]] = defaultdict(list)
    for entry in all_entries():
        spec = entry.spec
        if spec.fp32_matmul_tflops and spec.compute_capability:
            shares[spec.compute_capability].append(spec.fp32_matmul_tflops / spec.fp32_tflops)
    return {cc: statistics.median(v) for cc, v in shares.items() if len(v) >= 2}


def fp32_matmul_tflops(spec: GpuSpec) -> float | None:
    """The GPU's best fp32 matmul on CUDA cores: measured (``GpuSpec.fp32_matmul_tflops``), else
    its listed rate times what the measured GPUs of its compute capability reach (an A10G
    shares the RTX 3090's SM), else None."""
    if spec.fp32_matmul_tflops:
        return spec.fp32_matmul_tflops
    share = _matmul_share_by_capability().get(spec.compute_capability or "")
    return None if share is None else share * spec.fp32_tflops


def class_peak_tflops(spec: GpuSpec, unit: str, op_class: str,
                      reached: float | None = None) -> float:
    """The listed rate ``op_class`` is held to on ``unit``: the spec sheet's, except for
    GEMM-like work on the plain FP32 unit (CUDA cores; a GeForce card's TF32 rate may equal its
    FP32 one, but it runs on tensor cores) where the GPU's best fp32 matmul
    (``fp32_matmul_tflops``) falls short of the share ``reached`` of its listed rate that the
    calibration's CUDA-core GPUs reach (their fitted efficiencies are relative to that): then
    that matmul / ``reached``. An RTX 4090 lists 82.6 TFLOPS and multiplies at 54 (its second
    FP32 datapath shares issue with INT32), an L4 at 15 of 30 (72 W cannot hold its clocks), a
    V100 at 14.1 of 15.7 as the calibration's GPUs do. Convolutions keep the listed rate
    (cuDNN's Winograd and FFT algorithms do fewer multiplies than the flops counted for them);
    ``reached`` None: no measurement is used."""
    peak = peak_tflops(spec, unit)
    if reached and op_class != "conv" and unit == "fp32":
        matmul = fp32_matmul_tflops(spec)
        if matmul:
            return min(peak, matmul / reached)
    return peak


def cuda_core_gemm_cap(spec: GpuSpec, unit: str) -> float | None:
    """The fastest a GEMM runs on ``spec``'s CUDA cores at ``unit`` (TFLOPS): its best fp32
    matmul (``fp32_matmul_tflops``), whatever the efficiency the convolutions' rows gave its
    class (cuDNN's Winograd and FFT convolutions do fewer multiplies than counted, so a class
    fitted on CNNs reaches the listed rate, and a V100's transformer GEMMs must not: its best
    matmul is 14.1 of 15.7 TFLOPS). None on tensor cores or where nothing is known."""
    if unit != "fp32" or not cuda_core_peak(spec, unit):
        return None
    return fp32_matmul_tflops(spec)


def math_unit(spec: GpuSpec, precision: str, op_class: str = "gemm", *,
              matmul_tf32: bool = False, conv_tf32: bool = True) -> str:
    """The precision class of the unit that runs ``op_class`` at ``precision`` on ``spec``.

    "fp32" is PyTorch's default: matmuls on CUDA cores unless ``matmul_tf32``
    (``torch.backends.cuda.matmul.allow_tf32``, ``set_float32_matmul_precision("high")``),
    convolutions on TF32 unless ``conv_tf32`` (``torch.backends.cudnn.allow_tf32``) is off;
    "tf32" runs both on TF32. A GPU without TF32 tensor cores runs either at plain FP32.
    """
    pclass = PRECISION_CLASS[precision]
    if pclass == "fp32" and (conv_tf32 if op_class == "conv" else matmul_tf32):
        pclass = "tf32"
    if pclass == "tf32" and not spec.tf32_tflops:
        pclass = "fp32"
    return pclass


def generation(spec: GpuSpec) -> str:
    """The key the power term is fitted under: one per process generation, the compute
    capability's major number (6 Pascal on 16 nm, 7 Volta and Turing on 12 nm, 8 Ampere on 7 and
    8 nm, 9 Hopper...), except Ada's 8.9: Ada runs Ampere's instruction set but is built on
    TSMC 4N, two process nodes on, and lists 2.4x Ampere's tensor rate at the same board power
    (RTX 6000 Ada 364 TFLOPS at 300 W, RTX A6000 155), so power, not the spec sheet, sets what it
    sustains (keyed with Ampere, whose boards sustain much of their listed peaks, the RTX 6000
    Ada ran 1.15-1.35x faster than measured in held-out predictions). The architecture name
    where there is no compute capability."""
    if spec.compute_capability is None:
        return spec.arch
    if spec.compute_capability == "8.9":
        return "8.9"
    return spec.compute_capability.partition(".")[0]


def flops_per_joule(spec: GpuSpec, precision: str,
                    cal: Calibration | None = None) -> float | None:
    """Sustained flops per joule of board power at ``precision``: fitted per generation, else
    the median over fitted generations (leave-one-GPU-out liked it better than the nearest
    older generation for the one-GPU generations, B200 and GTX 1080 Ti); None when the
    calibration has no power term."""
    cal = calibration() if cal is None else cal
    table = cal.power_flops_per_joule
    pclass = fitted_class(precision, table)
    fitted = {k.partition("|")[0]: float(v) for k, v in table.items() if k.endswith(f"|{pclass}")}
    if not fitted:
        return None
    gen = generation(spec)
    if gen in fitted:
        return fitted[gen]
    values = sorted(fitted.values())
    return values[len(values) // 2]


def rates_for(spec: GpuSpec, precision: str, cal: Calibration | None = None) -> DeviceRates:
    """Achievable rates: the calibrated fraction of the spec-sheet peak, then the board-power
    limit on top (1/rate = 1/(peak * eff) + 1/(TDP * flops per joule)): a GPU whose listed peak
    outruns its power budget (an RTX 6000 Ada at 300 W against an RTX 4090 at 450 W, an H100
    PCIe at 350 W against an SXM at 700 W) sustains less of it."""
    eff, eff_bw = efficiencies(spec, precision, cal)
    flops_per_s = peak_tflops(spec, precision) * 1e12 * eff
    per_joule = flops_per_joule(spec, precision, cal)
    if per_joule is not None:
        flops_per_s = 1.0 / (1.0 / flops_per_s + 1.0 / (spec.tdp_w * per_joule))
    return DeviceRates(flops_per_s=flops_per_s, bytes_per_s=spec.mem_bw_gbs * 1e9 * eff_bw)


@dataclass(frozen=True, slots=True)
class Mix:
    """Which units a step's flops run on: flops shares per compute class, and the TF32 switches
    a float32 step ran with (hashable: rates are cached per GPU, precision and mix)."""

    shares: tuple[tuple[str, float], ...] = (("gemm", 0.5), ("conv", 0.5))
    matmul_tf32: bool = False
    conv_tf32: bool = True
    # (rows per sample, output columns, share of the flops) of the step's GEMMs and
    # convolutions (``signature.Signature.gemm_shapes``); empty: shapes unknown, full tiles.
    gemm_shapes: tuple[tuple[float, float, float], ...] = ()


DEFAULT_MIX = Mix()


def gemm_efficiency(spec: GpuSpec, unit: str, cal: Calibration | None = None) -> float | None:
    """Fraction of ``spec``'s tensor-core peak at ``unit`` that GEMM-like classes reach: per GPU
    if fitted, else its device class, else the nearest older class, else the unit's global
    value (anchored on measured best-matmul rates); None when the calibration has none. It is
    fitted apart from the convolutions' efficiency: cuBLAS reaches a similar share of the peak
    on every tensor-core GPU where cuDNN's convolutions do not, so a workload of GEMMs must not
    inherit what a CNN measured on that class."""
    cal = calibration() if cal is None else cal
    by_class = cal.gemm_efficiency_class
    if not by_class:
        return None
    pclass = fitted_class(unit, by_class)
    eff = cal.gemm_efficiency_gpu.get(f"{spec.name}|{pclass}")
    if eff is None:
        fitted = [k.partition("|")[0] for k in by_class if k.endswith(f"|{pclass}")]
        cls = device_class(spec) if device_class(spec) in fitted else _nearest_class(spec, fitted)
        eff = by_class[f"{cls}|{pclass}"] if cls is not None else None
    if eff is None:
        eff = cal.gemm_efficiency_default.get(pclass)
    return None if eff is None else float(eff)


# Output tiles cuBLAS and cuDNN choose between, with the share of the peak each sustains: a
# tile's operand traffic per flop falls as (rows x columns) / (rows + columns) grows, and NVIDIA
# states that 128x128 and larger tiles reach the peak where smaller ones, which it picks for
# small problems to fill the SMs, reach less (Matrix Multiplication Background User's Guide,
# "Typical Tile Dimensions In cuBLAS And Performance"). Below 128x128 the share is the tile's
# operand reuse relative to 128x128's: 128x64 -> 42.7 / 64, 64x64 -> 32 / 64.
GEMM_TILES: tuple[tuple[int, int, float], ...] = (
    (256, 128, 1.0), (128, 128, 1.0), (128, 64, 2.0 / 3.0), (64, 64, 0.5))
# Of a training step's three GEMMs per layer (forward, input gradient, weight gradient) two have
# the forward's output shape (rows grow with the batch); the weight gradient's output is the
# weight matrix, whose tiles the batch does not change (it is reduced over the batch).
_BATCH_SHAPED = 2.0 / 3.0


@lru_cache(maxsize=65536)
def tile_utilisation(rows: float, cols: float, sm_count: int) -> float:
    """Share of the tensor-core peak one GEMM with an output of ``rows`` x ``cols`` reaches on
    a GPU of ``sm_count`` SMs: the best tile's rate times its tile quantisation (the padded
    part of edge tiles is wasted work) times the share of SMs its tiles occupy (a GEMM with
    fewer output tiles than SMs leaves the rest idle throughout). With a wave or more of tiles
    the libraries balance the last wave (tile choice, split-K, stream-K), so no loss is
    counted there: what a large GEMM misses of the peak is in its fitted efficiency."""
    best = 0.0
    m, n = max(rows, 1.0), max(cols, 1.0)
    for tm, tn, rate in GEMM_TILES:
        tiles_m, tiles_n = math.ceil(m / tm), math.ceil(n / tn)
        padded = (m * n) / (tiles_m * tm * tiles_n * tn)
        occupied = min(1.0, tiles_m * tiles_n / sm_count)
        best = max(best, rate * padded * occupied)
    return best


@lru_cache(maxsize=65536)
def gemm_utilisation(shapes: tuple[tuple[float, float, float], ...], batch_size: float,
                     sm_count: int | None) -> float:
    """Time-weighted share of the peak a step's GEMM-like work reaches at a per-device batch:
    1 / sum(share / utilisation) over its shapes, each shape's utilisation that of its
    batch-shaped GEMMs (rows = rows per sample x batch) and its weight gradient (full tiles).
    1.0 when the shapes or the GPU's SM count are unknown."""
    if not shapes or not sm_count:
        return 1.0
    total = sum(w for _, _, w in shapes)
    seconds = 0.0
    for rows, cols, share in shapes:
        forward = tile_utilisation(rows * batch_size, cols, sm_count)
        seconds += share / total * (_BATCH_SHAPED / forward + (1.0 - _BATCH_SHAPED))
    return 1.0 / seconds


def mixed_rates(spec: GpuSpec, precision: str, mix: Mix,
                cal: Calibration | None = None, batch_size: float | None = None
                ) -> DeviceRates:
    """Achievable rates of a step with ``mix`` on ``spec``: each class's flops at its own unit's
    rate (``math_unit``): on tensor cores GEMM-like classes at the fitted GEMM efficiency
    (``gemm_efficiency``) times the class's efficiency relative to a GEMM (``class_efficiency``:
    recurrent cells' per-time-step GEMMs, as many rows as the batch, fill them poorly),
    convolutions at the fitted (convolution) efficiency; each flop also pays the board-power
    term of its unit, as in the fit (1/rate = sum of shares over peak x efficiency + 1 / (TDP x
    flops per joule)). At a per-device ``batch_size`` the compute classes run at the step's
    GEMM utilisation (``gemm_utilisation``: small GEMMs fill few SMs); None: full tiles."""
    cal = calibration() if cal is None else cal
    relative = cal.class_efficiency
    utilisation = (1.0 if batch_size is None else
                   gemm_utilisation(mix.gemm_shapes, float(batch_size), spec.sm_count))
    seconds_per_flop = 0.0
    bytes_per_s = 0.0
    for cls, share in mix.shares:
        unit = math_unit(spec, precision, cls, matmul_tf32=mix.matmul_tf32,
                         conv_tf32=mix.conv_tf32)
        eff, eff_bw = efficiencies(spec, unit, cal)
        # Class efficiencies are a tensor-core effect: CUDA-core units run every class alike.
        if cls != "conv" and not cuda_core_peak(spec, unit):
            eff = (gemm_efficiency(spec, unit, cal) or eff) * float(relative.get(cls, 1.0))
        per_joule = flops_per_joule(spec, unit, cal)
        power_s = 1.0 / (spec.tdp_w * per_joule) if per_joule is not None else 0.0
        rate = class_peak_tflops(spec, unit, cls, cal.fp32_matmul_reached) * eff
        cap = (cuda_core_gemm_cap(spec, unit)
               if cls != "conv" and cal.fp32_matmul_reached else None)
        if cap is not None:
            rate = min(rate, cap)
        seconds_per_flop += share * (1.0 / (rate * 1e12 * utilisation) + power_s)
        bytes_per_s = spec.mem_bw_gbs * 1e9 * eff_bw
    return DeviceRates(flops_per_s=1.0 / seconds_per_flop, bytes_per_s=bytes_per_s)


@lru_cache(maxsize=16384)
def device_rates(gpu: str, precision: str, mix: Mix = DEFAULT_MIX,
                 batch_size: float | None = None) -> DeviceRates:
    """Achievable rates of a catalog GPU at a precision for a step with ``mix`` at a per-device
    batch (None: full tiles), under the calibration in force."""
    return mixed_rates(gpu_spec(gpu), precision, mix, batch_size=batch_size)


def workload_signature(profile: Profile) -> Signature | None:
    """The profile's op-class mix: its ``workload`` (a built-in or an explicit mix), else the
    built-in its name or description matches, else the classes of its operator table's
    flops, else None."""
    if profile.workload is not None:
        return signature.from_spec(profile.workload)
    found = signature.matched(f"{profile.name} {profile.description}", profile.param_count)
    if found is not None:
        return found
    flops: dict[str, float] = {}
    for op in profile.operators:
        cls = signature.op_class(op.name)
        if op.flops > 0.0 and cls in signature.COMPUTE_CLASSES:
            flops[cls] = flops.get(cls, 0.0) + op.flops
    total = sum(flops.values())
    if total <= 0.0:
        return None
    median = signature.from_spec({"gemm": 1.0})
    return signature.Signature(
        name="operators", flops_share={c: v / total for c, v in flops.items()},
        bytes_per_flop=median.bytes_per_flop, step_bytes_per_flop=median.step_bytes_per_flop,
        launches_per_step=profile.launches_per_step or median.launches_per_step)


# id(profile) -> (profile, its mix): profiles are immutable, and holding one keeps its id.
_MIXES: dict[int, tuple[Profile, Mix]] = {}


def profile_mix(profile: Profile) -> Mix:
    """The mix a profile's flops run as: its signature's shares, and the TF32 switches its
    environment recorded (PyTorch's defaults when it recorded none)."""
    cached = _MIXES.get(id(profile))
    if cached is not None and cached[0] is profile:
        return cached[1]
    if len(_MIXES) >= 256:
        _MIXES.clear()
    mix = _profile_mix(profile)
    _MIXES[id(profile)] = (profile, mix)
    return mix


def _profile_mix(profile: Profile) -> Mix:
    sig = workload_signature(profile)
    env = profile.environment
    matmul_tf32 = str(env.get("float32_matmul_precision", "highest")) in ("high", "medium")
    conv_tf32 = bool(env.get("cudnn_allow_tf32", True))
    shares = DEFAULT_MIX.shares if sig is None else tuple(sorted(sig.flops_share.items()))
    shapes = () if sig is None else sig.gemm_shapes
    return Mix(shares=shares, matmul_tf32=matmul_tf32, conv_tf32=conv_tf32, gemm_shapes=shapes)


@dataclass(frozen=True, slots=True)
class WorkloadTerms:
    """A workload's mix, per flop of one sample: bytes and host seconds that grow with the batch
    (per sample), and those a step pays once whatever its batch (optimizer and weight traffic,
    kernel launches), which a larger batch amortises."""

    bytes_per_flop: float
    host_s_per_flop: float
    step_bytes_per_flop: float
    step_host_s_per_flop: float

    def at_batch(self, batch_size: float) -> tuple[float, float]:
        """(kappa, eta) per flop at a per-device batch."""
        return (self.bytes_per_flop + self.step_bytes_per_flop / batch_size,
                self.host_s_per_flop + self.step_host_s_per_flop / batch_size)


# Mixed precision's once-per-step traffic beyond fp32's (the signatures count an fp32 step):
# autocast casts each fp32 weight to half once per micro-step (read 4 B, write 2 B), and the
# gradient scaler unscales the gradients in place (read 4, write 4) and checks them for
# infinities (read 4): 18 B per parameter.
AMP_STEP_BYTES_PER_PARAM = 18.0


def signature_step_bytes_per_flop(sig: Signature, precision: str, param_count: float | None,
                                  flops_per_sample: float | None) -> float:
    """Once-per-step bytes over flops per sample for a model of ``param_count`` parameters
    and ``flops_per_sample`` with ``sig``'s architecture: the signature's counted bytes per
    parameter (optimizer update, weight reads, gradient writes) times the model's parameters
    per flop, plus mixed precision's casts and gradient scaling. Without both counts, or for a
    signature without its own sizes, the model is taken to have the signature's parameters
    per flop (the same tokens per sample)."""
    per_param_flop = (sig.params / sig.flops_per_sample
                      if sig.params and sig.flops_per_sample else None)
    if per_param_flop is None:
        return sig.step_bytes_per_flop
    ratio = (param_count / flops_per_sample if param_count and param_count > 1.0
             and flops_per_sample else per_param_flop)
    amp = AMP_STEP_BYTES_PER_PARAM if PRECISION_CLASS[precision] in ("fp16", "bf16") else 0.0
    return (sig.step_bytes_per_flop / per_param_flop + amp) * ratio


# A workload's bytes and host terms at one precision class borrow these when unfitted (fp32
# and tf32 move the same bytes; bf16 the same as fp16).
_TERMS_FALLBACK = {"fp32": "tf32", "tf32": "fp32", "bf16": "fp16", "fp16": "bf16"}


def _pick(table: Mapping[str, Any], pclass: str) -> Any:
    value = table.get(pclass)
    return table.get(_TERMS_FALLBACK.get(pclass, pclass)) if value is None else value


# The most of a measured step taken as paid whatever its batch (a measured line through several
# batches, or a step's known fixed costs): the rest grows with the batch, so throughput does too.
MAX_FIXED_SHARE = 0.95


def measured_flops_per_sample(profile: Profile, bytes_per_flop: float, host_s_per_sample: float,
                              step_bytes: float, step_host_s: float) -> float | None:
    """Flops per sample a one-GPU measurement implies: what the measured step leaves after the
    costs a step pays whatever its work per sample (``step_bytes`` of weights and optimizer
    state, ``step_host_s`` of kernel launches, ``host_s_per_sample`` of data pipeline per
    sample), at the source GPU's rates (under the calibration in force) for the profile's mix
    with ``bytes_per_flop``. None for a profile measured on the CPU or on several devices (its
    step holds their sync)."""
    if profile.gpu == "CPU" or profile.device_count != 1:
        return None
    rates = device_rates(profile.gpu, profile.precision, profile_mix(profile),
                         profile.batch_size)
    batch = float(profile.batch_size)
    fixed_s = step_bytes / rates.bytes_per_s + step_host_s + batch * host_s_per_sample
    per_sample_s = max(profile.step_time_s - fixed_s,
                       (1.0 - MAX_FIXED_SHARE) * profile.step_time_s) / batch
    return per_sample_s / time_per_flop_s(rates, bytes_per_flop)


def workload_terms(profile: Profile, cal: Calibration | None = None) -> WorkloadTerms:
    """The workload's terms: fitted for its model family when the calibration has it (matched
    on the profile's name and description); else, at the calibration's ``signature_scale``,
    bytes from the profile's own counts (the census's ``step_bytes`` as the step's
    once-per-step share: weights, their gradients and optimizer states, however many times a
    step reads them; a profile without it, 3 x the parameter bytes) or its signature's, host
    time per step from its kernel launches and per sample the families' median; else the
    median family."""
    cal = calibration() if cal is None else cal
    pclass = PRECISION_CLASS[profile.precision]
    kappa = eta = mu = nu = None
    text = f"{profile.name} {profile.description}".lower()
    for family in cal.families:
        if any(token in text for token in family.match):
            kappa = _pick(family.bytes_per_flop, pclass)
            eta = _pick(family.host_s_per_flop, pclass)
            mu = _pick(family.step_bytes_per_flop, pclass)
            nu = _pick(family.step_host_s_per_flop, pclass)
            fitted_flops = _pick(family.flops_per_sample, pclass)
            if fitted_flops and family.params and eta is not None and mu is not None \
                    and nu is not None:
                # The family's costs in seconds and bytes (a step's weights and optimizer
                # state at the profile's own parameters), per flop of this model's sample.
                host_s = eta * fitted_flops
                step_bytes = mu * fitted_flops * profile.param_count / family.params
                step_host_s = nu * fitted_flops
                flops = profile.flops_per_sample or measured_flops_per_sample(
                    profile, float(kappa), host_s, step_bytes, step_host_s)
                if flops:
                    eta, mu, nu = host_s / flops, step_bytes / flops, step_host_s / flops
            break
    scale = _pick(cal.signature_scale, pclass)
    sig = workload_signature(profile) if kappa is None else None
    flops = profile.flops_per_sample or (sig.flops_per_sample if sig is not None else None)
    if kappa is None:
        bytes_scale = scale.bytes if scale is not None else 1.0
        step_scale = scale.step_bytes if scale is not None else 1.0
        if profile.bytes_per_step is not None and profile.flops_per_sample is not None:
            once = (profile.step_bytes if profile.step_bytes is not None
                    else min(3.0 * (profile.param_bytes or 4.0 * profile.param_count),
                             profile.bytes_per_step))
            kappa = bytes_scale * (profile.bytes_per_step - once) / (
                profile.flops_per_sample * profile.batch_size)
            mu = step_scale * once / profile.flops_per_sample
        elif sig is not None and scale is not None:
            kappa = bytes_scale * sig.bytes_per_flop
            mu = step_scale * signature_step_bytes_per_flop(
                sig, profile.precision, profile.param_count, profile.flops_per_sample)
        if scale is not None and flops:
            if profile.launches_per_step:  # the profiler counts dispatched operators
                nu = scale.host_s_per_launch * profile.launches_per_step / flops
            elif sig is not None and sig.launches_per_step:
                nu = sig.launch_host_s(scale.host_s_per_launch, cal.launch_floor_s) / flops
    if kappa is None:
        kappa = _pick(cal.default_bytes_per_flop, pclass)
    if eta is None and sig is not None and sig.batch_loaded:
        eta = 0.0  # its loader reads whole batches: no Python per sample
    if eta is None:
        # Host time the GPU does not speed up (the data pipeline) is per sample: a model ten
        # times heavier per sample does not load ten times the data (the calibration families
        # spend 77-116 us per sample at fp16 where their flops per sample differ 26x). Per flop
        # only where the workload's flops are unknown.
        per_sample = cal.default_host_s_per_sample
        eta = (_pick(per_sample, pclass) / flops if per_sample and flops
               else _pick(cal.default_host_s_per_flop, pclass))
    if mu is None:
        mu = _pick(cal.default_step_bytes_per_flop, pclass) or 0.0
    if nu is None:
        nu = _pick(cal.default_step_host_s_per_flop, pclass) or 0.0
    return WorkloadTerms(float(kappa), float(eta), float(mu), float(nu))


def host_s_per_step(profile: Profile, cal: Calibration | None = None) -> float:
    """Host time of one step on a GPU machine: kernels launched per step (counted by the
    profiler, else the signature's) times a GPU host's fitted cost per launch. What a CPU
    profile's own host milliseconds would say about a GPU host is nothing."""
    cal = calibration() if cal is None else cal
    scale = _pick(cal.signature_scale, PRECISION_CLASS[profile.precision])
    per_launch = scale.host_s_per_launch if scale else cal.launch_floor_s
    if profile.launches_per_step is not None:
        return per_launch * profile.launches_per_step
    sig = workload_signature(profile) or signature.from_spec({"gemm": 1.0})
    return sig.launch_host_s(per_launch, cal.launch_floor_s)


def workload_mix(profile: Profile, cal: Calibration | None = None) -> tuple[float, float]:
    """(kappa, eta) of the workload at the profile's batch: device-memory bytes per flop (its
    compute/memory mix), and host seconds per flop (launch and framework time no GPU speeds up),
    each with the per-step share spread over the batch."""
    return workload_terms(profile, cal).at_batch(profile.batch_size)


def batch_step_factors(terms: WorkloadTerms, rates: DeviceRates, new_rates: DeviceRates,
                       batch_size: float, new_batch_size: float) -> tuple[float, float]:
    """(device, host) time of one step at ``new_batch_size`` over that at ``batch_size``, on a
    GPU with ``rates`` at the first batch and ``new_rates`` at the second (its GEMMs fill the
    SMs differently): each part is per-sample work times the batch plus what the step pays
    once (a step of b samples costs F * (b * x_sample + x_step) for either part)."""
    kappa_old, eta_old = terms.at_batch(batch_size)
    kappa_new, eta_new = terms.at_batch(new_batch_size)
    grow = new_batch_size / batch_size
    device = grow * time_per_flop_s(new_rates, kappa_new) / time_per_flop_s(rates, kappa_old)
    host = grow * (eta_new / eta_old if eta_old > 0.0 else 1.0)
    return device, host


def batch_time_ratio(profile: Profile, gpu: str, batch_size: int) -> float:
    """Time per sample on ``gpu`` at per-device ``batch_size`` over that at the profile's batch:
    what changing the batch does to throughput (>1: slower per sample, a smaller batch)."""
    terms = workload_terms(profile)
    mix = profile_mix(profile)

    def per_sample(b: float) -> float:
        kappa, eta = terms.at_batch(b)
        return time_per_flop_s(device_rates(gpu, profile.precision, mix, b), kappa) + eta

    return per_sample(batch_size) / per_sample(profile.batch_size)


def time_per_flop_s(rates: DeviceRates, bytes_per_flop: float) -> float:
    """Seconds per flop of a workload with mix ``bytes_per_flop`` (two-term roofline)."""
    return 1.0 / rates.flops_per_s + bytes_per_flop / rates.bytes_per_s


def _operator_time_s(flops: float, nbytes: float, calls: int, rates: DeviceRates,
                     floor_s: float) -> float:
    return max(flops / rates.flops_per_s, nbytes / rates.bytes_per_s, calls * floor_s)


def compute_ratio(profile: Profile, source: DeviceRates, target: DeviceRates,
                  bytes_per_flop: float) -> float:
    """Target over source device time for the profile's compute (1.0 when they match).

    With an operator table, each operator with flops or bytes recorded is scaled by its own
    roofline ratio and weighted by its measured time; operators without counts and the time
    the table does not cover scale with the aggregate ratio.
    """
    aggregate = time_per_flop_s(target, bytes_per_flop) / time_per_flop_s(source, bytes_per_flop)
    if not profile.operators:
        return aggregate
    floor_s = calibration().launch_floor_s
    weighted = 0.0
    covered_s = 0.0
    for op in profile.operators:
        if op.time_s <= 0.0:
            continue
        if op.flops > 0.0 or op.bytes_moved > 0.0:
            src = _operator_time_s(op.flops, op.bytes_moved, op.calls, source, floor_s)
            tgt = _operator_time_s(op.flops, op.bytes_moved, op.calls, target, floor_s)
            weighted += op.time_s * (tgt / src)
        else:
            weighted += op.time_s * aggregate
        covered_s += op.time_s
    if covered_s <= 0.0:
        return aggregate
    # Operator times are device times of one step; normalise so the ratio applies to compute_s
    # even when the table does not sum exactly to it (profiler overhead, uncovered kernels).
    return weighted / covered_s


def compute_from_flops_s(profile: Profile, target: DeviceRates, bytes_per_flop: float) -> float:
    """Absolute device time of one step on ``target`` from counted flops (CPU-measured profiles:
    their operator times are CPU times, so only the counts translate)."""
    flops_step = profile.flops_per_step
    if flops_step is None:
        raise ProfileError(
            f"profile {profile.name!r} was measured on the CPU and records no flops_per_sample, "
            "so it cannot be translated to a GPU",
            hint="re-profile with `gpucost profile` (it counts flops), or add flops_per_sample "
            "(forward + backward) to the profile",
        )
    return flops_step * time_per_flop_s(target, bytes_per_flop)
