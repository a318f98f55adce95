"""StepProfiler: measure a training loop's steps with a few perf_counter calls per step.

Use it around a loop you can edit::

    with StepProfiler(name="mnist", model=model, steps=20) as prof:
        for x, y in prof.wrap(loader):      # times the wait for each batch, counts samples
            loss = model(x).loss(y); loss.backward()
            opt.step(); opt.zero_grad()
            prof.step()                     # one optimizer step ends here
    prof.save()                             # profiles/mnist.json

or, when the loop cannot be edited, ``prof.hook_optimizer(opt)``: every ``opt.step()`` then
ends a step by itself (and its duration is the optimizer share of the breakdown).

A run has four phases, in this order: ``warmup`` steps (discarded: allocator, autotuning,
lazy init), one ``census`` step (FLOPs, operator calls, bytes, memory: see
:mod:`gpucost.profiler.flops`), ``trace_steps`` under torch.profiler (the operator table), then
``steps`` timed steps, which alone give the step-time statistics. Only the timed phase is
always-on instrumentation: per step, two ``perf_counter`` calls per batch fetched and per
optimizer step, and one at the step boundary (see bench/profiler_overhead.py).

On CUDA the timed steps are not synchronised: the wall time between step boundaries is the
throughput the loop achieves (a loop that never syncs is paced by the caching allocator and
the launch queue). Data wait and optimizer time are host-side times.
"""

from __future__ import annotations

import os
import signal
import statistics
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

import torch

from gpucost.catalog import resolve_gpu_name, try_resolve_gpu_name
from gpucost.catalog.spec import PRECISIONS
from gpucost.errors import ProfileError
from gpucost.profile import OperatorStat, Profile, StepBreakdown, default_profile_path
from gpucost.profiler import environment
from gpucost.profiler.flops import OpCensus
from gpucost.profiler.nvml import NvmlSampler
from gpucost.profiler.ops import operator_table
from gpucost.profiler.verdict import StepFacts, decide

MIN_TIMED_STEPS = 2  # fewer cannot give a median worth writing down


