"""Your own machine as an offer, so local and cloud show side by side for the same job.

The machine is detected through NVML when the NVIDIA driver and ``pynvml`` (the
``nvidia-ml-py`` package) are present, else it is a CPU. Its $/h is what running it costs:
``power kW x electricity $/kWh``, plus an optional amortisation $/h (purchase price spread over
its useful hours). Power is, in order: what the user gives, NVML's enforced power limit per GPU,
the catalog's TDP; plus ``HOST_POWER_W`` for the rest of the box. A CPU-only machine draws
``CPU_POWER_W`` unless told otherwise.

The result is a one-row price snapshot with provider ``local`` (no spot, no storage, egress or
ingress billing), which ``gpucost compare --include-local`` ranks with the rest.
"""

from __future__ import annotations

import datetime as dt
import math
import platform
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from gpucost._optional import optional
from gpucost.catalog import get_gpu, try_resolve_gpu_name
from gpucost.errors import InputError
from gpucost.pricing.snapshot import Offers, Snapshot

DEFAULT_ELECTRICITY_USD_KWH = 0.20  # between the US residential average (~0.17) and the EU's
HOST_POWER_W = 100.0  # CPU, memory, fans and PSU losses beside the GPUs under training load
CPU_POWER_W = 65.0  # a desktop CPU package under sustained load
LOCAL_SOURCE = "local"


@dataclass(frozen=True)
class LocalMachine:
    gpu: str  # canonical catalog name, or "CPU"
    gpu_count: int  # 1 for a CPU
    gpu_memory_gb: float  # per GPU; NaN for a CPU
    power_w: float  # whole machine under training load
    power_source: str
    detected_by: str  # "nvml", "given" or "none (no NVIDIA GPU found)"
    description: str


def _nvml_module() -> ModuleType | None:
    return optional("pynvml")  # the nvidia-ml-py package


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def detect(nvml: ModuleType | Any | None = None, *, power_w: float | None = None) -> LocalMachine:
    """This machine's GPUs through NVML (``nvml``: the pynvml module, injectable for tests),
    else its CPU."""
    nvml = nvml if nvml is not None else _nvml_module()
    if nvml is not None:
        try:
            nvml.nvmlInit()
        except Exception:  # no driver, or no permission: the machine has no usable GPU
            nvml = None
    if nvml is None:
        return LocalMachine(
            gpu="CPU",
            gpu_count=1,
            gpu_memory_gb=math.nan,
            power_w=CPU_POWER_W if power_w is None else power_w,
            power_source="given" if power_w is not None else f"assumed {CPU_POWER_W:g} W CPU",
            detected_by="none (no NVIDIA GPU found)",
            description=platform.processor() or platform.machine() or "CPU",
        )
    try:
        count = int(nvml.nvmlDeviceGetCount())
        if count < 1:
            return detect(_NoGpu(), power_w=power_w)
        handle = nvml.nvmlDeviceGetHandleByIndex(0)
        raw_name = _text(nvml.nvmlDeviceGetName(handle))
        memory_gb = float(nvml.nvmlDeviceGetMemoryInfo(handle).total) / 1e9
        try:
            limit_w = float(nvml.nvmlDeviceGetEnforcedPowerLimit(handle)) / 1000.0
        except Exception:  # not supported on every board
            limit_w = math.nan
    finally:
        nvml.nvmlShutdown()
    name = try_resolve_gpu_name(raw_name, memory_gb=memory_gb)
    if name is None:
        raise InputError(
            f"this machine's GPU {raw_name!r} is not in the catalog",
            hint="name it with --local-gpu (a catalog name, see `gpucost gpus`)",
        )
    if power_w is not None:
        power, source = power_w, "given"
    elif math.isfinite(limit_w) and limit_w > 0:
        power = count * limit_w + HOST_POWER_W
        source = f"NVML power limit {limit_w:g} W x {count} + {HOST_POWER_W:g} W host"
    else:
        tdp = get_gpu(name).tdp_w
        power = count * tdp + HOST_POWER_W
        source = f"catalog TDP {tdp:g} W x {count} + {HOST_POWER_W:g} W host"
    return LocalMachine(
        gpu=name,
        gpu_count=count,
        gpu_memory_gb=round(memory_gb, 1),
        power_w=power,
        power_source=source,
        detected_by="nvml",
        description=f"{count}x {raw_name}",
    )


