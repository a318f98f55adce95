"""Where a profile was measured, and this machine's measured rates.

Besides versions and names, a profile records three quick measurements of the device it ran
on, so that the performance model can translate it (a CPU profile to a GPU above all) and the
verdict can place the step against this device's ridge point:

- ``device_matmul_gflops``: sustained dense matmul rate at the profile's dtype, GFLOP/s;
- ``device_mem_bw_gbs``: tensor copy bandwidth (read + write), GB/s;
- ``launch_floor_us``: host time per operator of a training step whose operators do nothing
  (Python, autograd, dispatch, kernel launch), microseconds.

On CPU the first is also stored as ``cpu_matmul_gflops``. Each takes about 0.1-0.2 s.

:func:`redact_args` is what of a script's command line a profile may keep.
"""

from __future__ import annotations

import os
import platform
import re
import time
from collections.abc import Sequence
from typing import Any

import torch

from gpucost.profiler.flops import OpCensus
from gpucost.profiler.nvml import driver_version


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _repeat_for(seconds: float, device: torch.device, fn: Any) -> tuple[int, float]:
    """Run ``fn`` until ``seconds`` have passed (after one warm-up call): (calls, seconds)."""
    fn()
    _sync(device)
    calls = 0
    start = time.perf_counter()
    while True:
        fn()
        calls += 1
        _sync(device)
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return calls, elapsed


def matmul_gflops(device: torch.device, dtype: torch.dtype = torch.float32,
                  seconds: float = 0.2) -> float:
    n = 512 if device.type == "cpu" else 4096  # 32 MB per operand at fp16
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    out = torch.empty(n, n, device=device, dtype=dtype)
    calls, elapsed = _repeat_for(seconds, device, lambda: torch.mm(a, b, out=out))
    return 2.0 * n**3 * calls / elapsed / 1e9


def memory_bandwidth_gbs(device: torch.device, seconds: float = 0.1) -> float:
    numel = (32 if device.type == "cpu" else 64) * 2**20  # 128 / 256 MB of fp32, beyond caches
    src = torch.ones(numel, device=device)
    dst = torch.empty_like(src)
    calls, elapsed = _repeat_for(seconds, device, lambda: dst.copy_(src))
    return 2.0 * src.numel() * src.element_size() * calls / elapsed / 1e9


def launch_floor_s(device: torch.device) -> float:
    """Seconds of host work per operator in a training step whose kernels do nothing.

    A two-layer 1x1 network's forward, backward and SGD step: every operator is trivial, so
    its time per operator is what Python, autograd, dispatch and (on CUDA) the kernel launch
    cost. Median of several runs, divided by the operators one step launches (counted).
    """
    model = torch.nn.Sequential(torch.nn.Linear(1, 1), torch.nn.ReLU(),
                                torch.nn.Linear(1, 1)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.ones(1, 1, device=device)

    def step() -> None:
        model(x).sum().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(5):
        step()
    with OpCensus() as census:
        step()
    runs: list[float] = []
    for _ in range(9):
        _sync(device)
        start = time.perf_counter()
        for _ in range(10):
            step()
        _sync(device)
        runs.append((time.perf_counter() - start) / 10)
    runs.sort()
    return runs[len(runs) // 2] / census.total_calls


def describe(device: torch.device, dtype: torch.dtype = torch.float32,
             *, calibrate: bool = True) -> dict[str, Any]:
    """Versions, names and (with ``calibrate``) this device's measured rates."""
    env: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cuda_arch_list": list(torch.cuda.get_arch_list()) if torch.cuda.is_available() else [],
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "load_avg_1m": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        "device": device.type,
    }
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        props = torch.cuda.get_device_properties(index)
        env.update(gpu_name=torch.cuda.get_device_name(index),
                   gpu_count=torch.cuda.device_count(),
                   compute_capability=f"{props.major}.{props.minor}",
                   gpu_memory_gb=props.total_memory / 1e9,
                   cudnn=torch.backends.cudnn.version(),  # type: ignore[no-untyped-call]
                   driver=driver_version())
    if calibrate:
        env["device_matmul_gflops"] = _measured(lambda: matmul_gflops(device, dtype))
        env["device_mem_bw_gbs"] = _measured(lambda: memory_bandwidth_gbs(device))
        floor = _measured(lambda: launch_floor_s(device))
        env["launch_floor_us"] = floor * 1e6 if floor is not None else None
        if device.type == "cpu":
            env["cpu_matmul_gflops"] = env["device_matmul_gflops"]
    return env


def _measured(measure: Any) -> float | None:
    """A calibration, or None when the device has no room left for it after the run."""
    try:
        return float(measure())
    except (torch.cuda.OutOfMemoryError, MemoryError):
        return None


# Command-line arguments recorded in a profile's source: a profile is shared and committed, and
# tokens are often passed on the command line. A value is replaced when its name looks secret
# (--hf-token=..., --api-key ..., WANDB_API_KEY=...) or the value itself looks like a credential.
_SECRET_NAME = re.compile(r"token|key|secret|passw(or)?d|pwd|auth|credential", re.IGNORECASE)
_SECRET_VALUE = re.compile(r"(hf_|ghp_|gho_|ghs_|github_pat_|glpat-|sk-|sk_live_|xox[abpr]-|"
                           r"AKIA|ASIA)[A-Za-z0-9_\-]{8,}|eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-.]+")
_USERINFO = re.compile(r"(://[^/@:\s]*:)[^/@\s]+@")
REDACTED = "REDACTED"


def redact_args(args: Sequence[str]) -> list[str]:
    """``args`` with the values of secret-looking options and assignments replaced, for the
    profile's record: ``--token=v``, ``--api-key v``, ``HF_TOKEN=v``, a bare ``hf_...`` or
    ``AKIA...`` value, and a URL's password."""
    out: list[str] = []
    secret_next = False
    for arg in args:
        if secret_next and not arg.startswith("-"):
            out.append(REDACTED)
            secret_next = False
            continue
        secret_next = False
        name, eq, _value = arg.partition("=")
        if eq and _SECRET_NAME.search(name):
            out.append(f"{name}={REDACTED}")
        elif arg.startswith("-") and _SECRET_NAME.search(arg):
            out.append(arg)
            secret_next = True  # --token VALUE
        else:
            out.append(_USERINFO.sub(rf"\1{REDACTED}@", _SECRET_VALUE.sub(REDACTED, arg)))
    return out
