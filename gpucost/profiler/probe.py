"""Batch probe: the largest power-of-two batch whose real forward + backward + optimizer step fits.

Each try runs a real training step at the batch size under test. On CUDA an out-of-memory is
``torch.cuda.OutOfMemoryError``; on CPU the step runs under an :class:`OpCensus` whose
``limit_bytes`` makes the allocation that crosses the limit raise
:class:`~gpucost.profiler.flops.MemoryLimitExceeded` (default limit: 80 % of the memory the
OS reports available). Either way the failed try's tensors are released, the gradients
dropped, and the probe returns the last size that fitted.

With several data-parallel devices each holds the local batch, so the global batch is the
local maximum x ``device_count``.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import dataclass

import torch

from gpucost.errors import ProfileError
from gpucost.profiler.flops import MemoryLimitExceeded, OpCensus

AVAILABLE_FRACTION = 0.8


@dataclass(frozen=True, slots=True)
class ProbeResult:
    local_batch: int  # per device
    global_batch: int  # across device_count devices
    tried: tuple[tuple[int, bool], ...]  # (batch, fitted) in the order tried
    capped: bool  # True when the largest try still fitted (the true limit is higher)
    limit_bytes: int | None  # the imposed CPU limit, None on CUDA


def available_memory_bytes() -> int | None:
    """MemAvailable from /proc/meminfo, or None where there is no such file."""
    try:
        with open("/proc/meminfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _resident_bytes(model: torch.nn.Module, optimizer: torch.optim.Optimizer | None) -> int:
    tensors = {t.untyped_storage().data_ptr(): t
               for t in [*model.parameters(), *model.buffers()]}
    if optimizer is not None:
        for state in optimizer.state.values():
            for value in state.values():
                if isinstance(value, torch.Tensor):
                    tensors[value.untyped_storage().data_ptr()] = value
    return sum(t.untyped_storage().nbytes() for t in tensors.values())


def _release(model: torch.nn.Module, device: torch.device, *, collect: bool) -> None:
    model.zero_grad(set_to_none=True)
    if collect:  # a failed try leaves its tensors in the traceback's frames (a cycle)
        gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def probe_batch(train_step: Callable[[int], object], model: torch.nn.Module, *,
                device: str | torch.device = "cpu",
                optimizer: torch.optim.Optimizer | None = None,
                memory_limit_bytes: int | None = None, start: int = 1, max_batch: int = 4096,
                device_count: int = 1) -> ProbeResult:
    """Double the batch from ``start`` until a try runs out of memory or passes ``max_batch``.

    ``train_step(batch)`` must build a batch of that size and run forward, backward and the
    optimizer step. ``memory_limit_bytes`` applies on CPU only (the census accounting); on
    CUDA the device's own capacity is the limit.
    """
    dev = torch.device(device)
    if start < 1 or start & (start - 1):
        raise ProfileError(f"the probe starts at a power of two, got {start}")
    limit: int | None = None
    if dev.type != "cuda":
        limit = memory_limit_bytes
        if limit is None:
            available = available_memory_bytes()
            limit = int(available * AVAILABLE_FRACTION) if available else None
    tried: list[tuple[int, bool]] = []
    best = 0
    batch = start
    while batch <= max_batch:
        fitted = _try(train_step, model, optimizer, batch, dev, limit)
        tried.append((batch, fitted))
        if not fitted:
            break
        best = batch
        batch *= 2
    if best == 0:
        raise ProfileError(f"a batch of {start} does not fit in memory on {dev.type}",
                           hint="use a smaller model, a lower precision, or a bigger device")
    return ProbeResult(local_batch=best, global_batch=best * device_count, tried=tuple(tried),
                       capped=tried[-1][1], limit_bytes=limit)


def _try(train_step: Callable[[int], object], model: torch.nn.Module,
         optimizer: torch.optim.Optimizer | None, batch: int, device: torch.device,
         limit: int | None) -> bool:
    _release(model, device, collect=False)
    fitted = False
    try:
        if device.type == "cuda" or limit is None:
            train_step(batch)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
        else:
            with OpCensus(baseline_bytes=_resident_bytes(model, optimizer), limit_bytes=limit):
                train_step(batch)
        fitted = True
    except (MemoryLimitExceeded, torch.cuda.OutOfMemoryError):
        pass
    finally:
        _release(model, device, collect=not fitted)
    return fitted