class _NoGpu:
    """An NVML stand-in that fails to initialise: detection falls back to the CPU."""

    def nvmlInit(self) -> None:
        raise RuntimeError("no GPU")


def given_machine(gpu: str, gpu_count: int = 1, *, power_w: float | None = None) -> LocalMachine:
    """A machine described by the user rather than detected (planning for a box you own)."""
    if gpu.upper() == "CPU":
        return detect(_NoGpu(), power_w=power_w)
    if gpu_count < 1:
        raise InputError(f"local GPU count must be at least 1, got {gpu_count}")
    spec = get_gpu(gpu)
    power = gpu_count * spec.tdp_w + HOST_POWER_W if power_w is None else power_w
    source = (
        "given"
        if power_w is not None
        else (f"catalog TDP {spec.tdp_w:g} W x {gpu_count} + {HOST_POWER_W:g} W host")
    )
    return LocalMachine(
        gpu=spec.name,
        gpu_count=gpu_count,
        gpu_memory_gb=spec.memory_gb,
        power_w=power,
        power_source=source,
        detected_by="given",
        description=f"{gpu_count}x {spec.name}",
    )


def machine(
    gpu: str | None = None, gpu_count: int = 1, *, power_w: float | None = None
) -> LocalMachine:
    """The machine the user named (``gpu``: a catalog name or "CPU"), else this one, detected."""
    if gpu:
        return given_machine(gpu, gpu_count, power_w=power_w)
    return detect(power_w=power_w)


def local_price_hr(
    power_w: float, electricity_usd_kwh: float, amortisation_usd_hr: float = 0.0
) -> float:
    """USD per hour of running the machine: energy plus amortisation."""
    for label, value in (
        ("power (W)", power_w),
        ("electricity $/kWh", electricity_usd_kwh),
        ("amortisation $/h", amortisation_usd_hr),
    ):
        if not math.isfinite(value) or value < 0:
            raise InputError(f"{label} must be a number >= 0, got {value!r}")
    return power_w / 1000.0 * electricity_usd_kwh + amortisation_usd_hr


def local_snapshot(
    machine: LocalMachine | None = None,
    *,
    electricity_usd_kwh: float = DEFAULT_ELECTRICITY_USD_KWH,
    amortisation_usd_hr: float = 0.0,
    now: dt.datetime | None = None,
) -> Snapshot:
    """A one-offer snapshot for this machine (detected when ``machine`` is None)."""
    machine = machine or detect()
    now = now or dt.datetime.now(dt.UTC)
    price = local_price_hr(machine.power_w, electricity_usd_kwh, amortisation_usd_hr)
    kind = "cpu" if machine.gpu == "CPU" else f"{machine.gpu_count}x-{machine.gpu}"
    offers = Offers.from_records(
        [
            {
                "provider": "local",
                "region": "local",
                "zone": "",
                "instance_type": f"local-{kind}".lower().replace(" ", "-"),
                "gpu": machine.gpu,
                "gpu_count": machine.gpu_count,
                "gpu_memory_gb": machine.gpu_memory_gb,
                "price_hr": price,
                "storage_gb_month": 0.0,
                "egress_gb": 0.0,
                "ingress_gb": 0.0,
                "intra_node_link": "pcie" if machine.gpu_count > 1 else "",
            }
        ],
        origin="local machine",
    )
    return Snapshot(
        source=LOCAL_SOURCE,
        fetched_at=now,
        offers=offers,
        provenance={
            "machine": machine.description,
            "detected_by": machine.detected_by,
            "power_w": machine.power_w,
            "power_source": machine.power_source,
            "electricity_usd_kwh": electricity_usd_kwh,
            "amortisation_usd_hr": amortisation_usd_hr,
            "price": f"{machine.power_w:g} W x ${electricity_usd_kwh:g}/kWh"
            + (f" + ${amortisation_usd_hr:g}/h amortisation" if amortisation_usd_hr else ""),
        },
    )
