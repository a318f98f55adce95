"""Profile a built-in reference workload (``gpucost profile --model NAME``)."""

from __future__ import annotations

import torch

from gpucost.profile import Profile
from gpucost.profiler.core import MIN_TIMED_STEPS, StepProfiler, sigterm_raises
from gpucost.profiler.models import build
from gpucost.profiler.probe import ProbeResult, probe_batch


def profile_model(name: str, *, batch_size: int | None = 32, steps: int = 20, warmup: int = 3,
                  trace_steps: int = 2, device: str | torch.device = "cpu",
                  precision: str = "fp32", probe: bool = False, probe_max: int = 4096,
                  memory_limit_bytes: int | None = None, device_count: int = 1,
                  profile_name: str | None = None) -> tuple[Profile, ProbeResult | None]:
    """Profile built-in model ``name``; with ``probe`` first find its largest batch.

    ``batch_size`` None with ``probe`` profiles at the probed batch (per device). Interrupted
    (Ctrl-C or SIGTERM) after enough timed steps, it returns a profile marked partial; before,
    a KeyboardInterrupt propagates.
    """
    workload = build(name, device=device, precision=precision)
    found: ProbeResult | None = None
    if probe:
        def train_step(batch: int) -> None:
            workload.train_step(workload.make_batch(batch))

        found = probe_batch(train_step, workload.model, device=workload.device,
                            optimizer=workload.optimizer, memory_limit_bytes=memory_limit_bytes,
                            max_batch=probe_max, device_count=device_count)
    batch = batch_size or (found.local_batch if found else 32)
    source = (f"gpucost profile --model {name} --batch {batch} --precision {precision} "
              f"on {workload.device.type}")
    prof = StepProfiler(name=profile_name or name, steps=steps, warmup=warmup,
                        trace_steps=trace_steps, model=workload.model, device=workload.device,
                        precision=precision, sample_unit=workload.sample_unit,
                        description=workload.description, source=source)
    if found is not None:
        prof.max_batch_size = found.local_batch
    try:
        with sigterm_raises(KeyboardInterrupt), prof:
            prof.hook_optimizer(workload.optimizer)
            for x, y in prof.wrap(workload.batches(batch)):
                workload.forward_backward(x, y)
                workload.optimizer.step()
                workload.optimizer.zero_grad(set_to_none=True)
    except KeyboardInterrupt:
        if prof.steps_timed < MIN_TIMED_STEPS:
            raise
    profile = prof.result().with_changes(dataset_size=workload.dataset_size,
                                         epochs=workload.epochs)
    if found is not None:
        env = dict(profile.environment)
        env["probe"] = {"local_batch": found.local_batch, "global_batch": found.global_batch,
                        "device_count": device_count, "capped": found.capped,
                        "limit_bytes": found.limit_bytes, "tried": [list(t) for t in found.tried]}
        profile = profile.with_changes(environment=env)
    return profile, found
