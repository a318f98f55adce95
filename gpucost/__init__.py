"""gpucost: where and how to train on rented GPUs for the least money.

The public API is re-exported here and loaded lazily, so ``import gpucost`` stays cheap and the
planning path never imports torch, textual or boto3.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    "GpuCostError": "gpucost.errors",
    "Profile": "gpucost.profile",
    "GpuSpec": "gpucost.catalog",
    "get_gpu": "gpucost.catalog",
    "resolve_gpu_name": "gpucost.catalog",
    "try_resolve_gpu_name": "gpucost.catalog",
    "all_gpus": "gpucost.catalog",
    "compare": "gpucost.planning.api",
    "plan": "gpucost.planning.api",
    "predict": "gpucost.measurements",  # the model, taught by the user's own measurements
    "Prediction": "gpucost.model.perf",
    "fit_memory": "gpucost.model.memory",
    "report": "gpucost.reporting",
    "breakeven": "gpucost.model.economics",
    "advise": "gpucost.planning.advice",
    "Plan": "gpucost.planfile",
    "load_plan": "gpucost.planfile",
    "save_plan": "gpucost.planfile",
    "plan_file": "gpucost.planning.planbuild",
    "StepProfiler": "gpucost.profiler",
    "profile_model": "gpucost.profiler",
    "probe_batch": "gpucost.profiler",
    "run_preflight": "gpucost.preflight",
}

__all__ = [
    "GpuCostError",
    "GpuSpec",
    "Plan",
    "Prediction",
    "Profile",
    "StepProfiler",
    "__version__",
    "advise",
    "all_gpus",
    "breakeven",
    "compare",
    "fit_memory",
    "get_gpu",
    "load_plan",
    "plan",
    "plan_file",
    "predict",
    "probe_batch",
    "profile_model",
    "report",
    "resolve_gpu_name",
    "run_preflight",
    "save_plan",
    "try_resolve_gpu_name",
]

if TYPE_CHECKING:
    from gpucost.catalog import GpuSpec, all_gpus, get_gpu, resolve_gpu_name, try_resolve_gpu_name
    from gpucost.errors import GpuCostError
    from gpucost.measurements import predict
    from gpucost.model.economics import breakeven
    from gpucost.model.memory import fit_memory
    from gpucost.model.perf import Prediction
    from gpucost.planfile import Plan, load_plan, save_plan
    from gpucost.planning.advice import advise
    from gpucost.planning.api import compare, plan
    from gpucost.planning.planbuild import plan_file
    from gpucost.preflight import run_preflight
    from gpucost.profile import Profile
    from gpucost.profiler import StepProfiler, probe_batch, profile_model
    from gpucost.reporting import report


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'gpucost' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
