"""The memory rule every plan passes: one device's share of a step must fit its GPU.

A plan whose per-device batch does not fit is re-planned, cheapest change first:

1. a smaller micro-batch with gradient accumulation, unsharded (same optimizer step; each
   micro-step pays the fixed costs of a step again: :func:`gpucost.model.perf.predict` prices it);
2. ZeRO-2 over the group (optimizer state and gradients sharded, one fp32 weight copy kept):
   reduce-scatter plus all-gather move the bytes of one all-reduce, so no extra time;
3. FSDP / ZeRO-3 (everything sharded): parameters are gathered again for the backward pass,
   half an all-reduce more per step (Rajbhandari et al. 2020), counted as not overlapped;

each with a micro-batch if the full one still does not fit. A plan none of these fits is left
out, with the reason. Peaks come from :mod:`gpucost.model.memory` (measured or estimated
activations per sample, model states per parameter).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpucost.catalog.spec import GpuSpec
from gpucost.model.memory import (
    STATE_BYTES_PER_PARAM,
    UNSHARDED_BYTES_PER_PARAM,
    activation_gb_per_sample,
    model_states_gb,
    usable_gb,
)
from gpucost.profile import Profile

FSDP_EXTRA_ALLREDUCE = 0.5  # FSDP moves 1.5x an all-reduce's bytes per step


@dataclass(frozen=True, slots=True)
class MemoryPlan:
    """How a group runs the profile's batch within each GPU's memory (or why it cannot)."""

    fits: bool
    peak_gb: float  # predicted peak per GPU; NaN: unknown (a CPU, or no activation estimate)
    usable_gb: float  # what a training process can allocate on the GPU (NaN on a CPU)
    micro_batch: int  # per device per micro-step
    grad_accum_steps: int
    sharding: str  # "" (data parallel), "ZeRO-2" or "FSDP"
    reason: str  # "" when the profile's batch fits as it is

    @property
    def replanned(self) -> bool:
        return self.fits and bool(self.reason)

    @property
    def extra_allreduce(self) -> float:
        """Extra communication per step, in all-reduces of the gradients."""
        return FSDP_EXTRA_ALLREDUCE if self.sharding == "FSDP" else 0.0


def _states_gb(profile: Profile, sharding: str, group_gpus: int) -> float:
    full = model_states_gb(profile)
    if sharding == "ZeRO-2":
        sharded = STATE_BYTES_PER_PARAM - UNSHARDED_BYTES_PER_PARAM
        return profile.param_count * (UNSHARDED_BYTES_PER_PARAM + sharded / group_gpus) / 1e9
    if sharding == "FSDP":
        return full / group_gpus
    return full


def need_gb(profile: Profile, *, micro_batch: int, sharding: str, group_gpus: int
            ) -> tuple[float, str]:
    """Per-GPU memory one way of running the profile needs (model states sharded as
    ``sharding`` says over ``group_gpus`` GPUs, plus ``micro_batch`` samples' activations), and
    the activations' basis: "measured", "estimated" or "states only" (none estimated)."""
    per_sample, basis = activation_gb_per_sample(profile)
    return _states_gb(profile, sharding, group_gpus) + (per_sample or 0.0) * micro_batch, basis


def plan_memory(profile: Profile, spec: GpuSpec, group_gpus: int, *,
                activations: tuple[float | None, str] | None = None) -> MemoryPlan:
    """The first way, cheapest first, that the profile's per-device batch fits on ``spec`` in a
    data-parallel group of ``group_gpus`` GPUs. ``activations``: the profile's
    :func:`activation_gb_per_sample`, when the caller has it (a ranking plans hundreds of
    groups of one profile, and each estimate matches the profile against the signatures)."""
    batch = profile.batch_size
    usable = usable_gb(spec)
    per_sample, _ = activations or activation_gb_per_sample(profile)
    if per_sample is None and model_states_gb(profile) <= usable:
        # No activation estimate: the states fit, the batch may not; the peak stays unknown
        # (NaN) so no output calls it a fit.
        return MemoryPlan(True, math.nan, usable, batch, 1, "", "")
    stages = ("", "ZeRO-2", "FSDP") if group_gpus > 1 else ("",)
    for sharding in stages:
        states = _states_gb(profile, sharding, group_gpus)
        room = usable - states
        if room <= 0:
            continue
        if per_sample is None or per_sample <= 0:
            micro = batch
        else:
            micro = min(batch, math.floor(room / per_sample))
        if micro < 1:
            continue
        accum = math.ceil(batch / micro)
        micro = math.ceil(batch / accum)  # the same optimizer step, split evenly
        peak = states + (per_sample or 0.0) * micro  # need_gb, with the estimate at hand
        if not sharding and accum == 1:
            return MemoryPlan(True, peak, usable, batch, 1, "", "")
        how = [f"micro-batch {micro} x {accum} accumulation steps"] if accum > 1 else []
        if sharding:
            how.insert(0, f"{sharding} over {group_gpus} GPUs")
        return MemoryPlan(True, peak, usable, micro, accum, sharding,
                          f"batch {batch} needs more than {usable:.1f} GB: "
                          + " with ".join(how) + f" ({peak:.1f} GB)")
    states = _states_gb(profile, stages[-1], group_gpus)
    need = states + (per_sample or 0.0)
    return MemoryPlan(False, math.nan, usable, batch, 1, "",
                      f"needs {need:.1f} GB per GPU even at micro-batch 1"
                      + (f" with {stages[-1]} over {group_gpus} GPUs" if stages[-1] else "")
                      + f"; {usable:.1f} GB usable on {spec.name}")


def cpu_memory_plan(profile: Profile) -> MemoryPlan:
    """A machine without a GPU runs a CPU-measured profile as measured: nothing to check."""
    return MemoryPlan(True, math.nan, math.nan, profile.batch_size, 1, "", "")