@contextmanager
def sigterm_raises(exception: type[BaseException]) -> Iterator[None]:
    """Turn SIGTERM (a job scheduler, ``kill``) into ``exception`` raised where the program is,
    so a run unwinds and keeps what it measured; only the main thread can take signals."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_term(signum: int, frame: FrameType | None) -> None:
        raise exception

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)

_DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "amp": torch.float16,
           "fp16": torch.float16, "bf16": torch.bfloat16}


_driver: StepProfiler | None = None  # the profiler `gpucost profile SCRIPT` runs a script under


@contextmanager
def driving(profiler: StepProfiler) -> Iterator[None]:
    """Make StepProfilers created meanwhile (by a script that uses this API itself) delegate
    to ``profiler``, so one script run gives one consistent measurement."""
    global _driver
    previous, _driver = _driver, profiler
    try:
        yield
    finally:
        _driver = previous


# Not in errors.py: control flow that unwinds the user's training loop and is caught by the
# profiler itself; it never reaches a user.
class ProfilingComplete(BaseException):
    """Raised at a step boundary once the planned steps are measured (``stop_when_done``).

    A BaseException so that a script's ``except Exception`` does not swallow it.
    """


@contextmanager
def quiet_stderr(quiet: bool = True) -> Iterator[None]:
    """Silence file descriptor 2: kineto logs "profiler_start/stop" lines there from C++."""
    if not quiet:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _batch_len(batch: Any) -> int:
    """Samples in a batch: the leading dimension of its first tensor (0 when there is none)."""
    for _ in range(4):
        if isinstance(batch, torch.Tensor):
            return int(batch.shape[0]) if batch.dim() else 1
        if isinstance(batch, list | tuple) and batch:
            batch = batch[0]
        elif isinstance(batch, dict) and batch:
            batch = next(iter(batch.values()))
        else:
            return 0
    return 0


def _percentile(sorted_values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks, q in [0, 1]."""
    pos = q * (len(sorted_values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


class _TimedLoader:
    """Iterator wrapper that charges the wait for each batch to the current step."""

    def __init__(self, profiler: StepProfiler, iterable: Iterable[Any], *, stop_when_done: bool):
        self._prof = profiler
        self._source = iterable
        self._it: Iterator[Any] | None = None
        self._stop_when_done = stop_when_done

    def __iter__(self) -> _TimedLoader:
        self._it = iter(self._source)
        return self

    def __next__(self) -> Any:
        prof = self._prof
        if self._stop_when_done and prof.done:
            raise StopIteration
        if self._it is None:
            self._it = iter(self._source)
        start = time.perf_counter()
        batch = next(self._it)
        prof._data_s += time.perf_counter() - start
        prof._samples += _batch_len(batch)
        return batch

    def __len__(self) -> int:
        return len(self._source)  # type: ignore[arg-type]

    def __getattr__(self, name: str) -> Any:
        # A loop may reach for the underlying iterator's attributes (e.g. ``_dataset``).
        return getattr(self._it if self._it is not None else self._source, name)


class StepProfiler:
    """Measures a training loop's steps and builds a :class:`~gpucost.profile.Profile`.

    ``steps``: timed steps to record (None: until the loop ends). ``batch_size``: samples per
    step, when the loop does not fetch batches through :meth:`wrap` (else counted there).
    ``model``: for the parameter count when no optimizer is hooked. ``device``: where the step
    runs (default: the parameters' device). ``precision``: recorded, and the dtype of the
    device calibration; None detects it from the dtypes the census step's matmuls ran at
    (autocast shows as amp). ``stop_when_done``: raise :class:`ProfilingComplete` at the boundary
    after the last timed step (the script runner uses it to end a script it cannot edit).
    """

    def __init__(self, *, name: str = "unnamed", steps: int | None = None, warmup: int = 3,
                 trace_steps: int = 2, census: bool = True, batch_size: int | None = None,
                 model: torch.nn.Module | None = None, device: str | torch.device | None = None,
                 precision: str | None = None, sample_unit: str = "samples", description: str = "",
                 source: str = "", device_count: int = 1, stop_when_done: bool = False,
                 calibrate: bool = True) -> None:
        if steps is not None and steps < MIN_TIMED_STEPS:
            raise ProfileError(f"steps must be at least {MIN_TIMED_STEPS}, got {steps}")
        if warmup < 0 or trace_steps < 0:
            raise ProfileError("warmup and trace_steps must be 0 or more")
        if precision is not None and precision not in PRECISIONS:
            raise ProfileError(f"precision {precision!r} is not one of {', '.join(PRECISIONS)}")
        self.name = name
        self.steps = steps
        self.warmup = warmup
        self.trace_steps = trace_steps
        self.census_steps = 1 if census else 0
        self.batch_size = batch_size
        self.model = model
        self.device = torch.device(device) if device is not None else None
        self.precision = precision
        self.sample_unit = sample_unit
        self.description = description
        self.source = source
        self.device_count = device_count
        self.stop_when_done = stop_when_done
        self.calibrate = calibrate
        self.partial = False
        self.max_batch_size: int | None = None
        self.nvml: dict[str, Any] = {}
        # per-step counters, written by the loader wrapper and optimizer hooks
        self._data_s = 0.0
        self._opt_s = 0.0
        self._opt_start = 0.0
        self._samples = 0
        # results of the timed phase: one entry per timed step
        self._step_s: list[float] = []
        self._step_data_s: list[float] = []
        self._step_opt_s: list[float] = []
        self._step_samples: list[int] = []
        self._completed = 0  # step boundaries seen
        self._t0 = 0.0
        self._active: Any = None  # the census or torch.profiler context now entered
        self._census: OpCensus | None = None
        self._trace: Any = None
        self._trace_s = 0.0
        # strong references: a script's optimizer is gone by the time its profile is built
        self._optimizers: dict[int, torch.optim.Optimizer] = {}
        self._hooks: list[Any] = []
        self._nvml_sampler: Any = None
        self._closed = False
        self._started = False
        self._profile: Profile | None = None
        self._cuda_peak_bytes: int | None = None
        # A profiler a script creates under `gpucost profile` forwards to the driver's.
        self._delegate = _driver
        self._explicit_marks = False  # a delegate's step() marks steps, not optimizer.step()
        self._opt_marked = False  # the last boundary came from optimizer.step()

    # ---- phases -------------------------------------------------------------------------
    @property
    def done(self) -> bool:
        """True once the planned timed steps are recorded."""
        if self._delegate is not None:
            return self._delegate.done
        return self.steps is not None and len(self._step_s) >= self.steps

    @property
    def steps_timed(self) -> int:
        return self._delegate.steps_timed if self._delegate is not None else len(self._step_s)

    def _phase(self, index: int) -> str:
        if index < self.warmup:
            return "warmup"
        index -= self.warmup
        if index < self.census_steps:
            return "census"
        index -= self.census_steps
        if index < self.trace_steps:
            return "trace"
        return "timed"

    # ---- the always-on part -------------------------------------------------------------
    def step(self) -> None:
        """Mark the end of one optimizer step (and the start of the next)."""
        now = time.perf_counter()
        if self._delegate is not None:
            self._delegate._explicit_step()
            return
        if self._closed or self.done:
            return
        phase = self._phase(self._completed)
        if phase == "timed":
            self._step_s.append(now - self._t0)
            self._step_data_s.append(self._data_s)
            self._step_opt_s.append(self._opt_s)
            self._step_samples.append(self._samples)
        self._completed += 1
        if self._phase(self._completed) != phase:
            self._switch(phase, self._phase(self._completed))
        self._data_s = self._opt_s = 0.0
        self._samples = 0
        self._opt_marked = False
        if self.done and self.stop_when_done:
            self.close()
            raise ProfilingComplete
        self._t0 = time.perf_counter()

    def _explicit_step(self) -> None:
        """A step marked by a delegate: from now on those marks, not optimizer.step(), count."""
        first = not self._explicit_marks
        self._explicit_marks = True
        if first and self._opt_marked and self._samples == 0:
            return  # optimizer.step() already ended this step a moment ago
        self.step()

    def wrap(self, iterable: Iterable[Any], *, stop_when_done: bool = True) -> Iterable[Any]:
        """Wrap a data loader (any iterable of batches) to time the wait for each batch.

        With ``steps`` set the iteration ends once they are measured, so the loop around it
        ends by itself.
        """
        if self._delegate is not None:
            from torch.utils.data import DataLoader

            if isinstance(iterable, DataLoader):
                return iterable  # the driver times every DataLoader already
            return self._delegate.wrap(iterable, stop_when_done=False)
        return _TimedLoader(self, iterable, stop_when_done=stop_when_done)

    def hook_optimizer(self, optimizer: torch.optim.Optimizer, *, mark_steps: bool = True) -> None:
        """Time ``optimizer.step()`` and (with ``mark_steps``) end a step after each call."""
        if self._delegate is not None:
            return  # the driver's global hooks time every optimizer
        self._hooks.append(optimizer.register_step_pre_hook(self._pre_opt))
        post = self._post_opt_mark if mark_steps else self._post_opt
        self._hooks.append(optimizer.register_step_post_hook(post))
        self._optimizers[id(optimizer)] = optimizer

    def hook_all_optimizers(self) -> None:
        """Like :meth:`hook_optimizer` for every optimizer in the process (global hooks)."""
        if self._delegate is not None:
            return
        from torch.optim.optimizer import (
            register_optimizer_step_post_hook,
            register_optimizer_step_pre_hook,
        )

        self._hooks.append(register_optimizer_step_pre_hook(self._pre_opt))
        self._hooks.append(register_optimizer_step_post_hook(self._post_opt_mark))

    def _pre_opt(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        self._opt_start = time.perf_counter()

    def _post_opt(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        self._opt_s += time.perf_counter() - self._opt_start

    def _post_opt_mark(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        self._opt_s += time.perf_counter() - self._opt_start
        self._optimizers.setdefault(id(optimizer), optimizer)
        if not self._explicit_marks:
            self.step()
            self._opt_marked = True

    # ---- phase switches (not timed) -----------------------------------------------------
    def _switch(self, ended: str, starting: str) -> None:
        if self.device is None:
            self.device = self._infer_device()
        if self._active is not None:
            if self._is_cuda:
                torch.cuda.synchronize(self.device)
            if ended == "trace":
                self._trace_s = time.perf_counter() - self._trace_s
            active, self._active = self._active, None
            with quiet_stderr(active is self._trace):
                active.__exit__(None, None, None)
        if starting == "census":
            self._census = OpCensus(baseline_bytes=self._resident_bytes(),
                                    step_shapes={tuple(p.shape) for p in self._params()})
            self._active = self._census.__enter__()
        elif starting == "trace":
            self._trace = self._make_trace()
            with quiet_stderr():
                self._active = self._trace.__enter__()
            if self._is_cuda:
                torch.cuda.synchronize(self.device)
            self._trace_s = time.perf_counter()
        elif starting == "timed" and self.device is not None and self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
            self._nvml_sampler = NvmlSampler(self.device.index or 0)
            self._nvml_sampler.start()

    def _make_trace(self) -> Any:
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU]
        if self._is_cuda:
            activities.append(ProfilerActivity.CUDA)
        return profile(activities=activities)

    @property
    def _is_cuda(self) -> bool:
        return self.device is not None and self.device.type == "cuda"

    def _params(self) -> list[torch.Tensor]:
        seen: dict[int, torch.Tensor] = {}
        if self.model is not None:
            for p in self.model.parameters():
                seen[id(p)] = p
        for opt in self._optimizers.values():
            for group in opt.param_groups:
                for p in group["params"]:
                    seen[id(p)] = p
        return list(seen.values())

    def _infer_device(self) -> torch.device:
        params = self._params()
        return params[0].device if params else torch.device("cpu")

    def _resident_bytes(self) -> int:
        """Bytes alive before the census step: parameters, buffers, gradients, optimizer state."""
        tensors: dict[int, torch.Tensor] = {}
        for p in self._params():
            tensors[p.untyped_storage().data_ptr()] = p
            if p.grad is not None:
                tensors[p.grad.untyped_storage().data_ptr()] = p.grad
        if self.model is not None:
            for b in self.model.buffers():
                tensors[b.untyped_storage().data_ptr()] = b
        for opt in self._optimizers.values():
            for state in opt.state.values():
                for value in state.values():
                    if isinstance(value, torch.Tensor):
                        tensors[value.untyped_storage().data_ptr()] = value
        return sum(t.untyped_storage().nbytes() for t in tensors.values())

    # ---- context manager ----------------------------------------------------------------
    def __enter__(self) -> StepProfiler:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is not None and not issubclass(exc_type, ProfilingComplete | StopIteration):
            self.partial = True
        self.close()

    def start(self) -> None:
        if self._started:
            return
        self._started = True
        self._t0 = time.perf_counter()

    def close(self) -> None:
        """Leave any census or trace still open and stop sampling. Safe to call twice."""
        if self._closed or self._delegate is not None:
            self._closed = True
            return
        self._closed = True
        if self.steps is not None and len(self._step_s) < self.steps:
            self.partial = True
        for handle in self._hooks:
            handle.remove()
        self._hooks.clear()
        if self._active is not None:
            active, self._active = self._active, None
            with quiet_stderr(active is self._trace):
                active.__exit__(None, None, None)
            if self._trace is active:  # an unfinished trace covers too few steps to use
                self._trace = None
        if self._is_cuda:
            self._cuda_peak_bytes = int(torch.cuda.max_memory_allocated(self.device))
        if self._nvml_sampler is not None:
            self.nvml = self._nvml_sampler.stop()

    # ---- the result ---------------------------------------------------------------------
    def result(self) -> Profile:
        """The profile of the steps measured so far (closing the profiler if still open)."""
        if self._delegate is not None:
            return self._delegate.result()
        self.close()
        if self._profile is None:
            self._profile = self._build()
            self._optimizers.clear()  # let the model go
            self.model = None
        return self._profile

    def save(self, path: str | os.PathLike[str] | None = None) -> Path:
        """Write the profile atomically; default ``profiles/<name>.json`` in the current folder."""
        target = Path(path) if path is not None else default_profile_path(self.name)
        return self.result().save(target)

    def _build(self) -> Profile:
        timed = len(self._step_s)
        if timed < MIN_TIMED_STEPS:
            planned = self.warmup + self.census_steps + self.trace_steps + MIN_TIMED_STEPS
            raise ProfileError(
                f"only {timed} timed step(s) were measured ({self._completed} steps in all); "
                f"a profile needs at least {planned} optimizer steps: {self.warmup} warm-up, "
                f"{self.census_steps + self.trace_steps} detail, {MIN_TIMED_STEPS} timed",
                hint="let the loop run longer, or lower warmup/trace_steps")
        device = self.device or self._infer_device()
        steps_sorted = sorted(self._step_s)
        step_s = statistics.median(self._step_s)
        data_s = statistics.median(self._step_data_s)
        opt_s = statistics.median(self._step_opt_s)
        batch = self.batch_size or int(statistics.median(self._step_samples))
        if batch <= 0:
            raise ProfileError("the batch size is unknown: no batch came through the wrapped "
                               "loader", hint="pass batch_size= (CLI: --batch N)")
        params = self._params()
        param_count = sum(p.numel() for p in params)
        if param_count <= 0:
            raise ProfileError("no parameters found: pass model= or hook the optimizer",
                               hint="CLI scripts must call optimizer.step()")
        param_bytes = float(sum(p.numel() * p.element_size() for p in params))
        grad_bytes = float(sum(p.numel() * p.element_size() for p in params if p.requires_grad))

        precision = self.precision or self._detect_precision(params, device)
        dtype = _DTYPES[precision]
        if precision == "amp" and device.type == "cpu":
            dtype = torch.bfloat16  # CPU autocast runs bf16
        env = environment.describe(device, dtype, calibrate=self.calibrate)
        # Which units float32 math ran on (gpucost.model.translate.math_unit reads these).
        env["float32_matmul_precision"] = torch.get_float32_matmul_precision()
        env["matmul_allow_tf32"] = bool(torch.backends.cuda.matmul.allow_tf32)
        env["cudnn_allow_tf32"] = bool(torch.backends.cudnn.allow_tf32)
        floor_s = (env.get("launch_floor_us") or 0.0) * 1e-6
        census = self._census
        flops_step = census.total_flops if census is not None and census.total_flops else None
        bytes_step = census.total_bytes if census is not None and census.total_bytes else None
        ops_per_step = census.total_calls if census is not None else None
        operators: tuple[OperatorStat, ...] = ()
        kernel_s: float | None = None
        if self._trace is not None:
            averages = self._trace.key_averages()
            operators = operator_table(
                averages, steps=self.trace_steps, on_device=self._is_cuda,
                flops=census.flops_by_op if census is not None else {},
                bytes_moved=dict(census.bytes_moved) if census is not None else {})
            if self._is_cuda:
                # each kernel is the "self" device time of exactly one ATen operator
                kernel_s = sum(op.time_s for op in operator_table(
                    averages, steps=self.trace_steps, on_device=True, flops={},
                    bytes_moved={}, max_rows=None)) or None  # None: CUPTI saw no kernels
                env["kernel_s_per_step"] = kernel_s
            env["trace_step_s"] = self._trace_s / self.trace_steps

        # Launch overhead of the whole non-data step (optimizer included): on CUDA the time
        # the device idles in a (not traced) step, elsewhere operators x the launch floor.
        if kernel_s is not None:
            launch_s = max(step_s - data_s - kernel_s, 0.0)
        elif ops_per_step is not None:
            launch_s = ops_per_step * floor_s
        else:
            launch_s = 0.0
        launch_s = min(launch_s, step_s - data_s)
        busy_s = max(step_s - data_s - opt_s, 0.0)
        host_s = min(busy_s, launch_s)
        breakdown = StepBreakdown(data_s=data_s, host_s=host_s, compute_s=busy_s - host_s,
                                  optimizer_s=opt_s)
        ridge = None
        if env.get("device_matmul_gflops") and env.get("device_mem_bw_gbs"):
            ridge = env["device_matmul_gflops"] / env["device_mem_bw_gbs"]
        env["ridge_flop_per_byte"] = ridge
        env["ops_per_step"] = ops_per_step
        verdict = decide(StepFacts(
            step_s=step_s, data_s=data_s, host_s=launch_s, ops_per_step=ops_per_step,
            operators=operators, flops_per_step=flops_step,
            bytes_per_step=bytes_step, ridge_flop_per_byte=ridge))

        if self._cuda_peak_bytes:
            peak_gb: float | None = self._cuda_peak_bytes / 1e9
        elif census is not None and census.peak_bytes:
            peak_gb = census.peak_bytes / 1e9
        else:
            peak_gb = None
        return Profile(
            gpu=self._gpu_name(device),
            precision=precision,  # type: ignore[arg-type]
            batch_size=batch,
            step_time_s=step_s,
            param_count=float(param_count),
            name=self.name,
            description=self.description,
            source=self.source or f"gpucost profiler, {timed} timed steps on {device.type}",
            sample_unit=self.sample_unit,
            device_count=self.device_count,
            step_time_p10_s=_percentile(steps_sorted, 0.10),
            step_time_p90_s=_percentile(steps_sorted, 0.90),
            flops_per_sample=flops_step / batch if flops_step else None,
            bytes_per_step=bytes_step,
            step_bytes=census.step_bytes if census is not None and bytes_step else None,
            param_bytes=param_bytes,
            grad_bytes=grad_bytes or None,
            peak_memory_gb=peak_gb,
            breakdown=breakdown,
            operators=operators,
            verdict=verdict,
            max_batch_size=self.max_batch_size,
            environment=env,
            nvml=self.nvml,
            measured_at=datetime.now(UTC).isoformat(timespec="seconds"),
            steps_measured=timed,
            partial=self.partial,
            workload=census.workload_mix() if census is not None else None,
            launches_per_step=(float(sum(census.kernel_calls.values()))
                               if census is not None and census.kernel_calls else None),
        )

    def _detect_precision(self, params: list[torch.Tensor], device: torch.device) -> str:
        """The precision the census step's matmuls ran at: their weights' dtype, compared
        with the parameters' (a lower one under fp32 parameters is autocast: amp)."""
        math: dict[torch.dtype, float] = self._census.matmul_dtypes if self._census else {}
        if not math:
            return "fp32"
        dtype = max(math, key=lambda d: math[d])
        param_dtypes = {p.dtype for p in params if p.is_floating_point()}
        if dtype in (torch.float16, torch.bfloat16):
            if param_dtypes and param_dtypes <= {dtype}:
                return "fp16" if dtype == torch.float16 else "bf16"
            return "amp"
        if device.type == "cuda" and (torch.backends.cuda.matmul.allow_tf32
                                      or torch.get_float32_matmul_precision() != "highest"):
            return "tf32"
        return "fp32"

    @staticmethod
    def _gpu_name(device: torch.device) -> str:
        return gpu_name(device)


def gpu_name(device: torch.device) -> str:
    """The catalog name of ``device`` ("CPU" for the CPU); UnknownGpuError if not catalogued."""
    if device.type != "cuda":
        return "CPU"

    raw = torch.cuda.get_device_name(device)
    memory_gb = torch.cuda.get_device_properties(device).total_memory / 1e9
    return try_resolve_gpu_name(raw, memory_gb=memory_gb) or resolve_gpu_name(raw)
