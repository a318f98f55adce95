"""GPU utilisation and memory from NVML while the timed steps run (NVIDIA only).

Uses ``pynvml`` (package nvidia-ml-py) when it is installed and a driver answers; anywhere else
every function returns ``{}`` without a word, because NVML is a bonus, never a requirement.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

from gpucost._optional import optional

SAMPLE_INTERVAL_S = 0.1


def _nvml() -> Any | None:
    pynvml = optional("pynvml")
    if pynvml is None:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # no driver, no GPU: both mean "no NVML here"
        return None
    return pynvml


def driver_version() -> str | None:
    nv = _nvml()
    if nv is None:
        return None
    try:
        version = nv.nvmlSystemGetDriverVersion()
    except Exception:
        return None
    return version.decode() if isinstance(version, bytes) else str(version)


class NvmlSampler:
    """Samples one GPU in a background thread between :meth:`start` and :meth:`stop`."""

    def __init__(self, device_index: int = 0) -> None:
        self._index = device_index
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._util: list[float] = []
        self._mem_util: list[float] = []
        self._mem_used: list[float] = []
        self._power: list[float] = []
        self._handle: Any = None
        self._nv: Any = _nvml()

    def start(self) -> None:
        if self._nv is None:
            return
        try:
            self._handle = self._nv.nvmlDeviceGetHandleByIndex(self._index)
        except Exception:
            self._nv = None
            return
        self._thread = threading.Thread(target=self._run, name="gpucost-nvml", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        nv, handle = self._nv, self._handle
        while not self._stop.wait(SAMPLE_INTERVAL_S):
            try:
                rates = nv.nvmlDeviceGetUtilizationRates(handle)
                mem = nv.nvmlDeviceGetMemoryInfo(handle)
                self._util.append(float(rates.gpu))
                self._mem_util.append(float(rates.memory))
                self._mem_used.append(float(mem.used) / 1e9)
                self._power.append(nv.nvmlDeviceGetPowerUsage(handle) / 1000.0)
            except Exception:
                return

    def stop(self) -> dict[str, Any]:
        """Stop sampling; the summary (percent, GB, W), or ``{}`` when nothing was sampled."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)
        if not self._util:
            return {}
        result: dict[str, Any] = {
            "samples": len(self._util),
            "gpu_util_pct_mean": sum(self._util) / len(self._util),
            "mem_util_pct_mean": sum(self._mem_util) / len(self._mem_util),
            "memory_used_gb_max": max(self._mem_used),
        }
        if self._power:
            result["power_w_mean"] = sum(self._power) / len(self._power)
        with contextlib.suppress(Exception):
            result["memory_total_gb"] = self._nv.nvmlDeviceGetMemoryInfo(self._handle).total / 1e9
        return result
