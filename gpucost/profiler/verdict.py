"""What bounds a training step, why, and what to do about it.

Rules, first match wins (fractions are of the median step time):

1. **dataloader-bound**: waiting for the next batch takes >= 30 % of the step.
2. **host-bound**: the step launches so many small operators that launching them costs
   >= 50 % of the non-data time, i.e. operators run on average less than twice the launch
   floor. Launch cost = operators per step (counted by the census) x the launch floor: the
   measured host time per operator of a training step whose operators do nothing
   (:func:`gpucost.profiler.environment.launch_floor_s`). On CUDA, where the device runs
   asynchronously, the device's idle time inside the step (step minus kernel time) is the
   host share instead, when a trace measured it.
3. **compute-bound** / **memory-bound**: each traced operator is placed by its arithmetic
   intensity (FLOPs / bytes moved) against the device's ridge point (measured matmul FLOP/s /
   measured copy bandwidth); whichever side holds more operator time wins. Without an operator
   table, the step's aggregate intensity decides.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpucost.profile import OperatorStat, Verdict

DATALOADER_FRACTION = 0.30
HOST_FRACTION = 0.50

_NO_FASTER_GPU = "a faster GPU will not help: "
ADVICE = {
    "dataloader-bound": _NO_FASTER_GPU + "add loader workers (num_workers), pin_memory, "
    "or cache/preprocess the data",
    "host-bound": _NO_FASTER_GPU + "raise the batch size, use torch.compile or CUDA graphs",
    "compute-bound": "a faster GPU helps: more FLOP/s, tensor cores and lower precision "
    "(bf16/fp16/amp) speed it up",
    "memory-bound": "pick a GPU with more memory bandwidth; fusing operators "
    "(torch.compile) or a bigger batch raises arithmetic intensity",
    "unknown": "profile more steps with the operator trace enabled",
}


@dataclass(frozen=True, slots=True)
class StepFacts:
    """What the verdict looks at; seconds per step unless named otherwise."""

    step_s: float
    data_s: float
    host_s: float  # launch overhead estimate (see module docstring)
    ops_per_step: int | None
    operators: Sequence[OperatorStat]
    flops_per_step: float | None
    bytes_per_step: float | None
    ridge_flop_per_byte: float | None


def _pct(x: float) -> str:
    return f"{100.0 * x:.0f} %"


def decide(f: StepFacts) -> Verdict:
    def verdict(kind: str, reason: str) -> Verdict:
        return Verdict(kind=kind, reason=reason, advice=ADVICE[kind])

    data_fraction = f.data_s / f.step_s
    if data_fraction >= DATALOADER_FRACTION:
        return verdict("dataloader-bound",
                       f"{_pct(data_fraction)} of each {f.step_s * 1e3:.3g} ms step waits for "
                       "the next batch from the data loader")
    busy_s = max(f.step_s - f.data_s, 1e-12)
    host_fraction = f.host_s / busy_s
    if host_fraction >= HOST_FRACTION:
        per_op = ""
        if f.ops_per_step:
            per_op = (f"; {f.ops_per_step} operators per step average "
                      f"{busy_s / f.ops_per_step * 1e6:.3g} µs")
        return verdict("host-bound",
                       f"launching operators takes {_pct(host_fraction)} of the step{per_op}, "
                       "near the launch floor")
    if f.ridge_flop_per_byte is None:
        return verdict("unknown", "the device's ridge point was not measured")
    compute_s = memory_s = 0.0
    for op in f.operators:
        if op.bytes_moved <= 0.0:
            continue
        if op.flops / op.bytes_moved >= f.ridge_flop_per_byte:
            compute_s += op.time_s
        else:
            memory_s += op.time_s
    ridge = f"ridge point {f.ridge_flop_per_byte:.3g} FLOP/byte"
    if compute_s + memory_s > 0.0:
        share = compute_s / (compute_s + memory_s)
        if share >= 0.5:
            return verdict("compute-bound", f"{_pct(share)} of operator time is in operators "
                           f"above the device's {ridge} (matmul/conv-heavy)")
        return verdict("memory-bound", f"{_pct(1.0 - share)} of operator time is in operators "
                       f"below the device's {ridge} (elementwise, normalisation, copies)")
    if f.flops_per_step and f.bytes_per_step:
        intensity = f.flops_per_step / f.bytes_per_step
        kind = "compute-bound" if intensity >= f.ridge_flop_per_byte else "memory-bound"
        return verdict(kind, f"the step's arithmetic intensity {intensity:.3g} FLOP/byte is "
                       f"{'above' if kind == 'compute-bound' else 'below'} the device's {ridge}")
    return verdict("unknown", "no operator trace or FLOP count was taken")
